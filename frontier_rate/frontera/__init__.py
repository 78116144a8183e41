"""The Frontera adapter: ``BACKEND = "frontier_rate.frontera.RevisitBackend"``. Translates Frontera's requests
and responses; may import ``crawl`` and everything below it, never ``scrapy``."""

from typing import Any

from frontier_rate.crawl.settings import DONT_REVISIT_KEY, WEIGHT_KEY
from frontier_rate.frontera.backend import RevisitBackend
from frontier_rate.frontera.keepalive import KeepAlive
from frontier_rate.frontera.requests import LEASE_KEY, RESULT_KEY, lease_of, pack, page_meta, page_request, unpack
from frontier_rate.renamed import resolve

__all__ = ["LEASE_KEY", "DONT_REVISIT_KEY", "KeepAlive", "RESULT_KEY", "RevisitBackend",
           "WEIGHT_KEY", "lease_of", "pack", "page_meta", "page_request", "unpack"]


RENAMED = {"DISPATCH_KEY": "LEASE_KEY"}
"""Retired names still importable (issue 61): old -> new (``frontier_rate.renamed``)."""


def __getattr__(name: str) -> Any:
    return resolve(globals(), name, RENAMED)

"""Sitemaps and feeds as requests of a Scrapy crawl: each is a page of the frontier whose
answer the frontier reads (``SignalReader``), never the spider."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy import Request

from frontier_rate.crawl.settings import WEIGHT_KEY
from frontier_rate.crawl.signal_reader import SITEMAP_KEY, SignalReader
from frontier_rate.math.dates import http_date

if TYPE_CHECKING:
    from scrapy.http import Response


def sitemap_request(url: str, weight: float) -> Request:
    """A sitemap or feed as a page of the frontier (``adapter_signals``), marked so that its
    answer is read by the frontier (``sitemap_callback``), not the spider."""
    return Request(url, meta={SITEMAP_KEY: True, WEIGHT_KEY: weight})


def sitemap_callback(reader: SignalReader) -> Callable[..., None]:
    """The callback of a sitemap or feed: its entries become claims; nothing reaches the
    spider (pages it discovers do, through the spider's ``parse``)."""

    def read_sitemap(response: Response, **kwargs: Any) -> None:
        served = http_date(response.headers.get("Date"))
        reader.read(response.url, response.body, served)

    return read_sitemap

"""The Scrapy scheduler's set-up pieces: its settings as the adapter reads them, the
stand-in scheduler that reports bad settings, and sitemap requests (split from
``frontier_rate.scrapy`` to keep that module to the request path)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.settings import SETTINGS_PRIORITIES

from frontier_rate.adapter_signals import SITEMAP_KEY, SignalReader
from frontier_rate.dates import http_date
from frontier_rate.settings import WEIGHT_KEY

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.spiders import Spider

logger = logging.getLogger("frontier_rate.scrapy")


SCRAPY_DEFAULTS = {"min_host_delay": 0.0}
"""Shared settings a namespace a Scrapy crawl creates gets where the crawl set none."""


def user_settings(settings: Any) -> Callable[[str], Any]:
    """``settings.get``, except that a ``DOWNLOAD_DELAY`` the user did not set reads as unset:
    Scrapy's default (0) is this scheduler's default too, but not an explicit value that
    would conflict with a host delay the namespace stores."""
    def get(name: str) -> Any:
        if name == "DOWNLOAD_DELAY" and \
                settings.getpriority(name) <= SETTINGS_PRIORITIES["default"]:
            return None
        return settings.get(name)

    return get


class SettingError(ValueError):
    """A ``FRONTIER_RATE_*`` (or Scrapy) setting the scheduler cannot use; the message names
    the setting and its value."""


class Refusing:
    """What ``Scheduler.from_crawler`` returns for bad settings: ``open`` raises the error
    (Scrapy's engine then closes cleanly: it has a slot for the spider), every other call is
    a no-op. Building it must not fail, or Scrapy's own clean-up masks the error."""

    def __init__(self, crawler: Crawler, error: SettingError) -> None:
        self.crawler, self.error = crawler, error

    def open(self, spider: Spider) -> None:
        logger.error("frontier-rate: %s", self.error)
        raise self.error

    def close(self, reason: str) -> None:
        pass

    def has_pending_requests(self) -> bool:
        return False

    def enqueue_request(self, request: Request) -> bool:
        return False

    def next_request(self) -> None:
        return None

    def __len__(self) -> int:
        return 0


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

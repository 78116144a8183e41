"""Sitemaps and feeds in the Frontera backend (docs/SIGNALS.md, docs/FRONTERA.md).

The Frontera side of ``adapter_signals.SignalReader`` (which both adapters share: what a
document is, how it becomes claims, the file limit, the stats). Here only what differs under
Frontera / scrapy-frontera:

- a sitemap or feed enters the frontier as a page whose stored request carries
  ``meta[SITEMAP_KEY]`` (``sitemap_request``), so each revisit of it is marked;
- its answer reaches ``RevisitBackend.page_crawled`` as any page's does (observed, so it is
  revisited at its learned rate with conditional requests) and is then read into claims
  (``FronteraSitemaps.crawled``);
- scrapy-frontera hands every response to a spider callback before the backend sees it.
  The ``KeepAlive`` extension (required anyway) gives each sitemap request, as it reaches
  the downloader, a callback and errback of its own (``route_to_frontier``) that return
  nothing, so neither the spider's ``parse`` nor its ``errback`` sees a sitemap, its 304s
  or its errors. Without ``KeepAlive`` a sitemap's answer reaches the spider's callback
  (one WARNING, stat ``frontier_rate/sitemap_to_spider``); it is read all the same.

robots.txt ``Sitemap:`` lines are not read: the backend never sees robots.txt (Scrapy's
``RobotsTxtMiddleware`` fetches it outside the frontier).
"""

from __future__ import annotations

import logging
import types
from collections.abc import Callable
from typing import Any

from frontera.core.models import Request as FrontierRequest

from frontier_rate.client.frontier_client import FrontierClient
from frontier_rate.crawl.settings import AdapterSettings
from frontier_rate.crawl.signal_reader import SITEMAP_KEY, SignalReader
from frontier_rate.detection.fingerprint import header_value
from frontier_rate.math.dates import http_date

logger = logging.getLogger(__name__)

SITEMAP_CALLBACK = "frontier_rate_sitemap"
"""Name of the callback ``route_to_frontier`` gives a sitemap request (scrapy-frontera
stores callbacks by name, as bytes, in ``meta[b"scrapy_callback"]``)."""
SITEMAP_ERRBACK = "frontier_rate_sitemap_error"


def sitemap_request(url: str, request_model: type[FrontierRequest] = FrontierRequest
                    ) -> FrontierRequest:
    """A sitemap or feed as a frontera request (as scrapy-frontera's converter builds one),
    marked ``meta[SITEMAP_KEY]`` in its Scrapy meta; ``RevisitBackend`` stores it as a page."""
    return request_model(url, method=b"GET", meta={
        b"scrapy_callback": None, b"scrapy_errback": None, b"scrapy_cb_kwargs": {},
        b"scrapy_meta": {SITEMAP_KEY: True}, b"origin_is_frontier": True})


def is_sitemap(request: Any) -> bool:
    """Whether a frontera request or response's request is a sitemap or feed of the frontier."""
    meta = getattr(request, "meta", None) or {}
    scrapy_meta = meta.get(b"scrapy_meta")
    return bool(meta.get(SITEMAP_KEY.encode())
                or (isinstance(scrapy_meta, dict) and scrapy_meta.get(SITEMAP_KEY)))


class FronteraSitemaps:
    """The sitemaps and feeds of one Frontera crawl: a ``SignalReader`` whose documents are
    pages the backend adds (``add_page(url, weight, request)``)."""

    def __init__(self, settings: AdapterSettings, client: FrontierClient,
                 add_page: Callable[[str, float, FrontierRequest], None],
                 stat: Callable[[str, int], None], clock: Callable[[], float],
                 request_model: type[FrontierRequest] = FrontierRequest) -> None:
        self._stat = stat
        self._warned_spider = False
        self.reader = SignalReader(
            settings, client,
            lambda url, weight: add_page(url, weight, sitemap_request(url, request_model)),
            stat, clock)

    def start(self) -> None:
        """Make the documents of ``FRONTIER_RATE_SITEMAPS`` pages of the frontier."""
        self.reader.start()

    def crawled(self, response: Any) -> bool:
        """Read a sitemap's 2xx answer (a frontera ``Response``) into claims; False when
        ``response`` is not a sitemap's. 304s and failures are only observed."""
        request = getattr(response, "request", None)
        if not is_sitemap(request):
            return False
        callback = (request.meta or {}).get(b"scrapy_callback", SITEMAP_CALLBACK.encode())
        if callback not in (SITEMAP_CALLBACK, SITEMAP_CALLBACK.encode()):
            self._stat("sitemap_to_spider", 1)
            if not self._warned_spider:
                self._warned_spider = True
                logger.warning("frontier-rate: the sitemap %s reached the spider's callback; "
                               "enable the KeepAlive extension (EXTENSIONS = "
                               "{'frontier_rate.frontera.KeepAlive': 500}) to keep sitemaps and "
                               "feeds from the spider", response.url)
        if 200 <= int(response.status_code) < 300:
            served = http_date(header_value(response.headers or {}, "Date"))
            body = response.body
            self.reader.read(response.url, body if isinstance(body, bytes)
                             else str(body or "").encode("utf-8"), served)
        return True


# -- the Scrapy side (KeepAlive) ---------------------------------------------------------
def _sitemap_answer(spider: Any, response: Any, **kwargs: Any) -> None:
    """Callback of a sitemap request: nothing for the spider (the backend reads it)."""
    return None


def _sitemap_error(spider: Any, failure: Any) -> None:
    """Errback of a sitemap request: a sitemap's 304 or error is the backend's, not the
    spider's (``page_crawled`` / ``request_error`` still record it)."""
    return None


_sitemap_answer.__name__ = SITEMAP_CALLBACK
_sitemap_error.__name__ = SITEMAP_ERRBACK


def route_to_frontier(request: Any, spider: Any) -> None:
    """``request_reached_downloader`` handler: give a sitemap request of the frontier its own
    callback and errback, bound to the spider (scrapy-frontera accepts only spider methods
    and converts them by name), and ``cf_store`` so that its download errors still reach
    ``request_error``. Other requests are left as they are."""
    meta = request.meta
    if not meta.get(SITEMAP_KEY) or "frontier_rate_dispatch" not in meta or spider is None:
        return
    request.callback = types.MethodType(_sitemap_answer, spider)
    request.errback = types.MethodType(_sitemap_error, spider)
    meta["cf_store"] = True

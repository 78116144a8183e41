"""``KeepAlive``: the extension that keeps a scrapy-frontera spider open while the frontier holds
pages and wakes it when the next page falls due (``EXTENSIONS = {"frontier_rate.frontera.KeepAlive": 500}``),
and the backend's way into the crawl: it installs the crawl's host politeness
(``crawl.scrapy_politeness``, the same path as the Scrapy scheduler's: robots.txt Crawl-delay,
download-slot pacing, the shared send slot taken when a request leaves).
"""

from __future__ import annotations

import logging
from typing import Any

from frontier_rate.crawl.scrapy_compat import call_later, engine_scheduler, wake_engine
from frontier_rate.crawl.scrapy_politeness import ScrapyPoliteness
from frontier_rate.frontera.backend import RevisitBackend
from frontier_rate.frontera.sitemaps import route_to_frontier

logger = logging.getLogger(__name__)


class KeepAlive:
    """Scrapy extension: keep a scrapy-frontera spider open while ``RevisitBackend`` works.

    scrapy-frontera lets the spider close as soon as its local queue is empty,
    which for a revisiting crawl is whenever nothing is due. On ``spider_idle``
    this extension asks the frontier manager whether it is ``finished``; if
    not, it raises ``DontCloseSpider`` and wakes the engine when the next page
    falls due (Scrapy would otherwise poll only every 5 s). It also keeps the
    frontier's sitemaps and feeds from the spider (``frontera_signals.route_to_frontier``).
    When the spider opens it gives the backend the crawl's politeness (``politeness``):
    without it a Frontera crawl kept no host delay at the moment requests leave (issue 61).
    Enable it with ``EXTENSIONS = {"frontier_rate.frontera.KeepAlive": 500}``.
    """

    def __init__(self, crawler: Any) -> None:
        from scrapy import signals

        self.crawler = crawler
        self._timer: Any = None
        self.politeness: ScrapyPoliteness | None = None
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_idle, signal=signals.spider_idle)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)
        # a sitemap or feed of the frontier gets its own callback: it never reaches the spider
        crawler.signals.connect(route_to_frontier, signal=signals.request_reached_downloader)

    @classmethod
    def from_crawler(cls, crawler: Any) -> KeepAlive:
        return cls(crawler)

    def _manager(self) -> Any:
        """scrapy-frontera's FrontierManager, or None."""
        scheduler = engine_scheduler(self.crawler)
        return getattr(getattr(scheduler, "frontier", None), "manager", None)

    def spider_opened(self, spider: Any) -> None:
        """Install the host politeness of the backend's frontier (started by now: scrapy-frontera
        starts it when its scheduler opens, before this signal)."""
        backend = getattr(self._manager(), "backend", None)
        if not isinstance(backend, RevisitBackend) or backend.client is None \
                or backend.frontier is None:
            logger.warning("frontier-rate: KeepAlive found no started RevisitBackend; host "
                           "delays are not kept when requests leave")
            return
        self.politeness = ScrapyPoliteness.install(
            self.crawler, backend.frontier, backend.settings, backend.clock,
            backend.client.host_delay, follow_downloader=True, outages=backend.client.breaker)
        self.politeness.on_spider_opened()  # installed from that signal: it has been sent

    def spider_idle(self, spider: Any) -> None:
        from scrapy.exceptions import DontCloseSpider

        manager = self._manager()
        backend = getattr(manager, "backend", None)
        if not isinstance(backend, RevisitBackend) or manager.finished:
            return
        if self._timer is None:
            self._timer = call_later(max(0.0, backend.seconds_to_wake()), self._wake)
        raise DontCloseSpider

    def _wake(self) -> None:
        self._timer = None
        wake_engine(self.crawler)

    def spider_closed(self, spider: Any) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


# -- request <-> page ------------------------------------------------------------------

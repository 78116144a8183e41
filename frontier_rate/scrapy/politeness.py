"""Host politeness on Scrapy's side: robots.txt Crawl-delay, and delays kept on the wire.

The frontier spaces leases by each host's delay (``FRONTIER_RATE_MIN_HOST_DELAY``,
``DOWNLOAD_DELAY``, a robots.txt Crawl-delay), and ``politeness.HostGate`` holds leases
back until a host may be fetched. Two things only Scrapy's side can do are here:

- read the Crawl-delay of every robots.txt answer that reaches the engine (Scrapy never
  applies it) and fetch robots.txt first where Scrapy's middleware does not;
- pace the host's download slot, so the gap holds between the moments requests are
  *sent* (Scrapy's ``DOWNLOAD_DELAY`` semantics; its downloader may otherwise send
  leased requests in a burst; private Scrapy internals, guarded in ``scrapy_compat``;
  docs/ARCHITECTURE.md lists them).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import Request
from scrapy.utils.defer import deferred_from_coro

from frontier_rate.crawl import scrapy_compat as compat
from frontier_rate.crawl.politeness import HostGate

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.spiders import Spider

    from frontier_rate.engine.frontier import Lease

logger = logging.getLogger(__name__)

PACE_MARGIN = 0.05
"""Seconds added to a host's delay on its download slot (see ``ScrapyPoliteness.pace``). The
slot spaces request *starts*; at the site two requests may arrive closer than they started
(the first one's connection set-up, a busy event loop writing one request late): on this
2-core VM under load the test-bed saw arrival gaps up to ~32 ms shorter than the start gaps
(the demo's politeness check failed with 10 and 25 ms). It costs 5% of a 1 s delay's rate."""


class ScrapyPoliteness:
    """robots.txt reading and download-slot pacing for one crawl (see the module docstring).

    ``set_host_delay(host, seconds)`` tells the frontier a learned Crawl-delay (the
    scheduler's client); ``clock`` is the scheduler's.
    """

    def __init__(self, crawler: Crawler, gate: HostGate, clock: Callable[[], float],
                 set_host_delay: Callable[[str, float], Any]) -> None:
        self.crawler, self.gate, self.clock = crawler, gate, clock
        self._set_host_delay = set_host_delay
        self._paced: dict[str, float] = {}
        self.closing = False

    def fetch_robots(self, dispatch: Lease) -> None:
        """Fetch the robots.txt of ``dispatch``'s host before its first page (the answer is
        read by ``learn``, as every robots.txt answer is)."""
        self.pace(dispatch.host)
        parts = urlsplit(dispatch.url)
        deferred_from_coro(self._download_robots(dispatch.host,
                                                 f"{parts.scheme}://{parts.netloc}/robots.txt"))

    async def _download_robots(self, host: str, url: str) -> None:
        try:
            request = Request(url, meta={"dont_obey_robotstxt": True}, priority=1000,
                              dont_filter=True)
            await compat.download(self.crawler, request)
            if self.crawler.stats is not None:
                self.crawler.stats.inc_value("frontier_rate/robots_fetched")
        except Exception as exc:  # a missing robots.txt must never stop the crawl
            logger.debug("robots.txt of %s not fetched: %r", host, exc)
        self.gate.robots_done(host, self.clock())
        compat.wake_engine(self.crawler)

    def learn(self, response: Response) -> None:
        """Apply the Crawl-delay of a robots.txt answer that reached the engine.

        Scrapy's ``robots_parsed`` signal (2.19) hands over a parser whose public
        interface has no Crawl-delay, so the answer itself is read.
        """
        host = urlsplit(response.url).hostname
        if not host:
            return
        delay = self.gate.learn(host, response.status, response.body, self.clock())
        if delay is not None and not self.closing:
            logger.info("robots.txt Crawl-delay %.3gs for %s", delay, host)
            self._set_host_delay(host, delay)
        self.pace(host)

    def pace(self, host: str) -> None:
        """Have Scrapy's downloader keep ``host``'s delay between request starts.

        The host's download slot gets the delay plus ``PACE_MARGIN`` and no jitter; its
        concurrency stays Scrapy's, so a slow host has several requests in flight, one
        started every delay, as with Scrapy's own scheduler (issue 60). Under AutoThrottle
        the delay is a floor under AutoThrottle's own. A host with no delay at all (no
        frontier delay, no Crawl-delay) keeps Scrapy's own slot settings
        (``DOWNLOAD_DELAY``, AutoThrottle).
        """
        delay = self.gate.delay(host)
        if delay <= 0 and host not in self._paced:
            return
        delay += PACE_MARGIN
        if compat.pace_slot(self.crawler, host, delay):
            self._paced[host] = delay

    def on_downloaded(self, response: Response, request: Request, spider: Spider) -> None:
        """``response_downloaded`` signal: put a paced slot's delay back to its floor if
        AutoThrottle just lowered it below (it may, down to ``DOWNLOAD_DELAY``)."""
        key = request.meta.get("download_slot")
        if key in self._paced:
            self.pace(key)

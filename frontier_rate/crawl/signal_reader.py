"""Sitemaps and feeds inside a crawl: found, fetched as pages, read into claims.

Shared by both adapters (no Scrapy, no Frontera, no Redis: documents in, calls to the
``FrontierClient`` out). A sitemap or feed is a page of the frontier added as a *source*
(``NewPage``'s fifth field; the engine plans it apart from the pages, docs/SIGNALS.md) and
marked with ``SITEMAP_KEY`` in its stored meta: revisited at its own learned rate, with
conditional requests, within the budget and its host's politeness. Each answer is parsed by
``signals.parse`` (safe XML, gzip and size limits) and becomes:

- claims for ``Frontier.signal_many`` (source "sitemap" or "feed"; a "hint" call of the
  client, ``calls.claim_call``): each entry's lastmod /
  updated date, placed on the frontier's clock (``server_clock_rate``, as Last-Modified);
  entries without a date are only discovered;
- for a sitemap index, its child sitemaps (up to ``sitemap_max_files`` documents a crawl);
- the document's weight as a page (``signals.sitemap_weight``: per listed page, less once
  its source is ignored for its host).

A document that cannot be read (malformed XML, a DTD or entities, past the size limit, a
gzip bomb) is a WARNING naming it and what was wrong, and the crawl goes on; dropped
entries (another host's URLs, past the URL limit, unreadable dates) are counted and the
first few named.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from frontier_rate.client.calls import claim_call
from frontier_rate.client.frontier_client import FrontierClient
from frontier_rate.crawl import signal_sources as signals
from frontier_rate.crawl.settings import AdapterSettings

logger = logging.getLogger(__name__)

SITEMAP_KEY = "frontier_rate_sitemap"
"""Request meta key marking a sitemap or feed the frontier reads (its value: True)."""


class SignalReader:
    """Sitemaps and feeds of one crawl. ``enqueue(url, weight)``: make the document a page
    of the frontier (the adapter's own intake); ``stat(name, n)``: count a stat."""

    def __init__(self, settings: AdapterSettings, client: FrontierClient,
                 enqueue: Callable[[str, float], Any], stat: Callable[[str, int], None],
                 clock: Callable[[], float]) -> None:
        self.settings, self.client = settings, client
        self._enqueue, self._stat, self.clock = enqueue, stat, clock
        self.rate = float(settings.frontier.get("server_clock_rate", 1.0) or 1.0)
        self._known: set[str] = set()
        self._warned_limit = False

    def start(self) -> None:
        """The documents of ``FRONTIER_RATE_SITEMAPS``."""
        for url in self.settings.sitemaps:
            self.add(url)

    def add(self, url: str, weight: float | None = None) -> bool:
        """Make ``url`` a sitemap page of the frontier, once per crawl, within the file limit."""
        if url in self._known:
            return False
        if len(self._known) >= self.settings.sitemap_max_files:
            if not self._warned_limit:
                self._warned_limit = True
                logger.warning("frontier-rate: more than FRONTIER_RATE_SITEMAP_MAX_FILES=%d "
                               "sitemaps and feeds; %s and later ones are not read",
                               self.settings.sitemap_max_files, url)
            self._stat("sitemap_limit", 1)
            return False
        self._known.add(url)
        self._enqueue(url, signals.unread_weight(self.settings.sitemap_weight)
                      if weight is None else weight)
        self._stat("sitemaps", 1)
        return True

    def from_robots(self, robots_url: str, body: bytes) -> None:
        """The ``Sitemap:`` lines of a robots.txt answer (``FRONTIER_RATE_SITEMAPS_FROM_ROBOTS``);
        only sitemaps on the robots.txt's own host (another host's are that host's to list)."""
        if not self.settings.sitemaps_from_robots:
            return
        host = urlsplit(robots_url).hostname
        for url in signals.robots_sitemaps(body, robots_url):
            if urlsplit(url).hostname == host:
                self.add(url)
            else:
                logger.info("frontier-rate: robots.txt %s lists a sitemap of another host (%s); "
                            "not read", robots_url, url)

    def read(self, url: str, body: bytes, served_at: float | None = None
             ) -> signals.Parsed | None:
        """Read one answer of the document at ``url`` into claims (None when unreadable).
        ``served_at``: the answer's ``Date`` (Unix seconds): each date is placed on the
        frontier's clock by its age on the server's, as ``dates.change_time`` places a
        Last-Modified; without it the clocks are taken to agree."""
        now = self.clock()
        try:
            parsed = signals.parse(body, url, now=now, max_bytes=self.settings.sitemap_max_bytes,
                                   max_urls=self.settings.sitemap_max_urls)
        except signals.SignalError as exc:
            self._stat("sitemap_errors", 1)
            logger.warning("frontier-rate: sitemap or feed not read: %s", exc)
            return None
        if parsed.dropped:
            self._stat("sitemap_dropped", parsed.dropped)
            logger.warning("frontier-rate: %d entries of %s dropped: %s", parsed.dropped, url,
                           "; ".join(parsed.warnings[:3]))
        if parsed.future:
            self._stat("sitemap_future_dates", parsed.future)
            logger.warning("frontier-rate: %s gives %d dates in the future (counted against "
                           "it as a source for its host)", url, parsed.future)
        if parsed.kind == "sitemapindex":
            for entry in parsed.entries:
                self.add(entry.url)
            return parsed
        source = "feed" if parsed.kind in ("rss", "atom") else "sitemap"
        told = [(e.url, e.changed_at if served_at is None
                 else now - (served_at - e.changed_at) / self.rate, source)
                for e in parsed.entries if e.changed_at is not None]
        discover = self.settings.sitemap_discover
        undated = [(e.url, 1.0) for e in parsed.entries if e.changed_at is None]
        if discover and undated:
            self.client.add([(u, w, None, 0) for u, w in undated])
        weight = signals.sitemap_weight(len(parsed.entries), per_page=self.settings.sitemap_weight)
        self.client.submit(claim_call(told, discover=discover, sitemap=(url, weight, source)))
        self._stat("sitemap_entries", len(parsed.entries))
        return parsed

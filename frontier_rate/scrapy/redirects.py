"""Redirect hops of a leased page, deduplicated as Scrapy's own scheduler does.

Scrapy's ``RedirectMiddleware`` hands every hop back to the scheduler as a new request.
Scrapy's scheduler passes it through the dupefilter, so a loop ``a -> b -> a`` costs two
requests: the hop back to ``a`` is a duplicate and is dropped. The hops of a page this
scheduler sent keep the lease token and the ``dont_filter`` the frontier sets, and went
past the dupefilter: before issue 60 a loop was followed to ``REDIRECT_MAX_TIMES``
(21 requests), then retried.

``RedirectHops.drop_reason`` says when a hop is dropped:

- its URL is one the chain already went through (the page's URL or an earlier hop):
  a loop, whatever the dupefilter remembers (a page leased from an earlier run never
  passed this crawl's dupefilter);
- the dupefilter has seen it, except as a hop this same page made earlier in the crawl:
  a revisit follows its page's redirect again, but a redirect to a URL another request
  of this crawl took is a duplicate, as with Scrapy's scheduler.

A retry of a hop (``RetryMiddleware``: the same request again) is no new hop. Knows
nothing of leases or Redis; the scheduler answers the dropped page's lease.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from w3lib.url import canonicalize_url

from frontier_rate.scrapy.requests import TOKEN_KEY

if TYPE_CHECKING:
    from scrapy import Request, Spider

logger = logging.getLogger(__name__)

MAX_PAGES = 10_000
"""Pages whose followed redirect targets are remembered (the oldest are forgotten)."""


class RedirectHops:
    """Which redirect hops of a leased page go on (see the module docstring).

    ``dupefilter``: the crawl's ``DUPEFILTER_CLASS`` instance, the scheduler's own;
    ``stats``: the crawler's stats collector; ``in_flight``: the scheduler's fetches in
    flight, lease token -> lease (read only).
    """

    def __init__(self, dupefilter: Any, stats: Any, in_flight: dict[str, Any]) -> None:
        self.dupefilter, self.stats, self.in_flight = dupefilter, stats, in_flight
        self._times: dict[str, int] = {}
        """flight -> the ``redirect_times`` of its chain's last request taken."""
        self._followed: dict[str, set[str]] = {}
        """page URL -> the hop URLs (canonical) its fetches followed in this crawl."""

    def continuation(self, request: Request,
                     spider: Spider | None) -> tuple[str | None, str | None]:
        """``(flight, None)`` for a redirect or retry Scrapy made from the request this
        scheduler sent as ``flight`` (it keeps the errback installed there; a spider
        copying ``response.meta`` does not), ``(flight, reason)`` for such a hop that is
        dropped (logged and counted here), ``(None, None)`` for any other request."""
        flight = request.meta.get(TOKEN_KEY)
        lease = self.in_flight.get(flight) if flight is not None else None
        if lease is None or getattr(request.errback, "frontier_rate_token", None) != flight:
            return None, None
        reason = self.drop_reason(request, lease.url, flight)
        if reason is not None:
            self.dropped(request, spider, reason)
        return flight, reason

    def drop_reason(self, request: Request, page_url: str, flight: str) -> str | None:
        """Why the continuation ``request`` of ``page_url``'s fetch ``flight`` is dropped,
        or None when it goes on (a hop that is no duplicate, or a retry)."""
        times = request.meta.get("redirect_times", 0)
        if not isinstance(times, int) or times <= self._times.get(flight, 0):
            return None  # a retry, not a new hop
        self._times[flight] = times
        hop = canonicalize_url(request.url)
        chain = list(request.meta.get("redirect_urls", ())) or [page_url]
        if hop in {canonicalize_url(url) for url in [page_url, *chain]}:
            return f"redirect loop: {' -> '.join([*chain, request.url])}"
        followed = self._followed.get(page_url)
        if followed is not None and hop in followed:
            return None  # this page's own redirect, followed again on a revisit
        if self.dupefilter.request_seen(request):
            return f"redirect to {request.url}, a URL this crawl already requested"
        if followed is None:
            if len(self._followed) >= MAX_PAGES:
                self._followed.pop(next(iter(self._followed)))
            followed = self._followed[page_url] = set()
        followed.add(hop)
        return None

    def dropped(self, request: Request, spider: Spider | None, reason: str) -> None:
        """Say that ``request`` was dropped and why: INFO, the dupefilter's own log and
        stat (``dupefilter/filtered``), and ``frontier_rate/redirects_dropped``."""
        logger.info("frontier-rate: %s dropped (%s); the page's fetch is recorded as failed",
                    request, reason)
        self.dupefilter.log(request, spider)
        self.stats.inc_value("frontier_rate/redirects_dropped")

    def forget(self, flight: str) -> None:
        """The fetch ``flight`` is over."""
        self._times.pop(flight, None)

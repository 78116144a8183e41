"""What the spider gets of each answer: ``response.meta["frontier_rate"]``, filled before
Scrapy's spider middlewares run, and the answers kept from the spider.

The scheduler records each answer to a page when Scrapy's ``response_received`` signal
fires (an observe call, or a failed one: an error status, or a 2xx that is no copy of the
page, such as a bot wall). Before the engine hands the response to its scraper (spider
middlewares, then the callback or errback), ``Delivery.before_scrape`` puts what that
call says in ``RESULT_KEY``, after waiting (without blocking the event loop) for it to
settle if it has not. Every response that reaches a spider middleware, a callback or an errback
carries it: one-off fetches (``one_off`` True) and answers that are no copy of the page
(``failed`` naming why) included. Observed 304s stop there, so no spider middleware sees
their empty bodies, and so do unchanged revisits when ``FRONTIER_RATE_UNCHANGED_TO_CALLBACK``
is False.

The hook is ``engine.scraper.enqueue_scrape`` (private API, guarded in
``crawl/scrapy_compat.py``); without it the callback wrapper does the same, after the
spider middlewares ran.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from scrapy.http import Response

from frontier_rate.client import Call, result_meta
from frontier_rate.crawl import scrapy_compat as compat
from frontier_rate.crawl.signal_reader import SITEMAP_KEY
from frontier_rate.scrapy.requests import RESULT_KEY, TOKEN_KEY

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector
    from twisted.python.failure import Failure

logger = logging.getLogger(__name__)

MAX_TRACKED = 10_000
"""Bound on per-flight bookkeeping a middleware could leave behind (results, 304 flights)."""
FIRST_ATTR = "frontier_rate_first"
"""The attribute of the scheduler's callback wrapper: is this fetch the page's first?"""
SETTING = "FRONTIER_RATE_UNCHANGED_TO_CALLBACK"


def answer_meta(call: Call | None, first: bool) -> dict[str, Any]:
    """``RESULT_KEY`` for an answer to a page: the observation (``result_meta``), or, for a
    failed call, ``changed`` False and ``failed`` naming why (``"not content: bot wall"``,
    ``"HTTP 404"``)."""
    if call is not None and call.kind == "failed":
        return failed_meta(str(call.args.get("reason") or "not recorded"), first,
                           held=call.held)
    not_modified = bool(call is not None and call.args.get("not_modified"))
    observation = call.observation if call is not None else None
    return {**result_meta(observation, not_modified=not_modified, first=first),
            "failed": None, "one_off": False}


def failed_meta(reason: str, first: bool, *, held: bool = False) -> dict[str, Any]:
    """``RESULT_KEY`` for an answer that is no copy of the page, or a failed download."""
    return {"held": held, "new": first, "changed": False, "not_modified": False,
            "estimate": None, "next_due": None, "failed": reason, "one_off": False}


def one_off_meta() -> dict[str, Any]:
    """``RESULT_KEY`` for a one-off fetch (not a page: nothing to compare it with, so the
    spider treats it as changed)."""
    return {"held": False, "new": False, "changed": True, "not_modified": False,
            "estimate": None, "next_due": None, "failed": None, "one_off": True}


class Delivery:
    """The results of the answers in flight to the spider, and the hook that settles them.

    ``unchanged_to_callback``: ``FRONTIER_RATE_UNCHANGED_TO_CALLBACK`` (None: not set, the
    default True, with one INFO line when an unchanged revisit first reaches a callback);
    ``track``: wraps a callback's output to count its items (``settling.Settling.track``);
    ``settled``: an answer kept from the spider, nothing of it goes to the pipelines."""

    def __init__(self, stats: StatsCollector, unchanged_to_callback: bool | None,
                 track: Callable[[str | None, Any], Any] = lambda flight, output: output,
                 settled: Callable[[str | None], None] = lambda flight: None) -> None:
        self.stats = stats
        self.unchanged_to_callback = unchanged_to_callback
        self._track = track
        self._settled = settled
        self.results: dict[str, Call] = {}
        self.not_modified: set[str] = set()
        self.waiting = 0
        """Answers waiting for their result before the scraper: the spider is not idle."""
        self.hooked = False
        self._told = False

    def install(self, crawler: Crawler) -> None:
        """Settle every answer before Scrapy's scraper gets it (``before_scrape``)."""
        self.hooked = compat.before_scrape(crawler, self.before_scrape)

    def recorded(self, flight: str, call: Call, *, not_modified: bool = False) -> None:
        """The call an answer to ``flight`` became; ``not_modified``: an observed 304."""
        if len(self.results) >= MAX_TRACKED:
            self.results.clear()  # answers some middleware swallowed
        self.results[flight] = call
        if not_modified:
            if len(self.not_modified) >= MAX_TRACKED:
                self.not_modified.clear()
            self.not_modified.add(flight)

    def swallow_304(self, flight: str | None) -> bool:
        """Was ``flight`` an observed 304? (Then it is forgotten: no spider sees it.)"""
        if flight not in self.not_modified:
            return False
        self.not_modified.discard(flight)  # type: ignore[arg-type]
        self.results.pop(flight, None)  # type: ignore[arg-type]
        return True

    def before_scrape(self, result: Response | Failure,
                      request: Request) -> bool | Coroutine[Any, Any, bool]:
        """Fill ``RESULT_KEY`` of a response; False keeps it from the spider; a coroutine
        when its result must be waited for. Failures without a response go on to the
        scheduler's errback wrapper."""
        if not isinstance(result, Response):
            return True
        callback = (result.request or request).callback
        first = getattr(callback, FIRST_ATTR, None)
        if first is None:  # not a page's fetch: a one-off
            result.meta[RESULT_KEY] = one_off_meta()
            return True
        return self.settle(result, first)

    def settle(self, response: Response, first: bool) -> bool | Coroutine[Any, Any, bool]:
        """The result of the answer to one page in ``RESULT_KEY``, at once when it is
        settled, else in the coroutine returned (``waiting`` counts it from now: the
        spider is not idle). False for an observed 304, and for an unchanged revisit the
        setting keeps out (never a sitemap or feed: the frontier reads those)."""
        flight = response.meta.get(TOKEN_KEY)
        if response.status == 304 and self.swallow_304(flight):
            return False
        call = self.results.pop(flight, None)
        if call is None or call.settled:
            return self._deliver(response, call, first)
        self.waiting += 1
        return self._when_settled(response, call, first)

    async def _when_settled(self, response: Response, call: Call, first: bool) -> bool:
        try:
            await compat.settled(call)
        finally:
            self.waiting -= 1
        return self._deliver(response, call, first)

    def _deliver(self, response: Response, call: Call | None, first: bool) -> bool:
        meta = response.meta[RESULT_KEY] = answer_meta(call, first)
        if first or call is None or call.kind != "observe" or meta["changed"] is not False \
                or response.meta.get(SITEMAP_KEY):  # a sitemap is read by the frontier
            return True
        if self.unchanged_to_callback is False:
            self._settled(response.meta.get(TOKEN_KEY))
            self.stats.inc_value("frontier_rate/unchanged_skipped")
            logger.debug("frontier-rate: %s unchanged: not passed to the callback (%s)",
                         response.url, SETTING)
            return False
        if self.unchanged_to_callback is None and not self._told:
            self._told = True
            logger.info("frontier-rate: unchanged revisits reach the spider's callbacks, and "
                        "what they yield reaches the item pipelines and feeds again; "
                        "%s = False keeps them out (response.meta['frontier_rate']"
                        "['changed'] tells them apart)", SETTING)
        return True

    def wrap_callback(self, callback: Callable[..., Any], first: bool) -> Callable[..., Any]:
        """The callback Scrapy calls for a page's fetch: settle the answer when the hook
        did not (then after the spider middlewares), then run the spider's.
        ``first``: the page's first fetch (``new`` in ``RESULT_KEY``).

        A coroutine that returns the spider's own output: Scrapy then treats that output
        as if the spider's callback had returned it (a sync generator stays on Scrapy's
        sync path; wrapping it in an async generator made every item an asyncio task,
        ~20% of a link-following crawl's throughput)."""

        async def frontier_rate_callback(response: Response, **kwargs: Any) -> Any:
            if RESULT_KEY not in response.meta:
                go = self.settle(response, first)
                if not (go if isinstance(go, bool) else await go):
                    return None
            output = callback(response, **kwargs)
            compat.warn_if_deferred(output, callback)
            return self._track(response.meta.get(TOKEN_KEY), output)  # counts its items

        frontier_rate_callback.frontier_rate_wraps = callback  # type: ignore[attr-defined]
        setattr(frontier_rate_callback, FIRST_ATTR, first)
        return frontier_rate_callback

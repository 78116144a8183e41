"""A crawl that opens while its Redis cannot be reached waits for it, without blocking the
event loop, for up to ``FRONTIER_RATE_OPEN_WAIT`` seconds; then it closes with one ERROR.

Found by the soak (issue 63): a crawler restarted while a Redis Cluster primary was down (a
failover takes 7-15 s) raised ``RedisUnavailable`` from ``Scheduler.open`` into Scrapy's
engine, which printed it inside three tracebacks ("Scraper close failure", a signal
handler's ``AssertionError``, "Task exception was never retrieved") and the crawler was gone.
Now ``open`` returns a Deferred (Scrapy's engine waits for one) that fires once the frontier
opened, trying again 1, 2, 4 ... at most 30 s apart (the client breaker's backoff): one
WARNING when it begins, INFO at each later try, one WARNING when Redis answered. The
scheduler's ``redis_unreachable_at`` says when it last failed, so that the crawl's shared
send slots hold its sends a while (``SendGate.hold_after_outage``). When the
wait is over, or with ``FRONTIER_RATE_OPEN_WAIT = 0``, the scheduler becomes a
``Refusing`` stand-in: the spider closes with the reason ``frontier_rate_redis_unreachable``,
the error is said last, and the crawl fails (exit code 1). A refused password or user
(``RedisAuthenticationFailed``) is said so at once: waiting does not help.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred

from frontier_rate.crawl import scrapy_compat as compat
from frontier_rate.crawl.open_retry import WAITED_FOR, OpenRetry
from frontier_rate.scrapy.refusal import Refusing
from frontier_rate.store.errors import RedisClusterError, RedisUnavailable

logger = logging.getLogger("frontier_rate.scrapy")

UNREACHABLE_REASON = "frontier_rate_redis_unreachable"
"""The close reason of a crawl whose Redis could not be reached within the wait."""


class OpenWait:
    """Tries ``open_`` again (``OpenRetry``'s tries, on the reactor's timers) until it
    succeeds or the wait is over; ``deferred`` fires (with None) either way."""

    def __init__(self, scheduler: Any, spider: Any, open_: Callable[[Any, Any], None],
                 error: RedisUnavailable | RedisClusterError, wait: float, redis_url: str | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.scheduler, self.spider, self.open_ = scheduler, spider, open_
        self.retry = OpenRetry(error, wait, redis_url, logger, clock)
        scheduler.redis_unreachable_at = self.retry.started
        self.deferred: Deferred[None] = Deferred()
        if self.retry.hopeless:  # waiting cannot help
            self._give_up()
            return
        self._later()

    def _later(self) -> None:
        compat.call_later(self.retry.delay(), self._try)

    def _try(self) -> None:
        try:
            self.open_(self.scheduler, self.spider)
        except WAITED_FOR as exc:
            if _client_opened(self.scheduler):  # not the frontier's opening: as below
                self.deferred.errback(exc)
                return
            self.scheduler.redis_unreachable_at = self.retry.clock()
            if self.retry.failed(exc):
                self._later()
            else:
                self._give_up()
            return
        except Exception as exc:  # a refusal, a bug: raised into Scrapy's engine as before
            self.deferred.errback(exc)
            return
        self.retry.answered()
        self.deferred.callback(None)

    def _give_up(self) -> None:
        Refusing.stand_in(self.scheduler, self.retry.give_up_message(),
                          UNREACHABLE_REASON).open(self.spider)
        self.deferred.callback(None)


def _client_opened(scheduler: Any) -> bool:
    """Whether the crawl's client opened its frontier (its worker runs) before the failure:
    opening again would start a second one, so only a failure to open the frontier waits."""
    client = getattr(scheduler, "client", None)
    return client is not None and client.frontier is not None


def waits_for_redis(open_: Callable[[Any, Any], None]) -> Callable[[Any, Any], Any]:
    """``Scheduler.open`` that, when Redis cannot be reached, returns the Deferred of an
    ``OpenWait`` (the scheduler's ``settings``: ``open_wait``, ``redis_url``) instead of
    raising into Scrapy's engine; a Redis Cluster that cannot serve yet likewise."""

    @functools.wraps(open_)
    def open(scheduler: Any, spider: Any) -> Deferred[None] | None:
        try:
            open_(scheduler, spider)
        except WAITED_FOR as exc:
            if _client_opened(scheduler):
                raise
            config = scheduler.settings
            return OpenWait(scheduler, spider, open_, exc, config.open_wait,
                            config.redis_url).deferred
        return None

    return open

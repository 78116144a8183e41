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

from redis.backoff import ExponentialBackoff
from twisted.internet.defer import Deferred

from frontier_rate.client.clock import REDIS_RETRY_FIRST, REDIS_RETRY_MAX
from frontier_rate.crawl import scrapy_compat as compat
from frontier_rate.scrapy.refusal import Refusing
from frontier_rate.store.errors import (
    RedisAuthenticationFailed,
    RedisClusterError,
    RedisUnavailable,
    redact_url,
    without_url,
)

logger = logging.getLogger("frontier_rate.scrapy")

UNREACHABLE_REASON = "frontier_rate_redis_unreachable"
"""The close reason of a crawl whose Redis could not be reached within the wait."""

WAITED_FOR = (RedisUnavailable, RedisClusterError)
"""What the opening waits out: Redis unreachable, or a Redis Cluster that cannot serve the
namespace's slots yet (CLUSTERDOWN while a primary is down and its replica not yet
promoted: the quick Cluster soak's crawler got it at its second try)."""

_BACKOFF = ExponentialBackoff(cap=REDIS_RETRY_MAX, base=REDIS_RETRY_FIRST)


class OpenWait:
    """Tries ``open_`` again until it succeeds or ``wait`` seconds have passed since the
    first failure (``error``); ``deferred`` fires (with None) either way."""

    def __init__(self, scheduler: Any, spider: Any, open_: Callable[[Any, Any], None],
                 error: RedisUnavailable | RedisClusterError, wait: float, redis_url: str | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.scheduler, self.spider, self.open_ = scheduler, spider, open_
        self.wait, self.url, self.clock = wait, redact_url(redis_url), clock
        self.started = scheduler.redis_unreachable_at = clock()
        self.tries = 1
        self.deferred: Deferred[None] = Deferred()
        if wait <= 0 or isinstance(error, RedisAuthenticationFailed):  # waiting cannot help
            self._give_up(error)
            return
        logger.warning("frontier-rate: Redis at %s %s when the crawl opened (%s); "
                       "trying again for up to %.0f s (FRONTIER_RATE_OPEN_WAIT)",
                       self.url, _state(error), without_url(error, self.url), wait)
        self._later()

    def _later(self) -> None:
        left = self.started + self.wait - self.clock()
        compat.call_later(max(0.0, min(_BACKOFF.compute(self.tries - 1), left)), self._try)

    def _try(self) -> None:
        self.tries += 1
        try:
            self.open_(self.scheduler, self.spider)
        except WAITED_FOR as exc:
            if _client_opened(self.scheduler):  # not the frontier's opening: as below
                self.deferred.errback(exc)
                return
            self.scheduler.redis_unreachable_at = self.clock()
            if self.clock() - self.started >= self.wait \
                    or isinstance(exc, RedisAuthenticationFailed):
                self._give_up(exc)
                return
            logger.info("frontier-rate: Redis at %s still %s after %.0f s (%s)", self.url,
                        _state(exc), self.clock() - self.started, without_url(exc, self.url))
            self._later()
            return
        except Exception as exc:  # a refusal, a bug: raised into Scrapy's engine as before
            self.deferred.errback(exc)
            return
        logger.warning("frontier-rate: Redis at %s answered after %.1f s; the crawl opens",
                       self.url, self.clock() - self.started)
        self.deferred.callback(None)

    def _give_up(self, error: RedisUnavailable | RedisClusterError) -> None:
        waited = self.clock() - self.started
        if isinstance(error, RedisAuthenticationFailed):
            message = (f"Redis at {self.url} refused this crawl's password or user when the "
                       f"crawl opened ({without_url(error, self.url)}): correct "
                       "FRONTIER_RATE_REDIS_URL; nothing was taken from the frontier")
        else:
            failed = "could not serve the frontier" if isinstance(error, RedisClusterError) \
                else "could not be reached"
            message = (f"Redis at {self.url} {failed} when the crawl opened"
                       + (f" (waited {waited:.0f} s, {self.tries} tries" if self.wait > 0
                          else " (FRONTIER_RATE_OPEN_WAIT = 0")
                       + f"; {without_url(error, self.url)}): start Redis or correct "
                       "FRONTIER_RATE_REDIS_URL; nothing was taken from the frontier")
        Refusing.stand_in(self.scheduler, message, UNREACHABLE_REASON).open(self.spider)
        self.deferred.callback(None)


def _client_opened(scheduler: Any) -> bool:
    """Whether the crawl's client opened its frontier (its worker runs) before the failure:
    opening again would start a second one, so only a failure to open the frontier waits."""
    client = getattr(scheduler, "client", None)
    return client is not None and client.frontier is not None


def _state(error: Exception) -> str:
    """What Redis was when the opening failed, for the log lines."""
    return "not serving every slot (a Redis Cluster)" if isinstance(error, RedisClusterError) \
        else "unreachable"


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

"""Opening a frontier while its Redis cannot be reached: what both adapters wait out, how far
apart they try again, and the lines they log (issue 63).

Found by the soak: a crawler restarted while a Redis Cluster primary was down (a failover
takes 7-15 s) could not open its frontier and died. The Scrapy scheduler
(``scrapy/open_wait.py``) tries again on the reactor's timers, the Frontera backend
(``frontera/backend.py``) at the calls Frontera makes of it anyway (each poll): both keep an
``OpenRetry``, which says when the next try is due and when the wait
(``FRONTIER_RATE_OPEN_WAIT``) is over. Framework-free: no reactor, no sleep.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from redis.backoff import ExponentialBackoff

from frontier_rate.client.clock import REDIS_RETRY_FIRST, REDIS_RETRY_MAX
from frontier_rate.store.errors import (
    RedisAuthenticationFailed,
    RedisClusterError,
    RedisUnavailable,
    redact_url,
    without_url,
)

WAITED_FOR = (RedisUnavailable, RedisClusterError)
"""What an opening waits out: Redis unreachable, or a Redis Cluster that cannot serve the
namespace's slots yet (CLUSTERDOWN while a primary is down and its replica not yet
promoted: the quick Cluster soak's crawler got it at its second try)."""

_BACKOFF = ExponentialBackoff(cap=REDIS_RETRY_MAX, base=REDIS_RETRY_FIRST)


class OpenRetry:
    """The tries of one opening that failed with ``error``: 1, 2, 4 ... at most
    ``REDIS_RETRY_MAX`` seconds apart, for up to ``wait`` seconds since the first failure.
    One WARNING when the wait begins (none when it cannot help: ``hopeless``), INFO at each
    later failure, one WARNING when Redis answers (``answered``)."""

    def __init__(self, error: RedisUnavailable | RedisClusterError, wait: float,
                 redis_url: str | None, logger: logging.Logger,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.wait, self.url, self.logger, self.clock = wait, redact_url(redis_url), logger, clock
        self.started = clock()
        self.tries = 1
        self.error = error
        self.hopeless = wait <= 0 or isinstance(error, RedisAuthenticationFailed)
        if not self.hopeless:
            logger.warning("frontier-rate: Redis at %s %s when the crawl opened (%s); "
                           "trying again for up to %.0f s (FRONTIER_RATE_OPEN_WAIT)",
                           self.url, state(error), without_url(error, self.url), wait)

    def delay(self) -> float:
        """Seconds from now to the next try (never past the end of the wait)."""
        left = self.started + self.wait - self.clock()
        return max(0.0, min(_BACKOFF.compute(self.tries - 1), left))

    def failed(self, error: RedisUnavailable | RedisClusterError) -> bool:
        """Another try failed with ``error``: True while the wait goes on (one INFO line),
        False once it is over or cannot help (``give_up_message`` says it)."""
        self.tries += 1
        self.error = error
        waited = self.clock() - self.started
        if waited >= self.wait or isinstance(error, RedisAuthenticationFailed):
            self.hopeless = True
            return False
        self.logger.info("frontier-rate: Redis at %s still %s after %.0f s (%s)", self.url,
                         state(error), waited, without_url(error, self.url))
        return True

    def answered(self) -> None:
        """The last try opened the frontier."""
        self.logger.warning("frontier-rate: Redis at %s answered after %.1f s; the crawl opens",
                            self.url, self.clock() - self.started)

    def give_up_message(self) -> str:
        """The ERROR line of an opening that stopped waiting: what failed, how long it
        waited, what to do (the URL without its password)."""
        error, waited = self.error, self.clock() - self.started
        if isinstance(error, RedisAuthenticationFailed):
            return (f"Redis at {self.url} refused this crawl's password or user when the "
                    f"crawl opened ({without_url(error, self.url)}): correct "
                    "FRONTIER_RATE_REDIS_URL; nothing was taken from the frontier")
        failed = "could not serve the frontier" if isinstance(error, RedisClusterError) \
            else "could not be reached"
        return (f"Redis at {self.url} {failed} when the crawl opened"
                + (f" (waited {waited:.0f} s, {self.tries} tries" if self.wait > 0
                   else " (FRONTIER_RATE_OPEN_WAIT = 0")
                + f"; {without_url(error, self.url)}): start Redis or correct "
                "FRONTIER_RATE_REDIS_URL; nothing was taken from the frontier")


def state(error: Exception) -> str:
    """What Redis was when the opening failed, for the log lines."""
    return "not serving every slot (a Redis Cluster)" if isinstance(error, RedisClusterError) \
        else "unreachable"

"""The client's circuit breaker: whether Redis is taking calls, and when to try again.

While Redis does not take calls (unreachable, refusing writes, the namespace lost: any
``RedisFault``) the client sends nothing until the next attempt, 1, 2, 4 ... at most 30 s
apart (``REDIS_RETRY_FIRST``, ``REDIS_RETRY_MAX``). The first failure is logged as a
WARNING naming what Redis answered (an ERROR for a namespace found gone), later attempts
at INFO, and the recovery with the number of results replayed; an outage that begins
within ``FLAP_WINDOW`` of the last one's end (a Cluster failover's flaps) is said at INFO,
its recovery too. At each recovery the C heap's freed pages go back to the system
(``client.heap``: a Cluster failover's slot-map readings left 3-6 MB). It is the one breaker of
every Redis outage: the client's calls and the shared send slots (``crawl.politeness``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from redis.backoff import ExponentialBackoff

from frontier_rate.client.clock import CLOCK_SLACK, REDIS_RETRY_FIRST, REDIS_RETRY_MAX
from frontier_rate.client.heap import release_freed_heap
from frontier_rate.store.errors import (
    NamespaceLost,
    RedisFault,
    RedisUnavailable,
    redact_url,
    without_url,
)

logger = logging.getLogger("frontier_rate.client.frontier_client")


FLAP_WINDOW = 30.0
"""An outage that begins within this many seconds of the last one's end is said at INFO,
its end too: on a Redis Cluster in a failover the calls to the lost primary's slots fail
while the others answer, each flap two WARNINGs before (16 in one failover of the soak)."""

_BACKOFF = ExponentialBackoff(cap=REDIS_RETRY_MAX, base=REDIS_RETRY_FIRST)
"""1, 2, 4 ... at most ``REDIS_RETRY_MAX`` seconds between attempts (redis-py's rule)."""


class Breaker:
    """Open from the first failed call until one succeeds again (``outage_since``)."""

    def __init__(self, redis_url: str | None, cap: float = REDIS_RETRY_MAX) -> None:
        self.redis_url = redis_url
        self.cap = cap
        """The longest wait between two attempts (the shared send slots ask sooner)."""
        self.outage_since: float | None = None
        self.retry_at = 0.0
        self.listeners: list[Callable[[Exception], None]] = []
        """Told of each outage's first failure (``crawl.politeness.SendGate.outage_seen``)."""
        self.backoff = REDIS_RETRY_FIRST
        self.failures = 0
        """Failed attempts in this outage: the backoff is redis-py's exponential one of it."""
        self.replayed = 0
        """Results Redis took on a retry since the outage began."""
        self.condition = "unreachable"
        """What Redis last answered (``RedisFault.condition``)."""
        self.back_at: float | None = None
        """When the last outage ended (``reset``)."""
        self.flapping = False
        """This outage began within ``FLAP_WINDOW`` of the last one's end: said at INFO."""

    def waiting(self, now: float) -> bool:
        """Open, and the next attempt not due yet (timers may fire ``CLOCK_SLACK`` early)."""
        return self.outage_since is not None and now < self.retry_at - CLOCK_SLACK

    def trip(self, exc: Exception, now: float, held: int = 0, unadded: int = 0, *,
             doing: str | None = None) -> None:
        """A call failed with ``exc``: log it, back off (``held`` results and ``unadded``
        pages wait, for the log line; ``doing``, when given, says instead what the caller
        does meanwhile, e.g. the shared send slots' local pacing)."""
        url = redact_url(self.redis_url)
        reason = without_url(exc, url)
        self.condition = getattr(exc, "condition", "failed")
        if self.outage_since is None:
            self.outage_since, self.failures, self.replayed = now, 0, 0
            for listener in self.listeners:
                try:
                    listener(exc)
                except Exception:
                    logger.exception("frontier-rate: could not tell %r of the outage", listener)
            self.backoff = min(self.cap, _BACKOFF.compute(0))
            self.flapping = self.back_at is not None and now - self.back_at < FLAP_WINDOW
            level = logging.INFO if self.flapping else logging.WARNING
            again = f" again, {now - self.back_at:.1f} s after it came back" \
                if self.flapping else ""
            if doing is not None:
                logger.log(level, "frontier-rate: Redis at %s %s%s (%s); %s, retrying in %.0f s",
                           url, self.condition if isinstance(exc, RedisFault)
                           else "unreachable", again, reason, doing, self.backoff)
            elif isinstance(exc, RedisUnavailable) or not isinstance(exc, RedisFault):
                logger.log(level, "frontier-rate: Redis at %s unreachable%s (%s); holding %d "
                           "results, retrying in %.0f s (%d new pages wait too)", url, again,
                           reason, held, self.backoff, unadded)
            else:
                logger.log(logging.ERROR if isinstance(exc, NamespaceLost) else level,
                           "frontier-rate: %s%s; holding %d results, retrying in %.0f s (%d "
                           "new pages wait too)", exc, again, held, self.backoff, unadded)
        else:
            self.failures += 1
            self.backoff = min(self.cap, _BACKOFF.compute(self.failures))
            logger.info("frontier-rate: Redis at %s still %s after %.0f s (%s); "
                        "%s, retrying in %.0f s", url, self.condition,
                        now - self.outage_since, reason,
                        doing if doing is not None else f"holding {held} results", self.backoff)
        self.retry_at = now + self.backoff

    def reset(self, now: float, done: str | None = None) -> None:
        """A call succeeded after an outage: log the recovery (``done``, when given, instead of
        the results replayed), close the breaker, and give the heap that the outage's
        allocations left free back to the system (``client.heap``)."""
        assert self.outage_since is not None
        logger.log(logging.INFO if self.flapping else logging.WARNING,
                   "frontier-rate: Redis at %s back after %.1f s; %s",
                   redact_url(self.redis_url), now - self.outage_since,
                   done if done is not None else f"replayed {self.replayed} results")
        self.outage_since, self.backoff, self.retry_at = None, REDIS_RETRY_FIRST, 0.0
        self.failures, self.back_at = 0, now
        release_freed_heap()

    def state(self, namespace: str) -> str:
        """What Redis last answered, for a sentence 'closing while Redis at URL ...'."""
        condition = self.condition
        if condition == "unreachable":
            return "is unreachable"
        if condition.startswith("refused writes: "):
            return f"refuses writes ({condition.split(': ', 1)[1]})"
        if condition == "namespace lost":
            return f"has lost namespace {namespace!r}"
        return f"fails ({condition})"

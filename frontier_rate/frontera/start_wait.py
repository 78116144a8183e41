"""The Frontera backend's start while Redis cannot be reached (issue 63): it waits for Redis
for up to ``FRONTIER_RATE_OPEN_WAIT`` seconds without blocking and without timers.

Frontera's ``FrontierManager`` calls ``frontier_start`` in its constructor, where an error is
the crawl's end in a traceback. So the backend's start goes through a ``StartWait``: a start
that fails because Redis cannot be reached (``crawl/open_retry.WAITED_FOR``) is tried again
by the calls Frontera makes anyway (``finished`` and ``get_next_requests`` at each poll,
``KeepAlive``'s idle ticks) once the next try is due (``crawl/open_retry.OpenRetry``: 1, 2,
4 ... s apart, the Scrapy scheduler's tries and lines). The requests given meanwhile are
held (``hold``) and added once it started. Past the wait, one ERROR line and ``gave_up``;
with a wait of 0, or a password Redis refuses, the ERROR line and the error at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from frontier_rate.crawl.open_retry import WAITED_FOR, OpenRetry
from frontier_rate.store.errors import RedisClusterError, RedisUnavailable

logger = logging.getLogger("frontier_rate.frontera.backend")


class StartWait:
    """Runs ``start`` now or, while Redis cannot be reached, at a later call of ``ready``.
    ``started``: whether the frontier opened before the failure (then the error was not the
    opening's and is raised); ``stat``: counts ``redis_unreachable`` when the wait is over."""

    def __init__(self, start: Callable[[], None], started: Callable[[], bool], wait: float,
                 redis_url: str | None, stat: Callable[[str], None]) -> None:
        self.start, self.started, self.stat = start, started, stat
        self.wait, self.redis_url = wait, redis_url
        self.retry: OpenRetry | None = None
        self.next_try = 0.0  # time.monotonic() of the next try
        self.held: list[tuple[list[Any], str]] = []

    def begin(self) -> None:
        """Start now, or begin waiting for Redis."""
        self.retry, self.held = None, []
        try:
            self.start()
        except WAITED_FOR as exc:
            if self.started():
                raise
            self.retry = OpenRetry(exc, self.wait, self.redis_url, logger)
            if self.retry.hopeless:
                logger.error("frontier-rate: %s", self.retry.give_up_message())
                raise
            self.next_try = time.monotonic() + self.retry.delay()

    def ready(self) -> bool:
        """Whether the backend started; while it waits, a call past the next try's time
        tries again."""
        retry = self.retry
        if retry is None:
            return True
        if retry.hopeless or time.monotonic() < self.next_try:
            return False
        try:
            self.start()
        except WAITED_FOR as exc:
            if self.started():
                raise
            self._failed(retry, exc)
            return False
        retry.answered()
        self.retry = None
        return True

    def _failed(self, retry: OpenRetry, error: RedisUnavailable | RedisClusterError) -> None:
        if retry.failed(error):
            self.next_try = time.monotonic() + retry.delay()
        else:
            logger.error("frontier-rate: %s", retry.give_up_message())
            self.stat("redis_unreachable")

    @property
    def gave_up(self) -> bool:
        """The wait is over and Redis never answered."""
        return self.retry is not None and self.retry.hopeless

    def seconds(self) -> float:
        """Seconds until the next try."""
        return max(0.0, self.next_try - time.monotonic())

    def hold(self, requests: list[Any], kind: str) -> None:
        """Keep requests given while the backend waits, to add once it started."""
        self.held.append((requests, kind))

    def take_held(self) -> list[tuple[list[Any], str]]:
        """The requests held, once (to add now)."""
        held, self.held = self.held, []
        return held

    def stop(self) -> None:
        """The backend stops before it started: the requests held are said, not dropped
        silently."""
        count = sum(len(requests) for requests, _ in self.take_held())
        if count:
            logger.warning("frontier-rate: %d requests given while Redis could not be "
                           "reached were not added to the frontier", count)
        self.retry = None

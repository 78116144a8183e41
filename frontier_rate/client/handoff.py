"""What the client's worker hands the adapter's thread: settled calls, stats and "leases
are ready", in the order they happened.

With ``post`` (the background driver) each is queued and one function, posted once, runs
them on the adapter's thread (Scrapy: ``reactor.callFromThread``; the Frontera backend on
the real clock: a queue its next call drains); it resumes at most ``SETTLE_SLICE`` waiters
per turn of the adapter's loop. Without ``post`` (inline) each runs at once.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from frontier_rate.client.calls import Call, Stat

SETTLE_SLICE = 3
"""Waiters run per turn of the adapter's loop. Each may resume a spider callback (parsing a
page, 5-12 ms): after a Redis stall a whole held batch of results settles at once, and running
all its callbacks in one turn kept the loop's timers waiting ~0.3 s. Measured with
benchmarks/scrapy_overhead.py (Redis paused 1.5 s three times, 3 crawls each): 8 per turn,
worst gaps 0.25-0.27 s; 3, 0.20-0.24 s at the same crawl rate within noise (callbacks
0.77x vs 0.79x the default scheduler's); 1 starved the callbacks behind the downloads."""


class Handoff:
    """The queue from the worker to the adapter's thread."""

    def __init__(self, post: Callable[[Callable[[], None]], None] | None, stat: Stat) -> None:
        self.post = post
        """Runs a function on the adapter's thread; None: run it at once (set to None at
        close, from when on everything runs on the closing thread)."""
        self._stat = stat
        self._lock = threading.Lock()
        self._inbox: deque[Callable[[], int | None]] = deque()
        self._posted = False

    def send(self, func: Callable[[], int | None]) -> None:
        """Run ``func`` on the adapter's thread, after what was sent before it (``func``
        returns how many waiters it ran, if any: see SETTLE_SLICE)."""
        if self.post is None:
            func()
            return
        with self._lock:
            self._inbox.append(func)
            if self._posted:
                return
            self._posted = True
        self.post(self.run)

    def run(self) -> None:
        """Run what was sent, on the adapter's thread, ``SETTLE_SLICE`` waiters per turn."""
        resumed = 0
        while True:
            with self._lock:
                if not self._inbox:
                    self._posted = False
                    return
                if resumed >= SETTLE_SLICE and self.post is not None:
                    break
                func = self._inbox.popleft()
            resumed += func() or 0
        self.post(self.run)  # the loop runs the callbacks resumed so far first

    def emit(self, name: str, value: float, *, replace: bool = False) -> None:
        """The stat ``name`` for the adapter (nothing for a zero to add)."""
        if value or replace:
            self.send(lambda: self._stat(name, value, replace))

    def settle(self, calls: list[Call]) -> int:
        """Mark ``calls`` settled and run their waiters on the adapter's thread; how many
        of them were results a retry replayed (counted as the stat ``replayed``)."""
        replayed = sum(1 for call in calls
                       if call.applied and call.held and call.kind != "host_delay")
        if replayed:
            self.emit("replayed", replayed)

        def settle(chunk: list[Call]) -> int:
            return sum(call.settle() for call in chunk)

        for i in range(0, len(calls), SETTLE_SLICE):
            self.send(lambda chunk=calls[i:i + SETTLE_SLICE]: settle(chunk))
        return replayed

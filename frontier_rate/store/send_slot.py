"""A host's next send time, shared in Redis by every process of a frontier.

The frontier spaces *leases* of a host by its delay, but a request leaves a
crawler later than its lease (after a robots.txt fetch, behind the downloader's
queue), and a crawler also sends requests the frontier never leased (robots.txt,
one-off requests). So each process kept the delay only among its own requests:
two processes on one frontier sent requests to one host 12-30 ms apart (issue 33).

``SendSlots.reserve`` is called at the moment a request is about to be sent; one
Lua call (``lua/send_slot.lua``) takes the host's next free send time and moves it
one delay on, atomically, on Redis's own clock. The caller waits until its time
without blocking anything (the Scrapy side: ``frontier_rate.scrapy.send``). Knows
nothing of any crawler framework.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from importlib import resources
from typing import Any

from frontier_rate.store.health import clock_offset

logger = logging.getLogger(__name__)

OUTAGE_PAUSE = 5.0
"""Seconds without reservations after Redis failed one (requests go on, paced locally)."""


def send_slot_key(namespace: str) -> str:
    """The hash host -> next send time (seconds, Redis's clock) of ``namespace``."""
    return f"fr:{{{namespace}}}:send"


class SendSlots:
    """Reserve the next send to a host for this process (see the module docstring).

    ``client``: a redis-py client (thread-safe: reservations are made off the event
    loop); ``clock``: a monotonic clock for the local wait.
    """

    def __init__(self, client: Any, namespace: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client, self.key, self.clock = client, send_slot_key(namespace), clock
        self.script = client.register_script(
            resources.files("frontier_rate").joinpath("lua", "send_slot.lua").read_text("utf-8"))
        self.paused_until = 0.0
        self.failures = 0
        self.offset: float | None = None
        """Redis's TIME minus this process's ``time.time()`` (``health.clock_offset``),
        measured at the first reservation and again after a failure."""

    def reserve(self, host: str, delay: float) -> float:
        """Take ``host``'s next send slot: the local ``clock`` time at which to send (now or
        later). When Redis fails, no slot is taken (the local pacing holds) and none is
        asked for during ``OUTAGE_PAUSE`` seconds; a WARNING says so once per outage."""
        start = self.clock()
        if delay <= 0 or start < self.paused_until:
            return start
        try:
            if self.offset is None:
                self.offset, _ = clock_offset(self.client, time.time)
            now = time.time() + self.offset
            wait = float(self.script(keys=[self.key], args=[host, repr(float(delay)), repr(now)]))
        except Exception as exc:  # Redis down or slow: never stop a download for it
            self.offset = None
            self.paused_until = self.clock() + OUTAGE_PAUSE
            self.failures += 1
            if self.failures == 1:
                logger.warning("frontier-rate: shared send slot of %s not taken (%r); hosts are "
                               "paced by this process alone until Redis answers", host, exc)
            return start
        if self.failures:
            logger.warning("frontier-rate: shared send slots taken again after %d failures",
                           self.failures)
            self.failures = 0
        return start + wait

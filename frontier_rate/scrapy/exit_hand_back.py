"""Leases handed back when a crawl's process exits without closing its scheduler (a double
Ctrl-C stops Scrapy's reactor at once; ``close`` never runs)."""

from __future__ import annotations

import atexit
import logging
import weakref
from collections.abc import Callable
from typing import Any, Protocol

logger = logging.getLogger("frontier_rate.scrapy")


class Abandons(Protocol):
    """What a scheduler tells at exit: ``abandon`` stops it taking answers and returns its
    client, the leases buffered or in flight without an answer, and the leases whose answers
    had not gone through the item pipelines (None: it closed already)."""

    def abandon(self) -> tuple[Any, list[Any], list[Any]] | None: ...


def hand_back_at_exit(scheduler: Abandons) -> Callable[[], None]:
    """Hand back a crawl's leases when its process exits without closing the scheduler.
    Before issue 33 those pages stayed leased for ``FRONTIER_RATE_LEASE_TIMEOUT`` (300 s)
    and the next run fetched nothing. Leases buffered or in flight without an answer go
    back at exit; answers already received are sent first (``FrontierClient.close``), then
    the pages of answers whose items had not left the item pipelines are redone
    (``settling.py``, issue 60). A process killed outright (SIGKILL, power loss) still
    leaves its leases to expire."""
    ref = weakref.ref(scheduler)

    def at_exit() -> None:
        s = ref()
        abandoned = s.abandon() if s is not None else None
        if abandoned is None:
            return
        client, unsent, unsettled = abandoned
        logger.warning("frontier-rate: the crawl stopped without closing; handing back %d "
                       "leases, and %d pages whose answers had not gone through the item "
                       "pipelines (fetched again at once, without validators)", len(unsent),
                       len(unsettled))
        try:
            client.close(unsent, unsettled=unsettled)
        except Exception as exc:  # at exit: say it, never raise
            logger.warning("frontier-rate: leases not handed back (%r); they expire after "
                           "FRONTIER_RATE_LEASE_TIMEOUT", exc)

    atexit.register(at_exit)
    return at_exit

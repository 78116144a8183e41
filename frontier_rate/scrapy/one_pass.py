"""``FRONTIER_RATE_CLOSE_AFTER = "idle"``: a run fetches each page at most once (issue 60).

"idle" ends a run once nothing is due. A page fetched in the run falls due again after its
planned interval; on a site whose pass takes longer than that (more pages than
``FRONTIER_RATE_MIN_INTERVAL`` times the host rate), something was always due and the run
never ended. So a run told to end when idle keeps the leases of pages it already fetched
(the frontier counts them as leased, not due), fetches the rest, and hands those leases
back when it closes: the pages are due at once for the next run, at their old due time.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from frontier_rate.engine.records import Lease

logger = logging.getLogger(__name__)

HELD_STAT = "frontier_rate/held_for_next_run"
"""Pages that fell due again during an "idle" run and were left for the next run."""


class OnePass:
    """Which leases an "idle" run fetches: pages it has not fetched yet in this run
    (``enabled`` False, a run without "idle": every lease)."""

    def __init__(self, stats: Any, enabled: bool) -> None:
        self.stats = stats
        self.enabled = enabled
        self._fetched: set[str] = set()
        self._held: dict[str, tuple[Lease, float]] = {}
        """url -> the lease held for the next run and when it was leased."""

    def sent(self, url: str) -> None:
        """``url`` goes out in this run (a page's first fetch or a revisit)."""
        if self.enabled:
            self._fetched.add(url)

    def keep(self, leases: list[tuple[Lease, float]]) -> list[tuple[Lease, float]]:
        """The leases to fetch; those of pages fetched in this run are held until close
        (the latest lease of a page replaces one that expired meanwhile)."""
        if not self.enabled:
            return leases
        out = []
        for lease, at in leases:
            if lease.url in self._fetched:
                if lease.url not in self._held:
                    self.stats.inc_value(HELD_STAT)
                self._held[lease.url] = (lease, at)
            else:
                out.append((lease, at))
        return out

    def held(self) -> list[Lease]:
        """The held leases, to hand back at close; says how many, once, at INFO."""
        if self._held:
            logger.info("frontier-rate: the run ends when idle (FRONTIER_RATE_CLOSE_AFTER = "
                        "'idle'): %d pages fetched in this run fell due again and are left "
                        "for the next run, due at once", len(self._held))
        held, self._held = [lease for lease, _ in self._held.values()], {}
        return held

    def lapsed(self, url: str) -> list[tuple[Lease, float]]:
        """``url``'s request was never sent (its lease lapsed while it waited, see
        ``scrapy_politeness.LeaseLapsed``): the run may fetch it yet. Returns its lease
        held meanwhile (leased again), to fetch now, if any."""
        self._fetched.discard(url)
        held = self._held.pop(url, None)
        return [held] if held is not None else []

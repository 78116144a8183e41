"""How long a crawler's event loop may hold a request between its send slot and its write,
foretold from what it measured (``LoopStalls``) and expected at its start (``StartStalls``):
``politeness.SendGate`` widens the gap it reserves after each send by that much (issue 63).
Framework-free: the adapter measures the stalls (``crawl.scrapy_politeness.StallWatch``)."""

from __future__ import annotations

from collections import deque

STALL_WINDOW = 30.0
"""Seconds an event-loop stall counts in ``LoopStalls.allowance``: a crawler's stalls come in
spells (its start, a callback yielding a long list of requests), each a few seconds long."""
STALL_CAP = 1.0
"""Seconds ``LoopStalls.allowance`` gives at most: a loop blocked longer than this is broken
(a blocking call in a callback), and a host's sends are not held back for it forever."""
START_STALL = 0.25
"""Seconds a crawler's send slots are widened by at most in its first ``START_SPAN`` seconds
(``StartStalls``), above the stalls measured before each slot."""
START_SHARE = 0.5
"""``StartStalls`` widens a host's slots by at most this share of its delay."""
START_SPAN = 3.0
"""Seconds from the spider's opening, and from its first page answer, ``StartStalls`` widens
(and between the two, for at most ``START_LIMIT`` seconds after the opening)."""
START_LIMIT = 60.0
"""Seconds after the opening ``StartStalls`` widens at most while no page has answered (a
crawl whose hosts never answer is not held to the widened gaps for ever)."""


class StartStalls:
    """The stall expected after a crawler's send slots at its start, before any is measured.

    Between a send slot and the request's write the loop turns at least once more (the
    host's first connection, the engine's start); at a crawler's start its requests can be
    held there past the send margin where nothing measured before the slot foretold it (the
    Cluster hour of 2026-12-03: two crawlers' first requests, 0.2921 s and 0.2892 s under
    0.3 s after another's). In the first ``START_SPAN`` seconds after the spider opens,
    every slot's gap is widened by ``START_STALL``, at most ``START_SHARE`` of the host's
    delay: a gap holds through a stall of up to the margin plus that much, and a host loses
    at most a third of its sends in those seconds (0.25 s on every send of the first 30 s
    cut a 4 s crawl's fetches to a third on the tests' 0.05 s host delay). The span also
    runs ``START_SPAN`` from the first page answer (``answered``): the first
    answers' callbacks (a manifest's many requests) stall the loop longest, seconds after
    the opening when robots.txt came first (the Cluster hour of 2026-12-06: 0.355 s under
    0.5 s, 7 s after the opening), and it holds until then: the first requests of a host
    (its manifest, after robots.txt) took their slots after the opening's span and before
    any page answered, unwidened (the Cluster hour of 2026-12-07: 0.2067 s under 0.5 s)."""

    def __init__(self, seconds: float = START_STALL, share: float = START_SHARE,
                 span: float = START_SPAN) -> None:
        self.seconds, self.share, self.span = seconds, share, span
        self._until: float | None = None
        self._limit = 0.0
        self._answered = False

    def start(self, now: float) -> None:
        """The spider opened at ``now``: the span begins (once)."""
        if self._until is None:
            self._until, self._limit = now + self.span, now + START_LIMIT

    def answered(self, now: float) -> None:
        """A page's answer (not robots.txt) reached the crawler at ``now``: the first one
        after the spider opened moves the span's end to ``START_SPAN`` after it, if later."""
        if self._until is None or self._answered:
            return
        self._answered = True
        self._until = max(self._until, now + self.span)

    def expected(self, delay: float, now: float) -> float:
        """Seconds to widen a slot of a host with ``delay`` taken at ``now`` by, at least."""
        if self._until is None or now >= (self._until if self._answered else self._limit):
            return 0.0
        return min(self.seconds, self.share * delay)


class LoopStalls:
    """The longest event-loop stall of this process within the last ``window`` seconds.

    A request leaves the crawler some loop iterations after its send slot lets it go (the
    download handler, the connection, the write); a callback that holds the loop meanwhile
    (a spider yielding a manifest's 180 requests: 0.1-0.8 s while eight crawlers started on
    the 2-core VM) sends it that much late, and the next process, sending at its own slot,
    comes closer than the delay (issue 63's soak: 0.23 s under 0.3 s). The adapter records
    how late a timer fired (``record``); a process adds ``allowance`` to the gap it reserves
    after its own sends, so its stalls widen the gap before the next send of any process.
    A sliding-window maximum (a deque of decreasing stalls), O(1) amortised per record.
    """

    def __init__(self, window: float = STALL_WINDOW, cap: float = STALL_CAP) -> None:
        self.window, self.cap = window, cap
        self._stalls: deque[tuple[float, float]] = deque()
        """(when, seconds) of the stalls that may still be the window's longest, longest first."""

    def record(self, seconds: float, now: float) -> None:
        """A stall of ``seconds`` (how late a timer fired) ended at ``now`` (none if <= 0)."""
        if seconds <= 0:
            return
        while self._stalls and self._stalls[-1][1] <= seconds:
            self._stalls.pop()
        self._stalls.append((now, seconds))

    def allowance(self, now: float) -> float:
        """Seconds to add to this process's reserved gap: the window's longest stall, capped."""
        while self._stalls and self._stalls[0][0] < now - self.window:
            self._stalls.popleft()
        return min(self.cap, self._stalls[0][1]) if self._stalls else 0.0


WRITE_WITHIN = 0.05
"""Seconds after a request is handed to the download handler within which its write may
still be pending (the loop turns of its connection): a stall that began by then held the
write until the stall ended (``HeldWrites``)."""
WRITE_FLOOR = 0.01
"""Stalls shorter than this are not kept by ``HeldWrites`` (a 20 ms timer is ~1 ms late
on an idle loop; such a hold is within the send margin)."""


class HeldWrites:
    """When this process's last request to a host was written at the latest, from the loop's
    stalls since it was handed to the download handler.

    A request handed over at ``handed`` is written some loop turns later; a stall that
    begins in between (a spider callback yielding a manifest's requests, a process the OS
    does not run) holds the write until it ends, and this process's next request to the
    host, sent at its slot, follows it closer than the delay: the 5-minute Cluster run of
    2026-12-07, one crawler's `/manifest.json` and next page 0.183 s apart under 0.3 s. The
    adapter holds that next request until the delay after the stall's end
    (``written_by``). The stalls are the ``StallWatch``'s: a timer late by ``seconds`` at
    ``now`` means the loop was held from ``now - seconds`` (at least) to ``now``."""

    def __init__(self, window: float = STALL_WINDOW, floor: float = WRITE_FLOOR,
                 within: float = WRITE_WITHIN) -> None:
        self.window, self.floor, self.within = window, floor, within
        self._stalls: deque[tuple[float, float]] = deque()
        """(end, seconds) of the stalls of the last ``window`` seconds, oldest first."""

    def record(self, seconds: float, now: float) -> None:
        """The loop was held ``seconds`` until ``now``."""
        if seconds >= self.floor:
            self._stalls.append((now, seconds))
        while self._stalls and self._stalls[0][0] < now - self.window:
            self._stalls.popleft()

    def written_by(self, handed: float) -> float | None:
        """The latest a request handed over at ``handed`` may have been written: the end of
        the last stall that began at most ``within`` after it and ended after it; None when
        no such stall was seen (the write was not held)."""
        for end, seconds in reversed(self._stalls):
            if end <= handed:
                return None
            if end - seconds <= handed + self.within:
                return end
        return None

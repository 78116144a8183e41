"""A host's next send time, shared in Redis by every process of a frontier (the store's part).

The frontier spaces *leases* of a host by its delay, but a request leaves a crawler later
than its lease (after a robots.txt fetch, behind the downloader's queue), and a crawler also
sends requests the frontier never leased (robots.txt, one-off requests). So each process kept
the delay only among its own requests: two processes on one frontier sent requests to one
host 12-30 ms apart (issue 33).

``SendSlots.reserve`` runs ``lua/send_slot.lua`` through the store's script runner
(``store.scripts.Scripts``) over ``Keys.send`` and ``Keys.senders``: one atomic call takes
the host's next free send time on Redis's clock and records that this process sends. It
raises whatever Redis raises; what a process does during an outage (``client.outage.Breaker``,
pacing by the number of processes last seen) is ``crawl.politeness.SendGate``'s. Knows
nothing of any crawler framework.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from typing import Any

from frontier_rate.store.keys import Keys

SENDER_WINDOW = 60.0
"""Seconds a process counts among the senders of a frontier after its last reservation."""
SENDER_SETTLE = 10.0
"""Seconds a process has been taking send slots before it counts in the turns of an outage
(``crawl.politeness.SendGate``). The others learn of a new process only at their next
reservation; one that joined just before an outage counted one process more than they
did, and its turns met theirs (issue 63's soak: 0.30 s under 0.5 s, a crawler restarted
2 s before Redis). By then every process that sends has reserved since it joined."""


def sender_id() -> str:
    """An id for this process among the senders: host name, pid and a random part (a restarted
    process with the same pid is another sender)."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Reservation:
    """A send slot taken: ``wait`` seconds until the send may leave, ``senders`` processes seen
    sending within ``SENDER_WINDOW`` for at least ``SENDER_SETTLE`` (this one included once
    it has), ``place``, this process's index among them in the order they joined (-1
    while it has not settled), and ``prior_gap``."""

    wait: float
    senders: int
    place: int
    prior_gap: float = 0.0
    """The gap the previous sender asked for after its send (its delay, widened by its loop
    stalls): how far the slots still to come may reach (``crawl.politeness.SendGate``)."""


class SendSlots:
    """Reserve the next send to a host for this process (see the module docstring).

    ``scripts``: the frontier's ``Scripts`` (thread-safe for single calls: reservations are
    made off the event loop); ``keys``: the namespace's ``Keys``.
    """

    def __init__(self, scripts: Any, keys: Keys, sender: str | None = None,
                 window: float = SENDER_WINDOW, settle: float = SENDER_SETTLE) -> None:
        self.scripts, self.keys = scripts, keys
        self.name = sender or sender_id()
        self.sender: str | None = None
        """The id in ``Keys.senders``: the time this process joined (its first call, in ms of
        Redis's clock) and ``name``, set by the first call."""
        self.window, self.settle = window, settle

    def reserve(self, host: str, delay: float, now: float, *, earliest: float | None = None,
                turn: tuple[int, int] | None = None) -> Reservation:
        """Take ``host``'s next send slot at Redis time ``now`` with ``delay`` seconds after the
        previous send (the longer of both delays holds). ``earliest``: not before it (a send
        of this process Redis did not see); ``turn``: (processes, this one's place), the
        slot moved to the start of this process's next window (lua/send_slot.lua). Both in
        the same call, so the slot recorded is the one sent at. Raises on any Redis error."""
        if earliest is None and turn is None:
            return self._call(host, delay, now)
        count, place = turn or (1, 0)
        start = now if earliest is None else earliest
        return self._call(host, delay, now, "turn", repr(float(start)), str(int(count)),
                          str(int(place)))

    def late(self, host: str, delay: float, now: float,
             reserved: float | None = None) -> Reservation:
        """A request to ``host`` leaves at Redis time ``now``, later than its slot (a busy event
        loop, a slow reservation): the host's next send counts from ``now``. With ``reserved``
        (the time of the slot it missed): when another send was reserved after that slot,
        the request takes the next free one instead (``wait`` > 0: it must not leave now)."""
        mode = ["late"] if reserved is None else ["late", repr(float(reserved))]
        return self._call(host, delay, now, *mode)

    def _call(self, host: str, delay: float, now: float, *mode: str) -> Reservation:
        if self.sender is None:
            self.sender = f"{max(0, int(now * 1000)):015d}/{self.name}"
        args = [host, repr(float(delay)), repr(float(now)), self.sender, repr(self.window),
                repr(float(self.settle)), *mode]
        keys = [self.keys.send, self.keys.senders]
        try:
            reply = self.scripts.call(self.scripts.client, "send_slot", keys, args)
        except Exception as exc:
            if not _lost(exc):
                raise
            self.scripts.load()  # Redis restarted or flushed its scripts: load and ask again
            reply = self.scripts.call(self.scripts.client, "send_slot", keys, args)
        wait, senders, place, prior = reply
        return Reservation(float(wait), max(1, int(senders)), max(-1, int(place)), float(prior))


def _lost(exc: Exception) -> bool:
    """Whether ``exc`` says Redis lost the scripts (NOSCRIPT, "Function not found")."""
    text = str(exc).lower()
    return "noscript" in text or "function not found" in text or \
        type(exc).__name__ == "NoScriptError"

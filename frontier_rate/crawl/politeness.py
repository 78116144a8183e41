"""Per-host politeness for an adapter: robots.txt Crawl-delay, a gate on each host, and the
host delay kept at the moment a request is sent, by every process of a frontier.

Where politeness lives: the frontier spaces *leases* by each host's delay (the engine,
lua/lease.lua); this module holds what an adapter adds, framework-free; and
``crawl.scrapy_politeness`` applies it to a Scrapy crawl, for the Scrapy scheduler and the
Frontera backend alike (robots.txt answers, download-slot pacing, the send hook).

A crawler may still hand a burst of leased pages for one host to its downloader, and
Scrapy never applies a robots.txt Crawl-delay itself. ``HostGate`` is the check every
leased page of the Scrapy scheduler passes before it leaves the adapter: the host has room
under its concurrency, its robots.txt is known when it must be, and its Crawl-delay has
passed since the previous send; it is also where each adapter reads a host's delay.
``SendGate`` keeps the delay between the moments requests are *sent*, across processes
(the shared send slot, ``store.send_slot``) and through Redis outages. Knows nothing of any
crawler framework; times come from the caller or an injected clock.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from frontier_rate.client.clock import CLOCK_SLACK
from frontier_rate.client.outage import Breaker
from frontier_rate.crawl.loop_stalls import LoopStalls
from frontier_rate.crawl.robots_txt import (
    DEFAULT_MAX_CRAWL_DELAY,
    REFUSALS,
    is_robots_txt,
    robots_crawl_delay,
)
from frontier_rate.store.connection import drop_idle_connections
from frontier_rate.store.health import clock_offset, kept_offset
from frontier_rate.store.send_slot import SENDER_SETTLE, SendSlots

logger = logging.getLogger(__name__)

ROBOTS_RETRY = 300.0
"""Seconds (at most; ``robots_ttl`` when shorter) before a robots.txt that answered a server
error (5xx) or could not be fetched is asked again, its host's pages held meanwhile."""
SEND_RETRY_MAX = 1.0
"""Seconds at most between two attempts of the shared send slots during an outage. With the
client's backoff (1, 2, 4 ... 30 s) a process went on sending in its own turns for up to 8 s
after Redis came back, while the others took shared slots again and never saw its sends
(issue 63's 60 s soak: 0.003 s apart under 0.5 s after a Redis restart)."""
SLOW_CALL = 0.05
"""Seconds a send-slot call may take before its answer is stale: a late send's record
carries the time read before the call, so after a slower one (a ``CLIENT PAUSE``, a loaded
machine) the record is made again (issue 63's soak: a request recorded 2.3 s before it left,
and the next one, reserved against that record, went 0.066 s after it under 0.5 s)."""
RECOVERY_PERIODS = 2
"""Rounds of turns (``senders`` delays each) after an outage during which this process's
slots keep to its own turns: the others come back within ``SEND_RETRY_MAX`` and their last
turn taken before lies at most one round ahead."""
RECORD_TRIES = 3
"""Times a late send's record is made at most (see ``SLOW_CALL``)."""
IDLE_DROP_AFTER = 30.0
"""Seconds after an outage ends when ``SendGate`` closes the Redis connections its client
holds idle (``store.connection.drop_idle_connections``): every reservation that waited on
Redis meanwhile has given its connection back by then (a call waits at most the client's
timeout, 5 s by default)."""
LAST_SENDS_KEPT = 4096
"""Hosts ``SendGate`` remembers its last send to before it forgets those sent to long ago."""
HOLD_FRACTION = 0.5
"""Share of the lease timeout within which a leased page leaves for its host, or not at all:
a lease held in an adapter's buffer, or its request waiting in the crawler's downloader (its
host's download slot, its shared send slot), for longer is dropped and expires in Redis.
Past its lease another process may lease the page again and send it too: a page fetched
twice (``tests/test_scrapy_lapsed_leases.py``: twice without this rule), and from two
processes a second fetch the host's delay was not kept for."""
SEND_BY_KEY = "frontier_rate_send_by"
"""Request meta: the moment (the adapter's clock) after which a leased page's request must not
leave (``send_by``); the send hook drops it then (``ScrapyPoliteness.before_send``)."""
LEASE_LAPSED = "LeaseLapsed"
"""The name of the exception such a dropped request fails with, as Frontera hands it to the
backend's ``request_error``."""


def send_by(leased_at: float, lease_timeout: float) -> float:
    """When a page leased at ``leased_at`` must have left (``HOLD_FRACTION``)."""
    return leased_at + HOLD_FRACTION * lease_timeout


@dataclass
class Robots:
    """What this process knows about one host's robots.txt."""

    fetched_at: float | None = None
    pending: bool = False
    crawl_delay: float | None = None
    not_robots: bool = False
    """The last answer was a refusal or a page of markup, no robots.txt (``HostGate.learn``)."""
    unavailable: str | None = None
    """Why the last robots.txt fetch gave no rules ("503", "unreachable"): the host's pages
    are held until one does (RFC 9309 2.3.1.4: a server error means complete disallow)."""
    retry_at: float | None = None


class HostGate:
    """Which leased page may leave now: per-host concurrency, robots.txt, Crawl-delay.

    ``obey_crawl_delay``: wait for a host's robots.txt before its first page
    and keep its Crawl-delay between sends. ``framework_reads_robots``: the
    crawler fetches robots.txt before a host's first request itself (Scrapy's
    ROBOTSTXT_OBEY), so the gate only asks for a refresh after ``robots_ttl``.
    """

    def __init__(self, *, per_host: int, min_delay: float, obey_crawl_delay: bool,
                 framework_reads_robots: bool, robots_ttl: float, max_crawl_delay: float,
                 agent: str) -> None:
        if not 0 <= max_crawl_delay < math.inf:
            raise ValueError(f"FRONTIER_RATE_MAX_CRAWL_DELAY={max_crawl_delay!r} must be "
                             "a finite number of seconds >= 0")
        self.per_host = max(1, per_host)
        self.min_delay = min_delay
        self.obey_crawl_delay = obey_crawl_delay
        self.framework_reads_robots = framework_reads_robots
        self.robots_ttl = robots_ttl
        self.max_crawl_delay = max_crawl_delay
        self.agent = agent
        self.robots: dict[str, Robots] = {}
        self.load: dict[str, int] = {}
        self.ready_at: dict[str, float] = {}

    def needs_robots(self, host: str, now: float) -> bool:
        """True when the caller should fetch ``host``'s robots.txt now (marks it pending)."""
        if not self.obey_crawl_delay:
            return False
        state = self.robots.setdefault(host, Robots())
        if state.fetched_at is None and self.framework_reads_robots:
            return False
        stale = state.fetched_at is None or now - state.fetched_at > self.robots_ttl \
            or (state.retry_at is not None and now >= state.retry_at)
        if stale and not state.pending:
            state.pending = True
            return True
        return False

    def robots_read(self, host: str) -> bool:
        """Whether this process has read ``host``'s robots.txt (knows its Crawl-delay)."""
        state = self.robots.get(host)
        return state is not None and state.fetched_at is not None

    def robots_done(self, host: str, now: float) -> None:
        """A robots.txt fetch ended (answered or not): the host may go on."""
        state = self.robots.setdefault(host, Robots())
        state.fetched_at, state.pending = state.fetched_at or now, False

    def learn(self, host: str, status: int, body: bytes, now: float) -> float | None:
        """Read a robots.txt answer; the host's new Crawl-delay if it changed, else None.

        A server error (5xx) holds the host's pages (``held``) and asks again in
        ``robots_retry`` seconds, keeping the Crawl-delay known; any other answer lets them
        go (a 4xx: no rules at all, as RFC 9309 says). A refusal (``REFUSALS``: 401, 403,
        429) or a 2xx page that is no robots.txt (a bot wall answering for every path,
        ``is_robots_txt``) keeps the Crawl-delay known (one WARNING): read as "no rules", a
        host that had just walled the crawler would be fetched at the frontier's own delay
        until robots.txt was asked again, a day later by default."""
        state = self.robots.setdefault(host, Robots())
        if status >= 500:
            self.unreachable(host, str(status), now)
            return None
        state.unavailable = state.retry_at = None
        walled = status in REFUSALS or (200 <= status < 300 and not is_robots_txt(body))
        if walled and state.crawl_delay is not None:
            if not state.not_robots:
                logger.warning("robots.txt of %s answered %d, a refusal or a page of markup "
                               "without a rule; its Crawl-delay of %g s is kept", host, status,
                               state.crawl_delay)
            state.fetched_at, state.not_robots = now, True
            return None
        state.not_robots = False
        delay = None
        if 200 <= status < 300:
            delay = robots_crawl_delay(body, self.agent, host, self.max_crawl_delay)
        state.fetched_at = now
        changed = delay is not None and delay != state.crawl_delay
        state.crawl_delay = delay
        return delay if changed else None

    def unreachable(self, host: str, why: str, now: float) -> None:
        """``host``'s robots.txt gave no rules (``why``: a 5xx status, "unreachable"): hold
        its pages and fetch it again in ``robots_retry`` seconds."""
        if not self.obey_crawl_delay:
            return
        state = self.robots.setdefault(host, Robots())
        if state.unavailable is None:
            logger.warning("robots.txt of %s: %s; the host's pages are held and robots.txt "
                           "is asked again every %g s", host,
                           "unreachable" if why == "unreachable" else f"server error {why}",
                           self.robots_retry)
        state.unavailable, state.retry_at = why, now + self.robots_retry
        state.fetched_at = state.fetched_at or now

    @property
    def robots_retry(self) -> float:
        return min(self.robots_ttl, ROBOTS_RETRY)

    def held(self, host: str) -> str | None:
        """Why ``host``'s pages may not be sent now (its robots.txt's server error), or None."""
        state = self.robots.get(host)
        return state.unavailable if state is not None else None

    def open(self, host: str, now: float) -> bool:
        """Whether a page of ``host`` may be sent now (room, robots known, delay passed)."""
        if self.load.get(host, 0) >= self.per_host:
            return False
        if self.obey_crawl_delay:
            state = self.robots.get(host)
            known = state is not None and state.fetched_at is not None
            if not known and not self.framework_reads_robots:
                return False
            if state is not None and state.unavailable is not None:
                return False
        return self.ready_at.get(host, 0.0) <= now + CLOCK_SLACK

    def sent(self, host: str, now: float) -> None:
        self.load[host] = self.load.get(host, 0) + 1
        robots = self.robots.get(host)
        if robots is not None and robots.crawl_delay:
            self.ready_at[host] = now + robots.crawl_delay

    def done(self, host: str) -> None:
        load = self.load.get(host, 0) - 1
        if load > 0:
            self.load[host] = load
        else:
            self.load.pop(host, None)

    def delay(self, host: str) -> float:
        """The gap ``host`` needs between requests: the frontier's minimum or its Crawl-delay."""
        robots = self.robots.get(host)
        return max(self.min_delay, (robots.crawl_delay or 0.0) if robots else 0.0)

    def longest_delay(self) -> float:
        return max([self.min_delay, *(r.crawl_delay for r in self.robots.values() if r.crawl_delay)])

    def next_ready(self, host: str, now: float) -> float | None:
        """When ``host``'s Crawl-delay ends (or its held robots.txt is asked again), if in
        the future."""
        state = self.robots.get(host)
        times = [self.ready_at.get(host, 0.0), state.retry_at if state is not None else None]
        future = [at for at in times if at is not None and at > now]
        return min(future) if future else None


class SendHeld(Exception):
    """A request to a host may not leave now, nor at a time this process can tell: it is new
    to the frontier (``store.send_slot.SENDER_SETTLE``), has no turn of its own among the
    senders, and cannot see the others' sends (Redis does not answer, or has just come back
    while the others may still send in their turns). Ask again after ``SEND_RETRY_MAX``."""


class SendGate:
    """When a request to a host may leave, kept by every process of the frontier together.

    Right before a request to a host with a delay is sent, ``reserve`` takes the host's
    shared send slot in Redis (``store.send_slot``): the request waits until no request of
    any process was sent to the host within the delay. While Redis does not answer (the one
    outage breaker, ``client.outage.Breaker``, decides when to ask again) the process cannot
    see the others' sends, so it keeps to its own turns among the ``senders`` processes it
    last saw: the shared clock is cut in windows of one delay, and this process sends only
    at the start of every ``senders``-th one (its ``place``), so each host gets at most one
    request per delay from all of them and an outage never shortens the gap (issue 63).

    Three rules make the turns meet the slots taken around them (issue 63's soak: 0.23 s and
    0.0018 s under 0.5 s without them). Slots taken in Redis before the outage are still to
    come: each process holds at most one slot a host ahead (the caller sends one request
    to a host at a time), so they all lie within ``senders`` gaps of the moment this
    process found Redis gone (a delay each, widened as much as the widest gap seen lately,
    ``widest``), and its first turn comes after that. After the outage the
    other processes come back one by one (each asks again within ``SEND_RETRY_MAX``) and
    their turns taken meanwhile are not in Redis: for ``RECOVERY_PERIODS`` rounds of turns
    after this process is back, the slot Redis gives it is its next own turn (moved there
    by the reservation itself, so the slot recorded is the one sent at), with the same view
    of who sends as during the outage. A process new to the
    frontier has no turn yet (the others do not count it): it holds its sends
    (``SendHeld``) until Redis answers and the others are back. One that found Redis
    unreachable when it opened (``hold_after_outage``) holds them for ``SENDER_SETTLE``
    seconds after: the others may still be sending in their turns, which Redis never saw.

    ``clock``: the local monotonic clock the caller waits on; ``wall``: the clock whose
    offset to Redis's TIME is measured (``health.clock_offset``), the shared clock of the
    windows. Thread-safe: reservations run off the event loop.
    """

    def __init__(self, slots: SendSlots, redis_url: str | None, *,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.slots, self.clock, self.wall = slots, clock, wall
        self.breaker = Breaker(redis_url, cap=SEND_RETRY_MAX)
        self.offset: float | None = None
        """Redis's TIME minus ``wall()``, measured at the first reservation and again after an
        outage (kept through it: the windows are on Redis's clock; and after it while the new
        measurement agrees with it and is the less exact, ``health.kept_offset``)."""
        self.offset_trip = math.inf
        """The round trip ``offset`` was measured over (its error is at most half of it)."""
        self.synced = False
        self.senders, self.place = 1, -1
        """The processes seen sending and this one's turn among them (``Reservation``); no
        turn before the first slot taken (see ``_trip``)."""
        self.joined = False
        """Whether this process has taken a shared slot yet."""
        self.last: dict[str, float] = {}
        """host -> the latest send time (Redis's clock) this process took or knows of."""
        self.outage_sends = 0
        self.outage_from: float | None = None
        """When (Redis's clock) this process found Redis gone; None outside an outage."""
        self.back_since: float | None = None
        """When (Redis's clock) this process took shared slots again after its last outage."""
        self.widest = LoopStalls()
        """The widest widening of a gap seen lately (``clock``): this process's own and the
        previous senders' (``Reservation.prior_gap``); how far the slots taken before an
        outage may reach beyond plain delays."""
        self._lock = threading.Lock()
        self._drop_idle_at: float | None = None  # ``clock`` time: see IDLE_DROP_AFTER
        self.held_until: float | None = None
        """``clock`` time before which every send is held (``hold_after_outage``)."""

    def hold_after_outage(self, failed_at: float) -> None:
        """This process found Redis unreachable at ``failed_at`` (``clock``) before it took
        any slot (a crawl that waited for Redis when it opened): hold its sends until
        ``SENDER_SETTLE`` seconds after. Redis may answer it while the other processes are
        still in their outage turns (a Redis Cluster in a failover answers for the slots of
        its other primaries), and their turns are not in Redis: the soak's quick Cluster
        form, a crawler opened 3 s into a failover, sent 0.041 s after another's turn under
        0.3 s. The others ask again within ``SEND_RETRY_MAX`` once Redis answers them and
        record their turns in Redis from then on."""
        with self._lock:
            self.held_until = failed_at + SENDER_SETTLE

    def reserve(self, host: str, delay: float, widen: float = 0.0, may_turn: bool = True) -> float:
        """The ``clock`` time at which a request to ``host`` may leave (now or later); raises
        ``SendHeld`` when this process cannot tell yet. ``widen``: seconds added to the gap
        after this send (``LoopStalls.allowance``), except in the turns of an outage and the
        rounds after it, whose windows line up across processes only on the delay itself
        (widened there, two processes' windows met: 0.062 s under 0.3 s in the short soak).
        ``may_turn=False``: ``delay`` is not the host's delay as the other processes know it (a
        robots.txt fetch before this process read the host's Crawl-delay), so its windows
        would not line up with theirs: held (``SendHeld``) through an outage and the rounds
        after it instead of sent in a turn (the short soak: 0.146 s under 0.5 s)."""
        if delay <= 0:
            return self.clock()
        with self._lock:
            if self.held_until is not None:
                if self.clock() < self.held_until:
                    raise SendHeld(host)
                self.held_until = None
            waiting = self.breaker.waiting(self.clock())
        if not waiting:
            try:
                if not self.synced:
                    measured = clock_offset(self.slots.scripts.client, self.wall)
                    kept = None if self.offset is None else (self.offset, self.offset_trip)
                    self.offset, self.offset_trip = kept_offset(kept, measured)
                    self.synced = True
                    logger.debug("frontier-rate: Redis's clock is %+.4f s from this process's "
                                 "(measured %+.4f s over a %.4f s round trip)", self.offset,
                                 *measured)
                asked, now = self.clock(), self.wall() + (self.offset or 0.0)
                if (self.place < 0 or not may_turn) and self._settling(now, delay):
                    raise SendHeld(host)
                with self._lock:
                    # back from an outage (this call ends it) or settling: keep to the turns,
                    # after this process's own last send, which Redis may not have seen
                    turns = self.breaker.outage_since is not None or self._settling(now, delay)
                    last = self.last.get(host)
                    turn = (self.senders, self.place) if turns and self.place >= 0 else None
                # the slot moved to the turn is recorded in the same call: before, Redis
                # recorded the slot it gave and the move was stamped after, and a process
                # reserving in between counted from the slot not sent at (the cluster soak:
                # 0.17 s under 0.3 s after an 8 s CLIENT PAUSE)
                taken = self.slots.reserve(host, delay if turn else delay + widen, now,
                                           turn=turn,
                                           earliest=None if last is None else last + delay)
            except SendHeld:
                raise
            except Exception as exc:  # Redis down or slow: never stop a download for it
                with self._lock:
                    self._trip(exc)
            else:
                at = now + taken.wait
                with self._lock:
                    self.joined = True
                    if self.breaker.outage_since is not None:
                        self.breaker.reset(self.clock(), f"shared send slots taken again ("
                                                  f"{self.outage_sends} sends in turns)")
                        self.outage_sends = 0
                        self.back_since = now
                        self._drop_idle_at = self.clock() + IDLE_DROP_AFTER
                    drop = self._drop_idle_at is not None and self.clock() >= self._drop_idle_at
                    if drop:
                        self._drop_idle_at = None
                    self.outage_from = None
                    if not self._settling(now, delay):  # the view kept as the others have it
                        self.senders, self.place = taken.senders, taken.place
                    self.last[host] = max(self.last.get(host, 0.0), at)
                    seen = self.clock()
                    self.widest.record(taken.prior_gap - delay, seen)
                    self.widest.record(0.0 if turn else widen, seen)
                    if len(self.last) > LAST_SENDS_KEPT:
                        self._forget_before(now - 2 * DEFAULT_MAX_CRAWL_DELAY)
                if drop:  # the reservations that waited on Redis held a connection each
                    self._drop_idle_connections()
                # on the clock read with ``now``: a slow call leaves the slot in the past (the
                # caller finds it late), never moved by the call's length. Before, two
                # requests whose calls Redis answered together (CLIENT PAUSE, a loaded
                # machine) both went at once (issue 63's soak: 0.6 ms apart under 0.5 s)
                return asked + (at - now)
        with self._lock:
            return self._own_turn(host, delay, may_turn)

    def _drop_idle_connections(self) -> None:
        """``IDLE_DROP_AFTER`` seconds after an outage: close the connections the reservations
        that waited on Redis opened (``store.connection.drop_idle_connections``); never
        fails a reservation."""
        try:
            drop_idle_connections(self.slots.scripts.client)
        except Exception:  # a client that cannot: its connections stay, as before
            logger.debug("frontier-rate: could not close the idle Redis connections",
                         exc_info=True)

    def outage_seen(self, exc: Exception) -> None:
        """Another part of this process (the frontier client) found Redis gone: keep to the
        turns as if this gate had found it. A gate that made no call while Redis was down
        took, once it was back, the slot after the last one Redis stored, which another
        process may have used for an outage turn Redis never saw (the short soak: 0.19 s
        under 0.5 s, 0.22 s after a Redis restart)."""
        with self._lock:
            if self.breaker.outage_since is None:
                self._trip(exc)

    def _trip(self, exc: Exception) -> None:
        """Redis failed with ``exc``: an outage from now on, if not one already (hold
        ``_lock``)."""
        self.synced = False
        if not self.joined and self.held_until is None:
            # as one that found Redis unreachable at open (``hold_after_outage``): a crawler
            # whose open Redis answered and whose first slot it did not (a Cluster failover
            # of the primary holding the slots) paced each host alone, beside the others'
            # turns, and sent in the first slot Redis gave while they were still in them
            self.held_until = self.clock() + SENDER_SETTLE
        if self.outage_from is None:
            self.outage_from = self.wall() + (self.offset or 0.0)
        self.breaker.trip(exc, self.clock(), doing=(
            f"the shared send slots are not taken: each host gets this process's "
            f"turns among the {self.senders} seen sending"))

    def _settling(self, now: float, delay: float) -> bool:
        """Whether the others may still send in their outage turns (``RECOVERY_PERIODS``)."""
        return self.back_since is not None and \
            now < self.back_since + RECOVERY_PERIODS * max(1, self.senders) * delay

    def retake(self, host: str, delay: float, slot: float,
               widen: float = 0.0, may_turn: bool = True) -> float | None:
        """A request to ``host`` could not leave at its slot (``slot``, on ``clock``): None when
        it may leave now (recorded as sent now: the next send counts from it), else the
        ``clock`` time of the next free slot, taken because another send was reserved after
        the missed one (the request must wait: sent now, it would come closer than the delay
        before that one). During an outage: the next of this process's own turns (or
        ``SendHeld``). ``widen`` and ``may_turn`` as for ``reserve``."""
        if self.breaker.outage_since is not None or not self.synced:
            with self._lock:
                return self._own_turn(host, delay, may_turn)
        reserved = None
        for _ in range(RECORD_TRIES):
            asked, now = self.clock(), self.wall() + (self.offset or 0.0)
            if reserved is None:
                reserved = now - (asked - slot)
            try:
                taken = self.slots.late(host, delay + widen, now, reserved=reserved)
            except Exception as exc:  # the next reservation trips the breaker if Redis is gone
                logger.debug("late send of %s not recorded: %r", host, exc)
                return None
            if taken.wait > 0 or self.clock() - asked <= SLOW_CALL:
                break
            reserved = now  # recorded as sent at ``now``, already past: record it again
        at = now + taken.wait
        with self._lock:
            self.last[host] = max(self.last.get(host, 0.0), at)
        return None if taken.wait <= 0 else asked + taken.wait

    def _forget_before(self, moment: float) -> None:
        """Drop the hosts last sent to before ``moment`` (longer ago than any delay)."""
        self.last = {host: at for host, at in self.last.items() if at >= moment}

    def _own_turn(self, host: str, delay: float, may_turn: bool = True) -> float:
        """The next start of one of this process's windows, a delay after the host's last
        known send (see the class docstring), on the local clock."""
        if self.place < 0 or not may_turn:  # new to the frontier: no turn of its own among the
            raise SendHeld(host)  # others'; or a delay they do not share: no window lines up
        start = self.clock()
        now = self.wall() + (self.offset or 0.0)
        earliest = max(now, self.last.get(host, -math.inf) + delay)
        if self.outage_from is not None:  # after the slots the others took before the outage,
            # each followed by a gap its process may have widened (``widest``)
            widened = self.widest.allowance(self.clock())
            earliest = max(earliest, self.outage_from + max(1, self.senders) * (delay + widened))
        at = self._turn(earliest, delay)
        self.last[host] = at
        self.outage_sends += 1
        return start + (at - now)

    def _turn(self, earliest: float, delay: float) -> float:
        """The start of this process's first window at or after ``earliest`` (Redis's
        clock): one window of ``delay`` in every ``senders``, this process's at ``place``."""
        count, place = max(1, self.senders), min(self.place, max(1, self.senders) - 1)
        if count <= 1:
            return earliest
        period = count * delay
        turn = math.ceil((earliest - place * delay) / period - 1e-9)
        return turn * period + place * delay

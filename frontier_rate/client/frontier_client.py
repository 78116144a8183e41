"""The one client of a ``Frontier`` both crawler adapters use; knows no crawler framework.

An adapter queues typed calls (``add``, ``observe``, ``failed``, ``host_delay``)
in an ordered *outbox*, asks for leases, and takes the leases that came back.
This class sends the outbox to Redis in order and in batches, keeps the
circuit breaker, holds calls through an outage (and appends them to the outage's
journal, a spool file a crawler killed meanwhile leaves behind), writes the spool when
it closes while Redis is down, replays the spool when it opens, and hands unsent
leases back at close. Two drivers run the same steps:

- background (``post`` given): one worker thread owns the ``Frontier`` and
  makes every Redis round trip; the adapter's thread only appends to the
  outbox and takes leases, so it never waits on Redis except in ``open`` and
  ``close``. Results for the adapter's thread (settled calls, stats, "leases
  are ready") go through ``post``, which runs a function on that thread
  (Scrapy: ``reactor.callFromThread``; the Frontera backend on the real clock:
  a queue its next call drains).
- inline (no ``post``): each call runs the steps in the caller's thread (the
  Frontera backend with an injected clock: a virtual clock stays exact).

Guarantees (docs/RELIABILITY.md): calls reach Redis in the order they were
made; while Redis does not take them (unreachable, refusing writes, the
namespace lost: any ``RedisFault``) nothing is sent before the next attempt (1,
2, 4 ... at most 30 s apart) and no lease is taken until every held result is
in; ``observe`` / ``failed`` are accepted once per lease token, so a call
repeated after a timeout is never counted twice; whatever Redis answered, what
it has not taken when the client closes goes to the spool.
"""
from __future__ import annotations

import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from frontier_rate.client.calls import Call, NewPage, Stat, result_meta, status_reason
from frontier_rate.client.clock import CLOCK_SLACK
from frontier_rate.client.handoff import SETTLE_SLICE, Handoff
from frontier_rate.client.outage import Breaker
from frontier_rate.client.sending import Sender
from frontier_rate.client.spool import OutageJournal, OutboxSpool
from frontier_rate.renamed import resolve
from frontier_rate.store.errors import RedisFault

if TYPE_CHECKING:
    from frontier_rate.engine.frontier import Frontier, Lease

logger = logging.getLogger(__name__)

__all__ = ["SETTLE_SLICE", "Call", "FrontierClient", "NewPage", "Stat", "status_reason",
           "result_meta"]

OBSERVE_CALL = 256
"""Observations sent per ``observe_many`` call (the engine splits each into per-shard
script calls: ``results.OBSERVE_BATCH``)."""
ADD_BATCH = 512
"""Pages sent per ``add_many`` call (a backlog after an outage goes in several)."""
WAKE_LIMIT = 1.0
"""Longest sleep (seconds) between lease polls while pages wait."""
MIN_WAKE = 0.05
"""Shortest sleep between lease polls when nothing was due."""
WORKER_THREAD = "frontier-rate-io"
"""The name of the worker thread a background client runs its Redis calls on."""
SETTLE_WAIT = 0.1
"""Seconds settles wait (from the first of them) to go as one ``settle_many``: a busy crawl
sends at most ten settle calls per shard a second, not one per round of observations, and
a page due again soon after its answer is settled before it is leased."""
JOURNAL_EVERY = 1.0
"""Seconds between writes of the calls held through an outage to its journal
(``spool.OutageJournal``): a crawler killed in an outage loses at most the last second's."""
MAX_SETTLES = 100_000
"""Settles held while Redis is away; the oldest beyond are dropped (their pages' next fetch
is then unconditional: ``Frontier.settle_many``)."""
SWITCH_INTERVAL = 0.001
"""GIL switch interval (s) while a background client runs. After each Redis reply the worker
waits for the GIL; at Python's default 5 ms that wait, once per round trip, was most of the
worker's time in a busy crawl (``sys.setswitchinterval``; restored at close)."""


class FrontierClient:
    """Ordered outbox, breaker, spool and lease prefetch around one ``Frontier``.

    Its parts: ``outage.Breaker`` (when to try Redis again), ``sending.Sender`` (a batch of
    calls to the frontier, and what Redis took of it), ``handoff.Handoff`` (what goes back
    to the adapter's thread) and ``spool`` (the calls Redis has not taken at close).
    """

    def __init__(self, open_frontier: Callable[[], Frontier], *, redis_url: str | None,
                 spool_dir: str, stat: Stat, clock: Callable[[], float] = time.time,
                 post: Callable[[Callable[[], None]], None] | None = None,
                 on_ready: Callable[[], None] | None = None, batch: int = 16,
                 log_interval: float = 60.0) -> None:
        self._open_frontier = open_frontier
        self.redis_url = redis_url
        self.spool_dir = spool_dir
        self._stat = stat
        self.clock = clock
        self._ready: Callable[[], None] = on_ready or (lambda: None)
        """Runs on the adapter's thread when leases are ready (or Redis is back or down)."""
        self.batch = max(1, batch)
        self.log_interval = log_interval
        self.frontier: Frontier | None = None
        self.namespace = ""
        self._lock = threading.Condition()
        self._outbox: deque[Call] = deque()
        self._leases: deque[tuple[Lease, float]] = deque()
        self._settles: deque[Lease] = deque(maxlen=MAX_SETTLES)
        self._settle_by = float("inf")  # when the oldest waiting settle is sent at the latest
        self._want = 0
        self._next_poll = 0.0
        self.next_due: float | None = None
        """When the next page falls due (``Frontier.next_due_time``), as last read."""
        self.next_call: float | None = None
        """When a lease call may next get a page (``Frontier.next_call_time``), as last read."""
        self.breaker = Breaker(redis_url)
        self.handoff = Handoff(post, stat)
        self.sender = Sender(self.handoff.emit)
        self._next_summary = 0.0
        self._thread: threading.Thread | None = None
        self._journal: OutageJournal | None = None
        self._journal_at = 0.0  # when the held calls were last written to it
        self._journal_warned = False  # its write failed this outage (said once)
        self._stopping = False
        self._switch_interval: float | None = None
        self._lease_rounds = 0  # lease rounds the worker finished (wait_for_lease_round)
        self.known_pages = 0
        """Pages the frontier holds: read at open and in each summary, plus pages added."""

    # -- adapter's thread ------------------------------------------------------------
    def open(self) -> None:
        """Connect, replay the spool and send it (may block: the one wait at start)."""
        self.frontier = self._open_frontier()
        self.namespace = str(self.frontier.namespace)
        self._journal = OutageJournal(self.spool_dir, self.namespace)
        self._next_summary = self.clock() + self.log_interval
        self._outbox.extend(self._spool().replay())
        self._step(force=True, lease=False)
        if self.outage_since is None:
            try:
                self.next_due = self.next_call = self.frontier.next_due_time()
                self.known_pages = int(self.frontier.stats()["pages"])
            except RedisFault as exc:
                self._down(exc)
        if self.handoff.post is not None:
            self._switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(min(self._switch_interval, SWITCH_INTERVAL))
            self._thread = threading.Thread(target=self._run, name=WORKER_THREAD,
                                            daemon=True)
            self._thread.start()

    def close(self, unsent: list[Lease], *, close_frontier: bool = True,
              unsettled: list[Lease] | None = None) -> None:
        """Last attempt to send, hand back ``unsent`` leases, spool what Redis did not take.
        ``unsettled``: leases whose answers the crawler could not finish with (a forced
        stop); after the answers are sent, their pages are redone (``Frontier.unsettle_many``)."""
        if self._thread is not None:
            with self._lock:
                self._stopping = True
                self._lock.notify_all()
            self._thread.join()
            self._thread = None
        if self._switch_interval is not None:
            sys.setswitchinterval(self._switch_interval)
            self._switch_interval = None
        self.handoff.post = None  # from here on everything runs on this thread
        self.handoff.run()
        if self.frontier is None:
            return
        try:
            self._step(force=True, lease=False)
        except Exception as exc:  # a bug: what Redis has not taken still goes to the spool
            logger.exception("frontier-rate: unexpected error sending the last calls")
            self._down(exc)
        unsent = unsent + [lease for lease, _ in self._leases]
        self._leases.clear()
        if self._outbox:  # whatever Redis answered: the next crawl replays it
            saved = self._spool().save(list(self._outbox), self.breaker.state(self.namespace),
                                       self._frontier.lease_timeout)
            if saved:
                self._outbox.clear()
                self._drop_journal()
        if self.outage_since is None:
            self._release(unsent)
            self._unsettle(unsettled or [])
            self._log_summary()
        elif unsent:
            logger.info("frontier-rate: %d leases not sent to the crawler are not handed back "
                        "(Redis %s); they expire after %.0f s", len(unsent),
                        self.breaker.condition, self._frontier.lease_timeout)
        if unsettled and self.outage_since is not None:
            logger.warning("frontier-rate: %d pages whose answers the crawler did not finish "
                           "with are not marked to fetch again (Redis %s)", len(unsettled),
                           self.breaker.condition)
        if close_frontier:
            self.frontier.close()

    def submit(self, call: Call) -> Call:
        """Queue ``call`` behind the ones before it; sent in order."""
        with self._lock:
            if self.outage_since is not None:
                call.held = True
            self._outbox.append(call)
            if self.handoff.post is not None:
                self._lock.notify()
        if call.held:
            self.breaker.replayed += self.handoff.settle([call])
        if self.handoff.post is None:
            self._step(lease=False)
        return call

    def add(self, pages: list[NewPage]) -> Call:
        return self.submit(Call("add", pages=list(pages)))

    def observe(self, lease: Lease, args: dict[str, Any]) -> Call:
        return self.submit(Call("observe", lease, dict(args)))

    def failed(self, lease: Lease, reason: str, status: int | None, now: float,
               park: bool = False) -> Call:
        """``Frontier.failed`` (``park``: robots.txt forbids the page)."""
        return self.submit(Call("failed", lease, {"reason": reason, "status": status,
                                                     "now": now, "park": park}))

    def settle(self, lease: Lease) -> None:
        """The adapter is done with the copy ``lease``'s observation brought (observed
        with ``settle_later``); sent after the outbox, in batches (``Frontier.settle_many``)."""
        with self._lock:
            if not self._settles:
                self._settle_by = self.clock() + SETTLE_WAIT
            self._settles.append(lease)
        if self.handoff.post is None:
            self._step(lease=False)

    def host_delay(self, host: str, seconds: float) -> Call:
        return self.submit(Call("host_delay", None, {"host": host, "seconds": seconds}))

    def want(self, n: int) -> None:
        """Keep up to ``n`` leases ready to take (fetched in the background)."""
        with self._lock:
            more = n > self._want
            self._want = max(0, n)
            if more and self.handoff.post is not None:
                self._lock.notify()

    def poll(self) -> None:
        """Inline driver: send the outbox and lease if due (background: wake the worker)."""
        if self.handoff.post is None:
            self._step()
        else:
            with self._lock:
                self._next_poll = 0.0
                self._lock.notify()

    def wait_for_lease_round(self, timeout: float) -> None:
        """Background driver: wait until the worker has sent the outbox and finished two
        lease rounds begun after this call, or leases are ready, or ``timeout`` s passed.

        For an adapter's first call only (the one wait besides ``open``): Frontera's
        scheduler ends a crawl whose first poll finds nothing, even while its seeds are
        still on their way to Redis. Two rounds, because one may have begun before the
        outbox held the seeds. Inline: one ``poll``.
        """
        if self.handoff.post is None:
            self._step()
            return
        deadline = time.monotonic() + timeout
        with self._lock:
            goal = self._lease_rounds + 2
            while not self._leases and (self._lease_rounds < goal or self._outbox) \
                    and not self._stopping:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._next_poll = 0.0
                self._lock.notify_all()
                self._lock.wait(min(left, 0.05))

    def take(self) -> list[tuple[Lease, float]]:
        """The leases fetched so far, with the time each was leased."""
        with self._lock:
            leases = list(self._leases)
            self._leases.clear()
            if leases and self.handoff.post is not None:
                self._lock.notify()  # room for more
        return leases

    def pending(self) -> bool:
        """Calls Redis has not taken yet, or leases not yet taken."""
        return bool(self._outbox or self._leases)

    def held_results(self) -> int:
        return sum(1 for call in list(self._outbox) if call.kind in ("observe", "failed"))

    def unadded(self) -> int:
        return sum(len(call.pages) for call in list(self._outbox) if call.kind == "add")

    def ask(self, question: Callable[[Frontier], Any], default: Any) -> Any:
        """Inline driver: ``question(frontier)``, or ``default`` while Redis is unreachable.

        The background driver refuses it (the worker owns Redis); read ``next_due`` there.
        """
        if self.handoff.post is not None:
            raise RuntimeError("ask() is for the inline driver; the background one owns Redis")
        if self.outage_since is not None:
            return default
        try:
            return question(self._frontier)
        except RedisFault as exc:
            self._down(exc)
            return default

    @property
    def outage_since(self) -> float | None:
        """When Redis stopped taking calls (None: it takes them)."""
        return self.breaker.outage_since

    @property
    def retry_at(self) -> float:
        return self.breaker.retry_at

    # -- the worker (background thread, or the caller inline) ---------------------------
    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._stopping and not self._work_due():
                    self._lock.wait(self._sleep_for())
                if self._stopping:
                    return
            try:
                self._step()
            except Exception as exc:  # a bug: back off and keep everything, as for Redis faults
                if self.outage_since is None:
                    logger.exception("frontier-rate: unexpected error in the Redis worker")
                self._down(exc)

    def _work_due(self) -> bool:
        now = self.clock()
        if now >= self._next_summary and self.log_interval > 0:
            return True
        if self.outage_since is not None:
            return now >= self.retry_at - CLOCK_SLACK or self._journal_due(now)
        if self._outbox or (self._settles and now >= self._settle_by - CLOCK_SLACK):
            return True
        return len(self._leases) < self._want and now >= self._next_poll - CLOCK_SLACK

    def _sleep_for(self) -> float:
        now = self.clock()
        until = [self._next_summary if self.log_interval > 0 else now + WAKE_LIMIT]
        if self.outage_since is not None:
            until.append(self.retry_at)
            if self._journal_pending():
                until.append(self._journal_at + JOURNAL_EVERY)
        elif len(self._leases) < self._want:
            until.append(self._next_poll)  # else ``take`` or ``want`` wakes it
        if self._settles:
            until.append(self._settle_by)
        return min(WAKE_LIMIT, max(0.001, min(until) - now))

    def _step(self, *, force: bool = False, lease: bool = True) -> None:
        """Send the outbox in order, then lease if wanted; the breaker decides when."""
        now = self.clock()
        if self.log_interval > 0 and now >= self._next_summary:
            self._next_summary = now + self.log_interval
            self._log_summary()
        if self.outage_since is not None and self._journal_due(now):
            self._write_journal(now)
        if not force and self.breaker.waiting(now):
            return
        try:
            if self.outage_since is not None and not self._outbox:
                self.next_due = self._frontier.next_due_time()  # the probe
            self._send_outbox()
            if force or now >= self._settle_by - CLOCK_SLACK:
                self._send_settles()
            if self.outage_since is not None:
                self._up()
            if lease and not self._outbox and now >= self._next_poll - CLOCK_SLACK:
                self._lease(self.clock())  # after the sends: pages just added are due by now
        except RedisFault as exc:
            self._down(exc)

    def _spool(self) -> OutboxSpool:
        return OutboxSpool(self.spool_dir, self.namespace, self.redis_url, self._stat)

    @property
    def _frontier(self) -> Frontier:
        if self.frontier is None:
            raise RuntimeError("frontier-rate client used before open()")
        return self.frontier

    def _send_outbox(self) -> None:
        while True:
            with self._lock:
                if not self._outbox:
                    return
                first = self._outbox[0]
                batch = [first]
                pages = len(first.pages)
                for call in list(self._outbox)[1:]:
                    if call.kind != first.kind or first.kind not in ("add", "observe") \
                            or (first.kind == "observe" and len(batch) >= OBSERVE_CALL) \
                            or (first.kind == "add" and pages + len(call.pages) > ADD_BATCH):
                        break
                    batch.append(call)
                    pages += len(call.pages)
            added = self.sender.apply(self._frontier, batch)  # RedisFault: the batch stays
            self.known_pages += added
            if added or (first.kind == "add" and self.next_due is None):
                # pages are in the frontier, added here or by another process before (then
                # ``added`` is 0, and the ``next_due`` read at open said "nothing here"):
                # due now until the next lease round reads the real time
                self.next_due = self.next_call = self.clock()
                self._next_poll = 0.0
            with self._lock:
                for _ in batch:
                    self._outbox.popleft()
            self.breaker.replayed += self.handoff.settle(batch)

    def _send_settles(self) -> None:
        """The settles waiting, in one ``settle_many`` (kept for the next try if it fails)."""
        with self._lock:
            settles = list(self._settles)
            self._settles.clear()
            self._settle_by = float("inf")
        if not settles:
            return
        try:
            self._frontier.settle_many(settles)
        except RedisFault:
            with self._lock:
                self._settles.extendleft(reversed(settles))
                self._settle_by = self.clock()
            raise

    def _lease(self, now: float) -> None:
        with self._lock:
            room = min(self.batch, self._want - len(self._leases))
        if room <= 0:
            return
        fresh = self._frontier.next_requests(room, now=now)
        # nothing leased: when may something be? (known before a waiter hears of this round)
        due = call = None
        if not fresh:
            due = self._frontier.next_due_time()
            call = self._frontier.next_call_time(now=now, retry=WAKE_LIMIT)
        with self._lock:
            self._leases.extend((lease, now) for lease in fresh)
            if not fresh:
                self.next_due, self.next_call = due, call
            self._lease_rounds += 1
            self._lock.notify_all()  # wait_for_lease_round
        if fresh:
            self._next_poll = self.next_call = now
            self.handoff.send(self._ready)
            return
        # the engine's next-call time: the next token or due page, whichever binds
        self._next_poll = now + WAKE_LIMIT if call is None else \
            min(max(call, now + MIN_WAKE), now + WAKE_LIMIT)

    # -- the breaker -------------------------------------------------------------------
    def _down(self, exc: Exception) -> None:
        """A Redis call failed: hold the outbox, open the breaker until the next attempt.

        The first WARNING says what Redis answered (unreachable, refused writes: out of
        memory, read-only replica ...; an ERROR for a namespace found gone), later
        attempts log at INFO."""
        now = self.clock()
        self.handoff.emit("redis_errors", 1)
        with self._lock:
            calls = list(self._outbox)
        for call in calls:
            call.held = True
        if self.outage_since is None:
            self.handoff.emit("redis_outages", 1)
        self.breaker.trip(exc, now, self.held_results(), self.unadded())
        self._write_journal(now)
        self.breaker.replayed += self.handoff.settle([call for call in calls if not call.applied])
        self.handoff.send(self._ready)

    def _up(self) -> None:
        self._drop_journal()
        self._journal_warned = False
        self.breaker.reset(self.clock())
        self._next_poll = 0.0
        self.handoff.send(self._ready)

    # -- the outage journal ------------------------------------------------------------
    def _journal_pending(self) -> bool:
        """Held calls not yet in the journal (they are the outbox's tail)."""
        with self._lock:
            return bool(self._outbox) and not self._outbox[-1].journaled

    def _journal_due(self, now: float) -> bool:
        """Held calls not yet in the journal, and its last write ``JOURNAL_EVERY`` ago."""
        return self._journal_pending() and now >= self._journal_at + JOURNAL_EVERY - CLOCK_SLACK

    def _write_journal(self, now: float) -> None:
        """Append the held calls not written yet to the outage's journal (a crawler killed
        before Redis is back loses none of them); a file that cannot be written is said once
        an outage, in a WARNING, and the calls stay held as before."""
        if self._journal is None:
            return
        with self._lock:
            calls = list(self._outbox)
        self._journal_at = now
        try:
            self._journal.append(calls)
        except (OSError, ValueError) as exc:
            if not self._journal_warned:
                self._journal_warned = True
                logger.warning("frontier-rate: could not write the held calls to %s (%s); "
                               "they stay held, and a crawler killed before Redis is back "
                               "loses them", self._journal.spool.directory, exc)

    def _drop_journal(self) -> None:
        """The held calls reached Redis, or the close's spool: their journal goes."""
        if self._journal is not None:
            try:
                self._journal.drop()
            except OSError as exc:
                logger.warning("frontier-rate: could not remove the outage journal %s (%s); "
                               "the next crawl replays it, which repeats nothing",
                               self._journal.path, exc)

    # -- release, summary ---------------------------------------------------------------
    def _release(self, leases: list[Lease]) -> None:
        """Hand unsent leases back so other crawlers need not wait for them to expire."""
        if not leases:
            return
        try:
            released = self._frontier.release_many(leases)
        except RedisFault as exc:
            logger.warning("frontier-rate: could not hand back %d unsent leases (%s); they "
                           "expire after FRONTIER_RATE_LEASE_TIMEOUT", len(leases), exc)
            return
        self._stat("released", released, False)

    def _unsettle(self, leases: list[Lease]) -> None:
        """Have the pages of ``leases`` fetched again at once, unconditionally."""
        if not leases:
            return
        try:
            marked = self._frontier.unsettle_many(leases)
        except RedisFault as exc:
            logger.warning("frontier-rate: could not mark %d pages to fetch again (%s); their "
                           "next fetches are conditional", len(leases), exc)
            return
        self._stat("unsettled", marked, False)

    def _log_summary(self) -> None:
        if self.outage_since is not None:
            logger.info("frontier-rate [%s]: Redis unreachable for %.0f s; holding %d results",
                        self.namespace, self.clock() - self.outage_since, self.held_results())
            return
        try:
            summary = self._frontier.stats()
        except RedisFault as exc:
            self._down(exc)
            return
        except Exception as exc:
            logger.warning("frontier-rate stats unavailable: %r", exc)
            return
        self.known_pages = int(summary.get("pages", self.known_pages))
        threshold = summary.get("nu")
        if threshold is not None:
            self.handoff.emit("threshold", threshold, replace=True)
        if summary.get("budget_use") is not None:  # planned revisits / budget (issue 60)
            self.handoff.emit("budget_use", summary["budget_use"], replace=True)
        logger.info("frontier-rate [%s]: %s", self.namespace,
                    ", ".join(f"{key}={_short(value)}" for key, value in sorted(summary.items())))


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


RENAMED = {"failure_reason": "status_reason"}
"""Retired names still importable (issue 61): old -> new (``frontier_rate.renamed``)."""


def __getattr__(name: str) -> Any:
    return resolve(globals(), name, RENAMED)

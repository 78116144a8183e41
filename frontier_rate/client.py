"""The one client of a ``Frontier`` both crawler adapters use; knows no crawler framework.

An adapter queues typed calls (``add``, ``observe``, ``failed``, ``host_delay``)
in an ordered *outbox*, asks for leases, and takes the leases that came back.
This class sends the outbox to Redis in order and in batches, keeps the
circuit breaker, holds calls through an outage, writes the spool when it
closes while Redis is down, replays the spool when it opens, and hands unsent
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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from frontier_rate.engine import parse_url
from frontier_rate.errors import NamespaceLost, RedisFault, RedisUnavailable, redact_url
from frontier_rate.settings import REDIS_RETRY_FIRST, REDIS_RETRY_MAX
from frontier_rate.spool import Spool, call_entry, page_entry, read_entry

if TYPE_CHECKING:
    from frontier_rate.engine import Dispatch, Frontier, Observation

logger = logging.getLogger(__name__)

__all__ = ["Call", "FrontierClient", "failure_reason", "result_meta"]

OBSERVE_BATCH = 256
"""Observations sent per ``observe_many`` call."""
ADD_BATCH = 512
"""Pages sent per ``add_many`` call (a backlog after an outage goes in several)."""
WAKE_LIMIT = 1.0
"""Longest sleep (seconds) between lease polls while pages wait."""
MIN_WAKE = 0.05
"""Shortest sleep between lease polls when nothing was due."""
CLOCK_SLACK = 0.005
"""Timers may fire this early; a retry or poll that early still counts."""
SWITCH_INTERVAL = 0.001
"""GIL switch interval (s) while a background client runs. After each Redis reply the worker
waits for the GIL; at Python's default 5 ms that wait, once per round trip, was most of the
worker's time in a busy crawl (``sys.setswitchinterval``; restored at close)."""

SETTLE_SLICE = 8
"""Waiters run per turn of the adapter's loop. Each may resume a spider callback (parsing a
page, ~5 ms): after a Redis stall a whole held batch of results settles at once, and running
all its callbacks in one turn kept the loop's timers waiting ~0.3 s."""

NewPage = tuple[Any, ...]
"""A page for ``add``: (url, weight, meta[, priority]), as ``Frontier.add_many`` takes it."""

Stat = Callable[[str, float, bool], None]
"""``stat(name, value, replace)``: add ``value`` to ``frontier_rate/<name>`` (or set it)."""


def failure_reason(status: int) -> str:
    """The reason recorded for an HTTP answer that is not a fetch result (both adapters)."""
    return f"HTTP {status}"


def result_meta(observation: Observation | None, *, not_modified: bool,
                first: bool = False) -> dict[str, Any]:
    """The response meta value both adapters fill: the observation, or ``held`` while
    Redis has not taken it (every key present in both cases).

    ``new``: the page's first fetch; its copy is new, so ``changed`` is True (the
    estimator does not count a first fetch as a change)."""
    if first:
        changed: bool | None = True
    else:
        changed = None if observation is None else bool(observation.changed)
    if observation is None:
        return {"held": True, "new": first, "changed": changed, "not_modified": not_modified,
                "estimate": None, "next_due": None}
    return {"held": False, "new": first, "changed": changed, "not_modified": not_modified,
            "estimate": observation.estimate, "next_due": observation.next_due}


@dataclass(eq=False)
class Call:
    """One call for Redis, kept in the outbox until Redis has taken it.

    ``kind``: "add" (``pages``: ``NewPage`` tuples), "observe" (``args``
    are ``Frontier.observe`` keywords, ``fetched_at`` included), "failed"
    (``reason``, ``status``, ``now``), "host_delay" (``host``, ``seconds``) or "hint"
    (``hints``, ``discover``, ``sitemap``: ``FrontierClient.hint``).
    *Settled* once applied, or held by an outage; ``waiters`` run then, on the
    adapter's thread.
    """

    kind: str
    dispatch: Dispatch | None = None
    args: dict[str, Any] = field(default_factory=dict)
    pages: list[NewPage] = field(default_factory=list)
    observation: Observation | None = None
    applied: bool = False
    held: bool = False
    settled: bool = False
    waiters: list[Callable[[Call], None]] = field(default_factory=list)

    def when_settled(self, waiter: Callable[[Call], None]) -> None:
        """Run ``waiter(self)`` once settled (at once if it already is)."""
        if self.settled:
            waiter(self)
        else:
            self.waiters.append(waiter)


class FrontierClient:
    """Ordered outbox, breaker, spool and lease prefetch around one ``Frontier``."""

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
        self._post = post
        self._on_ready = on_ready
        self.batch = max(1, batch)
        self.log_interval = log_interval
        self.frontier: Frontier | None = None
        self.namespace = ""
        self._lock = threading.Condition()
        self._outbox: deque[Call] = deque()
        self._leases: deque[tuple[Dispatch, float]] = deque()
        self._want = 0
        self._next_poll = 0.0
        self.next_due: float | None = None
        self.outage_since: float | None = None
        self._retry_at = 0.0
        self._backoff = REDIS_RETRY_FIRST
        self._replayed_in_outage = 0
        self._condition = "unreachable"
        self._observed = 0
        self._added = 0
        self._next_summary = 0.0
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._inbox: deque[Callable[[], int | None]] = deque()  # for the adapter's thread
        self._inbox_posted = False
        self._switch_interval: float | None = None
        self._lease_rounds = 0  # lease rounds the worker finished (wait_for_lease_round)
        self.known_pages = 0
        """Pages the frontier holds: read at open and in each summary, plus pages added."""

    # -- adapter's thread ------------------------------------------------------------
    def open(self) -> None:
        """Connect, replay the spool and send it (may block: the one wait at start)."""
        self.frontier = self._open_frontier()
        self.namespace = str(self.frontier.namespace)
        self._next_summary = self.clock() + self.log_interval
        self._replay_spool()
        self._step(force=True, lease=False)
        if self.outage_since is None:
            try:
                self.next_due = self.frontier.next_due_time()
                self.known_pages = int(self.frontier.stats()["pages"])
            except RedisFault as exc:
                self._down(exc)
        if self._post is not None:
            self._switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(min(self._switch_interval, SWITCH_INTERVAL))
            self._thread = threading.Thread(target=self._run, name="frontier-rate-io",
                                            daemon=True)
            self._thread.start()

    def close(self, unsent: list[Dispatch], *, close_frontier: bool = True) -> None:
        """Last attempt to send, hand back ``unsent`` leases, spool what Redis did not take."""
        if self._thread is not None:
            with self._lock:
                self._stopping = True
                self._lock.notify_all()
            self._thread.join()
            self._thread = None
        if self._switch_interval is not None:
            sys.setswitchinterval(self._switch_interval)
            self._switch_interval = None
        self._post = None  # from here on everything runs on this thread
        self._run_inbox()
        if self.frontier is None:
            return
        try:
            self._step(force=True, lease=False)
        except Exception as exc:  # a bug: what Redis has not taken still goes to the spool
            logger.exception("frontier-rate: unexpected error sending the last calls")
            self._down(exc)
        unsent = unsent + [dispatch for dispatch, _ in self._leases]
        self._leases.clear()
        if self._outbox:  # whatever Redis answered: the next crawl replays it
            self._save_spool()
        if self.outage_since is None:
            self._release(unsent)
            self._log_summary()
        elif unsent:
            logger.info("frontier-rate: %d leases not sent to the crawler are not handed back "
                        "(Redis %s); they expire after %.0f s", len(unsent), self._condition,
                        self._frontier.lease_timeout)
        if close_frontier:
            self.frontier.close()

    def submit(self, call: Call) -> Call:
        """Queue ``call`` behind the ones before it; sent in order."""
        with self._lock:
            if self.outage_since is not None:
                call.held = True
            self._outbox.append(call)
            if self._post is not None:
                self._lock.notify()
        if call.held:
            self._settle([call])
        if self._post is None:
            self._step(lease=False)
        return call

    def add(self, pages: list[NewPage]) -> Call:
        return self.submit(Call("add", pages=list(pages)))

    def observe(self, dispatch: Dispatch, args: dict[str, Any]) -> Call:
        return self.submit(Call("observe", dispatch, dict(args)))

    def failed(self, dispatch: Dispatch, reason: str, status: int | None, now: float) -> Call:
        return self.submit(Call("failed", dispatch, {"reason": reason, "status": status,
                                                     "now": now}))

    def hint(self, hints: list[tuple[str, float | None, str]], *, discover: bool,
             sitemap: tuple[str, float, str] | None = None) -> Call:
        """Claims of a sitemap, feed or push (``Frontier.hint_many``); ``sitemap``: the
        (URL, weight, source) of the document they came from, re-weighted after them
        (``signals.IGNORED_WEIGHT`` once its source is ignored for its host). Advisory: not
        spooled at close (the next fetch of the sitemap tells again)."""
        return self.submit(Call("hint", None, {"hints": hints, "discover": discover,
                                               "sitemap": sitemap}))

    def host_delay(self, host: str, seconds: float) -> Call:
        return self.submit(Call("host_delay", None, {"host": host, "seconds": seconds}))

    def want(self, n: int) -> None:
        """Keep up to ``n`` leases ready to take (fetched in the background)."""
        with self._lock:
            more = n > self._want
            self._want = max(0, n)
            if more and self._post is not None:
                self._lock.notify()

    def poll(self) -> None:
        """Inline driver: send the outbox and lease if due (background: wake the worker)."""
        if self._post is None:
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
        if self._post is None:
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

    def take(self) -> list[tuple[Dispatch, float]]:
        """The leases fetched so far, with the time each was leased."""
        with self._lock:
            leases = list(self._leases)
            self._leases.clear()
            if leases and self._post is not None:
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
        if self._post is not None:
            raise RuntimeError("ask() is for the inline driver; the background one owns Redis")
        if self.outage_since is not None:
            return default
        try:
            return question(self._frontier)
        except RedisFault as exc:
            self._down(exc)
            return default

    @property
    def retry_at(self) -> float:
        return self._retry_at

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
            return now >= self._retry_at - CLOCK_SLACK
        if self._outbox:
            return True
        return len(self._leases) < self._want and now >= self._next_poll - CLOCK_SLACK

    def _sleep_for(self) -> float:
        now = self.clock()
        until = [self._next_summary if self.log_interval > 0 else now + WAKE_LIMIT]
        if self.outage_since is not None:
            until.append(self._retry_at)
        elif len(self._leases) < self._want:
            until.append(self._next_poll)  # else ``take`` or ``want`` wakes it
        return min(WAKE_LIMIT, max(0.001, min(until) - now))

    def _step(self, *, force: bool = False, lease: bool = True) -> None:
        """Send the outbox in order, then lease if wanted; the breaker decides when."""
        now = self.clock()
        if self.log_interval > 0 and now >= self._next_summary:
            self._next_summary = now + self.log_interval
            self._log_summary()
        if self.outage_since is not None and not force and now < self._retry_at - CLOCK_SLACK:
            return
        try:
            if self.outage_since is not None and not self._outbox:
                self.next_due = self._frontier.next_due_time()  # the probe
            self._send_outbox()
            if self.outage_since is not None:
                self._up()
            if lease and not self._outbox and now >= self._next_poll - CLOCK_SLACK:
                self._lease(self.clock())  # after the sends: pages just added are due by now
        except RedisFault as exc:
            self._down(exc)

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
                            or (first.kind == "observe" and len(batch) >= OBSERVE_BATCH) \
                            or (first.kind == "add" and pages + len(call.pages) > ADD_BATCH):
                        break
                    batch.append(call)
                    pages += len(call.pages)
            self._apply(batch)  # raises RedisFault: the batch stays queued
            with self._lock:
                for _ in batch:
                    self._outbox.popleft()
            self._settle(batch)

    def _apply(self, batch: list[Call]) -> None:
        """Send one batch of same-kind calls; bad data is dropped with a WARNING."""
        kind = batch[0].kind
        if kind == "add":
            self._apply_add(batch)
        elif kind == "observe":
            self._apply_observe(batch)
        else:
            call = batch[0]
            try:
                if kind == "failed":
                    assert call.dispatch is not None
                    self._frontier.failed(call.dispatch, call.args["reason"],
                                          status=call.args["status"], now=call.args["now"])
                elif kind == "hint":
                    self._apply_hint(call)
                else:
                    self._frontier.set_host_delay(call.args["host"], call.args["seconds"])
            except ValueError as exc:
                logger.warning("frontier-rate: dropping a %s call the frontier refused: %s",
                               kind, exc)
                return
            call.applied = True
            if kind == "failed":
                self._count_failed(call)

    def _apply_hint(self, call: Call) -> None:
        hints, discover = call.args["hints"], call.args["discover"]
        try:
            counts = self._frontier.hint_many(hints, discover=discover)
        except ValueError:  # one bad claim refuses the batch: the others one at a time
            counts = {}
            for item in hints:
                try:
                    for name, n in self._frontier.hint_many([item], discover=discover).items():
                        counts[name] = counts.get(name, 0) + n
                except ValueError as exc:
                    logger.warning("frontier-rate: claim refused: %s", exc)
        for name in ("due", "postponed", "held", "future", "added"):
            if counts.get(name):
                self._emit(f"signal_{name}", counts[name])
        self._emit("signal_claims", len(call.args["hints"]))
        if call.args["sitemap"] is not None:
            from .signals import IGNORED_WEIGHT

            url, weight, source = call.args["sitemap"]
            host = url.split("/")[2].split(":")[0].split("@")[-1]
            if self._frontier.signal_trust(host, source)["ignored"]:
                weight = IGNORED_WEIGHT
            self._frontier.add_many([(url, weight)])

    def _apply_add(self, batch: list[Call]) -> None:
        pages = [page for call in batch for page in call.pages]
        try:
            added = self._frontier.add_many(pages)
        except ValueError:  # one bad page refuses the batch: add one at a time
            added = 0
            for page in pages:
                try:
                    added += self._frontier.add_many([page])
                except ValueError as exc:
                    self._emit("rejected", 1)
                    logger.warning("frontier-rate: page refused: %s", exc)
        for call in batch:
            call.applied = True
        self._added += added
        self.known_pages += added
        self._emit("new_pages", added)
        if added:
            self.next_due, self._next_poll = self.clock(), 0.0

    def _apply_observe(self, batch: list[Call]) -> None:
        while True:
            try:
                observations = self._frontier.observe_many(
                    [(call.dispatch, call.args) for call in batch])
                break
            except ValueError as exc:  # bad data cannot block the queue
                if len(batch) > 1:
                    del batch[1:]  # the chunks before the bad one may have applied
                    continue
                url = batch[0].dispatch.url if batch[0].dispatch else "?"
                logger.warning("frontier-rate: dropping an observation of %s the frontier "
                               "refused: %s", url, exc)
                return
        for call, observation in zip(batch, observations, strict=True):
            call.observation, call.applied = observation, True
            self._count_observation(call)

    def _count_observation(self, call: Call) -> None:
        observation = call.observation
        assert observation is not None
        if not observation.accepted:
            self._emit("stale_lease", 1)  # expired while in flight or held
            return
        self._emit("changed" if observation.changed else "unchanged", 1)
        if call.args.get("not_modified"):
            self._emit("not_modified", 1)
        self._observed += 1
        self._emit("revisits", max(0, self._observed - self._added), replace=True)

    def _count_failed(self, call: Call) -> None:
        self._emit("failed", 1)
        status = call.args.get("status")
        if status in (404, 410):
            self._emit(f"http_{status}", 1)
            assert call.dispatch is not None
            try:  # the failure is recorded: reading the page back is only for the stat
                page = self._frontier.page(call.dispatch.url)
            except RedisFault:
                page = None
            if page is not None and page.get("status") == "gone":
                self._emit("gone", 1)

    def _settle(self, calls: list[Call]) -> None:
        """Mark calls settled and run their waiters on the adapter's thread."""
        replayed = 0
        for call in calls:
            if call.applied and call.held and call.kind != "host_delay":
                replayed += 1
        self._replayed_in_outage += replayed
        if replayed:
            self._emit("replayed", replayed)

        def settle(chunk: list[Call]) -> int:
            resumed = 0
            for call in chunk:
                if call.settled:
                    continue
                call.settled = True
                waiters, call.waiters = call.waiters, []
                for waiter in waiters:
                    waiter(call)
                resumed += len(waiters)
            return resumed

        for i in range(0, len(calls), SETTLE_SLICE):
            self._to_adapter(lambda chunk=calls[i:i + SETTLE_SLICE]: settle(chunk))

    def _lease(self, now: float) -> None:
        with self._lock:
            room = min(self.batch, self._want - len(self._leases))
        if room <= 0:
            return
        fresh = self._frontier.next_requests(room, now=now)
        # nothing leased: when may something be? (known before a waiter hears of this round)
        due = None if fresh else self._frontier.next_due_time()
        with self._lock:
            self._leases.extend((dispatch, now) for dispatch in fresh)
            if not fresh:
                self.next_due = due
            self._lease_rounds += 1
            self._lock.notify_all()  # wait_for_lease_round
        if fresh:
            self._next_poll = now
            self._to_adapter(self._ready)
            return
        if due is None:
            self._next_poll = now + WAKE_LIMIT
        else:
            self._next_poll = min(max(due, now + MIN_WAKE), now + WAKE_LIMIT)
            if self._frontier.fill_budget:  # the next token may lease a page not yet due
                self._next_poll = min(self._next_poll,
                                      now + max(MIN_WAKE, 1.0 / self._frontier.budget))

    def _ready(self) -> None:
        if self._on_ready is not None:
            self._on_ready()

    def _to_adapter(self, func: Callable[[], int | None]) -> None:
        """Run ``func`` on the adapter's thread, after what was queued before it (``func``
        returns how many waiters it ran, if any: see SETTLE_SLICE)."""
        if self._post is None:
            func()
            return
        with self._lock:
            self._inbox.append(func)
            if self._inbox_posted:
                return
            self._inbox_posted = True
        self._post(self._run_inbox)

    def _run_inbox(self) -> None:
        resumed = 0
        while True:
            with self._lock:
                if not self._inbox:
                    self._inbox_posted = False
                    return
                if resumed >= SETTLE_SLICE and self._post is not None:
                    break
                func = self._inbox.popleft()
            resumed += func() or 0
        self._post(self._run_inbox)  # the loop runs the callbacks resumed so far first

    def _emit(self, name: str, value: float, *, replace: bool = False) -> None:
        if value or replace:
            self._to_adapter(lambda: self._stat(name, value, replace))

    # -- the breaker -------------------------------------------------------------------
    def _down(self, exc: Exception) -> None:
        """A Redis call failed: hold the outbox, open the breaker until the next attempt.

        The first WARNING says what Redis answered (unreachable, refused writes: out of
        memory, read-only replica ...; an ERROR for a namespace found gone), later
        attempts log at INFO."""
        now = self.clock()
        self._emit("redis_errors", 1)
        with self._lock:
            calls = list(self._outbox)
        for call in calls:
            call.held = True
        url = redact_url(self.redis_url)
        reason = str(exc)
        if f" at {url}: " in reason:  # the engine's message names the URL already
            reason = reason.split(f" at {url}: ", 1)[1]
        self._condition = getattr(exc, "condition", "failed")
        if self.outage_since is None:
            self.outage_since, self._backoff, self._replayed_in_outage = now, REDIS_RETRY_FIRST, 0
            self._emit("redis_outages", 1)
            if isinstance(exc, RedisUnavailable) or not isinstance(exc, RedisFault):
                logger.warning("frontier-rate: Redis at %s unreachable (%s); holding %d results, "
                               "retrying in %.0f s (%d new pages wait too)", url, reason,
                               self.held_results(), self._backoff, self.unadded())
            else:
                logger.log(logging.ERROR if isinstance(exc, NamespaceLost) else logging.WARNING,
                           "frontier-rate: %s; holding %d results, retrying in %.0f s (%d new "
                           "pages wait too)", exc, self.held_results(), self._backoff,
                           self.unadded())
        else:
            self._backoff = min(2 * self._backoff, REDIS_RETRY_MAX)
            logger.info("frontier-rate: Redis at %s still %s after %.0f s (%s); "
                        "holding %d results, retrying in %.0f s", url, self._condition,
                        now - self.outage_since, reason, self.held_results(), self._backoff)
        self._retry_at = now + self._backoff
        self._settle([call for call in calls if not call.applied])
        self._to_adapter(self._ready)

    def _up(self) -> None:
        assert self.outage_since is not None
        logger.warning("frontier-rate: Redis at %s back after %.1f s; replayed %d results",
                       redact_url(self.redis_url), self.clock() - self.outage_since,
                       self._replayed_in_outage)
        self.outage_since, self._backoff, self._retry_at = None, REDIS_RETRY_FIRST, 0.0
        self._next_poll = 0.0
        self._to_adapter(self._ready)

    # -- spool, release, summary ---------------------------------------------------------
    def _save_spool(self) -> None:
        """Closing with calls Redis has not taken (unreachable, refusing writes, the
        namespace lost): write them to the spool."""
        calls = list(self._outbox)
        entries = [page_entry(*page) for call in calls if call.kind == "add" for page in call.pages]
        entries += [call_entry(call.kind, call.dispatch, call.args)
                    for call in calls if call.kind not in ("add", "hint")]
        if not entries:
            return
        results, pages = self.held_results(), self.unadded()
        try:
            path = Spool(self.spool_dir, self.namespace).save(entries)
        except (OSError, ValueError) as exc:
            logger.error("frontier-rate: could not write the spool in %s (%s): %d fetch results "
                         "lost (their leases expire after %.0f s and those pages are fetched "
                         "again) and %d new pages not added", self.spool_dir, exc, results,
                         self._frontier.lease_timeout, pages)
            self._stat("lost_results", results, True)
            return
        self._outbox.clear()
        self._stat("spooled", len(entries), True)
        logger.warning(
            "frontier-rate: closing while Redis at %s %s: %d fetch results and %d new "
            "pages saved to %s; the next crawl of namespace %r replays them (results whose lease "
            "has expired by then, after %.0f s, are refused and those pages fetched again)",
            redact_url(self.redis_url), self._state(), results, pages, path, self.namespace,
            self._frontier.lease_timeout,
        )

    def _state(self) -> str:
        """What Redis last answered, for a sentence 'closing while Redis at URL ...'."""
        condition = self._condition
        if condition == "unreachable":
            return "is unreachable"
        if condition.startswith("refused writes: "):
            return f"refuses writes ({condition.split(': ', 1)[1]})"
        if condition == "namespace lost":
            return f"has lost namespace {self.namespace!r}"
        return f"fails ({condition})"

    def _replay_spool(self) -> None:
        """Queue what an earlier crawl of this namespace could not give Redis."""
        entries = Spool(self.spool_dir, self.namespace).claim()
        if not entries:
            return
        pages: list[NewPage] = []
        results = 0
        for entry in entries:
            try:
                kind, item, args = read_entry(entry)
                if kind == "page":
                    parse_url(item[0])
            except ValueError as exc:
                logger.warning("frontier-rate: skipping a spool entry of namespace %r: %s",
                               self.namespace, exc)
                continue
            if kind == "page":
                pages.append(item)
                continue
            if pages:
                self._outbox.append(Call("add", pages=pages, held=True))
                pages = []
            self._outbox.append(Call(kind, item, args, held=True))
            results += kind != "host_delay"
        if pages:
            self._outbox.append(Call("add", pages=pages, held=True))
        logger.info("frontier-rate: replaying %d results and %d new pages an earlier crawl of "
                    "namespace %r could not give Redis", results, self.unadded(), self.namespace)
        self._stat("spool_replayed", results + self.unadded(), False)

    def _release(self, dispatches: list[Dispatch]) -> None:
        """Hand unsent leases back so other crawlers need not wait for them to expire."""
        if not dispatches:
            return
        try:
            released = self._frontier.release_many(dispatches)
        except RedisFault as exc:
            logger.warning("frontier-rate: could not hand back %d unsent leases (%s); they "
                           "expire after FRONTIER_RATE_LEASE_TIMEOUT", len(dispatches), exc)
            return
        self._stat("released", released, False)

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
            self._emit("threshold", threshold, replace=True)
        logger.info("frontier-rate [%s]: %s", self.namespace,
                    ", ".join(f"{key}={_short(value)}" for key, value in sorted(summary.items())))


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)

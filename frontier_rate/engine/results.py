"""Fetch results: observations (lua/observe.lua), failures (lua/fail.lua), leases handed
back unsent (lua/release.lua) and fetches to redo (lua/unsettle.lua).

``observe`` and ``failed`` are accepted once per lease token, and only while that lease
is the page's open lease. A replay of an applied token returns the same result and
changes nothing; a token whose lease expired (whether or not the page was re-leased) is
answered with ``Observation(accepted=False)`` and changes nothing.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from frontier_rate.engine.records import Lease, Observation
from frontier_rate.engine.session import Session
from frontier_rate.engine.shards import ShardCalls
from frontier_rate.engine.signals import TrustLog
from frontier_rate.engine.threshold import Threshold
from frontier_rate.engine.validation import (
    fingerprint,
    lease,
    observe_status,
    parse_url,
    real,
    token,
    validator,
)
from frontier_rate.math.dates import change_time
from frontier_rate.store import wire
from frontier_rate.store.keys import digest, page_id
from frontier_rate.store.scripts import ScriptsReloaded

logger = logging.getLogger(__name__)

OBSERVE_BATCH = 512
"""Observations per lua/observe.lua call in ``observe_many``: more share a call's and each
host's fixed work; 512 keeps one call near 10-15 ms of Redis time at 10^5 pages."""
OBSERVE_CHUNK = 2048
"""Observations checked and packed at a time in ``observe_many`` (sent while the server
works)."""
BACKOFF_BASE = 60.0
"""Seconds before the first retry of a failed fetch (doubling with each failure)."""
GONE_AFTER = 3
"""Consecutive 404/410 answers after which a page is gone (kept, never revisited)."""


class Results:
    """Records what fetches gave: ``observe_many``, ``fail``, ``release_many``,
    ``unsettle_many``."""

    def __init__(self, session: Session, calls: ShardCalls, threshold: Threshold,
                 page: Callable[[str], dict | None], trust_log: TrustLog) -> None:
        self.session = session
        self.calls = calls
        self.threshold = threshold
        self._page = page  # a page's record (the estimate a failure reports)
        self.trust_log = trust_log  # fetches check claims: their sources' trust changes

    def observe_many(self, results: Iterable[tuple[Lease, Mapping[str, Any]]]
                     ) -> list[Observation]:
        """``Frontier.observe_many``: each observation one atomic step, streamed in per-shard
        script calls of ``OBSERVE_BATCH``."""
        results = list(results)
        if not results:
            return []
        with self.session.errors("observe_many"):
            first = results[0][1].get("fetched_at")
            self.threshold.maybe_resolve(
                self.session.now(first if isinstance(first, (int, float)) else None))
            call = _ObserveCall(self, results)
            try:
                streamed = self.session.scripts.stream(call.commands(), call.unpack)
            except ScriptsReloaded:
                call = _ObserveCall(self, results)
                streamed = self.session.scripts.stream(call.commands(), call.unpack)
            if call.lowest and self.session.scripts.cluster:
                self.session.scripts.run(lambda pipe: self.calls.lower_due(pipe, call.lowest))
            if len(streamed) < len(call.sent):
                raise AssertionError("a streamed observe batch had no reply")
            call.record_failures()
        out = call.out
        if self.session.offset:
            out = [o if o.next_due is None else replace(o, next_due=self.session.local(o.next_due))
                   for o in out]
        return out  # type: ignore[return-value]

    def check(self, lease_: Lease, *, fingerprint: str | bytes | None = None,
              not_modified: bool = False, status: int = 200,
              fetched_at: float | None = None, etag: str | None = None,
              last_modified: str | None = None, served_at: str | None = None,
              changed_at: float | None = None, settle_later: bool = False) -> tuple:
        """Validate one observe call: ("observe", lease, now, ...) or ("fail", ...)."""
        return (*_check_observe(self.session, lease_, fingerprint, not_modified, status,
                                fetched_at, etag, last_modified, served_at, changed_at),
                bool(settle_later))

    def pack(self, call: tuple) -> tuple[int, bytes]:
        """(shard, packed argument of lua/observe.lua) for a checked observe call."""
        (_, lease_, now, host, token_, fingerprint_, not_modified, etag, lm, changed_at,
         settle_later) = call
        fp = b"" if fingerprint_ is None else digest(fingerprint_)
        packed = wire.observation(page_id(lease_.url), token_, now, host.encode("utf-8"),
                                  not_modified, fp, etag, lm, changed_at,
                                  1.0 - self.session.options.rng.random(),
                                  claim_dates=self.session.options.change_dates,
                                  settle_later=settle_later)
        return self.calls.of(host), packed

    def fail(self, lease_: Lease, reason: str, status: int | None, now: float,
             park: bool = False) -> Observation:
        """Record a fetch that gave no observation (``Frontier.failed``); its Observation
        (next due time on Redis's clock: observe_many converts). ``park``: the backoff
        starts at max_interval (lua/fail.lua caps it there)."""
        host = parse_url(lease_.url)
        pid = page_id(lease_.url)
        base = self.session.settings["max_interval"] if park else BACKOFF_BASE
        reply = self.calls.run_one(
            "fail", self.calls.of(host), now,
            wire.fail_args(pid, host, token(lease_), status in (404, 410), base,
                           GONE_AFTER), lower=now)
        outcome = reply[0].decode()
        if outcome == "quarantined":
            logger.error("failed fetch of %s not recorded: the page is quarantined (%s)",
                         lease_.url, reply[1].decode("utf-8", "replace"))
            return Observation(False, math.nan, None, accepted=False)
        logger.debug("fetch of %s failed (%s): %s", lease_.url, reason, outcome)
        page = self._page(lease_.url) or {}
        estimate = page.get("estimate")
        return Observation(False, math.nan if estimate is None else estimate,
                           float(reply[1]) if outcome == "retry" else None,
                           accepted=outcome in ("retry", "gone"))

    def release_many(self, leases: Iterable[Lease], now: float) -> int:
        """``Frontier.release_many``: leases never sent go back to their host queues."""
        groups: dict[int, list] = defaultdict(list)
        for item in leases:
            lease(item)
            host = parse_url(item.url)
            due = now if item.due is None else \
                real("lease.due", item.due) + self.session.offset
            groups[self.calls.of(host)] += wire.release_args(page_id(item.url), host,
                                                              token(item), due)
        if not groups:
            return 0
        lowest = {shard: min(float(args[i]) for i in range(3, len(args), 4))
                  for shard, args in groups.items()}

        def build(pipe: Any) -> None:
            for shard, args in groups.items():
                self.calls.call(pipe, "release", shard, now, args)

        with self.session.errors("release_many"):
            return sum(int(n) for n in self.calls.run_writes(build, lowest, len(groups)))

    def settle_many(self, leases: Iterable[Lease], now: float) -> int:
        """``Frontier.settle_many``: the crawler is done with these fetches' copies."""
        groups = self._by_shard(leases)
        if not groups:
            return 0

        def build(pipe: Any) -> None:
            for shard, args in groups.items():
                self.calls.call(pipe, "settle", shard, now, args)

        with self.session.errors("settle_many"):
            return sum(int(n) for n in self.session.scripts.run(build))

    def _by_shard(self, leases: Iterable[Lease]) -> dict[int, list]:
        """lua/settle.lua's and lua/unsettle.lua's arguments, by shard."""
        groups: dict[int, list] = defaultdict(list)
        for item in leases:
            lease(item)
            host = parse_url(item.url)
            groups[self.calls.of(host)] += wire.unsettle_args(page_id(item.url), host,
                                                               token(item))
        return groups

    def unsettle_many(self, leases: Iterable[Lease], now: float) -> int:
        """``Frontier.unsettle_many``: fetches whose output the crawler lost are redone."""
        groups = self._by_shard(leases)
        if not groups:
            return 0

        def build(pipe: Any) -> None:
            for shard, args in groups.items():
                self.calls.call(pipe, "unsettle", shard, now, args)

        with self.session.errors("unsettle_many"):
            return sum(int(n) for n in self.calls.run_writes(
                build, dict.fromkeys(groups, now), len(groups)))


class _ObserveCall:
    """One ``observe_many`` call: its items checked and packed chunk by chunk, sent in
    per-shard script calls of ``OBSERVE_BATCH`` while the server works, and unpacked as the
    replies come back."""

    def __init__(self, results: Results, items: list[tuple[Lease, Mapping[str, Any]]]
                 ) -> None:
        self.results = results
        self.items = items
        self.checked: list = [None] * len(items)
        self.out: list[Observation | None] = [None] * len(items)
        self.sent: list[list[int]] = []
        self.lowest: dict[int, float] = {}
        self._groups: dict[int, list[int]] = defaultdict(list)
        self._packed: dict[int, bytes] = {}

    def commands(self) -> Iterator[tuple[str, list, list]]:
        """The script calls, as they fill: a shard's observations wait until
        ``OBSERVE_BATCH`` of them are packed (full script calls: per-call and per-host work
        is shared by more observations). A ValueError for a bad item sends the chunks
        before it, then raises."""
        for start in range(0, len(self.checked), OBSERVE_CHUNK):
            chunk = range(start, min(start + OBSERVE_CHUNK, len(self.checked)))
            try:
                for i in chunk:
                    lease_, kwargs = self.items[i]
                    self.checked[i] = self.results.check(lease_, **kwargs)
            except ValueError:
                for shard in list(self._groups):  # the chunks before the bad item still apply
                    yield self._batch(shard)
                raise
            for i in chunk:
                if self.checked[i][0] == "observe":
                    shard, self._packed[i] = self.results.pack(self.checked[i])
                    self._groups[shard].append(i)
                    if len(self._groups[shard]) >= OBSERVE_BATCH:
                        yield self._batch(shard)
        for shard in list(self._groups):
            yield self._batch(shard)
        if self.lowest and not self.results.session.scripts.cluster:
            # the re-queued pages are due after their fetch: the summary may say so
            yield self.results.calls.lower_command(self.lowest)

    def _batch(self, shard: int) -> tuple[str, list, list]:
        part = self._groups.pop(shard)
        self.sent.append(part)
        now = max(self.checked[i][2] for i in part)
        first = min(self.checked[i][2] for i in part)
        self.lowest[shard] = min(self.lowest.get(shard, first), first)
        return self.results.calls.command("observe", shard, now,
                                           [self._packed.pop(i) for i in part])

    def unpack(self, k: int, replies: Any) -> None:
        """Reply ``k`` answers ``sent[k]`` (the summary update after them is not unpacked)."""
        if k < len(self.sent):
            packed, events = wire.observe_replies(replies)
            at = 0
            for i in self.sent[k]:
                reply, at = wire.observe_reply(packed, at)
                self.out[i] = observation_of(*reply, self.items[i][0])
            self.results.trust_log.log(events)

    def record_failures(self) -> None:
        """Items whose status was >= 400 are failures (``Results.fail``)."""
        for i, call in enumerate(self.checked):
            if call[0] == "fail":
                self.out[i] = self.results.fail(call[1], call[3], call[4], call[2])


def _check_observe(session: Session, lease_: Lease, fingerprint_: Any, not_modified: Any,
                   status: Any, fetched_at: Any, etag: Any, last_modified: Any, served_at: Any,
                   changed_at: Any) -> tuple:
    """Validate one observe call: ("observe", lease, now, host, token, fingerprint,
    not_modified, etag, last_modified, changed_at) or ("fail", lease, now, reason,
    status) for a status >= 400."""
    lease(lease_)
    observe_status(status)
    now = session.now(fetched_at)
    host = parse_url(lease_.url)
    token_ = int(token(lease_))
    if status >= 400:
        return ("fail", lease_, now, f"HTTP {status}", status)
    not_modified = bool(not_modified) or status == 304
    fingerprint(lease_.url, fingerprint_, not_modified)
    if changed_at is not None:
        changed_at = real("changed_at", changed_at) + session.offset
    elif not not_modified:
        changed_at = change_time(last_modified, served_at, now,
                                 session.options.server_clock_rate)
    if not session.options.change_dates:
        changed_at = None
    return ("observe", lease_, now, host, token_, fingerprint_, not_modified,
            validator("etag", etag), validator("last_modified", last_modified), changed_at)


def observation_of(status: int, changed: int, estimate: float, due: float, date_bits: int,
                   reason: bytes, lease_: Lease) -> Observation:
    """The Observation of one observe.lua reply (logging what the caller should hear of)."""
    url = lease_.url
    if date_bits & wire.DATES_IGNORED:
        logger.warning("ignoring the change dates (Last-Modified) of host %s: more than 1 in %d "
                       "disagreed with the content (now, constant or future dates)",
                       lease_.host, wire.DATE_TRUST)
    elif date_bits & wire.DATES_TRUSTED:
        logger.info("trusting the change dates (Last-Modified) of host %s again", lease_.host)
    if status == wire.QUARANTINED:
        text = reason.decode("utf-8", "replace")
        logger.error("observation of %s dropped: the page is quarantined (%s); add the URL again "
                     "for a fresh state", url, text)
        return Observation(changed=False, estimate=math.nan, next_due=None, accepted=False)
    if status == wire.MISSING:
        logger.warning("observe of a page the frontier does not know: %s", url)
    return Observation(changed=bool(changed), estimate=estimate,
                       next_due=due if due > 0 else None,
                       accepted=status in (wire.OK, wire.REPLAY),
                       dated=bool(date_bits & wire.DATE_USED))

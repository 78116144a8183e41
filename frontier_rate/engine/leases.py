"""Leases: which due pages a crawler gets, within the budget and every host's delay.

``LeaseDesk.next_requests`` makes up to three round trips: (1) the published ν, tokens
from the shared bucket and the namespace's due summary (fr:{ns}:due: when each shard may
next have work), nothing more when no shard has work now (an idle call is one cheap
read); (2) a background refresh step and the candidates of the shards that have work
(lua/candidates.lua); (3) the leases of the best candidates (each re-checked in Lua,
lua/lease.lua), with unneeded tokens given back.

Ordering: among due pages, the highest index first: each shard offers the best of the
``CANDIDATE_LOOK`` earliest-due pages of each of its earliest-ready hosts
(``CANDIDATE_WINDOW * max_n`` hosts over all shards, 1.25 per lease past the first 1024 of
a call, at least 16 per shard), and the offers are compared across shards by index.
"whittle" uses seed 002's discrete index with period ``min_interval``, "lagrangian" the
continuous one; both plan with the same threshold, so the two policies differ only in
this backlog order.
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from frontier_rate.engine.records import Lease
from frontier_rate.engine.session import Session
from frontier_rate.engine.shards import BURST_SECONDS, ShardCalls, log_quarantined
from frontier_rate.engine.threshold import NU_FIELDS, Threshold
from frontier_rate.engine.validation import count, stored_meta, stored_url, stored_validator
from frontier_rate.renamed import resolve
from frontier_rate.store import wire
from frontier_rate.store.errors import NamespaceLost, lost_message

logger = logging.getLogger(__name__)

CANDIDATE_LOOK = 4
"""Due pages per ready host whose index is compared (the best one is the host's candidate;
with min_host_delay 0, a host whose delay is 0 offers each of them, lua/candidates.lua)."""
CANDIDATE_WINDOW = 4
"""Candidates ranked per next_requests call: CANDIDATE_WINDOW * max_n over all shards
(up to WIDE_WINDOW leases; ``window``); each shard looks at ready hosts in ready order
until it has its share."""
WIDE_WINDOW = 1024
WINDOW_SLACK = 1.25
"""Candidates ranked per lease past the first WIDE_WINDOW of one call."""
FULL_SCAN_EVERY = 1.0
"""Seconds after which next_requests asks every shard, whatever the due summary says
(fr:{ns}:due, lua/due.lua: it can only be too late after a writer died between its shard
script and its summary update). Both clocks must have moved that far: the frontier's (its
``clock`` or ``now``) and this process's monotonic one, so that a replay on a virtual clock
that jumps hours per call does not pay a 16-shard scan on every call for a safety net that
guards against dead processes, which live in real time."""
REFRESH_PAGES = 256
"""Pages re-planned per background refresh step (one shard per next_requests call)."""

Candidate = tuple[float, int, bytes, bytes]
"""(index, shard, host, page id) of a page a shard offers."""


@dataclass
class _Round:
    """What one next_requests call learned so far."""

    now: float
    max_n: int
    granted: int = 0
    versions: dict[int, bytes] = field(default_factory=dict)
    earliest: dict[int, bytes] = field(default_factory=dict)
    """Each asked shard's earliest time with work after this call (for the due summary)."""


class LeaseDesk:
    """Hands out leases (``next_requests``) and says when the next page falls due."""

    def __init__(self, session: Session, calls: ShardCalls, threshold: Threshold) -> None:
        self.session = session
        self.calls = calls
        self.threshold = threshold
        self._unused_tokens = 0
        self._last_call = -math.inf
        self._full_scan_at = -math.inf
        self._full_scan_wall = -math.inf
        self._due_sets: dict[int, tuple[bytes, bytes]] = {}

    def next_requests(self, max_n: int, now: float | None = None) -> list[Lease]:
        """Lease up to ``max_n`` due pages, highest index first, within budget and host delays
        (``Frontier.next_requests``)."""
        count("max_n", max_n, minimum=0)
        call = _Round(self.session.now(now), max_n)
        with self.session.errors("next_requests"):
            refresh = self.threshold.refresh_pending[0] if self.threshold.refresh_pending \
                else None
            nu_raw, summary = self._first_trip(call)
            scan = self._shards_to_ask(call, summary, refresh)
            offers = self._offers(call, scan, refresh)
            self.threshold.use_published(nu_raw, call.now)
            free, paid, early_shards = self._choose(call, offers)
            leases = self._lease(call, free + paid, early_shards, len(paid))
            spent = sum(1 for d in leases if not (free and d.first))
            self._unused_tokens = max(0, len(paid) - spent)
            # what the shards said after this call goes to the summary with the next call's
            # first round trip, if no writer lowered it meanwhile (lua/due.lua "set")
            self._due_sets = {shard: (t, call.versions[shard])
                              for shard, t in call.earliest.items()}
        if self.session.offset:  # due times on this process's clock
            leases = [replace(d, due=self.session.local(d.due)) for d in leases]
        return leases

    def _first_trip(self, call: _Round) -> tuple[list, dict]:
        """Round trip (1): the published ν, the tokens granted (after giving back the ones
        the last call did not use), the due summary (after storing what the last call's
        shards said). Returns (ν fields, summary)."""
        give_back, self._unused_tokens = self._unused_tokens, 0
        sets, self._due_sets = self._due_sets, {}
        keys = self.session.keys

        def first(pipe: Any) -> None:
            pipe.hmget(keys.nu, *NU_FIELDS)
            self.calls.take_tokens(pipe, call.now, call.max_n, give_back)
            if sets:
                self.session.scripts.call(pipe, "due", [keys.due], wire.due_set_args(sets))
            pipe.hgetall(keys.due)

        replies = self.session.scripts.run(first)
        nu_raw, call.granted, summary = replies[0], int(replies[1]), replies[-1]
        call.versions = {shard: summary.get(b"v%d" % shard, b"0")
                         for shard in range(self.session.shards)}
        return nu_raw, summary

    def _shards_to_ask(self, call: _Round, summary: dict, refresh: int | None) -> list[int]:
        """The shards the due summary says may have work now (every shard once per
        ``FULL_SCAN_EVERY`` of both clocks), and the one due for a refresh step."""
        wall = time.monotonic()
        full = (abs(call.now - self._full_scan_at) >= FULL_SCAN_EVERY
                and wall - self._full_scan_wall >= FULL_SCAN_EVERY)
        if full:
            self._full_scan_at, self._full_scan_wall = call.now, wall
        now_us = math.floor(call.now * 1e6 + 0.5)
        return [shard for shard in range(self.session.shards)
                if full or shard == refresh
                or wire.has_work(summary.get(b"%d" % shard), now_us)]

    def _offers(self, call: _Round, scan: list[int], refresh: int | None) -> list[Candidate]:
        """Round trip (2): a refresh step on ``refresh``, and the candidates of ``scan``,
        best index first."""
        args = self._candidates_args(call.max_n, early=False)

        def second(pipe: Any) -> None:
            if refresh is not None:
                self.calls.call(pipe, "refresh", refresh, call.now, [str(REFRESH_PAGES)])
            for shard in scan:
                self.calls.call(pipe, "candidates", shard, call.now, args)

        found = self.session.scripts.run(second) if scan else []
        if refresh is not None:
            self.threshold.refreshed(refresh, found[0])
            found = found[1:]
        offers = candidates(found, scan, call.earliest)
        offers.sort(key=lambda c: -c[0])
        return offers

    def _choose(self, call: _Round, offers: list[Candidate]
                ) -> tuple[list[Candidate], list[Candidate], set[int]]:
        """(free, paid, early shards): pages never fetched (index inf, first in the order)
        take no token unless ``budget_first_fetches``; the rest share the tokens granted,
        and with ``fill_budget`` tokens no due page can use go to pages not due yet."""
        options = self.session.options
        free = [] if options.budget_first_fetches else \
            [c for c in offers[:call.max_n] if c[0] == math.inf]
        due = offers[len(free):]
        paid_room = min(call.granted, call.max_n - len(free))
        early: list[Candidate] = []
        spill = self._tokens_would_spill(call.granted - len(due), call.now)
        if options.fill_budget and paid_room > len(due) and (not due or spill):
            # nothing due at all (the crawl is idle: a second round trip costs nothing), or
            # the tokens left beside the due pages would overflow the bucket before the
            # next call (a busy crawl asks again long before, and its tokens wait)
            early = self._early_candidates(call, paid_room - len(due))
        paid = (due + early)[:paid_room]
        early_shards = {shard for _, shard, _, _ in early[:max(0, paid_room - len(due))]}
        return free, paid, early_shards

    def _tokens_would_spill(self, left: int, now: float) -> bool:
        """Would ``left`` tokens given back overflow the bucket before the next call, if it
        comes as long after this one as this one came after the last?"""
        budget = self.session.settings["budget"]
        gap, self._last_call = now - self._last_call, now
        return left > 0 and left + budget * gap > budget * BURST_SECONDS + 1.0

    def _candidates_args(self, wanted: int, early: bool) -> list[str]:
        """lua/candidates.lua's arguments for ``wanted`` leases: a source's first read is
        valued against the threshold where every fetch takes a token."""
        return wire.candidates_args(window(wanted, self.session.shards), CANDIDATE_LOOK, early,
                                    self.session.options.budget_first_fetches)

    def _early_candidates(self, call: _Round, tokens: int) -> list[Candidate]:
        """Pages not due yet on hosts that may be fetched now, best index first, for ``tokens``
        the budget holds that no due page can use (``fill_budget``; lua/candidates.lua)."""
        args = self._candidates_args(tokens, early=True)

        def build(pipe: Any) -> None:
            for shard in range(self.session.shards):
                self.calls.call(pipe, "candidates", shard, call.now, args)

        early = candidates(self.session.scripts.run(build), range(self.session.shards),
                           call.earliest)
        early.sort(key=lambda c: -c[0])
        return early

    def _lease(self, call: _Round, chosen_pages: list[Candidate], early_shards: set[int],
               wanted: int) -> list[Lease]:
        """Round trip (3): lease the chosen pages, give back the tokens not needed."""
        chosen: dict[int, list] = defaultdict(list)
        for _, shard, host, pid in chosen_pages:
            chosen[shard] += [host, pid]
        give_back = call.granted - wanted

        def lease(pipe: Any) -> None:
            if give_back > 0:
                self.calls.take_tokens(pipe, call.now, 0, give_back)
            for shard, args in chosen.items():
                self.calls.call(pipe, "lease", shard, call.now,
                                 wire.lease_args(shard in early_shards, args))

        leases: list[Lease] = []
        unreadable: list[tuple[bytes, str, str, str, str]] = []
        if give_back > 0 or chosen:
            leased = self.session.scripts.run(lease)
            for shard, (packed, quarantined, first_work) in zip(
                    chosen, leased[1:] if give_back > 0 else leased, strict=True):
                call.earliest[shard] = first_work
                log_quarantined(quarantined)
                for pid, fields in wire.leases(packed):
                    try:
                        leases.append(lease_of_reply(fields))
                    except ValueError as exc:
                        unreadable.append((pid, fields[0].decode("utf-8", "replace"),
                                           fields[2], str(exc),
                                           fields[1].decode("utf-8", "replace")))
        if unreadable:
            self._quarantine_leased(unreadable, call.now)
        return leases

    def _quarantine_leased(self, pages: list[tuple[bytes, str, str, str, str]], now: float) -> None:
        """Quarantine leased pages whose URL or meta could not be read (lua/quarantine.lua)."""
        def build(pipe: Any) -> None:
            for pid, host, token, reason, _ in pages:
                self.calls.call(pipe, "quarantine", self.calls.of(host), now,
                                 wire.quarantine_args(pid, host, token, reason,
                                                      drop_extras=reason.startswith("meta")))

        self.session.scripts.run(build)
        for pid, host, _, reason, url in pages:
            logger.error("quarantined page %s (id %s on %s): %s (see Frontier.quarantined(); add "
                         "the URL again for a fresh state)", url, pid.hex(), host, reason)

    def next_due_time(self) -> float | None:
        """Earliest time a page may be leased (host delay included) or a lease expires.

        Also reads the namespace's marker id from its configuration: a namespace that was
        emptied or created anew raises NamespaceLost here, not only at the next script."""
        return self._earliest(with_tokens=False)[0]

    def next_call_time(self, now: float, retry: float) -> float | None:
        """When a crawler whose last ``next_requests`` got fewer pages than it asked for
        should ask again; None: not before pages are added.

        The bucket holds less than a token: when it holds one again (with ``fill_budget``
        that token may lease a page not due yet; without, not before the next due page).
        Tokens left, so every host with pages waits for its delay: the next due page, or
        with ``fill_budget`` ``retry`` seconds later if sooner, since a host whose delay
        ends may take a page not yet due (lua/candidates.lua)."""
        due, tokens = self._earliest(with_tokens=True)
        budget = self.session.settings["budget"]
        level, since = tokens
        if since is None:  # a bucket never written: empty as of now (take_tokens.lua)
            since = now
        if level < 1.0:
            token_at = since + (1.0 - level) / budget
            if self.session.options.fill_budget:
                return token_at
            return None if due is None else max(token_at, due)
        if due is None:
            return None
        return min(due, now + retry) if self.session.options.fill_budget else due

    def _earliest(self, *, with_tokens: bool
                  ) -> tuple[float | None, tuple[float, float | None]]:
        """(earliest due or lease time, (tokens, their time)), on this process's clock; the
        namespace marker checked on the way."""
        session, keys = self.session, self.session.keys
        with session.errors("next_due_time"):
            pipe = session.client.pipeline(transaction=False)
            pipe.hget(keys.cfg, "id")
            if with_tokens:
                pipe.hmget(keys.tokens, "tokens", "ts")
            for shard in range(session.shards):
                pipe.zrange(keys.ready(shard), 0, 0, withscores=True)
                pipe.zrange(keys.leases(shard), 0, 0, withscores=True)
            marker, *replies = pipe.execute()
        if session.namespace_id and marker != session.namespace_id.encode():
            detail = ("its configuration is gone" if marker is None
                      else "it was created anew since this frontier opened")
            raise session.lost(NamespaceLost(lost_message(session.redis_url, session.namespace,
                                                          detail)))
        tokens: tuple[float, float | None] = (0.0, None)
        if with_tokens:
            level, since = replies.pop(0)
            tokens = (float(level or 0.0), session.local(float(since)) if since else None)
        firsts = [r[0][1] for r in replies if r]
        return (session.local(min(firsts) / 1e6) if firsts else None), tokens


def window(max_n: int, shards: int) -> int:
    """Candidates each shard offers for ``max_n`` leases: CANDIDATE_WINDOW per lease over
    all shards for the first WIDE_WINDOW leases, WINDOW_SLACK per lease beyond (a bulk call
    need not rank 4x its size to keep the index order; the cost of a lease stays flat), at
    least 16 per shard."""
    hosts = CANDIDATE_WINDOW * min(max_n, WIDE_WINDOW) \
        + math.ceil(WINDOW_SLACK * max(0, max_n - WIDE_WINDOW))
    return max(16, -(-hosts // shards))


def candidates(found: list, shards: Iterable[int], earliest: dict[int, bytes]
               ) -> list[Candidate]:
    """(index, shard, host, page id) of every candidate in the candidates.lua replies of
    ``shards``; records each shard's earliest time with work in ``earliest``."""
    out = []
    for shard, (packed, quarantined, first_work) in zip(shards, found, strict=True):
        earliest[shard] = first_work
        log_quarantined(quarantined)
        out += [(index, shard, host, pid) for index, host, pid in wire.candidates(packed)]
    return out


def lease_of_reply(fields: tuple) -> Lease:
    """A Lease from a lease reply; ValueError (the reason to quarantine) for an
    unreadable URL or meta."""
    host, url, token, etag, lm, meta, due, first = fields
    url, _ = stored_url(url)
    meta = stored_meta(meta)
    return Lease(url=url, token=token, host=host.decode("utf-8"), meta=meta,
                    etag=stored_validator("etag", etag),
                    last_modified=stored_validator("last_modified", lm), due=due, first=first)


RENAMED = {"Dispatcher": "LeaseDesk"}
"""Retired names still importable (issue 61): old -> new (``frontier_rate.renamed``)."""


def __getattr__(name: str) -> Any:
    return resolve(globals(), name, RENAMED)

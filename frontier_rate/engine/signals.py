"""Change evidence that does not come from fetching the page: claims of sitemaps, feeds and
pushes (lua/hint.lua, with lua/signals.lua's checks; the rules in Python: ``evidence``).

``Signals.signal_many`` hands claims to their shards and counts the outcomes; ``Signals.trust``
reads how a (host, source) pair's claims fared. ``TrustLog`` says when a pair becomes
ignored or believed again: both hint.lua and observe.lua (whose fetches check pending
claims) report those changes, so ``Results`` logs through the same ``TrustLog``.

A namespace that is never told anything keeps no claim state at all: every script finds no
record and behaves as without this module.
"""

from __future__ import annotations

import logging
import struct
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from frontier_rate.engine.intake import Intake
from frontier_rate.engine.session import Session
from frontier_rate.engine.shards import ShardCalls
from frontier_rate.engine.validation import hint, host_name
from frontier_rate.math import cochange, evidence
from frontier_rate.math.lookalike import url_template
from frontier_rate.store import contract, wire
from frontier_rate.store.keys import page_id

logger = logging.getLogger(__name__)

HINT_CALL_CLAIMS = 500
"""Claims per lua/hint.lua call."""


class TrustLog:
    """Logs the trust changes of (host, source) pairs that scripts report: one WARNING the
    first time this process sees a pair become ignored, INFO after that and when one is
    believed again."""

    def __init__(self) -> None:
        self._warned: set[tuple[str, str]] = set()

    def log(self, flat: list) -> None:
        """Log a script's trust changes (lua/signals.lua SIGNAL_EVENTS)."""
        for host, source, transition in wire.signal_events(flat):
            if transition == evidence.BECAME_IGNORED:
                level = logging.INFO if (host, source) in self._warned else logging.WARNING
                self._warned.add((host, source))
                logger.log(level, "ignoring the %s claims of host %s: more than 1 in %d "
                           "disagreed with what fetches found (dates of unchanged pages, "
                           "generation times, constant or future dates)", source, host,
                           evidence.TRUST_RATIO)
            else:
                logger.info("believing the %s claims of host %s again", source, host)


class Signals:
    """Claims about pages (``Frontier.signal_many``) and their sources' standing
    (``Frontier.signal_trust``)."""

    def __init__(self, session: Session, calls: ShardCalls, intake: Intake,
                 trust_log: TrustLog) -> None:
        self.session = session
        self.calls = calls
        self.intake = intake  # unknown pages, added with ``discover``
        self.trust_log = trust_log

    def signal_many(self, claims: Iterable, now: float, *, discover: bool, weight: float
                  ) -> dict[str, int]:
        """``Frontier.signal_many`` at ``now`` (Redis's clock): every claim checked before any
        is sent, then pipelined per-shard calls; the count of each outcome and ``added``."""
        groups, urls = self._arguments(claims)
        counts = dict.fromkeys(evidence.OUTCOMES, 0)
        counts["added"] = 0
        if not groups:
            return counts
        step = HINT_CALL_CLAIMS * wire.HINT_FIELDS
        chunks = [(shard, i) for shard, args in groups.items() for i in range(0, len(args), step)]

        def build(pipe: Any) -> None:
            for shard, i in chunks:
                self.calls.call(pipe, "hint", shard, now, groups[shard][i:i + step])

        unknown: list[str] = []
        with self.session.errors("signal_many"):
            replies = self.calls.run_writes(build, dict.fromkeys(groups, now), len(chunks))
            for (shard, i), reply in zip(chunks, replies, strict=True):
                outcomes, events = wire.hint_outcomes(reply)
                first = i // wire.HINT_FIELDS
                for j, outcome in enumerate(outcomes):
                    counts[evidence.OUTCOMES[outcome]] += 1
                    if outcome == evidence.UNKNOWN:
                        unknown.append(urls[shard][first + j])
                self.trust_log.log(events)
        if discover and unknown:
            counts["added"] = self.intake.add_many(
                [(url, weight) for url in dict.fromkeys(unknown)], now)
        return counts

    def _arguments(self, claims: Iterable) -> tuple[dict[int, list], dict[int, list[str]]]:
        """lua/hint.lua's arguments per shard and the URLs they name, every claim checked
        before any is sent (``validation.hint``); claimed times on Redis's clock."""
        groups: dict[int, list] = defaultdict(list)
        urls: dict[int, list[str]] = defaultdict(list)
        for item in claims:
            url, host, changed_at, source = hint(item)
            if changed_at is not None:
                changed_at += self.session.offset
            shard = self.calls.of(host)
            groups[shard] += wire.hint_args(page_id(url), host, changed_at, source)
            urls[shard].append(url)
        return groups, urls

    def trust(self, host: str, source: str) -> dict[str, Any]:
        """``Frontier.signal_trust``: how the claims of ``source`` about ``host``'s pages
        fared (``evidence.Tally``)."""
        evidence.check_source(source)
        host = host_name(host)
        with self.session.errors("signal_trust"):
            raw = self.session.client.hget(self.session.keys.signal_trust(self.calls.of(host)),
                                           wire.signal_trust_field(host, source))
        tally = evidence.Tally(*wire.signal_tally(raw))
        return {"checked": int(tally.checked), "bad": int(tally.bad), "trusted": tally.trusted,
                "ignored": tally.ignored}


COCHANGE_RECORD = struct.Struct(contract.STRUCTS["COCHANGE"])


def cochange_tally(raw: bytes | None) -> cochange.Tally:
    """A host's co-change record as lua/signals.lua stores it (none, or an unreadable one,
    reads as an empty tally, as the Lua reads it)."""
    if not raw or len(raw) != COCHANGE_RECORD.size:
        return cochange.Tally()
    lo, hi, checks, hits, expected, events, confirmed = COCHANGE_RECORD.unpack(raw)
    if any(x != x for x in (lo, hi, checks, hits, expected, events, confirmed)) \
            or not 0 <= hits <= checks or expected < 0 or events < 0:
        return cochange.Tally()
    return cochange.Tally(lo, hi, checks, hits, expected, events, confirmed)


def neighbours(session: Session, calls: ShardCalls, host: str,
               url: str | None = None) -> dict[str, Any]:
    """``Frontier.neighbours``: whether ``host``'s pages (with ``url``: that page's URL group's,
    or its host's while the group is small, ``cochange.record_key``; named in ``key``) change
    together (math/cochange.py): the latest change event (``event_lo``, ``event_hi``: the
    window a fetch found it in; 0: none), its own decayed ``checks``, ``hits`` and hits
    ``expected`` by chance, ``share`` (q, shrunk toward its shard's population) and
    ``trusted`` (a trusted record's change brings its other pages forward); ``population``:
    the shard's pooled checks, hits and expected."""
    host = host_name(host)
    shard = calls.of(host)
    key = host
    with session.errors("neighbours"):
        if url is not None:
            group = host + url_template(url)
            key = cochange.record_key(host, url,
                                      session.client.zcard(session.keys.group_pages(shard, group)))
        own_raw, pop_raw = session.client.hmget(session.keys.cochange(shard), key, "")
    t, population = cochange_tally(own_raw), cochange_tally(pop_raw)
    shrunk = cochange.pooled(t, population)
    return {"key": key,
            "event_lo": session.local(t.lo) if t.hi else 0.0,
            "event_hi": session.local(t.hi) if t.hi else 0.0,
            "checks": t.checks, "hits": t.hits, "expected": t.expected, "events": t.events,
            "share": shrunk.share(),
            "trusted": shrunk.trusted(),
            "population": {"checks": population.checks, "hits": population.hits,
                           "expected": population.expected}}

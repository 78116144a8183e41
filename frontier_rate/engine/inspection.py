"""What a person or a tool reads of a frontier (the CLI, tests, ``Frontier.page``): page
records, the pages due soonest, every page, the quarantined ones, the counters, and what
the Redis server promises. Nothing here writes (``stats`` runs the read-only
lua/stats.lua), so a read-only replica serves it.
"""

from __future__ import annotations

import json
import logging
import math
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from frontier_rate.engine.session import Session, starting_rate
from frontier_rate.engine.shards import ShardCalls
from frontier_rate.engine.signals import neighbours
from frontier_rate.engine.validation import count, parse_url, stored_url
from frontier_rate.math import pattern
from frontier_rate.math.lookalike import url_template
from frontier_rate.store import health, wire
from frontier_rate.store.connection import scan_tagged
from frontier_rate.store.detection_memory import last_detection
from frontier_rate.store.errors import NamespaceLost
from frontier_rate.store.keys import Layout, page_id
from frontier_rate.store.namespace import SETTINGS, check_markers

logger = logging.getLogger(__name__)

STATS_HOSTS = 100_000
"""Hosts per shard whose queues ``stats`` counts for ``due_now``."""


class Inspector:
    """Reads page records and counters of one ``Session``'s namespace."""

    def __init__(self, session: Session, calls: ShardCalls) -> None:
        self.session = session
        self.calls = calls

    def due(self, limit: int = 20) -> list[dict]:
        """The ``limit`` queued pages that fall due soonest, earliest first (``Frontier.due``)."""
        count("limit", limit, minimum=1)
        session, keys = self.session, self.session.keys
        heads: list[tuple[float, int, str, bytes]] = []
        with session.errors("due"):
            for shard in range(session.shards):
                hosts = [h.decode() for h in session.client.zrange(keys.ready(shard), 0, -1)]
                pipe = session.client.pipeline(transaction=False)
                for host in hosts:
                    pipe.zrange(keys.queue(shard, host), 0, limit - 1, withscores=True)
                for host, entries in zip(hosts, pipe.execute(), strict=True):
                    heads += [(score, shard, host, pid) for pid, score in entries]
            heads = sorted(heads)[:limit]
            layouts = self.calls.layouts(shard for _, shard, _, _ in heads)
            pipe = session.client.pipeline(transaction=False)
            for _, shard, _, pid in heads:
                b = layouts[shard].bucket(pid)
                pipe.hget(keys.url(shard, b), pid)
                pipe.hget(keys.state(shard, b), pid)
                pipe.hget(keys.extras(shard, b), pid)
            replies = pipe.execute()
        pages = []
        for i, (score, _, host, _) in enumerate(heads):
            url, raw, extras = replies[3 * i: 3 * i + 3]
            if url is not None and raw is not None:
                pages.append(self.record(url.decode("utf-8", "replace"), host, raw, extras,
                                         score / 1e6))
        return pages

    def page(self, url: str) -> dict | None:
        """One page's record, or None if unknown (``Frontier.page``)."""
        host = parse_url(url)
        pid = page_id(url)
        shard = self.calls.of(host)
        with self.session.errors("page"):
            raw, extras, due, bad, kept = self._read_page(shard, host, pid)
        if raw is None:
            if bad is None:
                return None
            return broken_record(url, host, "quarantined", wire.quarantine_reason(bad))
        record = self.record(url, host, raw, extras, None if due is None else due / 1e6)
        state = pattern.unpack(kept)
        record["pattern"] = None if state is None else pattern.describe(
            state, self.session.options.server_clock_rate)
        record["neighbours"] = self.neighbours(host, record, url)
        record["url_group"] = self.url_group(host, url)
        if record["status"] == "leased":  # when the lease ends (it is handed out again then)
            with self.session.errors("page"):
                end = self.session.client.zscore(self.session.keys.prefix(shard) + "leases",
                                                 pid + host.encode("utf-8"))
            record["lease_ends"] = None if end is None else self.session.local(end / 1e6)
        return record

    def last_detection(self, url: str) -> bytes | None:
        """The stored record of the page's last content detection (detection/detection_record.py
        reads it), or None: kept only with the pages' detection memories in Redis."""
        with self.session.errors("page"):
            return last_detection(self.session.client, self.session.keys, url, parse_url(url))

    def neighbours(self, host: str, record: dict, url: str) -> str:
        """Why the co-change evidence of the page's URL group (or host, while the group is
        small; math/cochange.py, issue 62) moves this page or not, in words: ``frontier-rate
        inspect`` shows it (why a page became due)."""
        n = neighbours(self.session, self.calls, host, url)
        if not self.session.options.cochange:
            return "off (cochange=False)"
        whose = "the host" if n["key"] == host else f"its group {n['key']}"
        if n["event_hi"] == 0:
            return f"no change seen on {whose} yet"
        pop = n["population"]
        tally = (f"{n['hits']:.1f} of {n['checks']:.1f} checks changed with {whose}, "
                 f"{n['expected']:.2f} by chance, {n['events']:.0f} events confirmed; "
                 f"the shard's hosts and groups: {pop['hits']:.1f} of {pop['checks']:.1f}")
        if not n["trusted"]:
            return f"not trusted: {tally}"
        last = record.get("last_fetch")
        if last is not None and record["fetches"] and n["event_hi"] > last:
            return (f"trusted ({tally}): a change of {whose} seen at {n['event_hi']:.3f}, "
                    f"after this copy, makes it worth {n['share']:.2f} x its weight: brought "
                    f"forward")
        return f"trusted ({tally}): nothing new since this copy"

    def url_group(self, host: str, url: str) -> str:
        """The page's URL group (its host and path template, math/lookalike.py, issue 62) and
        that group's pool, in words: ``frontier-rate inspect`` names it."""
        group = host + url_template(url)
        with self.session.errors("page"):
            raw = self.session.client.hget(self.session.keys.host_prior(self.calls.of(host)),
                                           group)
        pool = wire.host_pool(raw)  # written only by processes with group_prior on
        if pool is None:
            return (f"{group}: no page pooled (the crawl runs without group_prior, or none of "
                    "the group's pages was observed yet)")
        pages, total = pool
        return (f"{group}: {pages:.0f} pages pooled, their planned rates' geometric mean "
                f"{math.exp(total / pages) * 86400:.3g}/day: a new page of the group starts "
                "from it")

    def _read_page(self, shard: int, host: str, pid: bytes) -> list:
        """(state, extras, due, quarantine record, pattern) of a page, read again if a
        bucket split moved it in between."""
        keys = self.session.keys
        layout = self.calls.layouts([shard])[shard]
        while True:
            b = layout.bucket(pid)
            pipe = self.session.client.pipeline(transaction=False)
            pipe.hget(keys.state(shard, b), pid)
            pipe.hget(keys.extras(shard, b), pid)
            pipe.zscore(keys.queue(shard, host), pid)
            pipe.hget(keys.bad(shard), pid)
            pipe.hget(keys.pattern(shard, b), pid)
            pipe.hmget(keys.cnt(shard), "bl", "bs")
            *found, now_layout = pipe.execute()
            now_layout = Layout.read(self.session.buckets, now_layout)
            if now_layout == layout:
                return found
            layout = now_layout

    def record(self, url: str, host: str, raw: bytes, extras: bytes | None,
               due: float | None) -> dict:
        """A page's record; ``due`` and the stored times are on Redis's clock, the record's
        on this process's."""
        local = self.session.local
        due = local(due)
        estimator = self.session.options.estimator
        try:
            s = wire.unpack_state(raw, estimator)
            etag, lm, meta_text = wire.unpack_extras(extras)
            meta = json.loads(meta_text) if meta_text else None
        except (ValueError, RecursionError) as exc:
            return broken_record(url, host, "corrupt", str(exc), due)
        if s["flags"] & wire.F_GONE:
            status = "gone"
        elif s["flags"] & wire.F_LEASED:
            status = "leased"
        elif s["fails"]:
            status = "retrying"
        elif s["fetches"] == 0:
            status = "new"
        else:
            status = "active"
        return {"url": url, "host": host, "weight": s["weight"],
                "estimate": wire.reported_rate(estimator, s["est"]), "fetches": s["fetches"],
                "changes": s["changes"],
                "last_fetch": local(s["last_fetch"]) if s["fetches"] else None,
                "next_due": due, "status": status, "p": s["p"], "fails": s["fails"],
                "source": bool(s["flags"] & wire.F_SOURCE), "meta": meta, "etag": etag,
                "last_modified": lm, "problem": None}

    def iter_pages(self) -> Iterator[dict]:
        """Every page's record, bucket by bucket (``Frontier.iter_pages``)."""
        session, keys = self.session, self.session.keys
        for shard in range(session.shards):
            pattern_ = keys.prefix(shard).replace("{", "\\{").replace("}", "\\}") + "s:*"
            with session.errors("iter_pages"):
                state_keys = list(scan_tagged(session.client, pattern_, keys.prefix(shard)))
            for key in state_keys:
                with session.errors("iter_pages"):
                    records, broken = self._bucket_records(shard, key)
                yield from records
                yield from broken

    def _bucket_records(self, shard: int, key: bytes) -> tuple[list[dict], list[dict]]:
        """The records of one state bucket, and those of its pages whose URL is unusable."""
        keys = self.session.keys
        b = int(key.rsplit(b":", 1)[1])
        pipe = self.session.client.pipeline(transaction=False)
        pipe.hgetall(key)
        pipe.hgetall(keys.url(shard, b))
        pipe.hgetall(keys.extras(shard, b))
        states, urls, extras = pipe.execute()
        items = []
        pipe = self.session.client.pipeline(transaction=False)
        broken = []
        for pid, raw in states.items():
            try:
                url, host = stored_url(urls.get(pid))
            except ValueError as exc:
                broken.append(broken_record(None, None, "corrupt",
                                            f"{exc} (page id {pid.hex()})"))
                continue
            items.append((url, host, raw, extras.get(pid)))
            pipe.zscore(keys.queue(shard, host), pid)
        dues = pipe.execute()
        return [self.record(url, host, raw, extra, None if due is None else due / 1e6)
                for (url, host, raw, extra), due in zip(items, dues, strict=True)], broken

    def quarantined(self) -> Iterator[dict]:
        """Every quarantined page, shard by shard (``Frontier.quarantined``)."""
        session, keys = self.session, self.session.keys
        for shard in range(session.shards):
            with session.errors("quarantined"):
                entries = list(session.client.hscan_iter(keys.bad(shard), count=1000))
                layout = self.calls.layouts([shard])[shard]
                pipe = session.client.pipeline(transaction=False)
                for pid, _ in entries:
                    pipe.hget(keys.url(shard, layout.bucket(pid)), pid)
                urls = pipe.execute() if entries else []
            for (pid, record), url in zip(entries, urls, strict=True):
                try:
                    host, reason, raw = wire.unpack_quarantine(record)
                except ValueError as exc:
                    host, reason, raw = None, str(exc), record
                yield {"url": None if url is None else url.decode("utf-8", "replace"),
                       "host": host, "reason": reason, "id": pid.hex(), "raw": raw.hex()}

    def stats(self, now: float) -> dict:
        """The namespace's counters (``Frontier.stats``)."""
        session = self.session
        totals: dict[str, float] = defaultdict(float)
        with session.errors("stats"):
            def build(pipe: Any) -> None:
                for shard in range(session.shards):
                    self.calls.call(pipe, "stats", shard, now, [str(STATS_HOSTS)])

            for flat in session.scripts.run(build):
                for i in range(0, len(flat), 2):
                    if flat[i] != b"id":  # the namespace marker (lua/lib_pages.lua start)
                        totals[flat[i].decode()] += float(flat[i + 1])
            nu = session.client.hgetall(session.keys.nu)
        planned = float(nu.get(b"planned_rate", 0.0))
        budget = session.settings["budget"]
        return {"pages": int(totals["pages"]), "due_now": int(totals["due_now"]),
                "leased": int(totals["leased"]),
                "leases_expired": int(totals["leases_expired"]), "gone": int(totals["gone"]),
                "sources": int(totals["sources"]),
                "quarantined": int(totals["quarantined"]),
                "fetches": int(totals["fetches"]), "changes": int(totals["changes"]),
                "dated_changes": int(totals["dated_changes"]),
                "date_hosts_ignored": int(totals["date_hosts_ignored"]),
                "claims": int(totals["claims"]),
                "signal_sources_ignored": int(totals["signal_sources_ignored"]),
                "cochange_pulls": int(totals["cochange_pulls"]),
                "hosts_queued": int(totals["hosts_queued"]),
                "nu": float(nu.get(b"nu", 0.0)), "budget": budget,
                "planned_rate": planned, "budget_use": planned / budget,
                "solved_at": session.local(float(nu[b"solved_at"])) if b"solved_at" in nu
                else None,
                # issue 35: the max_interval floor stretched where the budget cannot pay it
                "max_interval_effective": float(nu.get(b"max_interval_effective",
                                                       session.settings["max_interval"])),
                "max_interval_unaffordable": float(nu.get(b"max_interval_effective", 0.0))
                > session.settings["max_interval"],
                # issue 35: where new pages start, from the pages the last solve counted
                "starting_rate": starting_rate(float(nu.get(b"pages", 0.0)), budget,
                                               session.settings["prior_rate"])}

    def health(self) -> dict[str, Any]:
        """What the Redis server promises the namespace (``Frontier.health``)."""
        session = self.session
        with session.errors("health"):
            facts = health.server_facts(session.client)
            state = "whole" if session.namespace_id else "unchecked (no marker: opened read-only)"
            if session.namespace_id:
                try:
                    check_markers(session.client, session.scripts, session.keys, session.shards,
                                  session.namespace_id, session.redis_url)
                except NamespaceLost as exc:
                    state = f"lost: {exc}"
        return {**{f"redis_{k}": v for k, v in facts.items()}, "namespace": state,
                "clock_offset": session.offset,
                **{name: session.settings[name] for name in SETTINGS},
                "warnings": health.warnings(facts, session.redis_url)}


def broken_record(url: str | None, host: str | None, status: str, problem: str,
                  due: float | None = None) -> dict:
    """The record of a page whose state cannot be read: the usual fields, None where unknown."""
    return {"url": url, "host": host, "weight": None, "estimate": None, "fetches": None,
            "changes": None, "last_fetch": None, "next_due": due, "status": status, "p": None,
            "fails": None, "source": None, "meta": None, "etag": None, "last_modified": None, "problem": problem}

"""Engine and store under bad data (issue 8): corrupted page state, unsafe
validators and URLs, property-based checks of the state decoder and the
observe path, namespace isolation, and a static security check.

All against the real Redis of ``conftest.py``; virtual clocks throughout.
Hypothesis runs derandomized (fixed examples) with modest ``max_examples`` so
the module stays well under a minute.
"""

from __future__ import annotations

import ast
import json
import logging
import math
import re
import struct
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frontier_rate import Dispatch, Frontier
from frontier_rate.engine import MAX_URL_LENGTH, parse_url
from frontier_rate.store import (
    F_CHANGED,
    F_GONE,
    F_LEASED,
    STATE,
    STATE_INTERVAL,
    bucket_of,
    float32,
    pack_state,
    page_id,
    shard_of,
    unpack_state,
)

pytestmark = pytest.mark.reliability

PACKAGE = Path(__file__).resolve().parent.parent / "frontier_rate"
ESTIMATORS = ("lln", "sa", "sam", "interval")

FIXED = settings(derandomize=True, database=None, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow])
"""Deterministic hypothesis runs (CI sees the same examples every time)."""


def frontier(redis_url: str, namespace: str | None = None, **kw) -> Frontier:
    options = {"estimator": "sa", "budget": 1000.0, "min_host_delay": 0.0, "min_interval": 10.0,
               "max_interval": 1000.0, "lease_timeout": 60.0, "seed": 1}
    options.update(kw)
    return Frontier(redis_url, namespace=namespace or f"r{uuid.uuid4().hex[:12]}", **options)


def state_slot(f: Frontier, url: str) -> tuple[str, bytes]:
    """(state hash key, page id) of a page."""
    host = parse_url(url)
    pid = page_id(url)
    return f.keys.state(shard_of(host, f.shards), bucket_of(pid, f.buckets)), pid


def read_state(f: Frontier, url: str) -> bytes:
    key, pid = state_slot(f, url)
    return f.client.hget(key, pid)


def write_state(f: Frontier, url: str, raw: bytes) -> None:
    key, pid = state_slot(f, url)
    f.client.hset(key, pid, raw)


def with_fields(raw: bytes, estimator: str = "sa", **fields) -> bytes:
    """A valid packed state with some fields replaced (possibly by nonsense)."""
    state = unpack_state(raw, estimator)
    state.update(fields)
    return pack_state(state, interval=estimator == "interval")


def lease_all(f: Frontier, now: float) -> list[Dispatch]:
    """Every page due at ``now`` (next_requests offers one page per host per call)."""
    got: list[Dispatch] = []
    empty = 0
    while empty < 3:  # a call can come back empty when all its candidates were quarantined
        batch = f.next_requests(100, now=now)
        got += batch
        empty = 0 if batch else empty + 1
    return got


def fetched_frontier(redis_url: str, n: int = 6, **kw) -> tuple[Frontier, list[str]]:
    """A frontier whose n pages (on 2 hosts) were each fetched once at t = 0."""
    f = frontier(redis_url, **kw)
    urls = [f"http://h{i % 2}.example/p{i}" for i in range(n)]
    f.add_many([(u, 1.0, {"i": i}) for i, u in enumerate(urls)], now=0.0)
    got = lease_all(f, 0.0)
    assert len(got) == n
    assert all(o.accepted for o in f.observe_many(
        [(d, {"fingerprint": "v1", "fetched_at": 0.0}) for d in got]))
    return f, urls


CORRUPTIONS = [
    ("short", lambda raw: raw[:-1], "state is 47 bytes, expected 48"),
    ("long", lambda raw: raw + b"\0", "state is 49 bytes, expected 48"),
    ("empty", lambda raw: b"", "state is 0 bytes, expected 48"),
    ("nan weight", lambda raw: with_fields(raw, weight=math.nan), "weight is not a finite number"),
    ("negative weight", lambda raw: with_fields(raw, weight=-1.0), "weight is negative"),
    ("inf estimate", lambda raw: with_fields(raw, est=math.inf), "estimate is not a finite number"),
    ("negative estimate", lambda raw: with_fields(raw, est=-0.5), "estimate is negative"),
    ("nan p", lambda raw: with_fields(raw, p=math.nan), "p is not a finite number"),
    ("zero p after a fetch", lambda raw: with_fields(raw, p=0.0), "p is not positive after a fetch"),
    ("-inf last_fetch", lambda raw: with_fields(raw, last_fetch=-math.inf),
     "last_fetch is not a finite number"),
    ("changes > fetches", lambda raw: with_fields(raw, changes=2), "changes exceed fetches"),
    ("flags out of range", lambda raw: with_fields(raw, flags=64), "flags 64 out of range"),
]


# ---------------------------------------------------------------- quarantine


@pytest.mark.parametrize("name, corrupt, reason", CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS])
def test_corrupt_state_is_quarantined_and_the_rest_of_the_batch_is_dispatched(
        redis_url, name, corrupt, reason):
    f, urls = fetched_frontier(redis_url)
    bad = urls[2]
    written = corrupt(read_state(f, bad))
    write_state(f, bad, written)
    # before any script reads it, inspection shows it without crashing
    assert f.page(bad)["status"] == "corrupt" and f.page(bad)["problem"] == reason
    assert f.stats(now=0.0)["pages"] == 6
    assert sum(1 for p in f.iter_pages() if p["status"] == "corrupt") == 1
    got = lease_all(f, now=5000.0)  # every page due again
    assert sorted(d.url for d in got) == sorted(u for u in urls if u != bad)
    stats = f.stats(now=5000.0)
    assert stats["quarantined"] == 1 and stats["pages"] == 5 and stats["leased"] == 5
    assert f.page(bad)["status"] == "quarantined" and f.page(bad)["problem"] == reason
    (entry,) = list(f.quarantined())
    assert entry["url"] == bad and entry["reason"] == reason and entry["host"] == "h0.example"
    assert bytes.fromhex(entry["raw"]) == written
    # the crawl goes on: the rest observe fine; the quarantined page is never handed out
    assert all(o.accepted for o in f.observe_many(
        [(d, {"fingerprint": "v2", "fetched_at": 5001.0}) for d in got]))
    assert all(d.url != bad for d in lease_all(f, now=20000.0))
    assert f.stats(now=20000.0)["fetches"] == 6 + 5


def test_quarantine_keeps_the_exact_corrupt_bytes(redis_url):
    f, urls = fetched_frontier(redis_url, n=2)
    garbage = bytes(range(200, 248))
    write_state(f, urls[0], garbage)
    lease_all(f, now=5000.0)
    (entry,) = list(f.quarantined())
    assert bytes.fromhex(entry["raw"]) == garbage
    assert entry["reason"] == _python_reason(garbage, "sa") == "weight is negative"


@pytest.mark.parametrize("flag", [F_LEASED, F_GONE])
def test_a_queued_page_marked_leased_or_gone_is_quarantined_not_offered_forever(redis_url, flag):
    """A valid-looking state that contradicts the queue would otherwise be the host's
    candidate on every call and be refused by lease every time, starving the host."""
    f, urls = fetched_frontier(redis_url, n=4)  # h0: p0, p2; h1: p1, p3
    write_state(f, urls[0], with_fields(read_state(f, urls[0]), flags=flag, est=1.0))
    got = lease_all(f, now=5000.0)
    assert sorted(d.url for d in got) == sorted(urls[1:])
    assert f.page(urls[0])["problem"] == "queued but marked leased or gone"


def _python_reason(raw: bytes, estimator: str) -> str | None:
    try:
        unpack_state(raw, estimator)
    except ValueError as exc:
        return str(exc)
    return None


def test_observe_of_a_corrupted_leased_page_logs_one_error_and_the_batch_goes_on(redis_url, caplog):
    f, urls = fetched_frontier(redis_url)
    got = lease_all(f, now=5000.0)
    bad = next(d for d in got if d.url == urls[3])
    write_state(f, bad.url, read_state(f, bad.url)[:40])
    with caplog.at_level(logging.ERROR, logger="frontier_rate.engine"):
        results = f.observe_many([(d, {"fingerprint": "v2", "fetched_at": 5001.0}) for d in got])
    by_url = {d.url: o for d, o in zip(got, results, strict=True)}
    assert not by_url[bad.url].accepted and by_url[bad.url].next_due is None
    assert all(o.accepted and o.next_due > 5001.0 for u, o in by_url.items() if u != bad.url)
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert bad.url in errors[0].getMessage()
    assert "state is 40 bytes, expected 48" in errors[0].getMessage()
    stats = f.stats(now=5001.0)
    assert stats["quarantined"] == 1 and stats["fetches"] == 6 + 5 and stats["leased"] == 0
    # observing it again (a retry by the crawler) is still refused, with the stored reason
    with caplog.at_level(logging.ERROR, logger="frontier_rate.engine"):
        again = f.observe(bad, fingerprint="v2", fetched_at=5002.0)
    assert not again.accepted and "state is 40 bytes" in caplog.records[-1].getMessage()
    assert f.stats(now=5002.0)["fetches"] == 11


def test_failed_on_a_corrupted_page_is_refused_without_error(redis_url, caplog):
    f, urls = fetched_frontier(redis_url, n=2)
    (d, other) = sorted(lease_all(f, now=5000.0), key=lambda d: d.url)
    write_state(f, d.url, with_fields(read_state(f, d.url), flags=255))
    with caplog.at_level(logging.ERROR, logger="frontier_rate.engine"):
        f.failed(d, "timeout", now=5001.0)
    assert "flags 255 out of range" in caplog.text and d.url in caplog.text
    f.failed(other, "timeout", now=5001.0)
    assert f.page(other.url)["status"] == "retrying"
    assert f.stats(now=5001.0)["quarantined"] == 1


def test_an_id_queued_without_state_is_quarantined_not_stuck(redis_url):
    """A lost state (evicted, deleted) used to leave its id at the head of the host
    queue forever, skipped by every candidates call."""
    f, urls = fetched_frontier(redis_url, n=2)
    key, pid = state_slot(f, urls[0])
    f.client.hdel(key, pid)
    assert f.page(urls[0]) is None  # nothing left to show but the queue entry
    lease_all(f, now=5000.0)
    assert f.page(urls[0])["status"] == "quarantined"
    assert f.page(urls[0])["problem"] == "state missing"
    stats = f.stats(now=5000.0)
    assert stats["pages"] == 1 and stats["quarantined"] == 1


def test_missing_url_bad_meta_and_malformed_extras_are_quarantined_at_lease(redis_url, caplog):
    f, urls = fetched_frontier(redis_url, n=6)
    host, pid = parse_url(urls[0]), page_id(urls[0])
    shard, b = shard_of(host, f.shards), bucket_of(pid, f.buckets)
    f.client.hdel(f.keys.url(shard, b), pid)                              # URL lost
    for url, extras in ((urls[1], struct.pack("<HH", 0, 0) + b"{not json"),   # meta not JSON
                        (urls[2], b"\x01"),                                   # too short
                        (urls[3], struct.pack("<HH", 500, 0) + b"x"),         # lengths past end
                        (urls[4], struct.pack("<HH", 0, 0) + b"[1, 2]")):     # not an object
        h, p = parse_url(url), page_id(url)
        f.client.hset(f.keys.extras(shard_of(h, f.shards), bucket_of(p, f.buckets)), p, extras)
    with caplog.at_level(logging.ERROR, logger="frontier_rate.engine"):
        got = lease_all(f, now=5000.0)
    assert [d.url for d in got] == [urls[5]]
    reasons = {e["id"]: e["reason"] for e in f.quarantined()}
    assert reasons == {page_id(urls[0]).hex(): "URL missing",
                       page_id(urls[1]).hex(): "meta is not valid JSON (JSONDecodeError)",
                       page_id(urls[2]).hex(): "extras are malformed",
                       page_id(urls[3]).hex(): "extras are malformed",
                       page_id(urls[4]).hex(): "meta is not a JSON object (list)"}
    assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 5
    assert f.stats(now=5000.0)["quarantined"] == 5 and f.stats(now=5000.0)["pages"] == 1
    # re-adding (with meta) brings them back with fresh states
    assert f.add_many([(u, 1.0, {"again": True}) for u in urls[1:5]], now=5000.0) == 4
    again = lease_all(f, now=5000.0)
    assert sorted(d.url for d in again) == sorted(urls[1:5])
    assert all(d.meta == {"again": True} for d in again)


def test_readding_a_quarantined_url_gives_a_fresh_state(redis_url):
    f, urls = fetched_frontier(redis_url, n=2)
    write_state(f, urls[0], b"\xff" * 48)
    lease_all(f, now=5000.0)
    assert f.stats(now=5000.0)["quarantined"] == 1
    assert f.add(urls[0], 2.0, now=6000.0) is True  # counted as new
    page = f.page(urls[0])
    assert page["status"] == "new" and page["fetches"] == 0 and page["weight"] == 2.0
    assert page["meta"] == {"i": 0}, "the URL's meta survives quarantine"
    assert page["next_due"] == 6000.0 and page["problem"] is None
    stats = f.stats(now=6000.0)
    assert stats["quarantined"] == 0 and stats["pages"] == 2
    assert list(f.quarantined()) == []
    (d,) = [d for d in lease_all(f, now=6000.0) if d.url == urls[0]]
    assert f.observe(d, fingerprint="z", fetched_at=6001.0).accepted
    assert f.page(urls[0])["fetches"] == 1


def test_add_over_a_corrupt_state_replaces_it(redis_url, caplog):
    f, urls = fetched_frontier(redis_url, n=2)
    write_state(f, urls[1], with_fields(read_state(f, urls[1]), weight=math.nan))
    with caplog.at_level(logging.ERROR, logger="frontier_rate.engine"):
        assert f.add(urls[1], 3.0, now=100.0) is True
    assert urls[1] in caplog.text and "weight is not a finite number" in caplog.text
    assert f.page(urls[1])["status"] == "new" and f.page(urls[1])["weight"] == 3.0
    stats = f.stats(now=100.0)
    assert stats["pages"] == 2 and stats["quarantined"] == 0


def test_due_and_export_do_not_crash_on_corrupt_values(redis_url):
    f, urls = fetched_frontier(redis_url, n=4)
    write_state(f, urls[0], b"junk")
    host, pid = parse_url(urls[1]), page_id(urls[1])
    f.client.hset(f.keys.url(shard_of(host, f.shards), bucket_of(pid, f.buckets)), pid, b"\xff\xfe")
    host, pid = parse_url(urls[2]), page_id(urls[2])
    f.client.hset(f.keys.extras(shard_of(host, f.shards), bucket_of(pid, f.buckets)), pid,
                  struct.pack("<HH", 0, 0) + b"{\"a\": ")
    due = f.due(10)
    assert len(due) == 4
    statuses = {p["url"]: p["status"] for p in due}
    assert statuses[urls[0]] == "corrupt" and statuses[urls[2]] == "corrupt"
    assert statuses[urls[3]] == "active"
    pages = {p["url"]: p for p in f.iter_pages()}
    assert len(pages) == 4
    assert pages[urls[0]]["problem"] == "state is 4 bytes, expected 48"
    assert pages[None]["problem"] == f"URL is not UTF-8 (page id {page_id(urls[1]).hex()})"
    assert pages[urls[2]]["status"] == "corrupt"
    assert pages[urls[2]]["problem"].startswith("Expecting value")  # json's own words
    assert pages[urls[3]]["status"] == "active" and pages[urls[3]]["problem"] is None
    assert len({tuple(sorted(p)) for p in pages.values()}) == 1, "every record has the same fields"
    assert f.stats(now=0.0)["pages"] == 4


def test_a_malformed_host_value_reads_as_the_default(redis_url):
    f, urls = fetched_frontier(redis_url, n=2)
    for shard in range(f.shards):
        for host in ("h0.example", "h1.example"):
            if shard == shard_of(host, f.shards):
                f.client.hset(f.keys.shard_keys(shard)[1], host, b"\x00\x01")
    assert len(lease_all(f, now=5000.0)) == 2


def test_unpack_state_raises_value_error_naming_the_length():
    for size in (0, 1, 47, 49, 63, 65, 1000):
        with pytest.raises(ValueError, match=rf"state is {size} bytes, expected 48 or 64"):
            unpack_state(b"\0" * size)
    with pytest.raises(ValueError, match="state is 48 bytes, expected 64"):
        unpack_state(b"\0" * 48, "interval")
    with pytest.raises(ValueError, match="state must be bytes"):
        unpack_state("x" * 48)  # type: ignore[arg-type]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "frontier_rate", *args], capture_output=True,
                          text=True, timeout=60)


def test_cli_stats_and_quarantine_list_the_quarantined_pages(redis_url):
    f, urls = fetched_frontier(redis_url, n=3)
    write_state(f, urls[1], b"\0" * 12)
    lease_all(f, now=5000.0)
    common = ("--redis", redis_url, "--namespace", f.namespace)
    stats = cli("stats", *common, "--json")
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["quarantined"] == 1
    listed = cli("quarantine", *common, "--json")
    assert listed.returncode == 0, listed.stderr
    (entry,) = json.loads(listed.stdout)
    assert entry["url"] == urls[1] and entry["reason"] == "state is 12 bytes, expected 48"
    table = cli("quarantine", *common)
    assert urls[1] in table.stdout and "state is 12 bytes" in table.stdout
    inspect = cli("inspect", urls[1], *common, "--json")
    assert json.loads(inspect.stdout)["status"] == "quarantined"
    f.add(urls[1], now=6000.0)
    assert cli("quarantine", *common).stdout.strip() == "no quarantined pages"

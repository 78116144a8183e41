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
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from frontier_rate import Frontier, Lease
from frontier_rate.engine.validation import MAX_URL_LENGTH, parse_url
from frontier_rate.store.keys import bucket_of, float32, page_id, shard_of
from frontier_rate.store.wire import (
    F_CHANGED,
    F_GONE,
    F_LEASED,
    F_UNSETTLED,
    STATE,
    STATE_INTERVAL,
    pack_state,
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


def lease_all(f: Frontier, now: float) -> list[Lease]:
    """Every page due at ``now`` (next_requests offers one page per host per call)."""
    got: list[Lease] = []
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
    with caplog.at_level(logging.ERROR, logger="frontier_rate.engine.frontier"):
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
    with caplog.at_level(logging.ERROR, logger="frontier_rate.engine.frontier"):
        again = f.observe(bad, fingerprint="v2", fetched_at=5002.0)
    assert not again.accepted and "state is 40 bytes" in caplog.records[-1].getMessage()
    assert f.stats(now=5002.0)["fetches"] == 11


def test_failed_on_a_corrupted_page_is_refused_without_error(redis_url, caplog):
    f, urls = fetched_frontier(redis_url, n=2)
    (d, other) = sorted(lease_all(f, now=5000.0), key=lambda d: d.url)
    write_state(f, d.url, with_fields(read_state(f, d.url), flags=255))
    with caplog.at_level(logging.ERROR, logger="frontier_rate.engine.frontier"):
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
    with caplog.at_level(logging.ERROR, logger="frontier_rate.engine.frontier"):
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


def test_a_page_quarantined_at_lease_leaves_the_cells_its_host_pool_and_the_sources(redis_url):
    """quarantine.lua: a leased page whose state is sound but whose meta the process could
    not read leaves, with it, the policy cells, its host's pooled prior and the count of
    sources. Before, the cells and the pool kept it and the sources count too, and adding the
    URL again counted it twice in the cells."""
    f = frontier(redis_url)
    host = "h0.example"
    urls = [f"http://{host}/p{i}" for i in range(3)]
    sitemap = f"http://{host}/sitemap.xml"
    f.add_many([(u, 1.0, {"i": i}) for i, u in enumerate(urls)] + [(sitemap, 0.3, None, 0, True)],
               now=0.0)
    for t in (0.0, 1e4):  # two fetches each (max_interval 1000): the pages pool their rates
        got = lease_all(f, now=t)
        assert len(got) == 4
        assert all(o.accepted for o in f.observe_many(
            [(d, {"fingerprint": "v1", "fetched_at": t}) for d in got]))
    shard = shard_of(host, f.shards)

    def pooled() -> float:
        raw = f.client.hget(f.keys.host_prior(shard), host)
        return struct.unpack("<dd", raw)[0] if raw else 0.0

    def in_cells() -> float:
        return sum(c[0] for c in f.cells().values())

    assert (pooled(), in_cells(), f.stats(now=1e4)["sources"]) == (3, 3, 1)
    for url in (urls[0], sitemap):
        p = page_id(url)
        f.client.hset(f.keys.extras(shard, bucket_of(p, f.buckets)), p,
                      struct.pack("<HH", 0, 0) + b"{not json")
    got = lease_all(f, now=2e4)
    assert sorted(d.url for d in got) == sorted(urls[1:])
    stats = f.stats(now=2e4)
    assert stats["quarantined"] == 2 and stats["pages"] == 2 and stats["sources"] == 0
    assert (pooled(), in_cells()) == (2, 2)
    # added again: fresh states, each counted once (a new page pools nothing before 2 fetches)
    assert f.add_many([(urls[0], 1.0, {"i": 0}), (sitemap, 0.3, None, 0, True)], now=2e4) == 2
    stats = f.stats(now=2e4)
    assert stats["quarantined"] == 0 and stats["pages"] == 4 and stats["sources"] == 1
    assert (pooled(), in_cells()) == (2, 3)


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
    with caplog.at_level(logging.ERROR, logger="frontier_rate.engine.frontier"):
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


# ---------------------------------------------------------------- validators and URLs

UNSAFE_VALIDATORS = ['"abc"\r\nSet-Cookie: x=1', '"a\nb"', '"a\rb"', '"nul\x00"', '"tab\tx"',
                     '"del\x7f"', '"esc\x1b[0m"', '"caf\u00e9"', "W/\"\u2028\"", "Mon, 01 Jan 2024\x85"]


@pytest.mark.parametrize("bad", UNSAFE_VALIDATORS, ids=[repr(v) for v in UNSAFE_VALIDATORS])
def test_validators_that_could_break_a_request_header_are_not_stored(redis_url, bad):
    f = frontier(redis_url)
    f.add("http://a.example/", now=0.0)
    (d,) = f.next_requests(1, now=0.0)
    assert f.observe(d, fingerprint="v1", fetched_at=0.0, etag=bad, last_modified=bad).accepted
    page = f.page(d.url)
    assert page["etag"] is None and page["last_modified"] is None
    (d,) = f.next_requests(1, now=5000.0)
    assert d.etag is None and d.last_modified is None
    # a safe pair is stored, and an unsafe one later does not replace it
    f.observe(d, fingerprint="v1", fetched_at=5000.0, etag='W/"ok-1"',
              last_modified="Mon, 01 Jan 2024 00:00:00 GMT")
    (d,) = f.next_requests(1, now=10000.0)
    assert d.etag == 'W/"ok-1"' and d.last_modified == "Mon, 01 Jan 2024 00:00:00 GMT"
    f.observe(d, not_modified=True, fetched_at=10000.0, etag=bad, last_modified=bad)
    (d,) = f.next_requests(1, now=20000.0)
    assert d.etag == 'W/"ok-1"' and d.last_modified == "Mon, 01 Jan 2024 00:00:00 GMT"


def test_unsafe_validators_written_into_redis_are_not_handed_out(redis_url):
    """Defence in depth: a validator edited into Redis never reaches a Lease."""
    f = frontier(redis_url)
    url = "http://a.example/"
    f.add(url, meta={"k": 1}, now=0.0)
    host, pid = parse_url(url), page_id(url)
    etag, lm, meta = b'"x"\r\nX-Evil: 1', b"ok", b'{"k": 1}'
    f.client.hset(f.keys.extras(shard_of(host, f.shards), bucket_of(pid, f.buckets)), pid,
                  struct.pack("<HH", len(etag), len(lm)) + etag + lm + meta)
    (d,) = f.next_requests(1, now=0.0)
    assert d.etag is None and d.last_modified == "ok" and d.meta == {"k": 1}


HEADER_INJECTION_URLS = ["http://a.example/x\r\nSet-Cookie: y=1", "http://a.example/x\ny",
                         "http://a.example/x\ry", "http://a.example/a b", "http://a.example/\ttab",
                         "http://a.example/nul\x00", "http://a.example/del\x7f",
                         "http://a.example\r\n.evil/", " http://a.example/", "http://a.example/\x1b"]


@pytest.mark.parametrize("url", HEADER_INJECTION_URLS, ids=[repr(u) for u in HEADER_INJECTION_URLS])
def test_urls_with_header_injection_characters_are_refused_by_add(redis_url, url):
    f = frontier(redis_url)
    with pytest.raises(ValueError, match="whitespace/control characters") as info:
        f.add(url, now=0.0)
    assert repr(url)[1:20] in str(info.value), "the error names the URL"
    assert f.stats(now=0.0)["pages"] == 0


@pytest.mark.parametrize("url", HEADER_INJECTION_URLS[:4], ids=[repr(u) for u in HEADER_INJECTION_URLS[:4]])
def test_add_many_with_one_bad_url_adds_nothing_and_names_it(redis_url, url):
    f = frontier(redis_url)
    good = [f"http://b{i}.example/{i}" for i in range(50)]
    with pytest.raises(ValueError) as info:
        f.add_many(good[:25] + [(url, 1.0)] + good[25:], now=0.0)
    assert repr(url)[1:20] in str(info.value)
    assert f.stats(now=0.0)["pages"] == 0
    assert all(f.page(u) is None for u in good)


def test_percent_encoded_crlf_is_a_valid_url_and_stays_encoded(redis_url):
    f = frontier(redis_url)
    url = "http://a.example/x%0d%0aSet-Cookie:%20y=1?q=%0D%0A"
    assert f.add(url, now=0.0)
    (d,) = f.next_requests(1, now=0.0)
    assert d.url == url and "\r" not in d.url and "\n" not in d.url
    assert f.page(url)["url"] == url
    assert [p["url"] for p in f.iter_pages()] == [url]


def test_url_length_limit_is_exact(redis_url):
    f = frontier(redis_url)
    base = "http://a.example/"
    longest = base + "x" * (MAX_URL_LENGTH - len(base))
    assert f.add(longest, now=0.0) and f.page(longest)["url"] == longest
    with pytest.raises(ValueError, match=rf"too long \({MAX_URL_LENGTH + 1} > {MAX_URL_LENGTH}"):
        f.add(longest + "y", now=0.0)
    with pytest.raises(ValueError, match="too long") as info:
        f.add(base + "z" * 100_000, now=0.0)
    assert len(str(info.value)) < 300, "a huge URL is shortened in the message"


@pytest.mark.parametrize("url, fragment", [
    ("a.example/x", "scheme"), ("//a.example/x", "scheme"), ("ftp://a.example/x", "'ftp'"),
    ("javascript:alert(1)", "'javascript'"), ("http:///x", "no host"), ("http://", "no host"),
    ("http://a.example:99999/", "not a valid URL"), ("http://a.example:port/", "not a valid URL"),
    ("", "empty"), (42, "must be a string"), (None, "must be a string"),
    (b"http://a.example/", "must be a string"),
])
def test_invalid_urls_are_refused_by_add_and_add_many(redis_url, url, fragment):
    f = frontier(redis_url)
    with pytest.raises(ValueError, match=re.escape(fragment)):
        f.add(url, now=0.0)
    with pytest.raises(ValueError, match=re.escape(fragment)):
        f.add_many(["http://ok.example/", url], now=0.0)
    with pytest.raises(ValueError, match=re.escape(fragment)):
        f.add_many([("http://ok.example/", 1.0), (url, 1.0)], now=0.0)
    assert f.stats(now=0.0)["pages"] == 0


# ---------------------------------------------------------------- property-based: state decoder


def _f32(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(float32(lo), float32(hi), width=32, allow_nan=False)


@st.composite
def valid_states(draw, estimator: str) -> dict:
    """States the engine could write. Ranges are realistic (rates <= 1e6/s, times within
    ±1e12 s) so that engine arithmetic on them stays finite; the decoder itself is
    exercised on arbitrary bytes below."""
    fetches = draw(st.integers(0, 2**32 - 1))
    changes = draw(st.integers(0, fetches))
    rate = st.floats(0.0, 1e6)
    if estimator in ("lln", "sa"):
        est = draw(rate)
    elif estimator == "sam":
        est = draw(st.floats(-1e6, 1e6))
    else:
        est = draw(st.floats(-690.0, 690.0))
    aux = draw(st.floats(0.0, 1e12) if estimator in ("lln", "interval") else st.floats(-1e6, 1e6))
    p = draw(_f32(1e-9, 1e3) if fetches else st.just(0.0))
    interval = estimator == "interval"
    return {"weight": draw(_f32(0.0, 1e30)), "est": est, "aux": aux, "p": p,
            "last_fetch": draw(st.floats(-1e12, 1e12)), "fetches": fetches, "changes": changes,
            "leases": draw(st.integers(0, 65535)), "fp": draw(st.binary(min_size=4, max_size=4)),
            "flags": draw(st.integers(0, 31)), "fails": draw(st.integers(0, 15)),
            "notfound": draw(st.integers(0, 15)),
            "x1": draw(st.floats(0.0, 1e6)) if interval else 0.0,
            "x2": draw(st.floats(0.0, 1e6)) if interval else 0.0}


BAD_NUMBERS = st.sampled_from([math.nan, math.inf, -math.inf, -1.0, -1e-30])


@st.composite
def raw_states(draw, estimator: str) -> bytes:
    """Bytes to store as a page state: valid, one field broken, or arbitrary."""
    interval = estimator == "interval"
    size = STATE_INTERVAL.size if interval else STATE.size
    kind = draw(st.sampled_from(["valid", "broken field", "random", "random length"]))
    if kind == "random":
        return draw(st.binary(min_size=size, max_size=size))
    if kind == "random length":
        return draw(st.binary(max_size=100))
    state = draw(valid_states(estimator))
    if kind == "broken field":
        field = draw(st.sampled_from(["weight", "est", "aux", "p", "last_fetch", "changes", "flags"]
                                     + (["x1", "x2"] if interval else [])))
        if field == "changes":
            state["changes"] = state["fetches"] + 1 if state["fetches"] < 2**32 - 1 else 0
            if state["changes"] == 0:
                state["fetches"], state["changes"] = 0, 1
        elif field == "flags":
            state["flags"] = draw(st.integers(32, 255))
        else:
            state[field] = draw(BAD_NUMBERS)
    return pack_state(state, interval=interval)


@pytest.mark.parametrize("estimator", ESTIMATORS)
@FIXED
@given(data=st.data())
def test_pack_unpack_round_trip(estimator, data):
    state = data.draw(valid_states(estimator))
    raw = pack_state(state, interval=estimator == "interval")
    assert len(raw) == (64 if estimator == "interval" else 48)
    assert unpack_state(raw, estimator) == state
    assert pack_state(unpack_state(raw, estimator), interval=estimator == "interval") == raw


@FIXED
@given(raw=st.one_of(st.binary(max_size=200), st.binary(min_size=48, max_size=48),
                     st.binary(min_size=64, max_size=64)),
       estimator=st.sampled_from((None,) + ESTIMATORS))
def test_arbitrary_bytes_decode_to_a_state_or_value_error(raw, estimator):
    try:
        state = unpack_state(raw, estimator)
    except ValueError as exc:
        assert str(exc)  # a message, never struct.error or anything else
        return
    assert isinstance(state, dict) and all(math.isfinite(state[k]) for k in ("weight", "est", "p"))
    assert state["changes"] <= state["fetches"] and 0 <= state["flags"] < 2 * F_UNSETTLED


def _reported(estimator: str, est: float) -> float:
    if estimator == "interval":
        return math.exp(est)
    return max(est, 0.0) if estimator == "sam" else est


@pytest.mark.parametrize("estimator", ESTIMATORS)
@settings(FIXED, max_examples=60)
@given(data=st.data())
def test_lua_decoder_agrees_with_python(redis_url, estimator, data):
    """Store bytes as a page's state, then let Lua read it (a stale observe: read-only)
    and rewrite it (add with a new weight). Lua quarantines exactly the states
    Python rejects, with the same reason; for the others it reports the same
    estimate and change flag, and its re-encoding is byte-identical to Python's
    with only the weight changed."""
    f = _shared_frontier(redis_url, estimator)
    raw = data.draw(raw_states(estimator))
    url = f"http://agree.example/{uuid.uuid4().hex}"
    f.add(url, now=0.0)
    write_state(f, url, raw)
    problem = _python_reason(raw, estimator)
    event("quarantined" if problem else "valid")
    token = 1 if problem else (unpack_state(raw, estimator)["leases"] + 1) % 65536
    obs = f.observe(Lease(url=url, token=str(token), host="agree.example"),
                    fingerprint="x", fetched_at=1.0)
    assert not obs.accepted
    page = f.page(url)
    if problem:
        assert page["status"] == "quarantined" and page["problem"] == problem
        assert read_state(f, url) is None
        return
    state = unpack_state(raw, estimator)
    assert page["problem"] is None and read_state(f, url) == raw, "a stale observe writes nothing"
    expected = _reported(estimator, state["est"])
    assert obs.estimate == pytest.approx(expected, rel=1e-15) or obs.estimate == expected
    assert obs.changed == bool(state["flags"] & F_CHANGED)
    if not state["flags"] & F_GONE:
        new_weight = float32(state["weight"] + 1.0)
        if new_weight > 1e30:  # add() refuses weights above 1e30 (engine.add_many)
            new_weight = float32(state["weight"] / 2)
        assume_changed = new_weight != state["weight"]
        f.add(url, new_weight, now=0.0)
        if assume_changed:
            state["weight"] = new_weight
        assert read_state(f, url) == pack_state(state, interval=estimator == "interval")


_FRONTIERS: dict[tuple[str, str], Frontier] = {}


def _shared_frontier(redis_url: str, estimator: str) -> Frontier:
    """One frontier per estimator for the many small examples of a property test."""
    key = (redis_url, estimator)
    if key not in _FRONTIERS:
        _FRONTIERS[key] = frontier(redis_url, estimator=estimator)
    return _FRONTIERS[key]


# ---------------------------------------------------------------- property-based: observe path

SM_URLS = [f"http://h{i % 2}.example/{i}" for i in range(4)]
LEASE_TIMEOUT, MIN_INTERVAL, MAX_INTERVAL = 60.0, 10.0, 1000.0
MAX_EXP_DRAW = 53 * math.log(2)
"""Largest -ln(u) of the exponential draw: u = 1 - random() >= 2^-53 (results.Results.pack)."""

OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("next"), st.sampled_from([0.0, 1.0, 9.5, 30.0, 60.0, 61.0, 400.0, 3000.0]),
              st.integers(1, 4)),
    st.tuples(st.just("observe"), st.integers(0, 10**6), st.sampled_from(["a", "b", "c"]),
              st.booleans(), st.sampled_from([200, 200, 200, 304, 404, 503]),
              st.sampled_from([0.0, 0.5, 5.0, 20.0])),
    st.tuples(st.just("replay"), st.integers(0, 10**6)),
    st.tuples(st.just("failed"), st.integers(0, 10**6), st.sampled_from([None, 404, 503])),
), min_size=1, max_size=30)


def _us(t: float) -> int:
    """A time as the whole microseconds of the engine's zset scores (lua/lib.lua, us)."""
    return math.floor(t * 1e6 + 0.5)


class LeaseModel:
    """What the engine must do with leases, written down independently of it.

    A page leased at t holds an open lease (its newest token) until an accepted
    observe/failed, or until a next_requests call at a time >= t + lease_timeout
    gives it back. An observe is accepted once per token, while that token is
    the open lease; asking again with the same token is a replay (accepted, not
    counted) only while no newer lease exists; failed() consumes the token.
    """

    def __init__(self) -> None:
        self.now = 0.0
        self.open: dict[str, tuple[str, int]] = {}    # url -> (token, deadline in µs)
        self.newest: dict[str, str] = {}              # url -> newest token handed out
        self.done: dict[tuple[str, str], tuple] = {}  # (url, token) -> ("observe", obs) | ("fail",)
        self.fetches = dict.fromkeys(SM_URLS, 0)

    def reclaim(self, now: float) -> None:
        for url, (_, deadline) in list(self.open.items()):
            if deadline <= _us(now):
                del self.open[url]

    def leased(self, d: Lease, now: float) -> None:
        assert d.url not in self.open, "a page was handed out twice"
        self.open[d.url] = (d.token, _us(now + LEASE_TIMEOUT))
        self.newest[d.url] = d.token

    def outcome(self, d: Lease, observe: bool) -> str:
        """'new', 'replay' or 'rejected' for an observe (or a failed) of ``d`` now."""
        key = (d.url, d.token)
        if key in self.done:
            first = self.done[key][0]
            return "replay" if observe and first == "observe" and self.newest[d.url] == d.token \
                else "rejected"
        return "new" if self.open.get(d.url, (None,))[0] == d.token else "rejected"


@pytest.mark.parametrize("estimator", ["sam", "interval"])
@settings(FIXED, max_examples=40)
@given(operations=OPERATIONS)
def test_observe_path_keeps_its_invariants(redis_url, estimator, operations):
    """Random next_requests / observe / replayed observe / failed sequences on 4 pages
    and 2 hosts, on a virtual clock; invariants checked after every step.

    Tolerances: due times are stored in whole microseconds (±0.5 µs, we allow 1 µs).
    The planned mean interval lies in [min_interval, max_interval]; sam draws the
    interval as -ln(u) x mean with u in [2^-53, 1], so next_due - fetched_at lies in
    [0, 53 ln 2 x max_interval]; interval plans the mean itself: [min, max]. The
    reported estimate is >= 0 (0 until a change is seen; the policy plans with
    max(estimate, 1/max_interval)); interval's is exp(log-rate) > 0.
    """
    model = LeaseModel()
    f = frontier(redis_url, estimator=estimator, lease_timeout=LEASE_TIMEOUT,
                 min_interval=MIN_INTERVAL, max_interval=MAX_INTERVAL, clock=lambda: model.now)
    f.add_many(SM_URLS, now=0.0)
    leases: list[Lease] = []
    calls: list[tuple[Lease, dict]] = []
    for op in operations:
        if op[0] == "next":
            _, dt, n = op
            model.now += dt
            model.reclaim(model.now)
            for d in f.next_requests(n, now=model.now):
                model.leased(d, model.now)
                leases.append(d)
        elif not leases:
            continue
        elif op[0] in ("observe", "replay"):
            if op[0] == "observe":
                _, pick, fp, not_modified, status, offset = op
                d = leases[pick % len(leases)]
                kwargs = {"fingerprint": fp, "not_modified": not_modified, "status": status,
                          "fetched_at": model.now + offset}
                calls.append((d, kwargs))
            else:
                d, kwargs = calls[op[1] % len(calls)] if calls else (None, None)
                if d is None:
                    continue
            failure = kwargs["status"] >= 400
            expected = model.outcome(d, observe=not failure)
            obs = f.observe(d, **kwargs)
            event(f"{op[0]} {'failure' if failure else 'fetch'}: {expected}")
            assert obs.accepted == (expected != "rejected"), (expected, d, kwargs)
            if expected == "new":
                del model.open[d.url]
                model.done[(d.url, d.token)] = ("fail",) if failure else ("observe", obs)
            if expected == "new" and not failure:
                model.fetches[d.url] += 1
                at = kwargs["fetched_at"]
                assert math.isfinite(obs.estimate) and obs.estimate >= 0
                if estimator == "interval":
                    assert obs.estimate > 0
                    assert at + MIN_INTERVAL - 1e-6 <= obs.next_due <= at + MAX_INTERVAL + 1e-6
                else:
                    assert at - 1e-6 <= obs.next_due <= at + MAX_EXP_DRAW * MAX_INTERVAL + 1e-6
            if expected == "replay":
                first = model.done[(d.url, d.token)][1]
                assert (obs.changed, obs.estimate) == (first.changed, first.estimate)
        else:
            _, pick, status = op
            d = leases[pick % len(leases)]
            event(f"failed: {model.outcome(d, observe=False)}")
            if model.outcome(d, observe=False) == "new":
                del model.open[d.url]
                model.done[(d.url, d.token)] = ("fail",)
            f.failed(d, "timeout" if status is None else f"HTTP {status}", status=status,
                     now=model.now)
        _check_invariants(f, model)
    pages = list(f.iter_pages())
    stats = f.stats(now=model.now)
    assert sorted(p["url"] for p in pages) == sorted(SM_URLS)
    assert sum(p["fetches"] for p in pages) == stats["fetches"]
    assert sum(p["changes"] for p in pages) == stats["changes"]
    f.close()


def _check_invariants(f: Frontier, model: LeaseModel) -> None:
    stats = f.stats(now=model.now)
    pages = {url: f.page(url) for url in SM_URLS}
    assert all(p is not None and p["problem"] is None for p in pages.values()), "a page was lost"
    assert stats["pages"] == len(SM_URLS) and stats["quarantined"] == 0
    assert stats["fetches"] == sum(model.fetches.values()), "an observation counted twice or lost"
    for url, page in pages.items():
        assert page["fetches"] == model.fetches[url]
        assert 0 <= page["changes"] <= max(page["fetches"] - 1, 0)  # the first fetch is no change
        assert math.isfinite(page["estimate"]) and page["estimate"] >= 0
        assert (page["status"] == "leased") == (url in model.open), (url, page["status"])
    assert stats["changes"] == sum(p["changes"] for p in pages.values())
    # a lease past its deadline that no lease call took back yet counts as expired (issue 60)
    live = sum(deadline > _us(model.now) for _, deadline in model.open.values())
    assert (stats["leased"], stats["leases_expired"]) == (live, len(model.open) - live)
    assert stats["gone"] == sum(p["status"] == "gone" for p in pages.values())


# ---------------------------------------------------------------- namespaces


def _snapshot(client, skip_namespace: str) -> dict[bytes, tuple[bytes, int]]:
    """Every key of the server except ``skip_namespace``'s: DUMP (type, encoding and
    value) and when it expires, in ms of the server's clock (-1: never; other tests' crawls
    leave expiring keys, whose PTTL shrinks as the test runs: compare with ``_same``)."""
    own = (f"fr:{{{skip_namespace}}}:".encode(), f"fr:{{{skip_namespace}:".encode())
    keys = [key for key in client.scan_iter(count=1000) if not key.startswith(own)]
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.dump(key)
        pipe.pttl(key)
    pipe.time()
    replies = pipe.execute()
    seconds, micros = replies[-1]
    now_ms = seconds * 1000 + micros // 1000
    return {key: (replies[2 * i], -1 if replies[2 * i + 1] < 0 else now_ms + replies[2 * i + 1])
            for i, key in enumerate(keys)}


def _same(after: dict, before: dict) -> bool:
    """Two snapshots hold the same keys and values, and expiries within 50 ms (the two
    readings of one expiry differ by the clock's rounding only)."""
    return after.keys() == before.keys() and all(
        after[key][0] == before[key][0] and abs(after[key][1] - before[key][1]) <= 50
        for key in after)


def test_a_full_cycle_on_one_namespace_changes_no_key_of_another(redis_url, namespace, redis_client):
    a_ns, b_ns = namespace, namespace + "0"  # B's name extends A's: prefixes must not collide
    shared = [f"http://h{i % 3}.example/{i}" for i in range(30)]
    b = frontier(redis_url, b_ns, seed=2)
    b.add_many(shared + ["http://only-b.example/x"], now=0.0)
    got = lease_all(b, 0.0)
    b.observe_many([(d, {"fingerprint": "b", "fetched_at": 1.0, "etag": '"b"'}) for d in got[:20]])
    b.failed(got[20], "timeout", now=1.0)
    before = _snapshot(redis_client, a_ns)

    a = frontier(redis_url, a_ns, seed=3)
    a.add_many([(u, 2.0, {"a": 1}) for u in shared] + ["http://only-a.example/y"], now=0.0)
    got = lease_all(a, 0.0)
    a.observe_many([(d, {"fingerprint": "a", "fetched_at": 1.0, "etag": '"a"'}) for d in got[:25]])
    for d in got[25:28]:
        a.failed(d, "not found", status=404, now=1.0)
    a.set_host_delay("h0.example", 5.0)
    a.set_budget(0.01, now=2.0)  # re-solve ν: refresh steps run on A's shards
    for t in range(3, 3 + 2 * a.shards):
        a.next_requests(5, now=float(t))
    write_state(a, shared[0], b"corrupt")
    lease_all(a, 5000.0)
    a.add(shared[0], now=5000.0)
    assert a.stats(now=5000.0)["pages"] == 31 and len(list(a.iter_pages())) == 31
    assert a.due(5) and list(a.quarantined()) == [] and a.cells() and a.next_due_time()

    after = _snapshot(redis_client, a_ns)
    assert _same(after, before), ("a key outside namespace A changed",
                                  [k for k in after.keys() | before.keys()
                                   if after.get(k) != before.get(k)][:5])
    seen_a = {p["url"] for p in Frontier.attach(redis_url, a_ns).iter_pages()}
    seen_b = {p["url"] for p in Frontier.attach(redis_url, b_ns).iter_pages()}
    assert seen_a == set(shared) | {"http://only-a.example/y"}
    assert seen_b == set(shared) | {"http://only-b.example/x"}
    assert Frontier.attach(redis_url, b_ns).stats(now=5000.0)["quarantined"] == 0
    assert Frontier.attach(redis_url, b_ns).page(shared[1])["weight"] == 1.0
    assert Frontier.attach(redis_url, a_ns).page(shared[1])["weight"] == 2.0


# ---------------------------------------------------------------- static security checks

FORBIDDEN_MODULES = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle"}
FORBIDDEN_CALLS = {"eval", "exec"}


def unsafe_python(source: str, name: str = "<source>") -> list[str]:
    """Uses of pickle/marshal/shelve, eval/exec or yaml.load in Python code (AST: comments
    and docstrings do not count)."""
    found = []
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names
                      if a.name.split(".")[0] in FORBIDDEN_MODULES]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in FORBIDDEN_MODULES:
            found.append(f"from {node.module} import ...")
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in FORBIDDEN_CALLS | {"__import__"}:
                found.append(f"{func.id}(...)")
            elif isinstance(func, ast.Attribute) and func.attr in ("load", "unsafe_load", "full_load") \
                    and isinstance(func.value, ast.Name) and func.value.id == "yaml":
                found.append(f"yaml.{func.attr}(...)")
            elif isinstance(func, ast.Attribute) and func.attr in FORBIDDEN_CALLS \
                    and isinstance(func.value, ast.Name) and func.value.id == "builtins":
                found.append(f"builtins.{func.attr}(...)")
    return [f"{name}: {f}" for f in found]


def test_the_python_checker_finds_what_it_looks_for():
    planted = ('"""docstring: pickle, eval(x)"""\n# exec(y), import marshal\nimport pickle\n'
               "from marshal import loads\nimport yaml\nyaml.load(s)\neval('1')\nexec('x = 1')\n")
    assert len(unsafe_python(planted)) == 5


def test_no_pickle_marshal_shelve_eval_exec_or_yaml_load_in_the_package():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found += unsafe_python(path.read_text("utf-8"), str(path.relative_to(PACKAGE)))
    assert found == []


LUA_KEY_ARGS = {"READY", "HOSTS", "LEASES", "AGG", "CNT", "BAD", "HOST_PRIOR", "HOST_AGG", "HOST_NU",
                "DATES", "HOST_PAGES", "HOST_SWEEP", "cursor_key", "KEYS[1]", "SUMMARY", "PROBE",
                "CFG", "NU", "SIGNAL_PAGES", "SIGNAL_TRUST", "COCHANGE",
                "KEYS[2]"}  # KEYS[2]: send_slot.lua's senders, passed in
LUA_KEY_FUNCS = {"skey", "ukey", "xkey", "qkey", "mkey", "bkey", "lib.gkey"}
LUA_FORBIDDEN = re.compile(r"\b(loadstring|load|dofile|loadfile|require|setfenv|getfenv|rawset|"
                           r"_G|cmsgpack|cjson|math\.random)\b")
LUA_DEFINITIONS = [  # every key name derives from KEYS[1]: these lines must stay as they are
    # (lib.lua's per-call block works the prefix's keys out again only when KEYS[1] changed)
    'local PREFIX, BAD, HOST_PRIOR, HOST_AGG, HOST_NU',  # declared; assigned below
    'if KEYS[1] ~= LAST_KEY then',
    'PREFIX = string.sub(KEYS[1], 1, -6)',
    'local READY, HOSTS, LEASES, AGG, CNT = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]',
    'BAD = PREFIX .. "bad"',
    'local function qkey(host) return PREFIX .. "q:" .. host end',
    'function lib.gkey(group) return PREFIX .. "cg:" .. group end',  # a URL group's pages
    'key = PREFIX .. kind .. b',  # in bkey; kind: "s:", "u:", "x:", "m:" (skey ... mkey, BUCKET_KINDS)
    'HOST_PRIOR = PREFIX .. "hr"',
    'HOST_AGG = PREFIX .. "ha"',
    'HOST_NU = PREFIX .. "hnu"',
    'DATES = PREFIX .. "lm"',
    'HOST_PAGES, HOST_SWEEP = PREFIX .. "hp", PREFIX .. "hs"',
    'SIGNAL_PAGES, SIGNAL_TRUST = PREFIX .. "sg", PREFIX .. "st"',  # lua/signals.lua
    'COCHANGE = PREFIX .. "cc"',  # lua/signals.lua: the hosts' co-change records
    'PROBE = PREFIX .. "probe"',  # the write probe (start): SETRANGE with "", never created
    'SHARD = string.match(PREFIX, ":(%d+)}:$") or "?"',  # the shard, for FRLOST replies
    'LAST_KEY = KEYS[1]',
]


def lua_code(text: str) -> tuple[str, list[str]]:
    """(code without comments, string literals) of a Lua source ("-- ..." comments only)."""
    code, strings, i = [], [], 0
    while i < len(text):
        c = text[i]
        if c in "\"'":
            j = i + 1
            while text[j] != c:
                j += 2 if text[j] == "\\" else 1
            strings.append(text[i + 1:j])
            code.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("--", i):
            i = text.find("\n", i) if "\n" in text[i:] else len(text)
        else:
            code.append(c)
            i += 1
    return "".join(code), strings


def lua_problems(text: str, name: str = "<lua>") -> list[str]:
    code, strings = lua_code(text)
    found = [f"{name}: uses {m.group(1)}" for m in LUA_FORBIDDEN.finditer(code)]
    for match in re.finditer(r"redis\.p?call\(\s*(\"[^\"]*\"|[^,)]+)\s*(?:,\s*([^,)]+(?:\([^)]*\))?))?",
                             code):
        command, key = match.group(1), (match.group(2) or "").strip()
        if not command.startswith('"'):
            found.append(f"{name}: command not a literal: {command}")
            continue
        if command.strip('"').upper() in ("EVAL", "EVALSHA", "SCRIPT", "FUNCTION", "FCALL",
                                          "KEYS", "FLUSHALL", "FLUSHDB", "CONFIG", "DEBUG"):
            found.append(f"{name}: calls {command}")
        head = key.split("(", 1)[0].strip()
        if key.startswith(('"', "'")) or (key not in LUA_KEY_ARGS and head not in LUA_KEY_FUNCS):
            found.append(f"{name}: key {key!r} not derived from KEYS")
    found += [f"{name}: literal key name {s!r}" for s in strings if s.startswith("fr:")]
    return found


def test_the_lua_checker_finds_what_it_looks_for():
    planted = ('-- redis.call("GET", "fr:x") in a comment is fine\n'
               'local x = redis.call("GET", "fr:{other}:cfg")\n'
               'redis.call("HSET", "somekey", "f", ARGV[1])\n'
               'redis.call("EVAL", ARGV[1], 0)\n'
               'local f = loadstring(ARGV[2])\n'
               'redis.call("HGET", skey(id), id)\n')
    assert len(lua_problems(planted)) == 6  # 2 literal keys, EVAL (+ its key), loadstring, "fr:"


def test_lua_scripts_build_keys_only_from_keys_and_load_no_code():
    lib = (PACKAGE / "lua" / "lib.lua").read_text("utf-8")
    for line in LUA_DEFINITIONS:
        assert line in lib, line
    found = []
    for path in sorted((PACKAGE / "lua").glob("*.lua")):
        text = path.read_text("utf-8")
        found += lua_problems(text, path.name)
        code, _ = lua_code(text)
        # key names are assigned only in lib.lua's definitions (and refresh's cursor key)
        for m in re.finditer(r"\b(PREFIX|KEYS\[\d+\])", code):
            line = code[code.rfind("\n", 0, m.start()) + 1:code.find("\n", m.start())].strip()
            passed_in = re.search(r'redis\.call\("[A-Z]+", KEYS\[\d+\]', line)  # a key as given
            assert line in LUA_DEFINITIONS or passed_in or line.startswith((
                "local limit, cursor_key = tonumber(ARGV[H + 1]), PREFIX .. \"cursor\"",
                "local state = redis.call(\"HMGET\", KEYS[1]", "redis.call(\"HSET\", KEYS[1]",
                "local SUMMARY = KEYS[1]", "local CFG, NU = KEYS[1], KEYS[2]")), \
                f"{path.name}: {line}"
    assert found == []

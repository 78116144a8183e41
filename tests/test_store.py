"""Key schema, compact encodings and Lua script hygiene."""

from __future__ import annotations

import re
import threading
from collections import Counter
from pathlib import Path

import pytest
from redis.cluster import key_slot
from redis_servers import both_servers  # noqa: F401, I001  (every test on both script paths)

from frontier_rate import Frontier
from frontier_rate.store.keys import Keys, Layout, bucket_of, page_id, shard_of
from frontier_rate.store.wire import STATE, STATE_INTERVAL, unpack_state

LUA = Path(__file__).resolve().parent.parent / "frontier_rate" / "lua"


def test_every_key_carries_the_namespace_and_each_shard_is_one_slot(redis_url, namespace,
                                                                    redis_client):
    f = Frontier(redis_url, namespace=namespace, budget=100.0, min_host_delay=0.0, seed=1)
    f.add_many([(f"http://h{i % 7}.example/{i}", 1.0, {"i": i}) for i in range(200)], now=0.0)
    got = f.next_requests(50, now=0.0)
    f.observe_many([(d, {"fingerprint": "x", "fetched_at": 0.0, "etag": "e"}) for d in got])
    keys = [k.decode() for k in redis_client.scan_iter(match=f"fr:{{{namespace}*", count=1000)]
    assert keys
    slots: dict[str, set[int]] = {}
    for key in keys:
        tag = re.fullmatch(r"fr:\{([^}]*)\}:.+", key, re.S).group(1)
        assert tag == namespace or re.fullmatch(re.escape(namespace) + r":\d+", tag), key
        slots.setdefault(tag, set()).add(key_slot(key.encode()))
    assert all(len(s) == 1 for s in slots.values())  # scripts touch one slot per shard


def test_pages_stay_in_compact_encodings(redis_url, namespace, redis_client):
    """Bucketed hashes and small host queues keep the listpack/ziplist encoding."""
    f = Frontier(redis_url, namespace=namespace, estimator="sam", budget=1e6, min_host_delay=0.0,
                 seed=1)
    urls = [f"https://www.host{i // 40:04d}.example.org/articles/{i:010d}" for i in range(4000)]
    assert all(len(u) <= 60 for u in urls)
    f.add_many(urls, now=0.0)
    got = []
    while len(got) < len(urls):
        got += f.next_requests(5000, now=0.0)
    f.observe_many([(d, {"fingerprint": "x", "fetched_at": 0.0}) for d in got])
    compact = {b"ziplist", b"listpack"}
    keys = Keys(namespace, f.shards)
    pid = page_id(urls[0])
    host = "www.host0000.example.org"
    shard = shard_of(host, f.shards)
    b = bucket_of(pid, f.buckets)
    for key in (keys.state(shard, b), keys.url(shard, b), keys.queue(shard, host)):
        assert redis_client.object("encoding", key) in compact, key
    raw = redis_client.hget(keys.state(shard, b), pid)
    assert len(raw) == STATE.size == 48
    state = unpack_state(raw)
    assert state["fetches"] == 1 and state["weight"] == 1.0


def test_interval_state_fits_the_compact_value_limit():
    assert STATE_INTERVAL.size == 64  # hash-max-listpack-value default is 64 bytes


def test_scripts_take_data_through_argv_and_use_no_randomness_or_keys_command():
    for path in LUA.glob("*.lua"):
        text = path.read_text()
        code = "\n".join(line.split("--", 1)[0] for line in text.splitlines())
        assert "math.random" not in code, path.name
        assert '"KEYS"' not in code and "'KEYS'" not in code, path.name
        assert "loadstring" not in code and "cmsgpack.unpack" not in code, path.name
        for match in re.finditer(r"KEYS\[(\d+)\]", code):
            assert int(match.group(1)) <= 5, path.name


@pytest.mark.parametrize("url", ["http://a.example/", "https://b.example/x?y=1"])
def test_page_ids_are_stable_8_byte_digests(url):
    assert page_id(url) == page_id(url) and len(page_id(url)) == 8
    assert page_id(url) != page_id(url + "#")


def test_layout_mirrors_lua_as_buckets_split():
    """Linear hashing: a split bucket b sends its pages to b or b + buckets*2^level."""
    pids = [page_id(f"http://h.example/{i}") for i in range(2000)]
    for level, split in [(0, 0), (0, 5), (1, 0), (2, 31)]:
        layout = Layout(16, level, split)
        nb = 16 << level
        for pid in pids:
            b = layout.bucket(pid)
            assert 0 <= b < layout.count
            old = bucket_of(pid, 16, level)  # the layout before any split at this level
            assert b == old or (old < split and b == old + nb)
    assert Layout.read(16, [b"1", b"3"]) == Layout(16, 1, 3)
    assert Layout.read(16, [None, None]) == Layout(16, 0, 0)  # data from before growth
    assert Layout.read(16, [b"1", b"999"]) == Layout(16, 0, 0)  # corrupt: the base layout


def test_a_namespace_grows_its_buckets_under_a_running_crawl(redis_url, namespace, redis_client):
    """Buckets split while a second process leases and observes: no page lost, none
    leased twice, every bucket stays compact, and each shard grew to 48 pages per bucket."""
    n = 40_000
    urls = [f"https://www.host{i // 25:05d}.example.org/p/{i:08d}" for i in range(n)]
    crawler = Frontier(redis_url, namespace=namespace, estimator="sam", budget=1e9,
                       min_host_delay=0.0, lease_timeout=1e9, seed=1)
    adder = Frontier(redis_url, namespace=namespace, estimator="sam", budget=1e9,
                     min_host_delay=0.0, lease_timeout=1e9, seed=2)
    errors: list[BaseException] = []

    def add_all() -> None:
        try:
            for i in range(0, n, 500):
                adder.add_many(urls[i:i + 500], now=0.0)
        except BaseException as exc:  # noqa: BLE001 -- reported by the main thread
            errors.append(exc)

    thread = threading.Thread(target=add_all)
    thread.start()
    leased: Counter[str] = Counter()
    while thread.is_alive() or len(leased) < n:
        got = crawler.next_requests(2000, now=0.0)
        crawler.observe_many([(d, {"fingerprint": "a", "fetched_at": 0.0}) for d in got])
        leased.update(d.url for d in got)
        if not got and not thread.is_alive():
            break
    thread.join()
    assert errors == []
    assert len(leased) == n and max(leased.values()) == 1  # every page once, none twice
    assert crawler.stats(now=0.0)["pages"] == n
    layouts = crawler._layouts(range(crawler.shards))
    assert all(layout.level >= 1 for layout in layouts.values())  # 16 -> 32+ buckets
    for shard, layout in layouts.items():
        pages = int(redis_client.hget(crawler.keys.shard_keys(shard)[4], "pages"))
        assert 48 * (layout.count - 1) < pages <= 48 * layout.count  # grown just enough
        sizes = [redis_client.hlen(crawler.keys.state(shard, b)) for b in range(layout.count)]
        assert max(sizes) <= 128
        assert redis_client.hlen(crawler.keys.state(shard, layout.count)) == 0
    assert sum(redis_client.hlen(crawler.keys.url(s, b)) for s, layout in layouts.items()
               for b in range(layout.count)) == n
    for url in urls[::997]:
        page = crawler.page(url)
        assert page is not None and page["fetches"] == 1 and page["status"] == "active"
    compact = {b"ziplist", b"listpack"}
    pid = page_id(urls[0])
    shard = shard_of("www.host00000.example.org", crawler.shards)
    b = layouts[shard].bucket(pid)
    assert redis_client.object("encoding", crawler.keys.state(shard, b)) in compact


def test_a_namespace_from_the_fixed_layout_keeps_working_and_grows(redis_url, namespace,
                                                                     redis_client):
    """Data written before the layout grew: cfg says its bucket count (1024 then), cnt has no
    level or split, there is no due summary. It reads as level 0 (its old layout), every page
    is found and leased, and new adds grow it from there."""
    redis_client.hset(f"fr:{{{namespace}}}:cfg", "buckets", "8")  # as an old namespace stored it
    old = Frontier(redis_url, namespace=namespace, estimator="sam", budget=1e9,
                   min_host_delay=0.0, lease_timeout=1e9, seed=1)
    first = [f"https://old{i % 50}.example/p/{i}" for i in range(1500)]
    old.add_many(first, now=0.0)
    assert all(layout == Layout(8) for layout in old._layouts(range(old.shards)).values())
    for shard in range(old.shards):  # exactly the old fixed layout: h mod 8
        assert redis_client.hmget(old.keys.shard_keys(shard)[4], "bl", "bs") == [None, None]
    redis_client.delete(old.keys.due)
    f = Frontier(redis_url, namespace=namespace, estimator="sam", budget=1e9,
                 min_host_delay=0.0, lease_timeout=1e9, seed=2)
    assert f.buckets == 8
    f.add_many([f"https://new{i % 500}.example/p/{i}" for i in range(8000)], now=0.0)
    layouts = f._layouts(range(f.shards))
    assert all(layout.count > 8 for layout in layouts.values())
    assert all(f.page(url)["status"] == "new" for url in first[::37])
    leased = []
    while got := f.next_requests(5000, now=0.0):
        leased += got
    assert len({d.url for d in leased}) == len(leased) == 9500


def test_the_script_header_has_the_same_fields_on_both_sides():
    """lua/lib.lua reads the header (ARGV[1..H]) into C under the names wire.HEADER gives
    them, in the same order; no field is sent twice."""
    from frontier_rate.store.wire import HEADER

    lib = (LUA / "lib.lua").read_text()
    read = re.findall(r"(\w+) = (?:tonumber\()?ARGV\[(\d+)\]", lib)
    assert [name for name, _ in read] == list(HEADER)
    assert [int(i) for _, i in read] == list(range(1, len(HEADER) + 1))
    assert re.search(r"^local H = (\d+)$", lib, re.M).group(1) == str(len(HEADER))
    assert len(set(HEADER)) == len(HEADER)

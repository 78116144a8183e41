"""Key schema, compact encodings and Lua script hygiene."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from redis.cluster import key_slot

from frontier_rate import Frontier
from frontier_rate.store import (
    STATE,
    STATE_INTERVAL,
    Keys,
    bucket_of,
    page_id,
    shard_of,
    unpack_state,
)

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

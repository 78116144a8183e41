"""The Python-Lua contract (frontier_rate/store/contract.py) against the Lua files, and the two
script paths (frontier_rate/store/scripting.py): EVALSHA on the embedded 6.2 server, one Redis
Functions library on Debian's Redis 7 (tests needing it skip only when
/usr/bin/redis-server is missing; .ci/run installs it)."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest
import redis
from redis_servers import REDIS7_MISSING, debian_redis, redis_cluster  # noqa: I001

from frontier_rate import Frontier
from frontier_rate.store import contract, scripting, wire
from frontier_rate.store import scripts as store
from frontier_rate.store.keys import Keys
from frontier_rate.store.scripts import Scripts

LUA = Path(scripting.__file__).parents[1] / "lua"
PARTIAL_READS = {">I4", "<fd", "<dI4", "BB"}
"""Literal struct formats Lua may still write: the page id's hash (bucket_of) and the
partial reads of a state in lib.peek_queued (offsets into STATE_FORMAT)."""


def libraries(client: redis.Redis) -> dict[str, dict[str, list]]:
    """FUNCTION LIST as library name -> function name -> flags (RESP2 flat pairs)."""
    out = {}
    for flat in client.function_list():
        lib = dict(zip(flat[::2], flat[1::2], strict=True))
        functions = {}
        for f in lib[b"functions"]:
            fields = dict(zip(f[::2], f[1::2], strict=True))
            functions[fields[b"name"].decode()] = fields[b"flags"]
        out[lib[b"library_name"].decode()] = functions
    return out


def lua_text(name: str) -> str:
    return (LUA / name).read_text("utf-8")


# --------------------------------------------------------------------------- the contract


def test_no_lua_file_is_over_400_lines():
    lines = {p.name: len(p.read_text("utf-8").splitlines()) for p in LUA.glob("*.lua")}
    assert max(lines.values()) <= 400, lines


def test_keys_declares_every_key_lua_builds():
    keys = Keys("ns", 4)
    prefix = keys.prefix(1)
    built = set()
    for name in dir(keys):
        attr = getattr(type(keys), name, None)
        if name.startswith("_") or not callable(attr) or name in ("prefix", "shard_keys"):
            continue
        if name in ("page_memories", "last_detections"):  # the detection memory's keys:
            continue  # Python only (store/detection_memory.py), no script builds them
        try:
            key = getattr(keys, name)(1)
        except TypeError:
            continue
        assert key.startswith(prefix), (name, key)
        built.add(key[len(prefix):])
    assert built == set(contract.SHARD_KEYS) | set(contract.DERIVED_KEYS)
    assert keys.shard_keys(1) == [prefix + k for k in contract.SHARD_KEYS]
    assert {keys.state(1, 0), keys.url(1, 0), keys.extras(1, 0), keys.pattern(1, 0)} == \
        {prefix + kind + "0" for kind in contract.BUCKET_KINDS}
    assert keys.queue(1, "h") == prefix + contract.QUEUE_KIND + "h"
    assert keys.group_pages(1, "h/a/*") == prefix + contract.GROUP_KIND + "h/a/*"
    assert {keys.cfg, keys.tokens, keys.nu, keys.due} == \
        {f"fr:{{ns}}:{k}" for k in contract.NAMESPACE_KEYS}


def test_lua_derives_exactly_the_declared_keys():
    """Every ``NAME = PREFIX .. "<suffix>"`` in the Lua files (declared, or assigned in lib.lua's
    per-call block) is a DERIVED_KEYS entry under its Lua name, and every entry is derived
    somewhere; the bucket and queue kinds too."""
    text = "".join(lua_text(p.name) for p in sorted(LUA.glob("*.lua")))
    found = {}
    for names, values in re.findall(r"^\s*(?:local )?([\w, ]+?) = ([^\n]*PREFIX \.\. \"[^\n]*)$",
                                     text, re.M):
        for lua_name, value in zip(names.split(","), values.split(", "), strict=True):
            suffix = re.fullmatch(r'PREFIX \.\. "([^"]+)"', value.strip())
            if suffix:
                found[suffix.group(1)] = lua_name.strip()
    assert found == contract.DERIVED_KEYS
    kinds = set(re.findall(r'bkey\("([a-z]:)", bucket_of\(id\)\)', lua_text("lib.lua")))
    assert kinds == set(contract.BUCKET_KINDS)
    assert f'PREFIX .. "{contract.QUEUE_KIND}" .. host' in lua_text("lib.lua")
    assert f'PREFIX .. "{contract.GROUP_KIND}" .. group' in lua_text("lib.lua")
    assert 'string.sub(KEYS[1], 1, -6)' in lua_text("lib.lua")  # strips "ready" (5 letters)
    assert contract.SHARD_KEYS[0] == "ready"
    assert re.search(r"local READY, HOSTS, LEASES, AGG, CNT = KEYS\[1\], KEYS\[2\], KEYS\[3\], "
                     r"KEYS\[4\], KEYS\[5\]", lua_text("lib.lua"))
    assert [k.upper() for k in contract.SHARD_KEYS] == ["READY", "HOSTS", "LEASES", "AGG", "CNT"]


def test_lua_reads_the_declared_header():
    read = re.findall(r"(\w+) = (?:tonumber\()?ARGV\[(\d+)\]", lua_text("lib.lua"))
    assert [name for name, _ in read] == list(contract.HEADER) == list(wire.HEADER)
    assert re.search(r"^local H = (\d+)$", lua_text("lib.lua"), re.M).group(1) == \
        str(len(contract.HEADER))
    # header_again (a Functions library takes the last parsed header again) compares the
    # header's last field only: the digest of the others (wire.header_digest)
    assert contract.HEADER[-1] == "digest"
    body = re.search(r"local function header_again\(argv\)\n(.*?)\nend\n", lua_text("lib.lua"),
                     re.S).group(1)
    assert re.findall(r"argv\[(\w+)\] ~= LAST_C\.(\w+)", body) == [("H", "digest")]
    assert "argv[" not in body.replace("argv[H]", "").replace("argv[1]", "")  # and reads `now`


def test_the_header_digest_changes_with_every_field():
    """Two headers that differ in any field between ``now`` and ``digest`` (a value, or where
    one value ends and the next begins) get different digests; ``now`` does not count."""
    header = wire.Header()
    names = contract.HEADER[1:-1]
    header.update(**{name: f"v{i}" for i, name in enumerate(names)})
    first = header.args(1.0)
    assert len(first) == len(contract.HEADER) and header.args(2.0)[-1] == first[-1]
    seen = {first[-1]}
    for name in names:
        other = wire.Header()
        other.update(**{n: f"v{i}" for i, n in enumerate(names)})
        other.update(**{name: "changed"})
        seen.add(other.args(1.0)[-1])
    assert len(seen) == len(names) + 1
    assert wire.header_digest(["ab", "c"]) != wire.header_digest(["a", "bc"])


def test_lua_writes_no_struct_layout_of_its_own():
    """Every record layout comes from the prelude: a literal format in a Lua file is drift."""
    for path in sorted(LUA.glob("*.lua")):
        code = "\n".join(line.split("--", 1)[0] for line in path.read_text("utf-8").splitlines())
        literals = set(re.findall(r"(?:pack|unpack|size)\(\s*\"([^\"]*)\"", code))
        assert literals <= PARTIAL_READS, (path.name, literals - PARTIAL_READS)


def test_wire_takes_its_layouts_from_the_contract():
    pairs = {"STATE": wire.STATE, "STATE_INTERVAL": wire.STATE_INTERVAL,
             "HOST_RECORD": wire.HOST_RECORD, "HOST_AGG": wire.HOST_AGG,
             "OBSERVATION": wire.OBSERVATION, "OBSERVE_REPLY": wire.OBSERVE_REPLY,
             "CANDIDATE": wire.CANDIDATE, "LEASE": wire.LEASE, "SIGNAL_TALLY": wire.SIGNAL_TALLY}
    for name, packed in pairs.items():
        assert packed.format == contract.STRUCTS[name], name
    assert (wire.F_LEASED, wire.F_GONE, wire.F_CHANGED, wire.F_APPLIED) == (1, 2, 4, 8)
    assert wire.DATE_TRUST == contract.DATE_TRUST


def test_lua_format_names_the_same_bytes(redis_client):
    """Each layout in Lua's dialect has the size Python's has, and packs the same bytes."""
    for name, fmt in contract.STRUCTS.items():
        lua = contract.lua_format(fmt)
        assert redis_client.eval("return struct.size(ARGV[1])", 0, lua) == struct.calcsize(fmt)
        if "s" not in fmt:
            count = len(struct.unpack(fmt, bytes(struct.calcsize(fmt))))
            values = [str(i % 2 + 1) for i in range(count)]
            packed = redis_client.eval(
                "local v = {} for i = 2, #ARGV do v[#v + 1] = tonumber(ARGV[i]) end "
                "return struct.pack(ARGV[1], unpack(v))", 0, lua, *values)
            assert packed == struct.pack(fmt, *[int(v) for v in values]), name
    with pytest.raises(ValueError, match="'x'"):
        contract.lua_format("<dx")


def test_the_prelude_gives_lua_the_python_values(redis_client, redis_url, namespace):
    names = list(contract.CONSTANTS)
    script = store._read("lib.lua") + "\nreturn {" + ", ".join(
        f"string.format('%.17g', {n})" for n in names) + "}"
    f = Frontier(redis_url, namespace=namespace)
    got = redis_client.eval(script, 5, *f.keys.shard_keys(0), *f._header(0.0))
    assert [float(x) for x in got] == [float(contract.CONSTANTS[n]) for n in names]


def test_the_per_call_block_holds_no_function():
    with pytest.raises(ValueError, match="defines a function"):
        scripting.per_call("-- per call: begin\nlocal function f() end\n-- per call: end\n", "s")
    with pytest.raises(ValueError, match="no '-- per call: begin'"):
        scripting.per_call("local x = 1\n", "s")
    out = scripting.per_call("x\n-- per call: begin\nlocal A, B = 1, 2\nlocal C = {\n}\n"
                             "local D, E\nif A then D = 1 end\n-- per call: end\ny\n", "setup")
    assert out == "x\nlocal A, B, C, D, E\nlocal function setup(KEYS, ARGV)\nA, B = 1, 2\n" \
                  "C = {\n}\nif A then D = 1 end\nend\ny\n"


def test_only_eval_scripts_probe_for_a_refused_write():
    """An EVAL script without flags is refused by Redis only at its first refused write, so a
    writing script starts with the write probe; a function without ``no-writes`` is refused
    before it runs (tests/test_reliability_faults.py checks OOM, read-only replica and MISCONF
    on both paths), so no function of the library probes."""
    probe, no_probe = "lib.start(true)", "lib.start(false)"
    writing = [n for n in scripting.SHARD_SCRIPTS if n not in scripting.READ_ONLY_SCRIPTS]
    assert writing and all(probe in scripting.eval_source(n) for n in writing)
    assert all(no_probe in scripting.eval_source(n) for n in scripting.READ_ONLY_SCRIPTS)
    code = scripting.FunctionLibrary().code
    assert probe not in code
    assert code.count(no_probe) == len(scripting.SHARD_SCRIPTS)


# --------------------------------------------------------------------------- both paths

needs_redis7 = pytest.mark.skipif(debian_redis() is None, reason=REDIS7_MISSING)


def test_auto_mode_takes_evalsha_on_the_embedded_server(redis_client):
    assert redis_client.info("server")["redis_version"].startswith("6.")
    assert not Scripts(redis_client).functions
    with pytest.raises(ValueError, match="'fcall'"):
        Scripts(redis_client, mode="fcall")


@needs_redis7
def test_auto_mode_loads_one_library_named_by_its_hash_on_redis7(redis7_url):
    client = redis.Redis.from_url(redis7_url)
    scripts = Scripts(client)
    assert scripts.functions and scripts.library is not None
    name = scripts.library.name
    assert re.fullmatch(r"frontier_rate_[0-9a-f]{16}", name)
    assert Scripts(client).library.name == name  # the same code: loaded once, kept
    functions = libraries(client)[name]
    assert set(functions) == set(scripts.library.function.values())
    assert functions[scripts.library.function["stats"]] == [b"no-writes"]
    assert not Scripts(client, mode="eval").functions
    client.close()


def crawl(f: Frontier, urls: list[str], rounds: int) -> float:
    """A fixed crawl: add, then lease and observe ``rounds`` times (content changes every 7 s)."""
    f.add_many(urls, now=0.0)
    t = 0.0
    for _ in range(rounds):
        got = f.next_requests(50, now=t)
        f.observe_many([(d, {"fingerprint": f"{d.url}{int(t) // 7}", "fetched_at": t})
                        for d in got])
        t = max(t + 1.0, f.next_due_time())
    return t


@needs_redis7
def test_both_paths_leave_the_same_pages(redis_url, redis7_url, namespace):
    """The same calls give the same states on EVALSHA (6.2) and Functions (7), with two
    namespaces of different estimators interleaved on one library (the per-call set-up
    leaves nothing from one call to the next)."""
    urls = [f"http://h{i % 7}.example/{i}" for i in range(120)]
    pages = []
    for url in (redis_url, redis7_url):
        a = Frontier(url, namespace=namespace + "a", estimator="interval", budget=50.0,
                     min_host_delay=0.5, min_interval=5.0, max_interval=500.0, seed=3)
        b = Frontier(url, namespace=namespace + "b", estimator="sam", budget=50.0,
                     min_host_delay=0.5, min_interval=5.0, max_interval=500.0, seed=3)
        assert a.scripts.functions == (url == redis7_url)
        ends = []
        for _ in range(3):
            ends.append((crawl(a, urls, 4), crawl(b, urls, 4)))
        pages.append((ends, [a.page(u) for u in urls], [b.page(u) for u in urls],
                      a.stats(now=ends[-1][0]), b.stats(now=ends[-1][1])))
    assert pages[0] == pages[1]
    assert pages[0][3]["fetches"] > 50 and pages[0][4]["fetches"] > 50


@needs_redis7
def test_functions_are_loaded_again_after_function_flush(redis7_url, namespace):
    client = redis.Redis.from_url(redis7_url)
    f = Frontier(redis7_url, namespace=namespace, budget=100.0, min_host_delay=0.0,
                 min_interval=1.0, max_interval=100.0, seed=1)
    assert f.scripts.functions
    urls = [f"http://h{i % 3}.example/{i}" for i in range(30)]
    client.function_flush()
    assert f.add_many(urls, now=0.0) == 30
    client.function_flush()
    got = f.next_requests(10, now=1.0)
    assert len(got) == 10
    client.function_flush()
    results = f.observe_many([(d, {"fingerprint": "x", "fetched_at": 2.0}) for d in got])
    assert all(r.accepted for r in results)
    assert f.stats(now=3.0)["fetches"] == 10
    assert list(libraries(client)) == [f.scripts.library.name]
    client.close()


@needs_redis7
def test_a_redis7_cluster_gets_the_library_on_every_primary(tmp_path):
    with redis_cluster(tmp_path, binary=debian_redis()) as cluster:
        f = Frontier(cluster.url, namespace="cluster7", estimator="sam", budget=1000.0,
                     min_host_delay=1.0, min_interval=10.0, max_interval=1000.0, seed=1)
        assert f.scripts.functions
        urls = [f"http://h{i}.example/{j}" for i in range(20) for j in range(3)]
        assert f.add_many(urls, now=0.0) == 60
        for node in f.client.get_primaries():
            node.redis_connection.function_flush()  # as after a failover to a bare replica
        t, fetched = 0.0, 0
        while fetched < 100:
            got = f.next_requests(100, now=t)
            results = f.observe_many([(d, {"fingerprint": f"{d.url}{int(t) // 5}",
                                           "fetched_at": t}) for d in got])
            assert all(r.accepted for r in results)
            fetched += len(got)
            t = max(t + 1.0, f.next_due_time())
        assert f.stats(now=t)["fetches"] == fetched
        for node in f.client.get_primaries():
            assert list(libraries(node.redis_connection)) == [f.scripts.library.name]


@needs_redis7
def test_a_user_who_may_not_load_functions_gets_evalsha_or_the_loaded_library(redis7_url):
    """docs/SECURITY.md: the namespace ACL rule keeps EVALSHA; with +fcall +info the user
    loads and calls the library; one who may not load it calls the library an administrator
    loaded."""
    admin = redis.Redis.from_url(redis7_url)
    admin.function_flush()
    base = ["on", ">pw-1", "resetkeys", "~fr:{acl7}:*", "~fr:{acl7:*", "resetchannels",
            "-@all", "+@read", "+@write", "+@transaction", "+@connection", "+evalsha",
            "+script|load", "+time", "-@dangerous"]
    port = admin.connection_pool.connection_kwargs["port"]
    url = f"redis://acl7:pw-1@127.0.0.1:{port}/0"
    try:
        admin.execute_command("ACL", "SETUSER", "acl7", *base)
        with Frontier(url, namespace="acl7", min_host_delay=0.0) as f:
            assert not f.scripts.functions
            assert f.add_many(["http://a.example/1"], now=0.0) == 1
        admin.execute_command("ACL", "SETUSER", "acl7", "+fcall", "+info")
        with Frontier(url, namespace="acl7", min_host_delay=0.0) as f:
            assert f.scripts.functions  # +@write allows FUNCTION LOAD on Redis 7
        admin.function_flush()
        admin.execute_command("ACL", "SETUSER", "acl7", "+function|list", "-function|load")
        with Frontier(url, namespace="acl7", min_host_delay=0.0) as f:
            assert not f.scripts.functions  # may not load, nothing loaded: EVALSHA
        Scripts(admin)  # the administrator loads the library
        with Frontier(url, namespace="acl7", min_host_delay=0.0) as f:
            assert f.scripts.functions
            assert f.add_many(["http://a.example/2"], now=0.0) == 1
            assert f.stats(now=1.0)["pages"] == 2
    finally:
        admin.execute_command("ACL", "DELUSER", "acl7")
        admin.close()

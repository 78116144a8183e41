"""The frontier on a real three-node Redis Cluster (redis+cluster:// URL).

Every script touches keys of one hash tag only, so Redis Cluster runs them;
this test starts three cluster-enabled redis-servers on 127.0.0.1, joins
them with ``redis-cli --cluster create`` and runs a crawl cycle.
"""

from __future__ import annotations

import random
import socket
import subprocess
import time
from pathlib import Path

import pytest
import redis
from conftest import redis_server_binary  # noqa: I001

from frontier_rate import Frontier


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def cluster_port(rng: random.Random) -> int:
    """A free port p < 50000 whose cluster bus port p + 10000 is free too."""
    while True:
        port = rng.randrange(20000, 50000)
        if _free(port) and _free(port + 10000):
            return port


def start_node(directory: Path, port: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(directory), "--cluster-enabled", "yes",
         "--cluster-config-file", "nodes.conf"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(host="127.0.0.1", port=port)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            return proc
        except redis.ConnectionError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError(f"cluster node on port {port} did not start") from None
            time.sleep(0.05)


@pytest.fixture(scope="module")
def cluster_url(tmp_path_factory):
    cli = Path(redis_server_binary()).with_name("redis-cli")
    if not cli.exists():
        pytest.fail(f"redis-cli not found next to {redis_server_binary()}")
    procs, ports = [], []
    rng = random.Random()
    try:
        for i in range(3):
            port = cluster_port(rng)
            procs.append(start_node(tmp_path_factory.mktemp(f"cluster{i}"), port))
            ports.append(port)
        subprocess.run([str(cli), "--cluster", "create",
                        *[f"127.0.0.1:{p}" for p in ports], "--cluster-replicas", "0",
                        "--cluster-yes"], check=True, capture_output=True, timeout=60)
        client = redis.Redis(host="127.0.0.1", port=ports[0])
        deadline = time.monotonic() + 30
        while client.cluster("info").get("cluster_state") != "ok":
            assert time.monotonic() < deadline, "cluster did not become ok"
            time.sleep(0.1)
        client.close()
        yield f"redis+cluster://127.0.0.1:{ports[0]}"
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)


def test_crawl_cycle_on_redis_cluster(cluster_url):
    f = Frontier(cluster_url, namespace="cluster", estimator="sam", budget=1000.0,
                 min_host_delay=1.0, min_interval=10.0, max_interval=1000.0, seed=1)
    urls = [f"http://h{i}.example/{j}" for i in range(20) for j in range(3)]
    assert f.add_many(urls, now=0.0) == 60
    t, fetched = 0.0, 0
    while fetched < 200:
        got = f.next_requests(100, now=t)
        results = f.observe_many([(d, {"fingerprint": f"{d.url}{int(t) // 5}",
                                       "fetched_at": t}) for d in got])
        assert all(r.accepted for r in results)
        fetched += len(got)
        t = max(t + 1.0, f.next_due_time())
    stats = f.stats(now=t)
    assert stats["pages"] == 60 and stats["fetches"] == fetched
    assert stats["changes"] > 0 and stats["nu"] >= 0.0
    page = f.page(urls[0])
    assert page["fetches"] >= 2 and page["status"] in ("active", "leased")
    assert len(list(f.iter_pages())) == 60

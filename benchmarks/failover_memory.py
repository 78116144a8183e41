"""A crawler's frontier client through many Redis Cluster failovers: is its memory bounded?

    python benchmarks/failover_memory.py [--failovers 12] [--write] [--quick]

Issue 63's Cluster hour saw each crawler's RSS step up 2-3 MB at each of its three
failovers, too few to tell a warm-up from a leak. This runs the crawler's own client path
(``FrontierClient``, inline driver: ordered outbox, breaker, held results) in one process
against a cluster of three primaries with a replica each (``tests/redis_servers.py``,
Debian's redis-server when installed, ``cluster-node-timeout`` 5 s, AOF), with a steady
load (5 new pages, up to 10 leases and their observations every 20 ms), and fails over
one primary after another: ``kill -9`` of a primary, its replica promoted, the old primary
started again as a replica. After each failover has settled it samples the process's RSS,
the Python heap (``tracemalloc``), threads, file descriptors and the results and pages
the client still holds. With
``--write`` the samples go to docs/benchmarks/failover_memory.json and a section of
docs/BENCHMARKS.md; ``--quick`` (the test suite): one failover after a 5 s warm-up, nothing
written.
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

import psutil  # noqa: E402
from _report import machine, table, write_json, write_section  # noqa: E402
from redis_servers import RedisCluster, debian_redis, redis_cluster  # noqa: E402

from frontier_rate import Frontier  # noqa: E402
from frontier_rate.client.frontier_client import FrontierClient  # noqa: E402

SETTLE = 12.0
"""Seconds after the old primary is started again before a sample: the client's breaker
has tried again (1, 2, 4 s ...) and sent what it held."""


class Load(threading.Thread):
    """A crawler's calls through the client: new pages, leases, observations."""

    def __init__(self, url: str, spool: str) -> None:
        super().__init__(daemon=True)
        self.client = FrontierClient(
            lambda: Frontier(url, namespace="failovers", budget=50.0, min_host_delay=0.0),
            redis_url=url, spool_dir=spool, stat=lambda name, value, replace: None,
            log_interval=3600.0)
        self.stop = threading.Event()
        self.rounds = self.observed = 0

    def run(self) -> None:
        rng, n = random.Random(0), 0
        self.client.open()
        while not self.stop.is_set():
            self.client.add([(f"http://h{rng.randrange(50)}.test/p{n + k}", 1.0, {})
                             for k in range(5)])
            n += 5
            self.client.want(10)
            self.client.poll()
            for lease, _ in self.client.take():
                self.client.observe(lease, {"fingerprint": str(rng.random()),
                                            "fetched_at": time.time()})
                self.observed += 1
            self.rounds += 1
            time.sleep(0.02)


def fail_over(cluster: RedisCluster) -> float:
    """Kill -9 a primary that serves slots, wait for its replica to take over, start it
    again; seconds until the cluster had three healthy primaries again."""
    view = cluster.roles()
    port = next(p for p, node in view.items() if node.primary and node.slots)
    node, started = cluster.node(port), time.monotonic()
    node.kill()
    while time.monotonic() - started < 60:
        time.sleep(0.5)
        try:
            view = cluster.roles()
        except RuntimeError:
            continue
        serving = [n for n in view.values() if n.primary and n.slots and not n.failed]
        if len(serving) == 3 and all(n.port != port for n in serving):
            break
    took = time.monotonic() - started
    time.sleep(3.0)
    node.start(timeout=60)
    return took


def sample(k: int, load: Load, took: float | None) -> dict[str, Any]:
    gc.collect()
    process = psutil.Process()
    return {"failover": k, "rss_mb": round(process.memory_info().rss / 2**20, 2),
            "heap_mb": round(tracemalloc.get_traced_memory()[0] / 2**20, 2),
            "threads": threading.active_count(), "fds": process.num_fds(),
            "held": load.client.held_results() + load.client.unadded(), "rounds": load.rounds,
            "observed": load.observed, "takeover_s": None if took is None else round(took, 1)}


def run(failovers: int, warmup: float = 20.0) -> list[dict[str, Any]]:
    tracemalloc.start()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, redis_cluster(
            Path(tmp) / "cluster", masters=3, replicas=1, seed=63, binary=debian_redis(),
            args=["--cluster-node-timeout", "5000", "--appendonly", "yes",
                  "--appendfsync", "everysec"]) as cluster:
        load = Load(cluster.url, str(Path(tmp) / "spool"))
        load.start()
        time.sleep(warmup)  # the client's warm-up: its first pages, scripts and connections
        rows.append(sample(0, load, None))
        print(rows[-1], flush=True)
        for k in range(1, failovers + 1):
            took = fail_over(cluster)
            time.sleep(SETTLE)
            rows.append(sample(k, load, took))
            print(rows[-1], flush=True)
        load.stop.set()
        load.join(timeout=30)
    return rows


def report(rows: list[dict[str, Any]]) -> str:
    first, half, last = rows[1], rows[len(rows) // 2], rows[-1]
    lines = [
        "**A frontier client through Redis Cluster failovers (issue 63).** "
        f"`python benchmarks/failover_memory.py --failovers {len(rows) - 1} --write`: the "
        "crawler's client path (`FrontierClient`) under a steady load on a cluster of three "
        "primaries with a replica each; each failover a `kill -9` of a primary, its replica "
        "promoted, the old primary started again as a replica; a sample 12 s after it. "
        f"RSS {rows[0]['rss_mb']} MB after the warm-up, {first['rss_mb']} MB after the first "
        f"failover, {half['rss_mb']} MB after failover {half['failover']}, {last['rss_mb']} MB "
        f"after the last; the Python heap {rows[0]['heap_mb']} -> {last['heap_mb']} MB.",
        "",
        table(["failover", "RSS MB", "heap MB", "threads", "fds", "held", "rounds",
               "observed", "takeover s"],
              [[r["failover"], r["rss_mb"], r["heap_mb"], r["threads"], r["fds"],
                r["held"], r["rounds"], r["observed"],
                "-" if r["takeover_s"] is None else r["takeover_s"]] for r in rows]),
        "",
        f"Machine: {machine()}.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--failovers", type=int, default=12)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--quick", action="store_true")
    options = parser.parse_args(argv)
    rows = run(1, warmup=5.0) if options.quick else run(options.failovers)
    text = report(rows)
    print(text)
    if options.write and not options.quick:
        write_json("failover_memory", {"samples": rows})
        write_section("failover_memory", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

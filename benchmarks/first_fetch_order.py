"""The default engine on the real histories over several first-fetch orders (issue 26).

``benchmarks/real_traces.py`` runs the engine once per budget, on one set of URLs. Pages
added together are first fetched in the order of their page ids (a hash of the URL), and
at a low budget a large host capped by its politeness limit takes weeks to fetch each of
its pages once (endoflife-date: 167 pages, 46 days at 0.05 fetches/page/day), so which
pages go first moves the score by several pages' worth of freshness. This script replays
the same world (same budget, host caps, scoring) with a path prefix in every URL, one
prefix per order (order 0 is real_traces.py's own URLs, so its figure is the one in that
table), and reports the default engine's freshness as a ratio to uniform revisiting's
(uniform has no such order: it is one run), its spend against the allowed budget and its
violations.

    python benchmarks/first_fetch_order.py --jobs 2                 # writes docs/
    python benchmarks/first_fetch_order.py --quick   # 40 pages, B 0.2, 2 orders; writes nothing
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import real_traces  # noqa: E402
from _run import embedded_redis, pool_map  # noqa: E402
from real_traces import DEFAULT, QUICK_PAGES, World  # noqa: E402
from traces import load_traces  # noqa: E402

BUDGETS = (0.05, 0.2, 0.5)
"""Fetches per page per day: where first fetches take days of the 60-day window (at 2 they
take hours)."""
ORDERS = 10


def salt_of(order: int) -> str:
    """The URL path prefix of ``order``; order 0 keeps real_traces.py's URLs."""
    return "" if order == 0 else f"o{order}/"


def run_task(task: tuple) -> tuple[float, int | None, dict]:
    """Uniform (``order`` None) or the default engine under one first-fetch order."""
    traces, per_page_day, order, url = task
    world = World(traces, per_page_day)
    if order is None:
        return per_page_day, None, real_traces.score(world, real_traces.run_baseline(world, "uniform"))
    fetches, info = real_traces.run_frontier(world, url, *DEFAULT, salt=salt_of(order))
    result = real_traces.score(world, fetches)
    print(f"  B={per_page_day:<5g} order {order}: F={result['freshness']:.4f} "
          f"spent {result['spent_of_allowed']:.3f} ({info['wall_s']:.0f} s)", flush=True)
    return per_page_day, order, result


def summarise(done: list[tuple[float, int | None, dict]]) -> list[dict]:
    """Per budget: ratios to uniform per order, their median, range and mean."""
    rows = []
    for b in sorted({d[0] for d in done}):
        uniform = next(r for bb, o, r in done if bb == b and o is None)
        ours = sorted((o, r) for bb, o, r in done if bb == b and o is not None)
        ratios = [r["freshness"] / uniform["freshness"] for _, r in ours]
        rows.append({
            "per_page_day": b, "uniform_freshness": uniform["freshness"],
            "uniform_spent_of_allowed": uniform["spent_of_allowed"],
            "ratio_to_uniform": ratios, "order0": ratios[0] if ours[0][0] == 0 else None,
            "median": statistics.median(ratios), "mean": statistics.fmean(ratios),
            "min": min(ratios), "max": max(ratios),
            "spent_of_allowed": [r["spent_of_allowed"] for _, r in ours],
            "violations": sum(int(r["violations"]) for _, r in ours)})
    return rows


def markdown(rows: list[dict], orders: int) -> str:
    from _report import machine, table

    lines = [
        f"`python benchmarks/first_fetch_order.py` -- the default engine (`interval+whittle`) on "
        f"the real histories of `real_traces.py` over {orders} first-fetch orders (order 0: "
        "real_traces.py's own URLs; the others add a path prefix to every URL, which reorders "
        "pages added together). Freshness as a ratio to uniform revisiting's (one run: uniform "
        "has no first-fetch order); spend as a share of the allowed budget.",
        "",
        table(["B (fetches/page/day)", "order 0", "median", "min-max", "mean", "spent", "violations"],
              [[r["per_page_day"], f"{r['order0']:.3f}" if r["order0"] is not None else "",
                f"{r['median']:.3f}", f"{r['min']:.3f}-{r['max']:.3f}", f"{r['mean']:.3f}",
                f"{min(r['spent_of_allowed']):.3f}-{max(r['spent_of_allowed']):.3f}",
                r["violations"]] for r in rows]),
        "",
        "Per order: " + "; ".join(
            f"B={r['per_page_day']:g}: " + ", ".join(f"{x:.3f}" for x in r["ratio_to_uniform"])
            for r in rows) + ".",
        "",
        "Issue 26's target, >= 1.02 x uniform: " + "; ".join(
            f"B={r['per_page_day']:g} **{'met' if r['median'] >= 1.02 else 'missed'}** "
            f"(median {r['median']:.3f})" for r in rows) + ".",
        "",
        f"Written on {machine()}.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_PAGES} pages, budget 0.2, 2 orders; write nothing")
    parser.add_argument("--budgets", type=float, nargs="*", help="fetches per page per day")
    parser.add_argument("--orders", type=int, help=f"first-fetch orders per budget (default {ORDERS})")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--no-write", action="store_true", help="print only, write nothing to docs/")
    parser.add_argument("--url", default=os.environ.get("FRONTIER_RATE_REDIS_URL"),
                        help="Redis URL (default: $FRONTIER_RATE_REDIS_URL, else embedded)")
    args = parser.parse_args(argv)
    budgets = args.budgets or ([0.2] if args.quick else list(BUDGETS))
    orders = args.orders if args.orders is not None else (2 if args.quick else ORDERS)
    if orders < 1:
        parser.error(f"--orders {orders}: needs at least one order")
    traces = load_traces()
    if args.quick:  # every k-th page, as real_traces.py --quick takes them
        traces = traces[::max(1, len(traces) // QUICK_PAGES)][:QUICK_PAGES]
    tasks = [(traces, b, o, args.url) for b in budgets for o in [None, *range(orders)]]
    tasks.sort(key=lambda t: -t[1])  # the longest first
    with embedded_redis(args.url, "orders"):
        done = pool_map(run_task, tasks, args.jobs)
    rows = summarise(done)
    for r in rows:
        print(f"B={r['per_page_day']:<5g} ours/uniform median {r['median']:.3f} "
              f"[{r['min']:.3f}-{r['max']:.3f}] mean {r['mean']:.3f}  violations {r['violations']}")
    if args.no_write or args.quick:
        return 0
    from _report import write_json, write_section

    write_json("first_fetch_order", {"orders": orders, "runs": rows})
    write_section("first_fetch_order", markdown(rows, orders))
    return 0


if __name__ == "__main__":
    sys.exit(main())

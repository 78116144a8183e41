"""The default engine against uniform on the real histories over several draws (issues 26, 35).

``benchmarks/real_traces.py`` runs the engine once per budget, on one set of URLs. Pages
added together are first fetched host by host (hosts of equal standing in the order of
their names) and within a host in the order of their page ids (a hash of the URL), and at
a low budget a large host capped by its politeness limit takes weeks to fetch each of
its pages once (endoflife-date: 167 pages, 46 days at 0.05 fetches/page/day), so which
pages go first moves the score by several pages' worth of freshness. Uniform revisiting
has the same kind of luck: its phases are a random draw, and at 0.05 fetches/page/day
(three fetches a page in the replay) its own freshness moves by ~7% from one draw to the
next. One draw is no measure of a target such as issue 35's ">= 1.02x uniform at every
budget, every fetch counted", so this script repeats the comparison over draws: draw
``d`` is uniform's phases of ``World(seed=d)`` and our first-fetch order of hosts and of
the pages within them (a salt in every URL's host name and path: ``policy.page_urls``) and
random stream (``Frontier(seed=d)``); draw 0 is real_traces.py's own run,
so its figures are the ones in that table. Same budgets, host caps, dispatcher rules and
scoring as real_traces.py; every fetch counts against the budget, first fetches included.

    python benchmarks/first_fetch_order.py --jobs 2        # DRAWS per budget; writes docs/
    python benchmarks/first_fetch_order.py --quick   # 40 pages, B 0.2, 2 draws; writes nothing
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
from policy import draw_salt  # noqa: E402
from real_traces import DEFAULT, QUICK_PAGES, World  # noqa: E402
from traces import load_traces  # noqa: E402

BUDGETS = real_traces.BUDGETS
"""Fetches per page per day, real_traces.py's (at 2, first fetches take hours, not weeks)."""
DRAWS = {0.05: 10, 0.2: 10, 0.5: 5, 2.0: 3}
"""Draws per budget: at the low budgets a draw moves ours by several percent (the order in
which a capped host's pages are first fetched takes weeks), so they get more; at 2 the first
fetches take hours and the draws agree within 0.2%. A budget not listed gets ORDERS."""
ORDERS = 5
TARGET = 1.02
"""Issues 26 and 35: the default engine >= 1.02x uniform at every budget, every fetch counted."""


def run_task(task: tuple) -> tuple[float, int, dict, dict]:
    """Uniform and the default engine under one draw (uniform's phases, our order and seed)."""
    traces, per_page_day, order, url = task
    world = World(traces, per_page_day, seed=order)
    uniform = real_traces.score(world, real_traces.run_baseline(world, "uniform"))
    fetches, info = real_traces.run_frontier(world, url, *DEFAULT, salt=draw_salt(order))
    result = real_traces.score(world, fetches)
    print(f"  B={per_page_day:<5g} draw {order}: uniform {uniform['freshness']:.4f} ours "
          f"{result['freshness']:.4f} (x{result['freshness'] / uniform['freshness']:.3f}) spent "
          f"{result['spent_of_allowed']:.3f} ({info['wall_s']:.0f} s)", flush=True)
    return per_page_day, order, uniform, result


def summarise(done: list[tuple[float, int, dict, dict]]) -> list[dict]:
    """Per budget: ours / uniform of each draw, their median, range and mean."""
    rows = []
    for b in sorted({d[0] for d in done}):
        draws = sorted((o, u, r) for bb, o, u, r in done if bb == b)
        ratios = [r["freshness"] / u["freshness"] for _, u, r in draws]
        rows.append({
            "per_page_day": b, "draws": [o for o, _, _ in draws],
            "uniform_freshness": [u["freshness"] for _, u, _ in draws],
            "uniform_spent_of_allowed": [u["spent_of_allowed"] for _, u, _ in draws],
            "freshness": [r["freshness"] for _, _, r in draws],
            "ratio_to_uniform": ratios, "order0": ratios[0] if draws[0][0] == 0 else None,
            "median": statistics.median(ratios), "mean": statistics.fmean(ratios),
            "min": min(ratios), "max": max(ratios),
            "spent_of_allowed": [r["spent_of_allowed"] for _, _, r in draws],
            "violations": sum(int(r["violations"]) for _, _, r in draws)})
    return rows


def _spread(values: list[float], digits: int = 4) -> str:
    return (f"{statistics.median(values):.{digits}f} "
            f"[{min(values):.{digits}f}-{max(values):.{digits}f}]")


def markdown(rows: list[dict]) -> str:
    from _report import machine, table

    lines = [
        "`python benchmarks/first_fetch_order.py` -- the default engine (`interval+whittle`) "
        "against uniform revisiting on the real histories of `real_traces.py`, over several "
        "draws per budget (each: uniform's phases, our first-fetch order of hosts and of the "
        "pages within them, by a salt in every URL's host name and path, and our random "
        "stream; draw 0 is real_traces.py's run). Every fetch counts against "
        "the budget, first fetches included. Freshness of ours as a ratio to uniform's of the "
        "same draw; each policy's freshness as median [min-max] over the draws; spend as a "
        "share of the allowed budget.",
        "",
        table(["B (fetches/page/day)", "draws", "draw 0", "median", "min-max", "mean", "uniform",
               "uniform spent", "ours", "ours spent", "violations"],
              [[r["per_page_day"], len(r["draws"]), f"{r['order0']:.3f}" if r["order0"] is not None else "",
                f"{r['median']:.3f}", f"{r['min']:.3f}-{r['max']:.3f}", f"{r['mean']:.3f}",
                _spread(r["uniform_freshness"]), _spread(r["uniform_spent_of_allowed"], 2),
                _spread(r["freshness"]), _spread(r["spent_of_allowed"], 2),
                r["violations"]] for r in rows]),
        "",
        "Per draw: " + "; ".join(
            f"B={r['per_page_day']:g}: " + ", ".join(f"{x:.3f}" for x in r["ratio_to_uniform"])
            for r in rows) + ".",
        "",
        f"Target (issues 26 and 35), >= {TARGET:g} x uniform at every budget: median over the "
        "draws " + "; ".join(
            f"B={r['per_page_day']:g} **{'met' if r['median'] >= TARGET else 'missed'}** "
            f"({r['median']:.3f})" for r in rows) + "; every draw " + "; ".join(
            f"B={r['per_page_day']:g} **{'met' if r['min'] >= TARGET else 'missed'}** "
            f"(worst {r['min']:.3f})" for r in rows) + ".",
        "",
        "Uniform spends ~0.90 of the allowed fetches (its water-filled intervals leave the host "
        "caps' slack unused); ours spends it all: the ratios compare equal budgets, not equal "
        "spend.",
        "",
        f"Written on {machine()}.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_PAGES} pages, budget 0.2, 2 draws; write nothing")
    parser.add_argument("--budgets", type=float, nargs="*", help="fetches per page per day")
    parser.add_argument("--orders", type=int,
                        help="draws (first-fetch orders and uniform's phases) at every budget "
                             f"(default: DRAWS, {ORDERS} where a budget is not listed)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--no-write", action="store_true", help="print only, write nothing to docs/")
    parser.add_argument("--url", default=os.environ.get("FRONTIER_RATE_REDIS_URL"),
                        help="Redis URL (default: $FRONTIER_RATE_REDIS_URL, else embedded)")
    args = parser.parse_args(argv)
    budgets = args.budgets or ([0.2] if args.quick else list(BUDGETS))
    if args.orders is not None and args.orders < 1:
        parser.error(f"--orders {args.orders}: needs at least one draw")

    def draws_at(b: float) -> int:
        if args.orders is not None:
            return args.orders
        return 2 if args.quick else DRAWS.get(b, ORDERS)

    traces = load_traces()
    if args.quick:  # every k-th page, as real_traces.py --quick takes them
        traces = traces[::max(1, len(traces) // QUICK_PAGES)][:QUICK_PAGES]
    tasks = [(traces, b, o, args.url) for b in budgets for o in range(draws_at(b))]
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

    write_json("first_fetch_order", {"draws": {str(r["per_page_day"]): len(r["draws"]) for r in rows},
                                     "runs": rows})
    write_section("first_fetch_order", markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

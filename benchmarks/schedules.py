"""The schedule of one rhythmic and one bursty real page, with and without change dates.

    python benchmarks/schedules.py           # writes docs/img/schedule_*.png and a docs section
    python benchmarks/schedules.py --quick   # the same pages on a 40-page world; prints only

Replays the real change histories of ``benchmarks/real_traces.py`` at one budget
(0.5 fetches/page/day) twice with the default engine: once with the change bit
only (the constant-rate, Poisson policy) and once with true Last-Modified dates
(the change-pattern model of ``frontier_rate.math.pattern`` on top). It then draws, for
the most rhythmic page (changes at the same time of day) and the most bursty page
(most gaps far shorter than the mean gap), the change times, the fetch times and
the stretches the copy was stale, over ten days of the scored window.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _run import embedded_redis  # noqa: E402
from real_traces import DAY, QUICK_PAGES, World, run_frontier  # noqa: E402
from traces import load_traces  # noqa: E402

BUDGET = 0.5
SHOWN_DAYS = 10.0
MIN_CHANGES = 20


def page_freshness(changes: np.ndarray, fetches: np.ndarray, a: float, b: float) -> float:
    """Fraction of [a, b) the copy was fresh (no change since the last fetch before t)."""
    if fetches.size == 0:
        return 0.0
    k = np.searchsorted(changes, fetches, side="right")
    stale_at = np.append(changes, np.inf)[k]
    nxt = np.append(fetches[1:], np.inf)
    lo, hi = np.maximum(fetches, a), np.minimum(np.minimum(stale_at, nxt), b)
    return float(np.clip(hi - lo, 0.0, None).sum() / (b - a))


def daily_concentration(changes: np.ndarray) -> float:
    """Mean resultant length of the changes' times of day (1: always the same time)."""
    return float(abs(np.mean(np.exp(2j * np.pi * np.mod(changes, DAY) / DAY))))


def short_gap_share(changes: np.ndarray) -> float:
    """Share of the gaps between changes shorter than a tenth of the mean gap."""
    gaps = np.diff(changes)
    return float((gaps < 0.1 * gaps.mean()).mean())


def pick_pages(world: World) -> dict[str, int]:
    """The most rhythmic and the most bursty page with at least MIN_CHANGES changes."""
    scored = [i for i, c in enumerate(world.changes)
              if ((c >= world.t_start) & (c < world.t_end)).sum() >= MIN_CHANGES]
    return {"rhythmic": max(scored, key=lambda i: daily_concentration(world.changes[i])),
            "bursty": max(scored, key=lambda i: short_gap_share(world.changes[i]))}


def plot(world: World, i: int, runs: dict[str, list[np.ndarray]], kind: str, out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    a = world.t_end - SHOWN_DAYS * DAY
    changes = world.changes[i]
    fig, axes = plt.subplots(len(runs), 1, figsize=(9, 1.6 * len(runs) + 0.8), sharex=True)
    for ax, (label, fetches) in zip(axes, runs.items(), strict=True):
        f = fetches[i]
        k = np.searchsorted(changes, f, side="right")
        stale_at = np.append(changes, np.inf)[k]
        nxt = np.append(f[1:], world.t_end)
        for s, e in zip(stale_at, nxt, strict=True):
            if s < e and e > a:
                ax.axvspan((max(s, a) - a) / DAY, (min(e, world.t_end) - a) / DAY, color="0.85", lw=0)
        shown = changes[changes >= a]
        ax.vlines((shown - a) / DAY, 0, 1, color="tab:red", lw=0.8, label="change")
        ax.plot((f[f >= a] - a) / DAY, np.full((f >= a).sum(), 0.5), "v", color="tab:blue",
                ms=6, label="fetch")
        fresh = page_freshness(changes, f, world.t_start, world.t_end)
        fetched = int(((f >= world.t_start) & (f < world.t_end)).sum())
        ax.set_title(f"{label}: fresh {fresh:.2f} of the scored window, {fetched} fetches",
                     fontsize=9, loc="left")
        ax.set_yticks([])
        ax.set_xlim(0, SHOWN_DAYS)
    axes[0].legend(loc="upper right", fontsize=8)
    axes[-1].set_xlabel("days (the last ten of the scored window); grey: copy stale")
    fig.suptitle(f"{kind} page: {world.names[i]}", fontsize=10)
    fig.tight_layout()
    path = out / f"schedule_{kind}.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_PAGES} pages; print only")
    parser.add_argument("--url", default=os.environ.get("FRONTIER_RATE_REDIS_URL"),
                        help="Redis URL (default: $FRONTIER_RATE_REDIS_URL, else embedded)")
    args = parser.parse_args(argv)
    traces = load_traces()
    if args.quick:
        traces = traces[::max(1, len(traces) // QUICK_PAGES)][:QUICK_PAGES]
    world = World(traces, BUDGET)
    with embedded_redis(args.url, "schedules"):
        runs = {"change bit only (Poisson policy)":
                    run_frontier(world, args.url, "interval", "whittle")[0],
                "with Last-Modified (change-pattern model)":
                    run_frontier(world, args.url, "interval", "whittle", dates=True)[0]}
    pages = pick_pages(world)
    rows = []
    for kind, i in pages.items():
        c = world.changes[i]
        cells = [f"{page_freshness(c, f[i], world.t_start, world.t_end):.3f} "
                 f"({int(((f[i] >= world.t_start) & (f[i] < world.t_end)).sum())})"
                 for f in runs.values()]
        rows.append(f"| {kind} | `{world.names[i]}` | {daily_concentration(c):.2f} | "
                    f"{short_gap_share(c):.2f} | " + " | ".join(cells) + " |")
        print(f"{kind:9} {world.names[i]:50} " + "  ".join(cells))
    if args.quick:
        return 0
    from _report import IMG, write_section

    IMG.mkdir(parents=True, exist_ok=True)
    images = [plot(world, i, runs, kind, IMG) for kind, i in pages.items()]
    write_section("schedules", "\n".join([
        "`python benchmarks/schedules.py` -- one rhythmic and one bursty page of the real "
        f"histories, at {BUDGET:g} fetches/page/day, the default engine with the change bit only "
        "and with true Last-Modified dates. Freshness of the page over the scored window "
        "(fetches in brackets); time-of-day concentration R (1: always the same time) and the "
        "share of gaps shorter than a tenth of the mean gap. Both runs spend the same total "
        "budget; the fetch counts show how each shares it out (with dates these two pages get "
        "more, others fewer: the whole-set result is in the real-traces section).",
        "",
        "| pattern | page | R (day) | short gaps | " + " | ".join(runs) + " |",
        "|---|---|---|---|" + "---|" * len(runs),
        *rows,
        "",
        *[f"![{p.stem}](img/{p.name})" for p in images],
    ]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

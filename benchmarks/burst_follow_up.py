"""Changes come in bursts: how often a page's next change follows within days, and what a
follow-up revisit after a change is seen would add at equal spend (issue 62, a lead; prints
only).

On ``web_like.py``'s population (its 180-day window), two measurements:

1. **Bursts.** For pages with 2-5, 6-20 and 21-60 changes in the window: the share of changes
   followed by the page's next change within 1, 2 and 7 days, against the share a Poisson
   process at the page's own rate gives (1 - exp(-rate x days), averaged over the same gaps).
2. **A follow-up revisit** (a simulation outside the engine, on ``web_like.World``'s scoring):
   periodic revisits (uniform periods, or the hindsight-Poisson oracle's periods of
   ``policy.periodic_intervals``), each page at a seeded phase; "with follow-up": a fetch that
   finds the page changed since the last one is followed by one more fetch ``--follow``
   days later, and every period is stretched by one factor (bisection) so that the fetches
   in all equal those without. Freshness is ``web_like.score``'s (the last 120 days).

Run: ``python benchmarks/burst_follow_up.py`` (``--quick``: every 8th page, budget 0.1,
seed 0).
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from policy import periodic_intervals  # noqa: E402
from web_like import (  # noqa: E402
    DAY,
    WINDOW_DAYS,
    World,
    every_page_changes,
    population,
    score,
)

CLASSES = ((2, 5), (6, 20), (21, 60))
"""Pages by their changes in the window."""
WITHIN_DAYS = (1, 2, 7)


def burst_shares(pages: list) -> list[tuple[int, int, int, int, float, float]]:
    """(lo, hi, days, gaps, share followed within ``days``, Poisson share) per class."""
    rows = []
    for (lo, hi), days in itertools.product(CLASSES, WITHIN_DAYS):
        gaps = within = 0
        expected = 0.0
        for page in pages:
            times = np.sort(page.changes)
            if not lo <= len(times) <= hi:
                continue
            rate = len(times) / (WINDOW_DAYS * DAY)
            for a, b in itertools.pairwise(times):
                gaps += 1
                within += (b - a) <= days * DAY
                expected += -math.expm1(-rate * days * DAY)
        if gaps:
            rows.append((lo, hi, days, gaps, within / gaps, expected / gaps))
    return rows


def fetch_times(changes: np.ndarray, period: float, follow: float, phase: float,
                end: float) -> np.ndarray:
    """Periodic fetches from ``phase`` every ``period`` s; with ``follow`` > 0, a fetch that
    finds a change since the fetch before is followed by one more ``follow`` s later (at most
    one pending)."""
    fetches: list[float] = []
    regular, extra = phase, math.inf
    while min(regular, extra) < end:
        t = min(regular, extra)
        if t == extra:
            extra = math.inf
        else:
            regular += period
        before = fetches[-1] if fetches else -math.inf
        fetches.append(t)
        if follow and math.isinf(extra) and len(fetches) > 1 and \
                np.any((changes > before) & (changes <= t)):
            extra = t + follow
    return np.asarray(fetches)


def simulate(pages: list, budget: float, follow_days: float, base: str,
             seed: int = 0) -> tuple[float, float]:
    """Freshness and fetches (over those without a follow-up) of periodic revisits at
    ``base`` periods ("uniform" or "oracle"), with a follow-up ``follow_days`` after a change
    is seen (0: none), the periods stretched so that the fetches are the same."""
    world = World(pages, budget, seed)
    periods = periodic_intervals(every_page_changes(world) if base == "oracle" else world, base)
    phases = np.random.default_rng(seed).random(len(pages))

    def plan(stretch: float, follow: float) -> list[np.ndarray]:
        return [fetch_times(p.changes, period * stretch, follow, phase * period * stretch,
                            world.t_end) if np.isfinite(period) else np.asarray([])
                for p, period, phase in zip(pages, periods, phases, strict=True)]

    target = sum(map(len, plan(1.0, 0.0)))
    stretch = 1.0
    if follow_days:
        low, high = 1.0, 4.0
        for _ in range(20):
            middle = (low + high) / 2
            if sum(map(len, plan(middle, follow_days * DAY))) > target:
                low = middle
            else:
                high = middle
        stretch = high
    fetches = plan(stretch, follow_days * DAY)
    return score(world, fetches)["freshness"], sum(map(len, fetches)) / target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="every 8th page, budget 0.1")
    parser.add_argument("--budgets", type=float, nargs="+", default=[0.03, 0.1, 0.3])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                        help="the periods' phases")
    parser.add_argument("--follow", type=float, nargs="+", default=[1.0, 2.0],
                        help="days after a change is seen")
    args = parser.parse_args(argv)
    pages = population(every=8 if args.quick else 1)
    budgets = [0.1] if args.quick else args.budgets
    print(f"{len(pages)} pages of web_like.py's population")
    for lo, hi, days, gaps, share, poisson in burst_shares(pages):
        print(f"pages with {lo}-{hi} changes: {gaps} gaps, the next change within {days} d: "
              f"{share:.3f} (Poisson at the page's rate: {poisson:.3f})")
    seeds = [0] if args.quick else args.seeds
    for base, budget in itertools.product(("uniform", "oracle"), budgets):
        without = [simulate(pages, budget, 0.0, base, seed)[0] for seed in seeds]
        print(f"{base} periods, {budget:g} fetches/page/day, seeds {seeds}: freshness "
              + " / ".join(f"{f:.4f}" for f in without))
        for days in args.follow:
            runs = [simulate(pages, budget, days, base, seed) for seed in seeds]
            print(f"  with a follow-up {days:g} d after a change is seen: "
                  + " / ".join(f"{f:.4f} ({f - w:+.4f})" for (f, _), w in zip(runs, without, strict=True))
                  + f"; fetches {min(r[1] for r in runs):.3f}-{max(r[1] for r in runs):.3f} of those without")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Bias of each engine estimator under the engine's own fetch times, with a binding budget.

    python benchmarks/engine_bias.py           # 20 pages, 400 fetches each; writes docs/
    python benchmarks/engine_bias.py --quick   # 60 fetches each; prints only

20 pages on 20 hosts change as Poisson processes at one change per hour; the
budget is 20 fetches per 10 minutes, so it binds: fetches run late whenever
several pages fall due together, which breaks the Poisson fetch-time
assumption of LLN, SA and SAM (seed 004). The real ``Frontier`` (embedded
Redis, virtual clock in seconds) decides every fetch with its default
settings per estimator; the crawler fetches what it is handed at once. The
number reported is mean(estimate / truth) over the pages after every page
has been fetched ``--fetches`` times (1.0 = unbiased; the run is repeated over
``--seeds`` seeds and the spread is given).

Writes docs/benchmarks/engine_bias.json and the engine-bias section of
docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _run import embedded_redis  # noqa: E402

from frontier_rate import Frontier  # noqa: E402
from frontier_rate.store.namespace import drop  # noqa: E402

PAGES = 20
RATE = 1.0 / 3600.0
BUDGET = PAGES / 600.0
ESTIMATORS = ("interval", "lln", "sa", "sam")


def run(estimator: str, fetches: int, seed: int, url: str | None) -> float:
    """mean(estimate / truth) once every page has ``fetches`` fetches."""
    rng = np.random.default_rng(seed)
    namespace = f"bias-{estimator}-{seed}-{os.getpid()}-{time.monotonic_ns() % 10**9}"
    f = Frontier(url, namespace=namespace, estimator=estimator, budget=BUDGET, min_host_delay=0.0,
                 min_interval=60.0, max_interval=86400.0, lease_timeout=1e9, seed=seed,
                 prior_rate=1.0 / 86400, budget_first_fetches=True)
    urls = [f"https://h{i}.example/page" for i in range(PAGES)]
    horizon = 2.0 * fetches * 600.0 * 10
    changes = {u: np.cumsum(rng.exponential(1.0 / RATE, int(horizon * RATE * 2) + 10)) for u in urls}
    f.add_many(urls, now=0.0)
    counts = dict.fromkeys(urls, 0)
    t = 0.0
    while min(counts.values()) < fetches:
        got = f.next_requests(PAGES, now=t)
        if got:
            f.observe_many([(d, {"fingerprint": str(int(np.searchsorted(changes[d.url], t))),
                                 "fetched_at": t}) for d in got])
            for d in got:
                counts[d.url] += 1
            t += 1.0
            continue
        call_at = f.next_call_time(now=t)
        t = max(t + 1.0, math.inf if call_at is None else call_at)
        if t > horizon:
            raise RuntimeError(f"{estimator}: pages not fetched {fetches} times by t={t:g}")
    ratio = float(np.mean([f.page(u)["estimate"] / RATE for u in urls]))
    drop(f.client, namespace)
    f.close()
    return ratio


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="60 fetches per page, one seed; write nothing")
    parser.add_argument("--fetches", type=int, default=400)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--url", default=os.environ.get("FRONTIER_RATE_REDIS_URL"))
    args = parser.parse_args(argv)
    fetches, seeds = (60, 1) if args.quick else (args.fetches, args.seeds)
    rows = {}
    with embedded_redis(args.url, "bias"):
        for est in ESTIMATORS:
            ratios = [run(est, fetches, seed, args.url) for seed in range(seeds)]
            rows[est] = {"mean_ratio": float(np.mean(ratios)), "runs": ratios}
            print(f"{est:9} mean estimate / truth {np.mean(ratios):.3f}  (runs: "
                  + ", ".join(f"{r:.3f}" for r in ratios) + ")", flush=True)
    if args.quick:
        return 0
    from _report import machine, write_json, write_section

    write_json("engine_bias", {"mean_ratio": {k: v["mean_ratio"] for k, v in rows.items()},
                               "runs": rows, "fetches_per_page": fetches, "pages": PAGES})
    table = ["| estimator | mean estimate / truth | bias | runs |", "|---|---|---|---|"]
    table += [f"| `{k}` | {v['mean_ratio']:.3f} | {100 * (v['mean_ratio'] - 1):+.1f}% | "
              + ", ".join(f"{r:.3f}" for r in v["runs"]) + " |" for k, v in rows.items()]
    write_section("engine_bias", "\n".join([
        f"`python benchmarks/engine_bias.py` -- {PAGES} pages changing once an hour (Poisson), a "
        f"budget of {PAGES} fetches per 10 minutes (binding), each estimator with the engine's "
        f"default settings, {fetches} fetches per page, {seeds} seeds.", "", *table, "",
        f"Machine: {machine()}."]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

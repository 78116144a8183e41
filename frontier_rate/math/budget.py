"""Solving the threshold ν from a budget (seed 001's Lagrangian dual, with docs/MATH.md, seeds 001-002's host caps):
over (weight, rate) cells for the engine (``solve_threshold``, O(cells)) and per page with a
multiplier per host for the oracle (``solve_with_host_caps``). The per-page index it inverts is
``frontier_rate.math.index``, its cells ``frontier_rate.math.cells``; docs/MATH.md says the whole policy. numpy only.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from frontier_rate.math.index import (
    MIN_CHANGE_CHANCE,
    _array,
    _check_objective,
    _freqs,
    _same_length,
    _scalar,
    _vector,
    effective_weight,
    worth_interval,
)

logger = logging.getLogger(__name__)

SOLVE_RTOL = 1e-10
"""``_bracket`` stops once hi/lo - 1 or (budget - total(hi))/budget is below this."""


def _bracket(total: Callable[[float], float], budget: float, nu_top: float,
             guess: float | None = None) -> tuple[float, float]:
    """ν (lo, hi) with total(lo) >= budget >= total(hi), total non-increasing in ν, and
    hi/lo - 1 <= SOLVE_RTOL; or lo = hi when total(hi) >= budget (1 - SOLVE_RTOL).

    Requires total(nu_top) <= budget and total(ν) -> above budget as ν -> 0.
    The bracket starts at ``guess`` (the previous solve's ν: the pages changed
    little, so a few evaluations) widened by 1.1, 4.4, ... or at ``nu_top``
    widened by 16, 64, ... (``_widen``); it is then closed by regula falsi with the
    Illinois modification on x = log ν (superlinear on the smooth pieces of total), with
    a bisection step whenever three updates shrank the bracket less than three
    bisections would have (``_Narrowing``).
    """
    memo: dict[float, float] = {}

    def excess(nu: float) -> float:
        if nu not in memo:
            memo[nu] = total(nu) - budget
        return memo[nu]

    lo, hi = _widen(excess, budget, nu_top, guess)
    return _Narrowing(excess, lo, hi).close(budget)


def _widen(excess: Callable[[float], float], budget: float, nu_top: float,
           guess: float | None) -> tuple[float, float]:
    """A first bracket (lo, hi) of the root of ``excess``, from ``guess`` or ``nu_top``."""
    near = guess is not None and 0.0 < guess < nu_top
    start, factor = (guess, 1.1) if near else (nu_top, 16.0)
    lo = hi = start
    if excess(start) >= 0.0:
        while excess(hi) >= 0.0:  # excess(nu_top) <= 0 ends this
            lo, hi = hi, min(nu_top, hi * factor)
            factor *= 4.0
    else:
        while excess(lo) < 0.0:
            hi, lo = lo, lo / factor
            factor *= 4.0
            if lo < 1e-300:
                raise ValueError(f"budget {budget!r} is too large for these pages")
    return lo, hi


class _Narrowing:
    """Closes a bracket of the root of ``excess`` on x = log ν: regula falsi with the
    Illinois modification, and a bisection step when it stalls (``_bracket``)."""

    def __init__(self, excess: Callable[[float], float], lo: float, hi: float) -> None:
        self.excess = excess
        self.lo, self.hi = lo, hi
        self.xl, self.xh = math.log(lo), math.log(hi)
        self.gl, self.gh = excess(lo), excess(hi)  # true values: the stopping test
        self.fl, self.fh = self.gl, self.gh  # Illinois-scaled values: the interpolation

    def step(self, x: float) -> None:
        """Evaluate at x = log ν and move the end on its side there."""
        nu = math.exp(x)
        g = self.excess(nu)
        if g >= 0.0:
            self.lo, self.xl, self.gl, self.fl = nu, x, g, g
        else:
            self.hi, self.xh, self.gh, self.fh = nu, x, g, g

    def close(self, budget: float) -> tuple[float, float]:
        """Narrow until hi/lo - 1 <= SOLVE_RTOL or hi meets the budget; (lo, hi)."""
        side = 0
        width = self.xh - self.xl
        for k in range(200):
            if self.xh - self.xl <= SOLVE_RTOL or self.gh >= -SOLVE_RTOL * budget \
                    or self.gl == 0.0:
                break
            if k % 3 == 0:
                width = self.xh - self.xl
            x = (self.xl * self.fh - self.xh * self.fl) / (self.fh - self.fl)
            if not self.xl < x < self.xh:
                x = 0.5 * (self.xl + self.xh)
            was_lo = self.xl
            self.step(x)
            moved = 1 if self.xl != was_lo else -1
            if moved == side:  # the same end moved twice: halve the other end's value
                if moved == 1:
                    self.fh *= 0.5
                else:
                    self.fl *= 0.5
            side = moved
            if k % 3 == 2 and self.xh - self.xl > 0.125 * width and \
                    self.xh - self.xl > SOLVE_RTOL:
                self.step(0.5 * (self.xl + self.xh))  # three steps shrank the bracket less
                side = 0                              # than bisection would
        lo, hi = self.lo, self.hi
        if self.gl == 0.0:
            hi = lo
        elif self.gh >= -SOLVE_RTOL * budget:  # hi meets the budget: both ends at hi
            lo = hi
        return lo, hi


def _blend(f_lo: np.ndarray, f_hi: np.ndarray, budget: float) -> np.ndarray:
    """The mix f_hi + θ(f_lo − f_hi) whose sum is ``budget``.

    At the final bracket only pages at the margin (w_eff between lo and hi)
    differ materially; KKT allows them any frequency in between, and the mix
    spends exactly the leftover budget on them.
    """
    s_lo, s_hi = float(f_lo.sum()), float(f_hi.sum())
    theta = 0.0 if s_lo <= s_hi else min(1.0, max(0.0, (budget - s_hi) / (s_lo - s_hi)))
    return f_hi + theta * (f_lo - f_hi)


def _allocate(w_eff: np.ndarray, rates: np.ndarray, budget: float) -> tuple[float, np.ndarray]:
    """Maximise Σ T̄_i(f_i) s.t. Σ f_i = budget: returns (ν, f) with Σ f = budget.

    Pages with no value (w_eff = 0 or λ = 0) get 0; if there is none with value,
    ν = 0 and f = 0 (nothing can use the budget).
    """
    nus, f = _allocate_groups(w_eff, rates, np.zeros(len(rates), dtype=np.int64),
                              np.array([budget], dtype=float))
    return float(nus[0]), f


def _allocate_groups(w_eff: np.ndarray, rates: np.ndarray, group: np.ndarray,
                     budgets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_allocate`` for several independent groups at once (e.g. hosts and their caps).

    Group g's pages share a budget budgets[g] and get their own threshold ν_g;
    every group is bisected on log ν in the same vectorised pass (the scalar
    steps of ``_bracket``), then its budget left between lo and hi goes to its
    marginal pages (``_blend``). Returns (ν per group, f per page).
    """
    n_groups = len(budgets)
    f = np.zeros_like(rates)
    live = (w_eff > 0) & (rates > 0)
    top = np.zeros(n_groups)
    np.maximum.at(top, group[live], w_eff[live])
    todo = (budgets > 0) & (top > 0)
    if not todo.any():
        return top, f
    pages = live & todo[group]
    w, lam, g = w_eff[pages], rates[pages], group[pages]

    def totals(nu_g: np.ndarray) -> np.ndarray:
        return np.bincount(g, weights=_freqs(nu_g[g], w, lam), minlength=n_groups)

    lo, hi = top.copy(), top.copy()
    short = todo.copy()
    while True:
        short &= totals(lo) < budgets
        if not short.any():
            break
        hi[short] = lo[short]
        lo[short] /= 16.0
        if (lo[short] < 1e-300).any():
            raise ValueError(f"budget {budgets[short].max()!r} is too large for these pages")
    for _ in range(200):
        mid = np.sqrt(lo * hi)
        bad = ~((lo < mid) & (mid < hi))
        mid[bad] = 0.5 * (lo[bad] + hi[bad])
        open_ = todo & (lo < mid) & (mid < hi)
        if not open_.any():
            break
        above = totals(mid) >= budgets
        lo = np.where(open_ & above, mid, lo)
        hi = np.where(open_ & ~above, mid, hi)
    f_lo, f_hi = _freqs(lo[g], w, lam), _freqs(hi[g], w, lam)
    s_lo = np.bincount(g, weights=f_lo, minlength=n_groups)
    s_hi = np.bincount(g, weights=f_hi, minlength=n_groups)
    with np.errstate(divide="ignore", invalid="ignore"):
        theta = np.where(s_lo > s_hi, np.clip((budgets - s_hi) / (s_lo - s_hi), 0.0, 1.0), 0.0)
    f[pages] = f_hi + theta[g] * (f_lo - f_hi)
    return np.where(todo, lo, top), f


# ------------------------------------------------------------------ engine: cells with bounds


@dataclass(frozen=True)
class ThresholdSolution:
    """Result of ``solve_threshold``.

    ``status``: "ok" (rate == budget up to bisection), "under_budget" (ν = 0,
    every page at its shortest worthwhile interval, ``index.worth_interval``, still uses
    less than the budget: the rest is not worth spending; ``rate`` says how much is) or
    "over_budget" (every page at max_interval already exceeds it; ν is the
    largest effective weight, above which no page is worth more than that).
    """

    nu: float
    rate: float
    status: str
    host_nu: np.ndarray = field(default_factory=lambda: np.zeros(0), compare=False, repr=False)
    """max(ν, τ_h) per host index of ``hosts`` (empty without hosts)."""

    @property
    def budget_met(self) -> bool:
        return self.status == "ok"


def _cell_table(cells) -> np.ndarray:
    if isinstance(cells, Mapping):
        rows = [tuple(v) for v in cells.values()]
        arr = np.array(rows, dtype=float) if rows else np.zeros((0, 3))
    else:
        arr = np.asarray(cells, dtype=float)
    if arr.ndim != 2 or arr.shape[1] != 3:
        raise ValueError(
            f"cells must be rows of (count, rate_sum, weight_sum), got shape {arr.shape}"
        )
    _array("cells", arr)
    return arr[arr[:, 0] > 0]


def cell_rates(nu: float, cells, min_interval: float, max_interval: float,
               objective: str = "changes", chance: float = MIN_CHANGE_CHANCE) -> np.ndarray:
    """Fetch rate of each cell at threshold ν: n·clamp(λ̄/y(ν/w̄_eff), 1/max_int, 1/t_w), with
    t_w = ``worth_interval``(λ̄) = max(min_int, y_w/λ̄) (at most max_int), y_w = −log(1 −
    ``chance``): no page is planned before the chance that it changed reaches ``chance``
    (issue 60; 0: the bare policy, every page up to 1/min_int).

    λ̄ = Σλ/n, w̄ = Σw/n, w̄_eff = w̄ (changes) or Σw/Σλ (freshness). Cells whose
    pages are not worth fetching (w̄_eff <= ν or λ̄ = 0) run at 1/max_interval,
    so that their estimates keep learning.
    """
    _check_objective(objective)
    table = _cell_table(cells)
    lo_i, hi_i = _intervals(min_interval, max_interval)
    return _cell_rates(_scalar("nu", nu), table, lo_i, hi_i, objective, _chance(chance))


def _chance(chance: float) -> float:
    """``chance`` checked: a probability in [0, 1)."""
    c = _scalar("chance", chance)
    if c >= 1.0:
        raise ValueError(f"chance must be in [0, 1), got {chance!r}")
    return c


def _intervals(min_interval, max_interval) -> tuple[float, float]:
    lo = _scalar("min_interval", min_interval, positive=True)
    hi = _scalar("max_interval", max_interval, positive=True, allow_inf=True)
    if hi < lo:
        raise ValueError(f"max_interval ({hi}) must be >= min_interval ({lo})")
    return lo, hi


def _cell_weights(table: np.ndarray, objective: str) -> tuple[np.ndarray, np.ndarray]:
    n, lam_sum, w_sum = table[:, 0], table[:, 1], table[:, 2]
    lam_bar = lam_sum / n
    if objective == "changes":
        w_eff = w_sum / n
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            w_eff = np.where(lam_sum > 0, w_sum / np.where(lam_sum > 0, lam_sum, 1.0), 0.0)
    return lam_bar, w_eff


def _cell_rates(nu, table: np.ndarray, min_interval: float, max_interval: float,
                objective: str, chance: float = MIN_CHANGE_CHANCE) -> np.ndarray:
    """Fetch rate of each cell at threshold ``nu`` (one number, or one per row)."""
    n = table[:, 0]
    nu = np.broadcast_to(np.asarray(nu, dtype=float), n.shape)
    lam_bar, w_eff = _cell_weights(table, objective)
    live = (lam_bar > 0) & (w_eff > 0)
    per_page = np.full(len(n), 1.0 / max_interval)
    # a fetch is worth its token only once the page may have changed (index.worth_interval)
    fastest = 1.0 / np.asarray(worth_interval(lam_bar, min_interval, max_interval, chance),
                               dtype=float)
    zero = live & (nu <= 0)
    per_page[zero] = fastest[zero]
    pos = live & (nu > 0)
    f = _freqs(nu[pos], w_eff[pos], lam_bar[pos])
    per_page[pos] = np.clip(f, 1.0 / max_interval, fastest[pos])
    return n * per_page


def _host_thresholds(nu: float, rows: np.ndarray, host: np.ndarray, caps: np.ndarray,
                     min_interval: float, max_interval: float, objective: str,
                     chance: float = MIN_CHANGE_CHANCE) -> np.ndarray:
    """ν_h = max(ν, τ_h) per host: τ_h is where the host's own cells sum to its cap
    (vectorised bisection on log ν over the rows of the hosts above their cap at ν; inf
    when even every page at max_interval exceeds the cap)."""
    n_hosts = len(caps)
    # ``rows`` may leave out hosts known to be under
    at_nu = np.bincount(host, weights=_cell_rates(nu, rows, min_interval, max_interval, objective,
                                                  chance), minlength=n_hosts)
    out = np.full(n_hosts, float(nu))
    over = at_nu > caps * (1 + 1e-12)
    if not over.any():
        return out
    floor = np.bincount(host, weights=rows[:, 0], minlength=n_hosts) / max_interval
    out[over & (floor >= caps)] = np.inf
    todo_hosts = np.flatnonzero(over & (floor < caps))
    if not len(todo_hosts):
        return out
    slot = np.full(n_hosts, -1)
    slot[todo_hosts] = np.arange(len(todo_hosts))
    mine = slot[host] >= 0
    sub, g, cap = rows[mine], slot[host[mine]], caps[todo_hosts]
    _, w_eff = _cell_weights(sub, objective)
    top = np.zeros(len(todo_hosts))
    np.maximum.at(top, g, np.where(np.isfinite(w_eff), w_eff, 0.0))
    lo = np.full(len(todo_hosts), max(float(nu), 1e-300))
    hi = np.maximum(top, lo)
    for _ in range(80):
        open_ = hi > lo * (1 + 1e-9)
        if not open_.any():
            break
        mid = np.where(open_, np.sqrt(lo * hi), hi)
        demand = np.bincount(g, weights=_cell_rates(mid[g], sub, min_interval, max_interval,
                                                    objective, chance), minlength=len(todo_hosts))
        above = demand > cap
        lo = np.where(open_ & above, mid, lo)
        hi = np.where(open_ & ~above, mid, hi)
    out[todo_hosts] = hi
    return out


def solve_threshold(cells, budget: float, min_interval: float, max_interval: float,
                    objective: str = "changes", guess: float | None = None,
                    hosts=None, caps=None, chance: float = MIN_CHANGE_CHANCE
                    ) -> ThresholdSolution:
    """The threshold ν at which the cells' total fetch rate equals ``budget`` (fetches/s).

    ``cells``: rows of (count n, Σλ, Σw) -- e.g. ``cells_from_pages`` or a
    mapping cell id -> (n, Σλ, Σw) as the engine keeps them; see
    ``cell_rates`` for the rate model. The total is non-increasing in ν, so ν
    is bracketed and closed on log ν (``_bracket``) and the upper end is
    returned (its rate is <= budget, within SOLVE_RTOL of it). ``guess``: the
    previous ν, from which a re-solve takes a few evaluations.

    Politeness inside the solve (docs/MATH.md, seeds 001-002, one multiplier per host; Kolobov
    et al., SIGIR 2019): ``hosts`` -- rows (n, Σλ, Σw, host index) of each
    host's own cells (every host, or at least every host that can pass its cap:
    the others add nothing; engine.host_candidates) -- and ``caps`` (fetches/s per host
    index, inf: none). A host runs at min(D_h(ν), cap_h), D_h its cells' rate,
    so the total is the cells' rate less Σ_h max(0, D_h(ν) − cap_h): the budget
    a capped host cannot serve goes to the others. ``host_nu[h]`` = max(ν, τ_h)
    with D_h(τ_h) = cap_h. Only the hosts over their cap at a quarter of the
    starting ν are evaluated, O(cells + their cells) per step (all hosts if the
    answer falls below that).

    ``chance``: the least chance of a change a fetch must have (``index.MIN_CHANGE_CHANCE``,
    as the engine's scripts plan; 0 for the bare Lagrangian solve). When even ν = 0 plans
    less than the budget, the status is "under_budget" and ``rate`` is what the pages are
    worth (issue 60).
    """
    _check_objective(objective)
    table = _cell_table(cells)
    b = _scalar("budget", budget, positive=True)
    lo_i, hi_i = _intervals(min_interval, max_interval)
    demand = _Demand(table, hosts, caps, lo_i, hi_i, objective, _chance(chance))
    at_zero = demand.total(0.0)
    if at_zero <= b:
        return demand.solution(0.0, at_zero, "ok" if at_zero == b else "under_budget")
    lam_bar, w_eff = _cell_weights(table, objective)
    nu_top = float(w_eff[np.isfinite(w_eff)].max()) if np.isfinite(w_eff).any() else 0.0
    if guess is None:
        # small-c start: y ≈ sqrt(2ν/w_eff), so Σ n·λ̄·sqrt(w_eff/(2ν)) = budget (no clamps, no caps)
        live = np.isfinite(w_eff) & (w_eff > 0)
        root = float((table[live, 0] * lam_bar[live] * np.sqrt(w_eff[live] / 2.0)).sum()) / b
        guess = root * root if root > 0 else None
    probe = 0.25 * guess if guess else 0.0
    if probe > 0 and len(demand.host):
        demand.use(demand.hosts_over(probe))
    at_top = demand.total(nu_top)
    if at_top >= b:
        return demand.solution(nu_top, at_top, "ok" if at_top == b else "over_budget")
    _, hi = _bracket(demand.total, b, nu_top, guess)
    if hi < probe:  # below the probe more hosts may be capped: all of them, once more
        demand.use(None)
        _, hi = _bracket(demand.total, b, nu_top, hi)
    return demand.solution(hi, demand.total(hi), "ok")


class _Demand:
    """``solve_threshold``'s total fetch rate at ν: the cells' rate less what the capped
    hosts among the rows in use cannot take (memoised per ν)."""

    def __init__(self, table: np.ndarray, hosts, caps, min_interval: float,
                 max_interval: float, objective: str, chance: float) -> None:
        host_rows = np.zeros((0, 4)) if hosts is None else \
            np.asarray(hosts, dtype=float).reshape(-1, 4)
        self.host_rows = host_rows[host_rows[:, 0] > 0]
        self.cap = np.zeros(0) if caps is None else np.asarray(caps, dtype=float).reshape(-1)
        self.host = self.host_rows[:, 3].astype(np.int64)
        if len(self.host) and (len(self.cap) <= self.host.max() or np.isnan(self.cap).any()
                               or (self.cap < 0).any()):
            raise ValueError("caps must give a non-negative cap (or inf) for every host index")
        self.table, self.objective, self.chance = table, objective, chance
        self.lo_i, self.hi_i = min_interval, max_interval
        self.memo: dict[float, float] = {}
        self.rows, self.group = self.host_rows, self.host

    def hosts_over(self, nu: float) -> np.ndarray:
        """Rows of the hosts whose cells want more than their cap at ν."""
        if not len(self.host):
            return np.zeros(0, dtype=bool)
        d = np.bincount(self.host, weights=_cell_rates(nu, self.host_rows[:, :3], self.lo_i,
                                                       self.hi_i, self.objective, self.chance),
                        minlength=len(self.cap))
        return (d > self.cap)[self.host]

    def use(self, keep: np.ndarray | None) -> None:
        """Count only the host rows ``keep`` (None: all of them) from here on."""
        if keep is None:
            self.rows, self.group = self.host_rows, self.host
        else:
            self.rows, self.group = self.host_rows[keep], self.host[keep]
        self.memo.clear()

    def total(self, nu: float) -> float:
        if nu not in self.memo:
            rate = float(_cell_rates(nu, self.table, self.lo_i, self.hi_i, self.objective,
                                     self.chance).sum())
            if len(self.group):
                d = np.bincount(self.group, weights=_cell_rates(
                    nu, self.rows[:, :3], self.lo_i, self.hi_i, self.objective, self.chance),
                    minlength=len(self.cap))
                rate -= float(np.maximum(d - self.cap, 0.0)[np.isfinite(self.cap)].sum())
            self.memo[nu] = rate
        return self.memo[nu]

    def solution(self, nu: float, rate: float, status: str) -> ThresholdSolution:
        if not len(self.host):
            return ThresholdSolution(nu, rate, status)
        return ThresholdSolution(nu, rate, status, _host_thresholds(
            nu, self.rows[:, :3], self.group, self.cap, self.lo_i, self.hi_i, self.objective,
            self.chance))


# --------------------------------------------------------------------------- per-host caps


@dataclass(frozen=True)
class HostCapSolution:
    """Result of ``solve_with_host_caps``.

    ``frequencies`` per page; ``nu`` the global threshold; ``host_nu[h]`` =
    max(ν, the threshold at which host h's pages sum to its cap);
    ``budget_met`` False when every host with valuable pages is capped and the
    caps sum to less than the budget (``total`` < budget).
    """

    frequencies: np.ndarray
    nu: float
    host_nu: dict = field(default_factory=dict)
    budget_met: bool = True
    total: float = 0.0


def host_threshold(nu: float, weights, rates, cap: float, objective: str = "changes") -> float:
    """ν_h = max(ν, τ_h), τ_h the threshold at which the host's pages sum to ``cap`` (docs/MATH.md, seeds 001-002).

    ``cap`` is fetches per unit time for the host (inf: no cap, ν_h = ν).
    """
    n = _scalar("nu", nu)
    w = _vector("weights", weights)
    lam = _vector("rates", rates)
    _same_length(weights=w, rates=lam)
    c = _scalar("cap", cap, allow_inf=True)
    if math.isinf(c):
        return n
    tau, _ = _allocate(np.asarray(effective_weight(w, lam, objective), dtype=float), lam, c)
    return max(n, tau)


def solve_with_host_caps(values, rates, hosts: Sequence[Hashable], host_caps: Mapping,
                         budget: float, objective: str = "changes") -> HostCapSolution:
    """Maximise the objective s.t. Σ f_i = budget and Σ_{i∈h} f_i <= cap_h for every host.

    One multiplier per host (docs/MATH.md, seeds 001-002): page i of host h runs at f_i(ν_h),
    ν_h = max(ν, τ_h); the total is non-increasing in ν and ν is bisected until
    it meets the budget. Hosts missing from ``host_caps`` are uncapped. If the
    capped hosts cannot absorb the budget, every host runs at its cap and the
    result says ``budget_met=False``.
    """
    _check_objective(objective)
    w = _vector("values", values)
    lam = _vector("rates", rates)
    host_list = list(hosts)
    if len(host_list) != len(w) or len(lam) != len(w):
        raise ValueError(
            f"mismatched lengths: values={len(w)}, rates={len(lam)}, hosts={len(host_list)}"
        )
    b = _scalar("budget", budget)
    for h, cap in host_caps.items():
        _scalar(f"host_caps[{h!r}]", cap, allow_inf=True)
    w_eff = np.asarray(effective_weight(w, lam, objective), dtype=float)
    live = (w_eff > 0) & (lam > 0)
    groups, tau, page_tau, capped_full, in_capped = _capped_hosts(w_eff, lam, live, host_list,
                                                                  host_caps)

    def alloc(nu: float) -> np.ndarray:
        at_cap = nu <= page_tau
        f = np.where(at_cap, capped_full, 0.0)
        free = live & ~at_cap
        f[free] = _freqs(nu, w_eff[free], lam[free])
        return f

    if not (live & ~in_capped).any():
        ceiling = alloc(0.0)
        if float(ceiling.sum()) <= b:
            total = float(ceiling.sum())
            logger.debug("solve_with_host_caps: all hosts capped, %g < budget %g", total, b)
            return HostCapSolution(ceiling, 0.0, {h: tau[h] for h in groups},
                                   budget_met=total >= b * (1 - 1e-12), total=total)
    if b == 0 or not live.any():
        return HostCapSolution(np.zeros_like(lam), 0.0, {h: tau[h] for h in groups},
                               budget_met=b == 0, total=0.0)
    nu_top = float(w_eff[live].max())
    finite_tau = [t for t in tau.values() if math.isfinite(t)]
    nu_top = max([nu_top, *finite_tau])
    lo, hi = _bracket(lambda nu: float(alloc(nu).sum()), b, nu_top)
    f = _blend(alloc(lo), alloc(hi), b)
    host_nu = {h: max(lo, tau[h]) for h in groups}
    return HostCapSolution(f, lo, host_nu, budget_met=True, total=float(f.sum()))


def _capped_hosts(w_eff: np.ndarray, rates: np.ndarray, live: np.ndarray,
                  host_list: list, host_caps: Mapping) -> tuple[dict, dict, np.ndarray,
                                                                np.ndarray, np.ndarray]:
    """``solve_with_host_caps``' hosts: (pages of each host, τ_h of each host (0 for an
    uncapped one, inf for a capped one without valuable pages), τ of each page's host,
    each page's rate with its host at its cap, which pages are on a capped host)."""
    groups: dict = {}
    for i, h in enumerate(host_list):
        groups.setdefault(h, []).append(i)
    groups = {h: np.array(ix, dtype=np.int64) for h, ix in groups.items()}
    capped = [h for h in groups if math.isfinite(float(host_caps.get(h, math.inf)))]
    slot = np.full(len(rates), -1, dtype=np.int64)
    for k, h in enumerate(capped):
        slot[groups[h]] = k
    in_capped = slot >= 0
    caps = np.array([float(host_caps[h]) for h in capped], dtype=float)
    taus, f_cap = _allocate_groups(w_eff[in_capped], rates[in_capped], slot[in_capped], caps)
    tau = {h: 0.0 for h in groups}  # uncapped hosts: τ = 0, never binding for ν > 0
    for k, h in enumerate(capped):
        tau[h] = float(taus[k]) if live[groups[h]].any() else math.inf
    page_tau = np.zeros_like(rates)
    page_tau[in_capped] = np.array([tau[h] for h in capped])[slot[in_capped]]
    capped_full = np.zeros_like(rates)
    capped_full[in_capped] = f_cap
    return groups, tau, page_tau, capped_full, in_capped

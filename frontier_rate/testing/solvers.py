"""Reference solvers: what tests and benchmarks compare the engine's policy with.

Nothing here runs in a crawl (no runtime module imports it). ``frontier_rate.math.index``
and ``frontier_rate.math.budget`` hold what the engine runs (the index curve, the cells and the
threshold and host-cap solvers); these are the independent statements of the same optimum, and baselines:

- ``OptimalSolver``: seed 001's exact per-page solver (budget met to rounding);
- ``dual_value`` and ``golden_section_search``: seed 001's dual and the search it
  minimises it with (NR 3rd ed. §10.2), to check the exact solver's ν;
- ``WCluster``: seed 001's clusters by weight, an O(K) solve;
- ``azar_rates``: Azar et al.'s Poisson-fetching optimum (PNAS 2018), a baseline.

docs/MATH.md states each formula.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from frontier_rate.math.budget import _allocate
from frontier_rate.math.index import (
    _check_objective,
    _same_length,
    _scalar,
    _vector,
    effective_weight,
    optimal_y,
)

logger = logging.getLogger(__name__)

_GOLDEN = (3.0 - math.sqrt(5.0)) / 2.0  # 0.381966..., NR 10.2


# --------------------------------------------------------------------------- seed 001: exact solver


def dual_value(nu, values, rates, budget, objective: str = "changes") -> float:
    """Seed 001's dual Q = max_f L(f, ν) = Σ_i λ_i w_i e^{−y_i} + ν·budget, ν = −α/N.

    Each page's maximised Lagrangian term T̄_i − ν f_i is λ_i w_i h with seed
    001's h = g(1 − e^{−1/g} − c); at g = 1/y and F(y) = c this is e^{−y}.
    Pages with w <= ν contribute 0. Convex in ν, minimal where Σ f_i(ν) = budget.
    """
    n = _scalar("nu", nu)
    w = _vector("values", values)
    lam = _vector("rates", rates)
    _same_length(values=w, rates=lam)
    b = _scalar("budget", budget)
    w_eff = np.asarray(effective_weight(w, lam, objective), dtype=float)
    live = (w_eff > n) & (lam > 0)
    y = np.asarray(optimal_y(n / w_eff[live]), dtype=float)
    return float((lam[live] * w_eff[live] * np.exp(-y)).sum() + n * b)


def golden_section_search(f: Callable[[float], float], xmin: float, xmax: float,
                          eps: float) -> tuple[tuple[float, float, float],
                                               tuple[float, float, float]] | None:
    """Minimise ``f`` on [xmin, xmax] by golden-section search (seed 001; NR 3rd ed. §10.2).

    Returns ((xa, xb, xc), (fa, fb, fc)) with xa < xb < xc, fb <= fa, fb <= fc and
    xc − xa < eps, or None if no starting triple could be found: the golden
    points and then 15 evenly spaced points are tried for an xb below both ends
    (fails when the minimum is at an end). Converges for unimodal ``f``.
    """
    if not (math.isfinite(xmin) and math.isfinite(xmax) and xmin < xmax):
        raise ValueError(f"need finite xmin < xmax, got xmin={xmin!r}, xmax={xmax!r}")
    if not eps > 0:
        raise ValueError(f"eps must be > 0, got {eps!r}")
    xa, xc = xmin, xmax
    fa, fc = f(xa), f(xc)
    candidates = [xa + _GOLDEN * (xc - xa), xc - _GOLDEN * (xc - xa)]
    candidates += [xa + (xc - xa) * k / 16.0 for k in range(1, 16)]
    for xb in candidates:
        fb = f(xb)
        if fb < fa and fb < fc:
            break
    else:
        logger.debug("golden_section_search: no starting triple in [%g, %g]", xmin, xmax)
        return None
    for _ in range(10_000):
        if xc - xa < eps:
            break
        if xb - xa > xc - xb:
            x = xb - _GOLDEN * (xb - xa)
            fx = f(x)
            if fx < fb:
                xc, fc, xb, fb = xb, fb, x, fx
            else:
                xa, fa = x, fx
        else:
            x = xb + _GOLDEN * (xc - xb)
            fx = f(x)
            if fx < fb:
                xa, fa, xb, fb = xb, fb, x, fx
            else:
                xc, fc = x, fx
        if not xa < xb < xc:
            break
    return (xa, xb, xc), (fa, fb, fc)


class OptimalSolver:
    """Seed 001's exact solver: maximise Σ f_i w_i (1 − e^{−λ_i/f_i}) s.t. (1/N) Σ f_i = f̄, f >= 0.

    Solves the dual on ν = −α/N: f_i(ν) = λ_i/y(ν/w_i), 0 when w_i <= ν; Σ f_i(ν)
    falls monotonically, so ν is found by bisection on log ν down to adjacent
    floats, and the budget left between the two ends is given to the marginal
    pages (``_blend``): the budget is met to rounding. The objective
    ``"freshness"`` uses w_i/λ_i instead of w_i. After ``solve``, ``nu`` holds
    the threshold found.
    """

    def __init__(self, objective: str = "changes") -> None:
        self.objective = _check_objective(objective)
        self.nu: float | None = None

    def solve(self, values, rates, frequency, n_pages) -> np.ndarray:
        """Frequencies f_i (fetches per unit time) for each page; Σ f_i = n_pages·frequency.

        ``n_pages`` (N) may exceed len(values) (seed 001: it normalises f̄). If no
        page has value (w·λ = 0 everywhere) every allocation is optimal and the
        budget is spread evenly.
        """
        w = _vector("values", values)
        lam = _vector("rates", rates)
        _same_length(values=w, rates=lam)
        fbar = _scalar("frequency", frequency)
        if isinstance(n_pages, bool) or not float(n_pages).is_integer():
            raise ValueError(f"n_pages must be an integer, got {n_pages!r}")
        if n_pages < len(w):
            raise ValueError(f"n_pages ({n_pages}) must be >= len(values) ({len(w)})")
        budget = fbar * int(n_pages)
        if len(w) == 0:
            self.nu = 0.0
            return np.zeros(0)
        w_eff = np.asarray(effective_weight(w, lam, self.objective), dtype=float)
        self.nu, f = _allocate(w_eff, lam, budget)
        if budget > 0 and not ((w_eff > 0) & (lam > 0)).any():
            f = np.full(len(w), budget / len(w))
        logger.debug("OptimalSolver: %d pages, budget %g, nu %g", len(w), budget, self.nu)
        return f


# --------------------------------------------------------------------------- seed 001: clusters


@dataclass(frozen=True)
class ClusterSolution:
    """Threshold ``nu`` and the fetch rate ``frequencies[k]`` spent on each cluster k."""

    nu: float
    frequencies: np.ndarray
    budget: float


class WCluster:
    """Seed 001's clusters of pages by weight, with Λ[k] = Σ λ per cluster, for an O(K) solve.

    Linear bins (seed 001): K equal bins on (0, 1], I[k] = {k/K < w <= (k+1)/K}
    (0-based), weights clamped into [0, 1]. Log bins (``log=True``, docs/MATH.md, seeds 001-002,
    for heavy-tailed weights): K geometric bins between ``w_min`` and ``w_max``,
    weights outside clamped into the end bins. Since f_i* = λ_i·g(ν/w_i) is
    linear in λ_i for fixed w, a cluster's rate is Λ[k]/y(ν/W[k]). W[k] is the
    λ-weighted mean weight of the cluster (Σ w λ / Λ), which is tighter than
    seed 001's bin centre; the centre is used for empty clusters. Weights are
    effective weights (w/λ under ``objective="freshness"``).
    """

    def __init__(self, n_clusters: int = 100, w_min: float = 1e-6, w_max: float = 1.0,
                 log: bool = False, objective: str = "changes") -> None:
        if isinstance(n_clusters, bool) or not isinstance(n_clusters, int) or n_clusters < 1:
            raise ValueError(f"n_clusters must be a positive integer, got {n_clusters!r}")
        self.objective = _check_objective(objective)
        self.n_clusters = n_clusters
        self.log = bool(log)
        if self.log:
            w_min = _scalar("w_min", w_min, positive=True)
            w_max = _scalar("w_max", w_max, positive=True)
            if w_max <= w_min:
                raise ValueError(f"w_max ({w_max}) must be > w_min ({w_min})")
            self.edges = np.geomspace(w_min, w_max, n_clusters + 1)
            self.centers = np.sqrt(self.edges[:-1] * self.edges[1:])
        else:
            self.edges = np.linspace(0.0, 1.0, n_clusters + 1)
            self.centers = (2 * np.arange(1, n_clusters + 1) - 1) / (2.0 * n_clusters)
        self.w_min, self.w_max = float(self.edges[0]), float(self.edges[-1])
        self.count = np.zeros(n_clusters, dtype=np.int64)
        self.rate_sum = np.zeros(n_clusters)
        self.weighted_rate_sum = np.zeros(n_clusters)

    @staticmethod
    def clamp(w: float) -> float:
        """Make sure 0 <= w <= 1 (seed 001)."""
        return min(1.0, max(0.0, float(w)))

    def cluster_index(self, w: float) -> int:
        """The cluster (0-based) of effective weight ``w``."""
        w = _scalar("w", w, allow_inf=True)
        k = self.n_clusters
        if self.log:
            if w <= self.w_min:
                return 0
            if w >= self.w_max:
                return k - 1
            pos = math.log(w / self.w_min) / math.log(self.w_max / self.w_min) * k
            return min(k - 1, max(0, int(math.floor(pos))))
        return min(k - 1, max(0, int(math.ceil(self.clamp(w) * k)) - 1))

    def _key(self, page_value: float, page_rate: float) -> tuple[int, float, float]:
        lam = _scalar("page_rate", page_rate)
        w = _scalar("page_value", page_value)
        w_eff = float(effective_weight(w, lam, self.objective))
        return self.cluster_index(w_eff), lam, (w_eff * lam if lam > 0 else 0.0)

    def add(self, page_value: float, page_rate: float) -> None:
        """Add a page of weight ``page_value`` and change rate ``page_rate``."""
        k, lam, wl = self._key(page_value, page_rate)
        self.count[k] += 1
        self.rate_sum[k] += lam
        self.weighted_rate_sum[k] += wl

    def delete(self, page_value: float, page_rate: float) -> None:
        """Remove a page added earlier with the same value and rate."""
        k, lam, wl = self._key(page_value, page_rate)
        if self.count[k] <= 0:
            raise ValueError(f"page_value {page_value!r}: its cluster {k} is empty")
        self.count[k] -= 1
        if self.count[k] == 0:
            self.rate_sum[k] = self.weighted_rate_sum[k] = 0.0
        else:
            self.rate_sum[k] = max(0.0, self.rate_sum[k] - lam)
            self.weighted_rate_sum[k] = max(0.0, self.weighted_rate_sum[k] - wl)

    def representatives(self) -> np.ndarray:
        """W[k]: the λ-weighted mean weight of each cluster (bin centre when Λ[k] = 0)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = self.weighted_rate_sum / self.rate_sum
        return np.where(self.rate_sum > 0, mean, self.centers)

    def solve(self, budget: float | None = None, *, frequency: float | None = None,
              n_pages: int | None = None) -> ClusterSolution:
        """Clustered seed 001 solve in O(K): ν and the rate spent on each cluster.

        Give the total fetch rate ``budget`` R, or ``frequency`` f̄ and ``n_pages``
        N (R = N·f̄, N defaults to the number of pages added).
        """
        if (budget is None) == (frequency is None):
            raise ValueError("give exactly one of budget or frequency")
        if budget is None:
            n = int(self.count.sum()) if n_pages is None else n_pages
            if n < self.count.sum():
                raise ValueError(
                    f"n_pages ({n}) must be >= the number of pages ({self.count.sum()})"
                )
            budget = _scalar("frequency", frequency) * n
        budget = _scalar("budget", budget)
        nu, freq = _allocate(self.representatives(), self.rate_sum.copy(), budget)
        return ClusterSolution(nu=nu, frequencies=freq, budget=budget)

    def page_frequencies(self, values, rates, solution: ClusterSolution) -> np.ndarray:
        """Per-page rates implied by a clustered solution: f_i = λ_i·F[k]/Λ[k]."""
        w = _vector("values", values)
        lam = _vector("rates", rates)
        _same_length(values=w, rates=lam)
        w_eff = np.asarray(effective_weight(w, lam, self.objective), dtype=float)
        ks = np.array([self.cluster_index(x) for x in w_eff], dtype=np.int64)
        with np.errstate(divide="ignore", invalid="ignore"):
            per_rate = np.where(self.rate_sum > 0, solution.frequencies / self.rate_sum, 0.0)
        return lam * per_rate[ks]


# --------------------------------------------------------------------------- Azar et al.


def azar_rates(weights, rates, budget: float) -> np.ndarray:
    """Azar et al. (2018): optimal Poisson fetch rates p_i = max(0, sqrt(w_i λ_i/ν) − λ_i).

    Maximises Σ w_i p_i/(λ_i + p_i) (freshness under Poisson fetching), i.e.
    minimises Σ w_i λ_i/(λ_i + p_i), s.t. Σ p_i = budget (docs/MATH.md, seeds 001-002). Exact: pages
    enter in decreasing order of w_i/λ_i; for the first k pages
    sqrt(ν) = Σ sqrt(w λ)/(budget + Σ λ), and k is the largest set for which
    every member still has p_i > 0.
    """
    w = _vector("weights", weights)
    lam = _vector("rates", rates)
    _same_length(weights=w, rates=lam)
    b = _scalar("budget", budget)
    p = np.zeros_like(lam)
    live = np.flatnonzero((w > 0) & (lam > 0))
    if b == 0 or len(live) == 0:
        return p
    order = live[np.argsort(-(w[live] / lam[live]), kind="stable")]
    root = np.sqrt(w[order] * lam[order])
    sqrt_nu = np.cumsum(root) / (b + np.cumsum(lam[order]))
    # page j is in the active set of size k iff sqrt(w_j/λ_j) > sqrt(ν_k); ratios decrease.
    ratio = np.sqrt(w[order] / lam[order])
    k = int(np.flatnonzero(ratio > sqrt_nu)[-1]) + 1
    s = sqrt_nu[k - 1]
    sel = order[:k]
    p[sel] = np.maximum(0.0, root[:k] / s - lam[sel])
    return p

"""Tests for the policy (frontier_rate.math.index, .budget, .cells): each formula against an independent computation.

Independent references used here: exact rational arithmetic (fractions) for
seed 002's Whittle index, 60-digit decimal Newton for y(c), finite differences
for seed 001's marginal value, scipy's SLSQP and brentq (test-only) for the
optimisation problems.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from scipy.optimize import brentq, minimize

from frontier_rate.math.budget import cell_rates, host_threshold, solve_threshold, solve_with_host_caps
from frontier_rate.math.cells import cell_of, cells_from_pages
from frontier_rate.math.index import (
    _F_COEF,
    _F_TERMS,
    EXPLORE_C,
    EXPLORE_CHANGES,
    MIN_CHANGE_CHANCE,
    N_CELLS,
    N_RATE_BINS,
    RATE_BINS_PER_DECADE,
    RATE_LOG10_MIN,
    WEIGHT_BINS_PER_DECADE,
    WEIGHT_LOG10_MIN,
    _index_curve,
    _series,
    effective_weight,
    explore_rate,
    frequency_for_threshold,
    index_curve,
    interval_for_threshold,
    objective_value,
    optimal_y,
    page_index,
    whittle_index,
)
from frontier_rate.testing import solvers as R

# --------------------------------------------------------------------------- helpers


def decimal_y(c: float) -> Decimal:
    """y with 1 − (1 + y)e^{−y} = c for the double c, by Newton in 60-digit decimals."""
    with localcontext() as ctx:
        ctx.prec = 60
        cd = Decimal(c)
        y = (2 * cd).sqrt() if c < 0.5 else -((1 - cd).ln())
        for _ in range(500):
            step = (1 - (1 + y) * (-y).exp() - cd) / (y * (-y).exp())
            y -= step
            if abs(step) <= abs(y) * Decimal("1e-45"):
                break
        return y


def decimal_index_curve(y: float) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 60
        yd = Decimal(y)
        return 1 - (1 + yd) * (-yd).exp()


def value_rate(f, w, lam):
    """Seed 001's T̄ = Σ f w (1 − e^{−λ/f}), written out independently of the package."""
    f = np.asarray(f, dtype=float)
    safe = np.maximum(f, 1e-300)
    return float(np.sum(np.where(f > 0, safe * w * -np.expm1(-lam / safe), 0.0)))


def slsqp_max(w, lam, budget, extra_constraints=()):
    n = len(w)
    cons = [{"type": "eq", "fun": lambda f: f.sum() - budget}, *extra_constraints]
    best = -np.inf
    for x0 in (np.full(n, budget / n), budget * lam / lam.sum()):
        r = minimize(lambda f: -value_rate(f, w, lam), x0, method="SLSQP",
                     bounds=[(0, None)] * n, constraints=cons,
                     options={"ftol": 1e-14, "maxiter": 2000})
        f = np.maximum(r.x, 0)
        ok = abs(f.sum() - budget) < 1e-6 * budget
        ok = ok and all(c["fun"](f) >= -1e-6 for c in extra_constraints)
        if ok:
            best = max(best, value_rate(f, w, lam))
    return best


# ------------------------------------------------------------------ optimal_y / index curve


def test_optimal_y_matches_60_digit_reference():
    small = np.logspace(-30, np.log10(0.499), 120)
    cs = np.concatenate([small, 1 - np.logspace(-0.31, -15.5, 120)])
    ys = optimal_y(cs)
    for c, y in zip(cs, ys, strict=True):
        ref = decimal_y(float(c))
        assert abs(Decimal(float(y)) - ref) <= ref * Decimal("1e-13"), (c, y, ref)


def test_optimal_y_early_exit_equals_all_newton_steps(monkeypatch):
    """Stopping after a step below NEWTON_TOL·y gives what all NEWTON_STEPS give, to 1e-15.

    With NEWTON_TOL = 0 every element takes every step (one that stops on a
    step of exactly 0 would not have moved again).
    """
    cs = np.logspace(-12, np.log10(0.4999), 2000)
    early = optimal_y(cs)
    monkeypatch.setattr("frontier_rate.math.index.NEWTON_TOL", 0.0)  # where optimal_y reads it
    full = optimal_y(cs)
    np.testing.assert_allclose(early, full, rtol=1e-15, atol=0)


def test_index_curve_series_terms_keep_double_precision():
    """F's series cut to _F_TERMS terms stays within 2 ulp of all 22 terms and of 60 digits."""
    assert list(_F_TERMS) == sorted(_F_TERMS, reverse=True)
    assert _F_TERMS[0] < len(_F_COEF) and _F_TERMS[-1] == 2
    ys = np.logspace(-12, 0, 3000, endpoint=False)
    cut = _index_curve(ys)
    full = _series(ys, _F_COEF)
    np.testing.assert_allclose(cut, full, rtol=4.5e-16, atol=0)
    for y, f in zip(ys[::10], cut[::10], strict=True):
        ref = decimal_index_curve(float(y))
        assert abs(Decimal(float(f)) - ref) <= ref * Decimal("4.5e-16"), y


def test_optimal_y_edges_and_scalars():
    assert optimal_y(0.0) == 0.0
    assert optimal_y(-3.0) == 0.0
    assert optimal_y(1.0) == math.inf
    assert optimal_y(2.0) == math.inf
    assert isinstance(optimal_y(0.3), float)
    assert optimal_y([0.1, 0.9]).shape == (2,)
    with pytest.raises(ValueError, match="c"):
        optimal_y(float("nan"))


def test_index_curve_keeps_precision_for_tiny_y():
    for y in (1e-8, 1e-5, 0.3, 0.999, 1.0, 3.0, 30.0):
        ref = decimal_index_curve(y)
        assert abs(Decimal(index_curve(y)) - ref) <= ref * Decimal("1e-14"), y
    assert index_curve(math.inf) == 1.0
    grid = np.linspace(0, 50, 2001)
    assert np.all(np.diff(index_curve(grid)) >= 0)


# ------------------------------------------------------------------ seed 002: Whittle index

SOURCES = [(1.0, 0.5, 1.0), (0.3, 0.9, 1.0), (2.0, 0.75, 2.5), (0.05, 0.97, 0.4)]


def cycle_rewards(u: Fraction, a: Fraction, m: int) -> tuple[Fraction, int]:
    """Simulate one cycle of "fetch every m periods" from the state right after a fetch.

    The state after a fetch is always u (seed 002, eq. 3), so the cycle repeats
    exactly and its averages are the long-run averages. Returns (reward from the
    fetch, number of passive periods that earn the subsidy).
    """
    state, fetched, passive = u, Fraction(0), 0
    for k in range(1, m + 1):
        if k == m:
            fetched += state
            state = u
        else:
            passive += 1
            state = a * state + u  # seed 002, eq. 2
    return fetched, passive


def average_reward(u, a, m, subsidy, cost) -> Fraction:
    fetched, passive = cycle_rewards(u, a, m)
    return (fetched + passive * cost * subsidy) / m


@pytest.mark.parametrize("u, a, cost", SOURCES)
def test_whittle_index_equals_brute_force_indifference_subsidy(u, a, cost):
    """For n = 1..20, the subsidy making "every n" and "every n+1" equally good is γ(x_n).

    Rewards are linear in the subsidy ν (seed 002, eq. 9: ν·C per passive
    period), so ν solves g_n(ν) = g_{n+1}(ν) exactly in rational arithmetic;
    we also check that at that ν no other period m (nor never fetching) beats
    them, i.e. the optimal policy really switches at state x_n.
    """
    uf, af, cf = Fraction(u), Fraction(a), Fraction(cost)
    for n in range(1, 21):
        a_n, p_n = cycle_rewards(uf, af, n)
        a_m, p_m = cycle_rewards(uf, af, n + 1)
        nu = (a_n / n - a_m / (n + 1)) / (cf * (Fraction(p_m, n + 1) - Fraction(p_n, n)))
        best = average_reward(uf, af, n, nu, cf)
        assert average_reward(uf, af, n + 1, nu, cf) == best
        assert all(average_reward(uf, af, m, nu, cf) <= best for m in range(1, 60))
        assert cf * nu <= best  # never fetching earns the subsidy every period
        x_n = uf * (1 - af**n) / (1 - af)
        got = whittle_index(float(x_n), u, a, cost)
        assert abs(got - float(nu)) <= 1e-12 * abs(float(nu)), (n, got, float(nu))
        w = u / (1 - a)
        assert got == pytest.approx(w * (1 - a**n * (1 + n * (1 - a))) / cost, rel=1e-12)


def test_ceiling_guard_matters():
    """The naive ceil(log ratio / log a) misses n on many exact states; the guarded one never."""
    naive_wrong = 0
    for a in np.linspace(0.5, 0.99, 50):
        xs = np.array([(1 - a**n) / (1 - a) for n in range(1, 21)])
        ratio = 1.0 - (1.0 - a) * xs
        naive_eta = np.ceil(np.log(ratio) / np.log(a))
        naive = naive_eta * ((1 - a) * xs - 1.0) + xs
        exact = np.array([(1 - a**n * (1 + n * (1 - a))) / (1 - a) for n in range(1, 21)])
        wrong = np.abs(naive - exact) > 1e-12 * exact
        naive_wrong += int(wrong.sum())
        np.testing.assert_allclose(whittle_index(xs, 1.0, a), exact, rtol=1e-12, atol=0)
    assert naive_wrong > 100


def test_whittle_index_between_states_and_limits():
    u, a = 1.0, 0.8
    x3, x4 = u * (1 - a**3) / (1 - a), u * (1 - a**4) / (1 - a)
    mid = 0.5 * (x3 + x4)  # strictly between: η = 4 by the ceiling
    assert whittle_index(mid, u, a) == pytest.approx(4 * ((1 - a) * mid - u) + mid, rel=1e-14)
    assert whittle_index(0.0, u, a) == 0.0
    assert whittle_index(u / (1 - a), u, a) == pytest.approx(u / (1 - a))


# --------------------------------------------------------------------------- page index


def test_discrete_page_index_is_the_whittle_index_of_the_page():
    """A page n periods after its fetch is seed 002's source with x = w(1 − a^n), u = w(1 − a)."""
    w, lam, T = 3.0, 0.2, 1.5
    a = math.exp(-lam * T)
    for n in range(0, 25):
        x = w * (1 - a**n)
        expect = whittle_index(x, w * (1 - a), a) if n else 0.0
        assert page_index(n * T, lam, w, period=T) == pytest.approx(expect, rel=1e-12, abs=1e-15)
        # n = floor(age / T): whole periods elapsed
        at_n = page_index(n * T, lam, w, period=T)
        assert page_index((n + 0.999) * T, lam, w, period=T) == at_n


def test_discrete_index_tends_to_continuous_and_is_stable():
    w, lam, t = 2.0, 0.7, 3.0
    cont = page_index(t, lam, w)
    assert page_index(t, lam, w, period=t / 100000) == pytest.approx(cont, rel=1e-4)
    # tiny λT = 1e-12: the discrete form must not cancel; 60-digit reference
    with localcontext() as ctx:
        ctx.prec = 60
        a = (-Decimal(1e-12)).exp()
        ref = Decimal(w) * (1 - a**5 * (1 + 5 * (1 - a)))  # ≈ w (n² + n)(λT)²/2
    tiny = page_index(5e-9, 1e-3, w, period=1e-9)
    assert abs(Decimal(tiny) - ref) <= ref * Decimal("1e-9")


def test_continuous_index_tiny_lambda_t_is_positive_and_quadratic():
    vals = page_index(np.array([1e-12, 1e-9, 1e-6]), 1.0, 4.0)
    np.testing.assert_allclose(vals, 4.0 * np.array([1e-12, 1e-9, 1e-6]) ** 2 / 2, rtol=1e-5)
    assert np.all(vals > 0)


@pytest.mark.parametrize("objective", ["changes", "freshness"])
def test_continuous_index_is_marginal_value_of_frequency(objective):
    """w_eff F(λt) = ∂T̄/∂f at f = 1/t (seed 001): central differences, step h = 1e-4 f.

    The central-difference error is O(h²·T̄''') ≈ 1e-8 relative at this step.
    """
    rng = np.random.default_rng(3)
    for _ in range(20):
        w, lam, t = rng.uniform(0.1, 5), 10 ** rng.uniform(-2, 1), 10 ** rng.uniform(-1, 1)
        scale = w if objective == "changes" else w / lam
        f = 1.0 / t
        h = 1e-4 * f

        def tbar(ff, scale=scale, lam=lam):
            return ff * scale * -math.expm1(-lam / ff)

        deriv = (tbar(f + h) - tbar(f - h)) / (2 * h)
        assert page_index(t, lam, w, objective=objective) == pytest.approx(deriv, rel=1e-6, abs=0)


def test_freshness_objective_is_weighted_time_average_freshness():
    """f·(w/λ)(1 − e^{−λ/f}) equals w · (1/t)∫_0^t e^{−λs} ds (docs/MATH.md, seeds 001-002), by quadrature."""
    w, lam, t = 2.0, 0.4, 3.0
    s = np.linspace(0, t, 200001)
    avg = np.trapezoid(np.exp(-lam * s), s) / t  # trapezoid error ~ (Δs)² λ² / 12 ≈ 1e-12
    got = objective_value([1 / t], [w], [lam], objective="freshness")
    assert got == pytest.approx(w * avg, rel=1e-9)
    assert effective_weight(w, lam, "freshness") == pytest.approx(w / lam)


def test_interval_inverts_page_index_well_conditioned_range():
    """interval_for_threshold(page_index(t)) = t to 1e-9 for λt in [1e-8, 20]."""
    ys = np.logspace(-8, np.log10(20), 300)
    for lam, w in ((1e-6, 1.0), (1.0, 0.3), (1e3, 7.0)):
        for objective in ("changes", "freshness"):
            t = ys / lam
            nu = page_index(t, lam, w, objective=objective)
            back = interval_for_threshold(nu, lam, w, objective=objective)
            np.testing.assert_allclose(back, t, rtol=1e-9, atol=0)


def test_interval_for_large_lambda_t_is_as_exact_as_the_threshold_allows():
    """For λt in [20, 1e3], ν/w rounds near 1 (dy = dc·e^y/y, so the double ν cannot
    carry t to 1e-9 past λt ≈ 22). The inversion must still be exact for the ν it
    is given: compare with the 60-digit solution for that double c; and once c
    rounds to 1 the page is at the margin and its interval is inf."""
    w, lam = 1.0, 0.01
    for y in np.logspace(np.log10(20), 3, 60):
        c = float(decimal_index_curve(float(y)))
        t = interval_for_threshold(c * w, lam, w)
        if c < 1.0:
            ref = decimal_y(c) / Decimal(lam)
            assert abs(Decimal(t) - ref) <= ref * Decimal("1e-12"), y
        else:
            assert t == math.inf


def test_interval_edges():
    assert interval_for_threshold(0.0, 1.0, 2.0) == 0.0
    assert interval_for_threshold(-1.0, 1.0, 2.0) == 0.0
    assert interval_for_threshold(2.0, 1.0, 2.0) == math.inf
    assert interval_for_threshold(0.5, 0.0, 2.0) == math.inf
    assert frequency_for_threshold(3.0, 1.0, 2.0) == 0.0
    t = interval_for_threshold(0.2, 0.5, 1.0)
    assert frequency_for_threshold(0.2, 0.5, 1.0) == pytest.approx(1 / t, rel=1e-15)


# --------------------------------------------------------------------------- seed 001: exact solver


@pytest.mark.parametrize("seed", range(8))
def test_optimal_solver_no_worse_than_slsqp(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 51))
    w = rng.uniform(0.01, 1.0, n)
    lam = 10 ** rng.uniform(-1.5, 1.5, n)
    n_pages = n + int(rng.integers(0, 5))
    fbar = 10 ** rng.uniform(-1.5, 0.5)
    f = R.OptimalSolver().solve(w, lam, fbar, n_pages)
    budget = fbar * n_pages
    assert np.all(f >= 0)
    assert abs(f.sum() - budget) / budget < 1e-9
    ours, ref = value_rate(f, w, lam), slsqp_max(w, lam, budget)
    assert ours >= ref - 1e-6 * abs(ref)


def test_optimal_solver_freshness_no_worse_than_slsqp():
    rng = np.random.default_rng(11)
    w, lam = rng.uniform(0.1, 1, 15), 10 ** rng.uniform(-1, 1, 15)
    f = R.OptimalSolver(objective="freshness").solve(w, lam, 0.4, 15)
    assert abs(f.sum() - 6.0) < 6e-9
    ours = value_rate(f, w / lam, lam)
    assert ours >= slsqp_max(w / lam, lam, 6.0) * (1 - 1e-6)


def test_seed_001_two_page_example():
    """w = (1, 5), λ = (5, 1): page 1 unrefreshed at low f̄, refreshed more than page 2 at high f̄."""
    solver = R.OptimalSolver()
    low = solver.solve([1, 5], [5, 1], 0.3, 2)
    assert low[0] == 0.0 and low[1] == pytest.approx(0.6, rel=1e-12)
    assert solver.nu > 1.0  # the threshold is above page 1's weight
    high = solver.solve([1, 5], [5, 1], 5.0, 2)
    assert high[0] > high[1] > 0
    assert high.sum() == pytest.approx(10.0, rel=1e-12)


def test_budget_met_exactly_when_pages_sit_at_the_margin():
    """Several identical pages at the margin: Σf = N f̄ to 1e-9 across the transition,
    and KKT holds: every fetched page has index ν at t = 1/f, except those at the margin."""
    w = np.array([1.0, 1.0, 1.0, 5.0, 5.0])
    lam = np.array([5.0, 5.0, 5.0, 1.0, 1.0])
    # the w = 1 pages start being fetched at f̄ where ν = 1: the w = 5 pages then run at 1/y(0.2)
    f_enter = 2 / optimal_y(0.2) / 5
    solver = R.OptimalSolver()
    for fbar in np.linspace(0.5 * f_enter, 3 * f_enter, 41):
        f = solver.solve(w, lam, fbar, 5)
        assert abs(f.sum() - 5 * fbar) / (5 * fbar) < 1e-9
        nu = solver.nu
        assert np.all(f[:3] == f[0])  # symmetric pages get the same share
        idx = page_index(1 / f[3], lam[3], w[3])
        assert idx == pytest.approx(nu, rel=1e-6, abs=0)
        if f[0] == 0:
            assert nu >= 1.0 * (1 - 1e-12)


def test_golden_section_search_on_seed_001_dual():
    """Seed 001 minimises Q(α) by golden section: same ν as the bisection, and strong duality
    Q(ν*) = T̄(f*) since the problem is concave."""
    rng = np.random.default_rng(7)
    w, lam = rng.uniform(0.05, 1, 30), 10 ** rng.uniform(-1, 1, 30)
    budget = 12.0
    solver = R.OptimalSolver()
    f = solver.solve(w, lam, budget / 30, 30)
    found = R.golden_section_search(
        lambda z: R.dual_value(math.exp(z), w, lam, budget), math.log(1e-8), math.log(w.max()), 1e-9
    )
    assert found is not None
    (xa, xb, xc), (fa, fb, fc) = found
    assert xa < xb < xc and xc - xa < 1e-9 and fb <= fa and fb <= fc
    # Q is flat at its minimum: golden section locates ν only to ~sqrt(machine eps)
    assert math.exp(xb) == pytest.approx(solver.nu, rel=1e-5)
    dual = R.dual_value(solver.nu, w, lam, budget)
    assert dual == pytest.approx(value_rate(f, w, lam), rel=1e-10)


def test_golden_section_search_plain_and_failure():
    found = R.golden_section_search(lambda x: (x - 0.3) ** 2, -1.0, 2.0, 1e-8)
    assert found is not None and found[0][1] == pytest.approx(0.3, abs=1e-8)
    assert R.golden_section_search(lambda x: x, 0.0, 1.0, 1e-6) is None  # minimum at an end


# --------------------------------------------------------------------------- seed 001: clusters


def test_wcluster_linear_bins_follow_seed_001():
    c = R.WCluster(100)
    assert c.cluster_index(0.0) == 0
    assert c.cluster_index(0.01) == 0  # I[k] = {(k−1)/K < w <= k/K}
    assert c.cluster_index(0.0101) == 1
    assert c.cluster_index(1.0) == 99
    assert c.cluster_index(7.0) == 99
    assert R.WCluster.clamp(-2) == 0.0 and R.WCluster.clamp(3) == 1.0
    assert R.WCluster.clamp(0.4) == 0.4
    np.testing.assert_allclose(c.centers[:2], [0.005, 0.015])  # W[k] = (2k − 1)/(2K)


def test_wcluster_add_delete_and_log_bins():
    c = R.WCluster(12, w_min=1e-6, w_max=1.0, log=True)
    assert c.cluster_index(1e-6) == 0
    assert c.cluster_index(1e-3) == 6  # 2 bins per decade
    assert c.cluster_index(0.99) == 11
    c.add(1e-3, 2.0)
    c.add(1.5e-3, 4.0)
    k = c.cluster_index(1e-3)
    assert c.count[k] == 2 and c.rate_sum[k] == 6.0
    assert c.representatives()[k] == pytest.approx((1e-3 * 2 + 1.5e-3 * 4) / 6)
    c.delete(1e-3, 2.0)
    assert c.count[k] == 1 and c.rate_sum[k] == pytest.approx(4.0)
    c.delete(1.5e-3, 4.0)
    with pytest.raises(ValueError, match="page_value"):
        c.delete(1.5e-3, 4.0)


@pytest.mark.parametrize("objective", ["changes", "freshness"])
def test_clustered_solve_within_half_percent_of_exact(objective):
    """K = 100 log-spaced clusters vs the exact solver at N = 10^4 (λ log-uniform, Zipf weights).

    The clustered solution assigns f_i = λ_i F[k]/Λ[k] (seed 001's f* linear in λ
    within a cluster) and meets the same budget; its objective must be within 0.5%.
    """
    rng = np.random.default_rng(42)
    n = 10_000
    lam = 10 ** rng.uniform(-2, 1, n)
    w = 1.0 / np.arange(1, n + 1)
    rng.shuffle(w)
    w_eff = w if objective == "changes" else w / lam
    exact = R.OptimalSolver(objective=objective).solve(w, lam, 0.5, n)
    clusters = R.WCluster(100, w_min=w_eff.min(), w_max=w_eff.max(), log=True, objective=objective)
    for wi, li in zip(w, lam, strict=True):
        clusters.add(wi, li)
    sol = clusters.solve(frequency=0.5)
    approx = clusters.page_frequencies(w, lam, sol)
    assert approx.sum() == pytest.approx(0.5 * n, rel=1e-9)
    assert sol.frequencies.sum() == pytest.approx(0.5 * n, rel=1e-9)
    ratio = value_rate(approx, w_eff, lam) / value_rate(exact, w_eff, lam)
    assert 0.995 <= ratio <= 1 + 1e-9


# --------------------------------------------------------------------------- engine cells


def test_cell_of_uses_documented_edges():
    per_w, per_r = WEIGHT_BINS_PER_DECADE, RATE_BINS_PER_DECADE
    wbin = int((0 - WEIGHT_LOG10_MIN) * per_w)
    rbin = int((-3 - RATE_LOG10_MIN) * per_r)
    assert cell_of(1.0, 1e-3) == wbin * N_RATE_BINS + rbin
    assert cell_of(0.0, 0.0) == 0
    assert cell_of(1e30, 1e30) == N_CELLS - 1
    just_below = 10 ** (-3 - 0.5 / per_r)
    assert cell_of(1.0, just_below) == wbin * N_RATE_BINS + rbin - 1


def _page_total(nu, w, lam, lo, hi, objective):
    """Σ per page of f(ν) within [1/hi, 1/t_w], t_w = max(lo, t at which the chance of a
    change 1 − e^{−λt} reaches MIN_CHANGE_CHANCE) (issue 60), computed here on its own."""
    f = frequency_for_threshold(nu, lam, w, objective)
    worth = np.minimum(np.maximum(-np.log(1.0 - MIN_CHANGE_CHANCE) / lam, lo), hi)
    return float(np.minimum(np.maximum(f, 1 / hi), 1 / worth).sum())


@pytest.mark.parametrize("objective", ["changes", "freshness"])
def test_solve_threshold_matches_per_page_within_one_percent(objective):
    """Cells vs the exact per-page total (brentq on the per-page sum) on 10^4 pages.

    Rates in fetches per second, λ log-uniform from once per 11 days to once
    per 100 s, Zipf weights, intervals in [60 s, 30 days].
    """
    rng = np.random.default_rng(2024)
    n = 10_000
    lam = 10 ** rng.uniform(-6, -2, n)
    w = 100.0 / np.arange(1, n + 1)
    rng.shuffle(w)
    lo, hi = 60.0, 30 * 86400.0
    cells = cells_from_pages(w, lam)
    w_eff = np.asarray(effective_weight(w, lam, objective))
    for budget in (n / 86400, n / 3600, n / 300):
        sol = solve_threshold(cells, budget, lo, hi, objective)
        assert sol.status == "ok" and sol.budget_met
        assert sol.rate == pytest.approx(budget, rel=1e-9)
        assert abs(_page_total(sol.nu, w, lam, lo, hi, objective) / budget - 1) < 0.01
        exact = math.exp(brentq(
            lambda z, b=budget: _page_total(math.exp(z), w, lam, lo, hi, objective) - b,
            math.log(w_eff.max() * 1e-12), math.log(w_eff.max()), xtol=1e-13,
        ))
        assert sol.nu == pytest.approx(exact, rel=0.02)


def test_solve_threshold_flags_and_mapping_input():
    w = np.array([1.0, 2.0, 0.5, 3.0])
    lam = np.array([1e-3, 1e-4, 1e-2, 1e-5])
    cells = cells_from_pages(w, lam)
    as_map = {i: tuple(row) for i, row in enumerate(cells) if row[0] > 0}
    a = solve_threshold(cells, 1e-3, 60, 86400)
    b = solve_threshold(as_map, 1e-3, 60, 86400)
    assert a == b and a.status == "ok"
    under = solve_threshold(cells, 1.0, 60, 86400)  # 4 pages at 1/60 s: 0.067/s < 1/s
    assert under.nu == 0.0 and under.status == "under_budget"
    # each page at most once per max(60 s, the time its chance of a change takes to reach
    # MIN_CHANGE_CHANCE): the budget left is not worth spending (issue 60)
    worth = np.maximum(60.0, -np.log(1.0 - MIN_CHANGE_CHANCE) / lam)
    assert under.rate == pytest.approx(float((1.0 / worth).sum()))
    assert under.rate < 4 / 60
    bare = solve_threshold(cells, 1.0, 60, 86400, chance=0.0)
    assert bare.status == "under_budget" and bare.rate == pytest.approx(4 / 60)
    over = solve_threshold(cells, 1e-6, 60, 86400)  # 4/86400 = 4.6e-5/s > 1e-6/s
    assert over.status == "over_budget" and not over.budget_met
    assert over.nu == pytest.approx(3.0) and over.rate == pytest.approx(4 / 86400)
    rates = cell_rates(over.nu, cells, 60, 86400)
    np.testing.assert_allclose(rates, 1 / 86400)


# --------------------------------------------------------------------------- Azar et al.


def test_azar_rates_match_numeric_optimum():
    """Minimise Σ w λ/(λ + p) s.t. Σ p = R, p >= 0 numerically; closed form must be as good,
    and satisfy KKT: w λ/(λ + p)² = ν where p > 0 and w/λ <= ν where p = 0."""
    rng = np.random.default_rng(9)
    w, lam = rng.uniform(0.05, 1, 25), 10 ** rng.uniform(-1, 1, 25)
    budget = 8.0
    p = R.azar_rates(w, lam, budget)
    assert abs(p.sum() - budget) < 1e-12 * budget and np.all(p >= 0)

    def loss(q):
        return float(np.sum(w * lam / (lam + q)))

    r = minimize(loss, np.full(25, budget / 25), method="SLSQP", bounds=[(0, None)] * 25,
                 constraints=[{"type": "eq", "fun": lambda q: q.sum() - budget}],
                 options={"ftol": 1e-15, "maxiter": 2000})
    assert loss(p) <= r.fun * (1 + 1e-9)
    active = p > 0
    nu = w[active] * lam[active] / (lam[active] + p[active]) ** 2
    np.testing.assert_allclose(nu, nu[0], rtol=1e-10)
    assert np.all(w[~active] / lam[~active] <= nu[0] * (1 + 1e-12))
    assert (~active).any()  # the instance exercises the p = 0 branch


# --------------------------------------------------------------------------- host caps


def test_host_caps_respected_budget_met_and_optimal():
    rng = np.random.default_rng(5)
    n = 12
    w, lam = rng.uniform(0.1, 1, n), 10 ** rng.uniform(-1, 1, n)
    hosts = [f"h{i}" for i in rng.integers(0, 3, n)]
    caps = {"h0": 0.5, "h1": 0.4}
    budget = 6.0
    sol = solve_with_host_caps(w, lam, hosts, caps, budget)
    f = sol.frequencies
    assert sol.budget_met and abs(f.sum() - budget) < 1e-9 * budget
    host_arr = np.array(hosts)
    for h, cap in caps.items():
        assert f[host_arr == h].sum() == pytest.approx(cap, rel=1e-9)  # both caps bind here
    extra = [{"type": "ineq", "fun": (lambda x, h=h, c=c: c - x[host_arr == h].sum())}
             for h, c in caps.items()]
    ref = slsqp_max(w, lam, budget, extra)
    assert value_rate(f, w, lam) >= ref - 1e-6 * ref
    # per-host multipliers: fetched pages of host h sit at index ν_h
    for i in np.flatnonzero(f > 0):
        index = page_index(1 / f[i], lam[i], w[i])
        assert index == pytest.approx(sol.host_nu[hosts[i]], rel=1e-6, abs=0)
    assert sol.host_nu["h2"] == sol.nu
    assert min(sol.host_nu["h0"], sol.host_nu["h1"]) > sol.nu


@pytest.mark.parametrize("objective", ["changes", "freshness"])
def test_host_caps_many_hosts_kkt(objective):
    """5000 pages on 60 hosts, half capped: caps hold, budget met, and the KKT conditions
    of the capped problem hold page by page (index at t = 1/f equals ν_h)."""
    rng = np.random.default_rng(17)
    n = 5000
    w, lam = 1.0 / np.arange(1, n + 1), 10 ** rng.uniform(-2, 1, n)
    rng.shuffle(w)
    hosts = rng.integers(0, 60, n)
    caps = {h: 2.0 for h in range(0, 60, 2)}
    budget = 400.0
    sol = solve_with_host_caps(w, lam, hosts, caps, budget, objective=objective)
    f = sol.frequencies
    assert sol.budget_met and abs(f.sum() - budget) < 1e-9 * budget
    binding = 0
    for h in range(60):
        total = f[hosts == h].sum()
        if h in caps:
            assert total <= caps[h] * (1 + 1e-9)
            binding += sol.host_nu[h] > sol.nu
        else:
            assert sol.host_nu[h] == sol.nu
    assert binding > 10
    fetched = np.flatnonzero(f > 0)
    idx = page_index(1 / f[fetched], lam[fetched], w[fetched], objective=objective)
    expected = np.array([sol.host_nu[h] for h in hosts[fetched]])
    margin = np.asarray(effective_weight(w[fetched], lam[fetched], objective)) <= expected * 1.001
    np.testing.assert_allclose(idx[~margin], expected[~margin], rtol=1e-6)


def test_host_caps_all_capped_reports_shortfall():
    w, lam = np.array([1.0, 0.5, 0.8]), np.array([1.0, 2.0, 0.5])
    sol = solve_with_host_caps(w, lam, ["a", "a", "b"], {"a": 0.3, "b": 0.2}, 5.0)
    assert not sol.budget_met
    assert sol.total == pytest.approx(0.5, rel=1e-9)
    assert sol.frequencies[:2].sum() == pytest.approx(0.3, rel=1e-9)


def test_host_threshold_meets_the_cap():
    w, lam = np.array([1.0, 0.5, 0.8]), np.array([1.0, 2.0, 0.5])
    nu_h = host_threshold(0.01, w, lam, 0.7)
    assert nu_h > 0.01
    total = frequency_for_threshold(nu_h, lam, w).sum()
    assert total == pytest.approx(0.7, rel=1e-6)
    assert host_threshold(0.9, w, lam, 0.7) == 0.9  # cap not binding above its τ
    assert host_threshold(0.2, w, lam, math.inf) == 0.2


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda: R.OptimalSolver().solve([1, 1], [1, -1], 1, 2), "rates"),
        (lambda: R.OptimalSolver().solve([1, float("nan")], [1, 1], 1, 2), "values"),
        (lambda: R.OptimalSolver().solve([1, 1], [1], 1, 2), "mismatched"),
        (lambda: R.OptimalSolver().solve([1, 1], [1, 1], 1, 1), "n_pages"),
        (lambda: R.OptimalSolver().solve([1, 1], [1, 1], -1, 2), "frequency"),
        (lambda: R.OptimalSolver(objective="clicks"), "objective"),
        (lambda: page_index(1.0, -1.0, 1.0), "rate"),
        (lambda: page_index(1.0, 1.0, float("nan")), "weight"),
        (lambda: page_index(-1.0, 1.0, 1.0), "age"),
        (lambda: page_index(1.0, 1.0, 1.0, period=0), "period"),
        (lambda: interval_for_threshold(float("nan"), 1.0, 1.0), "nu"),
        (lambda: whittle_index(1.0, 1.0, 1.5), "a"),
        (lambda: whittle_index(1.0, 0.0, 0.5), "u"),
        (lambda: whittle_index(3.0, 1.0, 0.5), "x"),
        (lambda: whittle_index(1.0, 1.0, 0.5, cost=0), "cost"),
        (lambda: R.WCluster(0), "n_clusters"),
        (lambda: R.WCluster(10, w_min=1.0, w_max=0.5, log=True), "w_max"),
        (lambda: R.WCluster(10).add(0.5, -1), "page_rate"),
        (lambda: solve_threshold(np.zeros((3, 2)), 1.0, 1, 2), "cells"),
        (lambda: solve_threshold(np.ones((3, 3)), 1.0, 10, 2), "max_interval"),
        (lambda: solve_threshold(np.ones((3, 3)), -1.0, 1, 2), "budget"),
        (lambda: solve_threshold(np.ones((3, 3)), 1.0, 0, 2), "min_interval"),
        (lambda: R.azar_rates([1, 1], [1, 1], float("inf")), "budget"),
        (lambda: R.azar_rates([1, 1], [1, 1, 1], 1.0), "mismatched"),
        (lambda: solve_with_host_caps([1], [1], ["a", "b"], {}, 1.0), "mismatched"),
        (lambda: solve_with_host_caps([1], [1], ["a"], {"a": -1}, 1.0), "host_caps"),
        (lambda: cell_of(-1.0, 1.0), "weight"),
    ],
)
def test_bad_input_names_the_field(call, field):
    with pytest.raises(ValueError, match=field):
        call()


def _host_case(seed: int = 11, hosts: int = 30):
    """Hosts of three groups of identical pages each (so every host cell is exact)."""
    rng = np.random.default_rng(seed)
    lam, w, host_of, rows = [], [], [], []
    for h in range(hosts):
        for _ in range(3):
            size = int(rng.integers(1, 15))
            rate = float(np.exp(rng.uniform(np.log(1e-6), np.log(1e-3))))
            weight = float(np.exp(rng.uniform(0.0, 2.0)))
            lam += [rate] * size
            w += [weight] * size
            host_of += [h] * size
            rows.append((size, size * rate, size * weight, h))
    return np.array(lam), np.array(w), np.array(host_of), np.array(rows, dtype=float)


def test_solve_threshold_with_hosts_matches_the_exact_host_cap_solve():
    """Host cells made of identical pages: the cell solve with per-host caps gives the same ν
    and per-host thresholds as solve_with_host_caps page by page."""
    lam, w, host_of, rows = _host_case()
    hosts = int(host_of.max()) + 1
    budget = float(lam.sum()) * 0.8
    caps = np.full(hosts, budget / hosts * 1.5)
    exact = solve_with_host_caps(w, lam, host_of.tolist(), dict(enumerate(caps)), budget,
                                   objective="freshness")
    sol = solve_threshold(rows[:, :3], budget, 1e-9, 1e12, "freshness", hosts=rows, caps=caps,
                            chance=0.0)  # the bare solve: solve_with_host_caps has no floor
    assert sol.status == "ok" and sol.rate == pytest.approx(budget, rel=1e-9)
    assert sol.nu == pytest.approx(exact.nu, rel=1e-6)
    for h in range(hosts):
        assert sol.host_nu[h] == pytest.approx(exact.host_nu[h], rel=1e-6)
    assert (sol.host_nu > sol.nu * (1 + 1e-6)).sum() >= 3, "the case must cap some hosts"


def test_a_capped_hosts_pages_at_its_threshold_sum_to_its_cap():
    lam, w, host_of, rows = _host_case(seed=5, hosts=12)
    hosts = 12
    budget = float(lam.sum()) * 0.5
    caps = np.full(hosts, budget / hosts * 1.2)
    caps[3] = np.inf
    for objective in ("changes", "freshness"):
        sol = solve_threshold(rows[:, :3], budget, 1e-9, 1e12, objective, hosts=rows, caps=caps,
                                chance=0.0)
        assert sol.host_nu[3] == sol.nu
        for h in np.flatnonzero(sol.host_nu > sol.nu * (1 + 1e-9)):
            mine = host_of == h
            f = frequency_for_threshold(sol.host_nu[h], lam[mine], w[mine], objective)
            assert float(np.sum(f)) == pytest.approx(caps[h], rel=1e-6)


# ------------------------------------------------------------------ exploration of always-changed pages


def test_explore_c_is_where_the_planned_interval_is_shortest():
    """EXPLORE_C against a numerical minimisation of y(νλ/w)/λ over λ (freshness objective)."""
    from scipy.optimize import minimize_scalar

    nu, w = 7.0, 2.5
    res = minimize_scalar(lambda log_lam: float(interval_for_threshold(nu, math.exp(log_lam), w, "freshness")),
                          bounds=(math.log(1e-4), math.log(0.99 * w / nu)), method="bounded",
                          options={"xatol": 1e-10})
    assert math.exp(res.x) * nu / w == pytest.approx(EXPLORE_C, rel=1e-4)
    # y* solves e^{-y}(1 + y + y^2) = 1 and the shortest interval is y*/λ* = 3.351 ν/w
    y = brentq(lambda y: math.exp(-y) * (1 + y + y * y) - 1, 0.5, 5.0)
    assert y * y * math.exp(-y) == pytest.approx(EXPLORE_C, rel=1e-12)
    assert res.fun == pytest.approx(y / EXPLORE_C * nu / w, rel=1e-6)


def test_explore_rate_caps_only_censored_fast_pages():
    """min(λ, λ*) for 2..EXPLORE_CHANGES changes with λ·T0 < 1 under freshness; λ otherwise."""
    nu, w = 4.0, 1.0
    peak = EXPLORE_C * w / nu
    assert explore_rate(1.0, w, nu, 5, 0.0) == pytest.approx(peak)
    assert explore_rate(0.01, w, nu, 5, 0.0) == 0.01          # slower than λ*: as estimated
    assert explore_rate(1.0, w, nu, 1, 0.0) == 1.0            # one change: no bound yet
    assert explore_rate(1.0, w, nu, EXPLORE_CHANGES + 1, 0.0) == 1.0  # too many in a row
    assert explore_rate(1.0, w, nu, 5, 1.0) == 1.0            # an unchanged interval: λ·T0 >= 1
    assert explore_rate(1.0, w, nu, 5, 0.5) == pytest.approx(peak)
    assert explore_rate(1.0, w, nu, 5, 0.0, objective="changes") == 1.0
    assert explore_rate(1.0, w, 0.0, 5, 0.0) == 1.0           # ν = 0: fetches are free
    # the capped rate plans a shorter interval than the estimate does
    assert (interval_for_threshold(nu, peak, w, "freshness")
            < interval_for_threshold(nu, 0.13, w, "freshness"))

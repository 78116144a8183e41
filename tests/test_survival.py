"""frontier_rate.testing.survival: curves, the index, the threshold solve and the online beliefs, each
checked against an independent computation (quadrature, a generic optimiser, brute force)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from frontier_rate.math.budget import solve_with_host_caps
from frontier_rate.math.index import index_curve, interval_for_threshold
from frontier_rate.testing import survival

integrate = pytest.importorskip("scipy.integrate")
optimize = pytest.importorskip("scipy.optimize")

CASES = [(0.05, 1e-3), (0.3, 100.0), (0.999, 0.5), (1.0, 5.0), (2.5, 10.0), (50.0, 20.0), (1e6, 1e6 / 0.3)]
TIMES = [1e-6, 1e-3, 0.1, 0.5, 1.0, 10.0, 100.0, 1e4]


def quad_index(alpha, beta, t):
    """G(t) = ∫₀ᵗ u·(−S'(u)) du in x = log(1 + u/β): αβ∫₀^x (e^s − 1)e^{−αs} ds."""
    x = math.log1p(t / beta)
    val, _ = integrate.quad(lambda s: math.expm1(s) * math.exp(-alpha * s), 0.0, x,
                            epsabs=0.0, epsrel=1e-13, limit=1000)
    return alpha * beta * val


@pytest.mark.parametrize("alpha,beta", CASES)
def test_lomax_index_matches_quadrature(alpha, beta):
    for t in TIMES:
        want = quad_index(alpha, beta, t)
        if want == 0.0:  # quad underflows far in the tail of a near-Poisson curve
            continue
        assert float(survival.lomax_index(t, alpha, beta)) == pytest.approx(want, rel=1e-10)


@pytest.mark.parametrize("alpha,beta", CASES[:6])
def test_lomax_integral_matches_quadrature(alpha, beta):
    for t in TIMES:
        want, _ = integrate.quad(lambda u: (1.0 + u / beta) ** -alpha, 0.0, t, epsabs=0.0, epsrel=1e-12,
                                 limit=1000, points=[beta] if beta < t else None)
        assert float(survival.lomax_integral(t, alpha, beta)) == pytest.approx(want, rel=1e-9)


def test_index_is_integral_minus_t_survival():
    t = np.array([0.3, 3.0, 30.0, 300.0])
    for alpha, beta in [(0.4, 2.0), (1.7, 9.0), (30.0, 4.0)]:
        want = survival.lomax_integral(t, alpha, beta) - t * survival.lomax_survival(t, alpha, beta)
        assert survival.lomax_index(t, alpha, beta) == pytest.approx(want, rel=1e-9)


def test_index_derivative_is_minus_t_dS():
    """G'(t) = −t·S'(t) (so G rises wherever S falls): central differences."""
    for alpha, beta in [(0.4, 2.0), (3.0, 7.0)]:
        for t in (0.5, 5.0, 50.0):
            h = 1e-4 * t
            dg = (survival.lomax_index(t + h, alpha, beta) - survival.lomax_index(t - h, alpha, beta)) / (2 * h)
            ds = (survival.lomax_survival(t + h, alpha, beta) - survival.lomax_survival(t - h, alpha, beta)) / (2 * h)
            assert float(dg) == pytest.approx(float(-t * ds), rel=1e-6)


def test_poisson_limit_recovers_the_policy_index_curve():
    """α → ∞ with α/β = λ: G(t) → F(λt)/λ, the existing index curve with the freshness weight 1/λ."""
    lam = 0.3
    alpha = 1e12
    t = np.array([1e-7, 0.01, 1.0, 3.2, 10.0, 100.0])
    want = np.asarray(index_curve(lam * t)) / lam
    assert survival.lomax_index(t, alpha, alpha / lam) == pytest.approx(want, rel=1e-9)
    assert survival.lomax_freshness(t, alpha, alpha / lam) == pytest.approx(-np.expm1(-lam * t) / (lam * t),
                                                                             rel=1e-9)
    nu = np.array([1e-6, 0.1, 1.0, 3.3])
    got = survival.lomax_interval(nu, alpha, alpha / lam)
    want = interval_for_threshold(nu, lam, 1.0, objective="freshness")
    assert got == pytest.approx(want, rel=1e-8)


def test_heavy_tail_makes_every_page_worth_a_fetch():
    """G(∞) = β/(α − 1) for α > 1, unbounded for α ≤ 1."""
    assert float(survival.lomax_index(np.inf, 3.0, 8.0)) == pytest.approx(4.0)
    assert float(survival.lomax_index(1e12, 3.0, 8.0)) == pytest.approx(4.0, rel=1e-6)
    assert np.isinf(survival.lomax_index(np.inf, 0.8, 8.0))
    assert np.isinf(survival.lomax_interval(4.0 + 1e-9, 3.0, 8.0))
    assert np.isfinite(survival.lomax_interval(1e3, 0.8, 8.0))  # G ~ 40·(t/8)^0.2: t ~ 8e7


def test_threshold_plan_is_the_lagrangian_optimum():
    """Maximise Σ w_i φ_i(t_i) subject to Σ 1/t_i = R with a generic optimiser: same objective
    as the one-threshold plan w_i·G_i(t_i) = ν."""
    rng = np.random.default_rng(3)
    n = 6
    alpha = rng.uniform(0.3, 5.0, n)
    beta = rng.uniform(0.5, 20.0, n)
    w = rng.uniform(0.5, 2.0, n)
    budget = 2.0

    def rate_of(nu):
        return 1.0 / survival.lomax_interval(nu / w, alpha, beta, lo=1e-6, hi=1e9)

    _, _, f = survival.solve_threshold(rate_of, np.zeros(n, dtype=int), np.array([np.inf]), budget)
    assert f.sum() == pytest.approx(budget, rel=1e-9)

    def value(freq):
        return float((w * freq * survival.lomax_integral(1.0 / freq, alpha, beta)).sum())

    res = optimize.minimize(lambda x: -value(np.exp(x)), np.log(np.full(n, budget / n)), method="SLSQP",
                            constraints=[{"type": "eq", "fun": lambda x: np.exp(x).sum() - budget}],
                            options={"ftol": 1e-14, "maxiter": 500})
    assert value(f) >= value(np.exp(res.x)) - 1e-9 * abs(value(f))
    assert value(f) == pytest.approx(value(np.exp(res.x)), rel=1e-6)


def test_threshold_solve_with_host_caps_matches_policy():
    """Poisson curves: the generic solve agrees with solve_with_host_caps (freshness)."""
    rng = np.random.default_rng(1)
    n, hosts = 40, 4
    lam = np.exp(rng.uniform(np.log(0.01), np.log(10.0), n))
    w = rng.uniform(0.5, 2.0, n)
    host = rng.integers(0, hosts, n)
    caps = np.array([0.5, np.inf, 2.0, np.inf])
    budget = 10.0

    def rate_of(nu):
        t = interval_for_threshold(nu, lam, w, objective="freshness")
        with np.errstate(divide="ignore"):
            return np.where(np.isinf(t), 0.0, 1.0 / t)

    nu, nu_h, f = survival.solve_threshold(rate_of, host, caps, budget)
    ref = solve_with_host_caps(w, lam, host.tolist(), {0: 0.5, 2: 2.0}, budget, objective="freshness")
    assert f == pytest.approx(ref.frequencies, rel=1e-6, abs=1e-9)
    for h in (0, 2):
        assert np.bincount(host, weights=f, minlength=hosts)[h] <= caps[h] * (1 + 1e-9)


@pytest.mark.parametrize("a,b,tau", [(1.0, 2.0, 0.5), (50.0, 10.0, 0.3), (2.0, 1.0, 30.0), (0.4, 3.0, 2.0)])
def test_gamma_observe_matches_posterior_moments(a, b, tau):
    stats = pytest.importorskip("scipy.stats")

    def moment(k):
        return integrate.quad(lambda lam: lam ** k * stats.gamma.pdf(lam, a, scale=1 / b) * -math.expm1(-lam * tau),
                              0.0, np.inf, limit=500)[0]

    z = moment(0)
    mean, second = moment(1) / z, moment(2) / z
    var = second - mean * mean
    a2, b2 = survival.gamma_observe(a, b, tau, 1)
    assert float(a2) == pytest.approx(mean * mean / var, rel=1e-7)
    assert float(b2) == pytest.approx(mean / var, rel=1e-7)
    a0, b0 = survival.gamma_observe(a, b, tau, 0)
    assert (float(a0), float(b0)) == (a, b + tau)


def test_gamma_discount_keeps_the_mean():
    a, b = survival.gamma_discount(4.0, 2.0, 10.0, 20.0)
    assert a / b == pytest.approx(2.0)
    assert a == pytest.approx(4.0 * math.exp(-0.5))
    assert survival.gamma_discount(4.0, 2.0, 10.0, np.inf) == (4.0, 2.0)


@pytest.mark.skipif(not hasattr(optimize, "isotonic_regression"), reason="scipy < 1.12")
def test_pava_matches_scipy_isotonic_regression():
    rng = np.random.default_rng(0)
    for _ in range(20):
        k = int(rng.integers(1, 30))
        y = rng.random(k)
        w = rng.integers(1, 10, k).astype(float)
        want = optimize.isotonic_regression(y, weights=w).x
        assert survival.pava(y, w) == pytest.approx(want, abs=1e-12)


def test_pava_skips_empty_bins():
    assert survival.pava([0.1, 0.9, 0.3, 0.2, 0.5], [1, 0, 1, 1, 0]) == pytest.approx([0.1, 0.1, 0.25, 0.25, 0.25])


def test_piecewise_linear_curve_matches_quadrature():
    x = np.array([0.0, 1.0, 2.0, 5.0])
    s = np.array([1.0, 0.7, 0.6, 0.1])

    def surv(u):
        return np.interp(u, x, s)

    for t in (0.5, 1.5, 4.0, 10.0):
        m = integrate.quad(surv, 0.0, t, points=[1.0, 2.0, 5.0], limit=200)[0]
        assert float(survival.linear_curve_integral(x, s, t)) == pytest.approx(m, rel=1e-10)
        assert float(survival.linear_curve_index(x, s, t)) == pytest.approx(m - t * surv(t), rel=1e-10)


def test_gaps_curve_matches_a_brute_force_replay():
    """G and M of a known history equal the time averages over every start moment s of
    'no change in (s, s + u]' (a fine grid of s)."""
    changes = np.array([2.0, 2.5, 7.0, 7.2, 7.3, 12.0])
    T = 20.0
    gaps = np.diff(np.concatenate([[0.0], changes]))
    s = (np.arange(400_000) + 0.5) * T / 400_000
    nxt = np.append(changes, np.inf)[np.searchsorted(changes, s, side="right")]
    for t in (0.3, 1.0, 4.0, 9.0):
        u = np.linspace(0.0, t, 801)
        surv = np.array([(nxt - s > v).mean() for v in u])
        m = np.trapezoid(surv, u)
        assert float(survival.gaps_integral(gaps, T, t)) == pytest.approx(m, rel=2e-3)
        assert float(survival.gaps_index(gaps, T, t)) == pytest.approx(m - t * surv[-1], rel=5e-3, abs=1e-4)


def test_interval_from_table_inverts_the_curve():
    grid = np.exp(np.linspace(np.log(1e-2), np.log(1e4), 2000))
    alpha = np.array([0.3, 2.0, 40.0])
    beta = np.array([1.0, 5.0, 30.0])
    table = survival.lomax_index(grid[None, :], alpha[:, None], beta[:, None])
    c = np.array([0.05, 0.3, 0.6])
    got = survival.interval_from_table(table, grid, c)
    want = survival.lomax_interval(c, alpha, beta)
    assert got == pytest.approx(want, rel=1e-4)
    assert survival.interval_from_table(table, grid, np.array([0.0, 0.0, 1e9]))[2] == np.inf


def test_fit_shape_recovers_overdispersion_and_keeps_poisson():
    rng = np.random.default_rng(2)
    curve = survival.PooledCurve()
    x = np.exp(rng.uniform(np.log(0.05), np.log(20.0), 20_000))
    alpha = 0.5
    changed = rng.random(x.size) < 1.0 - (1.0 + x / alpha) ** -alpha
    for xi, ci in zip(x, changed, strict=True):
        curve.add(xi, ci)
    got = survival.fit_shape(curve.centre, curve.n, curve.c)
    assert 0.3 < got < 0.8
    poisson = survival.PooledCurve()
    for xi, ci in zip(x, rng.random(x.size) < -np.expm1(-x), strict=True):
        poisson.add(xi, ci)
    assert survival.fit_shape(poisson.centre, poisson.n, poisson.c) > 20.0


def test_combined_shape_limits():
    assert float(survival.combined_shape(np.inf, 2.0)) == pytest.approx(2.0)
    assert float(survival.combined_shape(3.0, np.inf)) == pytest.approx(3.0)
    assert float(survival.combined_shape(1.0, 1.0)) == pytest.approx(1.0 / 3.0)

"""Tests for frontier_rate.math.estimators (seed 004's change-rate estimators and ours).

Randomised tests use fixed seeds. Their tolerances come from the Cramér-Rao
bound (docs/MATH.md, seed 004): with change indicators only, Var ≥ Δ(Δ+p)²/(p·k); with
the intervals too, Var ≥ 1/(k·i) where i = E[τ²/(e^{Δτ} − 1)] is the Fisher
information of one fetch (computed here by quadrature). An RMSE measured over
R runs has a relative standard error of about 1/√(2R), a mean over R runs a
standard error of sd/√R; the margins below are stated in those units.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.optimize import brentq

from frontier_rate.math.estimator_base import Estimator
from frontier_rate.math.estimators import (
    ESTIMATORS,
    LLN,
    MLE,
    SA,
    SAM,
    Interval,
    MomentMatching,
    Naive,
    make_estimator,
    trajectory,
)
from frontier_rate.math.updates import alpha_sequence, eta_step, mle_solve, mm_solve, zeta_step

CHANGES = [1, 0, 1, 1, 0]
INTERVALS = [0.5, 1.0, 0.25, 2.0, 0.75]
P = 2.0


def run(est: Estimator, changes=CHANGES, intervals=INTERVALS, p=None) -> list[float]:
    return [est.update(c, t, p) for c, t in zip(changes, intervals, strict=True)]


def poisson_data(delta: float, p: float, runs: int, k: int, seed: int):
    """Fetch intervals ~ Exp(p); a change is seen with probability 1 − e^{−Δτ}."""
    rng = np.random.default_rng(seed)
    tau = rng.exponential(1.0 / p, (runs, k))
    changed = (rng.random((runs, k)) < -np.expm1(-delta * tau)).astype(int)
    return changed, tau


def eq15_root(changed, tau) -> float:
    """Eq. 15 solved by scipy's brentq, written from the paper with exp (not expm1)."""
    changed, tau = np.asarray(changed), np.asarray(tau)

    def f(d):
        with np.errstate(over="ignore"):
            return np.sum(changed * tau / (np.exp(d * tau) - 1.0)) - np.sum((1 - changed) * tau)

    return brentq(f, 1e-9, 1e6, xtol=1e-300, rtol=1e-15, maxiter=500)


def mm_root(changed, tau) -> float:
    changed, tau = np.asarray(changed), np.asarray(tau)
    return brentq(lambda d: np.sum(np.exp(-d * tau)) - np.sum(1 - changed), 1e-9, 1e6,
                  xtol=1e-300, rtol=1e-15, maxiter=500)


def fisher_info_poisson(delta: float, p: float) -> float:
    """i = E[τ²/(e^{Δτ} − 1)], τ ~ Exp(p): information per fetch when τ is used."""
    return quad(lambda t: p * math.exp(-p * t) * t * t / math.expm1(delta * t),
                0, min(50.0 / p, 700.0 / delta), limit=200)[0]


# --------------------------------------------------------------------------
# Hand-computed trajectories on I = 1,0,1,1,0, τ = .5,1,.25,2,.75, p = 2, x0 = 1
# --------------------------------------------------------------------------

def test_naive_by_hand():
    # w_k = p Î_k / k with Î = 1, 1, 2, 3, 3
    assert run(Naive(p=P)) == pytest.approx([2.0, 1.0, 4 / 3, 1.5, 1.2], rel=1e-15)


@pytest.mark.parametrize("alpha, expected", [
    ("one", [2.0, 1.0, 2.0, 3.0, 2.0]),
    ("log", [2 / math.log(2), 2 / (1 + math.log(3)), 4 / (1 + math.log(4)),
             6 / (1 + math.log(5)), 6 / (2 + math.log(6))]),
    ("sqrt", [2.0, 2 / (1 + math.sqrt(2)), 4 / (1 + math.sqrt(3)), 2.0, 6 / (2 + math.sqrt(5))]),
])
def test_lln_by_hand(alpha, expected):
    # eq. 1: x_k = p Î_k / (k + α_k − Î_k), α_k = 1, log(k+1) or √k
    assert run(LLN(p=P, alpha=alpha)) == pytest.approx(expected, rel=1e-14)


def test_sa_by_hand():
    e = [(k + 1) ** -0.75 for k in range(5)]  # η_k, k = 0 at the first update
    y1 = 3.0                      # 1 + 1·(1·(1 + 2) − 1)
    y2 = y1 * (1 - e[1])          # I = 0
    y3 = y2 + 2 * e[2]            # I = 1: y + η(y + p − y)
    y4 = y3 + 2 * e[3]
    y5 = y4 * (1 - e[4])
    assert run(SA(p=P)) == pytest.approx([y1, y2, y3, y4, y5], rel=1e-14)


def test_sam_by_hand():
    e = [(k + 1) ** -0.75 for k in range(5)]
    b = [(k + 1) ** -0.6 for k in range(5)]
    z = [1.0, 1.0]  # z_{-1}, z_0
    # ζ_0 = 0; ζ_k = (β_k − ω η_k)/β_{k−1} with ω = 1 (eq. 10)
    zeta = [0.0] + [(b[k] - e[k]) / b[k - 1] for k in range(1, 5)]
    for k, changed in enumerate(CHANGES):
        prev, cur = z[-2], z[-1]
        drift = (cur + P - cur) if changed else -cur
        z.append(cur + e[k] * drift + zeta[k] * (cur - prev))
    assert z[2] == 3.0
    assert run(SAM(p=P)) == pytest.approx(z[2:], rel=1e-14)


def test_sam_reports_zero_when_momentum_overshoots():
    est = SAM(p=P)
    assert est.update(0) == 0.0        # z_1 = 1 + 1·(0 − 1) = 0
    assert est.update(0) == 0.0        # z_2 = −ζ_1 < 0, reported as 0
    assert est.to_state()["z"] == pytest.approx(-(2 ** -0.6 - 2 ** -0.75), rel=1e-14)


def test_mle_by_hand():
    got = run(MLE())
    expected = [
        2 * math.log(2),               # only a change: cap e^{−0.5Δ} = 1/2
        2 * math.log(1.5),             # 0.5/(e^{0.5Δ} − 1) = 1
        eq15_root(CHANGES[:3], INTERVALS[:3]),
        eq15_root(CHANGES[:4], INTERVALS[:4]),
        eq15_root(CHANGES, INTERVALS),
    ]
    assert got == pytest.approx(expected, rel=1e-12)


def test_mm_by_hand():
    got = run(MomentMatching())
    expected = [
        2 * math.log(2),                          # cap: e^{−0.5Δ} = 1/2
        -2 * math.log((math.sqrt(5) - 1) / 2),    # 1 = u + u², u = e^{−0.5Δ}
        mm_root(CHANGES[:3], INTERVALS[:3]),
        mm_root(CHANGES[:4], INTERVALS[:4]),
        mm_root(CHANGES, INTERVALS),
    ]
    assert got == pytest.approx(expected, rel=1e-12)


def interval_by_hand(changes, intervals, x0=1.0, prior=0.3, max_step=1.0):
    """The interval estimator from its docstring, in plain math (exp, not expm1)."""
    phi0 = phi = math.log(x0)
    t0 = b = h = 0.0
    out = []
    for k, (c, tau) in enumerate(zip(changes, intervals, strict=True), start=1):
        x = math.exp(phi) * tau
        r = x / (math.exp(x) - 1)
        rho = x / (1 - math.exp(-x)) - 1
        if c:
            b, h = b + r, h + r * rho
        else:
            t0 += tau
        score = b - math.exp(phi) * t0 + prior * (phi0 - phi)
        curvature = prior + math.exp(phi) * t0 + h
        step = max(-max_step, min(max_step, score / curvature))
        phi += step
        if b > 0:
            scaled = min(b * math.exp(-(h / b) * step), k)
            b, h = scaled, h * scaled / b
        out.append(math.exp(phi))
    return out


def test_interval_by_hand():
    # First update: x = 0.5, score = r = 0.5/(e^0.5 − 1) = 0.77, curvature
    # 0.3 + rρ = 0.51, so the Newton step 1.5 is clipped to 1: estimate e.
    got = run(Interval())
    assert got[0] == pytest.approx(math.e, rel=1e-15)
    assert got == pytest.approx(interval_by_hand(CHANGES, INTERVALS), rel=1e-12)
    rng = np.random.default_rng(5)
    tau = rng.exponential(0.3, 300)
    changed = (rng.random(300) < -np.expm1(-4.0 * tau)).astype(int)
    assert run(Interval(x0=0.2), changed, tau) == pytest.approx(
        interval_by_hand(changed, tau, x0=0.2), rel=1e-10)


def test_estimate_before_any_update_is_x0():
    for name in ESTIMATORS:
        est = make_estimator(name, x0=0.25)
        assert est.estimate == 0.25 and est.count == 0
        est.update(1, 1.0)
        assert est.count == 1


# --------------------------------------------------------------------------
# Step sizes
# --------------------------------------------------------------------------

def test_step_sizes():
    assert eta_step(0, 0.75) == 1.0
    assert eta_step(3, 0.5) == pytest.approx(0.5)
    assert zeta_step(0, 0.75, 0.6, 1.0) == 0.0
    assert zeta_step(1, 0.75, 0.6, 1.0) == pytest.approx(2 ** -0.6 - 2 ** -0.75)
    assert zeta_step(9, 0.8, 0.5, 2.0) == pytest.approx((10 ** -0.5 - 2 * 10 ** -0.8) / 9 ** -0.5)
    k = np.arange(1, 10001)
    for alpha in ("one", "log", "sqrt"):
        assert np.all(alpha_sequence(k, alpha) > 0)
        assert alpha_sequence(1, alpha) > 0
    assert alpha_sequence(3, "log") == pytest.approx(math.log(4))


# --------------------------------------------------------------------------
# LLN ratio form equals eq. 1 at constant p; consistency with varying p
# --------------------------------------------------------------------------

@pytest.mark.parametrize("alpha", ["one", "log", "sqrt"])
def test_lln_ratio_form_equals_eq1(alpha):
    rng = np.random.default_rng(11)
    changed = (rng.random(5000) < 0.4).astype(int)
    est = LLN(p=3.0, alpha=alpha)
    got = np.array([est.update(c) for c in changed])
    k = np.arange(1, 5001)
    i_hat = np.cumsum(changed)
    a = {"one": np.ones(5000), "log": np.log(k + 1.0), "sqrt": np.sqrt(k)}[alpha]
    # S_k sums k − Î_k copies of 1/p, so rounding is at most k·eps ≈ 1e-12.
    np.testing.assert_allclose(got, 3.0 * i_hat / (k + a - i_hat), rtol=2e-12)


def closed_loop(name: str, delta: float, k: int, seed: int, fixed_p: float | None = None):
    """Engine-like loop: the rate p_k of fetch k is planned from the previous estimate."""
    rng = np.random.default_rng(seed)
    est = make_estimator(name)
    ps = []
    for _ in range(k):
        p = min(max(2.0 * est.estimate, 0.5), 8.0)
        tau = rng.exponential(1.0 / p)
        ps.append(p)
        est.update(bool(rng.random() < -math.expm1(-delta * tau)), tau,
                   p if fixed_p is None else fixed_p)
    return est.estimate, np.array(ps)


@pytest.mark.parametrize("name", ["lln", "sa", "sam"])
def test_consistent_when_p_varies_with_the_estimate(name):
    """Each p_k depends on the past (predictable), so E[I_k | past] = Δ/(Δ + p_k) still holds.

    20 runs of 3000 fetches, Δ = 3: the mean estimate must be within 4 standard
    errors plus 3% of Δ (3% leaves room for SA/SAM's slower O(k^−η/2)
    transient from x0 = 1).
    """
    finals = np.array([closed_loop(name, 3.0, 3000, seed)[0] for seed in range(20)])
    se = finals.std(ddof=1) / math.sqrt(finals.size)
    assert abs(finals.mean() - 3.0) < 4 * se + 0.03 * 3.0, (finals.mean(), se)


def test_lln_with_a_stale_p_is_biased():
    """Negative control: feeding eq. 1 the first planned p instead of p_k is far off."""
    finals = [closed_loop("lln", 3.0, 3000, seed, fixed_p=2.0)[0] for seed in range(5)]
    assert abs(np.mean(finals) / 3.0 - 1) > 0.25


# --------------------------------------------------------------------------
# Convergence under Poisson fetching at the paper's settings
# --------------------------------------------------------------------------

SETTINGS = [(5.0, 3.0), (500.0, 50.0), (1.1098, 0.5)]


@pytest.mark.parametrize("delta, p", SETTINGS)
def test_convergence_poisson(delta, p):
    """RMSE at k = 10^4 over 50 runs against the Cramér-Rao bounds.

    The RMSE estimate has ~10% relative error (1/√100). LLN is asymptotically
    efficient for indicators: 1.5× its bound. SA converges as O(k^−η/2)
    (Theorem 2), so it may exceed the 1/√k bound by k^{(1−η)/2} ≈ 3.2 at
    k = 10^4; SAM's conjectured O(k^−β/2) (Remark 8) allows k^{(1−β)/2} ≈ 6.3.
    The interval estimator uses τ: 1.5× the interval-aware bound. Naive
    converges to pΔ/(Δ + p) (§3.4).
    """
    runs, k = 50, 10_000
    changed, tau = poisson_data(delta, p, runs, k, seed=int(delta * 10 + p))
    crb = math.sqrt(delta * (delta + p) ** 2 / (p * k))
    crb_tau = math.sqrt(1.0 / (k * fisher_info_poisson(delta, p)))
    factors = {"lln": 1.5 * crb, "sa": k ** 0.125 * crb, "sam": k ** 0.2 * crb,
               "interval": 1.5 * crb_tau}
    for name, bound in factors.items():
        final = trajectory(name, changed, tau, p)[:, -1]
        rmse = math.sqrt(np.mean((final - delta) ** 2))
        assert rmse < bound, (name, rmse, bound)
    for name in ("lln", "interval"):
        final = trajectory(name, changed, tau, p)[:, -1]
        se = final.std(ddof=1) / math.sqrt(runs)
        assert abs(final.mean() - delta) < 4 * se, (name, final.mean(), se)
    naive = trajectory("naive", changed, tau, p)[:, -1]
    limit = p * delta / (delta + p)
    assert abs(naive.mean() - limit) < 4 * naive.std(ddof=1) / math.sqrt(runs) + 1e-9


# --------------------------------------------------------------------------
# MLE and MM: exact roots and edge cases
# --------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(5))
def test_mle_and_mm_equal_brentq(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 400))
    delta, p = float(rng.uniform(0.1, 20)), float(rng.uniform(0.1, 20))
    tau = rng.exponential(1 / p, n)
    changed = (rng.random(n) < -np.expm1(-delta * tau)).astype(int)
    changed[0], changed[1] = 1, 0
    est = MLE()
    for c, t in zip(changed, tau, strict=True):
        est.update(c, t)
    assert est.estimate == pytest.approx(eq15_root(changed, tau), rel=1e-12)
    # (the class sums unchanged intervals one by one, numpy pairwise: last-bit differences)
    assert mle_solve(tau[changed == 1], tau[changed == 0].sum()) == \
        pytest.approx(est.estimate, rel=1e-14)
    mm = MomentMatching()
    for c, t in zip(changed, tau, strict=True):
        mm.update(c, t)
    assert mm.estimate == pytest.approx(mm_root(changed, tau), rel=1e-12)


@pytest.mark.parametrize("cls", [MLE, MomentMatching])
def test_offline_edge_cases(cls):
    no_change = cls()
    for t in (1.0, 2.0, 0.5):
        assert no_change.update(0, t) == 0.0
    all_change = cls()
    for k in range(1, 6):
        # cap: k·e^{−Δτ} = 1/2 with τ = 2 -> Δ = log(2k)/2
        assert all_change.update(True, 2.0) == pytest.approx(math.log(2 * k) / 2, rel=1e-12)
    assert math.isfinite(all_change.estimate)
    single = cls()
    assert single.update(1, 4.0) == pytest.approx(math.log(2) / 4, rel=1e-12)
    mixed_times = cls()
    run(mixed_times, [1, 1, 1], [0.1, 1.0, 10.0])
    assert sum(math.exp(-mixed_times.estimate * t) for t in (0.1, 1.0, 10.0)) == \
        pytest.approx(0.5, rel=1e-12)


def test_mle_extreme_intervals_stay_finite():
    assert math.isfinite(mle_solve(np.array([1e-9, 1e6]), 1e-9))
    assert mle_solve(np.array([1e-9, 1e6]), 1e-9) > 0
    assert math.isfinite(mm_solve(np.array([1e-9, 1e6, 3.0]), 1))


# --------------------------------------------------------------------------
# The interval estimator's targets
# --------------------------------------------------------------------------

@pytest.mark.parametrize("delta_tau", [0.1, 1.0, 3.0])
def test_interval_unbiased_under_periodic_fetching(delta_tau):
    """|bias| < 2% at k = 10^4 with every interval equal, Δ = 2 and x0 = 1.

    200 runs: the standard error of the mean relative error is
    ≈ 1/√(200·k·i_φ) with i_φ = x²/(e^x − 1), at most 0.35% (x = 0.1), so
    asserting |mean| + 3·SE < 2% establishes the target at 3 standard errors.
    """
    delta, runs, k = 2.0, 200, 10_000
    tau = delta_tau / delta
    rng = np.random.default_rng(int(delta_tau * 100))
    changed = (rng.random((runs, k)) < -math.expm1(-delta_tau)).astype(int)
    rel = trajectory("interval", changed, tau)[:, -1] / delta - 1
    bias, se = rel.mean(), rel.std(ddof=1) / math.sqrt(runs)
    print(f"periodic Δτ={delta_tau}: interval bias {bias:+.4f} ± {se:.4f}")
    assert abs(bias) + 3 * se < 0.02
    # Against the closed-form MLE of periodic data, log(1 + n₁/n₀)/τ, run by run.
    n1 = changed.sum(axis=1)
    mle = np.log1p(n1 / (k - n1)) / tau
    est = trajectory("interval", changed, tau)[:, -1]
    assert np.median(np.abs(est / mle - 1)) < 0.2 * rel.std()


def test_lln_biased_under_periodic_fetching():
    """docs/MATH.md, seed 004: LLN fed p = 1/t under periodic fetching tends to (e^{Δt} − 1)/t, +72% at Δt = 1."""
    rng = np.random.default_rng(3)
    changed = (rng.random((50, 10_000)) < -math.expm1(-1.0)).astype(int)
    ratio = trajectory("lln", changed, p=1.0)[:, -1]
    assert abs(ratio.mean() - math.expm1(1.0)) < 4 * ratio.std(ddof=1) / math.sqrt(50)


def test_interval_rmse_close_to_mle_under_poisson():
    """RMSE at k = 1000 at most 1.1× the offline MLE's (Δ = 5, p = 3, 100 runs, same data)."""
    delta, p, runs, k = 5.0, 3.0, 100, 1000
    changed, tau = poisson_data(delta, p, runs, k, seed=2024)
    est = trajectory("interval", changed, tau)[:, -1]
    mle = np.array([mle_solve(tau[r][changed[r] == 1], tau[r][changed[r] == 0].sum())
                    for r in range(runs)])
    rmse_interval = math.sqrt(np.mean((est - delta) ** 2))
    rmse_mle = math.sqrt(np.mean((mle - delta) ** 2))
    print(f"Poisson Δ=5 p=3 k=1000: RMSE interval {rmse_interval:.4f}, MLE {rmse_mle:.4f}")
    assert rmse_interval <= 1.1 * rmse_mle


def test_interval_recovers_from_a_far_initial_value():
    """x0 a factor 100 off either way: within 3 interval-aware CRB sd of Δ at k = 2000."""
    for delta, x0 in ((0.05, 5.0), (20.0, 0.2)):
        changed, tau = poisson_data(delta, 1.0, 40, 2000, seed=int(delta * 100))
        est = trajectory("interval", changed, tau, x0=x0)[:, -1]
        sd = math.sqrt(1.0 / (2000 * fisher_info_poisson(delta, 1.0)))
        assert abs(np.median(est) - delta) < 3 * sd, (delta, np.median(est), sd)


def test_interval_one_sided_data_stays_finite_and_moves_the_right_way():
    up, down = Interval(), Interval()
    for _ in range(200):
        up.update(1, 1.0)
        down.update(0, 1.0)
    assert 1.0 < up.estimate < 1e3 and math.isfinite(up.estimate)
    assert 0.0 < down.estimate < 0.05
    huge = Interval()
    huge.update(0, 1e300)
    assert huge.estimate == pytest.approx(math.exp(-1.0))  # one clipped step


# --------------------------------------------------------------------------
# trajectory() equals repeated update()
# --------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_trajectory_equals_updates(name):
    runs, k = 3, 400 if name in ("mle", "mm") else 3000
    changed, _ = poisson_data(4.0, 2.0, runs, k, seed=9)
    rng = np.random.default_rng(10)
    p = 2.0 * np.exp(rng.uniform(-1, 1, (runs, k)))
    tau = rng.exponential(1 / p)
    params = {"alpha": "sqrt", "eta": 0.8, "beta": 0.5, "omega": 1.0, "x0": 2.0}
    got = trajectory(name, changed, tau, p, **params)
    expected = np.empty((runs, k))
    for r in range(runs):
        est = make_estimator(name, **params)
        expected[r] = [est.update(c, t, q) for c, t, q in zip(changed[r], tau[r], p[r],
                                                               strict=True)]
    # Relative to the trajectory's scale: SAM's iterate crosses zero early on.
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())
    one = trajectory(name, changed[0], 0.7, 3.0, **params)
    est = make_estimator(name, p=3.0, **params)
    np.testing.assert_allclose(one, [est.update(c, 0.7) for c in changed[0]], rtol=1e-12,
                               atol=1e-12 * np.abs(one).max())


def test_trajectory_validates_input():
    with pytest.raises(ValueError, match="unknown estimator 'nope'"):
        trajectory("nope", [1, 0])
    with pytest.raises(ValueError, match="changes"):
        trajectory("lln", [1, 2])
    with pytest.raises(ValueError, match="changes"):
        trajectory("lln", np.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match="intervals are required"):
        trajectory("interval", [1, 0])
    with pytest.raises(ValueError, match="intervals"):
        trajectory("mle", [1, 0], [1.0, -1.0])
    with pytest.raises(ValueError, match="p must be positive"):
        trajectory("sa", [1, 0], p=[1.0, np.nan])
    with pytest.raises(ValueError, match="p must be"):
        trajectory("sa", [1, 0], p=[1.0, 2.0, 3.0])
    assert trajectory("sa", []).shape == (0,)


# --------------------------------------------------------------------------
# State round trips
# --------------------------------------------------------------------------

PARAMS = {"p": 1.5, "alpha": "log", "eta": 0.8, "beta": 0.5, "omega": 0.9, "x0": 0.7,
          "prior_info": 0.5, "max_step": 0.5}


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_state_round_trip_continues_bit_identically(name):
    changed, tau = poisson_data(3.0, 1.5, 1, 80, seed=4)
    a = make_estimator(name, **PARAMS)
    b_fresh = ESTIMATORS[name].from_state(json.loads(json.dumps(a.to_state())), **PARAMS)
    assert b_fresh.estimate == a.estimate and b_fresh.count == 0
    for c, t in zip(changed[0, :40], tau[0, :40], strict=True):
        a.update(c, t, 1.0 + t)
    state = json.loads(json.dumps(a.to_state()))
    assert all(isinstance(v, (int, float, list)) for v in state.values())
    b = ESTIMATORS[name].from_state(state, **PARAMS)
    assert b.to_state() == a.to_state() and b.estimate == a.estimate and b.count == 40
    for c, t in zip(changed[0, 40:], tau[0, 40:], strict=True):
        assert a.update(c, t, 1.0 + t) == b.update(c, t, 1.0 + t)
    assert a.to_state() == b.to_state()


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_bad_state_names_the_field(name):
    cls = ESTIMATORS[name]
    est = make_estimator(name)
    for c, t in ((1, 1.0), (0, 2.0), (1, 0.5)):
        est.update(c, t)
    good = est.to_state()
    field = next(f for f in good if f != "count")
    missing = {k: v for k, v in good.items() if k != field}
    with pytest.raises(ValueError, match=f"missing state field '{field}'"):
        cls.from_state(missing)
    with pytest.raises(ValueError, match="unknown state field 'bogus'"):
        cls.from_state({**good, "bogus": 1})
    bad_value = [math.nan] if isinstance(good[field], list) else math.nan
    with pytest.raises(ValueError, match=field):
        cls.from_state({**good, field: bad_value})
    with pytest.raises(ValueError, match=field):
        cls.from_state({**good, field: "1.0"})
    with pytest.raises(ValueError, match="count"):
        cls.from_state({**good, "count": -1})
    with pytest.raises(ValueError, match="count"):
        cls.from_state({**good, "count": True})
    with pytest.raises(ValueError, match="count"):
        cls.from_state({**good, "count": 2.5})
    with pytest.raises(ValueError, match="state must be a mapping"):
        cls.from_state([1, 2])


def test_inconsistent_state_is_rejected():
    with pytest.raises(ValueError, match="inconsistent state"):
        Naive.from_state({"count": 1, "changes": 2, "p_last": 1.0})
    with pytest.raises(ValueError, match="inconsistent state"):
        MomentMatching.from_state({"count": 2, "intervals": [1.0], "unchanged": 0})
    with pytest.raises(ValueError, match="inconsistent state"):
        MLE.from_state({"count": 2, "changed_intervals": [1.0], "unchanged_time": 0.0})
    with pytest.raises(ValueError, match="log_rate"):
        Interval.from_state({"count": 1, "log_rate": 1e4, "unchanged_time": 0.0,
                             "changed_score": 0.5, "changed_info": 0.1})


# --------------------------------------------------------------------------
# Bad input names the field and the value
# --------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, pattern", [
    ({"p": 0.0}, "p must be positive"),
    ({"p": -1.0}, "p must be positive"),
    ({"p": math.nan}, "p must not be NaN"),
    ({"p": math.inf}, "p must be positive"),
    ({"p": "3"}, "p must be a real number"),
    ({"x0": -1.0}, "x0 must be non-negative"),
    ({"alpha": "cubic"}, "alpha must be one of .*'cubic'"),
    ({"eta": 0.0}, r"eta must be in \(0, 1\], got 0.0"),
    ({"eta": 1.5}, "eta must be in"),
    ({"beta": -0.1}, "beta must be in"),
    ({"omega": 0.0}, "omega must be positive"),
])
def test_bad_parameters(kwargs, pattern):
    uses = {"p": "lln", "x0": "sa", "alpha": "lln", "eta": "sa", "beta": "sam", "omega": "sam"}
    name = uses[next(iter(kwargs))]
    with pytest.raises(ValueError, match=pattern):
        make_estimator(name, **kwargs)


def test_bad_interval_parameters():
    with pytest.raises(ValueError, match="x0 must be positive"):
        Interval(x0=0.0)
    with pytest.raises(ValueError, match="prior_info"):
        Interval(prior_info=0.0)
    with pytest.raises(ValueError, match="max_step"):
        Interval(max_step=-1.0)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_bad_updates(name):
    est = make_estimator(name)
    for value in (math.nan, -1.0, 0.0, math.inf):
        with pytest.raises(ValueError, match=f"interval must .*{value!r}|interval must not"):
            est.update(1, value)
    for value in (0.0, -2.0, math.nan):
        with pytest.raises(ValueError, match="p must"):
            est.update(1, 1.0, value)
    for value in ("yes", 2, 0.5, None):
        with pytest.raises(ValueError, match=f"changed must be 0/1 or a bool, got {value!r}"):
            est.update(value, 1.0)
    if ESTIMATORS[name].needs_interval:
        with pytest.raises(ValueError, match=f"interval is required by the '{name}'"):
            est.update(1)
    assert est.count == 0
    for value in (True, 0, 1.0, np.int64(1), np.bool_(False)):
        est.update(value, 1.0)
    assert est.count == 5


def test_registry_and_factory():
    assert ESTIMATORS == {"naive": Naive, "lln": LLN, "sa": SA, "sam": SAM, "mle": MLE,
                          "mm": MomentMatching, "interval": Interval}
    with pytest.raises(ValueError, match="unknown estimator 'kalman'"):
        make_estimator("kalman")
    # one dict of parameters fits every estimator; unused keywords are ignored
    for name in ESTIMATORS:
        assert isinstance(make_estimator(name, **PARAMS), ESTIMATORS[name])
    assert make_estimator("sam", eta=0.8).eta == 0.8

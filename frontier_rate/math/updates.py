"""The estimators' update rules, one function each (seed 004, Sections 2 and 3.4), and the input
checks and vectorised scans they share. ``frontier_rate.math.estimators`` wraps them in classes
with one interface; lua/lib.lua computes the same steps in Redis. numpy only.
"""

from __future__ import annotations

import logging
import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

ALPHAS = ("one", "log", "sqrt")

# Bounds that keep the interval estimator's arithmetic finite: log-rates
# beyond ±690 (rates beyond 1e±300 per unit time) mean nothing physically.
_LOG_RATE_BOUND = 690.0
_X_MIN = 1e-300
_X_MAX = 1e300
_EPS = np.finfo(float).eps


# --------------------------------------------------------------------------
# Input checks. Each raises ValueError naming the field and the value.
# --------------------------------------------------------------------------

def _real(field: str, value: Any) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{field} must be a real number, got {value!r}")
    value = float(value)
    if math.isnan(value):
        raise ValueError(f"{field} must not be NaN")
    return value


def _positive(field: str, value: Any) -> float:
    value = _real(field, value)
    if not (0.0 < value < math.inf):
        raise ValueError(f"{field} must be positive and finite, got {value!r}")
    return value


def _non_negative(field: str, value: Any) -> float:
    value = _real(field, value)
    if not (0.0 <= value < math.inf):
        raise ValueError(f"{field} must be non-negative and finite, got {value!r}")
    return value


def _exponent(field: str, value: Any) -> float:
    value = _real(field, value)
    if not (0.0 < value <= 1.0):
        raise ValueError(f"{field} must be in (0, 1], got {value!r}")
    return value


def _changed(value: Any) -> int:
    """A change indicator as 0 or 1; accepts bool, 0/1 and 0.0/1.0."""
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, numbers.Real) and value in (0, 1):
        return int(value)
    raise ValueError(f"changed must be 0/1 or a bool, got {value!r}")


def _alpha(value: Any) -> str:
    if value not in ALPHAS:
        raise ValueError(f"alpha must be one of {ALPHAS}, got {value!r}")
    return value


# --------------------------------------------------------------------------
# Step sizes (seed 004, Section 2).
# --------------------------------------------------------------------------

def eta_step(k: Any, eta: float) -> Any:
    """η_k = (k+1)^−η, with k = 0 at the first update (seed 004, eq. 2)."""
    return (k + 1.0) ** -eta


def zeta_step(k: Any, eta: float, beta: float, omega: float) -> Any:
    """Momentum step ζ_k = (β_k − ω η_k)/β_{k−1}, β_k = (k+1)^−β (seed 004, eq. 10).

    At k = 0, β_{−1} = 0^−β is infinite and ζ_0 = 0; the momentum term is
    zero there anyway because z_0 = z_{−1}.
    """
    k = np.asarray(k, dtype=float)
    previous = np.where(k > 0, np.maximum(k, 1.0) ** -beta, np.inf)
    zeta = ((k + 1.0) ** -beta - omega * eta_step(k, eta)) / previous
    return zeta if zeta.ndim else float(zeta)


def alpha_sequence(k: Any, alpha: str) -> Any:
    """The LLN regulariser α_k > 0 for k ≥ 1 (seed 004, eq. 1).

    ``"one"``: α_k = 1; ``"sqrt"``: α_k = √k; ``"log"``: α_k = log(k + 1),
    the paper's log k shifted by one so that α_1 = log 2 stays positive.
    All three satisfy Theorem 1 (α_k/k → 0 and log(k/α_k)/k → 0).
    """
    if alpha == "one":
        return np.ones_like(k, dtype=float) if np.ndim(k) else 1.0
    if alpha == "sqrt":
        return np.sqrt(k) if np.ndim(k) else math.sqrt(k)
    if alpha == "log":
        return np.log1p(k) if np.ndim(k) else math.log1p(k)
    raise ValueError(f"alpha must be one of {ALPHAS}, got {alpha!r}")


# --------------------------------------------------------------------------
# Update rules, one function each; they broadcast over numpy arrays.
# --------------------------------------------------------------------------

def naive_estimate(changes: Any, count: Any, p: Any) -> Any:
    """Naive estimate w_k = p·Î_k/k (seed 004, Section 3.4); it tends to pΔ/(Δ+p)."""
    return p * changes / count


def lln_estimate(changes: Any, unchanged_over_p: Any, count: Any, p: Any, alpha: str) -> Any:
    """LLN estimate in ratio form x_k = Î_k / (S_k + α_k/p_k) (seed 004, eq. 1).

    S_k = Σ_j (1 − I_j)/p_j. With a constant p this is exactly eq. 1,
    p·Î_k/(k + α_k − Î_k); with a varying p it stays consistent because
    E[(1 − I_j)/p_j] = E[I_j]/Δ (docs/MATH.md, "Inside the engine").
    """
    return changes / (unchanged_over_p + alpha_sequence(count, alpha) / p)


def sa_step(y: Any, changed: Any, p: Any, eta_k: Any) -> Any:
    """y_{k+1} = y_k + η_k [I_{k+1}(y_k + p) − y_k] (seed 004, eq. 2)."""
    return y + eta_k * (changed * (y + p) - y)


def sam_step(z: Any, z_prev: Any, changed: Any, p: Any, eta_k: Any, zeta_k: Any) -> Any:
    """z_{k+1} = z_k + η_k [I_{k+1}(z_k + p) − z_k] + ζ_k (z_k − z_{k−1}) (seed 004, eq. 3)."""
    return z + eta_k * (changed * (z + p) - z) + zeta_k * (z - z_prev)


def interval_step(
    log_rate: Any, unchanged_time: Any, changed_score: Any, changed_info: Any,
    changed: Any, interval: Any, count: Any, *,
    log_prior: float, prior_info: float, max_step: float, since_change: Any = np.nan,
) -> tuple[Any, Any, Any, Any]:
    """One update of the interval estimator; returns the new
    (log_rate, unchanged_time, changed_score, changed_info).

    Works in φ = log Δ with x = Δτ. The log-likelihood of seed 004's eq. 15
    is Σ_changed log(1 − e^{−x_j}) − Δ·T₀ (T₀ = summed intervals of unchanged
    fetches) plus the prior −prior_info·(φ − log_prior)²/2. Its φ-score is
    B − Δ·T₀ + prior_info·(log_prior − φ) and its curvature
    J = prior_info + Δ·T₀ + H, where B = Σ_changed r(x_j) and
    H = Σ_changed r(x_j)·ρ(x_j), r(x) = x/(e^x − 1), ρ(x) = x/(1 − e^{−x}) − 1.
    The Δ·T₀ parts are exact for every Δ. B and H are kept as a running
    log-linear model around the current φ: after a step δ both are scaled by
    exp(−(H/B)·δ), which matches dB/dφ = −H. One Newton step
    δ = score/J (clipped to ±max_step) per observation. ``count`` (updates
    including this one) bounds B, since r ≤ 1.

    A change whose time is known (``since_change`` = s, the time from the
    change to this fetch, 0 ≤ s < interval: a trustworthy Last-Modified)
    contributes the exact term log Δ − Δ·s instead of log(1 − e^{−Δτ}):
    the density of a change at that time and none after it (Cho and
    Garcia-Molina 2003, §5: the last-modified date turns the censored bit
    into an event time). Its score is 1 − Δ·s: one exact event in B (with no
    curvature in H) and s added to T₀. NaN (the default) means no known time.
    """
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        x = np.clip(np.exp(log_rate) * interval, _X_MIN, _X_MAX)
        r = x / np.expm1(x)
        rho = np.where(x < 1e-3, x / 2 + x * x / 12, x / -np.expm1(-x) - 1.0)
        dated = (changed == 1) & (since_change >= 0)
        changed_score = changed_score + changed * np.where(dated, 1.0, r)
        changed_info = changed_info + changed * np.where(dated, 0.0, r * rho)
        unchanged_time = unchanged_time + np.where(dated, since_change, (1 - changed) * interval)
        exposure = np.minimum(np.exp(log_rate) * unchanged_time, _X_MAX)
        score = changed_score - exposure + prior_info * (log_prior - log_rate)
        curvature = prior_info + exposure + changed_info
        new_log_rate = np.clip(log_rate + np.clip(score / curvature, -max_step, max_step),
                               -_LOG_RATE_BOUND, _LOG_RATE_BOUND)
        step = new_log_rate - log_rate
        slope = np.where(changed_score > 0, changed_info / changed_score, 0.0)
        scaled = np.minimum(changed_score * np.exp(np.minimum(-slope * step, 700.0)), count)
        factor = np.where(changed_score > 0, scaled / changed_score, 1.0)
    return new_log_rate, unchanged_time, changed_score * factor, changed_info * factor


def _newton_from_left(fun: Callable[[float], tuple[float, float]], lo: float, hi: float) -> float:
    """Root of a convex decreasing function with fun(lo) ≥ 0 ≥ fun(hi).

    For such a function Newton's method started left of the root climbs to it
    monotonically without overshooting, so no safeguard beyond [lo, hi] is
    needed; the iteration stops once it can no longer move right.
    """
    x = lo
    for _ in range(200):
        value, slope = fun(x)
        if value <= 0.0 or slope >= 0.0:
            return x
        nxt = min(x - value / slope, hi)
        if nxt <= x * (1.0 + 2.0 * _EPS):
            return nxt
        x = nxt
    logger.warning("Newton iteration did not settle; returning %r", x)
    return x


def unchanged_half_rate(intervals: np.ndarray) -> float:
    """Rate at which the expected number of unchanged fetches is 1/2: Σ e^{−Δτ_j} = 1/2.

    The finite value MLE and MM report when every fetch saw a change (their
    exact answer would be +∞).
    """
    return mm_solve(intervals, 0.5)


def mle_solve(changed_intervals: np.ndarray, unchanged_time: float) -> float:
    """Root Δ of Σ_{I_j=1} τ_j/(e^{Δτ_j} − 1) = Σ_{I_j=0} τ_j (seed 004, eq. 15).

    ``changed_intervals`` are the τ_j of fetches that saw a change and
    ``unchanged_time`` the summed τ_j of those that did not: together a
    sufficient statistic for eq. 15. Edge cases: no change seen -> 0.0 (the
    likelihood e^{−ΔΣτ} peaks at 0); only changes seen -> the finite cap
    :func:`unchanged_half_rate`.

    The left side is convex and decreasing in Δ, and
    n₁/Δ − T₁/2 ≤ Σ τ_j/(e^{Δτ_j} − 1) ≤ n₁/Δ (T₁ = Σ changed τ_j) brackets
    the root in [n₁/(T₀ + T₁/2), n₁/T₀].
    """
    tau = np.asarray(changed_intervals, dtype=float)
    if tau.size == 0:
        return 0.0
    if unchanged_time <= 0.0:
        return unchanged_half_rate(tau)
    n1 = float(tau.size)

    def score(rate: float) -> tuple[float, float]:
        with np.errstate(over="ignore"):
            q = tau / np.expm1(rate * tau)
        # d/dΔ of τ/(e^{Δτ} − 1) is −(τq + q²) with q = τ/(e^{Δτ} − 1).
        return float(q.sum()) - unchanged_time, -float((tau * q + q * q).sum())

    lo = n1 / (unchanged_time + 0.5 * float(tau.sum()))
    return float(_newton_from_left(score, lo, n1 / unchanged_time))


def mm_solve(intervals: np.ndarray, unchanged: float) -> float:
    """Root Δ of Σ_j e^{−Δτ_j} = Σ_j (1 − I_j) (moment matching, seed 004 §3.4).

    ``unchanged`` is the number of fetches that saw no change. When it is
    zero the root is +∞ and the cap :func:`unchanged_half_rate` is returned;
    when every fetch was unchanged the root is 0.0. The left side is convex
    and decreasing; with n fetches, τ_min ≤ τ_j ≤ τ_max brackets the root in
    [log(n/u)/τ_max, log(n/u)/τ_min].
    """
    tau = np.asarray(intervals, dtype=float)
    n = float(tau.size)
    if n == 0 or unchanged >= n:
        return 0.0
    if unchanged <= 0:
        return unchanged_half_rate(tau)

    def gap(rate: float) -> tuple[float, float]:
        e = np.exp(-rate * tau)
        return float(e.sum()) - unchanged, -float((tau * e).sum())

    log_ratio = math.log(n / unchanged)
    return float(_newton_from_left(gap, log_ratio / float(tau.max()),
                                   log_ratio / float(tau.min())))


def _affine_scan(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Prefix compositions of the maps y -> a_k y + b_k along the last axis.

    Returns (A, B) with y_{k+1} = A_k y_0 + B_k. Doubling scan: O(n log n)
    vectorised work; with a_k ∈ [0, 1] and b_k ≥ 0 every operation is a
    product or a sum of non-negative numbers, so rounding stays relative.
    """
    a, b = a.copy(), b.copy()
    n, d = a.shape[-1], 1
    while d < n:
        a_new = a[..., d:] * a[..., :-d]
        b_new = a[..., d:] * b[..., :-d] + b[..., d:]
        a[..., d:], b[..., d:] = a_new, b_new
        d *= 2
    return a, b


def _affine_scan2(m11: np.ndarray, m12: np.ndarray, c1: np.ndarray) -> tuple[np.ndarray, ...]:
    """Prefix compositions of v -> M_k v + c_k, M_k = [[m11, m12], [1, 0]], c_k = (c1, 0).

    Returns (A11, A12, B1): the first row of the composed maps, so that
    z_{k+1} = A11_k z_0 + A12_k z_{−1} + B1_k. Same doubling scan as
    :func:`_affine_scan` on 2×2 matrices.
    """
    a11, a12, b1 = m11.copy(), m12.copy(), c1.copy()
    a21, a22, b2 = np.ones_like(m11), np.zeros_like(m11), np.zeros_like(m11)
    n, d = a11.shape[-1], 1
    while d < n:
        # later (L = index ≥ d) composed after earlier (E = index − d): L·E, L·c_E + c_L
        l11, l12, l21, l22 = a11[..., d:], a12[..., d:], a21[..., d:], a22[..., d:]
        e11, e12, e21, e22 = a11[..., :-d], a12[..., :-d], a21[..., :-d], a22[..., :-d]
        f1, f2 = b1[..., :-d], b2[..., :-d]
        new = (l11 * e11 + l12 * e21, l11 * e12 + l12 * e22,
               l21 * e11 + l22 * e21, l21 * e12 + l22 * e22,
               l11 * f1 + l12 * f2 + b1[..., d:], l21 * f1 + l22 * f2 + b2[..., d:])
        for arr, val in zip((a11, a12, a21, a22, b1, b2), new, strict=True):
            arr[..., d:] = val
        d *= 2
    return a11, a12, b1

"""Change-rate estimators: how often does a page change? The Python statement of lua/lib.lua.

The engine runs its estimators in Redis (lua/lib_policy.lua ``update_estimate``); this module is
their statement in Python, step for step: what the tests check the Lua code against
(tests/test_engine_sim.py, to the last bit), what the benchmarks compare, and the
offline estimators (``naive``, ``mle``, ``mm``) the engine does not
run. No runtime module imports it.

After every fetch the crawler learns one bit, ``changed`` (did the page change
since the previous fetch?), and the time ``interval`` since that previous
fetch. From these bits each estimator here tracks the page's change rate Δ
(changes per unit time, the Poisson rate λ of DESIGN.md).

The estimators come from seed 004 (Section 2 and 3.4):

=================  ==========================================  ================
name               rule                                        needs interval
=================  ==========================================  ================
``naive``          w_k = p·Î_k/k (§3.4; biased)                no
``lln``            x_k = p·Î_k/(k + α_k − Î_k) (eq. 1)         no
``sa``             stochastic approximation (eq. 2)            no
``sam``            SA with momentum (eq. 3, ζ_k from eq. 10)   no
``mle``            root of the likelihood equation (eq. 15)    yes (offline)
``mm``             moment matching Σ(1 − I_j) = Σ e^{−Δτ_j}    yes (offline)
``interval``       ours: recursive MAP in log Δ, O(1)          yes
=================  ==========================================  ================

LLN, SA and SAM assume the fetch times are a Poisson process of rate ``p``;
``update`` takes ``p`` per observation so the engine can change the planned
rate between fetches (docs/MATH.md, "Inside the engine: the Poisson catch").
With strictly periodic fetching they are biased; ``interval``, ``mle`` and
``mm`` use each observation's realised interval and are not.

Every estimator has the same interface (:class:`Estimator`): ``update``,
``estimate``, ``count``, ``to_state`` / ``from_state`` (plain numbers, for
Redis). :func:`trajectory` computes the estimate after every observation of
whole arrays of observations, vectorised where the recursion allows.

Each update rule lives in one module-level function (``naive_estimate``,
``lln_estimate``, ``sa_step``, ``sam_step``, ``interval_step``, ``mle_solve``,
``mm_solve``) that the classes call, so the engine's Lua code has one
obvious Python counterpart to be tested against.
"""

from __future__ import annotations

import logging
import math
import numbers
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np

logger = logging.getLogger(__name__)

__all__ = [
    "ALPHAS", "ESTIMATORS", "LLN", "MLE", "SA", "SAM", "Estimator", "Interval",
    "MomentMatching", "Naive", "alpha_sequence", "eta_step", "interval_step",
    "lln_estimate", "make_estimator", "mle_solve", "mm_solve", "naive_estimate",
    "sa_step", "sam_step", "trajectory", "unchanged_half_rate", "zeta_step",
]

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


# --------------------------------------------------------------------------
# Estimator classes.
# --------------------------------------------------------------------------

def _state_value(field: str, kind: str, value: Any) -> Any:
    """Check one state field. Kinds: "int" (integer ≥ 0), "float" (finite),
    "positive" (finite > 0), "non_negative" (finite ≥ 0), "intervals" (list
    of finite floats > 0)."""
    if kind == "int":
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise ValueError(f"state field {field!r} must be an integer, got {value!r}")
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(f"state field {field!r} must be an integer, got {value!r}")
        if value < 0:
            raise ValueError(f"state field {field!r} must be >= 0, got {value!r}")
        return int(value)
    if kind == "intervals":
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"state field {field!r} must be a list, got {type(value).__name__}")
        return [_positive(f"state field {field!r} item", v) for v in value]
    label = f"state field {field!r}"
    if kind == "positive":
        return _positive(label, value)
    if kind == "non_negative":
        return _non_negative(label, value)
    value = _real(label, value)
    if math.isinf(value):
        raise ValueError(f"{label} must be finite, got {value!r}")
    return value


class Estimator:
    """Base class: one page's change-rate estimate, updated once per fetch.

    Constructor keywords use seed 004's names: ``p`` (Poisson crawl rate,
    default 1.0), ``x0`` (estimate before any update, default 1.0), and per
    class ``alpha``, ``eta``, ``beta``, ``omega``, ``prior_info``,
    ``max_step``. Keywords a class does not use are ignored, so one dict of
    parameters fits every estimator.
    """

    name: ClassVar[str] = ""
    needs_interval: ClassVar[bool] = False
    uses_change_time: ClassVar[bool] = False
    _since_change: float = math.nan
    state_fields: ClassVar[Mapping[str, str]] = {}

    def __init__(self, *, p: float = 1.0, x0: float = 1.0, **_unused: Any) -> None:
        self.p = _positive("p", p)
        self.x0 = _non_negative("x0", x0)
        self._count = 0

    @property
    def count(self) -> int:
        """Number of updates k so far."""
        return self._count

    @property
    def estimate(self) -> float:
        """The current estimate of Δ (``x0`` before any update)."""
        return self.x0 if self._count == 0 else float(self._estimate())

    def update(self, changed: Any, interval: float | None = None, p: float | None = None, *,
               since_change: float | None = None) -> float:
        """Record one fetch and return the new estimate.

        ``changed``: did the page change since the previous fetch (0/1/bool).
        ``interval``: realised time since the previous fetch (required by
        MLE, MM and Interval). ``p``: the Poisson crawl rate that produced
        this observation (default: the constructor's ``p``).
        ``since_change``: for a change whose time is known (Last-Modified),
        the time from it to this fetch, in [0, interval); only estimators
        with ``uses_change_time`` learn from it, the others see the bit.
        """
        changed = _changed(changed)
        if interval is not None:
            interval = _positive("interval", interval)
        elif self.needs_interval:
            raise ValueError(f"interval is required by the {self.name!r} estimator")
        p = self.p if p is None else _positive("p", p)
        if since_change is not None:
            since_change = _non_negative("since_change", since_change)
            if not changed:
                raise ValueError(f"since_change={since_change!r} given for a fetch without a change")
            if interval is not None and since_change >= interval:
                raise ValueError(f"since_change={since_change!r} is not shorter than the interval "
                                 f"{interval!r}: the change came before the previous fetch")
        self._since_change = math.nan if since_change is None else since_change
        self._observe(changed, interval, p)
        self._count += 1
        return self.estimate

    def to_state(self) -> dict[str, Any]:
        """The dynamic state as JSON-safe numbers (parameters are not included)."""
        return {"count": self._count, **self._get_state()}

    @classmethod
    def from_state(cls, state: Mapping[str, Any], **params: Any) -> Estimator:
        """Rebuild an estimator from :meth:`to_state` output and its parameters."""
        if not isinstance(state, Mapping):
            raise ValueError(f"state must be a mapping, got {type(state).__name__}")
        fields = {"count": "int", **cls.state_fields}
        unknown = sorted(set(state) - set(fields))
        if unknown:
            raise ValueError(f"unknown state field {unknown[0]!r} for {cls.name!r}")
        values = {}
        for field, kind in fields.items():
            if field not in state:
                raise ValueError(f"missing state field {field!r} for {cls.name!r}")
            values[field] = _state_value(field, kind, state[field])
        est = cls(**params)
        est._count = values.pop("count")
        est._set_state(values)
        return est

    def __repr__(self) -> str:
        return f"{type(self).__name__}(count={self._count}, estimate={self.estimate!r})"

    # Subclass hooks --------------------------------------------------------

    def _observe(self, changed: int, interval: float | None, p: float) -> None:
        raise NotImplementedError

    def _estimate(self) -> float:
        raise NotImplementedError

    def _get_state(self) -> dict[str, Any]:
        raise NotImplementedError

    def _set_state(self, values: dict[str, Any]) -> None:
        raise NotImplementedError

    def _trajectory(self, changed: np.ndarray, intervals: np.ndarray | None,
                    p: np.ndarray) -> np.ndarray:
        """Estimates after every observation; rows are runs. Default: repeated updates."""
        out = np.empty(changed.shape)
        params = self._params()
        for run in range(changed.shape[0]):
            est = type(self)(**params)
            for k in range(changed.shape[1]):
                tau = None if intervals is None else float(intervals[run, k])
                est._observe(int(changed[run, k]), tau, float(p[run, k]))
                est._count += 1
                out[run, k] = est.estimate
        return out

    def _params(self) -> dict[str, Any]:
        return {"p": self.p, "x0": self.x0}


def _check_consistent(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(f"inconsistent state: {message}")


class Naive(Estimator):
    """Naive estimator w_k = p·Î_k/k (seed 004, §3.4), with p the latest observation's.

    A baseline: it converges to pΔ/(Δ + p), not Δ, because a fetch cannot
    see more than one change.
    """

    name = "naive"
    state_fields = {"changes": "int", "p_last": "positive"}

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._changes = 0
        self._p_last = self.p

    def _observe(self, changed: int, interval: float | None, p: float) -> None:
        self._changes += changed
        self._p_last = p

    def _estimate(self) -> float:
        return naive_estimate(self._changes, self._count, self._p_last)

    def _get_state(self) -> dict[str, Any]:
        return {"changes": self._changes, "p_last": self._p_last}

    def _set_state(self, values: dict[str, Any]) -> None:
        _check_consistent(values["changes"] <= self._count, "changes > count")
        self._changes = values["changes"]
        self._p_last = values["p_last"]

    def _trajectory(self, changed, intervals, p):
        k = np.arange(1, changed.shape[1] + 1)
        return naive_estimate(np.cumsum(changed, axis=1), k, p)


class LLN(Estimator):
    """LLN estimator (seed 004, eq. 1) in the ratio form that admits a varying p.

    x_k = Î_k / (S_k + α_k/p_k), S_k = Σ_j (1 − I_j)/p_j (see
    :func:`lln_estimate`); ``alpha`` ∈ {"one", "log", "sqrt"} selects α_k
    (:func:`alpha_sequence`). Cost O(1) per update.
    """

    name = "lln"
    state_fields = {"changes": "int", "unchanged_over_p": "non_negative", "p_last": "positive"}

    def __init__(self, *, alpha: str = "one", **params: Any) -> None:
        super().__init__(**params)
        self.alpha = _alpha(alpha)
        self._changes = 0
        self._unchanged_over_p = 0.0
        self._p_last = self.p

    def _observe(self, changed: int, interval: float | None, p: float) -> None:
        self._changes += changed
        self._unchanged_over_p += (1 - changed) / p
        self._p_last = p

    def _estimate(self) -> float:
        return lln_estimate(self._changes, self._unchanged_over_p, self._count,
                            self._p_last, self.alpha)

    def _get_state(self) -> dict[str, Any]:
        return {"changes": self._changes, "unchanged_over_p": self._unchanged_over_p,
                "p_last": self._p_last}

    def _set_state(self, values: dict[str, Any]) -> None:
        _check_consistent(values["changes"] <= self._count, "changes > count")
        _check_consistent((values["unchanged_over_p"] > 0) == (values["changes"] < self._count),
                          "unchanged_over_p must be > 0 exactly when changes < count")
        self._changes = values["changes"]
        self._unchanged_over_p = values["unchanged_over_p"]
        self._p_last = values["p_last"]

    def _params(self):
        return {**super()._params(), "alpha": self.alpha}

    def _trajectory(self, changed, intervals, p):
        k = np.arange(1, changed.shape[1] + 1)
        unchanged_over_p = np.cumsum((1 - changed) / p, axis=1)
        return lln_estimate(np.cumsum(changed, axis=1), unchanged_over_p, k, p, self.alpha)


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


class SA(Estimator):
    """Stochastic-approximation estimator (seed 004, eq. 2), η_k = (k+1)^−eta.

    Each update moves y toward the root Δ of the mean field
    p(Δ − y)/(Δ + p), which stays Δ when p changes per observation.
    Cost O(1) per update.
    """

    name = "sa"
    state_fields = {"y": "non_negative"}

    def __init__(self, *, eta: float = 0.75, **params: Any) -> None:
        super().__init__(**params)
        self.eta = _exponent("eta", eta)
        self._y = self.x0

    def _observe(self, changed: int, interval: float | None, p: float) -> None:
        self._y = sa_step(self._y, changed, p, eta_step(self._count, self.eta))

    def _estimate(self) -> float:
        return self._y

    def _get_state(self) -> dict[str, Any]:
        return {"y": self._y}

    def _set_state(self, values: dict[str, Any]) -> None:
        self._y = values["y"]

    def _params(self):
        return {**super()._params(), "eta": self.eta}

    def _trajectory(self, changed, intervals, p):
        eta_k = eta_step(np.arange(changed.shape[1]), self.eta)
        # eq. 2 as y_{k+1} = (1 − η_k + η_k I) y_k + η_k I p
        a, b = _affine_scan(1.0 - eta_k + eta_k * changed, eta_k * changed * p)
        return a * self.x0 + b


class SAM(Estimator):
    """SA with momentum (seed 004, eq. 3), ζ_k from eq. 10, z_{−1} = z_0 = x0.

    Parameters ``eta`` (η_k = (k+1)^−eta), ``beta`` (β_k = (k+1)^−beta) and
    ``omega``. The momentum can push the iterate z below zero early on; the
    reported estimate is max(z, 0) while the recursion keeps the raw z.
    Cost O(1) per update.
    """

    name = "sam"
    state_fields = {"z": "float", "z_prev": "float"}

    def __init__(self, *, eta: float = 0.75, beta: float = 0.6, omega: float = 1.0,
                 **params: Any) -> None:
        super().__init__(**params)
        self.eta = _exponent("eta", eta)
        self.beta = _exponent("beta", beta)
        self.omega = _positive("omega", omega)
        self._z = self._z_prev = self.x0

    def _observe(self, changed: int, interval: float | None, p: float) -> None:
        k = self._count
        z = sam_step(self._z, self._z_prev, changed, p, eta_step(k, self.eta),
                     zeta_step(k, self.eta, self.beta, self.omega))
        self._z_prev, self._z = self._z, z

    def _estimate(self) -> float:
        return max(self._z, 0.0)

    def _get_state(self) -> dict[str, Any]:
        return {"z": self._z, "z_prev": self._z_prev}

    def _set_state(self, values: dict[str, Any]) -> None:
        self._z, self._z_prev = values["z"], values["z_prev"]

    def _params(self):
        return {**super()._params(), "eta": self.eta, "beta": self.beta, "omega": self.omega}

    def _trajectory(self, changed, intervals, p):
        k = np.arange(changed.shape[1])
        eta_k = eta_step(k, self.eta)
        zeta_k = zeta_step(k, self.eta, self.beta, self.omega)
        # eq. 3 as z_{k+1} = (1 − η_k + η_k I + ζ_k) z_k − ζ_k z_{k−1} + η_k I p
        m11 = 1.0 - eta_k + eta_k * changed + zeta_k
        m12 = np.broadcast_to(-zeta_k, changed.shape).astype(float)
        a11, a12, b1 = _affine_scan2(m11, m12, eta_k * changed * p)
        return np.maximum(a11 * self.x0 + a12 * self.x0 + b1, 0.0)


class Interval(Estimator):
    """Interval-aware online estimator: recursive maximum a posteriori in φ = log Δ.

    What: each fetch contributes its term of seed 004's likelihood (eq. 15),
    I·log(1 − e^{−Δτ}) − (1 − I)·Δτ, with its own realised interval τ; a
    weak log-normal prior centred on ``x0`` with weight ``prior_info``
    (default 0.3, about half of the most informative single fetch) keeps the
    estimate finite when every fetch so far saw a change, or none did. After
    each fetch the estimator takes one Newton step on the whole
    log-posterior (:func:`interval_step`). The unchanged fetches enter
    through T₀ = Σ τ_j, which is exact for every Δ; the changed ones through
    two running sums (their score B and curvature H) that are carried along
    as a log-linear model in φ. Steps are clipped to ±``max_step`` (default
    1.0, a factor e).

    Why consistent: the estimating equation is the MLE's (eq. 15) whatever
    the law of the intervals (Poisson, periodic or a mix), and it is solved
    on a model of the log-likelihood that is exact for the unchanged part and
    correct to first order around the current estimate for the changed part.
    Model error comes only from the large early moves and weighs O(1/k);
    the prior weighs prior_info/k. So the estimate tracks the offline MLE:
    its bias is small under periodic fetching and its RMSE is close to the
    MLE's under Poisson fetching (see tests). A plain recursive MLE that
    accumulates Fisher information at past estimates instead converges
    slowly when ``x0`` is far from Δ, because information counted at wrong
    estimates makes later steps too small.

    Change times: a change whose time the server told (``since_change``,
    from a Last-Modified date) enters as an exact event, log Δ − Δ·s (see
    :func:`interval_step`); with only such changes the estimate is the
    events-over-exposure MLE, the Poisson rate's sufficient statistics.

    Cost: O(1) per update (two exp, two expm1); state
    (count, log_rate, unchanged_time, changed_score, changed_info).
    """

    name = "interval"
    needs_interval = True
    uses_change_time = True
    state_fields = {"log_rate": "float", "unchanged_time": "non_negative",
                    "changed_score": "non_negative", "changed_info": "non_negative"}

    def __init__(self, *, prior_info: float = 0.3, max_step: float = 1.0, **params: Any) -> None:
        super().__init__(**params)
        if self.x0 <= 0.0:
            raise ValueError(f"x0 must be positive for the interval estimator, got {self.x0!r}")
        self.prior_info = _positive("prior_info", prior_info)
        self.max_step = _positive("max_step", max_step)
        self._log_prior = math.log(self.x0)
        self._state = (self._log_prior, 0.0, 0.0, 0.0)

    def _step(self, state: tuple, changed: Any, interval: Any, count: Any,
              since_change: Any = math.nan) -> tuple:
        return interval_step(*state, changed, interval, count, log_prior=self._log_prior,
                             prior_info=self.prior_info, max_step=self.max_step,
                             since_change=since_change)

    def _observe(self, changed: int, interval: float | None, p: float) -> None:
        self._state = tuple(float(v) for v in self._step(self._state, changed, interval,
                                                         self._count + 1, self._since_change))

    def _estimate(self) -> float:
        return math.exp(self._state[0])

    def _get_state(self) -> dict[str, Any]:
        return dict(zip(self.state_fields, self._state, strict=True))

    def _set_state(self, values: dict[str, Any]) -> None:
        if abs(values["log_rate"]) > _LOG_RATE_BOUND:
            raise ValueError(f"state field 'log_rate' out of range: {values['log_rate']!r}")
        _check_consistent(values["changed_score"] <= max(self._count, 0),
                          "changed_score > count")
        self._state = tuple(values[f] for f in self.state_fields)

    def _params(self):
        return {**super()._params(), "prior_info": self.prior_info, "max_step": self.max_step}

    def _trajectory(self, changed, intervals, p):
        runs, n = changed.shape
        state = tuple(np.full(runs, v) for v in self._state)
        out = np.empty((runs, n))
        for k in range(n):
            state = self._step(state, changed[:, k], intervals[:, k], k + 1)
            out[:, k] = state[0]
        return np.exp(out)


class MLE(Estimator):
    """Offline maximum-likelihood estimate: the root of seed 004, eq. 15.

    Keeps the intervals of fetches that saw a change and the total interval
    of those that did not (a sufficient statistic for eq. 15) and re-solves
    exactly on every update (:func:`mle_solve`): O(k) memory and O(k) per
    update. No change yet -> 0.0; only changes -> the finite cap
    :func:`unchanged_half_rate`. A baseline and a reference, not for the
    engine.
    """

    name = "mle"
    needs_interval = True
    state_fields = {"changed_intervals": "intervals", "unchanged_time": "non_negative"}

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._changed_intervals: list[float] = []
        self._unchanged_time = 0.0
        self._value = self.x0

    def _observe(self, changed: int, interval: float | None, p: float) -> None:
        if changed:
            self._changed_intervals.append(interval)
        else:
            self._unchanged_time += interval
        self._value = mle_solve(np.array(self._changed_intervals), self._unchanged_time)

    def _estimate(self) -> float:
        return self._value

    def _get_state(self) -> dict[str, Any]:
        return {"changed_intervals": list(self._changed_intervals),
                "unchanged_time": self._unchanged_time}

    def _set_state(self, values: dict[str, Any]) -> None:
        n1 = len(values["changed_intervals"])
        _check_consistent(n1 <= self._count, "more changed intervals than count")
        _check_consistent((values["unchanged_time"] > 0) == (n1 < self._count),
                          "unchanged_time must be > 0 exactly when some fetch saw no change")
        self._changed_intervals = values["changed_intervals"]
        self._unchanged_time = values["unchanged_time"]
        if self._count:
            self._value = mle_solve(np.array(self._changed_intervals), self._unchanged_time)


class MomentMatching(Estimator):
    """Moment-matching estimate: the root of Σ(1 − I_j) = Σ e^{−Δτ_j} (seed 004, §3.4).

    Keeps every interval and the number of unchanged fetches and re-solves
    on every update (:func:`mm_solve`): O(k) memory and time per update.
    Same edge cases as :class:`MLE`.
    """

    name = "mm"
    needs_interval = True
    state_fields = {"intervals": "intervals", "unchanged": "int"}

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._intervals: list[float] = []
        self._unchanged = 0
        self._value = self.x0

    def _observe(self, changed: int, interval: float | None, p: float) -> None:
        self._intervals.append(interval)
        self._unchanged += 1 - changed
        self._value = mm_solve(np.array(self._intervals), self._unchanged)

    def _estimate(self) -> float:
        return self._value

    def _get_state(self) -> dict[str, Any]:
        return {"intervals": list(self._intervals), "unchanged": self._unchanged}

    def _set_state(self, values: dict[str, Any]) -> None:
        _check_consistent(len(values["intervals"]) == self._count, "len(intervals) != count")
        _check_consistent(values["unchanged"] <= self._count, "unchanged > count")
        self._intervals = values["intervals"]
        self._unchanged = values["unchanged"]
        if self._count:
            self._value = mm_solve(np.array(self._intervals), self._unchanged)


ESTIMATORS: dict[str, type[Estimator]] = {
    "naive": Naive,
    "lln": LLN,
    "sa": SA,
    "sam": SAM,
    "mle": MLE,
    "mm": MomentMatching,
    "interval": Interval,
}


def _estimator_class(name: str) -> type[Estimator]:
    try:
        return ESTIMATORS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown estimator {name!r}; choose one of {sorted(ESTIMATORS)}"
        ) from None


def make_estimator(name: str, **params: Any) -> Estimator:
    """A new estimator by registry name ("naive", "lln", "sa", "sam", "mle", "mm", "interval")."""
    return _estimator_class(name)(**params)


def trajectory(name: str, changes: Any, intervals: Any = None, p: Any = None,
               **params: Any) -> np.ndarray:
    """Estimates after every observation, as repeated :meth:`Estimator.update` would give.

    ``changes``: 0/1 array, shape (k,) or (runs, k). ``intervals`` and ``p``
    broadcast to that shape (scalars allowed); ``p`` (default 1.0) is the
    Poisson crawl rate of each observation. Returns a float array of the
    same shape.

    Cost: Naive and LLN are cumulative sums; SA and SAM are linear
    recursions evaluated by a doubling scan (O(k log k), vectorised);
    Interval loops over k, vectorised across runs (pass 2-D input for
    speed); MLE and MM re-solve every prefix, O(k²) per run (fine for
    k ≤ a few thousand).
    """
    cls = _estimator_class(name)
    changed = np.asarray(changes)
    if changed.ndim not in (1, 2):
        raise ValueError(f"changes must be 1-D or 2-D, got shape {changed.shape}")
    if changed.dtype.kind not in "biuf" or not np.isin(changed, (0, 1)).all():
        raise ValueError("changes must contain only 0/1 or booleans")
    changed2 = np.atleast_2d(changed).astype(float)
    est = cls(**params)
    p_arr = _broadcast_positive("p", est.p if p is None else p, changed2.shape, changed.shape)
    tau = None
    if intervals is not None:
        tau = _broadcast_positive("intervals", intervals, changed2.shape, changed.shape)
    elif cls.needs_interval:
        raise ValueError(f"intervals are required by the {name!r} estimator")
    if changed2.shape[1] == 0:
        return np.empty(changed.shape)
    out = est._trajectory(changed2, tau, p_arr)
    return out.reshape(changed.shape)


def _broadcast_positive(field: str, value: Any, shape2: tuple[int, ...],
                        shape: tuple[int, ...]) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
        arr = np.broadcast_to(arr, shape).reshape(shape2)
    except (TypeError, ValueError):
        raise ValueError(f"{field} must be a positive number or an array of shape {shape}, "
                         f"got {value!r}") from None
    bad = ~((arr > 0) & np.isfinite(arr))
    if bad.any():
        raise ValueError(f"{field} must be positive and finite, got {arr[bad].flat[0]!r}")
    return arr

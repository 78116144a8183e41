"""Change-rate estimators: how often does a page change? The Python statement of lua/lib.lua.

The engine runs its estimators in Redis (lua/lib_policy.lua ``update_estimate``); this module is
their statement in Python, step for step: what the tests check the Lua code against
(tests/test_engine_sim.py, to the last bit), what the benchmarks compare, and the
offline estimators (``naive``, ``mle``, ``mm``) the engine does not
run. No runtime module imports it.

After every fetch the crawler learns one bit, ``changed`` (did the page change
since the previous fetch?), and the time ``interval`` since that previous
fetch. From these bits each estimator here tracks the page's change rate Δ
(changes per unit time, the Poisson rate λ of docs/MATH.md).

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
from typing import Any

import numpy as np

from frontier_rate.math.estimator_base import Estimator, _check_consistent
from frontier_rate.math.updates import (
    _LOG_RATE_BOUND,
    _affine_scan,
    _affine_scan2,
    _alpha,
    _exponent,
    _positive,
    eta_step,
    interval_step,
    lln_estimate,
    mle_solve,
    mm_solve,
    naive_estimate,
    sa_step,
    sam_step,
    zeta_step,
)

logger = logging.getLogger(__name__)

__all__ = [
    "ESTIMATORS", "LLN", "MLE", "SA", "SAM", "Interval", "MomentMatching", "Naive", "make_estimator", "trajectory",
]


# --------------------------------------------------------------------------
# Estimator classes.
# --------------------------------------------------------------------------

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

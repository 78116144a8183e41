"""The per-page index of the Whittle / Lagrangian policy (seeds 001 and 002): F(y), the interval at
which a page's index reaches a threshold ν, and the input checks the solvers share.

A page of weight w and change rate λ fetched every t has marginal value w·F(λt) with
F(y) = 1 − (1 + y)·e^{−y} (``index_curve``); it is due once its index reaches ν, after
t = y(ν/w)/λ (``optimal_y``). Two objectives share it through an effective weight
(``effective_weight``): ``"changes"`` (w, seed 001) and ``"freshness"`` (w/λ). Solving ν from a
budget is in ``frontier_rate.math.budget``, over the cells of ``frontier_rate.math.cells``; docs/MATH.md
says the whole policy. numpy only.
"""

from __future__ import annotations

import logging
import math

import numpy as np

logger = logging.getLogger(__name__)

OBJECTIVES = ("changes", "freshness")

# ``optimal_y``: the exact iteration the engine's Lua code mirrors.
NEWTON_STEPS = 5
"""Newton steps after the initial guess: always for c ≥ SMALL_C, at most for c < SMALL_C."""
NEWTON_TOL = 1e-8
"""For c < SMALL_C Newton stops after a step of at most NEWTON_TOL·y (see optimal_y)."""
SMALL_C = 0.5
"""Below this c the equation is solved on F(y) = c, above it on its complement."""
TINY_S = 1e-8
"""If s = sqrt(2c) < TINY_S, y = s(1 + s/3) is already exact to O(s²) and returned."""
SERIES_TERMS = 24
"""The series of F (y < 1) and of e^{−s} − 1 + s (s < 1) run up to the y^(SERIES_TERMS−1) term;
F's is cut shorter by ``_F_TERMS``."""

# ``cell_of``: fixed log-spaced bins over weight and change rate (per second).
WEIGHT_BINS_PER_DECADE = 32
WEIGHT_LOG10_MIN = -6.0
WEIGHT_LOG10_MAX = 6.0
RATE_BINS_PER_DECADE = 8
RATE_LOG10_MIN = -9.0
RATE_LOG10_MAX = 1.0
N_WEIGHT_BINS = int(round((WEIGHT_LOG10_MAX - WEIGHT_LOG10_MIN) * WEIGHT_BINS_PER_DECADE))
N_RATE_BINS = int(round((RATE_LOG10_MAX - RATE_LOG10_MIN) * RATE_BINS_PER_DECADE))
N_CELLS = N_WEIGHT_BINS * N_RATE_BINS

_F_COEF = np.array(
    [(-1) ** k * (k - 1) / math.factorial(k) for k in range(2, SERIES_TERMS)], dtype=float
)
_H_COEF = np.array([(-1) ** k / math.factorial(k) for k in range(2, SERIES_TERMS)], dtype=float)


def _f_terms(y: float) -> int:
    """How many leading terms of _F_COEF give F to double precision at every argument below y ≤ 1.

    For y < 1 the series of F alternates and its terms shrink (each is at most
    2/3 of the one before), so cutting it after k terms errs by less than the
    first term left out, |_F_COEF[k]|·y^(k+2); and F(y) > y²(1/2 − y/3) (its
    first two terms, for the same reason). So k terms are enough once
    |_F_COEF[k]|·y^k ≤ 2^−53·(1/2 − y/3), and what holds at y holds below it.
    """
    return next(k for k in range(1, len(_F_COEF))
                if abs(_F_COEF[k]) * y**k <= 2.0**-53 * (0.5 - y / 3.0))


_F_TERMS = np.array([_f_terms(2.0**-j) for j in range(27)])
"""_F_TERMS[j]: terms of F's series used for 2^−j−1 ≤ y < 2^−j; the last (2) for all y < 2^−26."""
_F_USERS = np.array([np.count_nonzero(_F_TERMS > k) for k in range(_F_TERMS[0])], dtype=np.uint8)
"""_F_USERS[k]: how many binades (from j = 0) use _F_COEF[k]."""


# --------------------------------------------------------------------------- validation


def _array(name: str, value, *, positive: bool = False, allow_inf: bool = False,
           allow_negative: bool = False) -> np.ndarray:
    """``value`` as a float array; ValueError naming ``name`` if NaN, infinite or out of range."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric, got {value!r}") from exc
    if np.isnan(arr).any():
        raise ValueError(f"{name} contains NaN")
    if not allow_inf and np.isinf(arr).any():
        raise ValueError(f"{name} must be finite")
    if positive and (arr <= 0).any():
        raise ValueError(f"{name} must be > 0, got {arr[arr <= 0].ravel()[0]!r}")
    if not allow_negative and not positive and (arr < 0).any():
        raise ValueError(f"{name} must be >= 0, got {arr[arr < 0].ravel()[0]!r}")
    return arr


def _vector(name: str, value, **kw) -> np.ndarray:
    arr = _array(name, value, **kw)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    return arr


def _same_length(**arrays: np.ndarray) -> None:
    lengths = {name: len(a) for name, a in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"mismatched lengths: {lengths}")


def _scalar(name: str, value, **kw) -> float:
    arr = _array(name, value, **kw)
    if arr.ndim != 0:
        raise ValueError(f"{name} must be a number, got shape {arr.shape}")
    return float(arr)


def _check_objective(objective: str) -> str:
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    return objective


def _result(arr: np.ndarray, *inputs) -> np.ndarray | float:
    """Return a float when every input was a scalar, else the array."""
    if all(np.ndim(x) == 0 for x in inputs):
        return float(arr)
    return arr


# --------------------------------------------------------------------------- the index curve


def _series(y: np.ndarray, coef: np.ndarray) -> np.ndarray:
    acc = np.zeros_like(y)
    for c in coef[::-1]:
        acc = acc * y + c
    return acc * y * y


def _f_series(y: np.ndarray) -> np.ndarray:
    """F's series at y < 1 over the _F_TERMS terms of each y's binade, in lib.lua's order.

    Sorted by binade, the elements that use _F_COEF[k] (those of the first
    _F_USERS[k] binades) come first; each sum starts as 0·y + its own last
    coefficient, as Lua's Horner loop starts there.
    """
    binade = np.minimum(-np.frexp(y)[1], len(_F_TERMS) - 1).astype(np.uint8)
    order = np.argsort(binade, kind="stable")
    ys = y[order]
    users = np.searchsorted(binade[order], _F_USERS).tolist()
    acc = np.zeros_like(ys)
    for k in range(len(users) - 1, -1, -1):
        head = acc[:users[k]]
        head *= ys[:users[k]]
        head += _F_COEF[k]
    out = np.empty_like(y)
    out[order] = acc * ys * ys
    return out


def index_curve(y) -> np.ndarray | float:
    """F(y) = 1 − (1 + y)e^{−y}: a page's index per unit weight after y = λ·t.

    The marginal value ∂T̄/∂f of seed 001 at f = λ/y (docs/MATH.md, seeds 001-002). For y < 1 the
    Taylor series Σ_{k≥2} (−1)^k (k−1) y^k/k! avoids the cancellation of the
    closed form, so F(y) ≈ y²/2 keeps full relative precision for tiny y. The
    series stops at the last term that can still matter in double precision:
    _F_TERMS[j] terms for y in [2^−j−1, 2^−j) (``_f_terms``), 18 just below 1,
    5 near y = 10^−3, so F costs less where optimal_y needs it for small c.
    """
    return _result(_index_curve(_array("y", y, allow_inf=True)), y)


def _index_curve(arr: np.ndarray) -> np.ndarray:
    out = np.ones_like(arr)
    small = arr < 1.0
    out[small] = _f_series(arr[small])
    mid = ~small & np.isfinite(arr)
    out[mid] = 1.0 - (1.0 + arr[mid]) * np.exp(-arr[mid])
    return out


def _excess(s: np.ndarray) -> np.ndarray:
    """e^{−s} − 1 + s, without cancellation for small s."""
    out = np.empty_like(s)
    small = s < 1.0
    out[small] = _series(s[small], _H_COEF)
    out[~small] = np.exp(-s[~small]) - 1.0 + s[~small]
    return out


def optimal_y(c) -> np.ndarray | float:
    """The y ≥ 0 with F(y) = 1 − (1 + y)e^{−y} = c: a page's optimal λ·t at c = ν/w.

    Seed 001's g(x) is 1/y at x = −c. Returns 0 for c <= 0 and inf for c >= 1.
    This is the exact iteration the engine's Lua code copies (no expm1/log1p):

    - c < SMALL_C (0.5): s = sqrt(2c), y = s(1 + s/3)  (series of F: y²/2 − y³/3);
      return it if s < TINY_S; else Newton steps on F(y) = c,
      y ← y − δ, δ = (F(y) − c) / (y e^{−y}), with F by its series when y < 1,
      at most NEWTON_STEPS of them, stopping after the first with |δ| ≤ NEWTON_TOL·y.
    - c >= SMALL_C: d = 1 − c (exact), L = log(d); y = −L, then twice
      y ← −L + log(1 + y); then NEWTON_STEPS times on φ(y) = y − log(1 + y) + L:
      y ← y − φ(y)(1 + y)/y.

    Why the first iteration may stop: Newton converges quadratically, and a step
    that starts at relative error r leaves about |1 − y|r²/2 (F''/F' = (1 − y)/y),
    at most r²/2 for y below y(SMALL_C) = 1.68; near the root δ/y is r. So after
    a step with δ/y ≤ 1e-8 the error is below 2^−53 relative and a further step
    would move y by rounding only. From the initial guess this takes 1 step for
    c < 3e-8, 2 up to c = 5e-4, 3 up to 0.08 and at most 4 up to SMALL_C,
    instead of NEWTON_STEPS everywhere. The second iteration keeps its fixed
    steps (3 or 4 would do): each costs one log, so the test saved little in Lua
    and made numpy's masked steps slower than the fixed ones.

    Relative accuracy about 1e-15 for every c in (0, 1). Near c = 1 the answer
    is ill-conditioned (dy = dc·e^{y}/y): a threshold that rounds to w loses the
    interval, which the engine's max_interval then bounds.
    """
    return _result(_optimal_y(_array("c", c, allow_inf=True, allow_negative=True)), c)


def _optimal_y(arr: np.ndarray) -> np.ndarray:
    out = np.zeros_like(arr)
    out[arr >= 1.0] = np.inf

    small = (arr > 0.0) & (arr < SMALL_C)
    cs = arr[small]
    s = np.sqrt(2.0 * cs)
    y = s * (1.0 + s / 3.0)
    live = np.flatnonzero(s >= TINY_S)
    for _ in range(NEWTON_STEPS):
        if not live.size:
            break
        yl = y[live]
        step = (_index_curve(yl) - cs[live]) / (yl * np.exp(-yl))
        y[live] = yl = yl - step
        live = live[np.abs(step) > NEWTON_TOL * yl]
    out[small] = y

    large = (arr >= SMALL_C) & (arr < 1.0)
    log_d = np.log(1.0 - arr[large])
    y = -log_d
    for _ in range(2):
        y = -log_d + np.log(1.0 + y)
    for _ in range(NEWTON_STEPS):
        y = y - (y - np.log(1.0 + y) + log_d) * (1.0 + y) / y
    out[large] = y
    return out


# --------------------------------------------------------------------------- objectives


def effective_weight(weight, rate, objective: str = "changes") -> np.ndarray | float:
    """The weight the index and the solvers use for ``objective`` (docs/MATH.md, seeds 001-002).

    ``"changes"``: w (seed 001's value of captured changes). ``"freshness"``:
    w/λ, because f·(w/λ)(1 − e^{−λ/f}) = w·(1 − e^{−λt})/(λt) is w times the
    time-averaged freshness of a page fetched every t = 1/f. A page that never
    changes (λ = 0) gets inf under freshness when w > 0 (its index is still 0).
    """
    _check_objective(objective)
    w = _array("weight", weight)
    lam = _array("rate", rate)
    if objective == "changes":
        out = np.broadcast_to(w, np.broadcast(w, lam).shape).astype(float)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(lam > 0, w / np.where(lam > 0, lam, 1.0), np.where(w > 0, np.inf, 0.0))
    return _result(np.asarray(out, dtype=float), weight, rate)


def objective_value(frequencies, weights, rates, objective: str = "changes") -> float:
    """Σ f_i·w_eff_i·(1 − e^{−λ_i/f_i}): the objective a frequency vector achieves.

    Seed 001's T̄ for ``"changes"``; for ``"freshness"`` this is Σ w_i times the
    time-averaged freshness of page i. Pages with f = 0 contribute 0, and so do
    pages with λ = 0 (under freshness they are always fresh: a constant w_i that
    no schedule changes, left out).
    """
    f = _vector("frequencies", frequencies, allow_inf=True)
    w = _vector("weights", weights)
    lam = _vector("rates", rates)
    _same_length(frequencies=f, weights=w, rates=lam)
    w_eff = np.asarray(effective_weight(w, lam, objective), dtype=float)
    ok = (f > 0) & (lam > 0)
    fo, lo, wo = f[ok], lam[ok], w_eff[ok]
    safe_f = np.where(np.isinf(fo), 1.0, fo)
    per_page = np.where(np.isinf(fo), wo * lo, fo * wo * -np.expm1(-lo / safe_f))
    return float(per_page.sum())


# --------------------------------------------------------------------------- the index


def whittle_index(x, u, a, cost=1.0) -> np.ndarray | float:
    """Seed 002's Whittle index γ(x) = (1/C)(η(x)((1 − a)x − u) + x) of a source in state x.

    η(x) = ceil(log⁺_a((u − (1 − a)x)/u)) (seed 002, Theorem). ``u`` is the
    inflow per period, ``a`` the decay per period, ``cost`` C the cost of a fetch.
    On the states x_n = u(1 − a^n)/(1 − a) reached n periods after a fetch the
    log ratio is n up to rounding; values within 1e-9 (relative) of an integer
    are snapped to it, so the result is exactly the n-period index
    w[1 − a^n(1 + n(1 − a))] with w = u/(1 − a). States must lie in
    [0, u/(1 − a)]; at the supremum u/(1 − a) (and wherever the ratio rounds to
    0) the limit x/C is returned.
    """
    xs = _array("x", x)
    us = _array("u", u, positive=True)
    as_ = _array("a", a, positive=True)
    cs = _array("cost", cost, positive=True)
    if (as_ >= 1).any():
        raise ValueError(f"a must be in (0, 1), got {as_[as_ >= 1].ravel()[0]!r}")
    xs, us, as_, cs = np.broadcast_arrays(xs, us, as_, cs)
    top = us / (1.0 - as_)
    if (xs > top * (1.0 + 1e-12)).any():
        bad = xs[xs > top * (1.0 + 1e-12)].ravel()[0]
        raise ValueError(f"x must be <= u/(1 - a) (the largest reachable state), got {bad!r}")
    ratio = (us - (1.0 - as_) * xs) / us
    out = np.array(xs / cs, dtype=float)
    inner = ratio > 0.0
    r, aa = ratio[inner], as_[inner]
    k = np.log(r) / np.log(aa)
    nearest = np.rint(k)
    snap = np.abs(k - nearest) <= 1e-9 * np.maximum(1.0, np.abs(nearest))
    eta = np.where(snap, nearest, np.ceil(k))
    eta = np.maximum(eta, 0.0)
    xi, ui = xs[inner], us[inner]
    out[inner] = (eta * ((1.0 - aa) * xi - ui) + xi) / cs[inner]
    return _result(out, x, u, a, cost)


def page_index(age, rate, weight, period=None, objective: str = "changes") -> np.ndarray | float:
    """A page's index as a function of the time since its last fetch (docs/MATH.md, seeds 001-002).

    Continuous (``period=None``): w_eff·F(λ·age) = w_eff[1 − e^{−λt}(1 + λt)].
    Discrete (seed 002 with fetch epochs every ``period`` T): the Whittle index
    γ(n) = w_eff[1 − a^n(1 + n(1 − a))], a = e^{−λT}, after n = floor(age/T)
    whole periods have elapsed (age within 1e-9 relative of a multiple of T
    counts as that multiple). Both are evaluated without cancellation, so tiny
    λt gives ≈ w(λt)²/2, never 0 or negative. A page with λ = 0 has index 0.
    """
    _check_objective(objective)
    t = _array("age", age, allow_inf=True)
    lam = _array("rate", rate)
    w = _array("weight", weight)
    w_eff = np.asarray(effective_weight(w, lam, objective), dtype=float)
    t, lam, w_eff = np.broadcast_arrays(t, lam, w_eff)
    out = np.zeros(t.shape)
    live = (lam > 0) & (w_eff > 0)
    if period is None:
        out[live] = w_eff[live] * index_curve(lam[live] * t[live])
    else:
        T = _scalar("period", period, positive=True)
        q = t[live] / T
        n = np.floor(q + 1e-9 * np.maximum(1.0, q))
        s = lam[live] * T
        ns = n * s
        with np.errstate(invalid="ignore"):
            tail = np.where(np.isinf(n), 0.0, n * np.exp(-ns) * _excess(s))
        out[live] = w_eff[live] * (np.asarray(index_curve(ns)) + tail)
    return _result(out, age, rate, weight)


def interval_for_threshold(nu, rate, weight, objective: str = "changes") -> np.ndarray | float:
    """The time t at which a page's continuous index reaches ν: t = y(ν/w_eff)/λ.

    The inverse of ``page_index`` (period=None). inf when w_eff <= ν (the page
    is not worth fetching at this threshold) or λ = 0 (it never changes);
    0 when ν <= 0 (fetches are free). Relative accuracy is that of
    ``optimal_y`` (≈ 1e-15) for the given ν.
    """
    _check_objective(objective)
    n = _array("nu", nu, allow_negative=True)
    lam = _array("rate", rate)
    w_eff = np.asarray(effective_weight(weight, lam, objective), dtype=float)
    n, lam, w_eff = np.broadcast_arrays(n, lam, w_eff)
    out = np.full(n.shape, np.inf)
    live = (lam > 0) & (w_eff > n)
    with np.errstate(divide="ignore", invalid="ignore"):
        c = np.where(np.isinf(w_eff[live]), 0.0, n[live] / w_eff[live])
    out[live] = np.asarray(optimal_y(c)) / lam[live]
    return _result(out, nu, rate, weight)


EXPLORE_C = 0.5351613099757834
"""c* = νλ*/w at which the freshness objective's planned interval y(νλ/w)/λ is shortest: with
F(y) = 1 − (1 + y)e^{−y} = c, d/dλ [y(νλ/w)/λ] = 0 gives c·y'(c) = y, i.e. y² e^{−y} = F(y),
e^{−y}(1 + y + y²) = 1, y* = 1.79328..., c* = y*² e^{−y*}; the interval there is
y*/λ* = 3.351 ν/w. Checked by a numerical minimisation in tests/test_policy.py."""
EXPLORE_CHANGES = 6
"""Changes after which a page that never showed an unchanged interval plans with its own
estimate again: from its 2nd change to its 6th, at most 5 fetches at the interval of λ*
(where a page changing at λ* shows a change with chance 1 − e^{−y*} = 0.83). Measured, not
derived: 16 cost the synthetic Poisson web of ``benchmarks/policy.py`` 1.5% freshness (fast
pages explored 15 times each) and 4 lost half the gain on the busy real histories."""
INTERVAL_FLOOR_SPAN = 100.0
"""The interval estimator plans with rates of at least 1 / (INTERVAL_FLOOR_SPAN · max_interval)
(lua/lib.lua MIN_RATE; Lua gets it through store/contract.py CONSTANTS, as EXPLORE_C and
EXPLORE_CHANGES); the other estimators, whose estimate is 0 after unchanged fetches,
with at least 1 / max_interval."""


MIN_CHANGE_CHANCE = 0.02
"""The least chance that a page changed since its last fetch, 1 − e^{−λt}, for a revisit to
be worth a fetch (issue 60): a page is never planned, nor fetched early, sooner than
``WORTH_Y``/λ after its last fetch. With the threshold at 0 (a budget larger than the pages
need) every page used to be due at ``min_interval``: 72 pages estimated to change once a day
were fetched every 73 s, all 304. At 0.02, at least one revisit in 50 is expected to find a
change; a page changing once a day waits 29 min, one changing every minute is not held back
(``min_interval`` binds first). Measured, not derived (benchmarks/web_like.py --quick, seed 0,
ours at 0.3 fetches/page/day, 0.9774 without the bound): 0.01 0.9774 and 0.02 0.9771, both
spending the whole budget; 0.05 0.9740, leaving 6% of it unspent (slow pages planned with a
chance below 5% gave up fetches the freshness objective valued). 0.03 fetches/page/day: 0.8691
with each."""
WORTH_Y = -math.log1p(-MIN_CHANGE_CHANCE)
"""λt at which the chance of a change reaches ``MIN_CHANGE_CHANCE`` (0.0202); the scripts get
the option's y_p in their header (``worth_y``, lua/lib_policy.lua ``lib.worth_wait``)."""


def worth_y(chance: float) -> float:
    """λt at which the chance of a change 1 − e^{−λt} reaches ``chance``: −log(1 − chance)
    (``WORTH_Y`` for ``MIN_CHANGE_CHANCE``); what the engine's scripts get in their header
    (``worth_y``) from the ``min_change_chance`` option."""
    return WORTH_Y if chance == MIN_CHANGE_CHANCE else -math.log1p(-chance)


def worth_interval(rate, min_interval: float, max_interval: float,
                   chance: float = MIN_CHANGE_CHANCE) -> np.ndarray | float:
    """The shortest interval at which a page of change ``rate`` is worth a fetch:
    max(``min_interval``, y/λ) with y = −log(1 − ``chance``) (``WORTH_Y`` for the default),
    at most ``max_interval`` (issue 60; docs/MATH.md "A fetch worth its token").

    Used as the lower bound of a page's planned interval (lua/lib_policy.lua
    ``lib.planned_interval``, which this mirrors to the bit), of its early fetches
    (lua/candidates.lua through ``lib.shortest_interval``) and of each cell's fetch rate in
    the threshold solve (``budget.cell_rates``), so that a budget larger than the pages are
    worth is left unspent instead of spent at ``min_interval``. λ = 0: ``max_interval``.
    """
    lam = _array("rate", rate)
    y = worth_y(chance)
    with np.errstate(divide="ignore"):
        t = np.where(lam > 0, y / np.where(lam > 0, lam, 1.0), np.inf)
    return _result(np.minimum(np.maximum(t, min_interval), max_interval), rate)


def source_max_interval(weight: float, max_interval: float) -> float:
    """The longest planned interval of a source (a sitemap or feed, issue 35): ``max_interval``
    / w for a weight w < 1, at most ``INTERVAL_FLOOR_SPAN`` times ``max_interval``.

    The ``max_interval`` floor keeps a page's estimate learning; a source's estimate only
    plans the source itself, and a source worth less than one page (the adapters weigh a
    sitemap 0.3 per page it lists) can save less than one page fetch per read. Under the floor
    every sitemap of a small host cost a page fetch per floor: on the web-like population
    (most hosts 1-3 pages) 22-28% of the budget at every budget (docs/BENCHMARKS.md). A source
    of weight >= 1 keeps a page's floor. Mirrors lua/lib_policy.lua ``lib.source_max_interval``.
    """
    return max_interval / max(min(weight, 1.0), 1.0 / INTERVAL_FLOOR_SPAN)


def source_min_interval(weight: float, min_interval: float, max_interval: float) -> float:
    """The shortest interval between two reads of a source read before (issue 35, item 4: one
    that covers few pages is probed at most once per ``max_interval``): ``max_interval`` for a
    weight w < 1, else ``min_interval`` as for a page.

    A source of weight < 1 lists fewer pages than a fetch of one page is worth (the adapters
    weigh a sitemap 0.3 per listed page: 1-3 pages). A read of it costs a page fetch and tells
    only which of those few pages changed; fetching them is what makes copies fresh. With a
    page's bounds such sitemaps were re-read every few days, mostly planned by their own
    freshness and the rest early on spare tokens: on the web-like population at 0.3
    fetch/page/day 1,336-1,877 reads a seed (8-11% of the fetches), 93-95% of them less than
    30 days apart (docs/BENCHMARKS.md). The bound holds for both: the planned interval
    (lua/lib_policy.lua ``lib.page_interval``) and early fetches (lua/candidates.lua), through
    ``lib.shortest_interval``, which this mirrors.
    """
    return max_interval if weight < 1.0 else min_interval


def explore_rate(rate: float, weight: float, nu: float, changes: int, unchanged_exposure: float,
                 objective: str = "freshness") -> float:
    """The rate a page of the ``interval`` estimator plans its next interval with (issue 35).

    A page whose observed intervals all saw a change (its unchanged exposure T0 holds less than
    one expected change: λ·T0 < 1) has only a lower bound on its rate; its estimate rests on
    the prior. Under the freshness objective a page faster than λ* = ``EXPLORE_C``·w/ν is
    planned at ever longer intervals, where it changes again, so the bound never moves: such
    a page plans with min(λ, λ*), the rate a fetch of it is worth most at, for 2 to
    ``EXPLORE_CHANGES`` changes. Optimism under uncertainty, one-sided: a slow page is not
    lifted. Mirrors lua/lib_policy.lua ``lib.explore_rate``.
    """
    _check_objective(objective)
    if (objective != "freshness" or not 2 <= changes <= EXPLORE_CHANGES or weight <= 0
            or nu <= 0 or rate * unchanged_exposure >= 1):
        return rate
    return min(rate, EXPLORE_C * weight / nu)


def frequency_for_threshold(nu, rate, weight, objective: str = "changes") -> np.ndarray | float:
    """f = λ/y(ν/w_eff) = 1/``interval_for_threshold``: seed 001's f* = λ·g(α/(Nw)).

    0 when w_eff <= ν or λ = 0; inf when ν <= 0 and the page has value.
    """
    t = np.asarray(interval_for_threshold(nu, rate, weight, objective), dtype=float)
    with np.errstate(divide="ignore"):
        out = 1.0 / t
    return _result(out, nu, rate, weight)


# --------------------------------------------------------------------------- seed 001: exact solver


def _freqs(nu, w_eff: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """Per-page f_i(ν) for ν > 0 (a number or one per page) and pages with finite
    w_eff > 0 and λ > 0 (callers filter)."""
    nu = np.broadcast_to(np.asarray(nu, dtype=float), rates.shape)
    out = np.zeros_like(rates)
    live = w_eff > nu
    with np.errstate(divide="ignore"):
        out[live] = rates[live] / _optimal_y(nu[live] / w_eff[live])
    return out

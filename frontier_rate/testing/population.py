"""The spread of change rates over a crawl's pages, with the pages that never changed counted.

Most pages of a real crawl do not change for months; a few change daily (issue 35). A
population prior says how change rates are spread over a group of pages (a host, a
namespace), so that a page with few fetches borrows from the others. The model is the
gamma-mixed Poisson process: page i changes at the times of a Poisson process of rate λ_i,
and the λ_i of a group are draws of Gamma(α, β) (shape α, rate β, mean α/β). A page
watched for an exposure E_i that showed k_i changes has the negative binomial marginal
likelihood with exposure (Lawless, *Negative binomial and mixed Poisson regression*,
Canadian Journal of Statistics 15, 1987, eq. 2.2; Greenwood and Yule 1920):

    log L_i = lgamma(α + k_i) − lgamma(α) − lgamma(k_i + 1) + α log β + k_i log E_i
              − (α + k_i) log(β + E_i).

A page that never changed (k_i = 0) enters with α log(β / (β + E_i)), the chance that it
stayed unchanged for E_i: it is right-censored (its first change lies beyond E_i), counted,
not dropped, and the longer it was watched the more it pulls the fit towards slow pages.
``fit_gamma`` maximises Σ c_i log L_i (c_i: how many pages share (k_i, E_i), so that a
histogram of pages over (changes, exposure) cells is fitted in O(cells)) by profiling: for
a fixed α the score in β, Σ c_i [α/β − (α + k_i)/(β + E_i)], falls from +∞ to a negative
value and has one root (bisection in log β); the profile likelihood in log α is then
maximised by golden-section search. ``moments`` is the moment estimator of Clayton and
Kaldor (*Empirical Bayes estimates of age-standardized relative risks*, Biometrics 43,
1987, eqs. 5-6), the start and a check.

With a change indicator per fetch (the engine's data: did the page change since the last
fetch) a changed interval of length τ is interval-censored: its likelihood 1 − e^{−λτ}
mixes to 1 − (β/(β + τ))^α. ``indicator_loglik`` is that likelihood of one page, exact by
inclusion and exclusion over its changed intervals (2^c terms, for c ≤ 16).

Given (α, β), a page's posterior is Gamma(α + k_i, β + E_i) (conjugacy): the prior is worth
α changes seen in β seconds. ``log_rate_prior`` gives the prior's mean and variance of
log λ, E[log λ] = ψ(α) − log β and Var[log λ] = ψ'(α), the terms of the engine's prior on
φ = log λ (lua/lib.lua ``update_estimate``).

Pure numpy and scipy.special (a test-only dependency, hence this module's place in
``frontier_rate.testing``; no runtime module imports it); no Redis. Checked against scipy.optimize on the same
likelihood and against simulated populations in tests/test_population.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import digamma, gammaln, polygamma

LOG_ALPHA_RANGE = (math.log(1e-3), math.log(1e4))
"""Where the shape is searched: from extremely spread rates to nearly equal ones."""


@dataclass(frozen=True)
class GammaPrior:
    """Gamma(alpha, beta) over change rates: shape, rate (per unit of the exposures)."""

    alpha: float
    beta: float
    loglik: float = math.nan
    pages: float = 0.0

    @property
    def mean(self) -> float:
        return self.alpha / self.beta

    def posterior_mean(self, changes: np.ndarray | float, exposure: np.ndarray | float
                       ) -> np.ndarray | float:
        """E[λ | k changes in exposure E] = (α + k) / (β + E)."""
        return (self.alpha + np.asarray(changes, dtype=float)) / (self.beta + np.asarray(exposure, dtype=float))


def _arrays(changes: Sequence[float] | np.ndarray, exposure: Sequence[float] | np.ndarray,
            counts: Sequence[float] | np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    k = np.asarray(changes, dtype=float)
    e = np.asarray(exposure, dtype=float)
    c = np.ones_like(k) if counts is None else np.asarray(counts, dtype=float)
    if k.shape != e.shape or k.shape != c.shape or k.ndim != 1:
        raise ValueError(f"changes, exposure and counts must be 1-D of one length, got shapes "
                         f"{k.shape}, {e.shape}, {c.shape}")
    if np.any(~np.isfinite(k)) or np.any(k < 0):
        raise ValueError(f"changes must be finite and >= 0, got {k[~(np.isfinite(k) & (k >= 0))][:3]}")
    if np.any(~np.isfinite(e)) or np.any(e <= 0):
        raise ValueError(f"exposure must be finite and > 0, got {e[~(np.isfinite(e) & (e > 0))][:3]}")
    if np.any(~np.isfinite(c)) or np.any(c < 0):
        raise ValueError(f"counts must be finite and >= 0, got {c[~(np.isfinite(c) & (c >= 0))][:3]}")
    keep = c > 0
    return k[keep], e[keep], c[keep]


def loglik(alpha: float, beta: float, changes: Sequence[float] | np.ndarray,
           exposure: Sequence[float] | np.ndarray, counts: Sequence[float] | np.ndarray | None = None
           ) -> float:
    """Σ c_i log L_i, the negative binomial likelihood with exposure (module docstring)."""
    k, e, c = _arrays(changes, exposure, counts)
    terms = (gammaln(alpha + k) - gammaln(alpha) - gammaln(k + 1) + alpha * math.log(beta)
             + k * np.log(e) - (alpha + k) * np.log(beta + e))
    return float((c * terms).sum())


def _beta_for(alpha: float, k: np.ndarray, e: np.ndarray, c: np.ndarray) -> float:
    """The root in β of the score Σ c [α/β − (α + k)/(β + E)] (bisection in log β)."""
    lo, hi = math.log(e.min()) - 60.0, math.log(e.max()) + 60.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        b = math.exp(mid)
        score = float((c * (alpha / b - (alpha + k) / (b + e))).sum())
        lo, hi = (mid, hi) if score > 0 else (lo, mid)
        if hi - lo < 1e-13:
            break
    return math.exp(0.5 * (lo + hi))


def fit_gamma(changes: Sequence[float] | np.ndarray, exposure: Sequence[float] | np.ndarray,
              counts: Sequence[float] | np.ndarray | None = None) -> GammaPrior | None:
    """Maximum-likelihood Gamma(α, β) of the pages' rates from their (changes, exposure),
    pages that never changed included (module docstring); None when no page changed (the
    likelihood then grows without bound as the rates go to 0: nothing to fit)."""
    k, e, c = _arrays(changes, exposure, counts)
    if c.sum() <= 0 or float((c * k).sum()) <= 0:
        return None

    def profile(log_alpha: float) -> tuple[float, float]:
        a = math.exp(log_alpha)
        b = _beta_for(a, k, e, c)
        return loglik(a, b, k, e, c), b

    lo, hi = LOG_ALPHA_RANGE
    golden = (math.sqrt(5.0) - 1.0) / 2.0
    x1, x2 = hi - golden * (hi - lo), lo + golden * (hi - lo)
    f1, f2 = profile(x1)[0], profile(x2)[0]
    while hi - lo > 1e-9:
        if f1 >= f2:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - golden * (hi - lo)
            f1 = profile(x1)[0]
        else:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + golden * (hi - lo)
            f2 = profile(x2)[0]
    best = 0.5 * (lo + hi)
    ll, b = profile(best)
    return GammaPrior(math.exp(best), b, ll, float(c.sum()))


def moments(changes: Sequence[float] | np.ndarray, exposure: Sequence[float] | np.ndarray,
            counts: Sequence[float] | np.ndarray | None = None) -> GammaPrior | None:
    """Clayton and Kaldor's moment estimator: mean m = Σk / ΣE; the variance of the rates
    v = Σ E_i (k_i/E_i − m)² / ΣE − m·N/ΣE (the spread of the observed rates less their
    Poisson noise), floored at m²/1e4; α = m²/v, β = m/v. None when no page changed."""
    k, e, c = _arrays(changes, exposure, counts)
    total_e, total_k, n = float((c * e).sum()), float((c * k).sum()), float(c.sum())
    if total_k <= 0:
        return None
    m = total_k / total_e
    spread = float((c * e * (k / e - m) ** 2).sum()) / total_e
    v = max(spread - m * n / total_e, m * m / 1e4)
    return GammaPrior(m * m / v, m / v, math.nan, n)


def log_rate_prior(prior: GammaPrior) -> tuple[float, float]:
    """(E[log λ], Var[log λ]) under Gamma(α, β): (ψ(α) − log β, ψ'(α))."""
    return float(digamma(prior.alpha) - math.log(prior.beta)), float(polygamma(1, prior.alpha))


def indicator_loglik(alpha: float, beta: float, unchanged: float,
                     changed: Sequence[float] | np.ndarray) -> float:
    """Log marginal likelihood of one page seen through change indicators: unchanged for a
    summed ``unchanged`` time and changed in each interval of ``changed``, its rate drawn
    from Gamma(α, β): log E[e^{−λ T0} Π_j (1 − e^{−λ τ_j})], by inclusion and exclusion,
    Σ_S (−1)^{|S|} (β / (β + T0 + Σ_{j∈S} τ_j))^α over the subsets S of the changed intervals."""
    tau = np.asarray(changed, dtype=float)
    if tau.size > 16:
        raise ValueError(f"indicator_loglik sums 2^c terms; c = {tau.size} changed intervals is over 16")
    if unchanged < 0 or np.any(tau <= 0):
        raise ValueError(f"unchanged must be >= 0 and changed intervals > 0, got {unchanged!r}, {tau}")
    total = 0.0
    for mask in range(1 << tau.size):
        picked = [j for j in range(tau.size) if mask >> j & 1]
        sign = -1.0 if len(picked) % 2 else 1.0
        total += sign * (beta / (beta + unchanged + float(tau[picked].sum()))) ** alpha
    return math.log(max(total, 1e-300))

"""Revisit planning from a survival curve: pages whose changes are not Poisson (issue 26).

A page is fetched at times independent of its changes ("blind sampling", Li,
Cline and Loguinov, IEEE/ACM ToN 25(1), 2017). After a fetch the crawler only
learns, at the next fetch τ later, whether the page changed in between. The
whole law of what it can observe is then one curve,

    S(τ) = P(no change in the τ after a fetch),

the survival of the *residual* time to the next change seen from a random
moment. For a stationary change process of mean rate λ, S(0) = 1, S is
non-increasing, and −S'(0) = λ (Palm–Khinchine: S(τ) = λ∫_τ^∞ Ḡ(u)du with Ḡ
the survival of the gaps between changes). Poisson changes give S = e^{−λτ};
changes in bursts give a curve that drops fast and then flattens.

**Freshness of a page revisited every t.** The copy fetched at s is fresh at
s + u exactly when no change fell in (s, s + u], so the time-averaged
freshness is

    φ(t) = (1/t)·∫₀ᵗ S(u) du = M(t)/t.

**One threshold (the Lagrangian of seed 001 / DESIGN §3, with S in place of
e^{−λτ}).** Maximise Σ w_i φ_i(t_i) subject to Σ 1/t_i = R. With f = 1/t the
value rate of page i is V(f) = w·f·M(1/f) and

    dV/df = w·[M(t) − t·S(t)] = w·∫₀ᵗ u·(−dS(u)) =: w·G(t).

G is non-decreasing in t whenever S is non-increasing (G'(t) = −t·S'(t) ≥ 0),
so V is concave in f, the stationarity condition w_i·G_i(t_i) = ν has one
solution per page, and ν is the one Lagrange multiplier that meets the budget
(``solve_threshold``). G(∞) = ∫₀^∞ S = E[residual time]: a page with
w·G(∞) ≤ ν is not worth fetching at this ν. For S = e^{−λu},
G(t) = (1 − (1 + λt)e^{−λt})/λ = F(λt)/λ, the existing policy's index curve
``policy.index_curve`` with the freshness weight w/λ (``policy.effective_weight``).
The same G is the Whittle index of a page whose only state is the time since
its last fetch: fetching at age a is worth it exactly when w·G(a) ≥ ν.

**Gamma-mixed Poisson (Lomax).** If a page's rate is Gamma(α, β)-distributed
(shape α, rate β: mean α/β), S(τ) = E[e^{−λτ}] = (1 + τ/β)^{−α}, the survival
of a Lomax law. Mean rate λ = α/β; α → ∞ with α/β fixed is Poisson. With
x = log(1 + t/β):

    M(t) = β·(e^{(1−α)x} − 1)/(1 − α)                (β·x at α = 1)
    G(t) = αβ·∫₀^x (e^s − 1)·e^{−αs} ds = β·e^{−αx}·D(x),
    D(x) = Σ_{n≥2} c_n·x^n/n!,  c_2 = α, c_{n+1} = α·(1 + c_n)
         = x·e^x·(e^{(α−1)x} − 1)/((α−1)x) − (e^x − 1)

(c_n = α(1 + α + … + α^{n−2}); expanding e^s − 1 and e^{α(x−s)} in the
integral gives the series, whose terms are all positive: it is used where
αx < 1, the closed form elsewhere). G(∞) = β/(α − 1) for
α > 1 and ∞ for α ≤ 1: a heavy enough tail makes every page worth a fetch now
and then.

numpy only, no Redis: the engine does not use this module yet.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

# ----------------------------------------------------------------------------- Lomax curve


def _phi(z: np.ndarray) -> np.ndarray:
    """(e^z − 1)/z, 1 at z = 0."""
    z = np.asarray(z, dtype=float)
    out = np.ones_like(z)
    nz = z != 0.0
    out[nz] = np.expm1(z[nz]) / z[nz]
    return out


def lomax_survival(tau, alpha, beta) -> np.ndarray:
    """S(τ) = (1 + τ/β)^{−α}."""
    tau, alpha, beta = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (tau, alpha, beta)))
    return np.exp(-alpha * np.log1p(tau / beta))


def lomax_integral(t, alpha, beta) -> np.ndarray:
    """M(t) = ∫₀ᵗ S(u) du = β·x·φ((1 − α)x), x = log(1 + t/β), φ(z) = (e^z − 1)/z."""
    t, alpha, beta = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (t, alpha, beta)))
    x = np.log1p(t / beta)
    with np.errstate(over="ignore", invalid="ignore"):
        out = beta * x * _phi((1.0 - alpha) * x)
    return np.where(np.isinf(t), np.where(alpha > 1.0, beta / np.maximum(alpha - 1.0, 1e-300), np.inf), out)


SERIES_TERMS = 40


def lomax_index(t, alpha, beta) -> np.ndarray:
    """G(t) = M(t) − t·S(t): a page's marginal freshness per unit weight at interval t.

    Positive-term series where αx < 1 (no cancellation for tiny t), the closed
    form elsewhere (module docstring)."""
    t, alpha, beta = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (t, alpha, beta)))
    t, alpha, beta = t.astype(float), alpha.astype(float), beta.astype(float)
    x = np.log1p(t / beta)
    out = np.empty_like(x)
    small = (alpha * x < 1.0) & (x < 1.0)
    xs, a_s = x[small], alpha[small]
    power = xs * xs / 2.0  # p_n = x^n/n! at n = 2
    term = a_s * power  # c_n·p_n, c_2 = α
    acc = term.copy()
    for n in range(3, SERIES_TERMS):  # c_n·p_n = α·(p_n + c_{n−1}·p_{n−1}·x/n): no α^n overflow
        power = power * xs / n
        term = a_s * (power + term * xs / n)
        acc += term
    out[small] = acc * np.exp(-a_s * xs)
    big = ~small & np.isfinite(x)
    xb, ab = x[big], alpha[big]
    with np.errstate(over="ignore", invalid="ignore"):
        d = xb * np.exp(xb) * _phi((ab - 1.0) * xb) - np.expm1(xb)
        out[big] = d * np.exp(-ab * xb)
        # far in the tail e^{-αx}·e^{αx} overflows: use G = M − tS directly
        bad = ~np.isfinite(out[big])
        if bad.any():
            tb = t[big][bad]
            out_b = (lomax_integral(tb, ab[bad], beta[big][bad])
                     - tb * lomax_survival(tb, ab[bad], beta[big][bad])) / beta[big][bad]
            tmp = out[big]
            tmp[bad] = out_b
            out[big] = tmp
    inf = np.isinf(x)
    out[inf] = np.where(alpha[inf] > 1.0, 1.0 / np.maximum(alpha[inf] - 1.0, 1e-300), np.inf)
    return beta * out


def lomax_freshness(t, alpha, beta) -> np.ndarray:
    """φ(t) = M(t)/t, the time-averaged freshness of a page fetched every t (1 at t = 0)."""
    t = np.asarray(t, dtype=float)
    m = lomax_integral(t, alpha, beta)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(t > 0, m / np.where(t > 0, t, 1.0), 1.0)


def invert_increasing(fn: Callable[[np.ndarray], np.ndarray], target: np.ndarray, lo: float, hi: float,
                      iters: int = 100) -> np.ndarray:
    """The t in [lo, hi] with fn(t) = target (fn non-decreasing), by bisection on log t, per element.
    lo where fn(lo) ≥ target, inf where fn(hi) < target."""
    target = np.asarray(target, dtype=float)
    a = np.full(target.shape, np.log(lo))
    b = np.full(target.shape, np.log(hi))
    f_hi = fn(np.exp(b))
    for _ in range(iters):
        m = 0.5 * (a + b)
        up = fn(np.exp(m)) < target
        a = np.where(up, m, a)
        b = np.where(up, b, m)
    out = np.exp(b)
    out = np.where(fn(np.full(target.shape, lo)) >= target, lo, out)
    return np.where(f_hi < target, np.inf, out)


def lomax_interval(c, alpha, beta, lo: float = 1e-9, hi: float = 1e15) -> np.ndarray:
    """The t with G(t) = c (c = ν/w): the planned interval of a Lomax page (inf if c ≥ G(∞))."""
    c, alpha, beta = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (c, alpha, beta)))
    return invert_increasing(lambda t: lomax_index(t, alpha, beta), c, lo, hi)


# ----------------------------------------------------------------------------- the threshold solve


def solve_threshold(rate_of: Callable[[np.ndarray], np.ndarray], host: np.ndarray, caps: np.ndarray,
                    budget: float, nu_lo: float = 1e-30, nu_hi: float = 1e30,
                    iters: int = 200) -> tuple[float, np.ndarray, np.ndarray]:
    """One threshold ν for the budget and one per capped host (DESIGN §3): page i of host h runs at
    f_i(ν_h) = ``rate_of``(ν per page)_i, ν_h = max(ν, τ_h), τ_h the threshold at which host h's
    pages alone sum to cap_h (0 when they stay below it at every ν ≥ nu_lo).

    ``rate_of`` must be non-increasing in ν page by page. Bisection on log ν (vectorised over
    hosts for the τ_h). Returns (ν, ν_h per host, f per page); ν = nu_lo when even ν = nu_lo
    spends less than the budget (every page at its largest rate, or its host at its cap).
    """
    host = np.asarray(host)
    caps = np.asarray(caps, dtype=float)
    hosts = len(caps)

    def host_totals(nu_h: np.ndarray) -> np.ndarray:
        return np.bincount(host, weights=rate_of(nu_h[host]), minlength=hosts)

    a = np.full(hosts, np.log(nu_lo))
    b = np.full(hosts, np.log(nu_hi))
    capped = host_totals(np.full(hosts, nu_lo)) > caps
    for _ in range(iters):
        m = 0.5 * (a + b)
        over = host_totals(np.exp(m)) > caps
        a = np.where(over, m, a)
        b = np.where(over, b, m)
    tau = np.where(capped, np.exp(b), 0.0)

    def total(nu: float) -> float:
        return float(rate_of(np.maximum(nu, tau)[host]).sum())

    lo, hi = np.log(nu_lo), np.log(nu_hi)
    if total(nu_lo) <= budget:
        nu = nu_lo
    else:
        for _ in range(iters):
            m = 0.5 * (lo + hi)
            if total(np.exp(m)) > budget:
                lo = m
            else:
                hi = m
        nu = float(np.exp(hi))
    nu_h = np.maximum(nu, tau)
    return nu, nu_h, rate_of(nu_h[host])

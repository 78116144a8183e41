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

**One threshold (the Lagrangian of seed 001 / docs/MATH.md, seeds 001-002, with S in place of
e^{−λτ}).** Maximise Σ w_i φ_i(t_i) subject to Σ 1/t_i = R. With f = 1/t the
value rate of page i is V(f) = w·f·M(1/f) and

    dV/df = w·[M(t) − t·S(t)] = w·∫₀ᵗ u·(−dS(u)) =: w·G(t).

G is non-decreasing in t whenever S is non-increasing (G'(t) = −t·S'(t) ≥ 0),
so V is concave in f, the stationarity condition w_i·G_i(t_i) = ν has one
solution per page, and ν is the one Lagrange multiplier that meets the budget
(``solve_threshold``). G(∞) = ∫₀^∞ S = E[residual time]: a page with
w·G(∞) ≤ ν is not worth fetching at this ν. For S = e^{−λu},
G(t) = (1 − (1 + λt)e^{−λt})/λ = F(λt)/λ, the existing policy's index curve
``math.index.index_curve`` with the freshness weight w/λ (``math.index.effective_weight``).
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
        if not (term > 1e-17 * acc).any():  # the terms only shrink from here (αx < 1, x < 1)
            break
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
    """One threshold ν for the budget and one per capped host (docs/MATH.md, seeds 001-002): page i of host h runs at
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


# ----------------------------------------------------------------------------- learning (α, β) online


def gamma_observe(a, b, tau, changed) -> tuple[np.ndarray, np.ndarray]:
    """Gamma(a, b) belief about a page's rate after one (interval τ, changed?) observation.

    Unchanged: the likelihood e^{−λτ} is conjugate, b' = b + τ. Changed: the
    likelihood 1 − e^{−λτ} turns the posterior into a difference of two gammas;
    it is replaced by the gamma with the same mean and variance (assumed-density
    filtering). With r = b/(b + τ) and q_k = (1 − r^{a+k})/(1 − r^a):
    E[λ] = (a/b)·q_1, E[λ²] = (a(a + 1)/b²)·q_2, a' = E²/Var, b' = E/Var.
    1 − r^{a+k} is −expm1((a + k)·log r): no cancellation for small τ.
    O(1) per observation; the state is (a, b) per page.
    """
    a, b, tau, changed = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (a, b, tau, changed)))
    log_r = -np.log1p(tau / b)
    with np.errstate(divide="ignore", invalid="ignore"):
        z0 = -np.expm1(a * log_r)
        q1 = -np.expm1((a + 1.0) * log_r) / z0
        q2 = -np.expm1((a + 2.0) * log_r) / z0
        mean = a / b * q1
        second = a * (a + 1.0) / (b * b) * q2
        var = second - mean * mean
        ok = (var > 0) & np.isfinite(var) & (z0 > 0)
        a_c = np.where(ok, mean * mean / np.where(ok, var, 1.0), a + 1.0)
        b_c = np.where(ok, mean / np.where(ok, var, 1.0), b + tau)
    hit = changed > 0
    return np.where(hit, a_c, a), np.where(hit, b_c, b + tau)


def gamma_discount(a, b, elapsed, memory) -> tuple[np.ndarray, np.ndarray]:
    """Forget old evidence (West and Harrison's discount): (a, b)·δ with δ = e^{−elapsed/memory}.

    The mean a/b stays; the shape a (how sure the belief is) shrinks, so the
    predictive curve (1 + τ/b)^{−a} keeps a heavy tail on pages whose rate drifts.
    memory = inf keeps everything (a stationary Poisson rate)."""
    d = np.exp(-np.asarray(elapsed, dtype=float) / memory)
    return np.asarray(a) * d, np.asarray(b) * d


# ----------------------------------------------------------------------------- tabulated curves


def interval_from_table(table: np.ndarray, grid: np.ndarray, c) -> np.ndarray:
    """Row by row, the t with G(t) = c from G tabulated at ``grid`` (rows non-decreasing),
    linear in log t between grid points; grid[0] where c ≤ G(grid[0]), inf where c > G(grid[-1])."""
    table = np.asarray(table, dtype=float)
    n, k = table.shape
    c = np.broadcast_to(np.asarray(c, dtype=float), (n,))
    count = (table < c[:, None]).sum(axis=1)
    out = np.full(n, np.inf)
    out[count == 0] = grid[0]
    mid = (count > 0) & (count < k)
    rows = np.flatnonzero(mid)
    j = count[mid]
    g0, g1 = table[rows, j - 1], table[rows, j]
    frac = np.clip((c[mid] - g0) / np.maximum(g1 - g0, 1e-300), 0.0, 1.0)
    lg = np.log(grid)
    out[mid] = np.exp(lg[j - 1] + frac * (lg[j] - lg[j - 1]))
    return out


# ----------------------------------------------------------------------------- pooled non-parametric curves


def pava(values, weights) -> np.ndarray:
    """Weighted least-squares non-decreasing fit (pool adjacent violators).

    With values = changed fractions per interval bin and weights = counts, this is
    the maximum-likelihood estimate of P(changed within τ) for current-status data
    (Groeneboom and Wellner 1992): the non-parametric estimate of 1 − S(τ) from
    (τ, changed?) pairs alone."""
    v = np.asarray(values, dtype=float)
    w = np.asarray(weights, dtype=float)
    means, wts, sizes = [], [], []
    for x, wt in zip(v, w, strict=True):
        if wt <= 0:
            means.append(np.nan)
            wts.append(0.0)
            sizes.append(1)
            continue
        means.append(x)
        wts.append(wt)
        sizes.append(1)
        while True:  # merge back over empty blocks and violators
            j = len(means) - 1
            k = j - 1
            while k >= 0 and wts[k] == 0:
                k -= 1
            if k < 0 or means[k] <= means[j]:
                break
            tot = wts[k] + wts[j]
            merged = (means[k] * wts[k] + means[j] * wts[j]) / tot
            size = sum(sizes[k:])
            del means[k:], wts[k:], sizes[k:]
            means.append(merged)
            wts.append(tot)
            sizes.append(size)
    out = np.repeat(np.array(means, dtype=float), sizes)
    # empty bins take the value of the fitted bin before them (0 before the first)
    filled = np.where(np.isnan(out), np.nan, out)
    last = 0.0
    for i, x in enumerate(filled):
        if np.isnan(x):
            filled[i] = last
        else:
            last = x
    return filled


def linear_curve_index(knots, surv, t) -> np.ndarray:
    """G(t) = ∫₀ᵗ u·(−dS(u)) for S linear between (knots[j], surv[j]) (knots[0] = 0,
    surv[0] = 1, surv non-increasing) and flat after the last knot."""
    x = np.asarray(knots, dtype=float)
    s = np.asarray(surv, dtype=float)
    t = np.asarray(t, dtype=float)
    slope = (s[:-1] - s[1:]) / np.diff(x)  # ≥ 0: density of the change time on each segment
    lo, hi = x[:-1], x[1:]
    u = np.clip(t[..., None], lo, hi)
    return (slope * (u * u - lo * lo) / 2.0).sum(axis=-1)


def linear_curve_integral(knots, surv, t) -> np.ndarray:
    """M(t) = ∫₀ᵗ S(u) du for the same piecewise-linear S."""
    x = np.asarray(knots, dtype=float)
    s = np.asarray(surv, dtype=float)
    t = np.asarray(t, dtype=float)
    lo, hi = x[:-1], x[1:]
    slope = (s[1:] - s[:-1]) / np.diff(x)
    u = np.clip(t[..., None], lo, hi)
    seg = s[:-1] * (u - lo) + slope * (u - lo) ** 2 / 2.0
    return seg.sum(axis=-1) + s[-1] * np.maximum(t - x[-1], 0.0)


class PooledCurve:
    """P(unchanged τ after a fetch) pooled over a group of pages (a host, a cluster), on
    normalised time x = λ̂·τ (λ̂ the page's own rate estimate when the interval began), from
    the (x, changed?) pairs alone: changed fractions per log-spaced bin of x, with
    ``prior_weight`` pseudo-observations per bin from the Poisson curve 1 − e^{−x}, made
    non-decreasing by ``pava``. O(bins) state per group, O(1) per observation. A page of
    rate λ̂ then plans with S(τ) = S_pool(λ̂·τ): G(t) = G_pool(λ̂t)/λ̂."""

    def __init__(self, x_min: float = 1e-3, x_max: float = 1e3, bins_per_decade: int = 4,
                 prior_weight: float = 2.0) -> None:
        decades = np.log10(x_max / x_min)
        self.edges = x_min * 10.0 ** (np.arange(int(round(decades * bins_per_decade)) + 1) / bins_per_decade)
        self.centre = np.sqrt(self.edges[:-1] * self.edges[1:])
        k = self.centre.size
        self.n = np.zeros(k)
        self.c = np.zeros(k)
        self.prior_weight = prior_weight

    def add(self, x: float, changed: bool, weight: float = 1.0) -> None:
        j = int(np.clip(np.searchsorted(self.edges, x) - 1, 0, self.centre.size - 1))
        self.n[j] += weight
        self.c[j] += weight * float(changed)

    def decay(self, factor: float) -> None:
        self.n *= factor
        self.c *= factor

    def curve(self) -> tuple[np.ndarray, np.ndarray]:
        """(knots, S at the knots): knot 0 at x = 0 with S = 1, then the bin centres."""
        p0 = -np.expm1(-self.centre)
        w = self.n + self.prior_weight
        frac = (self.c + self.prior_weight * p0) / w
        p = np.clip(pava(frac, w), 0.0, 1.0)
        return np.concatenate([[0.0], self.centre]), np.concatenate([[1.0], 1.0 - p])

    def observations(self) -> float:
        return float(self.n.sum())


SHAPES = np.concatenate([0.05 * 1.5 ** np.arange(20), [np.inf]])
"""Candidate Lomax shapes α for ``fit_shape`` (0.05 to ~110, then Poisson)."""


def fit_shape(x, n, c, penalty: float = 0.5) -> float:
    """The Lomax shape α of a group's curve in normalised time, S(x) = (1 + x/α)^{−α}
    (mean rate 1; α = inf is Poisson, e^{−x}), by maximum likelihood over ``SHAPES`` from
    binned current-status data: n observations at normalised interval x, c of them changed.

    Poisson is kept unless a finite α gains more than ``penalty``·log(Σn) in
    log-likelihood (a BIC-like guard: one more parameter)."""
    x, n, c = (np.asarray(v, dtype=float) for v in (x, n, c))
    used = n > 0
    x, n, c = x[used], n[used], c[used]
    if not x.size:
        return float("inf")
    a = SHAPES[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        log_s = np.where(np.isinf(a), -x, -a * np.log1p(x / np.where(np.isinf(a), 1.0, a)))
    log_p = np.log(-np.expm1(log_s))
    ll = (c * log_p + (n - c) * log_s).sum(axis=1)
    best = int(np.argmax(ll))
    if ll[best] - ll[-1] <= penalty * np.log(n.sum()):
        return float("inf")
    return float(SHAPES[best])


def combined_shape(a_page, alpha_group) -> np.ndarray:
    """Shape of the curve when a page's rate is uncertain (Gamma shape a: squared CV 1/a) and
    its group's changes are over-dispersed in time (Lomax shape α): squared CVs of independent
    gamma factors combine as (1 + 1/a)(1 + 1/α) − 1, and the result is read as one shape."""
    inv = (1.0 + 1.0 / np.asarray(a_page, dtype=float)) * (1.0 + 1.0 / np.asarray(alpha_group, dtype=float)) - 1.0
    with np.errstate(divide="ignore"):
        return 1.0 / inv


# ----------------------------------------------------------------------------- curves from known change times


def gaps_index(gaps, exposure: float, t) -> np.ndarray:
    """G(t) of the residual curve seen from a uniformly random moment of a known history.

    With the history's gaps g_k between changes (the stretch before the first
    change counts as a gap; the stretch after the last change, which no change
    closes, is left out of ``gaps`` but counted in ``exposure`` = the history's
    length T): S(u) = (1/T)·Σ_k (g_k − u)⁺ + (tail)/T, so −dS(u) = (1/T)·#{g_k > u}
    and G(t) = ∫₀ᵗ u·(−dS(u)) = (1/(2T))·Σ_k min(g_k, t)². A hindsight curve (it
    needs every change time): the benchmark's bound for plans from a perfect curve."""
    g = np.asarray(gaps, dtype=float)
    t = np.asarray(t, dtype=float)
    return (np.minimum(g[:, None], t.ravel()[None, :]) ** 2).sum(axis=0).reshape(t.shape) / (2.0 * exposure)


def gaps_integral(gaps, exposure: float, t) -> np.ndarray:
    """M(t) = ∫₀ᵗ S(u) du for the same curve: (1/T)·Σ_k (g_k·m_k − m_k²/2) + tail·t/T,
    m_k = min(g_k, t), tail = T − Σ g_k."""
    g = np.asarray(gaps, dtype=float)
    t = np.asarray(t, dtype=float)
    m = np.minimum(g[:, None], t.ravel()[None, :])
    tail = exposure - g.sum()
    body = (g[:, None] * m - m * m / 2.0).sum(axis=0).reshape(t.shape)
    return (body + tail * t) / exposure

"""The population prior (frontier_rate.testing.population) against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, optimize, stats

from frontier_rate.testing import population


def _simulated(seed: int, n: int = 4000, alpha: float = 0.4, beta: float = 40.0):
    rng = np.random.default_rng(seed)
    lam = rng.gamma(alpha, 1.0 / beta, n)
    exposure = rng.uniform(20.0, 180.0, n)
    return lam, rng.poisson(lam * exposure).astype(float), exposure


def test_loglik_is_the_negative_binomial_of_scipy():
    # NB with n = alpha, p = beta / (beta + E): the gamma-Poisson marginal (Greenwood and Yule)
    k, e = np.array([0.0, 1.0, 3.0, 40.0]), np.array([10.0, 50.0, 100.0, 7.0])
    a, b = 0.7, 12.0
    expected = stats.nbinom.logpmf(k, a, b / (b + e)).sum()
    assert population.loglik(a, b, k, e) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fit_matches_scipy_optimizer_on_the_same_likelihood(seed):
    _, k, e = _simulated(seed)
    fit = population.fit_gamma(k, e)

    def nll(theta):
        return -population.loglik(math.exp(theta[0]), math.exp(theta[1]), k, e)

    ref = optimize.minimize(nll, x0=[0.0, math.log(10.0)], method="Nelder-Mead",
                            options={"xatol": 1e-10, "fatol": 1e-10, "maxiter": 20000})
    assert fit.alpha == pytest.approx(math.exp(ref.x[0]), rel=1e-4)
    assert fit.beta == pytest.approx(math.exp(ref.x[1]), rel=1e-4)
    assert fit.loglik >= -ref.fun - 1e-6


def test_fit_recovers_a_simulated_population_and_counts_the_unchanged_pages():
    _, k, e = _simulated(7, n=20000)
    fit = population.fit_gamma(k, e)
    assert fit.alpha == pytest.approx(0.4, rel=0.1)
    assert fit.mean == pytest.approx(0.4 / 40.0, rel=0.05)
    # dropping the pages that never changed (the censored ones) biases the mean upwards
    changed = k > 0
    naive = population.fit_gamma(k[changed], e[changed])
    assert naive.mean > 1.5 * fit.mean


def test_grouped_counts_equal_repeated_pages():
    k, e = np.array([0.0, 2.0, 5.0]), np.array([30.0, 30.0, 60.0])
    grouped = population.fit_gamma(k, e, counts=[50, 7, 3])
    flat = population.fit_gamma(np.repeat(k, [50, 7, 3]), np.repeat(e, [50, 7, 3]))
    assert grouped.alpha == pytest.approx(flat.alpha, rel=1e-6)
    assert grouped.beta == pytest.approx(flat.beta, rel=1e-6)


def test_moments_close_to_the_ml_fit_and_nothing_to_fit_without_changes():
    _, k, e = _simulated(3, n=20000)
    mom, ml = population.moments(k, e), population.fit_gamma(k, e)
    assert mom.mean == pytest.approx(ml.mean, rel=0.02)
    assert mom.alpha == pytest.approx(ml.alpha, rel=0.3)
    assert population.fit_gamma([0, 0], [10, 20]) is None
    assert population.moments([0, 0], [10, 20]) is None
    with pytest.raises(ValueError, match="exposure"):
        population.fit_gamma([1], [0.0])


def test_log_rate_prior_against_numerical_integration():
    prior = population.GammaPrior(0.6, 30.0)
    mean, var = population.log_rate_prior(prior)
    dist = stats.gamma(0.6, scale=1 / 30.0)
    m = integrate.quad(lambda x: math.log(x) * dist.pdf(x), 0, np.inf, limit=200)[0]
    v = integrate.quad(lambda x: (math.log(x) - m) ** 2 * dist.pdf(x), 0, np.inf, limit=200)[0]
    assert mean == pytest.approx(m, rel=1e-6)
    assert var == pytest.approx(v, rel=1e-5)
    assert prior.posterior_mean(3, 100.0) == pytest.approx(3.6 / 130.0)


def test_indicator_loglik_against_numerical_integration():
    a, b, t0, taus = 0.8, 20.0, 35.0, [3.0, 9.0, 1.5]
    dist = stats.gamma(a, scale=1 / b)

    def integrand(lam):
        return math.exp(-lam * t0) * np.prod([-math.expm1(-lam * t) for t in taus]) * dist.pdf(lam)

    expected = integrate.quad(integrand, 0, np.inf, limit=400)[0]
    assert population.indicator_loglik(a, b, t0, taus) == pytest.approx(math.log(expected), rel=1e-6)

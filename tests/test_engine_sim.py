"""The engine on a virtual clock against pages with known Poisson change rates.

Checks that the estimates the engine's Lua code computes are consistent
(seed 004's estimators, fed through next_requests/observe), that they equal
frontier_rate.math.estimators step by step, and that the threshold the engine
solves from its Redis aggregates matches an exact per-page solve.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from redis_servers import both_servers  # noqa: F401, I001  (every test on both script paths)

from frontier_rate import Frontier
from frontier_rate.math.budget import solve_threshold
from frontier_rate.math.cells import cells_from_pages
from frontier_rate.math.estimators import make_estimator
from frontier_rate.math.index import (
    _F_TERMS,
    EXPLORE_CHANGES,
    INTERVAL_FLOOR_SPAN,
    WORTH_Y,
    effective_weight,
    explore_rate,
    index_curve,
    interval_for_threshold,
    optimal_y,
    source_max_interval,
    source_min_interval,
    worth_interval,
)
from frontier_rate.store import scripts as store
from frontier_rate.store.wire import (
    BETA,
    ETA,
    F_SOURCE,
    INTERVAL_MAX_STEP,
    INTERVAL_PRIOR_INFO,
    OMEGA,
)


def simulate(frontier: Frontier, rates: dict[str, float], fetches: int, *, seed: int,
             dt: float = 0.5, trace: bool = False, max_steps: int = 20000):
    """Crawl ``rates`` (url -> Poisson change rate) until every page has ``fetches`` fetches.

    The crawler is punctual: a page handed out at grid time t >= due is
    reported as fetched at its due time, so the realised intervals are exactly
    the engine's draws; at each grid time it asks again until nothing is due. With ``trace`` it records per page the
    (changed, interval, p) of every observation (p read from the page before
    the observe, i.e. the rate the engine drew that interval with).
    """
    rng = random.Random(seed)
    version = dict.fromkeys(rates, 0)
    last = {}
    counts = dict.fromkeys(rates, 0)
    history: dict[str, list] = {url: [] for url in rates}
    t = 0.0
    for _ in range(max_steps):
        if min(counts.values()) >= fetches:
            break
        while leases := frontier.next_requests(1000, now=t):
            batch = []
            for d in leases:
                at = d.due
                assert at <= t, "a page was handed out before it was due"
                if d.url in last:
                    tau = at - last[d.url]
                    if rng.random() < -math.expm1(-rates[d.url] * tau):
                        version[d.url] += 1
                    if trace:
                        history[d.url].append([None, tau, frontier.page(d.url)["p"]])
                last[d.url] = at
                batch.append((d, {"fingerprint": f"{d.url}#{version[d.url]}",
                                  "fetched_at": at}))
            for (d, _), obs in zip(batch, frontier.observe_many(batch), strict=True):
                assert obs.accepted
                counts[d.url] += 1
                if trace and counts[d.url] > 1:
                    history[d.url][-1][0] = int(obs.changed)
        t = max(t + dt, frontier.next_due_time() or t)
    else:
        raise AssertionError(f"not every page reached {fetches} fetches: {counts}")
    return history


def make_rates(n: int, seed: int, lo: float = 1.0, hi: float = 10.0) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    lam = np.exp(rng.uniform(math.log(lo), math.log(hi), n))
    return {f"http://h{i}.example/page": float(x) for i, x in enumerate(lam)}


@pytest.mark.parametrize("estimator", ["lln", "sa", "sam", "interval"])
def test_estimates_converge_to_true_rates(redis_url, namespace, estimator):
    """20 pages, 1000+ fetches each: mean(estimate/truth) within 5% of 1.

    Rates are log-uniform in [2, 10]/s; the planned intervals are bounded to
    [0.15, 0.25] s (so the policy still sets them, but no page starves while
    its estimate is low), i.e. p ∈ [4, 6.7]. The indicator-only Cramér-Rao
    bound (docs/MATH.md, seed 004) gives a relative standard deviation sqrt((Δ+p)²/(pΔk))
    ≤ 7% per page at k = 1000; SA/SAM are within a small factor of it.
    Averaged over 20 pages that is ~1.5-3%, so 5% allows > 2σ of noise, while
    a biased estimator (the naive one is biased by p/(Δ+p) ≈ 0.5 here) fails
    by far.
    """
    rates = make_rates(20, seed=7, lo=2.0, hi=10.0)
    f = Frontier(redis_url, namespace=namespace, estimator=estimator, objective="changes",
                 budget=100.0, min_host_delay=0.0, min_interval=0.15, max_interval=0.25,
                 lease_timeout=1e6, seed=11, prior_rate=1.0, fill_budget=False)
    f.add_many(list(rates), now=0.0)
    simulate(f, rates, 1000, seed=3)
    ratios = [f.page(url)["estimate"] / lam for url, lam in rates.items()]
    assert abs(np.mean(ratios) - 1.0) < 0.05, ratios


@pytest.mark.parametrize("estimator", ["lln", "sa", "sam", "interval"])
def test_lua_estimators_equal_python(redis_url, namespace, estimator):
    """The Lua update of every engine estimator equals frontier_rate.math.estimators to 1e-9."""
    rates = make_rates(4, seed=5)
    f = Frontier(redis_url, namespace=namespace, estimator=estimator, objective="changes",
                 budget=20.0, min_host_delay=0.0, min_interval=0.1, max_interval=0.5,
                 lease_timeout=1e6, seed=2, prior_rate=1.0, fill_budget=False)
    f.add_many(list(rates), now=0.0)
    history = simulate(f, rates, 150, seed=4, trace=True)
    for url, steps in history.items():
        est = make_estimator(estimator, x0=f.prior_rate, prior_info=INTERVAL_PRIOR_INFO,
                             max_step=INTERVAL_MAX_STEP, eta=ETA, beta=BETA, omega=OMEGA)
        for changed, tau, p in steps:
            est.update(changed, interval=tau, p=p)
        assert sum(c for c, _, _ in steps) > 5, "the trace should contain changes"
        engine = f.page(url)["estimate"]
        assert engine == pytest.approx(est.estimate, rel=1e-9, abs=1e-12), url


LIB_LOOP = """
local fmt, index_curve, optimal_y = lib.fmt, lib.index_curve, lib.optimal_y
local planned_interval = lib.planned_interval
local out, n = {}, tonumber(ARGV[H + 1])
for i = H + 2, #ARGV, n do
  local a, b, c = tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  out[#out + 1] = fmt(%s)
end
return out
"""


def lib_eval(client, frontier: Frontier, expr: str, *columns) -> np.ndarray:
    """Lua ``expr`` inside lib.lua on a, b, c = each row of ``columns``, run in Redis."""
    script = store._read("lib.lua") + LIB_LOOP % expr
    rows = [repr(float(x)) for row in zip(*columns, strict=True) for x in row]
    out = client.eval(script, 5, *frontier.keys.shard_keys(0), *frontier._header(0.0),
                      len(columns), *rows)
    return np.array([float(x) for x in out])


def test_lua_optimal_y_and_index_curve_equal_python(redis_client, redis_url, namespace):
    """lib.lua's index_curve, optimal_y and planned_interval against policy's, c across (0, 1).

    Below y = 1 F is the same products and sums on both sides, so it is equal
    to the bit; the rest also uses exp and log, which Redis takes from libm
    and numpy from its own code (they can differ in the last bit), so 1e-15.
    """
    f = Frontier(redis_url, namespace=namespace, objective="changes", min_interval=1.0,
                 max_interval=1e5)
    assert redis_client.eval(store._read("lib.lua") + "\nreturn F_TERMS", 5,
                             *f.keys.shard_keys(0), *f._header(0.0)) == list(_F_TERMS)

    ys = np.concatenate([np.logspace(-12, 0, 1500, endpoint=False), np.linspace(1, 40, 200)])
    lua_f = lib_eval(redis_client, f, "index_curve(a)", ys)
    py_f = index_curve(ys)
    assert np.array_equal(lua_f[ys < 1], py_f[ys < 1])
    np.testing.assert_allclose(lua_f, py_f, rtol=1e-15, atol=0)

    cs = np.concatenate([np.logspace(-14, np.log10(0.4999), 700), np.linspace(0.001, 0.999, 500),
                         1 - np.logspace(-1, -13, 200)])
    np.testing.assert_allclose(lib_eval(redis_client, f, "optimal_y(a)", cs), optimal_y(cs),
                               rtol=1e-15, atol=0)

    rng = np.random.default_rng(3)
    w = np.exp(rng.uniform(-3, 3, cs.size))
    lam = np.exp(rng.uniform(-9, 0, cs.size))
    nu = cs * w
    # bounded below by the wait after which a fetch is worth it (issue 60): WORTH_Y / λ
    worth = np.asarray(worth_interval(lam, f.min_interval, f.max_interval))
    assert (worth > f.min_interval).sum() > 100, "the floor should bind for some pages"
    expect = np.minimum(np.maximum(interval_for_threshold(nu, lam, w), worth),
                        f.max_interval)
    np.testing.assert_allclose(lib_eval(redis_client, f, "planned_interval(a, b, c)", w, lam, nu),
                               expect, rtol=1e-15, atol=0)


def test_resolve_matches_exact_per_page_solve(redis_url, namespace):
    """ν from the Redis cell aggregates is within 1% of the exact per-page solve.

    The exact solve treats every page as its own cell (solve_threshold on
    one row per page), so it differs from the engine's only by the clustering
    into log-spaced cells (8 per decade in weight and in rate).
    """
    rng = np.random.default_rng(1)
    n = 400
    f = Frontier(redis_url, namespace=namespace, estimator="lln", objective="freshness",
                 budget=1000.0, min_host_delay=0.0, min_interval=1.0, max_interval=1e5,
                 seed=1, prior_rate=0.01)
    weights = rng.pareto(1.5, n) + 0.1
    urls = [f"http://s{i}.example/{i}" for i in range(n)]
    f.add_many([(u, float(w)) for u, w in zip(urls, weights, strict=True)], now=0.0)
    rates = dict(zip(urls, make_rates(n, seed=9, lo=1e-3, hi=1e-1).values(), strict=True))
    version, last, t = dict.fromkeys(urls, 0), {}, 0.0
    for _ in range(40):  # warm-up: every page gets a few observations
        batch = []
        for d in f.next_requests(1000, now=t):
            if d.url in last and rng.random() < -math.expm1(-rates[d.url] * (t - last[d.url])):
                version[d.url] += 1
            last[d.url] = t
            batch.append((d, {"fingerprint": str(version[d.url]), "fetched_at": t}))
        f.observe_many(batch)
        t = max(t + 1.0, f.next_due_time() or t)
    f.set_budget(5.0, now=t)
    nu = f.stats(now=t)["nu"]
    pages = list(f.iter_pages())
    assert len(pages) == n
    lam = np.array([max(p["estimate"], 1.0 / f.max_interval) for p in pages])
    w = np.array([p["weight"] for p in pages])
    assert len({round(x, 12) for x in lam}) > 20, "estimates should be spread out"
    # the incrementally kept aggregates are exactly the cells of the pages' (w, λ)
    reference = cells_from_pages(w, lam)
    cells = f.cells()
    assert set(cells) == set(np.flatnonzero(reference[:, 0]))
    for cell, row in cells.items():
        assert row == pytest.approx(tuple(reference[cell]), rel=1e-9)
    exact = solve_threshold(np.column_stack([np.ones(n), lam, w]), f.budget,
                                   f.min_interval, f.max_interval, "freshness")
    assert exact.status == "ok" and nu > 0
    assert nu == pytest.approx(exact.nu, rel=0.01)


def test_lua_explore_rate_and_rate_floor_equal_python(redis_client, redis_url, namespace):
    """lib.explore_rate against explore_rate, and lib.plan_rate's floor for the interval
    estimator (1 / (INTERVAL_FLOOR_SPAN max_interval)) against lln's (1 / max_interval)."""
    f = Frontier(redis_url, namespace=namespace, estimator="interval", objective="freshness",
                 min_interval=1.0, max_interval=1e5)
    rng = np.random.default_rng(5)
    n = 400
    changes = rng.integers(0, EXPLORE_CHANGES + 3, n).astype(float)
    exposure = np.where(rng.random(n) < 0.5, 0.0, np.exp(rng.uniform(-3, 3, n)))
    lam = np.exp(rng.uniform(-6, 2, n))
    lua = lib_eval(redis_client, f, "lib.explore_rate({changes = a, aux = b, weight = 1.5}, c, 0.7)",
                   changes, exposure, lam)
    py = [explore_rate(r, 1.5, 0.7, int(k), e) for k, e, r in zip(changes, exposure, lam, strict=True)]
    np.testing.assert_allclose(lua, py, rtol=1e-15, atol=0)
    assert (lua < lam).sum() > 20, "some pages should be capped"

    log_rates = np.linspace(-25, 0, 50)
    floor = 1.0 / (INTERVAL_FLOOR_SPAN * f.max_interval)
    np.testing.assert_allclose(lib_eval(redis_client, f, "lib.plan_rate({est = a})", log_rates),
                               np.maximum(np.exp(log_rates), floor), rtol=1e-15, atol=0)
    g = Frontier(redis_url, namespace=namespace + "-lln", estimator="lln", min_interval=1.0,
                 max_interval=1e5)
    rates = np.exp(log_rates)
    np.testing.assert_allclose(lib_eval(redis_client, g, "lib.plan_rate({est = a})", rates),
                               np.maximum(rates, 1.0 / g.max_interval), rtol=1e-15, atol=0)


def test_lua_source_interval_index_and_pooling_equal_python(redis_client, redis_url, namespace):
    """A source (F_SOURCE): lib.page_interval against interval_for_threshold bounded by
    [min_interval, index.source_max_interval] (no exploration); a source never fetched ranks
    at its effective weight (a page never fetched: infinite); a source pools nothing
    (lib.pooled_log_rate nil, here -1)."""
    f = Frontier(redis_url, namespace=namespace, estimator="interval", objective="freshness",
                 min_interval=1.0, max_interval=1e5)
    rng = np.random.default_rng(9)
    n = 300
    weight = np.exp(rng.uniform(-5, 2, n))
    lam = np.exp(rng.uniform(-14, 0, n))
    nu = np.exp(rng.uniform(-3, 6, n))
    source = F_SOURCE
    lua = lib_eval(redis_client, f, f"lib.page_interval({{weight = a, flags = {source}, changes = 3, "
                   "aux = 0, fetches = 4}, b, c)", weight, lam, nu)
    longest = np.array([source_max_interval(w, f.max_interval) for w in weight])
    shortest = np.array([source_min_interval(w, f.min_interval, f.max_interval)
                         for w in weight])
    py = np.minimum(np.maximum(np.maximum(interval_for_threshold(nu, lam, weight,
                                                                        "freshness"),
                                          shortest), WORTH_Y / lam), longest)
    np.testing.assert_allclose(lua, py, rtol=1e-14, atol=0)
    assert (lua > f.max_interval).sum() > 20, "some sources should plan past max_interval"
    light = weight < 1
    assert (lua[light] >= f.max_interval).all() and (lua[~light] < f.max_interval).sum() > 20
    assert source_min_interval(0.9, 1.0, 1e5) == 1e5
    assert source_min_interval(1.0, 1.0, 1e5) == 1.0
    # the same bounds, and the early-fetch bound, through lib.shortest_interval: a page and a
    # source never read keep min_interval, a light source read before max_interval
    cases = [(0.3, 0, source), (0.3, 2, source), (2.0, 2, source), (0.3, 2, 0)]
    got = [lib_eval(redis_client, f, f"lib.shortest_interval({{weight = a, fetches = {n}, "
                    f"flags = {flags}}})", np.array([w]))[0] for w, n, flags in cases]
    assert got == [1.0, 1e5, 1.0, 1.0]
    assert source_max_interval(0.3, 1e5) == pytest.approx(1e5 / 0.3)
    assert source_max_interval(5.0, 1e5) == 1e5
    assert source_max_interval(1e-6, 1e5) == pytest.approx(1e5 * INTERVAL_FLOOR_SPAN)

    log_rates = np.log(lam)
    first = lib_eval(redis_client, f, f"lib.index({{fetches = 0, flags = {source}, weight = a, "
                     "est = b, last_fetch = 0}, 0)", weight, log_rates)
    floor = 1.0 / (INTERVAL_FLOOR_SPAN * f.max_interval)
    np.testing.assert_allclose(first, effective_weight(weight, np.maximum(lam, floor),
                                                              "freshness"), rtol=1e-15, atol=0)
    page = lib_eval(redis_client, f, "lib.index({fetches = 0, flags = 0, weight = a, est = b, "
                    "last_fetch = 0}, 0)", weight, log_rates)
    assert np.isinf(page).all()

    fetches = np.array([0.0, 1.0, 2.0, 5.0, 2.0, 5.0])
    flags = np.array([0.0, 0.0, 0.0, 0.0, source, source])
    pooled = lib_eval(redis_client, f, "lib.pooled_log_rate({fetches = a, flags = b}, 2.0) or -1",
                      fetches, flags)
    np.testing.assert_array_equal(pooled, [-1, -1, np.log(2.0), np.log(2.0), -1, -1])

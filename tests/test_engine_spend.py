"""Spending the budget (``fill_budget``) and the pooled prior per host, on a real Redis.

``fill_budget``: tokens that no due page can use go to the best pages that are
not due yet, on hosts that may be fetched now; host delays still hold.
Pooled prior: a page of a host starts from, and is shrunk towards, the mean
log-rate of the host's other observed pages (lua/lib_hosts.lua ``host_log_prior``).
"""

from __future__ import annotations

import math

import pytest
from redis_servers import both_servers  # noqa: F401, I001  (every test on both script paths)

from frontier_rate import Frontier
from frontier_rate.math.estimators import make_estimator
from frontier_rate.math.index import MIN_CHANGE_CHANCE, interval_for_threshold
from frontier_rate.store.wire import INTERVAL_MAX_STEP, INTERVAL_PRIOR_INFO

PRIOR_PAGES = 2  # lua/lib.lua: pseudo-pages of the namespace prior in a host's pool


def _frontier(redis_url, namespace, **kw):
    args = {"estimator": "interval", "objective": "freshness", "budget": 1.0,
            "min_host_delay": 0.0, "min_interval": 100.0, "max_interval": 1000.0,
            "lease_timeout": 1e6, "seed": 1, "prior_rate": 0.01}
    args.update(kw)
    return Frontier(redis_url, namespace=namespace, **args)


def _fetch_all(f, now):
    got = f.next_requests(100, now=now)
    f.observe_many([(d, {"fingerprint": "v0", "fetched_at": now}) for d in got])
    return got


@pytest.mark.parametrize("fill", [True, False])
def test_tokens_no_due_page_can_use_go_to_pages_not_due(redis_url, namespace, fill):
    """300 pages, 1 fetch/s: each is planned ~300 s after its (free) first fetch; the 2
    tokens in the bucket at t = 20 go to pages not due yet, never within min_interval nor
    before the chance of a change reaches MIN_CHANGE_CHANCE (issue 60: at the starting rate
    1/300 per s, 0.0202 · 300 = 6.1 s)."""
    f = _frontier(redis_url, namespace, fill_budget=fill, min_interval=2.0)
    urls = [f"http://h{i}.example/p" for i in range(300)]
    f.add_many(urls, now=0.0)
    assert sum(len(_fetch_all(f, 0.0)) for _ in range(3)) == 300
    assert f.next_requests(2, now=1.0) == []  # within min_interval: never, filling or not
    assert -math.log(1 - MIN_CHANGE_CHANCE) * 300 == pytest.approx(6.06, abs=0.01)
    assert f.next_requests(2, now=5.0) == []  # a 1.65% chance of a change: not worth a token
    got = f.next_requests(2, now=20.0)
    if not fill:
        assert got == []
        return
    assert len(got) == 2
    assert all(d.due > 20.0 for d in got), "only pages not due yet were there to lease"
    assert {d.url for d in got} <= set(urls)


def test_filling_never_breaks_a_host_delay(redis_url, namespace):
    f = _frontier(redis_url, namespace, min_host_delay=50.0, budget=10.0)
    urls = [f"http://one.example/p{i}" for i in range(4)]
    f.add_many(urls, now=0.0)
    times = []
    t = 0.0
    while t < 400.0:
        for d in f.next_requests(10, now=t):
            times.append(t)
            f.observe(d, fingerprint="v0", fetched_at=t)
        t += 1.0
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert len(times) == 8, times  # one fetch per 50 s, from t = 0 to 350
    assert min(gaps) >= 50.0


def test_filling_spends_the_budget_but_never_within_min_interval(redis_url, namespace):
    """20 pages on 20 hosts that change at every fetch, min_interval 2 s, budget 1 fetch/s
    for 600 s: the budget is spent, and no page is fetched twice within min_interval
    (filling included). Pages that never change leave it unspent (issue 60,
    test_engine_worth.py)."""
    f = _frontier(redis_url, namespace, fill_budget=True, min_interval=2.0)
    f.add_many([f"http://h{i}.example/p" for i in range(20)], now=0.0)
    fetched: dict[str, list[float]] = {}
    for tenth in range(6000):
        now = tenth / 10
        for d in f.next_requests(5, now=now):
            f.observe(d, fingerprint=f"v{tenth}", fetched_at=now)
            fetched.setdefault(d.url, []).append(now)
    assert sum(map(len, fetched.values())) >= 590  # 600 tokens + 20 free first fetches
    gaps = [b - a for times in fetched.values() for a, b in zip(times, times[1:], strict=False)]
    assert min(gaps) >= 2.0


def _run_page(f, url, versions, start, step):
    """Lease and observe ``url`` (the only page due) once per ``step`` with the given versions;
    returns the realised intervals."""
    taus, t, last = [], start, None
    for v in versions:
        got = []
        while not got:
            got = [d for d in f.next_requests(1, now=t) if d.url == url]
            t += 1.0 if not got else 0.0
        f.observe(got[0], fingerprint=v, fetched_at=t)
        if last is not None:
            taus.append(t - last)
        last = t
        t += step
    return taus


def test_new_page_starts_from_its_hosts_pooled_prior(redis_url, namespace):
    f = _frontier(redis_url, namespace, fill_budget=False, min_interval=1.0, max_interval=1e4)
    first = "http://pool.example/a"
    f.add(first, now=0.0)
    _run_page(f, first, [f"v{i}" for i in range(30)], 0.0, 5.0)  # changes every fetch: fast
    est_first = f.page(first)["estimate"]
    assert est_first > 10 * f.prior_rate
    f.add_many(["http://pool.example/b", "http://other.example/b"], now=1e5)
    pooled = math.exp((math.log(est_first) + PRIOR_PAGES * math.log(f.prior_rate))
                      / (1 + PRIOR_PAGES))
    assert f.page("http://pool.example/b")["estimate"] == pytest.approx(pooled, rel=1e-12)
    assert f.page("http://other.example/b")["estimate"] == pytest.approx(f.prior_rate, rel=1e-12)


def test_lua_interval_update_with_a_pooled_prior_equals_python(redis_url, namespace):
    """A second page of a host is estimated by frontier_rate.math.estimators' Interval with the
    pooled prior as its prior (the page's own contribution left out)."""
    f = _frontier(redis_url, namespace, fill_budget=False, min_interval=1.0, max_interval=1e4)
    first, second = "http://pool.example/a", "http://pool.example/b"
    f.add(first, now=0.0)
    _run_page(f, first, [f"v{i // 2}" for i in range(20)], 0.0, 7.0)
    est_first = f.page(first)["estimate"]
    prior = math.exp((math.log(est_first) + PRIOR_PAGES * math.log(f.prior_rate))
                     / (1 + PRIOR_PAGES))
    f.add(second, now=1e5)
    versions = [f"w{i // 3}" for i in range(25)]
    taus = _run_page(f, second, versions, 1e5, 11.0)
    python = make_estimator("interval", x0=prior, prior_info=INTERVAL_PRIOR_INFO,
                            max_step=INTERVAL_MAX_STEP)
    for k, tau in enumerate(taus, start=1):
        python.update(int(versions[k] != versions[k - 1]), interval=tau, p=1.0 / tau)
    assert f.page(second)["estimate"] == pytest.approx(python.estimate, rel=1e-9)


def _pooled_after_one_fast_page(f, url, start):
    """Drive ``url`` through 30 changes, 5 s apart (a fast page; other pages leased meanwhile
    are released untouched); the pooled prior of its host's other pages then."""
    t, seen = start, 0
    while seen < 30:
        for d in f.next_requests(10, now=t):
            if d.url == url:
                f.observe(d, fingerprint=f"v{seen}", fetched_at=t)
                seen += 1
            else:
                f.release(d, now=t)
        t += 5.0
    est = f.page(url)["estimate"]
    assert est > 10 * f.prior_rate
    return math.exp((math.log(est) + PRIOR_PAGES * math.log(f.prior_rate)) / (1 + PRIOR_PAGES))


def test_a_page_fetched_once_learns_from_the_pool_as_it_stands_at_its_second_fetch(
        redis_url, namespace):
    """Pages added together, before any page of their host was observed, start from the
    namespace prior; one fetched once meanwhile takes the host's pooled prior as it stands at
    its second fetch (not as it stood when it was added): its update equals Python's
    Interval started from that prior."""
    f = _frontier(redis_url, namespace, fill_budget=False, min_interval=1.0, max_interval=1e4)
    first, second = "http://pool.example/a", "http://pool.example/b"
    f.add_many([first, second], now=0.0)
    assert f.page(second)["estimate"] == pytest.approx(f.prior_rate, rel=1e-12)
    for d in f.next_requests(2, now=0.0):
        if d.url == second:
            f.observe(d, fingerprint="w0", fetched_at=0.0)  # its first fetch: no interval yet
        else:
            f.release(d, now=0.0)
    prior = _pooled_after_one_fast_page(f, first, 1.0)
    t = 2e4  # the second page is due again (max_interval 1e4)
    got = [d for d in f.next_requests(2, now=t) if d.url == second]
    assert got, "the second page is due"
    f.observe(got[0], fingerprint="w1", fetched_at=t)
    python = make_estimator("interval", x0=prior, prior_info=INTERVAL_PRIOR_INFO,
                            max_step=INTERVAL_MAX_STEP)
    python.update(1, interval=t, p=1.0 / t)
    assert f.page(second)["estimate"] == pytest.approx(python.estimate, rel=1e-9)


def test_queued_pages_without_an_observed_interval_follow_the_pool_in_the_sweep(
        redis_url, namespace):
    """The background sweep (lua/refresh.lua) moves a queued page fetched at most once onto its
    host's pooled prior as the pool moves, and re-plans it; a page of another host keeps the
    namespace prior."""
    f = _frontier(redis_url, namespace, fill_budget=False, min_interval=1.0, max_interval=1e4,
                  budget=0.05)
    first = "http://pool.example/a"
    waiting = [f"http://pool.example/w{i}" for i in range(3)]
    other = "http://other.example/w"
    f.add_many([first, *waiting, other], now=0.0)
    f.set_budget(1000.0, now=0.0)
    for d in f.next_requests(10, now=0.0):
        if d.url != first:
            f.observe(d, fingerprint="x", fetched_at=0.0)
        else:
            f.release(d, now=0.0)
    planned = {u: f.page(u)["p"] for u in waiting}
    prior = _pooled_after_one_fast_page(f, first, 1.0)
    f.set_budget(0.05, now=200.0)  # a re-solve: the sweep runs on every shard
    for _ in range(f.shards):
        f.next_requests(0, now=200.0)
    for u in waiting:
        page = f.page(u)
        assert page["fetches"] == 1
        assert page["estimate"] == pytest.approx(prior, rel=1e-12)
        assert page["p"] != planned[u]  # re-planned with that rate
    assert f.page(other)["estimate"] == pytest.approx(f.prior_rate, rel=1e-12)


def test_a_capped_host_gets_its_own_threshold_and_frees_budget(redis_url, namespace):
    """One big host behind a long delay and small free hosts: the solve publishes τ_h for
    the big host only, its pages plan with max(ν, τ_h), and ν drops below the ν of the
    same pages with no delay (its budget goes to the others)."""
    nus = {}
    for delay in (0.0, 600.0):
        ns = f"{namespace}-{delay:g}"
        f = _frontier(redis_url, ns, budget=0.05, fill_budget=False, min_interval=10.0,
                      max_interval=1e6, prior_rate=1e-4)
        f.add_many([f"http://big.example/p{i}" for i in range(50)]
                   + [f"http://small{i}.example/p" for i in range(10)], now=0.0)
        f.set_host_delay("big.example", delay)
        nus[delay] = f.resolve(now=0.0)
        host_nu = f.client.hgetall(f.keys.host_nu(f._shard_of("big.example")))
        if delay == 0.0:
            assert f.client.hget(f.keys.host_nu(f._shard_of("big.example")),
                                 "big.example") is None
            continue
        tau = float(host_nu[b"big.example"])
        assert tau > nus[delay]
        for i in range(10):
            shard = f._shard_of(f"small{i}.example")
            assert f.client.hget(f.keys.host_nu(shard), f"small{i}.example") is None
        # the big host's pages at τ_h sum to its cap 1/600 (one cell: equal pages)
        lam = f.prior_rate
        per_page = 1.0 / interval_for_threshold(tau, lam, 1.0, "freshness")
        assert 50 * per_page == pytest.approx(1.0 / 600.0, rel=1e-6)
        # a page of the big host, fetched for the first time, is planned at τ_h, not at ν
        t, big = 0.0, []
        while not big:  # one token per 20 s; new pages in any order
            big = [d for d in f.next_requests(1, now=t) if d.host == "big.example"]
            t += 20.0 if not big else 0.0
        obs = f.observe(big[0], fingerprint="v0", fetched_at=t)
        assert obs.next_due - t == pytest.approx(1.0 / per_page, rel=1e-9)
        assert obs.next_due > interval_for_threshold(nus[delay], lam, 1.0, "freshness")
    assert nus[600.0] < nus[0.0]


def test_a_page_in_failure_backoff_is_not_fetched_early(redis_url, namespace):
    f = _frontier(redis_url, namespace, budget=10.0)
    f.add("http://flaky.example/p", now=0.0)
    (d,) = f.next_requests(1, now=0.0)
    f.failed(d, "HTTP 503", status=503, now=0.0)  # retry in 60 s
    assert f.next_requests(1, now=5.0) == []
    assert [x.url for x in f.next_requests(1, now=61.0)] == ["http://flaky.example/p"]


def test_a_solve_short_of_the_budget_is_redone_within_seconds(redis_url, namespace):
    """A crawl still discovering its pages: the first solve finds too few pages for the budget
    (ν = 0); 5 s later, with many more pages, ν is solved again instead of after 60 s."""
    f = _frontier(redis_url, namespace, budget=1.0, fill_budget=False)
    f.add("http://a.example/0", now=0.0)
    f.next_requests(1, now=0.0)
    assert f.stats(now=0.0)["nu"] == 0.0
    f.add_many([f"http://h{i % 50}.example/{i}" for i in range(2000)], now=1.0)
    f.next_requests(1, now=7.0)
    assert f.stats(now=7.0)["nu"] > 0.0


@pytest.mark.parametrize("budgeted", [False, True])
def test_first_fetches_take_no_token_unless_budgeted(redis_url, namespace, budgeted):
    """A first crawl is not held to the revisit budget (0.1 fetch/s here): 50 new pages are
    leased at once; with ``budget_first_fetches`` only what the bucket holds (1 token)."""
    f = _frontier(redis_url, namespace, budget=0.1, budget_first_fetches=budgeted)
    f.add_many([f"http://h{i % 5}.example/p{i}" for i in range(50)], now=0.0)
    got = [d for _ in range(5) for d in f.next_requests(100, now=0.0)]  # <= 4 per host a call
    assert len(got) == (1 if budgeted else 50)
    assert all(d.first for d in got)
    f.observe_many([(d, {"fingerprint": "v0", "fetched_at": 0.0}) for d in got])
    if not budgeted:  # revisits are budgeted: 0.1 token/s, burst 1.1 tokens
        revisits = [d for t in range(0, 600, 10) for d in f.next_requests(100, now=float(t))]
        assert len(revisits) <= 0.1 * 600 + 1.1
        assert not any(d.first for d in revisits)


def test_priority_orders_pages_due_at_the_same_time(redis_url, namespace):
    """Pages added together are leased highest priority first (one host, no delay)."""
    f = _frontier(redis_url, namespace, budget=100.0)
    priorities = {"a": -2, "d": 1, "b": -1, "c": 0, "e": 2}
    f.add_many([(f"http://one.example/{k}", 1.0, None, p) for k, p in priorities.items()],
               now=10.0)
    order = []
    for _ in range(5):
        order += [d.url[-1] for d in f.next_requests(1, now=11.0)]
    assert order == ["e", "d", "c", "b", "a"]

"""Issue 35 in the engine, on a real Redis: the population level of the pooled prior
(lua/lib.lua ``population_log_prior``) and the max_interval floor the budget cannot pay
(engine/threshold.py ``effective_max_interval``)."""

from __future__ import annotations

import logging
import math

import pytest

from frontier_rate import Frontier
from frontier_rate.engine.session import starting_rate
from frontier_rate.engine.threshold import FLOOR_SHARE, effective_max_interval

PAGES = 2  # lua/lib.lua: pseudo-pages of the level above in a pool (PRIOR_PAGES, POPULATION_PAGES)
POPULATION_MIN = 4  # lua/lib.lua: observed pages of a shard before its population pool is trusted


def _frontier(redis_url, namespace, **kw):
    args = {"estimator": "interval", "objective": "freshness", "budget": 1.0, "min_host_delay": 0.0,
            "min_interval": 1.0, "max_interval": 1e4, "lease_timeout": 1e6, "seed": 1,
            "prior_rate": 0.01, "fill_budget": False}
    args.update(kw)
    return Frontier(redis_url, namespace=namespace, **args)


def test_effective_max_interval_by_hand():
    assert effective_max_interval(100, 1.0, 1000.0) == 1000.0  # 100 pages / 1000 s = 0.1/s: paid
    assert effective_max_interval(5000, 1.0, 1000.0) == pytest.approx(5000 / FLOOR_SHARE)
    assert effective_max_interval(0, 1.0, 1000.0) == 1000.0


def test_new_page_of_a_new_host_starts_from_its_shards_population(redis_url, namespace):
    """320 hosts of one page each (16 shards: about 20 a shard), each observed once unchanged
    after 500 s: a page of a new host starts from the mean log-rate of the observed pages of
    its shard shrunk towards prior_rate by 2 pseudo-pages, not from prior_rate; a shard with
    fewer than 4 observed pages gives prior_rate."""
    f = _frontier(redis_url, namespace, budget=1000.0)
    hosts = 320
    urls = [f"http://h{i}.example/a" for i in range(hosts)]
    f.add_many(urls, now=0.0)
    for t in (0.0, 500.0):
        done = 0
        while done < hosts:
            got = f.next_requests(400, now=t)
            f.observe_many([(d, {"fingerprint": "v0", "fetched_at": t}) for d in got])
            done += len(got)
            t += 1.0
    shard_of = f.inspector.calls.of
    by_shard: dict[int, list[float]] = {}
    for u in urls:
        by_shard.setdefault(shard_of(f"h{urls.index(u)}.example"), []).append(math.log(f.page(u)["estimate"]))
    assert max(max(v) for v in by_shard.values()) < math.log(f.prior_rate)  # unchanged: below the prior
    checked = {True: 0, False: 0}
    for k in range(200):
        host = f"new{k}.example"
        logs = by_shard.get(shard_of(host), [])
        trusted = len(logs) >= POPULATION_MIN
        if checked[trusted] >= 2:
            continue
        f.add(f"http://{host}/a", now=2000.0)
        expected = (math.exp((sum(logs) + PAGES * math.log(f.prior_rate)) / (len(logs) + PAGES))
                    if trusted else f.prior_rate)
        assert f.page(f"http://{host}/a")["estimate"] == pytest.approx(expected, rel=1e-9)
        checked[trusted] += 1
    assert checked[True] == 2
    f.close()


def test_budget_that_cannot_pay_max_interval_stretches_it_and_says_so(redis_url, namespace, caplog):
    f = _frontier(redis_url, namespace, budget=0.01, max_interval=1000.0)
    f.add_many([f"http://h{i % 7}.example/{i}" for i in range(50)], now=0.0)
    with caplog.at_level(logging.WARNING, logger="frontier_rate.engine.threshold"):
        f.resolve(now=0.0)
    stats = f.stats(now=0.0)
    assert stats["max_interval_unaffordable"] is True
    assert stats["max_interval_effective"] == pytest.approx(50 / (FLOOR_SHARE * 0.01))
    assert any("cannot fetch every page once per max_interval" in r.getMessage() for r in caplog.records)
    f.close()
    g = _frontier(redis_url, namespace + "b", budget=1.0, max_interval=1000.0)
    g.add_many([f"http://h{i % 7}.example/{i}" for i in range(50)], now=0.0)
    g.resolve(now=0.0)
    assert g.stats(now=0.0)["max_interval_unaffordable"] is False
    assert g.stats(now=0.0)["max_interval_effective"] == 1000.0
    g.close()


def test_starting_rate_by_hand():
    assert starting_rate(0, 1.0, 0.01) == 0.01  # an empty namespace starts from prior_rate
    assert starting_rate(1000, 1.0, 0.01) == 0.001  # the budget pays 0.001 fetches/s a page
    assert starting_rate(10, 1.0, 0.01) == 0.01  # the budget pays more than prior_rate: prior_rate


def test_new_pages_start_from_the_budgets_rate_per_page_once_it_is_below_prior_rate(
        redis_url, namespace, caplog):
    """50 pages at a budget of 0.1 fetches/s: 0.002 fetches/s a page, below prior_rate 0.01.
    Before the first re-solve a new page starts from prior_rate; after it, a page of a new host
    (no pool yet) starts from 0.002, stats() says so, and an INFO line names both rates."""
    f = _frontier(redis_url, namespace, budget=0.1)
    f.add_many([f"http://h{i % 7}.example/{i}" for i in range(49)], now=0.0)
    f.add("http://early.example/a", now=0.0)
    assert f.page("http://early.example/a")["estimate"] == pytest.approx(0.01, rel=1e-9)
    with caplog.at_level(logging.INFO, logger="frontier_rate.engine.session"):
        f.resolve(now=0.0)
    assert f.stats(now=0.0)["starting_rate"] == pytest.approx(0.1 / 50)
    f.add("http://late.example/a", now=1.0)
    assert f.page("http://late.example/a")["estimate"] == pytest.approx(0.1 / 50, rel=1e-9)
    said = [r.getMessage() for r in caplog.records if "new pages start from" in r.getMessage()]
    assert said and "173 changes/day" in said[0] and "below prior_rate 864/day" in said[0]
    g = _frontier(redis_url, namespace, budget=0.1)  # another process of the namespace
    g.next_requests(1, now=2.0)  # takes up the published solve: its 50 pages
    g.add("http://other.example/a", now=2.0)
    assert g.page("http://other.example/a")["estimate"] == pytest.approx(0.1 / 50, rel=1e-9)
    g.close()
    f.close()

"""A revisit must be worth its token (issue 60), on a real Redis with a virtual clock.

The policy makes every page due at min_interval when the threshold ν is 0 (a budget larger
than the pages need): a shop of never-changing pages was fetched at the host rate, all 304.
Now no page is planned, nor fetched early to fill the budget, before the chance that it
changed since its last fetch, 1 − e^{−λt}, reaches ``MIN_CHANGE_CHANCE``; the budget
the pages are not worth is left unspent, and what they are worth goes to pages that change.
"""

from __future__ import annotations

import logging
import math
from collections import Counter

import pytest

from frontier_rate import Frontier
from frontier_rate.math.index import MIN_CHANGE_CHANCE

MIN_INTERVAL = 5.0
RUN = 3600


def _run(redis_url: str, namespace: str, news: int, static: int, seconds: int = RUN,
         **options) -> tuple[Frontier, Counter, Counter]:
    """``news`` pages that change every 60 s and ``static`` pages that never change, each on
    its own host, budget 1 fetch/s, one lease call per second of a virtual clock (``options``:
    more ``Frontier`` options). Returns
    the frontier and the fetches per URL over the whole run and over its last 600 s."""
    f = Frontier(redis_url, namespace=namespace, estimator="interval", objective="freshness",
                 budget=1.0, min_host_delay=0.0, min_interval=MIN_INTERVAL,
                 max_interval=30 * 86400.0, lease_timeout=1e6, seed=1, prior_rate=1 / 3600,
                 fill_budget=True, **options)
    urls = [f"http://news{i}.example/" for i in range(news)] + \
        [f"http://static{i}.example/" for i in range(static)]
    f.add_many(urls, now=0.0)
    fetches: Counter = Counter()
    late: Counter = Counter()
    for t in range(seconds):
        for lease in f.next_requests(20, now=float(t)):
            fetches[lease.url] += 1
            if t >= seconds - 600:
                late[lease.url] += 1
            version = f"v{t // 60}" if "news" in lease.url else "same"
            f.observe(lease, fingerprint=version, fetched_at=float(t))
    f.resolve(now=float(seconds))
    return f, fetches, late


def test_the_budget_is_left_unspent_when_the_estimates_say_nothing_changes(
        redis_url, namespace, caplog):
    """50 pages that never change, 1 fetch/s for an hour: before, ν = 0 and every page was due
    every 5 s, so the 3,600 tokens all went to them. Now each waits until its chance of a
    change reaches 2% (73 s at the prior of one change an hour, longer as its estimate falls):
    about 20 revisits each, most of them early, and the planned rate the solve reports (stats' planned_rate,
    budget_use) is what an independent sum over the pages gives: Σ 1/max(min_interval,
    −log(1 − p)/λ_i)."""
    with caplog.at_level(logging.INFO, logger="frontier_rate.engine.threshold"):
        f, fetches, late = _run(redis_url, namespace, news=0, static=50)
    revisits = sum(fetches.values()) - 50
    # the budget would have paid RUN of them; fewer and fewer as the estimates fall
    assert 0 < revisits < 0.5 * RUN and sum(late.values()) < 0.25 * 600, (revisits, late)
    stats = f.stats(now=float(RUN))
    assert stats["nu"] == 0.0 and stats["budget_use"] < 0.2, stats
    y = -math.log(1.0 - MIN_CHANGE_CHANCE)
    expected = sum(1.0 / max(MIN_INTERVAL, y / page["estimate"]) for page in f.iter_pages())
    assert stats["planned_rate"] == pytest.approx(expected, rel=1e-9)
    lines = [r.getMessage() for r in caplog.records if "left unspent" in r.getMessage()]
    assert len(lines) == 1 and "% of the budget" in lines[0], lines
    for page in f.iter_pages():  # and each page's next fetch keeps to it
        wait = page["next_due"] - page["last_fetch"]
        assert wait == pytest.approx(max(MIN_INTERVAL, y / page["estimate"]), rel=1e-6), page


def test_the_budget_still_goes_to_pages_that_change(redis_url, namespace):
    """10 pages that change every minute among 40 that never do: over the last 10 minutes the
    budget is spent (the 10 alone could take 2 fetches/s at min_interval), and most of it on
    the pages that change."""
    f, fetches, late = _run(redis_url, namespace, news=10, static=40)
    news = sum(n for url, n in late.items() if "news" in url)
    static = sum(n for url, n in late.items() if "static" in url)
    assert news + static >= 0.95 * 600, (news, static)
    assert news >= 4 * static, (news, static)
    assert f.stats(now=float(RUN))["budget_use"] == pytest.approx(1.0, rel=1e-6)


def test_a_lower_min_change_chance_spends_more_of_the_budget_on_the_same_pages(
        redis_url, namespace):
    """``min_change_chance`` sets the least chance a revisit needs (issue 62: a set budget of
    0.3 fetches/page/day on documentation sites left half unspent at 0.02). 20 pages that
    never change, for 20 minutes, at 0.02 and at 0.005 (both under the budget): each run's
    planned rate is the independent sum at its own chance, every page's wait keeps to it,
    and the lower chance revisits more."""
    revisits = {}
    for chance in (MIN_CHANGE_CHANCE, 0.005):
        options = {} if chance == MIN_CHANGE_CHANCE else {"min_change_chance": chance}
        f, fetches, _ = _run(redis_url, f"{namespace}-{chance}", news=0, static=20,
                             seconds=1200, **options)
        revisits[chance] = sum(fetches.values()) - 20
        y = -math.log(1.0 - chance)
        stats = f.stats(now=1200.0)
        expected = sum(1.0 / max(MIN_INTERVAL, y / page["estimate"]) for page in f.iter_pages())
        assert stats["planned_rate"] == pytest.approx(expected, rel=1e-9), chance
        for page in f.iter_pages():
            wait = page["next_due"] - page["last_fetch"]
            assert wait == pytest.approx(max(MIN_INTERVAL, y / page["estimate"]), rel=1e-6)
    assert revisits[0.005] > 1.5 * revisits[MIN_CHANGE_CHANCE], revisits


@pytest.mark.parametrize("value", [1.0, -0.01, float("nan"), "0.1"])
def test_a_min_change_chance_that_is_not_a_chance_is_refused(value):
    """Before Redis is reached, naming the option and the value."""
    with pytest.raises(ValueError, match="min_change_chance"):
        Frontier("redis://127.0.0.1:1/0", min_change_chance=value)

"""Co-change evidence (issue 62) on a real Redis: a change seen on one page of a host brings
its other pages forward once later fetches showed that they change together (lua/signals.lua
"Co-change", lua/observe.lua), never while they do not, and the Python statement of the rules
(frontier_rate/math/cochange.py) agreeing with the Lua step by step."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from redis_servers import both_servers  # noqa: F401, I001  (every test on both script paths)

from frontier_rate import Frontier
from frontier_rate.engine.session import DEFAULT_SHARDS
from frontier_rate.math import cochange
from frontier_rate.store.keys import shard_of

DAY = 86400.0
HOUR = 3600.0


def frontier(redis_url: str, namespace: str, **kw) -> Frontier:
    opts = {"budget": 1000.0, "min_host_delay": 0.0, "min_interval": 600.0,
            "max_interval": 30 * DAY, "prior_rate": 1 / (10 * DAY), "seed": 1,
            "cochange": True}  # off by default (FRONTIER_RATE_COCHANGE)
    opts.update(kw)
    return Frontier(redis_url, namespace=namespace, **opts)


def replay(f: Frontier, changes: dict[str, list[float]], added: dict[str, float], days: float,
           step: float = HOUR, after_observe: Callable[[], object] | None = None
           ) -> dict[str, list[float]]:
    """Lease and observe every due page each ``step`` over ``days`` (a page's fingerprint is
    the number of its changes so far); each page's fetch times. ``after_observe`` is called
    after each step that observed pages."""
    fetched: dict[str, list[float]] = {u: [] for u in changes}
    pending = dict(added)
    t = 0.0
    while t < days * DAY:
        new = [u for u, at in pending.items() if at <= t]
        if new:
            f.add_many(new, now=t)
            for u in new:
                del pending[u]
        got = f.next_requests(1000, now=t)
        if got:
            f.observe_many([(d, {"fingerprint": str(int(np.searchsorted(changes[d.url], t, "right"))),
                                 "fetched_at": t}) for d in got])
            for d in got:
                fetched[d.url].append(t)
            if after_observe is not None:
                after_observe()
        t += step
    return fetched


def staleness(changes: list[float], fetches: list[float], end: float) -> float:
    """Time the copy was stale: from each change to the first fetch after it."""
    total = 0.0
    for c in changes:
        after = [x for x in fetches if x >= c]
        total += (after[0] if after else end) - c
    return total


def together(days: float, every: float, hosts: int = 1,
             names: list[str] | None = None) -> tuple[dict, dict]:
    """``hosts`` hosts (n0.test, ... or ``names``) of 4 pages each that all change together
    every ``every`` days (at noon), the pages added a day apart so that their schedules
    differ."""
    changes, added = {}, {}
    for name in names or [f"n{h}.test" for h in range(hosts)]:
        for i in range(4):
            url = f"http://{name}/p{i}"
            changes[url] = [k * every * DAY + 0.5 * DAY for k in range(1, int(days / every) + 1)]
            added[url] = i * DAY
    return changes, added


def test_pages_that_change_together_are_fetched_sooner(redis_url, namespace):
    changes, added = together(150, 15)
    runs = {}
    for on in (True, False):
        f = frontier(redis_url, f"{namespace}-{on}", cochange=on)
        runs[on] = (replay(f, changes, added, 150, step=2 * HOUR),
                    f.neighbours("n0.test", "http://n0.test/p0"), f.stats(now=150 * DAY))
        said = f.page("http://n0.test/p1")["neighbours"]  # frontier-rate inspect shows it
        assert said.startswith("trusted") if on else said == "off (cochange=False)"
        f.close()
    with_, info, stats = runs[True]
    assert stats["cochange_pulls"] > 0
    without, info_off, _ = runs[False]
    assert info["trusted"] and info["share"] > 0.9 and info["hits"] > 2 * info["expected"]
    assert info_off["checks"] == 0  # off: nothing kept
    end = 150 * DAY
    stale_on = sum(staleness(changes[u], with_[u], end) for u in changes)
    stale_off = sum(staleness(changes[u], without[u], end) for u in changes)
    assert stale_on < 0.7 * stale_off
    # not bought by more fetches
    assert sum(map(len, with_.values())) <= 1.1 * sum(map(len, without.values()))


def sections(days: float, every: float) -> tuple[dict, dict]:
    """One host, two URL groups: 6 pages under /news/ that all change together every ``every``
    days, and 8 under /docs/ that never change (added a few hours apart)."""
    changes, added = {}, {}
    for i in range(6):
        url = f"http://g.test/news/item-{i}"
        changes[url] = [k * every * DAY + 0.5 * DAY for k in range(1, int(days / every) + 1)]
        added[url] = i * 0.25 * DAY
    for i in range(8):
        url = f"http://g.test/docs/page-{i}"
        changes[url], added[url] = [], (i + 0.5) * 0.25 * DAY
    return changes, added


def test_a_section_that_changes_together_is_fetched_sooner_on_a_host_that_does_not(
        redis_url, namespace):
    """The record is kept per URL group once the group holds cochange.GROUP_MIN pages: the
    /news/ section's pages change together and bring each other forward, while the host as a
    whole would not be trusted (its /docs/ pages, more of them, never change, so a change of a
    news page finds the host's other pages changed less than half the time); the docs pages
    are fetched no more than without the evidence. Fails with the record kept per host (no
    pulls: the host's share stays below cochange.MIN_SHARE)."""
    days = 120
    changes, added = sections(days, 12)
    news = [u for u in changes if "/news/" in u]
    docs = [u for u in changes if "/docs/" in u]
    runs = {}
    for on in (True, False):
        f = frontier(redis_url, f"{namespace}-{on}", cochange=on)
        runs[on] = (replay(f, changes, added, days, step=3 * HOUR), f.stats(now=days * DAY))
        if on:
            group = f.neighbours("g.test", news[0])
            quiet = f.neighbours("g.test", docs[0])
            host = f.neighbours("g.test")
        f.close()
    (with_, stats), (without, _) = runs[True], runs[False]
    assert group["key"] == "g.test/news/*" and quiet["key"] == "g.test/docs/*"
    assert host["key"] == "g.test" and host["checks"] == 0  # no page counts with its host
    assert group["trusted"] and group["share"] > 0.9 and stats["cochange_pulls"] > 0
    assert quiet["event_hi"] == 0 and not quiet["trusted"]
    end = days * DAY
    stale_on = sum(staleness(changes[u], with_[u], end) for u in news)
    stale_off = sum(staleness(changes[u], without[u], end) for u in news)
    assert stale_on < 0.85 * stale_off  # 0.78 measured; without pulls the runs are the same
    assert sum(len(with_[u]) for u in docs) <= sum(len(without[u]) for u in docs)


def test_the_record_key_agrees_with_the_lua(redis_url, namespace):
    """cochange.record_key against what the engine keeps: a group of 3 pages counts with its
    host, one of GROUP_MIN pages with its own record."""
    f = frontier(redis_url, namespace)
    small = [f"http://k.test/a/page-{i}" for i in range(cochange.GROUP_MIN - 1)]
    full = [f"http://k.test/b/page-{i}" for i in range(cochange.GROUP_MIN)]
    f.add_many(small + full, now=0.0)
    assert f.neighbours("k.test", small[0])["key"] == cochange.record_key(
        "k.test", small[0], len(small)) == "k.test"
    assert f.neighbours("k.test", full[0])["key"] == cochange.record_key(
        "k.test", full[0], len(full)) == "k.test/b/*"
    f.close()


def test_a_gone_page_leaves_its_group(redis_url, namespace):
    """A page marked gone (three 404s) no longer counts toward its group's GROUP_MIN pages:
    a group of GROUP_MIN pages that loses one counts with its host again."""
    f = frontier(redis_url, namespace)
    urls = [f"http://g.test/b/page-{i}" for i in range(cochange.GROUP_MIN)]
    f.add_many(urls, now=0.0)
    assert f.neighbours("g.test", urls[1])["key"] == "g.test/b/*"
    f.observe_many([(d, {"fingerprint": "v0", "fetched_at": 0.0})
                    for d in f.next_requests(10, now=0.0) if d.url != urls[0]])
    for k in range(3):
        (lease,) = [d for d in f.next_requests(10, now=DAY * (k + 1)) if d.url == urls[0]]
        f.failed(lease, "not found", status=404, now=DAY * (k + 1))
    assert f.page(urls[0])["status"] == "gone"
    assert f.neighbours("g.test", urls[1])["key"] == "g.test"
    f.close()


def lying(days: float) -> tuple[dict, dict]:
    """A host whose pages change together once (day 2), then p0 changes every day alone."""
    changes = {"http://l.test/p0": [2.5 * DAY] + [k * DAY + 0.3 * DAY for k in range(3, int(days))],
               "http://l.test/p1": [2.5 * DAY], "http://l.test/p2": [2.5 * DAY]}
    return changes, {"http://l.test/p0": 0.0, "http://l.test/p1": 0.4 * DAY,
                     "http://l.test/p2": 0.8 * DAY}


def test_neighbours_that_lie_do_not_bring_a_page_forward(redis_url, namespace):
    """Pages that changed together once, then never, are fetched no more than without the
    evidence: the later checks fail and the host is never trusted (fails without the trust
    rule: every change of p0 would bring p1 and p2 forward)."""
    changes, added = lying(90)
    runs = {}
    for on in (True, False):
        f = frontier(redis_url, f"{namespace}-{on}", cochange=on)
        runs[on] = replay(f, changes, added, 90, step=2 * HOUR)
        if on:
            info = f.neighbours("l.test")
        f.close()
    assert info["checks"] >= cochange.PROBATION and not info["trusted"]
    for url in ("http://l.test/p1", "http://l.test/p2"):
        assert len(runs[True][url]) <= len(runs[False][url])


def test_the_tally_agrees_with_the_lua_step_by_step(redis_url, namespace):
    """Every observation of a replay also goes through cochange.Tally; the stored record
    equals it after each step (``expected`` within 5%: the mirror takes each page's rate from
    ``Frontier.page``, where a page fetched once plans with its host's pooled prior as
    observe.lua finds it, not read back here)."""
    changes, added = together(60, 6)
    changes["http://n0.test/p3"] = [5.2 * DAY, 40.1 * DAY]  # one page that mostly does not follow
    f = frontier(redis_url, namespace)
    mirror, population = cochange.Tally(), cochange.Tally()
    t, pending = 0.0, dict(added)
    steps = 0
    while t < 60 * DAY:
        new = [u for u, at in pending.items() if at <= t]
        if new:
            f.add_many(new, now=t)
            for u in new:
                del pending[u]
        for d in f.next_requests(1000, now=t):
            before = f.page(d.url)
            version = str(int(np.searchsorted(changes[d.url], t, "right")))
            obs = f.observe_many([(d, {"fingerprint": version, "fetched_at": t})])[0]
            if before["fetches"] > 0:
                rate = max(before["estimate"], 1 / f.max_interval)
                if mirror.news_for(before["last_fetch"]):
                    cochange.observe_population(population, obs.changed, before["last_fetch"],
                                                t, rate)
                mirror.observe(obs.changed, before["last_fetch"], t, rate)
                steps += 1
            got = f.neighbours("n0.test", "http://n0.test/p0")
            assert got["event_hi"] == mirror.hi and got["event_lo"] == mirror.lo
            for name in ("checks", "hits"):
                assert got[name] == pytest.approx(getattr(mirror, name), rel=1e-9, abs=1e-12)
            assert got["expected"] == pytest.approx(mirror.expected, rel=0.05, abs=1e-9)
            assert got["events"] == mirror.events
            pooled = got["population"]
            assert pooled["checks"] == pytest.approx(population.checks, rel=1e-9, abs=1e-12)
            assert pooled["hits"] == pytest.approx(population.hits, rel=1e-9, abs=1e-12)
            assert got["trusted"] == cochange.pooled(mirror, population).trusted()
        t += 2 * HOUR
    assert steps > 20 and mirror.checks > cochange.PROBATION and mirror.events >= 2
    assert population.checks > cochange.POOL_MIN


def test_tally_against_an_independent_computation():
    """The decayed tally is sum_j FORGET^(n-1-j) x_j over the checks (hits, chance of a change
    on its own: 1 - e^{-lambda tau}); trusted by its three conditions."""
    rng = np.random.default_rng(7)
    t = cochange.Tally()
    events, checks = [], []  # each event's (start, end): a change over an overlapping window narrows it
    last = {p: 0.0 for p in range(5)}
    now = 0.0
    for _ in range(200):
        now += float(rng.exponential(3600.0))
        p = int(rng.integers(5))
        changed = bool(rng.random() < 0.4)
        rate = float(rng.exponential(1e-5))
        if events and events[-1][1] > last[p]:
            checks.append((1.0 if changed else 0.0, 1 - math.exp(-rate * (now - last[p]))))
        new = t.observe(changed, last[p], now, rate)
        if changed and events and last[p] < events[-1][1]:
            events[-1] = (max(events[-1][0], last[p]), events[-1][1])
            assert not new
        elif changed:
            events.append((last[p], now))
            assert new
        last[p] = now
    n = len(checks)
    weights = [cochange.FORGET ** (n - 1 - j) for j in range(n)]
    assert t.checks == pytest.approx(sum(weights))
    assert t.hits == pytest.approx(sum(w * h for w, (h, _) in zip(weights, checks, strict=True)))
    assert t.expected == pytest.approx(sum(w * e for w, (_, e) in zip(weights, checks, strict=True)))
    assert (t.lo, t.hi) == events[-1] and len(events) > 10
    trusted = (t.checks >= 3 and t.hits >= 0.5 * t.checks and t.hits >= 2 * t.expected)
    assert t.trusted() == trusted
    q = t.hits / t.checks
    assert cochange.value(t, 10.0) == (q * 10.0 if trusted else 0.0)


def test_trust_needs_probation_share_and_lift():
    t = cochange.Tally(hi=10.0)
    for k in range(3):
        t.observe(True, 0.0, 20.0 + k, 1e-9)
    assert not t.trusted()  # three checks weigh 2.71 after forgetting: not yet PROBATION
    t.observe(True, 0.0, 40.0, 1e-9)
    assert (t.lo, t.hi) == (0.0, 10.0)  # one event: the changes over windows overlapping it
    assert t.trusted() and cochange.pulled(t, 1.0, 5.0, 0.5)
    assert not cochange.pulled(t, 1.0, 15.0, 0.5)  # the event is no news to that copy
    assert not cochange.pulled(t, 0.4, 5.0, 0.5)  # worth less than the threshold
    busy = cochange.Tally(hi=10.0)
    for k in range(5):
        busy.observe(True, 0.0, 20.0 + k, 1.0)  # a page that changes anyway: no lift
    assert busy.hits == pytest.approx(busy.expected) and not busy.trusted()



def same_shard(host: str, count: int) -> list[str]:
    """``count`` host names on the shard of ``host``: the population a host's co-change
    trust is pooled over is its shard's."""
    shard = shard_of(host, DEFAULT_SHARDS)
    return [h for h in (f"t{i}.test" for i in range(1000)) if shard_of(h, DEFAULT_SHARDS) == shard][:count]


def test_a_lying_host_among_truthful_ones_gains_nothing(redis_url, namespace):
    """Trust pooled over hosts: three hosts of l.test's shard whose pages change together make
    the shard's population trusted, so a host with no checks of its own starts trusted; the
    lying host (its pages change together once, day 22.5, then only p0 changes, daily) still
    has p1 and p2 fetched no more than without the evidence: its own failed checks outweigh the
    population's after a few (fails without the trust rule: every change of p0 would bring p1
    and p2 forward)."""
    changes, added = together(90, 9, names=same_shard("l.test", 3))
    lie, lie_added = lying(70)
    for u in lie:  # the liar joins a population that has been checked for 20 days
        changes[u] = [c + 20 * DAY for c in lie[u]]
        added[u] = lie_added[u] + 20 * DAY
    runs = {}
    for on in (True, False):
        f = frontier(redis_url, f"{namespace}-{on}", cochange=on)
        runs[on] = replay(f, changes, added, 90, step=2 * HOUR)
        if on:
            other = same_shard("l.test", 1)[0]
            info, truthful = f.neighbours("l.test"), f.neighbours(other, f"http://{other}/p0")
        f.close()
    assert truthful["trusted"] and not info["trusted"]
    for url in ("http://l.test/p1", "http://l.test/p2"):
        assert len(runs[True][url]) <= len(runs[False][url])


def test_pooled_share_against_an_independent_computation():
    """cochange.pooled's share is the posterior mean of a binomial share under a Beta prior of
    strength POOL_STRENGTH centred on the population's share: checked against the mean of
    p^(a + h - 1) (1 - p)^(b + n - h - 1) integrated numerically over p (integer counts, no
    forgetting), and the hits expected by chance shrunk by the same pseudo-checks."""
    p = np.linspace(0.0, 1.0, 200_001)[1:-1]
    population = cochange.Tally(checks=40.0, hits=28.0, expected=4.0)
    p0 = 28.0 / 40.0
    a, b = cochange.POOL_STRENGTH * p0, cochange.POOL_STRENGTH * (1 - p0)
    for n, h in ((0, 0), (1, 1), (2, 0), (5, 4), (12, 3)):
        own = cochange.Tally(checks=float(n), hits=float(h), expected=0.3 * n, events=2.0)
        density = p ** (a + h - 1) * (1 - p) ** (b + n - h - 1)
        mean = float(np.sum(p * density) / np.sum(density))
        got = cochange.pooled(own, population)
        assert got.share() == pytest.approx(mean, rel=1e-4)
        assert got.expected == pytest.approx(0.3 * n + cochange.POOL_STRENGTH * 4.0 / 40.0)
    # no prior: a population of fewer than POOL_MIN checks, or a host with one confirmed event
    few = cochange.Tally(checks=cochange.POOL_MIN - 1, hits=5.0)
    own = cochange.Tally(checks=1.0, hits=1.0, events=2.0)
    assert cochange.pooled(own, few) == own and not cochange.pooled(own, few).trusted()
    once = cochange.Tally(checks=1.0, hits=1.0, events=1.0)
    assert cochange.pooled(once, population) == once
    # a host with two confirmed events and one check of each takes the population's verdict
    assert cochange.pooled(own, population).trusted()
    assert not cochange.pooled(own, cochange.Tally(checks=40.0, hits=10.0, expected=1.0)).trusted()


def test_population_tally_forgets_as_stated():
    """The population tally is sum_j POOL_FORGET^(n-1-j) x_j over every host's checks."""
    rng = np.random.default_rng(3)
    pop = cochange.Tally()
    xs = []
    for k in range(300):
        changed, rate, tau = bool(rng.random() < 0.3), float(rng.exponential(1e-5)), 3600.0 * (k % 7 + 1)
        cochange.observe_population(pop, changed, 0.0, tau, rate)
        xs.append((1.0 if changed else 0.0, 1 - math.exp(-rate * tau)))
    w = [cochange.POOL_FORGET ** (len(xs) - 1 - j) for j in range(len(xs))]
    assert pop.checks == pytest.approx(sum(w))
    assert pop.hits == pytest.approx(sum(wj * h for wj, (h, _) in zip(w, xs, strict=True)))
    assert pop.expected == pytest.approx(sum(wj * e for wj, (_, e) in zip(w, xs, strict=True)))


def test_a_new_host_of_a_trusted_shard_is_trusted_before_its_probation(redis_url, namespace):
    """Trust pooled over hosts: a host of two pages that joins a shard whose hosts' pages
    change together is trusted once two of its own events were confirmed (one check each),
    before the 4 checks it needs alone, and its next changes bring its other page forward:
    more pages brought forward than in the same run without it (fails without the pooling:
    trusted only from its 4th confirmed event, after the run)."""
    changes, added = together(60, 6, names=same_shard("l.test", 3))
    joined, joined_added = dict(changes), dict(added)
    for i in range(2):  # joins on day 30, changes together every 6 days
        joined[f"http://l.test/p{i}"] = [30 * DAY + k * 6 * DAY + 0.5 * DAY for k in range(1, 5)]
        joined_added[f"http://l.test/p{i}"] = 30 * DAY + i * DAY
    pulls, seen = {}, []
    for name, (ch, ad) in {"with": (joined, joined_added), "without": (changes, added)}.items():
        f = frontier(redis_url, f"{namespace}-{name}")
        note = (lambda f=f: seen.append(f.neighbours("l.test"))) if name == "with" else None
        replay(f, ch, ad, 60, step=2 * HOUR, after_observe=note)
        pulls[name] = f.stats(now=60 * DAY)["cochange_pulls"]
        f.close()
    early = [n for n in seen if n["trusted"] and n["checks"] < cochange.PROBATION - 1e-9]
    assert early and all(n["events"] >= cochange.POOL_EVENTS for n in early)
    assert pulls["with"] > pulls["without"]  # the new host's pages were brought forward

"""Frontier.signal_many on a real Redis: claims of sitemaps, feeds and pushes, checked per host
and source against what fetches find (lua/hint.lua, lua/signals.lua), and the Python statement
of the same rules (frontier_rate/math/evidence.py) agreeing with the Lua step by step."""

from __future__ import annotations

import logging
import math
import random

import pytest
from redis_servers import both_servers  # noqa: F401, I001  (every test on both script paths)

from frontier_rate import Frontier
from frontier_rate.math import evidence

DAY = 86400.0


def frontier(redis_url: str, namespace: str, **kw) -> Frontier:
    opts = {"budget": 1000.0, "min_host_delay": 0.0, "min_interval": 60.0, "seed": 1}
    opts.update(kw)
    return Frontier(redis_url, namespace=namespace, **opts)


def fetch_all(f: Frontier, now: float, fingerprints: dict[str, str]) -> dict[str, object]:
    """Lease and observe everything due at ``now``; the observations by URL."""
    out: dict[str, object] = {}
    while got := [d for d in f.next_requests(1000, now=now) if d.url not in out]:
        obs = f.observe_many([(d, {"fingerprint": fingerprints[d.url], "fetched_at": now})
                              for d in got])
        out.update({d.url: o for d, o in zip(got, obs, strict=True)})
    return out


def due_of(f: Frontier, url: str) -> float:
    return f.page(url)["next_due"]


def test_a_trusted_changed_claim_makes_the_page_due_at_once(redis_url, namespace):
    f = frontier(redis_url, namespace, min_interval=6 * 3600.0)
    urls = [f"http://s.test/{i}" for i in range(6)]
    f.add_many(urls, now=0.0)
    fetch_all(f, 0.0, dict.fromkeys(urls, "v0"))
    # three claims that fetches confirm: the pair (s.test, sitemap) passes probation
    for k, url in enumerate(urls[:3]):
        assert f.signal_many([(url, 100.0 + k, "sitemap")], now=200.0)["held"] == 1
    fetch_all(f, 4 * DAY, {u: "v1" if u in urls[:3] else "v0" for u in urls})
    trust = f.signal_trust("s.test", "sitemap")
    assert trust == {"checked": 3, "bad": 0, "trusted": True, "ignored": False}
    t = 4 * DAY + 500.0
    assert due_of(f, urls[4]) > t + 3600
    counts = f.signal_many([(urls[4], t - 100.0, "sitemap")], now=t)
    assert counts["due"] == 1
    assert due_of(f, urls[4]) == pytest.approx(t - 100.0)
    # a claim about a date before the last fetch moves the next fetch later
    before = due_of(f, urls[5])
    assert f.signal_many([(urls[5], 50.0, "sitemap")], now=t)["postponed"] == 1
    assert due_of(f, urls[5]) > before
    # confirmed by the fetch: the estimator learns a dated change
    obs = fetch_all(f, t, {u: "v2" for u in urls})
    assert obs[urls[4]].changed and obs[urls[4]].dated
    assert f.stats(now=t)["claims"] == 5


def test_a_lying_sitemap_is_ignored_with_one_warning_and_moves_nothing(redis_url, namespace, caplog):
    f = frontier(redis_url, namespace)
    urls = [f"http://liar.test/{i}" for i in range(12)]
    f.add_many(urls, now=0.0)
    fetch_all(f, 0.0, dict.fromkeys(urls, "same"))
    caplog.set_level(logging.INFO, logger="frontier_rate.engine.frontier")
    t = 1000.0
    for _ in range(3):  # lastmod = the time of the sitemap fetch; the pages never change
        f.signal_many([(u, t, "sitemap") for u in urls], now=t)
        t += 2 * DAY
        fetch_all(f, t, dict.fromkeys(urls, "same"))
    trust = f.signal_trust("liar.test", "sitemap")
    assert trust["ignored"] and not trust["trusted"] and trust["bad"] >= 3
    assert f.stats(now=t)["signal_sources_ignored"] == 1
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "liar.test" in r.message]
    assert len(warnings) == 1 and "sitemap" in warnings[0].message
    dues = {u: due_of(f, u) for u in urls}
    counts = f.signal_many([(u, t + 10.0, "sitemap") for u in urls], now=t + 20.0)
    assert counts["held"] == len(urls)
    assert {u: due_of(f, u) for u in urls} == dues  # an ignored source moves no schedule


def test_future_dates_fail_at_once_and_constant_dates_fail_after_a_change(redis_url, namespace):
    f = frontier(redis_url, namespace)
    f.add_many(["http://fut.test/a", "http://const.test/a"], now=0.0)
    fetch_all(f, 0.0, {"http://fut.test/a": "x", "http://const.test/a": "x"})
    assert f.signal_many([("http://fut.test/a", 1e6, "feed")], now=100.0)["future"] == 1
    assert f.signal_trust("fut.test", "feed")["ignored"]
    # a constant lastmod (before any fetch) while the page changes: the claim after the fetch
    # that found the change contradicts it
    f.signal_many([("http://const.test/a", -5.0, "sitemap")], now=100.0)
    fetch_all(f, 3 * DAY, {"http://const.test/a": "y", "http://fut.test/a": "x"})
    f.signal_many([("http://const.test/a", -5.0, "sitemap")], now=3 * DAY + 10)
    assert f.signal_trust("const.test", "sitemap") == {"checked": 1, "bad": 1, "trusted": False,
                                                         "ignored": True}


def test_unknown_urls_are_added_only_with_discover(redis_url, namespace):
    f = frontier(redis_url, namespace)
    assert f.signal_many([("http://new.test/a", None, "push")], now=0.0)["unknown"] == 1
    assert f.page("http://new.test/a") is None
    counts = f.signal_many([("http://new.test/a", None, "push"), ("http://new.test/a", 5.0, "push")],
                         now=0.0, discover=True)
    assert counts["unknown"] == 2 and counts["added"] == 1
    assert f.page("http://new.test/a")["status"] == "new"


@pytest.mark.parametrize("item, words", [
    (("ftp://x.test/a", None, "push"), "http or https"),
    (("http://x.test/a", float("nan"), "push"), "changed_at"),
    (("http://x.test/a", "2024-01-01", "push"), "changed_at"),
    (("http://x.test/a", None, "bad source!"), "source"),
    (("http://x.test/a", None), "(url, changed_at or None, source)"),
])
def test_a_bad_hint_is_refused_by_name_and_nothing_is_written(redis_url, namespace, item, words):
    f = frontier(redis_url, namespace)
    f.add("http://x.test/ok", now=0.0)
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        f.signal_many([("http://x.test/ok", None, "push"), item], now=1.0)
    assert f.stats(now=1.0)["claims"] == 0


def test_a_namespace_never_told_anything_keeps_no_claim_state(redis_url, namespace):
    """Signals are off until a claim comes: fetches, re-plans and early fetches write no
    claim or trust record and count nothing."""
    f = frontier(redis_url, namespace, fill_budget=True)
    urls = [f"http://quiet.test/{i}" for i in range(5)]
    f.add_many(urls, now=0.0)
    fetch_all(f, 0.0, dict.fromkeys(urls, "v0"))
    fetch_all(f, 3 * DAY, {u: f"v{i % 2}" for i, u in enumerate(urls)})
    f.resolve(now=3 * DAY)
    f.next_requests(10, now=3 * DAY + 120.0)
    for shard in range(f.shards):
        assert not f.client.exists(f.keys.signal_pages(shard), f.keys.signal_trust(shard))
    stats = f.stats(now=3 * DAY)
    assert stats["claims"] == 0 and stats["signal_sources_ignored"] == 0


def python_trace(script: list, urls: list[str]) -> list:
    """The outcomes evidence.py gives for ``script`` (the same steps the engine runs)."""
    records: dict[str, evidence.Record | None] = dict.fromkeys(urls)
    tallies: dict[str, evidence.Tally] = {}
    last: dict[str, float] = {}
    version: dict[str, int] = dict.fromkeys(urls, 0)
    seen: dict[str, int] = {}
    out = []
    for step in script:
        if step[0] == "hint":
            _, url, claim, source, now = step
            rec, outcome, checks = evidence.on_hint(
                records[url], lambda s: tallies.get(s, evidence.Tally()), claim, source, now,
                1 if url in last else 0, last.get(url, 0.0), False)
            for src, good in checks:
                tallies[src] = tallies.get(src, evidence.Tally()).check(good)[0]
            records[url] = rec
            out.append(("hint", url, evidence.OUTCOMES[outcome]))
        elif step[0] == "change":
            version[step[1]] += 1
        else:
            _, url, now = step
            changed = url in seen and seen[url] != version[url]
            if url in last:
                rec, since, checks = evidence.on_observe(
                    records[url], lambda s: tallies.get(s, evidence.Tally()), changed, last[url], now)
                for src, good in checks:
                    tallies[src] = tallies.get(src, evidence.Tally()).check(good)[0]
                records[url] = rec
            else:
                since = None
            seen[url], last[url] = version[url], now
            out.append(("fetch", url, changed, since is not None))
    out.append(("tallies", {s: (t.checked, t.bad) for s, t in sorted(tallies.items())}))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_lua_and_python_agree_on_random_claims_and_fetches(redis_url, namespace, seed):
    rng = random.Random(seed)
    urls = [f"http://agree{seed}.test/{i}" for i in range(4)]
    sources = ["sitemap", "feed"]
    script, now = [], 0.0
    for _ in range(160):
        now += rng.choice([30.0, 600.0, 5000.0])
        url = rng.choice(urls)
        r = rng.random()
        if r < 0.25:
            script.append(("change", url))
        elif r < 0.55:
            script.append(("fetch", url, now))
        else:
            kind = rng.random()
            claim = (None if kind < 0.15 else now + 1e5 if kind < 0.2
                     else now - rng.choice([10.0, 1000.0, 20000.0, 1e6]))
            script.append(("hint", url, claim, rng.choice(sources), now))
    f = frontier(redis_url, namespace, fill_budget=False)
    f.add_many(urls, now=0.0)
    version = dict.fromkeys(urls, 0)
    lua = []
    for step in script:
        if step[0] == "hint":
            _, url, claim, source, t = step
            counts = f.signal_many([(url, claim, source)], now=t)
            lua.append(("hint", url, next(k for k, v in counts.items() if v)))
        elif step[0] == "change":
            version[step[1]] += 1
        else:
            _, url, t = step
            # lease exactly this page: make it due first, take what is due, hand back the rest
            host = f"agree{seed}.test"
            f.client.zadd(f.keys.queue(f._shard_of(host), host), {_pid(url): 0})
            got = f.next_requests(100, now=t)
            mine = [d for d in got if d.url == url]
            assert mine, url
            o = f.observe(mine[0], fingerprint=str(version[url]), fetched_at=t)
            f.release_many([d for d in got if d.url != url], now=t)
            lua.append(("fetch", url, o.changed, o.dated))
    tallies = {}
    for source in sources:
        tr = f.signal_trust(f"agree{seed}.test", source)
        if tr["checked"]:
            tallies[source] = (float(tr["checked"]), float(tr["bad"]))
    lua.append(("tallies", tallies))
    py = python_trace(script, urls)
    py[-1] = ("tallies", {s: v for s, v in py[-1][1].items()})
    assert lua == py


def _pid(url: str) -> bytes:
    from frontier_rate.store.keys import page_id

    return page_id(url)


def test_the_postponed_and_hinted_due_times_are_evidence_py_s(redis_url, namespace):
    assert evidence.postponed_due(due=100.0, planned=50.0, last_fetch=40.0, received=80.0) == 130.0
    assert evidence.postponed_due(due=100.0, planned=10.0, last_fetch=40.0, received=300.0) == \
        40.0 + evidence.POSTPONE_MAX * 10.0
    assert evidence.postponed_due(due=500.0, planned=10.0, last_fetch=40.0, received=60.0) == 500.0
    assert evidence.hinted_due(due=500.0, claim=300.0, now=400.0) == 300.0
    assert math.isclose(evidence.hinted_due(due=200.0, claim=300.0, now=400.0), 200.0)

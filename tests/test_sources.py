"""Sources in the engine, on a real Redis: pages that are sitemaps or feeds (``add_many``'s
``source``, flag ``F_SOURCE``; issue 35). A source keeps its kind through fetches and weight
updates, is counted apart, is not in the cells the threshold is solved with (nor where the
max_interval floor is stretched to the budget) and ranks its first fetch by its weight. Its
planned interval, first index and pooling are checked against the Python statement in
tests/test_engine_sim.py."""

from __future__ import annotations

import itertools

import pytest
from redis_servers import both_servers  # noqa: F401, I001  (every test on both script paths)

from frontier_rate import Frontier
from frontier_rate.engine.threshold import FLOOR_SHARE

SITEMAP = "http://s.test/sitemap.xml"


def frontier(redis_url: str, namespace: str, **kw) -> Frontier:
    opts = {"estimator": "interval", "objective": "freshness", "budget": 1.0,
            "min_host_delay": 0.0, "min_interval": 1.0, "max_interval": 1e4, "lease_timeout": 1e6,
            "seed": 1, "fill_budget": False}
    opts.update(kw)
    return Frontier(redis_url, namespace=namespace, **opts)


def test_a_source_keeps_its_kind_and_is_counted_once(redis_url, namespace):
    f = frontier(redis_url, namespace)
    f.add_many(["http://s.test/a", (SITEMAP, 0.3, None, 0, True)], now=0.0)
    assert f.page(SITEMAP)["source"] is True and f.page("http://s.test/a")["source"] is False
    assert f.stats(now=0.0)["sources"] == 1
    # a weight update without the flag (what the adapters' re-weighing does not send) keeps it
    f.add_many([(SITEMAP, 0.6)], now=1.0)
    assert f.page(SITEMAP)["source"] is True and f.page(SITEMAP)["weight"] == pytest.approx(0.6)
    f.add_many([(SITEMAP, 0.6, None, 0, True)], now=1.0)
    assert f.stats(now=1.0)["sources"] == 1
    # a known page told to be a source becomes one
    f.add_many([("http://s.test/a", 1.0, None, 0, True)], now=2.0)
    assert f.page("http://s.test/a")["source"] is True and f.stats(now=2.0)["sources"] == 2
    # fetches keep the kind
    got = f.next_requests(10, now=3.0)
    assert {d.url for d in got} == {"http://s.test/a", SITEMAP}
    f.observe_many([(d, {"fingerprint": "v1", "fetched_at": 3.0}) for d in got])
    assert f.page(SITEMAP)["source"] is True and f.page(SITEMAP)["fetches"] == 1
    f.close()


def test_a_source_that_is_gone_is_no_longer_counted(redis_url, namespace):
    f = frontier(redis_url, namespace)
    f.add_many([(SITEMAP, 0.3, None, 0, True)], now=0.0)
    t = 0.0
    while f.page(SITEMAP)["status"] != "gone":
        got = f.next_requests(1, now=t)
        assert t < 1e7, "the source should go after repeated 404s"
        for d in got:
            f.failed(d, "404", status=404, now=t)
        t = max(t + 1.0, f.next_due_time() or t)
    assert f.stats(now=t)["sources"] == 0
    f.close()


@pytest.mark.parametrize("value", [1, "yes", None])
def test_a_source_flag_that_is_not_a_bool_is_refused_by_name(redis_url, namespace, value):
    f = frontier(redis_url, namespace)
    with pytest.raises(ValueError, match="source of 'http://s.test/sitemap.xml'"):
        f.add_many([(SITEMAP, 0.3, None, 0, value)], now=0.0)
    assert f.stats(now=0.0)["pages"] == 0
    f.close()


def test_sources_are_left_out_where_the_floor_is_stretched(redis_url, namespace):
    f = frontier(redis_url, namespace, budget=0.01, max_interval=1000.0)
    f.add_many([f"http://h{i % 7}.example/{i}" for i in range(50)]
               + [(f"http://h{i}.example/sitemap.xml", 0.3, None, 0, True) for i in range(7)],
               now=0.0)
    f.resolve(now=0.0)
    stats = f.stats(now=0.0)
    assert stats["pages"] == 57 and stats["sources"] == 7
    assert stats["max_interval_effective"] == pytest.approx(50 / (FLOOR_SHARE * 0.01))
    f.close()


def test_a_source_never_fetched_comes_after_the_pages_never_fetched(redis_url, namespace):
    f = frontier(redis_url, namespace, budget_first_fetches=True, budget=1.0)
    pages = [f"http://h{i}.example/" for i in range(4)]
    sitemaps = [(f"http://h{i}.example/sitemap.xml", 5.0, None, 0, True) for i in range(4)]
    f.add_many(sitemaps + pages, now=0.0)  # the sources added first, with a larger weight
    f.resolve(now=0.0)
    leased = []
    t = 0.0
    while len(leased) < 8:
        got = f.next_requests(1, now=t)
        leased += [d.url for d in got]
        f.observe_many([(d, {"fingerprint": "v", "fetched_at": t}) for d in got])
        t += 1.0
    assert set(leased[:4]) == set(pages)
    assert set(leased[4:]) == {u for u, *_ in sitemaps}
    f.close()


def test_a_page_made_a_source_leaves_its_host_prior(redis_url, namespace):
    """A page pooled into its host's prior (two fetches or more) that is then added as a source
    takes its log-rate out of the pool: the next new page of the host starts where it would
    had the page never pooled (here prior_rate: one page, too few for the population level)."""
    f = frontier(redis_url, namespace, budget=100.0, prior_rate=0.01)
    url = "http://s.test/x"
    f.add(url, now=0.0)
    t = 0.0
    while f.page(url)["fetches"] < 3:
        t = max(t, f.next_due_time() or t)
        got = f.next_requests(10, now=t)
        f.observe_many([(d, {"fingerprint": "same", "fetched_at": t}) for d in got])
        t += 1.0
    f.add("http://s.test/before", now=t)
    assert f.page("http://s.test/before")["estimate"] != pytest.approx(0.01, rel=1e-6)
    f.add_many([(url, 1.0, None, 0, True)], now=t)
    f.add("http://s.test/after", now=t)
    assert f.page("http://s.test/after")["estimate"] == pytest.approx(0.01, rel=1e-12)
    f.close()


def _crawl(f, start: float, until: float, changes=lambda url: False,
           times: dict[str, list[float]] | None = None) -> list[str]:
    """Lease and observe whatever the frontier hands out from ``start`` to ``until``,
    sleeping to ``next_call_time``; a page for which ``changes(url)`` is true has changed at
    every fetch, every other page never. The URLs leased, in order; the lease times of each
    URL that is a key of ``times`` are appended to its list."""
    leased, t, versions = [], start, itertools.count()
    while t < until:
        got = f.next_requests(10, now=t)
        leased += [d.url for d in got]
        for d in got:
            if times is not None and d.url in times:
                times[d.url].append(t)
        f.observe_many([(d, {"fingerprint": f"v{next(versions)}" if changes(d.url) else "v",
                             "fetched_at": t}) for d in got])
        t = max(t + 1.0, f.next_call_time(now=t) or t + 1.0)
    return leased


@pytest.mark.parametrize("budget_first_fetches", [True, False])
def test_a_source_first_read_is_valued_where_every_fetch_counts(redis_url, namespace,
                                                                 budget_first_fetches):
    """Where every fetch takes a token (``budget_first_fetches``) a source never read whose
    host has other pages is read only while its index (w_eff = w / lambda: 2 at the prior
    rate 1, where the pages' is 5) is at least its host's threshold; held, it is looked at
    again max_interval later (by then the pages' fetches have lowered the rate it starts
    from, and it is read). One of weight below one page's (it lists fewer pages than a fetch
    of one of them is worth) is held for as long as its host's pages, planned far apart at
    this budget, could not check its claims PROBATION times within max_interval. A source
    alone on its host is read at once (it is how the host's pages are found), and with first
    fetches free of the budget (the default) every source is read."""
    f = frontier(redis_url, namespace, budget=0.004, prior_rate=1.0, max_interval=1e4,
                 budget_first_fetches=budget_first_fetches)
    pages = [f"http://known.test/{i}" for i in range(6)] + [f"http://few.test/{i}" for i in range(2)]
    weighed = [(url, 5.0 if "known" in url else 0.001) for url in pages]  # few.test's: rare
    held, few = "http://known.test/sitemap.xml", "http://few.test/sitemap.xml"
    alone = "http://alone.test/sitemap.xml"
    f.add_many(weighed + [(held, 2.0, None, 0, True), (few, 0.6, None, 0, True),
                        (alone, 0.3, None, 0, True)], now=0.0)
    f.resolve(now=0.0)
    assert f.stats(now=0.0)["nu"] > 2.0 and f.page(held)["estimate"] == pytest.approx(1.0)
    leased = _crawl(f, 0.0, 5000.0)
    assert set(pages) <= set(leased) and alone in leased
    if budget_first_fetches:
        assert held not in leased and f.page(held)["fetches"] == 0
        assert few not in leased and f.page(few)["fetches"] == 0
        assert f.page(held)["next_due"] == pytest.approx(1e4)  # held at 0
        later = _crawl(f, 5000.0, 1.2e4)
        assert held in later and few not in later
        # (later the pages that never change are no longer worth the budget, ν falls to 0,
        # few.test's pages plan enough fetches to check its claims, and it may be read:
        # issue 60)
        assert f.stats(now=1.2e4)["nu"] > 0
    else:
        assert held in leased and few in leased
    f.close()


def test_a_light_source_is_read_where_its_host_pages_can_check_it(redis_url, namespace):
    """A source never read that weighs less than a page, whose index (w / lambda, its
    host's pooled rate) passes the threshold and whose host's pages change, is held while
    its host's pages plan fewer than PROBATION (3) fetches per max_interval: at this budget
    every page is planned at ~1.25 fetches per max_interval, so two pages plan ~2.5. On a
    host with four such pages it is read."""
    f = frontier(redis_url, namespace, budget=0.0006, prior_rate=1e-3, max_interval=1e4,
                 budget_first_fetches=True)
    two = [f"http://two.test/{i}" for i in range(2)]
    four = [f"http://four.test/{i}" for i in range(4)]
    unchecked, checked = "http://two.test/sitemap.xml", "http://four.test/sitemap.xml"
    f.add_many(two + four + [(unchecked, 0.6, None, 0, True), (checked, 0.6, None, 0, True)],
               now=0.0)
    f.resolve(now=0.0)
    leased = _crawl(f, 0.0, 5e4, changes=lambda url: url in two + four)
    assert set(two + four) <= set(leased)
    assert checked in leased and unchecked not in leased
    assert f.page(unchecked)["fetches"] == 0 and f.page(checked)["fetches"] >= 1
    assert f.page(unchecked)["next_due"] > 4e4  # held again at each look
    rate = f.page(unchecked)["estimate"]
    assert rate * 1e4 > 1  # not a quiet host
    assert 0.6 / rate > f.stats(now=5e4)["nu"]  # its index passes the threshold
    assert sum(f.page(u)["p"] for u in two) * 1e4 < 3 <= sum(f.page(u)["p"] for u in four) * 1e4
    f.close()


def test_a_light_source_is_held_where_its_host_pages_do_not_change(redis_url, namespace):
    """A source never read that weighs less than a page is held, where every fetch takes a
    token, while the rate it starts from (its host's pooled rate, the pages' evidence) is
    below one change per max_interval: a read there brings less news than a page fetch. On
    a host whose pages change at every fetch it is read. The quiet host's pages plan at
    least PROBATION (3) fetches per max_interval, so it is not held for want of checks."""
    f = frontier(redis_url, namespace, budget=0.004, prior_rate=1e-3, max_interval=1e4,
                 budget_first_fetches=True)
    busy = [f"http://busy.test/{i}" for i in range(4)]
    still = [f"http://still.test/{i}" for i in range(4)]
    f.add_many(busy + still, now=0.0)
    f.resolve(now=0.0)
    _crawl(f, 0.0, 5e4, changes=lambda url: url in busy)
    changing, quiet = "http://busy.test/sitemap.xml", "http://still.test/sitemap.xml"
    f.add_many([(changing, 0.9, None, 0, True), (quiet, 0.9, None, 0, True)], now=5e4)
    f.resolve(now=5e4)
    assert f.page(changing)["estimate"] * 1e4 > 1 > f.page(quiet)["estimate"] * 1e4
    assert sum(f.page(u)["p"] for u in still) * 1e4 >= 3  # enough checks on the quiet host
    leased = _crawl(f, 5e4, 8e4, changes=lambda url: url in busy)
    assert changing in leased and quiet not in leased
    assert f.page(quiet)["fetches"] == 0 and f.page(changing)["fetches"] >= 1
    f.close()


def test_a_light_source_read_before_is_read_at_most_once_per_max_interval(redis_url, namespace):
    """Issue 35, item 4: a source that covers few pages is probed at most once per
    max_interval. Once read, a source of weight < 1 (here 0.6: two listed pages at the
    adapters' 0.3) is planned at least max_interval apart and is not fetched early within it
    (lib.shortest_interval), although it changes at every read and spare tokens are there:
    the engine without the bound read it 211 times in these 6e4 s, 99-500 s apart, most of
    the budget. A source of weight 2 is read as its index asks, more often than that."""
    f = frontier(redis_url, namespace, budget=0.01)
    light, heavy = "http://light.test/sitemap.xml", "http://heavy.test/sitemap.xml"
    f.add_many([f"http://light.test/{i}" for i in range(2)]
               + [f"http://heavy.test/{i}" for i in range(4)]
               + [(light, 0.6, None, 0, True), (heavy, 2.0, None, 0, True)], now=0.0)
    reads: dict[str, list[float]] = {light: [], heavy: []}
    _crawl(f, 0.0, 6e4, changes=lambda url: True, times=reads)
    gaps = {url: [b - a for a, b in itertools.pairwise(ts)] for url, ts in reads.items()}
    assert 3 <= len(reads[light]) <= 6 and min(gaps[light]) >= 1e4 * (1 - 1e-12)  # µs times
    assert len(reads[heavy]) > 6 and min(gaps[heavy]) < 1e4
    assert f.page(light)["p"] * 1e4 <= 1.0 + 1e-9
    f.close()


def test_sources_are_not_in_the_cells_the_threshold_is_solved_with(redis_url, namespace):
    """The threshold solve plans pages: a source (added as one, or a page made one) is not
    in the cell aggregates, and its fetches move nothing there, so the sitemaps of many small
    hosts do not raise the threshold the pages are planned with."""
    f = frontier(redis_url, namespace, budget=0.01, max_interval=1000.0)
    pages = [f"http://h{i}.example/" for i in range(6)]
    f.add_many(pages, now=0.0)
    f.resolve(now=0.0)
    nu_pages = f.stats(now=0.0)["nu"]
    cells_pages = sum(c[0] for c in f.cells().values())
    f.add_many([(f"http://h{i}.example/sitemap.xml", 0.3, None, 0, True) for i in range(6)]
               + [("http://h0.example/made", 1.0)], now=0.0)
    f.add_many([("http://h0.example/made", 1.0, None, 0, True)], now=0.0)  # made a source
    f.resolve(now=0.0)
    assert sum(c[0] for c in f.cells().values()) == cells_pages == 6
    assert f.stats(now=0.0)["nu"] == pytest.approx(nu_pages, rel=1e-9)
    assert f.stats(now=0.0)["sources"] == 7
    assert "http://h0.example/sitemap.xml" in _crawl(f, 0.0, 5000.0)
    assert f.page("http://h0.example/made")["fetches"] >= 1
    assert sum(c[0] for c in f.cells().values()) == 6
    f.close()

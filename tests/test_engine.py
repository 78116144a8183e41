"""Frontier behaviour on a real Redis server, on virtual clocks."""

from __future__ import annotations

import math
import multiprocessing
import re
import time
from collections import Counter, OrderedDict, defaultdict

import pytest
from redis_servers import both_servers  # noqa: F401, I001  (every test on both script paths)

from frontier_rate import Frontier, Lease
from frontier_rate.engine.results import BACKOFF_BASE
from frontier_rate.engine.shards import BURST_SECONDS
from frontier_rate.store.keys import float32


def frontier(redis_url, namespace, **kw) -> Frontier:
    options = {"estimator": "sa", "budget": 100.0, "min_host_delay": 0.0, "min_interval": 10.0,
               "max_interval": 1000.0, "lease_timeout": 60.0, "seed": 1}
    options.update(kw)
    return Frontier(redis_url, namespace=namespace, **options)


def test_add_page_and_first_dispatch(redis_url, namespace):
    f = frontier(redis_url, namespace)
    assert f.add("http://a.example/x", 2.0, {"k": [1, 2]}, now=0.0) is True
    assert f.add("http://a.example/x", 3.0, now=0.0) is False  # known: weight updated
    assert f.add_many([("http://b.example/", 1.0), "http://c.example/y?q=1"], now=0.0) == 2
    page = f.page("http://a.example/x")
    assert page["weight"] == 3.0 and page["status"] == "new" and page["fetches"] == 0
    assert page["meta"] == {"k": [1, 2]} and page["next_due"] == 0.0
    assert f.page("http://a.example/unknown") is None
    got = f.next_requests(10, now=0.0)
    assert sorted(d.url for d in got) == ["http://a.example/x", "http://b.example/",
                                          "http://c.example/y?q=1"]
    d = next(d for d in got if d.host == "a.example")
    assert d.meta == {"k": [1, 2]} and d.etag is None and d.due == 0.0
    assert f.page(d.url)["status"] == "leased"
    assert f.stats(now=0.0)["leased"] == 3


def test_change_indicator_first_fetch_304_and_fingerprints(redis_url, namespace):
    f = frontier(redis_url, namespace)
    f.add("http://a.example/", now=0.0)
    t, seen = 0.0, []
    steps = [{"fingerprint": "v1"}, {"not_modified": True}, {"fingerprint": "v1"},
             {"fingerprint": "v2"}, {"status": 304}, {"fingerprint": "v2"},
             {"fingerprint": "v3", "etag": '"e3"', "last_modified": "Mon, 01 Jan 2024"}]
    for kwargs in steps:
        (d,) = f.next_requests(1, now=t)
        obs = f.observe(d, fetched_at=t, **kwargs)
        assert obs.accepted
        seen.append(obs.changed)
        t = obs.next_due
    # first fetch is no change; 304 is no change; same fingerprint is no change
    assert seen == [False, False, False, True, False, False, True]
    page = f.page("http://a.example/")
    assert page["fetches"] == 7 and page["changes"] == 2
    assert page["etag"] == '"e3"' and page["last_modified"] == "Mon, 01 Jan 2024"
    (d,) = f.next_requests(1, now=t)
    assert d.etag == '"e3"' and d.last_modified == "Mon, 01 Jan 2024"


def test_a_200_without_validators_drops_the_stored_ones(redis_url, namespace):
    """Issue 60: a site that stops sending ETag / Last-Modified gets no If-None-Match /
    If-Modified-Since any more; a 304 keeps what it does not send again."""
    f = frontier(redis_url, namespace)
    f.add("http://a.example/", now=0.0)
    t = 0.0
    steps = [({"fingerprint": "v1", "etag": '"e1"', "last_modified": "Mon, 01 Jan 2024"},
              ('"e1"', "Mon, 01 Jan 2024")),
             ({"not_modified": True}, ('"e1"', "Mon, 01 Jan 2024")),  # a bare 304 keeps both
             ({"fingerprint": "v2", "etag": '"e2"'}, ('"e2"', None)),  # no Last-Modified now
             ({"fingerprint": "v3"}, (None, None)),  # no validator at all
             ({"fingerprint": "v3", "last_modified": "Tue, 02 Jan 2024"},
              (None, "Tue, 02 Jan 2024"))]
    (d,) = f.next_requests(1, now=t)
    for kwargs, (etag, last_modified) in steps:
        obs = f.observe(d, fetched_at=t, **kwargs)
        assert obs.accepted
        t = obs.next_due
        page = f.page(d.url)
        assert (page["etag"], page["last_modified"]) == (etag, last_modified), kwargs
        (d,) = f.next_requests(1, now=t)  # what the next (conditional) request sends
        assert (d.etag, d.last_modified) == (etag, last_modified), kwargs


def test_observe_needs_fingerprint_or_not_modified(redis_url, namespace):
    f = frontier(redis_url, namespace)
    f.add("http://a.example/", now=0.0)
    (d,) = f.next_requests(1, now=0.0)
    with pytest.raises(ValueError, match="fingerprint"):
        f.observe(d, fetched_at=1.0)


def test_replayed_observe_changes_nothing(redis_url, namespace):
    f = frontier(redis_url, namespace)
    f.add("http://a.example/", now=0.0)
    (d,) = f.next_requests(1, now=0.0)
    first = f.observe(d, fingerprint="a", fetched_at=1.0)
    state = f.page(d.url)
    again = f.observe(d, fingerprint="b", fetched_at=5.0)
    assert again == first
    assert f.page(d.url) == state
    assert f.stats(now=5.0)["fetches"] == 1


def test_expired_lease_is_handed_out_again_and_late_observe_is_rejected(redis_url, namespace):
    f = frontier(redis_url, namespace, lease_timeout=30.0)
    f.add("http://a.example/", now=0.0)
    (first,) = f.next_requests(5, now=0.0)
    assert f.next_requests(5, now=29.0) == []  # leased: never handed out twice
    (second,) = f.next_requests(5, now=30.0)
    assert second.url == first.url and second.token != first.token
    late = f.observe(first, fingerprint="x", fetched_at=31.0)
    assert not late.accepted
    assert f.page(first.url)["fetches"] == 0 and f.page(first.url)["status"] == "leased"
    ok = f.observe(second, fingerprint="x", fetched_at=32.0)
    assert ok.accepted and f.page(first.url)["fetches"] == 1
    # the expired token stays rejected after the page was observed
    assert not f.observe(first, fingerprint="y", fetched_at=33.0).accepted
    assert f.page(first.url)["fetches"] == 1


def test_host_delay_never_broken_over_a_simulated_day(redis_url, namespace):
    """60 pages on 3 hosts want far more fetches than a 300 s host delay allows."""
    f = frontier(redis_url, namespace, min_host_delay=300.0, min_interval=60.0,
                 max_interval=3600.0, budget=10.0)
    hosts = ["a.example", "b.example", "c.example"]
    f.add_many([f"http://{hosts[i % 3]}/{i}" for i in range(60)], now=0.0)
    f.set_host_delay("c.example", 900.0)  # e.g. robots.txt Crawl-delay
    times = defaultdict(list)
    t = 0.0
    while t < 86400.0:
        batch = []
        for d in f.next_requests(50, now=t):
            times[d.host].append(t)
            batch.append((d, {"fingerprint": str(int(t) // 5000), "fetched_at": t}))
        f.observe_many(batch)
        t = max(t + 1e-3, f.next_due_time())
    for host, delay in (("a.example", 300.0), ("b.example", 300.0), ("c.example", 900.0)):
        gaps = [b - a for a, b in zip(times[host], times[host][1:], strict=False)]
        assert min(gaps) >= delay - 1e-6, host
        # the delay is binding: the host is served about once per delay
        assert len(times[host]) >= 86400.0 / delay * 0.95, host


def test_budget_caps_dispatches_over_time(redis_url, namespace):
    """Token bucket: dispatches in any run of T seconds <= budget * T + burst."""
    budget = 2.0
    f = frontier(redis_url, namespace, budget=budget, min_interval=1.0, budget_first_fetches=True)
    f.add_many([f"http://h{i}.example/" for i in range(300)], now=0.0)
    stamps = []
    t = 0.0
    while t < 100.0:
        batch = [(d, {"fingerprint": "x", "fetched_at": t}) for d in f.next_requests(100, now=t)]
        stamps += [t] * len(batch)
        f.observe_many(batch)
        t += 0.25
    burst = budget * BURST_SECONDS + 1.0  # engine.BURST_SECONDS: one second of budget + 1
    assert len(stamps) >= budget * 100.0 * 0.95  # the budget is used
    for i, start in enumerate(stamps):
        window = [s for s in stamps[i:] if s < start + 10.0]
        assert len(window) <= budget * 10.0 + burst


def test_highest_index_first_when_over_budget(redis_url, namespace):
    """Same change rate and age: the index is proportional to the weight."""
    f = frontier(redis_url, namespace, budget=1000.0, objective="changes")
    weights = {f"http://w{i}.example/": float(w) for i, w in enumerate([3, 1, 5, 2, 4])}
    f.add_many(list(weights.items()), now=0.0)
    f.observe_many([(d, {"fingerprint": "x", "fetched_at": 0.0})
                    for d in f.next_requests(10, now=0.0)])
    order = []
    for step in range(5):
        (d,) = f.next_requests(1, now=5000.0 + step)  # all long overdue
        order.append(weights[d.url])
    assert order == [5.0, 4.0, 3.0, 2.0, 1.0]


def test_new_pages_come_before_revisits(redis_url, namespace):
    f = frontier(redis_url, namespace)
    f.add("http://old.example/", 100.0, now=0.0)
    (d,) = f.next_requests(1, now=0.0)
    f.observe(d, fingerprint="x", fetched_at=0.0)
    f.add("http://new.example/", 0.01, now=1.0)
    first = f.next_requests(1, now=5000.0)
    assert [d.url for d in first] == ["http://new.example/"]


def test_gone_after_three_404(redis_url, namespace):
    f = frontier(redis_url, namespace)
    f.add("http://a.example/", now=0.0)
    t = 0.0
    for _ in range(3):
        (d,) = f.next_requests(1, now=t)
        assert f.page(d.url)["status"] == "leased"
        f.failed(d, "HTTP 404", status=404, now=t)
        t = f.page(d.url)["next_due"] or t
    page = f.page("http://a.example/")
    assert page["status"] == "gone" and page["next_due"] is None
    assert f.next_requests(5, now=t + 1e6) == []
    assert f.stats(now=t)["gone"] == 1
    assert f.add("http://a.example/", now=t) is False


def test_404_streak_is_broken_by_other_results(redis_url, namespace):
    f = frontier(redis_url, namespace)
    f.add("http://a.example/", now=0.0)
    t = 0.0
    for status in (404, 404, 503, 404, 404):
        (d,) = f.next_requests(1, now=t)
        f.failed(d, f"HTTP {status}", status=status, now=t)
        t = f.page(d.url)["next_due"]
    assert f.page("http://a.example/")["status"] == "retrying"


def test_failed_fetch_backs_off_exponentially(redis_url, namespace):
    f = frontier(redis_url, namespace, max_interval=1000.0)
    f.add("http://a.example/", now=0.0)
    t, delays = 0.0, []
    for _ in range(6):
        (d,) = f.next_requests(1, now=t)
        f.failed(d, "timeout", now=t)
        due = f.page(d.url)["next_due"]
        delays.append(due - t)
        t = due
    assert delays == [BACKOFF_BASE * 2 ** n for n in range(5)] + [1000.0]  # 60..960, cap
    assert f.page("http://a.example/")["fetches"] == 0  # not an observation
    (d,) = f.next_requests(1, now=t)
    f.observe(d, fingerprint="ok", fetched_at=t)
    assert f.page(d.url)["status"] == "active" and f.page(d.url)["fails"] == 0


def test_observe_with_error_status_counts_as_failure(redis_url, namespace):
    f = frontier(redis_url, namespace)
    f.add("http://a.example/", now=0.0)
    (d,) = f.next_requests(1, now=0.0)
    obs = f.observe(d, status=503, fetched_at=0.0)
    assert not obs.changed and obs.next_due == BACKOFF_BASE
    assert f.page(d.url)["status"] == "retrying"


def test_budget_change_replans_queued_pages(redis_url, namespace):
    """set_budget re-solves ν; the background refresh moves stale due times."""
    f = frontier(redis_url, namespace, budget=0.05, min_interval=1.0, max_interval=1e6,
                 objective="changes", prior_rate=0.01)
    urls = [f"http://h{i}.example/" for i in range(40)]
    f.add_many(urls, now=0.0)
    f.set_budget(1000.0, now=0.0)
    f.observe_many([(d, {"fingerprint": "x", "fetched_at": 0.0})
                    for d in f.next_requests(100, now=0.0)])
    f.set_budget(0.05, now=1.0)
    before = {u: f.page(u)["p"] for u in urls}
    for _ in range(f.shards):
        f.next_requests(0, now=1.0)
    after = {u: f.page(u)["p"] for u in urls}
    assert all(after[u] < before[u] * 0.5 for u in urls)
    for u in urls:
        page = f.page(u)
        planned = 1.0 / page["p"]
        assert page["next_due"] > 0.0 and planned == pytest.approx(
            f.max_interval if planned > f.max_interval * 0.999 else planned)


def test_stats_next_due_time_and_iter_pages(redis_url, namespace):
    f = frontier(redis_url, namespace, min_host_delay=10.0)
    f.add_many([f"http://a.example/{i}" for i in range(5)] + ["http://b.example/"], now=0.0)
    stats = f.stats(now=0.0)
    assert stats["pages"] == 6 and stats["due_now"] == 6 and stats["leased"] == 0
    assert f.next_due_time() == 0.0
    got = f.next_requests(10, now=0.0)
    assert len(got) == 2  # one per host: the host delay
    assert f.next_due_time() == 10.0
    pages = list(f.iter_pages())
    assert sorted(p["url"] for p in pages) == sorted(
        [f"http://a.example/{i}" for i in range(5)] + ["http://b.example/"])
    assert sum(p["status"] == "leased" for p in pages) == 2


def test_next_call_time_is_when_the_next_token_or_due_page_allows_a_lease(redis_url, namespace):
    # budget 0.5/s: the bucket holds 0.5 * BURST_SECONDS + 1 = 1.5 tokens; one is taken at t=0
    f = frontier(redis_url, namespace, budget=0.5, fill_budget=False, budget_first_fetches=True)
    f.add_many([f"http://h{i}.example/" for i in range(3)], now=0.0)
    assert len(f.next_requests(10, now=0.0)) == 1
    left = 0.5 * BURST_SECONDS + 1.0 - 1.0
    expected = (1.0 - left) / 0.5  # when the bucket holds a whole token again
    assert f.next_call_time(now=0.0) == pytest.approx(expected)
    assert f.next_requests(10, now=expected - 0.01) == []
    assert len(f.next_requests(10, now=expected)) == 1


def test_next_call_time_follows_the_due_page_or_the_token_by_fill_budget(redis_url, namespace):
    kw = {"budget": 0.5, "budget_first_fetches": True, "min_interval": 100.0,
          "estimator": "interval"}
    waits = {}
    for fill in (False, True):
        f = frontier(redis_url, f"{namespace}-{fill}", fill_budget=fill, **kw)
        f.add("http://a.example/", now=0.0)
        [d] = f.next_requests(10, now=0.0)
        f.observe(d, fingerprint="v1", fetched_at=0.0)
        due = f.page("http://a.example/")["next_due"]
        assert due >= 100.0  # never before min_interval
        waits[fill] = f.next_call_time(now=0.0, retry=5.0)
        f.close()
    assert waits[False] == pytest.approx(due)  # a token is there long before: the due page binds
    assert waits[True] == pytest.approx(1.0)   # a whole token again at t = 0.5 / 0.5 s
    f = frontier(redis_url, f"{namespace}-empty")
    assert f.next_call_time(now=0.0) is None  # no pages: nothing to wait for


@pytest.mark.parametrize("url, fragment", [
    ("example.com/page", "scheme"),
    ("ftp://example.com/file", "http or https"),
    ("http:///path", "no host"),
    ("http://exa mple.com/", "whitespace"),
    ("http://example.com:99999/", "not a valid URL"),
    ("http://example.com:65536/", "not a valid URL"),
    ("http://example.com/" + "a" * 3000, "too long"),
    ("", "empty"),
    (None, "string"),
])
def test_bad_urls_are_rejected(redis_url, namespace, url, fragment):
    f = frontier(redis_url, namespace)
    with pytest.raises(ValueError, match=fragment):
        f.add(url)


@pytest.mark.parametrize("url", [
    "http://Example.com/a", "https://example.com:1/a?b=c#d", "http://127.0.0.2:8080/p/1",
    "http://127.0.0.2:45123/p/1", "http://example.com:65535", "http://example.com:00080/",
])
def test_the_fast_url_check_agrees_with_urlsplit(url):
    """parse_url's regex path (every port up to 65535) gives urlsplit's host."""
    from urllib.parse import urlsplit

    from frontier_rate.engine.validation import _SIMPLE_URL, parse_url

    assert _SIMPLE_URL.fullmatch(url)
    assert parse_url(url) == urlsplit(url).hostname
    urlsplit(url).port  # noqa: B018 -- a valid port: urlsplit raises otherwise


@pytest.mark.parametrize("item, expected", [
    (("http://a.example/p", 1.0, {"m": {"depth": 3}}, 0, False),
     ("a.example", 1.0, '{"m":{"depth":3}}', 0.0, False)),
    (["http://a.example/p", 2, None, 5000], ("a.example", 2.0, "", 1000.0, False)),
    (("http://a.example/p", -0.0, OrderedDict(a=1), -7), ("a.example", 0.0, '{"a":1}', -7.0, False)),
    (("http://a.example/p", 1e30, None, 2.5, True), ("a.example", float32(1e30), "", 2.5, True)),
    ("http://A.example/p", ("a.example", 1.0, "", 0.0, False)),
])
def test_new_page_checks_and_normalises_a_page(item, expected):
    """The fast paths (a tuple, a float weight, an int priority, a dict meta) give what the
    general checks give: weights as the float32 stored, priorities clamped."""
    from frontier_rate.engine.validation import new_page

    host, url, weight, meta, priority, source = new_page(item)
    assert (host, weight, meta, priority, source) == expected
    assert type(weight) is float


@pytest.mark.parametrize("item, fragment", [
    (("http://a.example/", -1.0), "weight of 'http://a.example/' must be >= 0"),
    (("http://a.example/", math.nan), "weight of 'http://a.example/' must be finite"),
    (("http://a.example/", math.inf), "weight of 'http://a.example/' must be finite"),
    (("http://a.example/", 1e31), "weight of 'http://a.example/' must be <= 1e30"),
    (("http://a.example/", "1"), "weight of 'http://a.example/' must be a number"),
    (("http://a.example/", 1.0, None, True), "priority of 'http://a.example/' must be a number"),
    (("http://a.example/", 1.0, None, math.nan), "priority of 'http://a.example/' must be finite"),
    (("http://a.example/", 1.0, ["x"]), "meta of 'http://a.example/' must be a dict"),
    (("http://a.example/", 1.0, None, 0, 1), "source of 'http://a.example/' must be True or False"),
    (b"http://a.example/", "url must be a string, got bytes"),
    (("http://a.example/",) * 6, "a page is url or"),
])
def test_new_page_names_what_is_wrong(item, fragment):
    from frontier_rate.engine.validation import new_page

    with pytest.raises(ValueError, match=re.escape(fragment)):
        new_page(item)


@pytest.mark.parametrize("kwargs, fragment", [
    ({"estimator": "unknown"}, "unknown estimator 'unknown'"),
    ({"estimator": "mle"}, "offline"),
    ({"estimator": "naive"}, "biased"),
    ({"budget": -1.0}, "budget"),
    ({"budget": math.nan}, "budget"),
    ({"min_interval": 0.0}, "min_interval"),
    ({"max_interval": 1.0, "min_interval": 10.0}, "max_interval"),
    ({"policy": "greedy"}, "policy 'greedy'"),
    ({"objective": "speed"}, "objective 'speed'"),
    ({"lease_timeout": math.inf}, "lease_timeout"),
    ({"namespace": "bad name{}"}, "namespace"),
])
def test_bad_arguments_are_rejected(redis_url, namespace, kwargs, fragment):
    options = {"namespace": namespace, **kwargs}
    with pytest.raises(ValueError, match=fragment):
        Frontier(redis_url, **options)


def test_bad_call_arguments_are_rejected(redis_url, namespace):
    f = frontier(redis_url, namespace)
    with pytest.raises(ValueError, match="weight"):
        f.add("http://a.example/", -1.0)
    with pytest.raises(ValueError, match="weight"):
        f.add("http://a.example/", math.nan)
    with pytest.raises(ValueError, match="meta"):
        f.add("http://a.example/", 1.0, {"x": object()})
    with pytest.raises(ValueError, match="max_n"):
        f.next_requests(-1)
    with pytest.raises(ValueError, match="budget"):
        f.set_budget(0.0)
    with pytest.raises(ValueError, match="seconds"):
        f.set_host_delay("a.example", -5.0)
    with pytest.raises(ValueError, match="token"):
        f.observe(Lease(url="http://a.example/", token="abc", host="a.example"),
                  fingerprint="x")


def test_namespace_keeps_its_estimator(redis_url, namespace):
    frontier(redis_url, namespace, estimator="sa")
    with pytest.raises(ValueError, match="uses estimator 'sa'"):
        frontier(redis_url, namespace, estimator="lln")


def _worker(redis_url, namespace, seconds, queue):
    """One crawler process: lease, hold briefly, observe; report (url, token, start, end)."""
    f = Frontier(redis_url, namespace=namespace, estimator="sa")  # the namespace's settings
    leases = []
    stop = time.time() + seconds
    while time.time() < stop:
        got = f.next_requests(5)
        start = time.time()
        time.sleep(0.002)
        end = time.time()
        f.observe_many([(d, {"fingerprint": d.token}) for d in got])
        leases += [(d.url, d.token, start, end) for d in got]
    queue.put(leases)


def test_two_processes_never_hold_the_same_lease(redis_url, namespace):
    f = frontier(redis_url, namespace, min_interval=0.01, max_interval=0.05, budget=1000.0)
    f.add_many([f"http://h{i % 4}.example/{i}" for i in range(12)])
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(redis_url, namespace, 3.0, queue))
             for _ in range(2)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    assert all(results), "both processes got work"
    by_url = defaultdict(list)
    for worker, leases in enumerate(results):
        for url, token, start, end in leases:
            by_url[url].append((start, end, worker, token))
    shared = [u for u, ls in by_url.items() if len({w for _, _, w, _ in ls}) == 2]
    assert shared, "the processes should compete for the same pages"
    for url, leases in by_url.items():
        leases.sort()
        for (_, e1, w1, t1), (s2, _, w2, t2) in zip(leases, leases[1:], strict=False):
            assert t1 != t2, url
            if w1 != w2:
                # the second lease started after the first one's observe returned
                assert s2 >= e1 - 0.001, url


def test_release_hands_unsent_leases_back_at_their_due_time(redis_url, namespace):
    """A released lease is queued again at once (old due time), with a new token;
    the old token is dead, and the host's delay still holds."""
    f = frontier(redis_url, namespace, min_host_delay=5.0)
    f.add_many(["http://a.example/1", "http://b.example/1"], now=0.0)
    first = {d.url: d for d in f.next_requests(10, now=0.0)}
    assert f.release_many(first.values(), now=1.0) == 2
    assert f.release(first["http://a.example/1"], now=1.0) is False  # already released
    assert f.page("http://a.example/1")["status"] == "new"
    assert f.stats(now=1.0)["leased"] == 0
    assert f.next_requests(10, now=1.0) == []  # both hosts wait out their 5 s delay
    again = {d.url: d for d in f.next_requests(10, now=5.0)}
    assert set(again) == set(first)
    assert again["http://a.example/1"].token != first["http://a.example/1"].token
    assert again["http://a.example/1"].due == first["http://a.example/1"].due == 0.0
    stale = f.observe(first["http://a.example/1"], fingerprint="x", fetched_at=5.0)
    assert stale.accepted is False
    assert f.observe(again["http://a.example/1"], fingerprint="x", fetched_at=5.0).accepted
    assert f.release(again["http://a.example/1"], now=6.0) is False  # observed: not a lease
    assert f.page("http://a.example/1")["fetches"] == 1


def test_unsettle_redoes_a_fetch_unconditionally_and_reports_it_changed(redis_url, namespace):
    """A fetch whose output the crawler lost (issue 60): the page is due at once, its next
    lease carries no validators, its next observation says changed although the content is
    the same (the estimator does not count it), and the one after is conditional again."""
    f = frontier(redis_url, namespace)
    f.add_many(["http://a.example/1", "http://a.example/2", "http://a.example/3"], now=0.0)
    first = {d.url: d for d in f.next_requests(10, now=0.0)}
    for url in ("http://a.example/1", "http://a.example/2"):
        assert f.observe(first[url], fingerprint="v1", etag='"e1"', fetched_at=0.0).accepted
    # /1 and /2 observed, /3 still leased (its answer never reached Redis); all three lost
    assert f.unsettle_many(first.values(), now=1.0) == 3
    assert f.unsettle_many(first.values(), now=1.0) == 2  # /3's lease is closed now
    assert f.stats(now=1.0)["leased"] == 0
    assert f.page("http://a.example/2")["next_due"] == 1.0
    again = {d.url: d for d in f.next_requests(10, now=1.0)}
    assert set(again) == set(first)
    assert again["http://a.example/1"].etag is None
    assert again["http://a.example/1"].last_modified is None
    assert again["http://a.example/1"].first is False and again["http://a.example/3"].first is True
    assert f.unsettle_many([first["http://a.example/1"]], now=1.5) == 0  # re-leased: left alone
    redone = f.observe(again["http://a.example/1"], fingerprint="v1", etag='"e1"', fetched_at=2.0)
    assert redone.accepted and redone.changed is True
    assert f.page("http://a.example/1")["changes"] == 0  # the content did not change
    f.observe(again["http://a.example/2"], fingerprint="v1", fetched_at=2.0)
    f.observe(again["http://a.example/3"], fingerprint="v1", fetched_at=2.0)
    (later,) = [d for d in f.next_requests(10, now=500.0) if d.url == "http://a.example/1"]
    assert later.etag == '"e1"'  # settled: conditional again
    assert f.observe(later, fingerprint="v1", fetched_at=500.0).changed is False


def test_a_copy_observed_to_settle_later_counts_once_settled(redis_url, namespace):
    """``settle_later`` (issue 60, a crawler killed with its items in its pipelines): until
    ``settle_many``, the page's next fetch sends no validators and says changed; settled, it
    is conditional again. A 304 leaves nothing to settle; a stale settle does nothing."""
    f = frontier(redis_url, namespace)
    f.add_many(["http://a.example/1", "http://a.example/2"], now=0.0)
    first = {d.url: d for d in f.next_requests(10, now=0.0)}
    for d in first.values():
        assert f.observe(d, fingerprint="v1", etag='"e1"', fetched_at=0.0,
                         settle_later=True).accepted
    assert f.settle_many([first["http://a.example/2"]], now=1.0) == 1  # /1 never settled
    assert f.settle_many([first["http://a.example/2"]], now=1.0) == 0
    later = {d.url: d for d in f.next_requests(10, now=100.0)}
    assert later["http://a.example/1"].etag is None  # the crawler died with its items
    assert later["http://a.example/2"].etag == '"e1"'
    redone = f.observe(later["http://a.example/1"], fingerprint="v1", etag='"e1"',
                       fetched_at=100.0, settle_later=True)  # the server sends its ETag again
    assert redone.changed is True and f.page("http://a.example/1")["changes"] == 0
    assert f.observe(later["http://a.example/2"], not_modified=True, fetched_at=100.0,
                     settle_later=True).changed is False
    assert f.settle_many([first["http://a.example/1"]], now=101.0) == 0  # stale token
    assert f.settle_many(later.values(), now=101.0) == 1  # /2's 304 had nothing to settle
    again = {d.url: d for d in f.next_requests(10, now=300.0)}
    assert again["http://a.example/1"].etag == '"e1"' and again["http://a.example/2"].etag
    # a settle that comes after the page was leased again still counts for its copy
    f.observe(again["http://a.example/1"], fingerprint="v1", fetched_at=300.0, settle_later=True)
    (soon,) = [d for d in f.next_requests(10, now=500.0) if d.url == "http://a.example/1"]
    assert soon.etag is None  # due before the settle came
    assert f.settle_many([again["http://a.example/1"]], now=500.5) == 1
    assert f.observe(soon, fingerprint="v1", fetched_at=501.0).changed is False


def _shard_scripts_run(f: Frontier) -> int:
    """Scripts (EVALSHA, or FCALL on Redis 7) the server ran so far."""
    stats = f.client.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "fcall"))


def test_an_idle_call_reads_the_due_summary_and_asks_no_shard(redis_url, namespace):
    """With nothing due, next_requests is one round trip: ν, the token bucket and the
    namespace's due summary (fr:{ns}:due); no shard script runs, however many shards."""
    f = frontier(redis_url, namespace, estimator="interval", fill_budget=False)
    f.add_many([f"http://h{i}.example/p" for i in range(40)], now=0.0)
    got = f.next_requests(100, now=0.0)
    f.observe_many([(d, {"fingerprint": "a", "fetched_at": 0.0}) for d in got])
    assert f.next_requests(100, now=0.1) == []  # scans the observed shards, stores the summary
    before = _shard_scripts_run(f)
    for i in range(10):
        assert f.next_requests(100, now=0.2 + 0.05 * i) == []
    # each idle call: take_tokens and the tokens given back (+ the deferred summary
    # update of the call before, once): no shard script
    assert _shard_scripts_run(f) - before <= 2 * 10 + 1
    summary = f.client.hgetall(f.keys.due)
    assert {k for k in summary if not k.startswith(b"v")} == {b"%d" % s for s in range(f.shards)
                                                               if b"%d" % s in summary}
    assert min(float(v) for k, v in summary.items() if not k.startswith(b"v")) >= 10e6


def test_work_queued_by_another_process_is_seen_by_an_idle_one_at_once(redis_url, namespace):
    """Writers lower the summary after their shard scripts, so an idle process sees their
    pages on its next call, long before its periodic full scan."""
    crawler = frontier(redis_url, namespace, fill_budget=False, lease_timeout=5.0)
    other = frontier(redis_url, namespace, fill_budget=False, lease_timeout=5.0)
    assert crawler.next_requests(10, now=100.0) == []  # full scan: nothing anywhere
    assert crawler.next_requests(10, now=100.1) == []
    other.add("http://new.example/a", now=100.2)
    got = crawler.next_requests(10, now=100.3)  # within FULL_SCAN_EVERY of the scan
    assert [d.url for d in got] == ["http://new.example/a"]
    # a lease that expires brings its page back through the summary too
    assert crawler.next_requests(10, now=100.4) == []
    again = crawler.next_requests(10, now=105.35)
    assert [d.url for d in again] == ["http://new.example/a"] and again[0].token != got[0].token
    other.release_many(again, now=105.36)
    assert [d.url for d in crawler.next_requests(10, now=105.37)] == ["http://new.example/a"]


def test_a_summary_left_too_late_is_corrected_by_the_periodic_full_scan(redis_url, namespace):
    """A writer that died between its shard script and its summary update leaves the summary
    too late; once FULL_SCAN_EVERY seconds have passed on the frontier's clock and in real
    time, each shard is asked anyway."""
    from frontier_rate.engine.leases import FULL_SCAN_EVERY

    crawler = frontier(redis_url, namespace, fill_budget=False)
    other = frontier(redis_url, namespace, fill_budget=False)
    assert crawler.next_requests(10, now=200.0) == []
    other.add("http://lost.example/a", now=200.1)
    crawler.client.delete(crawler.keys.due)
    for shard in range(crawler.shards):  # what a dead writer leaves: "nothing before later"
        crawler.client.hset(crawler.keys.due, str(shard), "inf")
    crawler.lease_desk._due_sets = {}
    assert crawler.next_requests(10, now=200.2) == []
    crawler.lease_desk._full_scan_wall = -math.inf  # real time has passed too (not waited for here)
    got = crawler.next_requests(10, now=200.0 + FULL_SCAN_EVERY)
    assert [d.url for d in got] == ["http://lost.example/a"]


def test_a_jumping_virtual_clock_does_not_scan_every_shard_on_every_call(redis_url, namespace):
    """A replay whose clock jumps an hour per call scans every shard at most once per second
    of real time: otherwise the due summary alone picks the shards (its safety net is for
    dead writers, which live in real time)."""
    f = frontier(redis_url, namespace, fill_budget=False)
    f.add("http://only.example/a", now=0.0)
    f.next_requests(0, now=1.0)  # the first call scans every shard
    before = _shard_scripts_run(f)
    for i in range(10):
        f.next_requests(0, now=3600.0 * (i + 1))
    # per call: tokens, the summary update, a refresh step and the one shard with work;
    # a full scan would run f.shards candidate scripts on every call
    assert _shard_scripts_run(f) - before <= 10 * 4 < 10 * f.shards


def test_old_namespaces_without_a_due_summary_are_scanned(redis_url, namespace):
    f = frontier(redis_url, namespace, fill_budget=False)
    f.add("http://old.example/a", now=0.0)
    f.client.delete(f.keys.due)  # data written before the summary existed
    f2 = frontier(redis_url, namespace, fill_budget=False)
    f2.lease_desk._full_scan_at = 0.0  # not a full scan: the absent fields alone send it to the shards
    assert [d.url for d in f2.next_requests(10, now=0.5)] == ["http://old.example/a"]


def test_a_host_without_delay_gets_several_pages_per_call_others_one(redis_url, namespace):
    """A host whose delay is 0 may take several fetches at once: one call leases up to
    CANDIDATE_LOOK of its due pages; a host with a delay still gets one page per call, and
    none while its delay runs (lua/candidates.lua, lease.lua)."""
    from frontier_rate.engine.leases import CANDIDATE_LOOK

    f = frontier(redis_url, namespace, budget=1000.0)
    f.add_many([f"http://free.example/{i}" for i in range(10)]
               + [f"http://slow.example/{i}" for i in range(10)], now=0.0)
    f.set_host_delay("slow.example", 5.0)
    got = f.next_requests(100, now=0.0)
    hosts = [d.host for d in got]
    assert hosts.count("free.example") == CANDIDATE_LOOK and hosts.count("slow.example") == 1
    assert len({d.url for d in got}) == len(got)
    got = f.next_requests(100, now=1.0)
    assert [d.host for d in got] == ["free.example"] * CANDIDATE_LOOK
    got = f.next_requests(100, now=5.0)
    assert [d.host for d in got].count("slow.example") == 1


def test_batched_observes_of_one_host_keep_ready_scores_leases_and_host_cells_exact(
        redis_url, namespace):
    """Many pages of few hosts observed in one batch (their queue heads cached per script
    call, their lease entries removed at once, their cells written once per host): every
    host's ready score is still max(its first due time, next allowed), no lease is left and
    each host's own cells sum to its pages' planned rates and weights."""
    import struct as _struct

    f = frontier(redis_url, namespace, budget=1e6, estimator="sam", max_interval=1e5)
    urls = [f"http://h{i % 3}.example/{i}" for i in range(120)]
    f.add_many([(u, 1.0 + i % 5) for i, u in enumerate(urls)], now=0.0)
    for round_, t in enumerate((0.0, 2e5, 4e5)):
        got = []
        while more := f.next_requests(1000, now=t):
            got += more
        assert len(got) == len(urls)
        # fetch times spread out so that later pages of a host may land ahead of its head
        f.observe_many([(d, {"fingerprint": f"{i % (round_ + 2)}", "fetched_at": t + i})
                        for i, d in enumerate(got)])
        assert f.client.zcard(f.keys.shard_keys(f._shard_of("h0.example"))[2]) == 0
        for host in ("h0.example", "h1.example", "h2.example"):
            shard = f._shard_of(host)
            ready, hosts_key = f.keys.shard_keys(shard)[:2]
            head = f.client.zrange(f.keys.queue(shard, host), 0, 0, withscores=True)
            next_allowed = _struct.unpack("<dd", f.client.hget(hosts_key, host))[0]
            expected = max(head[0][1], math.floor(next_allowed * 1e6 + 0.5))
            assert f.client.zscore(ready, host) == expected, (round_, host)
    names, rows, _ = f.host_table()
    pages = defaultdict(lambda: [0, 0.0, 0.0])
    for p in f.iter_pages():
        acc = pages[p["host"]]
        acc[0] += 1
        acc[1] += max(p["estimate"], 1 / 1e5)
        acc[2] += p["weight"]
    for i, (_, host) in enumerate(names):
        n, lam, w = rows[rows[:, 3] == i][:, :3].sum(axis=0)
        assert n == pages[host][0] == 40
        assert lam == pytest.approx(pages[host][1], rel=1e-9)
        assert w == pytest.approx(pages[host][2], rel=1e-9)


def test_a_shard_offers_at_most_its_window_of_candidates(redis_url, namespace):
    """The window counts candidates, not hosts: a shard stops looking at ready hosts once
    it has found that many, so hosts without delay (several candidates each) do not make
    a call rank far more pages than it leases."""
    from frontier_rate.engine.leases import CANDIDATE_LOOK
    from frontier_rate.engine.leases import candidates as _candidates

    f = frontier(redis_url, namespace)
    shard = f._shard_of("h0.example")
    hosts = [h for h in (f"h{i}.example" for i in range(200)) if f._shard_of(h) == shard][:3]
    f.add_many([f"http://{h}/{i}" for h in hosts for i in range(6)], now=0.0)

    def offered(window: int) -> list:
        found = f.scripts.run(lambda pipe: f._shard_call(
            pipe, "candidates", shard, 1.0, [str(window), str(CANDIDATE_LOOK), "0"]))
        return _candidates(found, [shard], {})

    assert len(offered(2)) == CANDIDATE_LOOK  # the first host's pages, then it stops
    assert len(offered(CANDIDATE_LOOK + 1)) == 2 * CANDIDATE_LOOK
    assert len(offered(100)) == 3 * CANDIDATE_LOOK


def test_observe_many_batches_per_shard_across_chunks_and_stops_at_a_bad_item(
        redis_url, namespace, monkeypatch):
    """observe_many fills each shard's script calls across chunks (OBSERVE_BATCH per call);
    a bad item still leaves every chunk before its own applied and nothing after it."""
    import frontier_rate.engine.results as engine

    monkeypatch.setattr(engine, "OBSERVE_CHUNK", 4)
    monkeypatch.setattr(engine, "OBSERVE_BATCH", 3)
    f = frontier(redis_url, namespace, budget=1000.0)
    f.add_many([f"http://h{i % 2}.example/{i}" for i in range(12)]
               + [f"http://solo{i}.example/" for i in range(12)], now=0.0)
    got = []
    while more := f.next_requests(100, now=0.0):
        got += more
    assert len(got) == 24
    two = [d for d in got if d.host in ("h0.example", "h1.example")]
    solo = [d for d in got if d not in two]
    sent = []
    stream = f.scripts.stream

    def counted(commands, on_reply=None):
        def each():
            for command in commands:
                sent.append(command[0])
                yield command
        return stream(each(), on_reply)

    monkeypatch.setattr(f.scripts, "stream", counted)
    out = f.observe_many([(d, {"fingerprint": "a", "fetched_at": 1.0}) for d in two])
    assert all(o.accepted for o in out) and len(out) == 12
    assert f.stats(now=1.0)["leased"] == 12
    # full calls of 3 per shard, not one or two per chunk of 4
    per_shard = Counter(f._shard_of(d.host) for d in two).values()
    assert sent.count("observe") == sum(-(-n // 3) for n in per_shard)
    rest = [(d, {"fingerprint": "a", "fetched_at": 1.0}) for d in solo]
    rest[5] = (rest[5][0], {"fingerprint": "a", "fetched_at": 1.0, "status": 42})  # bad
    with pytest.raises(ValueError):
        f.observe_many(rest)
    leased = {d.url for d in solo if f.page(d.url)["status"] == "leased"}
    assert leased == {d.url for d in solo[4:]}  # the chunk [0, 4) applied, nothing after


def test_a_page_named_twice_in_one_lease_call_is_leased_once(redis_url, namespace):
    """lease.lua writes its lease set and queue removals once at the end of a call; a page
    named twice in the call is leased by the first and skipped by the second (not taken
    for a queued page marked leased, which would quarantine it)."""
    from frontier_rate.store.keys import page_id

    f = frontier(redis_url, namespace, min_host_delay=0.0)
    url, host = "http://twice.example/a", "twice.example"
    f.add(url, now=0.0)
    shard, pid = f._shard_of(host), page_id(url)
    reply = f.scripts.run(lambda pipe: f._shard_call(pipe, "lease", shard, 1.0,
                                                     ["0", host, pid, host, pid]))[0]
    assert reply[1] == []  # nothing quarantined
    assert f.client.zcard(f.keys.shard_keys(shard)[2]) == 1
    assert f.client.zcard(f.keys.queue(shard, host)) == 0
    assert f.page(url)["status"] == "leased" and f.stats(now=1.0)["quarantined"] == 0

"""Real Scrapy crawls (subprocesses) under faults: Redis Cluster, a killed crawler,
namespaces side by side, password URLs.

The sites are ``ChangingSite`` servers on 127.0.0.x addresses (one host per
address) that log every request they answer; the crawls run
``frontier_rate.scrapy.Scheduler`` through ``scrapy_support.harness``.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from redis_servers import RedisServer, redis_cluster  # noqa: I001
from scrapy_support.harness import Crawl, finish_crawl, open_frontier, run_crawl, start_crawl
from scrapy_support.server import ChangingSite

from frontier_rate.crawl.shared_pages import SharedPages
from frontier_rate.detection.host_mask import log_hashes, read_log
from frontier_rate.store.keys import Keys

pytestmark = pytest.mark.reliability

CLOCK_SLACK = 0.05
"""Seconds of clock-read and scheduling slack allowed between processes on one machine."""


@pytest.fixture
def sites() -> Iterator[Callable[[int], list[ChangingSite]]]:
    """Start ``n`` sites, one per loopback address 127.0.0.2 ... (one host each)."""
    with ExitStack() as stack:
        def make(n: int) -> list[ChangingSite]:
            return [stack.enter_context(ChangingSite(f"127.0.0.{i + 2}")) for i in range(n)]

        yield make


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def responses_in(output: Path) -> int:
    if not output.exists():
        return 0
    return sum(1 for line in output.read_text().splitlines()
               if line.endswith("}") and '"kind": "response"' in line)


def path_of(url: str) -> str:
    return "/" + url.split("/", 3)[3]


# ---------------------------------------------------------------- Redis Cluster

@pytest.fixture(scope="module")
def cluster_url(tmp_path_factory) -> Iterator[str]:
    with redis_cluster(tmp_path_factory.mktemp("cluster")) as cluster:
        yield cluster.url


def test_two_crawlers_share_a_frontier_on_redis_cluster(cluster_url, sites, tmp_path):
    """Two processes on a three-master cluster: every page fetched, none lost, leases exclusive.

    Exclusive: each fetch's answer carries the due time the frontier set for
    the next fetch; whichever process makes it, it must not come earlier
    (``CLOCK_SLACK``). None lost: the site's log, the spiders' records and the
    frontier's per-page fetch counts agree exactly.
    """
    hosts = sites(3)
    pages = [(site, f"/p{j}") for site in hosts for j in range(4)]
    for site, path in pages:
        site.set(path, f"<nav><p>Home</p><p>About us</p></nav><p>{path} {{n}}</p>",
                 template=True)
    start = [{"url": site.url(path)} for site, path in pages]
    # due times as the exclusivity check: no page is leased before it is due; the pages'
    # detection memory in the cluster too (each in its page's slot, from each detection
    # process), and each host's masks (the menu on every page)
    settings = {"FRONTIER_RATE_CLOSE_AFTER": 5, "FRONTIER_RATE_FILL_BUDGET": False,
                "FRONTIER_RATE_SHARED_PAGE_MEMORY": True}
    runs = [start_crawl(tmp_path, f"w{i}", cluster_url, "shared", start, settings) for i in (0, 1)]
    crawls = [finish_crawl(*run, timeout=90) for run in runs]
    assert all(c.returncode == 0 for c in crawls), crawls[0].log[-3000:] + crawls[1].log[-3000:]
    assert all(c.responses() for c in crawls), "both processes should take part"
    frontier = open_frontier(cluster_url, "shared")
    try:
        assert frontier.stats()["pages"] == len(pages)
        total = 0
        for site, path in pages:
            url = site.url(path)
            responses = sorted((r for c in crawls for r in c.responses(url)),
                               key=lambda r: r["time"])
            hits = site.hits_for(path)
            assert len(hits) >= 2, f"{url} should be revisited"
            assert len(hits) == len(responses) == frontier.page(url)["fetches"]
            for response, next_hit in zip(responses, hits[1:], strict=False):
                assert next_hit.started >= response["meta"]["frontier_rate"]["next_due"] - CLOCK_SLACK
            total += len(hits)
        assert frontier.stats()["fetches"] == total
        memory = SharedPages(frontier.client, "shared", frontier.shards, 3600.0)
        assert all(memory.load(site.url(path)) is not None for site, path in pages)
        assert all(len(log_hashes(read_log(frontier.client.get(memory.mask_key(site.url("/p0"))),
                                           whole=True))) >= 2 for site in hosts)
        assert [c.stats.get("frontier_rate/page_memory_failures") for c in crawls] == [0, 0]
        assert not any("detection process stopped" in c.log for c in crawls)
    finally:
        frontier.close()


# ---------------------------------------------------------------- kill -9 of a crawler

def open_leases(redis_url: str, namespace: str) -> dict[bytes, float]:
    """Page id -> lease deadline (s) of every open lease (lua/lib.lua: member id..host)."""
    frontier = open_frontier(redis_url, namespace)
    try:
        keys = Keys(namespace, frontier.shards)
        leases: dict[bytes, float] = {}
        for shard in range(frontier.shards):
            for member, score in frontier.client.zrange(keys.shard_keys(shard)[2], 0, -1,
                                                        withscores=True):
                leases[member[:8]] = score / 1e6
        return leases
    finally:
        frontier.close()


def test_killed_crawler_leases_come_back_and_each_observation_counts_once(
        redis_url, namespace, sites, tmp_path):
    """Crawler A is SIGKILLed with requests in flight; crawler B then finishes the crawl.

    Pages are revisited only after 300 s, so in this run each page should be
    observed exactly once. A's open leases (read from Redis right after the
    kill) are fetched by B no earlier than their deadline; the frontier never
    counts more observations of a page than the site answered, and the
    difference over all pages is at most what A had in flight when it died.
    """
    from frontier_rate.store.keys import page_id

    hosts = sites(8)
    pages = [(site, f"/k{j}") for site in hosts for j in range(4)]
    for site, path in pages:
        site.set(path, f"<p>{path}</p>", delay=0.5)  # answers slowly: requests are in flight
    start = [{"url": site.url(path)} for site, path in pages]
    settings = {"FRONTIER_RATE_LEASE_TIMEOUT": 3.0, "FRONTIER_RATE_MIN_INTERVAL": 300.0,
                "FRONTIER_RATE_MAX_INTERVAL": 300.0, "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
                "FRONTIER_RATE_CLOSE_AFTER": 60,
                "FRONTIER_RATE_FILL_BUDGET": False}  # revisits only after 300 s, as said above
    proc, output, log = start_crawl(tmp_path, "a", redis_url, namespace, start, settings)
    try:
        arrived = lambda: sum(site.arrivals(path) for site, path in pages)  # noqa: E731
        wait_for(lambda: responses_in(output) >= 8 and arrived() > responses_in(output), 30,
                 "crawler A's first responses and its next requests at the site")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    killed_at = time.time()
    held = open_leases(redis_url, namespace)
    crawl_a = finish_crawl(proc, output, log)
    time.sleep(0.5 + 0.3)  # the site logs a request when it answers: let A's last ones finish
    assert crawl_a.returncode == -signal.SIGKILL
    in_flight = sum(1 for s in hosts for h in s.hits if h.started <= killed_at) \
        - len(crawl_a.responses())
    assert 1 <= in_flight <= len(hosts), "A dies with requests in flight (one per host at most)"
    assert len(held) >= in_flight

    crawl_b = run_crawl(tmp_path, redis_url, namespace, start,
                        {**settings, "FRONTIER_RATE_CLOSE_AFTER": 8}, name="b")
    assert crawl_b.returncode == 0, crawl_b.log[-3000:]

    frontier = open_frontier(redis_url, namespace)
    try:
        unobserved = 0
        for site, path in pages:
            url = site.url(path)
            fetches = frontier.page(url)["fetches"]
            hits = site.hits_for(path)
            recorded = len(crawl_a.responses(url)) + len(crawl_b.responses(url))
            assert fetches >= 1, f"{url} was never fetched"
            assert recorded <= fetches <= len(hits), url
            unobserved += len(hits) - fetches
            deadline = held.get(page_id(url))
            if deadline is not None:
                assert crawl_b.responses(url), f"{url} was held by A and never came back"
                after = [h for h in hits if h.started > killed_at]
                assert after and after[0].started >= deadline - CLOCK_SLACK, url
        assert unobserved <= in_flight
        assert frontier.stats()["fetches"] == sum(frontier.page(s.url(p))["fetches"]
                                                 for s, p in pages)
        assert frontier.stats()["leased"] == 0
    finally:
        frontier.close()


# ---------------------------------------------------------------- namespaces

def test_two_namespaces_on_one_redis_stay_apart(redis_url, namespace, sites, tmp_path):
    """Two crawls at once on one Redis, different namespaces: each sees only its own pages."""
    (site,) = sites(1)
    own = {"x": [f"/x{i}" for i in range(5)], "y": [f"/y{i}" for i in range(3)]}
    for paths in own.values():
        for path in paths:
            site.set(path, f"<nav><p>Home</p><p>About us</p></nav><p>{path} {{n}}</p>",
                 template=True)
    settings = {"FRONTIER_RATE_CLOSE_AFTER": 4, "FRONTIER_RATE_LOG_INTERVAL": 0.5}
    runs = {name: start_crawl(tmp_path, name, redis_url, f"{namespace}-{name}",
                              [{"url": site.url(p)} for p in paths], settings)
            for name, paths in own.items()}
    crawls: dict[str, Crawl] = {name: finish_crawl(*run) for name, run in runs.items()}
    for name, crawl in crawls.items():
        assert crawl.returncode == 0, crawl.log[-3000:]
        fetched = {path_of(r["request_url"]) for r in crawl.responses()}
        assert fetched == set(own[name]), f"crawl {name} fetched {sorted(fetched)}"
        revisited = crawl.stats.get("frontier_rate/changed", 0) \
            + crawl.stats.get("frontier_rate/unchanged", 0)
        assert revisited == crawl.stats.get("frontier_rate/revisits", 0)
        assert revisited + crawl.stats["frontier_rate/first_fetches"] == len(crawl.responses())
        assert crawl.stats["frontier_rate/new_pages"] == len(own[name])
        summaries = [line for line in crawl.log.splitlines()
                     if f"frontier-rate [{namespace}-{name}]:" in line]
        assert summaries and all(f"pages={len(own[name])}," in line for line in summaries)
        frontier = open_frontier(redis_url, f"{namespace}-{name}")
        try:
            stats = frontier.stats()
            assert stats["pages"] == len(own[name])
            assert stats["fetches"] == len(crawl.responses())
            assert {path_of(p["url"]) for p in frontier.iter_pages()} == set(own[name])
        finally:
            frontier.close()


# ---------------------------------------------------------------- passwords

SECRET = "crawl-Secret-93xQ"


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Iterator[RedisServer]:
    with RedisServer(tmp_path_factory.mktemp("auth"), password=SECRET) as server:
        yield server


def _everything(crawl: Crawl, tmp_path: Path) -> str:
    """The crawl's log, records and every file it left (config aside: it holds the URL)."""
    files = [p.read_text(errors="replace") for p in tmp_path.iterdir()
             if p.is_file() and p.suffix != ".json"]
    return crawl.log + json.dumps(crawl.records) + "".join(files)


def test_crawl_with_password_url_never_logs_the_password(secured, sites, tmp_path):
    (site,) = sites(1)
    for i in range(3):
        site.set(f"/s{i}", f"<p>{i}</p>")
    start = [{"url": site.url(f"/s{i}")} for i in range(3)]
    crawl = run_crawl(tmp_path, secured.url, "pw", start,
                      {"FRONTIER_RATE_CLOSE_AFTER": 2, "FRONTIER_RATE_LOG_INTERVAL": 0.5})
    assert crawl.returncode == 0, crawl.log[-3000:]
    assert {path_of(r["request_url"]) for r in crawl.responses()} == {"/s0", "/s1", "/s2"}
    assert "frontier-rate [pw]:" in crawl.log  # DEBUG log with the periodic summary
    assert SECRET not in _everything(crawl, tmp_path)


def test_crawl_with_wrong_password_fails_at_start_without_showing_it(secured, sites, tmp_path):
    (site,) = sites(1)
    site.set("/s", "<p>s</p>")
    url = f"redis://:Wrong-{SECRET[::-1]}@127.0.0.1:{secured.port}/0"
    crawl = run_crawl(tmp_path, url, "pw", [{"url": site.url("/s")}])
    # said at once, in one line (``open_wait``: a refused password is not waited for)
    assert "refused this crawl's password or user" in crawl.log, crawl.log[-3000:]
    assert f"127.0.0.1:{secured.port}" in crawl.log and "Traceback" not in crawl.log
    assert site.hits == []
    text = _everything(crawl, tmp_path)
    assert SECRET[::-1] not in text and SECRET not in text

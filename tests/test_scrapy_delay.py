"""Scrapy's delay semantics on slow hosts (issue 60, item 5), with real crawls.

Scrapy keeps ``DOWNLOAD_DELAY`` between the *starts* of a host's requests and lets up to
``CONCURRENT_REQUESTS_PER_DOMAIN`` of them be in flight; AutoThrottle's delay is the
download slot's delay, used the same way. Before, the scheduler paced a host one request
at a time and counted the delay from each answer: a host answering in 2 s with
``DOWNLOAD_DELAY = 1`` got a request every 3.02 s (4.02 s under AutoThrottle) where
Scrapy's own scheduler sends one every 1.2-1.3 s. The site logs when each request
arrives and when it is answered; gaps are measured between arrivals.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scrapy_support.harness import run_crawl  # noqa: E402
from scrapy_support.server import ChangingSite, Hit  # noqa: E402

from frontier_rate.crawl.settings import adapter_settings  # noqa: E402

pytestmark = pytest.mark.timeout(120)

LATENCY = 1.0
"""Seconds the slow site takes to answer each request (unless a test says)."""
TOLERANCE = 0.05
"""Loopback latency and the arrival clock (as tests/test_scrapy_shared_politeness.py)."""
ONE_PASS = {"FRONTIER_RATE_MIN_HOST_DELAY": None, "FRONTIER_RATE_CLOSE_AFTER": "idle",
            "FRONTIER_RATE_MIN_INTERVAL": 3600.0, "FRONTIER_RATE_MAX_INTERVAL": 7200.0}
"""Each page fetched once: the crawl ends when the first pass is done."""


def crawl_slow_site(tmp_path: Path, redis_url: str, namespace: str, pages: int,
                    settings: dict, latency: float = LATENCY,
                    start_pause: float = 0.0) -> list[Hit]:
    """Crawl ``pages`` pages of a site answering in ``latency``; its hits by arrival.
    ``start_pause``: seconds between the spider's first start request and the others."""
    with ChangingSite("127.0.0.1") as site:
        for i in range(pages):
            site.set(f"/s{i}", f"<p>slow {i}</p>", delay=latency)
        crawl = run_crawl(tmp_path, redis_url, namespace,
                          [{"url": site.url(f"/s{i}")} for i in range(pages)],
                          {**ONE_PASS, **settings}, args={"start_pause": str(start_pause)})
        assert crawl.returncode == 0, crawl.log[-3000:]
        hits = sorted(site.hits, key=lambda hit: hit.started)
    assert sorted(hit.path for hit in hits) == sorted(f"/s{i}" for i in range(pages)), \
        crawl.log[-3000:]
    return hits


def start_gaps(hits: list[Hit]) -> list[float]:
    return [b.started - a.started for a, b in zip(hits, hits[1:], strict=False)]


def most_in_flight(hits: list[Hit]) -> int:
    """The most requests the site was answering at one moment."""
    events = sorted([(hit.started, 1) for hit in hits] + [(hit.time, -1) for hit in hits])
    current = most = 0
    for _, step in events:
        current += step
        most = max(most, current)
    return most


def test_a_slow_host_gets_a_request_every_delay_with_several_in_flight(redis_url, namespace,
                                                                       tmp_path):
    """DOWNLOAD_DELAY 0.5 s, answers in 2 s, 4 per domain: a request starts every 0.5 s
    (never closer), several are in flight at once, and 8 pages take ~5.5 s, not the
    8 x (2 + 0.5) = 20 s of one request at a time. No request waits for an answer: the
    start requests found within 50 ms of the first (here 20 ms later) were not sent to
    the frontier until its answer came (their wake-up was lost to the first one's), so
    the second request started 2 s after the first."""
    pages, delay, latency = 8, 0.5, 2.0
    hits = crawl_slow_site(tmp_path, redis_url, namespace, pages,
                           {"DOWNLOAD_DELAY": delay, "CONCURRENT_REQUESTS_PER_DOMAIN": 4},
                           latency, start_pause=0.02)
    gaps = start_gaps(hits)
    assert min(gaps) >= delay - TOLERANCE, gaps
    assert max(gaps) < latency - 0.5, gaps
    assert most_in_flight(hits) >= 2, hits
    took = hits[-1].time - hits[0].started
    assert took < 0.6 * pages * (latency + delay), (took, gaps)


def test_autothrottle_delay_is_the_slots_between_request_starts(redis_url, namespace, tmp_path):
    """AutoThrottle (start delay 1 s, target concurrency 1, answers in 1 s) keeps its delay
    of ~1 s between request starts, as it does under Scrapy's scheduler: never the
    DOWNLOAD_DELAY of 0.5 s it may not go below, and not latency + delay (2 s) apart."""
    pages = 6
    hits = crawl_slow_site(tmp_path, redis_url, namespace, pages, {
        "DOWNLOAD_DELAY": 0.5, "CONCURRENT_REQUESTS_PER_DOMAIN": 4,
        "AUTOTHROTTLE_ENABLED": True, "AUTOTHROTTLE_START_DELAY": 1.0,
        "AUTOTHROTTLE_TARGET_CONCURRENCY": 1.0})
    gaps = start_gaps(hits)
    assert min(gaps) >= 1.0 - TOLERANCE, gaps  # AutoThrottle's delay, not DOWNLOAD_DELAY
    assert sum(gaps) / len(gaps) < 1.5, gaps  # from one start to the next, not the answer


def test_autothrottle_never_takes_a_host_below_the_frontier_delay(redis_url, namespace,
                                                                  tmp_path):
    """A fast host under AutoThrottle (start delay 0): AutoThrottle lowers the slot's delay
    towards the latency after each answer, below the frontier's host delay of 0.8 s; the
    delay is put back before the next request starts. One-off requests (``dont_revisit``:
    no lease spaces them) all wait in the download slot, without the shared send slot, so
    that the download slot alone keeps the delay."""
    with ChangingSite("127.0.0.1") as site:
        pages, delay = 6, 0.8
        for i in range(pages):
            site.set(f"/f{i}", f"<p>fast {i}</p>", delay=0.1)
        crawl = run_crawl(tmp_path, redis_url, namespace,
                          [{"url": site.url(f"/f{i}"), "meta": {"dont_revisit": True}}
                           for i in range(pages)], {
                              **ONE_PASS, "FRONTIER_RATE_MIN_HOST_DELAY": delay,
                              "FRONTIER_RATE_SHARED_SEND": False,
                              "CONCURRENT_REQUESTS_PER_DOMAIN": 4,
                              "AUTOTHROTTLE_ENABLED": True, "AUTOTHROTTLE_START_DELAY": 0.0})
        assert crawl.returncode == 0, crawl.log[-3000:]
        hits = sorted(site.hits, key=lambda hit: hit.started)
    assert len(hits) == pages, crawl.log[-3000:]
    gaps = start_gaps(hits)
    assert min(gaps) >= delay - TOLERANCE, gaps


def test_requests_in_flight_per_host_are_scrapys_per_ip_limit_when_set():
    """Scrapy's download slots allow CONCURRENT_REQUESTS_PER_IP when it is set, else
    CONCURRENT_REQUESTS_PER_DOMAIN; the scheduler hands over as many per host."""
    assert adapter_settings({}.get).per_host == 8
    assert adapter_settings({"CONCURRENT_REQUESTS_PER_DOMAIN": 3}.get).per_host == 3
    assert adapter_settings({"CONCURRENT_REQUESTS_PER_DOMAIN": 3,
                             "CONCURRENT_REQUESTS_PER_IP": 5}.get).per_host == 5
    assert adapter_settings({"CONCURRENT_REQUESTS_PER_DOMAIN": 3,
                             "CONCURRENT_REQUESTS_PER_IP": 0}.get).per_host == 3

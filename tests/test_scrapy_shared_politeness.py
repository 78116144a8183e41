"""Politeness shared by every process of a frontier (issue 33), with real crawls.

Two crawler processes on one frontier and one loopback site, ``DOWNLOAD_DELAY = 1``,
``ROBOTSTXT_OBEY = True``: the site logs when each request arrives, robots.txt
fetches included. Whoever sends a request, no two may arrive closer than the delay
(0.05 s for loopback latency and the arrival clock). Before the shared send slot each
process kept the gap only among its own requests: 12-30 ms apart at the site.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scrapy_support.harness import finish_crawl, start_crawl  # noqa: E402
from scrapy_support.server import ChangingSite  # noqa: E402

pytestmark = pytest.mark.timeout(120)

SHARED_DELAY = {"DOWNLOAD_DELAY": 1.0, "FRONTIER_RATE_MIN_HOST_DELAY": None,
                "ROBOTSTXT_OBEY": True, "FRONTIER_RATE_CLOSE_AFTER": 7,
                "FRONTIER_RATE_MIN_INTERVAL": 2.0, "FRONTIER_RATE_MAX_INTERVAL": 2.5}


def arrival_gaps(site: ChangingSite) -> list[float]:
    """Seconds between consecutive arrivals at ``site`` (every path, robots.txt too)."""
    arrivals = sorted(hit.started for hit in site.hits)
    return [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]


def test_two_processes_keep_the_host_delay_between_all_their_requests(redis_url, namespace,
                                                                       tmp_path):
    with ChangingSite("127.0.0.1") as site:
        site.set("/robots.txt", "User-agent: *\nAllow: /\n", content_type="text/plain")
        paths = [f"/p{i}" for i in range(10)]
        for path in paths:
            site.set(path, f"<p>{path}</p>")
        start = [{"url": site.url(p)} for p in paths]
        runs = [start_crawl(tmp_path, f"w{i}", redis_url, namespace, start, SHARED_DELAY)
                for i in (0, 1)]
        crawls = [finish_crawl(*run) for run in runs]
        assert all(c.returncode == 0 for c in crawls), [c.log[-3000:] for c in crawls]
        assert all(c.responses() for c in crawls), "both processes should take part"
        gaps = arrival_gaps(site)
    assert len(gaps) >= 5, gaps
    assert min(gaps) >= 0.95, sorted(gaps)[:5]

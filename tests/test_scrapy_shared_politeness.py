"""Politeness shared by every process of a frontier (issue 33), with real crawls.

Two crawler processes on one frontier and one loopback site, ``DOWNLOAD_DELAY = 1``,
``ROBOTSTXT_OBEY = True``: the site logs when each request arrives, robots.txt
fetches included. Whoever sends a request, no two may arrive closer than the delay
(0.05 s for loopback latency and the arrival clock). Before the shared send slot each
process kept the gap only among its own requests: 12-30 ms apart at the site.
"""

from __future__ import annotations

import sys
import time
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


def wait_for_response(output: Path, timeout: float) -> None:
    """Wait until a crawl's output file records a response."""
    deadline = time.monotonic() + timeout
    while not (output.exists() and '"kind": "response"' in output.read_text()):
        assert time.monotonic() < deadline, f"no response in {output} within {timeout} s"
        time.sleep(0.05)


def test_two_processes_keep_the_host_delay_between_all_their_requests(redis_url, namespace,
                                                                       tmp_path):
    with ChangingSite("127.0.0.1") as site:
        site.set("/robots.txt", "User-agent: *\nAllow: /\n", content_type="text/plain")
        paths = [f"/p{i}" for i in range(10)]
        for path in paths:
            site.set(path, f"<p>{path}</p>")
        start = [{"url": site.url(p)} for p in paths]
        # The frontier leases a host's next page to whichever process asks first once the
        # host is ready, so one process may take them all. Both take part, deterministically:
        # the first runs alone until it has an answer, the second starts then (its robots.txt
        # fetch and first requests meet the first's), and the first closes before the second.
        first = start_crawl(tmp_path, "w0", redis_url, namespace, start,
                            {**SHARED_DELAY, "FRONTIER_RATE_CLOSE_AFTER": 6})
        wait_for_response(first[1], timeout=60)
        second = start_crawl(tmp_path, "w1", redis_url, namespace, start, SHARED_DELAY)
        crawls = [finish_crawl(*run) for run in (first, second)]
        assert all(c.returncode == 0 for c in crawls), [c.log[-3000:] for c in crawls]
        assert all(c.responses() for c in crawls), "both processes should take part"
        gaps = arrival_gaps(site)
    assert len(gaps) >= 5, gaps
    assert min(gaps) >= 0.95, sorted(gaps)[:5]

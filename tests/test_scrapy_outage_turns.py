"""Two crawlers keep one host's delay through a Redis restart (issue 63's soak), with real
crawls.

Two crawler processes share one frontier and one loopback host with a 0.5 s delay; each
may have four of the host's requests in its downloader (each process fetches every page
once: the start requests are one-off fetches from its own queue), so each has several requests
waiting for shared send slots it already took in Redis. Redis then restarts (a clean
SHUTDOWN with AOF, down for 3 s): meanwhile each process sends in its own turns, and after
it each takes shared slots again, one process before the other. Before, the turns of one
process fell between the slots the other had taken before the outage, and the first
process back took shared slots in the middle of the other's turns: the soak saw requests
0.23 s and 0.0018 s apart under 0.5 s.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from redis_servers import RedisServer  # noqa: E402
from scrapy_support.harness import finish_crawl, start_crawl  # noqa: E402
from scrapy_support.server import ChangingSite  # noqa: E402

pytestmark = [pytest.mark.timeout(180), pytest.mark.reliability]

DELAY = 0.5
PAGES = 40
DOWN = 3.0
TOLERANCE = 0.1
"""Seconds of a gap forgiven: the request's way from its send slot to the site, on a loaded
machine, beyond the ``SEND_MARGIN`` (0.05 s) the slots keep on top of the delay. The
crawlers' write times logged in the soak: a median of 2 ms, a 90th percentile of 6 ms, and
stalls of 0.08 s and more at a crawler's start (issue 63, not fixed). The outage faults this
test is about made gaps 0.12 to 0.5 s short."""


def test_two_crawlers_keep_the_host_delay_through_a_redis_restart(namespace, tmp_path):
    server = RedisServer(tmp_path / "redis", args=["--appendonly", "yes",
                                                   "--appendfsync", "everysec"]).start()
    try:
        with ChangingSite("127.0.0.1") as site:
            paths = [f"/p{i}" for i in range(PAGES)]
            for path in paths:
                site.set(path, f"<p>{path}</p>")
            start = [{"url": site.url(p), "meta": {"dont_revisit": True}} for p in paths]
            settings = {"FRONTIER_RATE_MIN_HOST_DELAY": DELAY,
                        "CONCURRENT_REQUESTS_PER_DOMAIN": 4,
                        "FRONTIER_RATE_CLOSE_AFTER": "idle", "FRONTIER_RATE_REDIS_TIMEOUT": 2.0,
                        "LOG_LEVEL": "INFO"}
            crawls = [start_crawl(tmp_path, name, server.url, namespace, start, settings)
                      for name in ("one", "two")]
            deadline = time.monotonic() + 60
            while len(site.hits) < 8 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert len(site.hits) >= 8, "the crawls never got going"
            server.shutdown()
            time.sleep(DOWN)
            server.start()
            results = [finish_crawl(*crawl, timeout=120) for crawl in crawls]
            hits = sorted(site.hits, key=lambda hit: hit.started)
        for result in results:
            assert result.returncode == 0, result.log[-3000:]
        fetched = {hit.path for hit in hits}
        assert set(paths) <= fetched, sorted(set(paths) - fetched)
        outages = sum(result.stats.get("frontier_rate/redis_outages", 0) for result in results)
        assert outages >= 1, "no crawler saw Redis go"
        short = [(round(b.started - a.started, 4), a.path, b.path)
                 for a, b in zip(hits, hits[1:], strict=False)
                 if b.started - a.started < DELAY - TOLERANCE]
        assert not short, short
    finally:
        server.stop()

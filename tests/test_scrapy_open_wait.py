"""A crawl that opens while its Redis cannot be reached (issue 63's soak: a crawler restarted
during a Redis Cluster failover died inside three tracebacks): it waits for Redis without
blocking the event loop for ``FRONTIER_RATE_OPEN_WAIT`` seconds, then closes with one ERROR
line, last, and a failed exit. Real ``scrapy runspider`` crawls against a local site."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from redis_servers import RedisServer, free_port  # noqa: E402
from scrapy_support.one_page import SPIDER  # noqa: E402
from scrapy_support.server import ChangingSite  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

WAITING = "when the crawl opened ("
"""The WARNING that says the crawl began waiting for Redis."""


def _crawl(tmp_path: Path, url: str, redis_url: str, wait: float,
           on_waiting: Callable[[], object] | None = None) -> tuple[int, str, float]:
    """``scrapy runspider`` of one page: exit code, output, seconds it ran. ``on_waiting``
    is called once, when the crawl logs that it waits for Redis: a test repairs its fault
    then, not after a fixed time (on a loaded machine Scrapy took over 3 s to open, met
    the repaired Redis, and the test saw no wait)."""
    (tmp_path / "one.py").write_text(SPIDER)
    options = {"SCHEDULER": "frontier_rate.scrapy.Scheduler", "FRONTIER_RATE_REDIS_URL": redis_url,
               "FRONTIER_RATE_NAMESPACE": "open-wait", "FRONTIER_RATE_OPEN_WAIT": wait,
               "FRONTIER_RATE_CLOSE_AFTER": "idle", "FRONTIER_RATE_SPOOL_DIR": str(tmp_path),
               "TELNETCONSOLE_ENABLED": "0", "LOG_LEVEL": "INFO"}
    command = [sys.executable, "-m", "scrapy", "runspider", "one.py", "-a", f"url={url}"]
    for name, value in options.items():
        command += ["-s", f"{name}={value}"]
    started = time.monotonic()
    crawl = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    lines = []
    for line in crawl.stdout:
        lines.append(line)
        if on_waiting is not None and WAITING in line:
            on_waiting()
            on_waiting = None
    crawl.wait(timeout=120)
    return crawl.returncode, "".join(lines), time.monotonic() - started


@pytest.mark.timeout(150)
def test_a_redis_that_answers_within_the_wait_lets_the_crawl_open(tmp_path):
    """Redis starts once the crawl waits for it: the crawl opens, fetches its page, exits
    0; one WARNING when it began waiting and one when Redis answered, no traceback."""
    server = RedisServer(tmp_path / "redis", password="s3cret-pw")
    with ChangingSite("127.0.0.1") as site:
        site.set("/", "<p>home</p>")
        try:
            code, out, _ = _crawl(tmp_path, site.url("/"), server.url, 60.0, server.start)
        finally:
            server.kill()
        hits = site.hits_for("/")
    assert code == 0, out[-3000:]
    assert len(hits) == 1, out[-3000:]
    assert "unreachable when the crawl opened" in out and "answered after" in out, out[-3000:]
    assert "Traceback" not in out and "close failure" not in out, out[-3000:]
    assert "s3cret-pw" not in out


@pytest.mark.timeout(150)
@pytest.mark.parametrize("wait", [0.0, 3.0])
def test_a_redis_that_never_answers_closes_the_crawl_with_one_line_last(tmp_path, wait):
    """No Redis at the URL: after the wait (none with 0) the spider closes with the reason
    ``frontier_rate_redis_unreachable``, the ERROR naming the URL (no password) is the last
    line, the exit code 1, and nothing was fetched."""
    url = f"redis://:s3cret-pw@127.0.0.1:{free_port()}/0"
    with ChangingSite("127.0.0.1") as site:
        site.set("/", "<p>home</p>")
        code, out, took = _crawl(tmp_path, site.url("/"), url, wait)
        assert site.hits == []
    lines = [line for line in out.splitlines() if line.strip()]
    assert code == 1, out[-3000:]
    assert "Traceback" not in out and "close failure" not in out, out[-3000:]
    assert " ERROR: frontier-rate: Redis at redis://:***@127.0.0.1:" in lines[-1], out[-3000:]
    assert "could not be reached when the crawl opened" in lines[-1], out[-3000:]
    assert "'finish_reason': 'frontier_rate_redis_unreachable'" in out, out[-3000:]
    assert ("unreachable when the crawl opened" in out) == (wait > 0), out[-3000:]
    assert took >= wait
    assert "s3cret-pw" not in out


@pytest.mark.timeout(150)
def test_ctrl_c_during_the_wait_stops_the_crawl_at_once(tmp_path):
    """SIGINT while the crawl waits for Redis: Scrapy's graceful shutdown ends the process
    within seconds (the wait is a timer on the event loop, never a blocking sleep), with
    no traceback and nothing fetched; without Ctrl-C it would wait the whole minute.
    Scrapy before 2.14 stops an engine that is still opening with its own traceback
    ("Engine not running", from ``Crawler.stop``; 2.14 checks ``engine.running``): on
    those versions that one is the only traceback allowed."""
    import signal

    import scrapy

    (tmp_path / "one.py").write_text(SPIDER)
    url = f"redis://127.0.0.1:{free_port()}/0"
    with ChangingSite("127.0.0.1") as site:
        site.set("/", "<p>home</p>")
        command = [sys.executable, "-m", "scrapy", "runspider", "one.py", "-a",
                   f"url={site.url('/')}", "-s", "SCHEDULER=frontier_rate.scrapy.Scheduler",
                   "-s", f"FRONTIER_RATE_REDIS_URL={url}", "-s", "FRONTIER_RATE_OPEN_WAIT=60",
                   "-s", f"FRONTIER_RATE_SPOOL_DIR={tmp_path}", "-s", "TELNETCONSOLE_ENABLED=0"]
        crawl = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True,
                                 env={**os.environ, "PYTHONPATH": str(ROOT)})
        out = ""
        while "unreachable when the crawl opened" not in out:
            line = crawl.stdout.readline()
            assert line, out[-3000:]
            out += line
        crawl.send_signal(signal.SIGINT)
        signalled = time.monotonic()
        out += crawl.communicate(timeout=60)[0]
        took = time.monotonic() - signalled
        assert site.hits == []
    assert took < 15, out[-3000:]
    assert "Received SIGINT" in out, out[-3000:]
    tracebacks = out.split("Traceback (most recent call last):")[1:]
    if tuple(int(part) for part in scrapy.__version__.split(".")[:2]) < (2, 14):
        tracebacks = [t for t in tracebacks if "RuntimeError: Engine not running" not in t]
    assert tracebacks == [], out[-3000:]


@pytest.mark.timeout(200)
def test_a_cluster_that_is_down_when_the_crawl_opens_is_waited_for(tmp_path):
    """A Redis Cluster with a primary down and no replica to promote answers CLUSTERDOWN
    (issue 63's quick Cluster soak: a crawler restarted during a failover got it at its
    second try, and died inside Scrapy's three tracebacks). The crawl waits for it as for
    an unreachable Redis: the primary started again once the crawl waits, it opens,
    fetches its page, exits 0, no traceback."""
    from redis_servers import redis_cluster

    with redis_cluster(tmp_path / "cluster", seed=21, args=["--cluster-node-timeout", "500"]) \
            as cluster, ChangingSite("127.0.0.1") as site:
        site.set("/", "<p>home</p>")
        down = cluster.nodes[1]
        down.kill()
        other = cluster.nodes[0].client()
        deadline = time.monotonic() + 30
        while other.cluster("info").get("cluster_state") != "fail":
            assert time.monotonic() < deadline, "the cluster did not notice its primary down"
            time.sleep(0.1)
        code, out, _ = _crawl(tmp_path, site.url("/"), cluster.url, 60.0, down.start)
        hits = site.hits_for("/")
    assert code == 0, out[-3000:]
    assert len(hits) == 1, out[-3000:]
    assert "when the crawl opened" in out and "answered after" in out, out[-3000:]
    assert "not serving every slot (a Redis Cluster)" in out, out[-3000:]  # CLUSTERDOWN met
    assert "Traceback" not in out and "close failure" not in out, out[-3000:]

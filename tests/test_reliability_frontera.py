"""RevisitBackend in a real scrapy-frontera crawl while Redis is slow, in a subprocess.

The crawl (``tests/frontera_support/crawl.py``, the same as
``test_frontera_crawl.py``'s) runs on the real clock, so the backend runs
the client's background driver. A ``StallMeter`` extension measures the
reactor's longest gap; "no observation lost, none counted twice" is
checked as in ``test_reliability_scrapy.py``: for each page, the frontier's
``fetches`` equals the 200/304 answers the site logged.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from frontier_rate.engine.frontier import Frontier

sys.path.insert(0, str(Path(__file__).parent))
from conftest import start_redis_server  # noqa: E402
from scrapy_support.server import ChangingSite  # noqa: E402

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(120)]

CRAWL = Path(__file__).parent / "frontera_support" / "crawl.py"
ROOT = Path(__file__).parent.parent
REDIS_TIMEOUT = 1.0
PAUSE = 4.5


def _answered(site: ChangingSite, path: str) -> int:
    return sum(1 for hit in site.hits_for(path) if hit.status in (200, 304))


def _start(tmp_path: Path, redis_url: str, namespace: str, seeds: list[str],
           settings: dict[str, Any]) -> tuple[subprocess.Popen, Path, Path]:
    output, log = tmp_path / "records.jsonl", tmp_path / "crawl.log"
    config = {"spider": "RevisitSpider",
              "args": {"output": str(output), "seeds": json.dumps(seeds)},
              "settings": {"FRONTIER_RATE_REDIS_URL": redis_url,
                           "FRONTIER_RATE_NAMESPACE": namespace,
                           "FRONTIER_RATE_ESTIMATOR": "interval",
                           "FRONTIER_RATE_MIN_INTERVAL": 1.0,
                           "FRONTIER_RATE_MAX_INTERVAL": 1.5,
                           "FRONTIER_RATE_MIN_HOST_DELAY": 0.05,
                           "FRONTIER_RATE_BUDGET": 100.0,
                           "LOG_FILE": str(log), "LOG_LEVEL": "INFO", **settings}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    proc = subprocess.Popen([sys.executable, str(CRAWL), str(path)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return proc, output, log


def test_slow_redis_never_stalls_a_frontera_crawl(namespace: str, tmp_path: Path) -> None:
    """``CLIENT PAUSE`` for 4.5 s with FRONTIER_RATE_REDIS_TIMEOUT=1 during a Frontera crawl.

    On the background driver every Redis call runs on the worker thread: the
    reactor's longest gap stays below one Redis timeout (the inline driver
    waits out a timeout per call on the reactor). The breaker opens once; the
    answer of a slow page (1.5 s server delay) in flight when the pause starts
    is held and replayed; every page's fetches equal the site's answers.
    """
    proc_redis, port = start_redis_server(str(tmp_path))
    url = f"redis://127.0.0.1:{port}/0"
    admin = redis.Redis(host="127.0.0.1", port=port)
    stall_file = tmp_path / "stall.json"
    try:
        with ChangingSite("127.0.0.1") as site, ChangingSite("127.0.0.2") as other:
            paths = ["/a", "/b", "/c", "/d"]
            for path in paths:
                site.set(path, f"<p>{path} {{n}}</p>", template=True)
            other.set("/slow", "<p>slow {n}</p>", template=True, delay=1.5)
            proc, output, log = _start(
                tmp_path, url, namespace, [site.url(p) for p in paths] + [other.url("/slow")],
                {"FRONTIER_RATE_REDIS_TIMEOUT": REDIS_TIMEOUT, "FRONTIER_RATE_LEASE_TIMEOUT": 30,
                 "FRONTIER_RATE_CLOSE_AFTER": 13, "STALL_METER_OUTPUT": str(stall_file),
                 "EXTENSIONS": {"frontier_rate.frontera.KeepAlive": 500,
                                "reliability_support.stall.StallMeter": 0}})
            deadline = time.time() + 20
            while other.arrivals("/slow") < 2 and time.time() < deadline and proc.poll() is None:
                time.sleep(0.01)
            assert other.arrivals("/slow") >= 2, "the crawl never revisited /slow"
            paused_at = time.time()
            admin.execute_command("CLIENT", "PAUSE", int(PAUSE * 1000), "ALL")
            try:
                _, stderr = proc.communicate(timeout=60)
            finally:
                if proc.poll() is None:
                    proc.kill()
            text = (log.read_text() if log.exists() else "") + stderr
            records = [json.loads(line) for line in output.read_text().splitlines()]
            closed = [r for r in records if r["kind"] == "closed"]
            assert proc.returncode == 0 and closed, text[-4000:]
            assert closed[-1]["reason"] == "finished", text[-4000:]
            assert "Traceback" not in text, text[text.find("Traceback") - 2000:][:6000]
            assert "redis i/o=background" in text
            stats = closed[-1]["stats"]
            stall = json.loads(stall_file.read_text())
            assert stall["max_gap"] < REDIS_TIMEOUT, stall
            assert stats["frontier_rate/redis_outages"] == 1, stats
            assert stats["frontier_rate/replayed"] >= 1, stats  # the /slow answer at least
            assert "frontier_rate/lost_results" not in stats
            assert any(hit.time > paused_at + PAUSE + 1 for hit in site.hits)  # crawled on
            with Frontier(url, namespace=namespace, estimator="interval") as frontier:
                for server, path in [(site, p) for p in paths] + [(other, "/slow")]:
                    page = frontier.page(server.url(path))
                    answered = _answered(server, path)
                    assert page is not None and page["fetches"] == answered, (path, page, answered)
            print(f"frontera slow redis: max reactor gap {stall['max_gap']:.3f} s, "
                  f"gaps over 0.2 s: {[round(g, 3) for _, g in stall['long_gaps']]}")
    finally:
        admin.close()
        proc_redis.terminate()
        proc_redis.wait(timeout=10)

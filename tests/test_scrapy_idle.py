"""A run that fetches nothing says why, once, at INFO (issue 33), with real crawls."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scrapy_support.harness import run_crawl  # noqa: E402
from scrapy_support.server import ChangingSite  # noqa: E402

pytestmark = pytest.mark.timeout(120)

LINE = "INFO: frontier-rate: this run fetched no page of the frontier: "


def test_a_second_run_within_min_interval_says_nothing_is_due_until_when(
        redis_url, namespace, tmp_path):
    with ChangingSite("127.0.0.1") as site:
        for name in ("a", "b"):
            site.set(f"/{name}", f"<p>{name}</p>")
        start = [{"url": site.url("/a")}, {"url": site.url("/b")}]
        settings = {"FRONTIER_RATE_CLOSE_AFTER": "idle", "FRONTIER_RATE_MIN_INTERVAL": 60.0,
                    "FRONTIER_RATE_MAX_INTERVAL": 60.0, "LOG_LEVEL": "INFO"}
        first = run_crawl(tmp_path, redis_url, namespace, start, settings, name="first")
        second = run_crawl(tmp_path, redis_url, namespace, start, settings, name="second")
    assert first.returncode == 0 and second.returncode == 0
    assert len(first.responses()) == 2 and second.responses() == []
    assert LINE not in first.log
    assert second.log.count(LINE) == 1, second.log[-3000:]
    line = second.log[second.log.index(LINE):].splitlines()[0]
    assert f"namespace {namespace!r} holds 2 pages" in line
    assert "nothing due before " in line and "(in 5" in line, line

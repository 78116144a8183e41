"""The host delay of a Frontera crawl, kept when requests leave (issue 61), with real crawls.

scrapy-frontera crawls (``RevisitBackend``, ``KeepAlive``) in subprocesses against a loopback
site whose robots.txt says ``Crawl-delay: 1``; the frontier's own delay is 0.05 s, so the
second comes from robots.txt alone. The site logs when each request arrives, robots.txt
fetches included: no two may arrive closer than 0.95 s, with one process and with two on one
frontier. Before issue 61 the backend took no send slot: the three pages arrived 0.000 s
apart, every second.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scrapy_support.harness import recorded_send_gap  # noqa: E402
from scrapy_support.server import ChangingSite  # noqa: E402

CRAWL = Path(__file__).parent / "frontera_support" / "crawl.py"
ROOT = Path(__file__).parent.parent

pytestmark = pytest.mark.timeout(150)


def start(tmp_path: Path, name: str, redis_url: str, namespace: str, seeds: list[str],
          run: float, extra: dict[str, Any] | None = None
          ) -> tuple[subprocess.Popen, Path, Path]:
    """Start one Frontera crawl of ``seeds`` for ``run`` seconds (``extra`` settings);
    (process, records, log)."""
    output, log = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.log"
    config: dict[str, Any] = {
        "spider": "RevisitSpider",
        "args": {"output": str(output), "seeds": json.dumps(seeds)},
        "settings": {
            "FRONTIER_RATE_REDIS_URL": redis_url,
            "FRONTIER_RATE_NAMESPACE": namespace,
            "FRONTIER_RATE_ESTIMATOR": "interval",
            "FRONTIER_RATE_MIN_INTERVAL": 0.5,  # every page due again long before its turn
            "FRONTIER_RATE_MAX_INTERVAL": 0.8,
            "FRONTIER_RATE_MIN_HOST_DELAY": 0.05,
            "FRONTIER_RATE_BUDGET": 100.0,
            "FRONTIER_RATE_CLOSE_AFTER": run,
            "ROBOTSTXT_OBEY": True,
            "LOG_FILE": str(log),
            "LOG_LEVEL": "DEBUG",
            **(extra or {}),
        },
    }
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(config))
    proc = subprocess.Popen([sys.executable, str(CRAWL), str(path)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return proc, output, log


def finish(proc: subprocess.Popen, output: Path, log: Path) -> list[dict[str, Any]]:
    """Wait for a crawl; its records (it must have exited cleanly)."""
    _, stderr = proc.communicate(timeout=90)
    text = (log.read_text() if log.exists() else "") + stderr
    assert proc.returncode == 0, text[-3000:]
    assert "Traceback" not in text, text[text.index("Traceback") - 1500:][:4000]
    return [json.loads(line) for line in output.read_text().splitlines()] \
        if output.exists() else []


def serve(site: ChangingSite) -> list[str]:
    site.set("/robots.txt", "User-agent: *\nCrawl-delay: 1\n", content_type="text/plain")
    for path in ("/a", "/b", "/c"):
        site.set(path, f"<p>{path} {{n}}</p>", template=True)
    return [site.url(p) for p in ("/a", "/b", "/c")]


def arrival_gaps(site: ChangingSite) -> list[float]:
    """Seconds between consecutive arrivals at ``site`` (every path, robots.txt too)."""
    arrivals = sorted(hit.started for hit in site.hits)
    return [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]


def wait_for_response(output: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not (output.exists() and '"kind": "response"' in output.read_text()):
        assert time.monotonic() < deadline, f"no response in {output} within {timeout} s"
        time.sleep(0.05)


def test_one_frontera_process_keeps_the_robots_crawl_delay(tmp_path, redis_url, namespace):
    with ChangingSite("127.0.0.1") as site:
        seeds = serve(site)
        records = finish(*start(tmp_path, "one", redis_url, namespace, seeds, 7))
        gaps = arrival_gaps(site)
    assert sum(r["kind"] == "response" for r in records) >= 4, records
    assert len(gaps) >= 4, gaps
    assert min(gaps) >= 0.95, sorted(gaps)[:5]


def test_two_frontera_processes_keep_the_crawl_delay_together(tmp_path, redis_url, namespace):
    with ChangingSite("127.0.0.1") as site:
        seeds = serve(site)
        # Both start together: their robots.txt fetches and pages meet. Whichever asks first
        # gets a due page, so both take part in any order. 12 s each: on a loaded machine one
        # process opened seconds after the other and, in runs of 8 s, won no lease of the
        # host (one a second) before its run ended ("both processes should take part").
        runs = [start(tmp_path, f"w{i}", redis_url, namespace, seeds, 12) for i in (0, 1)]
        runs = [finish(*run) for run in runs]
        gaps = arrival_gaps(site)
    assert all(any(r["kind"] == "response" for r in run) for run in runs), \
        "both processes should take part"
    assert len(gaps) >= 6, gaps
    assert min(gaps) >= 0.95, sorted(gaps)[:5]


def test_a_frontera_crawlers_first_sends_are_widened_at_its_start(tmp_path, redis_url,
                                                                  namespace):
    """``KeepAlive`` installs the politeness from ``spider_opened`` and starts its stall
    watch there (``ScrapyPoliteness.on_spider_opened``): the gaps recorded with a Frontera
    crawler's first send slots are widened by ``START_STALL``, as a Scrapy crawler's (the
    Cluster hour: a crawler's first request 0.29 s after another's under 0.3 s). Without the
    watch started the recorded gap is the delay and its margin, 0.55 s."""
    from frontier_rate.crawl.loop_stalls import START_SHARE, START_STALL

    delay = 0.5
    with ChangingSite("127.0.0.1") as site:
        site.set("/only", "<p>one page</p>")
        records = finish(*start(tmp_path, "first", redis_url, namespace, [site.url("/only")],
                                2.0,  # one send, at the start (a revisit is 60 s away)
                                {"FRONTIER_RATE_MIN_HOST_DELAY": delay,
                                 "FRONTIER_RATE_MIN_INTERVAL": 60.0,
                                 "FRONTIER_RATE_MAX_INTERVAL": 120.0,
                                 "ROBOTSTXT_OBEY": False}))
        assert site.hits_for("/only"), records
    gap = recorded_send_gap(redis_url, namespace, "127.0.0.1")
    assert gap >= delay + min(START_STALL, START_SHARE * delay), gap

"""Run real crawls of RecordingSpider in subprocesses and read what they recorded.

``start_crawl`` writes a JSON config and runs ``crawl.py`` with
``frontier_rate.scrapy.Scheduler`` against a given Redis; ``finish_crawl``
waits and returns the spider's records, the log and the exit code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frontier_rate.engine.frontier import Frontier

CRAWL = Path(__file__).parent / "crawl.py"
ROOT = Path(__file__).parent.parent.parent



@dataclass
class Crawl:
    returncode: int
    records: list[dict[str, Any]]
    log: str

    def responses(self, url: str | None = None) -> list[dict[str, Any]]:
        return [
            r for r in self.records
            if r["kind"] == "response" and (url is None or r["request_url"] == url)
        ]

    def errors(self, url: str | None = None) -> list[dict[str, Any]]:
        return [
            r for r in self.records
            if r["kind"] == "error" and (url is None or r["url"] == url)
        ]

    @property
    def closed(self) -> dict[str, Any]:
        closing = [r for r in self.records if r["kind"] == "closed"]
        assert closing, f"spider never closed; log tail:\n{self.log[-3000:]}"
        return closing[-1]

    @property
    def stats(self) -> dict[str, Any]:
        return self.closed["stats"]


def start_crawl(
    tmp_path: Path, name: str, redis_url: str, namespace: str, start: list[dict[str, Any]],
    settings: dict[str, Any] | None = None, follow: bool = False, spider: str | None = None,
    args: dict[str, Any] | None = None,
) -> tuple[subprocess.Popen, Path, Path]:
    output, log = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.log"
    config = {
        "settings": {
            "SCHEDULER": "frontier_rate.scrapy.Scheduler",
            "FRONTIER_RATE_REDIS_URL": redis_url,
            "FRONTIER_RATE_NAMESPACE": namespace,
            "FRONTIER_RATE_ESTIMATOR": "interval",  # periodic intervals: countable revisits
            "FRONTIER_RATE_MIN_INTERVAL": 1.0,
            "FRONTIER_RATE_MAX_INTERVAL": 1.2,
            "FRONTIER_RATE_MIN_HOST_DELAY": 0.05,
            "FRONTIER_RATE_BUDGET": 100.0,
            "FRONTIER_RATE_CLOSE_AFTER": 4,
            "LOG_FILE": str(log),
            "LOG_LEVEL": "DEBUG",
            **(settings or {}),
        },
        "args": {
            "output": str(output), "start": json.dumps(start), "follow": "1" if follow else "0",
            **(args or {}),
        },
        "spider": spider,
    }
    config_path = tmp_path / f"{name}.json"
    config_path.write_text(json.dumps(config))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(CRAWL), str(config_path)], env=env, cwd=str(tmp_path),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    return proc, output, log


def finish_crawl(proc: subprocess.Popen, output: Path, log: Path, timeout: float = 60) -> Crawl:
    out, _ = proc.communicate(timeout=timeout)
    text = (log.read_text() if log.exists() else "") + out.decode(errors="replace")
    records = []
    if output.exists():
        records = [json.loads(line) for line in output.read_text().splitlines() if line]
    return Crawl(proc.returncode, records, text)


def run_crawl(tmp_path: Path, redis_url: str, namespace: str, start: list[dict[str, Any]],
              settings: dict[str, Any] | None = None, follow: bool = False,
              name: str = "crawl", spider: str | None = None,
              args: dict[str, Any] | None = None) -> Crawl:
    """Run one crawl to its end (``spider``: "module.Class" beside crawl.py)."""
    proc, output, log = start_crawl(tmp_path, name, redis_url, namespace, start, settings,
                                    follow, spider, args)
    return finish_crawl(proc, output, log)


def open_frontier(redis_url: str, namespace: str) -> Frontier:
    """The crawl's frontier, opened from the test process to inspect pages."""
    return Frontier(redis_url, namespace=namespace, estimator="interval")


def revisits(crawl: Crawl, url: str) -> list[dict[str, Any]]:
    """Responses for ``url`` after its first fetch."""
    return crawl.responses(url)[1:]


def spawned_children(pid: int) -> list[int]:
    """The detection processes (``frontier_rate.detection.detection_worker``, or its shared
    variant) started by process ``pid`` (Linux /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            command = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if parent == pid and b"detection_worker" in command:  # shared_detection_worker too
            found.append(int(stat.parent.name))
    return found


def recorded_send_gap(redis_url: str, namespace: str, host: str) -> float:
    """The gap the last shared send slot of ``host`` was recorded with (``Keys.send``: "at,
    gap"), in a namespace of one shard."""
    import redis

    from frontier_rate.store.keys import Keys

    client = redis.Redis.from_url(redis_url)
    try:
        record = client.hget(Keys(namespace, 1).send, host)
    finally:
        client.close()
    assert record is not None, "no shared send recorded"
    _, gap = (float(part) for part in record.decode().split(","))
    return gap

"""Throughput of one crawl: Scrapy's default scheduler vs frontier_rate.scrapy.Scheduler.

    python tests/scrapy_support/bench.py [--pages 2000] [--redis-url URL]

Both crawls fetch the same N pages of a local ChangingSite once (the
frontier run uses FRONTIER_RATE_CLOSE_AFTER="idle", no host delay and a large
budget) and report pages per minute between the first and the last request
the site answered. Without --redis-url a throw-away redis-server is started.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from conftest import start_redis_server  # noqa: E402

from scrapy_support.server import ChangingSite  # noqa: E402


def crawl(site: ChangingSite, pages: int, settings: dict, workdir: Path, name: str) -> float:
    start = [{"url": site.url(f"/p{i}")} for i in range(pages)]
    config = {
        "settings": {"LOG_LEVEL": "WARNING", "CONCURRENT_REQUESTS": 16,
                     "CONCURRENT_REQUESTS_PER_DOMAIN": 16, **settings},
        "args": {"output": str(workdir / f"{name}.jsonl"), "start": json.dumps(start)},
    }
    path = workdir / f"{name}.json"
    path.write_text(json.dumps(config))
    before = len(site.hits)
    env = {**os.environ, "PYTHONPATH": str(HERE.parent.parent)}
    subprocess.run([sys.executable, str(HERE / "crawl.py"), str(path)], check=True, env=env)
    hits = site.hits[before:]
    if len(hits) != pages:
        from collections import Counter
        twice = [p for p, n in Counter(h.path for h in hits).items() if n > 1]
        raise SystemExit(f"{name}: expected {pages} fetches, the site answered {len(hits)}: "
                         f"{[(h.path, h.status) for h in hits if h.path in twice or h.path == '/robots.txt'][:20]}")
    span = hits[-1].time - hits[0].started
    return 60.0 * pages / span


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--redis-url")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ChangingSite("127.0.0.1") as site:
        workdir = Path(tmp)
        for i in range(args.pages):
            site.set(f"/p{i}", f"<html><body><p>page {i}</p></body></html>")
        server = None
        url = args.redis_url
        if url is None:
            server, port = start_redis_server(tmp)
            url = f"redis://127.0.0.1:{port}/0"
        try:
            default = crawl(site, args.pages, {}, workdir, "default")
            frontier = crawl(site, args.pages, {
                "SCHEDULER": "frontier_rate.scrapy.Scheduler", "FRONTIER_RATE_REDIS_URL": url,
                "FRONTIER_RATE_NAMESPACE": "bench", "FRONTIER_RATE_CLOSE_AFTER": "idle",
                "FRONTIER_RATE_MIN_HOST_DELAY": 0.0, "FRONTIER_RATE_BUDGET": 1e6,
                "FRONTIER_RATE_MIN_INTERVAL": 3600.0, "FRONTIER_RATE_ESTIMATOR": "interval",
            }, workdir, "frontier")
        finally:
            if server is not None:
                server.terminate()
                server.wait()
    print(f"pages={args.pages} default scheduler: {default:.0f} pages/min, "
          f"frontier_rate.scrapy.Scheduler: {frontier:.0f} pages/min "
          f"({frontier / default:.2f}x)")


if __name__ == "__main__":
    main()

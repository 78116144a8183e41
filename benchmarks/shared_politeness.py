"""Two crawler processes on one frontier: the smallest gap between requests at the site.

Each round starts a loopback site (robots.txt + 10 pages, arrival times logged) and two
crawls of ``tests/scrapy_support/crawl.py`` on one frontier (a real redis-server),
``DOWNLOAD_DELAY = 1``, ``ROBOTSTXT_OBEY = True``, 7 s each, once with the shared send
slot (``frontier_rate.store.send_slot``, the default) and once with
``FRONTIER_RATE_SHARED_SEND = False`` (each process paces only its own requests, as
before issue 33). Target (issue 33): smallest gap >= 0.95 s in every round.

    python benchmarks/shared_politeness.py [--rounds 3] [--quick] [--no-write]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _report import machine, table, write_json, write_section  # noqa: E402
from conftest import start_redis_server  # noqa: E402
from scrapy_support.harness import finish_crawl, start_crawl  # noqa: E402
from scrapy_support.server import ChangingSite  # noqa: E402
from test_scrapy_shared_politeness import SHARED_DELAY, arrival_gaps  # noqa: E402

TARGET = 0.95


def one_round(redis_url: str, shared: bool) -> dict[str, Any]:
    """Two crawls on one fresh namespace; the site's arrival gaps."""
    settings = {**SHARED_DELAY, "FRONTIER_RATE_SHARED_SEND": shared, "LOG_LEVEL": "INFO"}
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="fr-polite-") as tmp, \
            ChangingSite("127.0.0.1") as site:
        site.set("/robots.txt", "User-agent: *\nAllow: /\n", content_type="text/plain")
        paths = [f"/p{i}" for i in range(10)]
        for path in paths:
            site.set(path, f"<p>{path}</p>")
        start = [{"url": site.url(p)} for p in paths]
        runs = [start_crawl(Path(tmp), f"w{i}", redis_url, namespace, start, settings)
                for i in (0, 1)]
        crawls = [finish_crawl(*run) for run in runs]
        if any(c.returncode for c in crawls):
            raise RuntimeError(crawls[0].log[-2000:] + crawls[1].log[-2000:])
        gaps = arrival_gaps(site)
        return {"requests": len(site.hits), "min_gap": min(gaps),
                "median_gap": statistics.median(gaps),
                "robots": sum(1 for hit in site.hits if hit.path == "/robots.txt")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one round, nothing written")
    parser.add_argument("--no-write", action="store_true")
    options = parser.parse_args(argv)
    rounds = 1 if options.quick else options.rounds
    with tempfile.TemporaryDirectory(prefix="fr-polite-redis-") as directory:
        proc, port = start_redis_server(directory)
        try:
            url = f"redis://127.0.0.1:{port}/0"
            result: dict[str, list[dict[str, Any]]] = {"shared": [], "per_process": []}
            for index in range(rounds):
                for mode in result:
                    outcome = one_round(url, mode == "shared")
                    result[mode].append(outcome)
                    print(f"round {index + 1} {mode}: {outcome}", flush=True)
        finally:
            proc.kill()
            proc.wait()
    shared_min = min(r["min_gap"] for r in result["shared"])
    before_min = min(r["min_gap"] for r in result["per_process"])
    verdict = "met" if shared_min >= TARGET else "**missed**"
    print(f"smallest gap: shared {shared_min:.3f} s, per process {before_min:.3f} s ({verdict})")
    if options.quick or options.no_write:
        return 0
    rows = [[i + 1, mode, r["requests"], r["robots"], r["min_gap"], r["median_gap"]]
            for mode in result for i, r in enumerate(result[mode])]
    write_json("shared_politeness", {"rounds": rounds, **result, "target": TARGET,
                                     "smallest_gap_shared": shared_min,
                                     "smallest_gap_per_process": before_min})
    title = "Two processes, one frontier: the host delay at the site"
    write_section("shared_politeness", f"""## {title} (`benchmarks/shared_politeness.py`)

Two Scrapy crawls of one frontier (a real redis-server), one loopback site with a
robots.txt and 10 pages, `DOWNLOAD_DELAY = 1`, `ROBOTSTXT_OBEY = True`, 7 s each; the
site logs when every request arrives (robots.txt included). "shared": the default, each
send takes the host's next send time in Redis (`lua/send_slot.lua`); "per_process":
`FRONTIER_RATE_SHARED_SEND = False`, each process paces only its own requests (the
behaviour before issue 33). {machine()} (the machine was shared with other work).

{table(["round", "mode", "requests", "robots.txt", "smallest gap (s)", "median gap (s)"], rows)}

Smallest gap between two requests at the site: **{shared_min:.3f} s** shared,
{before_min:.3f} s per process. Target >= {TARGET} s in every round: {verdict}.
""")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Frontera crawls of a ``Crawl-delay: 1`` host: the smallest gap between requests at the site.

Each round starts a loopback site (robots.txt with ``Crawl-delay: 1``, three pages due again
every 0.5-0.8 s, arrival times logged) and scrapy-frontera crawls (``RevisitBackend``,
``KeepAlive``) of ``tests/frontera_support/crawl.py`` on one frontier (a real redis-server),
``FRONTIER_RATE_MIN_HOST_DELAY = 0.05``, ``ROBOTSTXT_OBEY = True``: one process for 7 s, then
two together for 8 s, and two with ``FRONTIER_RATE_SHARED_SEND = False``. Target (issue 61):
smallest gap >= 0.95 s with one process and with two (before: 0.000 s).

    python benchmarks/frontera_politeness.py [--rounds 3] [--quick] [--no-write]
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
from scrapy_support.server import ChangingSite  # noqa: E402
from test_frontera_politeness import arrival_gaps, finish, serve, start  # noqa: E402

TARGET = 0.95
MODES = ("one", "two", "two_per_process")


def one_round(redis_url: str, mode: str) -> dict[str, Any]:
    """One or two crawls on a fresh namespace; the site's arrival gaps."""
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    extra = {"FRONTIER_RATE_SHARED_SEND": False} if mode == "two_per_process" else {}
    with tempfile.TemporaryDirectory(prefix="fr-frontera-polite-") as tmp, \
            ChangingSite("127.0.0.1") as site:
        seeds = serve(site)
        count, run = (1, 7) if mode == "one" else (2, 8)
        runs = [start(Path(tmp), f"w{i}", redis_url, namespace, seeds, run, extra)
                for i in range(count)]
        for crawl in runs:
            finish(*crawl)
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
    result: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="fr-frontera-polite-redis-") as directory:
        proc, port = start_redis_server(directory)
        try:
            url = f"redis://127.0.0.1:{port}/0"
            for index in range(rounds):
                for mode in MODES:
                    outcome = one_round(url, mode)
                    result[mode].append(outcome)
                    print(f"round {index + 1} {mode}: {outcome}", flush=True)
        finally:
            proc.kill()
            proc.wait()
    smallest = {mode: min(r["min_gap"] for r in result[mode]) for mode in MODES}
    medians = {mode: statistics.median(r["median_gap"] for r in result[mode]) for mode in MODES}
    met = smallest["one"] >= TARGET and smallest["two"] >= TARGET
    print(f"smallest gap: {smallest} ({'met' if met else 'missed'})")
    if options.quick or options.no_write:
        return 0
    rows = [[i + 1, mode, r["requests"], r["robots"], r["min_gap"], r["median_gap"]]
            for mode in MODES for i, r in enumerate(result[mode])]
    write_json("frontera_politeness", {"rounds": rounds, **result, "target": TARGET,
                                       "smallest_gap": smallest, "median_gap": medians})
    title = "Frontera: a robots.txt Crawl-delay kept when requests leave"
    write_section("frontera_politeness", f"""## {title} (`benchmarks/frontera_politeness.py`)

scrapy-frontera crawls (`RevisitBackend`, `KeepAlive`) of one frontier (a real redis-server),
one loopback site whose robots.txt says `Crawl-delay: 1`, three pages due again every
0.5-0.8 s, `FRONTIER_RATE_MIN_HOST_DELAY = 0.05`, `ROBOTSTXT_OBEY = True`; the site logs when
every request arrives (robots.txt included). "one": one process, 7 s; "two": two processes
together, 8 s; "two_per_process": the same with `FRONTIER_RATE_SHARED_SEND = False`. Before
issue 61 the backend took no send slot: the three pages arrived 0.000 s apart, every second.
{machine()} (the machine was shared with other work).

{table(["round", "mode", "requests", "robots.txt", "smallest gap (s)", "median gap (s)"], rows)}

Smallest gap between two requests at the site: **{smallest['one']:.3f} s** with one process,
**{smallest['two']:.3f} s** with two (target >= {TARGET} s: {'met' if met else '**missed**'};
median gaps {medians['one']:.3f} s and {medians['two']:.3f} s), against
{smallest['two_per_process']:.3f} s when each process keeps the delay alone.
""")
    return 0


if __name__ == "__main__":
    sys.exit(main())

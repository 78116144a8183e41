"""``scrapy bench`` with Scrapy's scheduler and with frontier-rate's, default settings, side by side.

    python benchmarks/scrapy_bench.py [--rounds N] [--seconds S] [--no-write] [--quick]

Scrapy's own local benchmark: its bench server (``scrapy.utils.benchserver``: pages
that link to 20 pages never seen before) and its bench spider (follow every link),
with ``scrapy bench``'s settings (``LOGSTATS_INTERVAL = 1``,
``CLOSESPIDER_TIMEOUT``). Two differences from typing ``scrapy bench``: the server is
started here on 127.0.0.1:8998 (``scrapy bench`` listens on every interface; this
project's servers bind to loopback only), and each crawl runs in a subprocess of this
script, with ``SCHEDULER`` the only setting that differs. frontier-rate runs with its
default ``FRONTIER_RATE_*`` settings on a fresh embedded Redis per crawl.

Rounds alternate (Scrapy, frontier-rate, Scrapy, ...) so drift of a shared machine hits
both. Pages per minute = 60 x response_received_count / elapsed_time_seconds from the
crawl's stats (what ``scrapy bench`` reports at its end). Writes
docs/benchmarks/scrapy_bench.json and the section of docs/BENCHMARKS.md between its
markers, unless --no-write (``--quick``: one round of 4 s, nothing written).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT_JSON = ROOT / "docs" / "benchmarks" / "scrapy_bench.json"
DOC = ROOT / "docs" / "BENCHMARKS.md"
MARK_BEGIN, MARK_END = "<!-- scrapy_bench:begin -->", "<!-- scrapy_bench:end -->"
TARGET = 1.0
"""Issue 36: frontier-rate with default settings >= 1.0x Scrapy's pages/min (issue 23 asked
0.9x)."""
SCHEDULERS = {"scrapy": "scrapy.core.scheduler.Scheduler",
              "frontier-rate": "frontier_rate.scrapy.Scheduler"}

SERVER = """
from twisted.internet import reactor
from twisted.web.server import Site
from scrapy.utils.benchserver import Root
port = reactor.listenTCP(8998, Site(Root()), interface="127.0.0.1")
reactor.callWhenRunning(lambda: print("listening", flush=True))
reactor.run()
"""

CRAWL = """
import json, sys
from scrapy.commands.bench import Command, _BenchSpider
from scrapy.crawler import CrawlerProcess
settings = dict(Command.default_settings)
settings.update(json.loads(sys.argv[1]))
process = CrawlerProcess(settings)
crawler = process.create_crawler(_BenchSpider)
process.crawl(crawler, total=100000)
process.start()
stats = crawler.stats.get_stats()
print("STATS " + json.dumps({k: stats.get(k) for k in (
    "response_received_count", "elapsed_time_seconds", "finish_reason")}), flush=True)
"""


def crawl(scheduler: str, seconds: float, data_dir: Path) -> dict[str, Any]:
    """One bench crawl in a subprocess: its stats and pages per minute."""
    settings = {"SCHEDULER": SCHEDULERS[scheduler], "CLOSESPIDER_TIMEOUT": seconds,
                "LOG_LEVEL": "WARNING", "TELNETCONSOLE_ENABLED": False}
    env = {**os.environ, "FRONTIER_RATE_DATA_DIR": str(data_dir),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", CRAWL, json.dumps(settings)], env=env,
                          capture_output=True, text=True, timeout=seconds + 120)
    line = next((x for x in done.stdout.splitlines() if x.startswith("STATS ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"{scheduler} crawl failed (exit {done.returncode}):\n"
                           f"{done.stderr[-3000:]}")
    stats = json.loads(line[len("STATS "):])
    stats["pages_per_min"] = 60.0 * stats["response_received_count"] / stats["elapsed_time_seconds"]
    return stats


def scrapy_version() -> str:
    from importlib.metadata import version

    return version("scrapy")


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def render(result: dict[str, Any]) -> str:
    ours, theirs = result["frontier-rate"], result["scrapy"]
    rows = "\n".join(
        f"| {i + 1} | {a:,.0f} | {b:,.0f} | {b / a:.2f} |"
        for i, (a, b) in enumerate(zip(theirs["runs"], ours["runs"], strict=True)))
    ratio = result["ratio_of_medians"]
    verdict = "met" if ratio >= TARGET else "**missed**"
    return f"""{MARK_BEGIN}
## `scrapy bench`, default settings (`benchmarks/scrapy_bench.py`)

Scrapy's own local benchmark (its bench server and link-following spider, its settings),
{result['rounds']} rounds of {result['seconds']:g} s alternating, `SCHEDULER` the only
setting that differs: frontier-rate with every `FRONTIER_RATE_*` setting at its default
(budget 1 revisit/s, host delay from `DOWNLOAD_DELAY`), a fresh embedded Redis per crawl.
First fetches take no budget token, so a first crawl is not held to the revisit budget.
{result['machine']}, {result['date']}.

| round | Scrapy's scheduler (pages/min) | frontier-rate (pages/min) | ratio |
|---|---|---|---|
{rows}

Median {ours['median']:,.0f} vs {theirs['median']:,.0f} pages/min: **{ratio:.2f}x** Scrapy's
(spread: frontier-rate {ours['min']:,.0f}-{ours['max']:,.0f}, Scrapy
{theirs['min']:,.0f}-{theirs['max']:,.0f}). Target >= {TARGET}x: {verdict}.
{MARK_END}"""


def write_doc(text: str) -> None:
    doc = DOC.read_text(encoding="utf-8")
    if MARK_BEGIN in doc:
        before, rest = doc.split(MARK_BEGIN, 1)
        after = rest.split(MARK_END, 1)[1]
        doc = before + text + after
    else:
        doc = doc.rstrip("\n") + "\n\n" + text + "\n"
    DOC.write_text(doc, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--from-json", action="store_true", help="re-render the doc only")
    parser.add_argument("--quick", action="store_true", help="one round of 4 s, no writing")
    options = parser.parse_args(argv)
    if options.quick:
        options.rounds, options.seconds, options.no_write = 1, 4.0, True
    if options.from_json:
        write_doc(render(json.loads(OUT_JSON.read_text())))
        return 0
    server = subprocess.Popen([sys.executable, "-u", "-c", SERVER], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert server.stdout is not None
        server.stdout.readline()
        runs: dict[str, list[float]] = {name: [] for name in SCHEDULERS}
        for round_ in range(options.rounds):
            for name in SCHEDULERS:
                with tempfile.TemporaryDirectory(prefix="fr-bench-") as data:
                    stats = crawl(name, options.seconds, Path(data))
                runs[name].append(stats["pages_per_min"])
                print(f"round {round_ + 1} {name}: {stats['pages_per_min']:,.0f} pages/min "
                      f"({stats['response_received_count']} responses)", flush=True)
    finally:
        server.kill()
        server.wait()
    result: dict[str, Any] = {name: {"runs": values, **summary(values)}
                              for name, values in runs.items()}
    result["ratio_of_medians"] = result["frontier-rate"]["median"] / result["scrapy"]["median"]
    result.update(rounds=options.rounds, seconds=options.seconds,
                  date=time.strftime("%Y-%m-%d"),
                  machine=f"{os.cpu_count()} cores, Python {platform.python_version()}, "
                          f"Scrapy {scrapy_version()}")
    print(f"frontier-rate / Scrapy, medians: {result['ratio_of_medians']:.2f}")
    if not options.no_write:
        OUT_JSON.write_text(json.dumps(result, indent=1) + "\n")
        write_doc(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

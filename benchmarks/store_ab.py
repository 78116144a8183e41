"""Store throughput of several code trees side by side: observations/s and leases/s, in
alternating rounds, on the embedded Redis 6.2 (EVALSHA) and on Redis 7 (Functions where
the tree has them).

    python benchmarks/store_ab.py --tree new=. --tree bb819b2=/tmp/bb819b2 \\
        --tree main=/tmp/main [--pages 100000] [--rounds 5] [--servers embedded redis7]
    python benchmarks/store_ab.py --quick        # 3,000 pages, 1 round, this tree, prints only

Each measurement is a child process that imports ``frontier_rate`` from its tree
(``PYTHONPATH``) and runs what ``benchmarks/store.py`` times (the same namespace
settings, ``fill`` then ``throughput``: 5 rounds of 20,000 leases and their
observations) through the public ``Frontier`` API only, so that old trees run it
unchanged. Every round runs every tree once per server, the order of the trees rotating
from round to round, on one server of each kind kept for the whole run and emptied
(FLUSHALL) between measurements. The child also records, from ``INFO commandstats``
over the timed part, the server's microseconds per script call (EVALSHA or FCALL) and
per page (the per-step breakdown of where the server time goes), and the load average.
Reported: median and range over the rounds, and each tree's median over the first
tree's (the ratio the targets of issue 36 name). Writes docs/benchmarks/store_ab.json
and the ``store_ab`` section of docs/BENCHMARKS.md unless --no-write.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import _report  # noqa: E402

DEBIAN_REDIS = "/usr/bin/redis-server"

CHILD = r'''
import gc, json, os, sys, time
import numpy as np
import redis
from frontier_rate import Frontier

url, n, rounds, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
PAGES_PER_HOST = 50


def url_of(i):
    prefix = f"https://www.host{i // PAGES_PER_HOST:07d}.example.org/articles/"
    u = f"{prefix}{i:010d}"
    return u + "x" * (60 - len(u))


def server_stats(client):
    stats = client.info("commandstats")
    return {k[len("cmdstat_"):]: (v["calls"], v["usec"]) for k, v in stats.items()}


f = Frontier(url, namespace="ab", estimator="sam", budget=1e9, min_host_delay=0.0,
             min_interval=60.0, max_interval=30 * 86400, lease_timeout=1e9, seed=1,
             redis_timeout=120.0)
for i in range(0, n, 20000):
    f.add_many([(url_of(j), 1.0 + (j % 7)) for j in range(i, min(n, i + 20000))], now=0.0)
done = 0
while done < n:
    got = f.next_requests(20000, now=0.0)
    f.observe_many([(d, {"fingerprint": "v0", "fetched_at": 0.0}) for d in got])
    done += len(got)
gc.collect()
rng = np.random.default_rng(0)
lease_time = observe_time = 0.0
leased = observed = 0
lease_stats, observe_stats = {}, {}


def add_delta(total, before, after):
    for cmd, (calls, usec) in after.items():
        c0, u0 = before.get(cmd, (0, 0))
        t = total.setdefault(cmd, [0, 0])
        t[0] += calls - c0
        t[1] += usec - u0


for r in range(rounds):
    t = 1e7 * (r + 1)
    f.resolve(now=t)
    got = []
    s0 = server_stats(f.client)
    t0 = time.perf_counter()
    while len(got) < batch:
        more = f.next_requests(min(5000, batch - len(got)), now=t)
        if not more:
            break
        got += more
    lease_time += time.perf_counter() - t0
    add_delta(lease_stats, s0, server_stats(f.client))
    leased += len(got)
    results = [(d, {"fingerprint": f"v{rng.integers(2)}", "fetched_at": t}) for d in got]
    s0 = server_stats(f.client)
    t0 = time.perf_counter()
    f.observe_many(results)
    observe_time += time.perf_counter() - t0
    add_delta(observe_stats, s0, server_stats(f.client))
    observed += len(got)
scripts = getattr(f, "scripts", None)
mode = "functions" if getattr(scripts, "functions", False) else "evalsha"
print(json.dumps({"observe_per_s": observed / observe_time, "next_requests_per_s": leased / lease_time,
                  "observed": observed, "leased": leased, "mode": mode,
                  "observe_server": observe_stats, "lease_server": lease_stats,
                  "load_average": os.getloadavg()[0]}))
'''


def start_server(binary: str | None, directory: str) -> tuple[subprocess.Popen, str]:
    sys.path.insert(0, str(ROOT / "tests"))
    from redis_servers import free_port, redis_server_binary

    port = free_port()
    proc = subprocess.Popen([binary or redis_server_binary(), "--port", str(port), "--bind",
                             "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", directory],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    import redis

    client = redis.Redis.from_url(url)
    for _ in range(200):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    client.close()
    return proc, url


def child(tree: Path, url: str, pages: int, rounds: int, batch: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "FRONTIER_RATE_LOG_LEVEL": "WARNING"}
    out = subprocess.run([sys.executable, "-c", CHILD, url, str(pages), str(rounds), str(batch)],
                         env=env, cwd=tree, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(f"{tree}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def summary(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def per_step(server: dict, pages: int) -> dict:
    """Server µs per page of each command (scripts include the commands they run)."""
    return {cmd: usec / pages for cmd, (calls, usec) in server.items() if usec / pages >= 0.05}


def section(report: dict) -> str:
    """The store_ab section of docs/BENCHMARKS.md from a report."""
    ref = list(report["trees"])[-1]
    rows = []
    for s, by_tree in report["servers"].items():
        for name, row in by_tree.items():
            o, le = row["observe_per_s"], row["next_requests_per_s"]
            rows.append([s, name, row["mode"], f"{o['median']:,.0f}",
                         f"{o['min']:,.0f}-{o['max']:,.0f}", f"{row['observe_vs_' + ref]:.2f}",
                         f"{le['median']:,.0f}", f"{le['min']:,.0f}-{le['max']:,.0f}",
                         f"{row['leases_vs_' + ref]:.2f}",
                         f"{row['load_average']['min']:.1f}-{row['load_average']['max']:.1f}"])
    trees = ", ".join(f"`{name}` = commit {commit}"
                      for name, commit in report.get("commits", report["trees"]).items())
    return (f"## Store throughput at {report['pages']:,} pages, code trees side by side "
            f"(`benchmarks/store_ab.py`)\n\n"
            f"{report['pages']:,} pages, {report['rounds']} alternating rounds (the order of the "
            f"trees rotates each round), each a fresh namespace on one server per kind emptied "
            f"between runs; 5 x {report['batch']:,} leases and their observations timed per "
            f"run, as `benchmarks/store.py` does. Median, range over the rounds, and the "
            f"median over `{ref}`'s. Trees: {trees}. {report.get('note', '')}\n\n"
            + _report.table(["server", "tree", "scripts", "observations/s", "range",
                             f"x {ref}", "leases/s", "range", f"x {ref}", "load average"],
                            rows))


def commit_of(path: str) -> str:
    """The short commit a tree has checked out (its path when it is no git tree)."""
    out = subprocess.run(["git", "-C", path, "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", default=[],
                        help="name=path of a code tree (repeat; the last is the reference the "
                             "ratios divide by)")
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--servers", nargs="+", default=["embedded", "redis7"],
                        choices=["embedded", "redis7"])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--json-out", help="also write the report to this path")
    parser.add_argument("--from-json", help="write docs/ from a report saved by --json-out "
                        "(with --note: a sentence on the machine's state)")
    parser.add_argument("--note", default="")
    parser.add_argument("--name", default="store_ab",
                        help="name of the docs/ section and JSON (one per size)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the servers on kill
    if args.from_json:
        report = json.loads(Path(args.from_json).read_text())
        report["note"] = args.note
        report.setdefault("commits", {n: commit_of(p) for n, p in report["trees"].items()})
        _report.write_json(args.name, report)
        _report.write_section(args.name, section(report))
        print(f"wrote docs/BENCHMARKS.md and docs/benchmarks/{args.name}.json")
        return 0
    trees = [(t.split("=", 1)[0], Path(t.split("=", 1)[1]).resolve()) for t in args.tree] \
        or [("this", ROOT)]
    if args.quick:
        args.pages, args.rounds, args.no_write = 3_000, 1, True
    if "redis7" in args.servers and not Path(DEBIAN_REDIS).exists():
        print(f"{DEBIAN_REDIS} missing: Redis 7 skipped")
        args.servers = [s for s in args.servers if s != "redis7"]
    batch = min(20000, args.pages)
    servers, tmp = {}, tempfile.mkdtemp(prefix="frontier-rate-ab-")
    results: dict = {s: {name: [] for name, _ in trees} for s in args.servers}
    try:
        for s in args.servers:
            servers[s] = start_server(DEBIAN_REDIS if s == "redis7" else None,
                                      tempfile.mkdtemp(dir=tmp))
        import redis

        for r in range(args.rounds):
            order = trees[r % len(trees):] + trees[:r % len(trees)]
            for s in args.servers:
                for name, path in order:
                    client = redis.Redis.from_url(servers[s][1])
                    client.flushall()
                    client.script_flush()
                    if int(client.info("server")["redis_version"].split(".")[0]) >= 7:
                        client.function_flush()
                    client.close()
                    got = child(path, servers[s][1], args.pages, 5, batch)
                    results[s][name].append(got)
                    print(f"round {r + 1} {s:8s} {name:10s} ({got['mode']}): observe "
                          f"{got['observe_per_s']:,.0f}/s, leases {got['next_requests_per_s']:,.0f}/s,"
                          f" load {got['load_average']:.1f}", flush=True)
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    report = {"pages": args.pages, "rounds": args.rounds, "batch": batch,
              "trees": {name: str(path) for name, path in trees},
              "commits": {name: commit_of(str(path)) for name, path in trees}, "servers": {}}
    ref = trees[-1][0]
    for s, by_tree in results.items():
        report["servers"][s] = {}
        for name, runs in by_tree.items():
            obs = [x["observe_per_s"] for x in runs]
            lea = [x["next_requests_per_s"] for x in runs]
            report["servers"][s][name] = {
                "mode": runs[0]["mode"], "observe_per_s": summary(obs),
                "next_requests_per_s": summary(lea),
                "load_average": summary([x["load_average"] for x in runs]),
                "observe_server_usec_per_page": per_step(runs[-1]["observe_server"],
                                                         runs[-1]["observed"]),
                "lease_server_usec_per_page": per_step(runs[-1]["lease_server"],
                                                       runs[-1]["leased"]),
                "rounds": [{k: x[k] for k in ("observe_per_s", "next_requests_per_s",
                                               "load_average")} for x in runs]}
        for name in by_tree:
            row = report["servers"][s][name]
            row["observe_vs_" + ref] = row["observe_per_s"]["median"] / \
                report["servers"][s][ref]["observe_per_s"]["median"]
            row["leases_vs_" + ref] = row["next_requests_per_s"]["median"] / \
                report["servers"][s][ref]["next_requests_per_s"]["median"]
            print(f"{s:8s} {name:10s} observe x{row['observe_vs_' + ref]:.2f}, leases "
                  f"x{row['leases_vs_' + ref]:.2f} vs {ref}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=1))
    if not args.no_write:
        _report.write_json(args.name, report)
        _report.write_section(args.name, section(report))
        print(f"wrote docs/BENCHMARKS.md and docs/benchmarks/{args.name}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Soak: four Scrapy processes on one frontier crawl the test-bed through the faults of a
real deployment, and a fault-free control run beside them; memory flat, nothing lost?

Two worlds run at once, each its own redis-server (AOF, ``appendfsync everysec``), its
own test-bed (12 hosts on 127.0.x.y, 300 pages changing at seeded times, one simulated
day every 6 real minutes) and four ``example_project`` crawls (``scrapy crawl pages``)
on one namespace. The soak world gets the faults below at fixed fractions of the run;
the control world only the site's own faults (a host down, 503, a bot wall), which no
deployment can avoid. Every few seconds: RSS of every process, Redis memory and keys,
pages and due times, leases and their ages, spool files, request rates. At the end the
checks of ``_soak_checks``; docs/benchmarks/soak.json, docs/img/soak_*.png and a section
of docs/BENCHMARKS.md (unless ``--quick`` or ``--no-write``).

With ``--cluster`` both worlds run on a Redis Cluster of three primaries with a replica
each (``_soak_cluster.ClusterWorld``), the control world too: two clusters are twelve
mostly idle redis-servers (their CPU time is sampled, ``cpu_s``), and a control on one
redis-server would credit the faults with what the cluster itself costs (a script's
round trip through redis-py's ``RedisCluster``, replication). The soak world's faults are
``FULL_CLUSTER``: a primary's failover instead of the emptied Redis; its record is
docs/benchmarks/soak_cluster.json, docs/img/soak_cluster.png and sections of their own.

    python benchmarks/soak.py [--duration 3600] [--out DIR] [--quick] [--no-write] [--cluster]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import IMG, machine, table, write_json, write_section  # noqa: E402
from _soak_capture import read_capture  # noqa: E402
from _soak_checks import (  # noqa: E402
    all_checks,
    capture_politeness_check,
    freshness_series,
    memory_check,
    politeness_check,
)
from _soak_cluster import ClusterWorld, cluster_fault_rows  # noqa: E402
from _soak_world import LEASE_TIMEOUT, Fault, World  # noqa: E402

from frontier_rate.testbed.demo import DemoConfig  # noqa: E402
from frontier_rate.testbed.server import loopback_addresses  # noqa: E402

FULL = [
    Fault(0.08, "kill9", {"crawler": 0, "restart_after": 60}),
    Fault(0.14, "empty"),
    Fault(0.22, "pause", {"seconds": 5}),
    Fault(0.28, "graceful", {"crawler": 1, "restart_after": 30}),
    Fault(0.34, "detection", {"crawler": 2}),
    Fault(0.40, "host", {"host": 3, "mode": "down", "for": 1 / 6}),
    Fault(0.46, "redis_restart"),
    Fault(0.50, "kill9", {"crawler": 3, "restart_after": 60}),
    Fault(0.52, "host", {"host": 5, "mode": "503", "for": 0.12}),
    Fault(0.58, "host", {"host": 7, "mode": "wall", "for": 0.12}),
    Fault(0.80, "pause", {"seconds": 8}),
    Fault(0.90, "redis_restart"),
]
"""The hour's faults (at: fraction of the run). A process restarted by one is judged for memory
after a warm-up of a quarter of the run (``memory_check``), so the second kill -9 (0.50) and
the Redis restarted at 0.46 live long enough to be judged, in the run's last half."""

SHORT = [
    Fault(0.15, "kill9", {"crawler": 0, "restart_after": 10}),
    Fault(0.25, "host", {"host": 3, "mode": "503", "for": 0.2}),
    Fault(0.35, "redis_restart"),
    Fault(0.50, "pause", {"seconds": 3}),
    Fault(0.60, "detection", {"crawler": 2}),
    Fault(0.65, "graceful", {"crawler": 1, "restart_after": 5}),
]
"""The CI form's subset (a 2-minute run)."""

FULL_CLUSTER = [
    Fault(0.08, "kill9", {"crawler": 0, "restart_after": 60}),
    Fault(0.14, "failover", {"group": 1, "restart_after": 60}),
    Fault(0.22, "pause", {"group": 2, "seconds": 5}),
    Fault(0.27, "failover", {"group": 0, "restart_after": 90}),
    Fault(0.28, "graceful", {"crawler": 1, "restart_after": 30}),
    Fault(0.34, "detection", {"crawler": 2}),
    Fault(0.40, "host", {"host": 3, "mode": "down", "for": 1 / 6}),
    Fault(0.46, "redis_restart", {"group": 0}),
    Fault(0.50, "kill9", {"crawler": 3, "restart_after": 60}),
    Fault(0.52, "host", {"host": 5, "mode": "503", "for": 0.12}),
    Fault(0.58, "host", {"host": 7, "mode": "wall", "for": 0.12}),
    Fault(0.64, "failover", {"group": 2, "restart_after": 60}),
    Fault(0.80, "pause", {"group": 1, "seconds": 8}),
    Fault(0.90, "redis_restart", {"group": 2}),
]
"""``FULL`` on a cluster (``_soak_cluster``): three failovers (groups 1 and 2, the old primary
back a minute later; group 0, the URL's first node, down while a crawler restarts) where
``FULL`` empties Redis, pauses and restarts of one primary."""

SHORT_CLUSTER = [
    Fault(0.15, "kill9", {"crawler": 0, "restart_after": 10}),
    Fault(0.25, "failover", {"group": 1, "restart_after": 10}),
    Fault(0.45, "pause", {"group": 2, "seconds": 3}),
    Fault(0.55, "detection", {"crawler": 2}),
    Fault(0.60, "graceful", {"crawler": 1, "restart_after": 5}),
    Fault(0.75, "redis_restart", {"group": 2}),
]
"""``--quick --cluster``: each kind of fault once in 60 s."""

BASES = {"redis": ("127.0.3.2", "127.0.4.2"), "cluster": ("127.0.5.2", "127.0.6.2")}
"""The test-bed's first address of the soak and the control world, per store (the two
soaks may run side by side)."""


def config(duration: float) -> DemoConfig:
    """The crawl: 300 pages on 12 hosts, 1 real s = 240 simulated s (a day in 6 min)."""
    return DemoConfig(duration=duration * 4 + 600, pages=300, hosts=12, budget=6.0,
                      acceleration=240.0, rate_min=0.5, rate_max=20.0, min_host_delay=0.3,
                      crawl_delay=0.5, min_interval=2.0, max_interval=600.0)


def soak(duration: float, out: Path, faults: list[Fault], sample_every: float,
         control: bool = True, cluster: bool = False) -> dict[str, Any]:
    """Run the soak world (and the control world beside it); the record with its checks.
    ``out`` is made absolute: the crawlers run in example_project/ and log there.
    ``cluster``: both worlds on a Redis Cluster with replicas (``ClusterWorld``)."""
    out = out.resolve()
    kind, store = (ClusterWorld, "cluster") if cluster else (World, "redis")
    worlds = {"soak": kind("soak", out / "soak", config(duration), BASES[store][0], faults,
                           duration, sample_every)}
    if control:
        worlds["control"] = kind("control", out / "control", config(duration), BASES[store][1],
                                 [f for f in faults if f.site_only], duration, sample_every)
    runs: dict[str, Any] = {}
    errors: list[BaseException] = []

    def one(name: str) -> None:
        try:
            runs[name] = worlds[name].run()
        except BaseException as exc:  # noqa: BLE001 - reported after both ended
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(name,)) for name in worlds]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    warmup, min_span = 0.25 * duration, min(600.0, 0.25 * duration)
    window = max(10.0, duration / 60)
    record: dict[str, Any] = {"duration": duration, "sample_every": sample_every,
                              "store": store,
                              "lease_timeout": LEASE_TIMEOUT, "window_s": window,
                              "config": {k: v for k, v in config(duration).__dict__.items()
                                         if k != "redis_url"}}
    for name, run in runs.items():
        other = runs.get("control") if name == "soak" else None
        record[name] = {
            "checks": all_checks(run, other, LEASE_TIMEOUT, sample_every, warmup, min_span),
            "events": run["events"], "recovery": run["recovery"], "epoch": run["epoch"],
            "final_exit_codes": run["final_exit_codes"], "cluster": run.get("cluster"),
            "freshness": freshness_series(run, window), "samples": run["samples"],
            "processes": {str(k): v for k, v in run["processes"].items()}}
    (out / "soak.json").write_text(json.dumps(record, indent=1, default=str))
    return record


def logged_run(record: dict[str, Any], out: Path, name: str) -> dict[str, Any] | None:
    """What the politeness checks read of world ``name`` of a finished run, from the site's
    logs left in ``out`` (None when they are not there)."""
    log = out / name / "requests.jsonl"
    if name not in record or not log.exists():
        return None
    cfg = config(record["duration"])
    base = BASES[record.get("store", "redis")][0 if name == "soak" else 1]
    lag = Path(f"{log}.lag")
    truth = json.loads((out / name / "truth.json").read_text())
    return {"requests": [json.loads(line) for line in log.read_text().splitlines() if line],
            "site_lag": [json.loads(line) for line in lag.read_text().splitlines() if line]
            if lag.exists() else [],
            "addresses": loopback_addresses(base, cfg.hosts),
            "port": int(truth["pages"][0]["url"].rsplit(":", 1)[1].split("/")[0]),
            "delays": cfg.host_delays(), "min_host_delay": cfg.min_host_delay}


def add_capture(record: dict[str, Any], out: Path, pcap: Path) -> None:
    """Check a finished run's gaps again by a capture taken beside it (``read_capture``)."""
    capture = read_capture(pcap)
    for name in ("soak", "control"):
        run = logged_run(record, out, name)
        if run is not None:
            record[name]["checks"]["politeness_capture"] = capture_politeness_check(run,
                                                                                    capture)


def verdict(record: dict[str, Any]) -> dict[str, bool | None]:
    return {name: check["ok"] for name, check in record["soak"]["checks"].items()}


def run_end(record: dict[str, Any]) -> float:
    """The run's length (s): its closing stops are no fault."""
    return float(record["duration"])


def record_name(record: dict[str, Any]) -> str:
    """The name of a record's files and sections: ``soak``, or ``soak_cluster``."""
    return "soak_cluster" if record.get("store") == "cluster" else "soak"


def plot(record: dict[str, Any], folder: Path) -> list[str]:
    """Memory and freshness over time, faults marked; [] without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    run = record["soak"]
    marks = [e for e in run["events"] if e["kind"] in (
        "kill -9", "redis emptied", "client pause", "graceful stop", "detection child killed",
        "redis restart", "host down", "host 503", "host wall", "failover", "primary rejoined")
        and e["t"] < run_end(record)]
    figure, axes = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    series: dict[str, list[tuple[float, float]]] = {}
    for sample in run["samples"]:
        for label, rss in sample.get("rss", {}).items():
            if rss:
                series.setdefault(label if "redis" not in label else "redis", []).append(
                    (sample["t"] / 60, rss / 2**20))
    for label, points in sorted(series.items()):
        xs, ys = zip(*points, strict=True)
        axes[0].plot(xs, ys, lw=0.8, label=label.replace("soak-soak-", ""))
    axes[0].set_ylabel("RSS (MiB)")
    axes[0].legend(fontsize=6, ncol=4)
    for name, style in (("soak", "-"), ("control", "--")):
        if name in record:
            xs, ys = zip(*record[name]["freshness"], strict=True)
            axes[1].plot([x / 60 for x in xs], ys, style, label=name)
    axes[1].set_ylabel("weighted freshness")
    axes[1].set_xlabel("minutes")
    axes[1].legend()
    for axis in axes:
        for mark in marks:
            axis.axvline(mark["t"] / 60, color="grey", lw=0.6, ls=":")
    for mark in marks:
        axes[0].annotate(mark["kind"], (mark["t"] / 60, axes[0].get_ylim()[1]), fontsize=6,
                         rotation=90, va="top")
    figure.tight_layout()
    path = folder / f"{record_name(record)}.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return [str(path)]


def summary(record: dict[str, Any]) -> str:
    """The checks in lines a person reads."""
    checks = record["soak"]["checks"]
    lines = [f"soak of {record['duration']:.0f} s:"]
    for name, check in checks.items():
        shown = {k: v for k, v in check.items()
                 if k not in ("details", "freeze_details", "hosts", "processes")}
        lines.append(f"  {name}: {'PASS' if check['ok'] else 'not judged' if check['ok'] is None else 'FAIL'} "
                     f"{json.dumps(shown, default=str)[:600]}")
    memory = checks["memory"]["processes"]
    for label, numbers in memory.items():
        lines.append(f"    memory {label}: {numbers}")
    if checks["politeness"]["details"]:
        lines.append(f"    violations: {checks['politeness']['details'][:10]}")
    if checks["politeness"].get("freeze_details"):
        lines.append(f"    gaps across a freeze: {checks['politeness']['freeze_details'][:10]}")
    for fault in (record["soak"].get("cluster") or {}).get("faults", []):
        lines.append(f"    cluster fault: {json.dumps(fault, default=str)}")
    return "\n".join(lines)


CENSUSES = ("redis_key_bytes", "node_key_bytes")
"""A sample's key censuses (``_soak_world.key_census``): kept sparsely in the written record."""


def write_docs(record: dict[str, Any], images: list[str]) -> None:
    """docs/benchmarks/<name>.json and the sections of BENCHMARKS.md and RELIABILITY.md
    (``record_name``: the single-Redis soak's or the cluster's, side by side)."""
    name = record_name(record)
    light = {key: ({k: v for k, v in part.items() if k != "samples"}
                   if isinstance(part, dict) and "samples" in part else part)
             for key, part in record.items()}
    kept = record["soak"]["samples"][::3]
    light["soak_samples_every_3rd"] = [  # the key censuses (per node on a cluster: 60% of
        # the record) in every 10th of them and the last only
        sample if i % 10 == 0 or i == len(kept) - 1 else
        {k: v for k, v in sample.items() if k not in CENSUSES} for i, sample in enumerate(kept)]
    write_json(name, light)
    checks = record["soak"]["checks"]
    rows = [[check, {True: "pass", False: "**fail**", None: "not judged"}[c["ok"]],
             json.dumps({k: v for k, v in c.items()
                         if k not in ("ok", "details", "freeze_details", "hosts", "processes",
                                      "unobserved_pages", "missing", "without_due")}, default=str)[:300]]
            for check, c in checks.items()]
    events = [[f"{e['t'] / 60:.1f}", e["kind"], e["detail"][:120].replace("\n", " ")]
              for e in record["soak"]["events"]]
    minutes = f"{record['duration'] / 60:.0f} minutes"
    if name == "soak":
        title = f"Soak: {minutes} under the faults of a deployment"
        store = "one frontier (redis-server, AOF `appendfsync everysec`)"
        redis_faults = ("Redis restarted (SHUTDOWN, AOF), Redis emptied (kill -9, files deleted, "
                        "restarted empty: noticed, refused, then recovered by stopping the "
                        "crawlers, `frontier-rate drop` and starting them again), `CLIENT PAUSE` "
                        "of 5 s and 8 s")
        extra = ""
    else:
        cluster = record["soak"]["cluster"]
        title = f"Soak on a Redis Cluster: {minutes} under the faults of a deployment"
        store = ("one frontier on a Redis Cluster (three primaries, each with a replica, all "
                 f"on 127.0.0.1, {cluster['binary']}, AOF `appendfsync everysec`, "
                 f"`cluster-node-timeout` {cluster['node_timeout_ms']} ms; "
                 "`redis+cluster://` URL naming every node)")
        redis_faults = ("three failovers (kill -9 of a primary, its replica promoted, the old "
                        "primary started again 60-90 s later; one of them the URL's first "
                        "node while a crawler restarted), a primary restarted twice "
                        "(SHUTDOWN, AOF, down 3 s), `CLIENT PAUSE` of 5 s and 8 s on a "
                        "primary; no emptied Redis (benchmarks/_soak_cluster.py says why)")
        extra = ("\nThe cluster's faults (seconds after the fault: `state_fail` until a node said "
                 "cluster_state fail, `promoted` until the replica was primary, `state_ok` until "
                 "every node said ok again, `rejoined` from the old primary's restart until it "
                 "was a replica with its link up):\n\n"
                 + table(["min", "fault", "node", "what happened", "seconds"],
                         cluster_fault_rows(cluster["faults"])) + "\n")
    scope = (f"Four `example_project` crawls on {store} for {record['duration'] / 60:.0f} "
             f"minutes, 300 test-bed pages on 12 hosts, with {len(record['soak']['events'])} "
             "events: kill -9 of a crawler restarted a minute later, a graceful stop and "
             f"restart, the detection child killed, {redis_faults}, a host down for a sixth of "
             "the run, one answering 503 with `Retry-After`, one a bot wall. Beside it, at the "
             "same time, a control run with the site's faults only"
             + (" (on a cluster too)." if name != "soak" else "."))
    command = "benchmarks/soak.py" + (" --cluster" if name != "soak" else "")
    write_reliability(name, f"""## {title}

`python {command}` (numbers and plot:
[BENCHMARKS.md](BENCHMARKS.md), section "{title.split(':')[0]}", docs/img/{name}.png{
"; a 2-minute form with a subset of the faults is "
"`tests/test_soak.py::test_a_short_soak_through_faults_loses_nothing`" if name == "soak" else
"; a 2-minute form without the control run (six redis-servers, four crawlers) is "
"`tests/test_soak.py::test_a_short_cluster_soak_through_a_failover_loses_nothing`"}). {scope}

{table(["check", "result", "numbers"], rows)}
{extra}""")
    write_section(name, f"""## {title.split(':')[0]}: {minutes} of faults under four crawlers (`{command}`)

{scope} Test-bed: one simulated day every 6 minutes, host delay 0.3 s, Crawl-delay 0.5 s
on odd hosts. {machine()} (the machine was shared with other work).
Plot: docs/img/{name}.png. Whole record: docs/benchmarks/{name}.json.

{table(["check", "result", "numbers"], rows)}
{extra}
Faults and events (minutes into the run):

{table(["min", "event", "detail"], events)}
""")


RELIABILITY_MD = IMG.parent / "RELIABILITY.md"


def write_reliability(name: str, text: str) -> None:
    """Replace (or add before "## Known limits") the section ``name`` of RELIABILITY.md."""
    begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    doc = RELIABILITY_MD.read_text()
    block = f"{begin}\n{text.strip()}\n{end}\n"
    if begin in doc:
        doc = doc[:doc.index(begin)] + block + doc[doc.index(end) + len(end) + 1:]
    else:
        at = doc.index("## Known limits")
        doc = doc[:at] + block + "\n" + doc[at:]
    RELIABILITY_MD.write_text(doc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=3600.0)
    parser.add_argument("--out", default="soak-out")
    parser.add_argument("--sample-every", type=float, default=5.0)
    parser.add_argument("--quick", action="store_true",
                        help="60 s, the short faults, no control run, nothing written "
                             "(tests/test_soak.py runs the 2-minute form with its control)")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--cluster", action="store_true",
                        help="both worlds on a Redis Cluster of three primaries with replicas "
                             "(FULL_CLUSTER's faults; --quick: SHORT_CLUSTER)")
    parser.add_argument("--from-json", help="write the docs from a run's soak.json")
    parser.add_argument("--capture", help="with --from-json: a tcpdump capture of the run "
                        "(one for both worlds) to check the gaps by")
    options = parser.parse_args(argv)
    if options.from_json:
        record = json.loads(Path(options.from_json).read_text())
        if options.capture:
            add_capture(record, Path(options.from_json).parent, Path(options.capture))
        duration = record["duration"]
        for name in ("soak", "control"):  # again, by this version's rules
            if name in record:
                record[name]["checks"]["memory"] = memory_check(
                    record[name], 0.25 * duration, min(600.0, 0.25 * duration))
            logged = logged_run(record, Path(options.from_json).parent, name)
            if logged is not None:  # the site's logs are still beside the record
                record[name]["checks"]["politeness"] = politeness_check(logged)
        print(summary(record))
        if not options.no_write:
            write_docs(record, plot(record, IMG))
        return 0
    duration, faults = options.duration, FULL_CLUSTER if options.cluster else FULL
    if options.quick:
        duration, faults = 60.0, SHORT_CLUSTER if options.cluster else SHORT
    started = time.monotonic()
    out = Path(options.out if options.out != "soak-out" or not options.cluster
               else "soak-cluster-out")
    record = soak(duration, out, faults, 2.0 if options.quick else options.sample_every,
                  control=not options.quick, cluster=options.cluster)
    print(summary(record))
    print(f"wall time {time.monotonic() - started:.0f} s")
    if not (options.quick or options.no_write):
        write_docs(record, plot(record, IMG))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

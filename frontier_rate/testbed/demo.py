"""``frontier-rate demo``: crawl the living-web test-bed and score the result.

Starts the test-bed (pages that change at known times on loopback hosts),
runs the example Scrapy project with the frontier-rate scheduler for a set
time, then scores what it achieved against the ground truth:

- weighted freshness of our crawl, next to uniform revisiting and the oracle
  (true rates, exact solver, host caps), both replayed from the same ground
  truth over the same window at the configured budget capped by what the
  hosts' delays allow (not at the rate our crawl realised);
- budget spent: our fetches per second against that allowed rate;
- estimate accuracy: |λ̂/λ − 1| over pages fetched at least 10 times;
- politeness: per host, the smallest gap between two requests against the
  host's delay (robots.txt Crawl-delay or the minimum host delay).

Time: one real second is ``acceleration`` simulated seconds (default one
simulated day), so a three-minute demo covers half a simulated year. The
engine runs on real seconds; rates are converted with the acceleration.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from frontier_rate.engine.frontier import Frontier
from frontier_rate.math.budget import solve_with_host_caps
from frontier_rate.store.connection import redact_url
from frontier_rate.testbed import (
    DAY,
    Testbed,
    demo_signals,
    periodic_schedule,
    replay_policy,
    uniform_schedule,
    weighted_freshness,
)
from frontier_rate.testbed.freshness import FETCH_STATUSES
from frontier_rate.testbed.server import DATE_LIES

logger = logging.getLogger(__name__)

MIN_FETCHES_FOR_ACCURACY = 10
GAP_TOLERANCE = 0.005
"""Seconds: request arrival times at the server jitter by about a millisecond; a gap
shorter than the host delay by more than this is a violation."""

SIGNALS_MIN_INTERVAL = 1.0
"""Shortest planned revisit interval (real s) of both ``--signals`` crawls: one simulated day.
A sitemap or feed changes with every change of the pages it lists and is planned as a page of
weight FRONTIER_RATE_SITEMAP_WEIGHT (0.3; the test-bed's pages weigh 0.037 on average), so
at the plain demo's 0.1 s the documents took 15 of the 40 fetches/s (4.6 at 1 s) and reading
them no longer paid (+0.001 freshness, +0.050 at 1 s; 60 s crawls)."""


@dataclass
class DemoConfig:
    """What the demo runs; every field is a command-line option."""

    duration: float = 150.0
    pages: int = 150
    hosts: int = 8
    budget: float = 40.0
    acceleration: float = DAY
    rate_min: float = 0.05
    rate_max: float = 1.0
    change_model: str = "poisson"
    estimator: str = "interval"
    policy: str = "whittle"
    min_host_delay: float = 0.1
    crawl_delay: float = 0.2
    min_interval: float = 0.1
    """Shortest planned revisit interval (real s): the smallest host delay, 2.4 simulated hours.
    The oracle has no such bound and fetches the heaviest, fastest pages several times a
    simulated day; at 1 s (one simulated day) the crawl could reach about 0.95 of it at best."""
    max_interval: float = 30.0
    warmup: float = 0.3
    seed: int = 0
    out: str = "demo-report"
    redis_url: str | None = None
    plots: bool = True
    change_dates: bool = True
    lying_hosts: float = 0.0
    lie: str = "now"
    signals: bool = False
    sitemap_true: float = 0.5
    sitemap_lying: float = 0.125
    extra_settings: list[str] = field(default_factory=list)

    def host_delays(self) -> list[float]:
        """Real seconds between two requests to each host: robots Crawl-delay on odd hosts."""
        return [max(self.min_host_delay, self.crawl_delay if h % 2 else 0.0) for h in range(self.hosts)]


def example_project_dir() -> Path:
    """The example Scrapy project of this source checkout."""
    path = Path(__file__).resolve().parents[2] / "example_project"
    if not (path / "scrapy.cfg").exists():
        raise SystemExit("frontier-rate demo: needs example_project/ from a source checkout "
                         f"(looked in {path})")
    return path


def crawl_command(cfg: DemoConfig, seeds: list[str], namespace: str, log_file: Path,
                  extra: dict[str, Any] | None = None) -> list[str]:
    settings: dict[str, Any] = {
        "FRONTIER_RATE_NAMESPACE": namespace,
        "FRONTIER_RATE_BUDGET": cfg.budget,
        "FRONTIER_RATE_ESTIMATOR": cfg.estimator,
        "FRONTIER_RATE_POLICY": cfg.policy,
        "FRONTIER_RATE_MIN_HOST_DELAY": cfg.min_host_delay,
        "FRONTIER_RATE_MIN_INTERVAL": cfg.min_interval,
        "FRONTIER_RATE_MAX_INTERVAL": cfg.max_interval,
        "FRONTIER_RATE_CLOSE_AFTER": cfg.duration,
        # Every fetch counts against the budget, first ones too: the demo compares the crawl
        # with uniform revisiting and the oracle at equal budget.
        "FRONTIER_RATE_BUDGET_FIRST_FETCHES": True,
        # The engine's default prior, "changes once a day", in the demo's accelerated time.
        "FRONTIER_RATE_PRIOR_RATE": cfg.acceleration / DAY,
        # Last-Modified dates are on the test-bed's simulated clock.
        "FRONTIER_RATE_CHANGE_DATES": cfg.change_dates,
        "FRONTIER_RATE_SERVER_CLOCK_RATE": cfg.acceleration,
        "FRONTIER_RATE_LOG_INTERVAL": 10,
        "CONCURRENT_REQUESTS": 32,
        "LOG_FILE": str(log_file),
        "LOG_LEVEL": "INFO",
    }
    if cfg.redis_url:
        settings["FRONTIER_RATE_REDIS_URL"] = cfg.redis_url
    settings.update(extra or {})
    command = [sys.executable, "-m", "scrapy", "crawl", "pages", "-a", "start_urls=" + ",".join(seeds)]
    for name, value in settings.items():
        command += ["-s", f"{name}={value}"]
    for item in cfg.extra_settings:
        command += ["-s", item]
    return command


def run_crawl(cfg: DemoConfig, bed: Testbed, namespace: str, out: Path, progress: bool,
              extra: dict[str, Any] | None = None) -> float:
    """Run the example spider until FRONTIER_RATE_CLOSE_AFTER; returns the real seconds it ran."""
    frontier = Frontier(cfg.redis_url, namespace=namespace, estimator=cfg.estimator, budget=cfg.budget,
                        min_host_delay=cfg.min_host_delay, min_interval=cfg.min_interval,
                        max_interval=cfg.max_interval, prior_rate=cfg.acceleration / DAY)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(example_project_dir()), os.environ.get("PYTHONPATH", "")]))
    command = crawl_command(cfg, bed.seed_urls(), namespace, out / "crawl.log", extra)
    started = time.monotonic()
    proc = subprocess.Popen(command, cwd=example_project_dir(), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        last_line = 0.0
        while proc.poll() is None:
            time.sleep(0.5)
            elapsed = time.monotonic() - started
            if progress and (sys.stderr.isatty() or elapsed - last_line >= 10):
                last_line = elapsed
                s = frontier.stats()
                line = (f"[{elapsed:5.0f}s/{cfg.duration:.0f}s] pages {s['pages']:5d}  fetches {s['fetches']:6d}  "
                        f"changes seen {s['changes']:5d}  threshold {s['nu']:.3g}")
                end = "\r" if sys.stderr.isatty() else "\n"
                print(line, end=end, file=sys.stderr, flush=True)
            if elapsed > cfg.duration + 60:
                proc.terminate()
    finally:
        if proc.poll() is None:
            proc.kill()
        frontier.close()
    if progress:
        print(file=sys.stderr)
    stderr = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 0:
        tail = "\n".join(stderr.strip().splitlines()[-15:])
        raise SystemExit(f"frontier-rate demo: the crawl failed (exit {proc.returncode}); "
                         f"see {out / 'crawl.log'}\n{tail}")
    return time.monotonic() - started


# ----------------------------------------------------------------------------
# Scoring.
# ----------------------------------------------------------------------------

def page_fetches(log: list[dict], truth: dict) -> list[dict]:
    urls = {p["url"] for p in truth["pages"]}
    return [r for r in log if r["url"] in urls and r["status"] in FETCH_STATUSES and r["method"] == "GET"]


def oracle_intervals(truth: dict, budget_sim: float, caps_sim: dict[str, float]) -> dict[str, float | None]:
    """Periodic intervals of the oracle: true rates, exact solver, same budget and host caps."""
    pages = truth["pages"]
    weights = np.array([p["weight"] for p in pages])
    rates = np.array([p["rate"] for p in pages])
    hosts = [p["host"] for p in pages]
    solution = solve_with_host_caps(weights, rates, hosts, caps_sim, budget_sim, objective="freshness")
    return {p["url"]: (1.0 / f if f > 0 else None) for p, f in zip(pages, solution.frequencies, strict=True)}


def politeness(log: list[dict], bed: Testbed, delays: list[float], min_host_delay: float = 0.0) -> dict[str, Any]:
    """Per host: requests, smallest gap, most requests in any one-second window, violations.

    ``delays[h]`` is host h's delay once its robots.txt has been read; before
    that (a crawler cannot honour a Crawl-delay it has not seen) the delay in
    force is ``min_host_delay``.
    """
    hosts = {}
    violations = 0
    worst: list[dict[str, Any]] = []
    for h, address in enumerate(bed.addresses):
        entries = sorted((r for r in log if r["host"] == address), key=lambda r: r["real_time"])
        times = [r["real_time"] for r in entries]
        robots_read = next((r["real_time"] for r in entries if r.get("path") == "/robots.txt"), -math.inf)
        in_force = np.array([delays[h] if t > robots_read else min(delays[h], min_host_delay) for t in times[1:]])
        gaps = np.diff(times) if len(times) > 1 else np.array([])
        short = np.flatnonzero(gaps < in_force - GAP_TOLERANCE)
        bad = int(short.size)
        violations += bad
        worst.extend({"host": address, "t": round(times[i + 1], 4), "gap_s": round(float(gaps[i]), 4),
                      "delay_s": float(in_force[i]),
                      "paths": [entries[i].get("path"), entries[i + 1].get("path")]} for i in short)
        per_second = 0
        if times:
            arr = np.array(times)
            per_second = int((np.searchsorted(arr, arr + 1.0, side="left") - np.arange(arr.size)).max())
        hosts[address] = {"requests": len(times), "delay_s": delays[h],
                          "min_gap_s": float(gaps.min()) if gaps.size else None,
                          "max_rps": per_second, "violations": bad}
    return {"violations": violations, "max_host_rps": max(h["max_rps"] for h in hosts.values()),
            "short_gaps": sorted(worst, key=lambda v: v["gap_s"] - v["delay_s"])[:10], "hosts": hosts}


def estimate_accuracy(pages: list[dict], truth: dict, acceleration: float) -> dict[str, Any]:
    true_rate = {p["url"]: p["rate"] * acceleration for p in truth["pages"]}
    pairs = [(p["estimate"], true_rate[p["url"]]) for p in pages
             if p["url"] in true_rate and p["fetches"] >= MIN_FETCHES_FOR_ACCURACY]
    if not pairs:
        return {"median_abs_rel_error": None, "p90_abs_rel_error": None, "pages": 0, "pairs": []}
    errors = np.array([abs(est / truth_rate - 1.0) for est, truth_rate in pairs])
    return {"median_abs_rel_error": float(np.median(errors)),
            "p90_abs_rel_error": float(np.percentile(errors, 90)), "pages": len(pairs), "pairs": pairs}


def freshness_over_time(truth: dict, logs: dict[str, list], t_start: float, t_end: float,
                        windows: int = 30) -> dict[str, list[float]]:
    edges = np.linspace(0.0, t_end, windows + 1)
    series = {"t": [float(e) for e in edges[1:]]}
    for name, log in logs.items():
        series[name] = [weighted_freshness(truth, log, a, b) for a, b in zip(edges[:-1], edges[1:], strict=True)]
    return series


def score(cfg: DemoConfig, bed: Testbed, pages: list[dict], duration: float) -> dict[str, Any]:
    truth = bed.truth()
    log = bed.requests()
    t_end = truth["now"]
    t_start = cfg.warmup * t_end
    fetches = page_fetches(log, truth)
    ours_log = [(r["url"], r["sim_time"]) for r in fetches]
    in_window = sum(1 for _, t in ours_log if t_start <= t <= t_end)
    others = sum(1 for r in log if t_start <= r["sim_time"] <= t_end) - in_window
    spent_sim = in_window / (t_end - t_start)
    delays = cfg.host_delays()
    caps_sim = {address: 1.0 / (delays[h] * cfg.acceleration) for h, address in enumerate(bed.addresses)}
    # uniform and the oracle get the configured budget, capped by what the hosts' delays allow,
    # not the rate we realised: an under-spending crawl is compared with ones that spend it all
    allowed_sim = min(cfg.budget / cfg.acceleration, sum(caps_sim.values()))
    uniform = uniform_schedule(truth, allowed_sim, t_start, t_end, seed=cfg.seed)
    oracle = periodic_schedule(oracle_intervals(truth, allowed_sim, caps_sim), t_start, t_end, seed=cfg.seed)
    result = {
        "freshness": {
            "ours": weighted_freshness(truth, ours_log, t_start, t_end),
            "uniform": replay_policy(truth, uniform, t_start, t_end),
            "oracle": replay_policy(truth, oracle, t_start, t_end),
        },
        "estimates": estimate_accuracy(pages, truth, cfg.acceleration),
        "politeness": politeness(log, bed, delays, cfg.min_host_delay),
        "fetches": len(fetches),
        "requests": len(log),
        "duration_s": duration,
        "window_sim_s": [t_start, t_end],
        "budget_fetches_per_s": in_window / ((t_end - t_start) / cfg.acceleration),
        "spend": {"fetches_per_s": spent_sim * cfg.acceleration, "budget_per_s": cfg.budget,
                  "other_per_s": others / ((t_end - t_start) / cfg.acceleration),
                  "allowed_per_s": allowed_sim * cfg.acceleration,
                  "spent_of_allowed": spent_sim / allowed_sim},
        "config": {k: v for k, v in asdict(cfg).items() if k != "redis_url"},
    }
    result["freshness"]["ratio_to_oracle"] = result["freshness"]["ours"] / result["freshness"]["oracle"]
    uniform_log = [(u, t) for u, ts in uniform.items() for t in ts]
    oracle_log = [(u, t) for u, ts in oracle.items() for t in ts]
    result["_series"] = freshness_over_time(truth, {"ours": ours_log, "uniform": uniform_log,
                                                    "oracle": oracle_log}, t_start, t_end)
    return result


# ----------------------------------------------------------------------------
# Output.
# ----------------------------------------------------------------------------

def plot(result: dict, log: list[dict], bed: Testbed, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    pairs = result["estimates"]["pairs"]
    if pairs:
        est, true = np.array(pairs).T
        fig, ax = plt.subplots(figsize=(5, 5))
        ax.loglog(true, est, "o", ms=3, alpha=0.7)
        lo, hi = min(true.min(), est.min()), max(true.max(), est.max())
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.set(xlabel="true change rate (1/s)", ylabel="estimate (1/s)",
               title=f"Estimates, pages with ≥{MIN_FETCHES_FOR_ACCURACY} fetches")
        fig.tight_layout()
        fig.savefig(out / "estimates.png", dpi=90)
        plt.close(fig)
        written.append("estimates.png")

    series = result["_series"]
    fig, ax = plt.subplots(figsize=(7, 4))
    days = np.array(series["t"]) / DAY
    for name in ("ours", "oracle", "uniform"):
        ax.plot(days, series[name], label=name)
    ax.axvline(result["window_sim_s"][0] / DAY, color="grey", ls=":", label="scoring starts")
    ax.set(xlabel="simulated days", ylabel="weighted freshness", ylim=(0, 1), title="Freshness over time")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "freshness.png", dpi=90)
    plt.close(fig)
    written.append("freshness.png")

    fig, ax = plt.subplots(figsize=(8, 4))
    for h, address in enumerate(bed.addresses):
        times = [r["real_time"] for r in log if r["host"] == address]
        ax.plot(times, [h] * len(times), "|", ms=8)
    ax.set(xlabel="real seconds", ylabel="host", yticks=range(len(bed.addresses)),
           yticklabels=bed.addresses, title="Requests per host")
    fig.tight_layout()
    fig.savefig(out / "hosts.png", dpi=90)
    plt.close(fig)
    written.append("hosts.png")
    return written


def public(result: dict) -> dict:
    """The report without the bulky series and pairs."""
    out = {k: v for k, v in result.items() if not k.startswith("_")}
    out["estimates"] = {k: v for k, v in result["estimates"].items() if k != "pairs"}
    return out


def summary(result: dict, out: Path) -> str:
    f, e, p = result["freshness"], result["estimates"], result["politeness"]
    sp = result["spend"]
    days = (result["window_sim_s"][1] - result["window_sim_s"][0]) / DAY
    lines = [
        f"frontier-rate demo: {result['fetches']} page fetches in {result['duration_s']:.0f} s "
        f"({result['budget_fetches_per_s']:.1f} fetches/s); scored over the last {days:.0f} simulated days",
        "",
        f"  weighted freshness   ours {f['ours']:.3f}   oracle {f['oracle']:.3f}   uniform {f['uniform']:.3f}"
        f"   (ours / oracle = {f['ratio_to_oracle']:.3f})",
        f"  budget spent         {sp['fetches_per_s']:.1f} of {sp['allowed_per_s']:.1f} fetches/s allowed "
        f"({sp['spent_of_allowed']:.2f}; budget {sp['budget_per_s']:g}/s, capped by the hosts' delays); "
        "uniform and oracle spend all of it",
        f"  other requests       {sp['other_per_s']:.1f}/s (home pages, robots.txt, manifests: not scored)",
    ]
    if e["pages"]:
        lines.append(f"  estimate error       median {e['median_abs_rel_error']:.3f}   p90 {e['p90_abs_rel_error']:.3f}"
                     f"   over {e['pages']} pages with >= {MIN_FETCHES_FOR_ACCURACY} fetches")
    else:
        lines.append("  estimate error       no page was fetched 10 times")
    lines.append(f"  politeness           {p['violations']} violations; at most {p['max_host_rps']} requests "
                 "in one second to one host")
    d = result.get("dates")
    if d:
        lines.append(f"  change dates         {d['dated_changes']} of {d['changes']} changes dated by "
                     f"Last-Modified; dates ignored on {d['date_hosts_ignored']} host(s) "
                     f"({d['lying_hosts']} lying)")
    lines += ["", f"  report: {out}/report.json, plots: {out}/*.png"]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> tuple[DemoConfig, bool]:
    d = DemoConfig()
    ap = argparse.ArgumentParser(prog="frontier-rate demo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=d.duration, help="real seconds of crawling (default %(default)s)")
    ap.add_argument("--pages", type=int, default=d.pages)
    ap.add_argument("--hosts", type=int, default=d.hosts)
    ap.add_argument("--budget", type=float, default=d.budget, help="fetches per real second (default %(default)s)")
    ap.add_argument("--acceleration", type=float, default=d.acceleration,
                    help="simulated seconds per real second (default: one day)")
    ap.add_argument("--rate-min", type=float, default=d.rate_min, help="changes per simulated day")
    ap.add_argument("--rate-max", type=float, default=d.rate_max, help="changes per simulated day")
    ap.add_argument("--change-model", default=d.change_model, choices=["poisson", "bursty", "periodic",
                                                                       "drifting", "mixed"])
    ap.add_argument("--estimator", default=d.estimator, choices=["interval", "sam", "sa", "lln"])
    ap.add_argument("--policy", default=d.policy, choices=["whittle", "lagrangian"])
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--out", default=d.out, help="report folder (default %(default)s)")
    ap.add_argument("--redis", dest="redis_url", default=os.environ.get("FRONTIER_RATE_REDIS_URL"),
                    help="Redis URL (default: the embedded Redis)")
    ap.add_argument("--no-plots", dest="plots", action="store_false")
    ap.add_argument("--no-change-dates", dest="change_dates", action="store_false",
                    help="ignore Last-Modified dates (learn from the change bit only)")
    ap.add_argument("--lying-hosts", type=float, default=d.lying_hosts,
                    help="fraction of test-bed hosts whose Last-Modified lies")
    ap.add_argument("--lie", default=d.lie, choices=list(DATE_LIES),
                    help="what a lying host sends as Last-Modified (default %(default)s)")
    ap.add_argument("--signals", action="store_true",
                    help="crawl the same world twice, without and with the sitemaps and feed its hosts "
                         "publish, and compare")
    ap.add_argument("--sitemap-true", type=float, default=d.sitemap_true,
                    help="with --signals: fraction of hosts whose sitemap has true lastmod (default %(default)s)")
    ap.add_argument("--sitemap-lying", type=float, default=d.sitemap_lying,
                    help="with --signals: fraction of hosts whose sitemap dates every page at the fetch "
                         "(default %(default)s)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the summary")
    ap.add_argument("-s", "--set", dest="extra_settings", action="append", default=[], metavar="NAME=VALUE",
                    help="extra Scrapy setting for the crawl")
    args = ap.parse_args(argv)
    as_json = args.__dict__.pop("json")
    cfg = DemoConfig(**vars(args))
    for name in ("duration", "budget", "acceleration", "rate_min", "rate_max"):
        value = getattr(cfg, name)
        if not (math.isfinite(value) and value > 0):
            ap.error(f"--{name.replace('_', '-')} must be a positive number, got {value!r}")
    for name in ("sitemap_true", "sitemap_lying"):
        if not 0.0 <= getattr(cfg, name) <= 1.0:
            ap.error(f"--{name.replace('_', '-')} must be a fraction in [0, 1]")
    if cfg.sitemap_true + cfg.sitemap_lying > 1.0:
        ap.error("--sitemap-true plus --sitemap-lying must be at most 1")
    if cfg.rate_min > cfg.rate_max:
        ap.error(f"--rate-min {cfg.rate_min} is above --rate-max {cfg.rate_max}")
    return cfg, as_json


def make_testbed(cfg: DemoConfig, out: Path) -> Testbed:
    """The demo's world; with ``--signals`` its hosts also publish sitemaps and a feed."""
    published = ({"sitemap_true": cfg.sitemap_true, "sitemap_lying": cfg.sitemap_lying, "feed": True}
                 if cfg.signals else {})
    return Testbed(n_pages=cfg.pages, n_hosts=cfg.hosts, seed=cfg.seed, acceleration=cfg.acceleration,
                   rate_min=cfg.rate_min / DAY, rate_max=cfg.rate_max / DAY, change_model=cfg.change_model,
                   crawl_delays=[cfg.crawl_delay if h % 2 else None for h in range(cfg.hosts)],
                   log_path=out / "requests.jsonl", lying_hosts=cfg.lying_hosts, lie=cfg.lie, **published)


def crawl_and_score(cfg: DemoConfig, out: Path, progress: bool, read_signals: bool = False) -> dict[str, Any]:
    """One crawl of a fresh test-bed (``read_signals``: reading its sitemaps and feed), scored."""
    out.mkdir(parents=True, exist_ok=True)
    namespace = f"demo-{int(time.time())}-{os.getpid()}" + ("-signals" if read_signals else "")
    bed = make_testbed(cfg, out)
    with bed:
        if progress:
            print(f"test-bed: {cfg.pages} pages on {', '.join(bed.hosts)}; Redis: {redact_url(cfg.redis_url)}, "
                  f"namespace {namespace}", file=sys.stderr)
        extra = demo_signals.signal_settings(bed) if read_signals else None
        duration = run_crawl(cfg, bed, namespace, out, progress, extra)
        with Frontier(cfg.redis_url, namespace=namespace, estimator=cfg.estimator, budget=cfg.budget) as frontier:
            pages = list(frontier.iter_pages())
            counters = frontier.stats()
            trust = demo_signals.signal_trust(frontier, bed, pages) if read_signals else None
        result = score(cfg, bed, pages, duration)
        result["dates"] = {"dated_changes": counters["dated_changes"], "changes": counters["changes"],
                           "date_hosts_ignored": counters["date_hosts_ignored"],
                           "lying_hosts": sum(mode != "true" for mode in bed.date_modes)}
        if cfg.signals:
            demo_signals.add_document_spend(result, bed.requests(), cfg.acceleration)
            result["published"] = demo_signals.published(bed)
        if trust is not None:
            result["signals"] = {"claims": counters.get("claims", 0), "trust": trust}
        bed.write_truth(out / "truth.json")
        result["namespace"] = namespace
        if cfg.plots:
            result["plots"] = plot(result, bed.requests(), bed, out)
    return result


def run_signals(cfg: DemoConfig, out: Path, progress: bool) -> dict[str, Any]:
    """Two crawls of the same world, without and with its sitemaps and feed; writes each
    crawl's files in its own folder and the side-by-side report; returns that report."""
    cfg = replace(cfg, min_interval=max(cfg.min_interval, SIGNALS_MIN_INTERVAL))
    results = {}
    for name, read in ((demo_signals.WITHOUT, False), (demo_signals.WITH, True)):
        if progress:
            print(f"crawl {name}", file=sys.stderr)
        result = crawl_and_score(cfg, out / name, progress, read_signals=read)
        (out / name / "report.json").write_text(json.dumps(public(result), indent=2, sort_keys=True) + "\n")
        results[name] = public(result)
    report = {"rows": demo_signals.comparison(results[demo_signals.WITHOUT], results[demo_signals.WITH]),
              "published": results[demo_signals.WITH]["published"], **results,
              "config": {k: v for k, v in asdict(cfg).items() if k != "redis_url"}}
    (out / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    return report


def run(cfg: DemoConfig, *, progress: bool = True) -> dict[str, Any]:
    """Run the demo and write its report folder; returns the full result."""
    out = Path(cfg.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    # The test-bed's hosts are threads of this process; hand the GIL over often so
    # that the arrival times it logs (the politeness measurement) are not delayed.
    sys.setswitchinterval(0.0005)
    if cfg.signals:
        return run_signals(cfg, out, progress)
    result = crawl_and_score(cfg, out, progress)
    (out / "report.json").write_text(json.dumps(public(result), indent=2, sort_keys=True) + "\n")
    return result


def main(argv: list[str] | None = None) -> int:
    cfg, as_json = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    result = run(cfg, progress=not as_json)
    if as_json:
        print(json.dumps(result if cfg.signals else public(result), sort_keys=True))
    elif cfg.signals:
        print(demo_signals.summary(result, Path(cfg.out)))
    else:
        print(summary(result, Path(cfg.out)))
    return 0

"""Revisit policies on real change histories at equal budget and politeness.

    python benchmarks/real_traces.py --jobs 2    # every budget, estimator x policy grid; writes docs/
    python benchmarks/real_traces.py --quick     # 40 pages, one budget, the default engine; prints only

The pages are real: ``benchmarks/data/real_traces.json.gz`` holds change
histories cut from public git repositories (``benchmarks/make_real_traces.py``
regenerates it; a file is a page, the first-parent commit times that touched it
are its changes, a repository is a host). Each repository's busiest
``WINDOW_DAYS`` (the stretch holding most of its changes; all its pages share
it, pages that did not change then count as static) are replayed on one clock;
freshness (weight 1 per page) is scored
exactly over its last ``WINDOW_DAYS - WARMUP_DAYS`` days. The global budget is
B fetches per page per day; every host may take at most 3x its average share
of the budget (one fetch per ``host_delay`` seconds), as in
``benchmarks/policy.py``.

Compared at each budget, all dispatched by the same rules (token bucket of R
fetches/s, one fetch per host per host_delay):

- ``uniform``: every page at the same interval, scaled to the budget with the
  host caps (water-filling);
- ``nutch`` / ``stormcrawler``: their adaptive schedules with shipped defaults
  (``policy.adaptive_next``);
- ``oracle``: the hindsight-Poisson oracle (each page's empirical rate over
  the replayed window, exact solve with host caps, periodic fetching);
- ``clairvoyant``: an upper bound that knows every change: the budget (and
  each host's cap) spent on fetches right after the changes followed by the
  longest fresh stretches, the copy counted fresh at the window's start;
- ``ours:<estimator>+<policy>``: the real ``frontier_rate.Frontier`` in Redis
  on a virtual clock in seconds (no tick: the driver jumps to the next due page
  or the next budget token).

"Spent" is fetches in the scored window over the budget R·T; "allowed" is the
most the budget and the host delays let through, min(R, Σ_h 1/host_delay)·T
(every page here is worth fetching: weight 1 and a positive change rate).

Writes docs/benchmarks/real_traces.json and the real-traces section of
docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _run import embedded_redis, pool_map  # noqa: E402
from policy import (  # noqa: E402
    delete_namespace,
    drive,
    freshness_and_catch,
    run_baseline,
    violations,
)
from traces import Trace, load_traces  # noqa: E402

from frontier_rate import Frontier  # noqa: E402
from frontier_rate.crawl import signal_sources as signals  # noqa: E402

DAY = 86400.0
WINDOW_DAYS = 60.0
WARMUP_DAYS = 20.0
BUDGETS = (0.05, 0.2, 0.5, 2.0)
"""Fetches per page per day."""
HOST_SHARE = 3.0
"""Each host may take this many times its average share of the budget."""
MIN_INTERVAL = 60.0
MAX_INTERVAL = 30 * DAY
BASELINES = ("uniform", "nutch", "stormcrawler", "oracle")
ESTIMATORS = ("interval", "lln", "sa", "sam")
POLICIES = ("whittle", "lagrangian")
QUICK_PAGES = 40
DEFAULT = ("interval", "whittle")
DATED = (*DEFAULT, "dates")
"""The default engine when every answer carries a true Last-Modified."""
AT_HIGH_BUDGET = [("interval", "lagrangian"), ("sam", "whittle")]
"""At B >= 1 a simulation takes ~7 min here, so only these run beside the default (``--all``
runs the whole grid)."""


@dataclass
class World:
    """Real pages replayed on a clock that starts at 0, with a budget and host caps.

    Has the attributes ``benchmarks/policy.py``'s dispatcher and scoring read
    (n, hosts, host, weights, rates, budget, host_delay, t_start, t_end, burst,
    changes, seed).
    """

    traces: list[Trace]
    per_page_day: float
    seed: int = 0
    sitemap_seed: int | None = None
    """Which hosts serve a sitemap (``sitemap_kinds``); None: no host does."""
    names: list[str] = field(init=False)

    def __post_init__(self) -> None:
        span = WINDOW_DAYS * DAY
        host_names = sorted({t.host for t in self.traces})
        ends = {h: densest_window_end([t.changes for t in self.traces if t.host == h], span)
                for h in host_names}
        self.names = [t.page for t in self.traces]
        self.kinds = [t.kind for t in self.traces]
        self.n = len(self.traces)
        self.hosts = len(host_names)
        self.host_names = host_names
        self.host = np.array([host_names.index(t.host) for t in self.traces], dtype=np.int64)
        self.weights = np.ones(self.n)
        # each repository's busiest WINDOW_DAYS, shifted to start at 0 (the window ends one
        # second after the last change in it)
        self.changes = []
        for t in self.traces:
            start = ends[t.host] + 1.0 - span
            c = np.asarray(t.changes, dtype=float) - start
            self.changes.append(np.unique(c[(c >= 0.0) & (c < span)]))
        self.rates = np.array([len(c) / span for c in self.changes])
        self.budget = self.per_page_day * self.n / DAY
        self.host_delay = self.hosts / (HOST_SHARE * self.budget)
        self.t_start, self.t_end = WARMUP_DAYS * DAY, span
        self.burst = self.budget + 1.0  # the engine's bucket: one second of budget + 1
        self.sitemap = sitemap_kinds(self.hosts, self.sitemap_seed,
                                     [int((self.host == h).sum()) for h in range(self.hosts)])

    @property
    def allowed(self) -> float:
        """Fetches the budget and the host delays allow over the scored window."""
        return min(self.budget, self.hosts / self.host_delay) * (self.t_end - self.t_start)


SITEMAP_TRUE, SITEMAP_LYING = 0.4, 0.1
"""Shares of hosts serving a true sitemap (lastmod = the page's latest change) and a lying one
(lastmod = the time of the sitemap fetch); the others serve none (issue 27)."""
SITEMAP_SEEDS = tuple(range(10))
SIGNALS = (*DEFAULT, "sitemaps")
"""The default engine where some hosts serve sitemaps (``sitemap_kinds``)."""
NO_DATE = -DAY
"""A true sitemap's lastmod of a page that did not change since the replay began: some time
before it."""


def sitemap_kinds(hosts: int, seed: int | None, sizes: list[int] | None = None
                  ) -> list[str | None]:
    """Per host: "true", "lying" or None. Hosts ranked by their number of pages take the
    labels of ``SITEMAP_PATTERN`` (4 true, 1 lying, 5 none in every 10 ranks) from offset
    ``seed``: over the 10 seeds 0-9 every host serves a true sitemap in exactly 4 and a lying
    one in exactly 1, so the mean over them is the issue's 40% / 10% for every host, large
    or small (a plain random draw of 40% of these 13 hosts covers from 3% to 70% of the
    pages, depending on whether it draws the one host with half of them)."""
    if seed is None:
        return [None] * hosts
    sizes = sizes or [1] * hosts
    order = sorted(range(hosts), key=lambda h: (-sizes[h], h))
    kinds: list[str | None] = [None] * hosts
    for rank, h in enumerate(order):
        kinds[h] = SITEMAP_PATTERN[(rank + seed) % len(SITEMAP_PATTERN)]
    return kinds


SITEMAP_PATTERN = ("true", None, "true", None, "lying", "true", None, "true", None, None)


def sitemap_weight(pages: int, ignored: bool = False) -> float:
    """Importance given to a sitemap listing ``pages`` pages of weight 1 (docs/SIGNALS.md):
    ``signals.sitemap_weight``."""
    return signals.sitemap_weight(float(pages), ignored, SITEMAP_WEIGHT_PER_PAGE)


SITEMAP_WEIGHT_PER_PAGE = signals.SITEMAP_WEIGHT
"""A sitemap's weight per page it lists: the adapters' default (FRONTIER_RATE_SITEMAP_WEIGHT)."""


ISSUE_FLOOR = {0.5: 1.06, 2.0: 1.02}
"""The dated targets of the change-pattern issue: ratio to the oracle at these budgets."""
EARLIER = {0.05: 1.034, 0.2: 1.039, 0.5: 1.084, 2.0: 1.083}
"""The default's ratios before change dates existed (docs/BENCHMARKS.md of that commit)."""


def densest_window_end(histories: list[np.ndarray], span: float) -> float:
    """End of the ``span`` seconds holding the most changes of a host's pages (one second after
    the last change in it; the latest such stretch on ties)."""
    times = np.sort(np.concatenate([np.asarray(h, dtype=float) for h in histories]))
    if times.size == 0:
        raise ValueError("a host without changes has no window to replay")
    counts = np.searchsorted(times, times + span - 1.0, side="right") - np.arange(times.size)
    best = int(np.flatnonzero(counts == counts.max())[-1])
    return float(times[best + counts[best] - 1]) + 1.0


def every_page_changes(world: World) -> World:
    """The world as ``oracle_all`` sees it: a page with no change in the window counts as
    changing once in it. The plain oracle never fetches such a page (its hindsight rate is
    0), so it never holds a copy and scores it stale throughout, while one fetch would keep
    it fresh: 24 of the 317 pages here, worth about 7% of the oracle's freshness."""
    other = copy.copy(world)
    other.rates = np.maximum(world.rates, 1.0 / (WINDOW_DAYS * DAY))
    return other


def clairvoyant(world: World) -> float:
    """Upper bound on freshness for a crawler that knows every change time.

    The copy is fresh at the window's start; every fetch is placed right after
    a change, and the fetches (at most R·T, and T/host_delay per host) go to the
    changes followed by the longest fresh stretches (greedy is exact for this
    bound: a partition constraint under a total count).
    """
    a, b = world.t_start, world.t_end
    free = 0.0
    gaps, hosts = [], []
    for i, c in enumerate(world.changes):
        inside = c[(c >= a) & (c < b)]
        free += (inside[0] if inside.size else b) - a
        if inside.size:
            g = np.diff(np.append(inside, b))
            gaps.append(g)
            hosts.append(np.full(g.size, world.host[i]))
    if not gaps:
        return 1.0
    g, h = np.concatenate(gaps), np.concatenate(hosts)
    order = np.argsort(-g, kind="stable")
    left = int(world.budget * (b - a))
    host_left = np.full(world.hosts, int((b - a) / world.host_delay))
    gained = 0.0
    for j in order:
        if left <= 0:
            break
        if host_left[h[j]] > 0:
            host_left[h[j]] -= 1
            left -= 1
            gained += g[j]
    return (free + gained) / (world.n * (b - a))


def run_frontier(world: World, url: str | None, estimator: str, pol: str,
                 dates: bool = False, salt: str = "") -> tuple[list[np.ndarray], dict]:
    """Fetch times per page when the real engine decides, on a virtual clock in seconds.

    ``policy.drive``: after a batch the clock moves one second; when nothing was
    leased it jumps to ``Frontier.next_call_time`` (a crawler polls again within 60 s). ``dates``:
    every answer carries a true Last-Modified (the page's last change time). ``salt``: another
    first-fetch order (``policy.drive``).
    """
    namespace = f"traces-{estimator}-{pol}-{world.per_page_day:g}-{os.getpid()}-{time.monotonic_ns() % 10**9}"
    f = Frontier(url, namespace=namespace, estimator=estimator, policy=pol, objective="freshness",
                 budget=world.budget, min_host_delay=world.host_delay, min_interval=MIN_INTERVAL,
                 max_interval=MAX_INTERVAL, lease_timeout=1e12, seed=world.seed,
                 budget_first_fetches=True)  # equal budget: every fetch counts
    return drive(f, world, tick=1.0, max_n=64, retry=60.0, dates=dates, salt=salt)


def run_signals(world: World, url: str | None, estimator: str, pol: str
                ) -> tuple[list[np.ndarray], dict]:
    """``run_frontier`` where the hosts of ``world.sitemap`` serve a sitemap: a page of the
    frontier like the others (one fetch of the budget and of its host's delay), whose content
    changes when any of its pages does (a lying one: at every fetch). Each sitemap fetch hands
    its lastmods to ``Frontier.signal_many`` (source "sitemap"). Returns the fetch times per
    page and run info with the sitemap fetch times per host (``sitemap_fetches``)."""
    namespace = f"signals-{estimator}-{pol}-{world.per_page_day:g}-{os.getpid()}-{time.monotonic_ns() % 10**9}"
    f = Frontier(url, namespace=namespace, estimator=estimator, policy=pol, objective="freshness",
                 budget=world.budget, min_host_delay=world.host_delay, min_interval=MIN_INTERVAL,
                 max_interval=MAX_INTERVAL, lease_timeout=1e12, seed=world.seed,
                 budget_first_fetches=True)
    site = _SitemapWorld(world)
    f.add_many([(u, 1.0, None) for u in site.urls]
               + [(u, sitemap_weight(len(site.members[h])), None, 0, True)
                  for u, h in site.sitemaps.items()], now=0.0)
    t, calls, hints = 0.0, 0, defaultdict(int)
    wall = time.perf_counter()
    while t < world.t_end:
        got = f.next_requests(64, now=t)
        calls += 1
        if not got:
            call_at = f.next_call_time(now=t, retry=60.0)
            t = max(t + 1.0, math.inf if call_at is None else call_at)
            continue
        batch, told = site.answer(got, t)
        f.observe_many(batch)
        if told:
            for k, v in f.signal_many(told, now=t).items():
                hints[k] += v
            site.reweigh(f, got, t)
        t += 1.0
    stats = f.stats(now=t)
    info = {"wall_s": time.perf_counter() - wall, "next_requests_calls": calls, "nu": stats.get("nu"),
            "hints": dict(hints), "signal_sources_ignored": stats["signal_sources_ignored"],
            "sitemap_fetches": {str(h): v for h, v in site.sitemap_out.items()}}
    delete_namespace(f)
    f.close()
    return [np.array(x) for x in site.out], info


class _SitemapWorld:
    """The pages and sitemaps of ``run_signals``: what each fetch finds and what each sitemap
    fetch says, and the fetch times of both."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.urls = [f"https://h{world.host[i]}.example/p/{i}" for i in range(world.n)]
        self.index = {u: i for i, u in enumerate(self.urls)}
        self.members = {h: np.flatnonzero(world.host == h) for h in range(world.hosts)}
        self.sitemaps = {f"https://h{h}.example/sitemap.xml": h
                         for h, kind in enumerate(world.sitemap) if kind}
        self.all_changes = {h: np.sort(np.concatenate([world.changes[i] for i in self.members[h]]))
                            for h in self.sitemaps.values()}
        self.out: list[list[float]] = [[] for _ in range(world.n)]
        self.sitemap_out: dict[int, list[float]] = {h: [] for h in self.sitemaps.values()}

    def answer(self, got: list, t: float) -> tuple[list, list]:
        """The observations of the dispatches ``got`` at ``t`` and the claims of the sitemaps
        among them."""
        world, batch, told = self.world, [], []
        for d in got:
            h = self.sitemaps.get(d.url)
            if h is None:
                i = self.index[d.url]
                self.out[i].append(t)
                version = int(np.searchsorted(world.changes[i], t, side="right"))
                batch.append((d, {"fingerprint": str(version), "fetched_at": t}))
                continue
            self.sitemap_out[h].append(t)
            if world.sitemap[h] == "lying":
                batch.append((d, {"fingerprint": repr(t), "fetched_at": t}))
                told += [(self.urls[i], t, "sitemap") for i in self.members[h]]
            else:
                seen = int(np.searchsorted(self.all_changes[h], t, side="right"))
                batch.append((d, {"fingerprint": str(seen), "fetched_at": t}))
                for i in self.members[h]:
                    k = int(np.searchsorted(world.changes[i], t, side="right"))
                    told.append((self.urls[i], float(world.changes[i][k - 1]) if k else NO_DATE,
                                 "sitemap"))
        return batch, told

    def reweigh(self, f: Frontier, got: list, t: float) -> None:
        """A sitemap whose claims its host's fetches contradicted is worth little: fetched
        rarely, to see whether it becomes right (what the adapters do)."""
        for d in got:
            h = self.sitemaps.get(d.url)
            if h is not None:
                ignored = f.signal_trust(d.host, "sitemap")["ignored"]
                f.add_many([(d.url, sitemap_weight(len(self.members[h]), ignored), None, 0, True)],
                           now=t)


def masked_freshness(world: World, fetches: list[np.ndarray], mask: np.ndarray) -> float | None:
    """Freshness of the pages ``mask`` selects alone (None when it selects none)."""
    if not mask.any():
        return None
    sub = copy.copy(world)
    sub.changes = [c for c, m in zip(world.changes, mask, strict=True) if m]
    sub.weights = world.weights[mask]
    return freshness_and_catch(sub, [x for x, m in zip(fetches, mask, strict=True) if m])[0]


def host_freshness(world: World, fetches: list[np.ndarray], hosts: list[int]) -> float | None:
    """Freshness of the pages of ``hosts`` alone (None without such pages)."""
    return masked_freshness(world, fetches, np.isin(world.host, hosts))


def score(world: World, fetches: list[np.ndarray], extra: dict | None = None) -> dict:
    """Freshness, spend and violations of a run; ``extra``: fetches of sitemaps per host, which
    count in the spend and in the politeness and budget checks, not in freshness."""
    if extra:
        both = copy.copy(world)
        hosts = list(extra)
        both.host = np.concatenate([world.host, np.array([int(h) for h in hosts], dtype=np.int64)])
        all_fetches = [*fetches, *[np.array(extra[h]) for h in hosts]]
        fresh, catch, count = freshness_and_catch(world, fetches)
        inside = sum(int(((np.array(v) >= world.t_start) & (np.array(v) < world.t_end)).sum())
                     for v in extra.values())
        return {"freshness": fresh, "caught_per_fetch": catch,
                "budget_used": (count + inside) / (world.budget * (world.t_end - world.t_start)),
                "spent_of_allowed": (count + inside) / world.allowed, "sitemap_fetches": inside,
                "violations": violations(both, all_fetches, world.burst)}
    return _score(world, fetches)


def _score(world: World, fetches: list[np.ndarray]) -> dict:
    fresh, catch, count = freshness_and_catch(world, fetches)
    return {"freshness": fresh, "caught_per_fetch": catch,
            "budget_used": count / (world.budget * (world.t_end - world.t_start)),
            "spent_of_allowed": count / world.allowed,
            "violations": violations(world, fetches, world.burst)}


def run_task(task: tuple) -> tuple[float, dict, dict]:
    """One budget and what to run there: "baselines" (all of them and the bound) or
    (estimator, policy). With a cache directory a finished task is kept there as JSON."""
    traces, per_page_day, what, url, cache = task
    seed = None
    if what != "baselines" and what[-1].startswith("sitemaps"):
        seed = int(what[-1][len("sitemaps"):] or 0)
    path = None
    if cache is not None:
        label = "baselines" if what == "baselines" else "+".join(what)
        path = Path(cache) / f"{per_page_day:g}-{label}.json"
        if path.exists():
            return per_page_day, *json.loads(path.read_text())
    world = World(traces, per_page_day, sitemap_seed=seed)
    info = {"pages": world.n, "hosts": world.hosts,
            "changes_in_windows": int(sum(len(c) for c in world.changes)),
            "budget_per_s": world.budget, "host_delay_s": world.host_delay}
    results: dict[str, dict] = {}
    if what == "baselines":
        for name in BASELINES:
            results[name] = score(world, run_baseline(world, name))
            print(f"  B={per_page_day:<5g} {name:26} F={results[name]['freshness']:.4f} "
                  f"spent {results[name]['spent_of_allowed']:.3f}", flush=True)
        results["oracle_all"] = score(world, run_baseline(every_page_changes(world), "oracle"))
        results["clairvoyant"] = {"freshness": clairvoyant(world)}
    else:
        est, pol, *dated = what
        name = "ours:" + "+".join(what)
        if seed is not None:
            fetches, run_info = run_signals(world, url, est, pol)
            results[name] = {**score(world, fetches, run_info["sitemap_fetches"]), **run_info,
                             "sitemap": world.sitemap, "by_host": {
                                 str(h): host_freshness(world, fetches, [h]) for h in range(world.hosts)}}
        else:
            fetches, run_info = run_frontier(world, url, est, pol, dates=bool(dated))
            results[name] = {**score(world, fetches), **run_info, "by_host": {
                str(h): host_freshness(world, fetches, [h]) for h in range(world.hosts)}}
        print(f"  B={per_page_day:<5g} {name:26} F={results[name]['freshness']:.4f} "
              f"spent {results[name]['spent_of_allowed']:.3f} ({run_info['wall_s']:.0f} s)",
              flush=True)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps([results, info], default=float))
    return per_page_day, results, info


def run_plan(traces: list[Trace], plan: dict[float, list[tuple[str, str]]], url: str | None,
             jobs: int, cache: str | None) -> list[dict]:
    """Every budget of ``plan`` with its (estimator, policy) pairs; ratios to that budget's oracle."""
    tasks = [(traces, b, "baselines", url, cache) for b in plan]
    tasks += [(traces, b, combo, url, cache) for b, combos in plan.items() for combo in combos]
    tasks.sort(key=lambda t: (t[2] == "baselines", -t[1]))  # the longest first
    merged: dict[float, dict] = {b: {"results": {}} for b in plan}
    done = pool_map(run_task, tasks, jobs)
    for b, results, info in done:
        merged[b].update(info)
        merged[b]["results"].update(results)
    runs = []
    for b, combos in plan.items():
        res = merged[b]["results"]
        order = [*REPORTED, *["ours:" + "+".join(c) for c in combos]]
        res = {k: res[k] for k in order}
        for r in res.values():
            r["ratio_to_oracle"] = r["freshness"] / res["oracle"]["freshness"]
            r["ratio_to_oracle_all"] = r["freshness"] / res["oracle_all"]["freshness"]
        runs.append({"per_page_day": b, **{k: v for k, v in merged[b].items() if k != "results"},
                     "results": res})
    return runs


def _runs_of(runs: list[dict], name: str) -> Iterator[tuple[float, dict, dict]]:
    """(budget, every result there, the result of ``name``) for each run that has ``name``."""
    for run in runs:
        if name in run["results"]:
            yield run["per_page_day"], run["results"], run["results"][name]


REPORTED = (*BASELINES, "oracle_all", "clairvoyant")
"""The baselines' rows of a report: the baselines, the oracle with every page changing, the bound."""


def _combo_order(name: str) -> tuple:
    """Where ``ours:<estimator>+<policy>[+...]`` goes in a report: by estimator, then policy,
    the plain run before its variants (the order a run plans them, kept when re-rendered
    from the JSON, whose keys are sorted)."""
    est, pol, *rest = name.removeprefix("ours:").split("+")
    rank = {e: i for i, e in enumerate(ESTIMATORS)}
    return (bool(rest), rank.get(est, len(rank)), POLICIES.index(pol) if pol in POLICIES else 9, rest)


def markdown(runs: list[dict], summary: dict, written_on: str | None = None) -> str:
    """The docs section; ``written_on`` names the machine of a re-rendered run."""
    from _report import machine

    found = list(runs[0]["results"])
    names = [n for n in REPORTED if n in found] + sorted((n for n in found if n not in REPORTED),
                                                        key=_combo_order)
    head = "| B (fetches/page/day) | " + " | ".join(names) + " |"
    rows = [head, "|" + "---|" * (len(names) + 1)]
    for run in runs:
        cells = []
        for k in names:
            r = run["results"].get(k)
            if r is None:
                cells.append("")
            elif "spent_of_allowed" in r:
                cells.append(f"{r['ratio_to_oracle']:.3f} ({r['spent_of_allowed']:.2f})")
            else:
                cells.append(f"{r['ratio_to_oracle']:.3f}")
        rows.append(f"| {run['per_page_day']:g} | " + " | ".join(cells) + " |")
    viol = {k: sum(run["results"][k].get("violations", 0) for run in runs if k in run["results"])
            for k in names}
    default = "ours:" + "+".join(DEFAULT)
    verdict = ["**Targets** for the default (`" + default[5:] + "`): >= 1.00 x oracle at 0.5 and 2 "
               "fetches/page/day, >= 0.98 x at 0.2, above uniform at 0.05 (and, for us, at every "
               "budget); spend >= 0.98 of allowed; no violations."]
    for b, res, r in _runs_of(runs, default):
        floor = {0.5: 1.0, 2.0: 1.0, 0.2: 0.98}.get(b)
        goals = [r["spent_of_allowed"] >= 0.98, r["violations"] == 0,
                 r["freshness"] > res["uniform"]["freshness"] if b == 0.05 else True]
        if floor is not None:
            goals.append(r["ratio_to_oracle"] >= floor)
        verdict.append(f"- B = {b:g}: **{'met' if all(goals) else 'missed'}** (ratio "
                       f"{r['ratio_to_oracle']:.3f}, uniform {res['uniform']['ratio_to_oracle']:.3f}, "
                       f"spent {r['spent_of_allowed']:.3f} of allowed; "
                       f"{'above' if r['freshness'] > res['uniform']['freshness'] else 'below'} uniform)")
    dated = "ours:" + "+".join(DATED)
    verdict += ["", "**Targets with true Last-Modified dates** (`" + dated[5:] + "`): close at least a "
                "quarter of the gap between the oracle and the clairvoyant bound at 0.5 and 2 "
                "fetches/page/day (the issue's 1.06 and 1.02 came from bounds of 1.24 and 1.09; the "
                "floor here is 1 + (clairvoyant - 1) / 4 from the bound measured on these histories, "
                "and never below the issue's numbers), >= 1.00 x at every budget; without dates, not "
                "below the earlier result (" + ", ".join(f"{v:.3f}" for v in EARLIER.values())
                + " at " + ", ".join(f"{b:g}" for b in EARLIER) + ")."]
    for b, res, r in _runs_of(runs, dated):
        bound = res["clairvoyant"]["ratio_to_oracle"]
        floor = max(1.0, ISSUE_FLOOR.get(b, 1.0), 1.0 + (bound - 1.0) / 4 if b in ISSUE_FLOOR else 1.0)
        plain = res.get(default)
        if plain is None:
            verdict.append(f"- B = {b:g}: with dates {r['ratio_to_oracle']:.3f}")
            continue
        met = r["ratio_to_oracle"] >= floor and plain["ratio_to_oracle"] >= EARLIER.get(b, 0.0) - 5e-4
        verdict.append(f"- B = {b:g}: **{'met' if met else 'missed'}** (floor {floor:.3f}; with dates "
                       f"{r['ratio_to_oracle']:.3f}, without {plain['ratio_to_oracle']:.3f}: dates "
                       f"{'add' if r['freshness'] >= plain['freshness'] else 'cost'} "
                       f"{abs(r['freshness'] / plain['freshness'] - 1) * 100:.1f}%; to `oracle_all` "
                       f"{r['ratio_to_oracle_all']:.3f} and {plain['ratio_to_oracle_all']:.3f}; "
                       f"clairvoyant {bound:.3f})")
    return "\n".join([
        "`python benchmarks/real_traces.py` -- real change histories "
        f"({summary['pages']} pages, {summary['hosts']} repositories as hosts, "
        f"{summary['changes']} change times in the data file; the busiest {WINDOW_DAYS:g} days of "
        f"each repository replayed, {runs[0]['changes_in_windows']} changes in them, freshness scored over the "
        f"last {WINDOW_DAYS - WARMUP_DAYS:g}), "
        f"each host capped at {HOST_SHARE:g}x its average share. Freshness as a ratio to the "
        "hindsight-Poisson oracle, budget spent / allowed in brackets; `clairvoyant` is an "
        "upper bound that knows every change.",
        "",
        *rows,
        "",
        "Politeness and budget violations over all budgets: "
        + ", ".join(f"{k} {v}" for k, v in viol.items() if k != "clairvoyant") + ".",
        "",
        *verdict,
        "",
        "On these histories plain uniform revisiting beats the hindsight-Poisson oracle (7-11%): "
        "the oracle gives no fetch to a page that did not change in the window (24 pages here), "
        "so it never holds a copy of them. `oracle_all` is the same oracle with those pages "
        "counted as changing once in the window; the ratios to it are in "
        "docs/benchmarks/real_traces.json (`ratio_to_oracle_all`) and, for the default with "
        "and without dates, in the targets above. `+dates`: every answer carries a true "
        "Last-Modified (the page's last change), so the estimator learns change times and "
        "the change-pattern model (rhythm, burst follow-ups) has dated changes to learn from. Nutch and "
        "StormCrawler spend far less than the budget at 2 fetches/page/day: their intervals grow "
        "on every unchanged fetch and nothing ties them to a budget. `lln`, `sa` and `sam` do not "
        "fill the budget (`fill_budget` is off for them, their Poisson assumption forbids early "
        "fetches) and spend 0.81-0.90 of it.",
        "",
        "Each figure here is one draw (uniform's phases, our first-fetch order); at 0.05 "
        "fetches/page/day uniform's own freshness moves by ~7% between draws. "
        "`benchmarks/first_fetch_order.py` repeats the default against uniform over draws "
        "(its section below).",
        "",
        f"Machine: {written_on or machine()}.",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_PAGES} pages, budget 0.5, default engine; write nothing")
    parser.add_argument("--write", action="store_true", help="write docs/ even with --quick")
    parser.add_argument("--budgets", type=float, nargs="*", help="fetches per page per day")
    parser.add_argument("--ours", nargs="*",
                        help="estimator+policy pairs, +dates for true Last-Modified (default: all)")
    parser.add_argument("--all", action="store_true",
                        help="every estimator x policy at every budget (default: not at B >= 1)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--cache", help="directory keeping each finished simulation (resume a run)")
    parser.add_argument("--from-json", action="store_true",
                        help="re-write the docs section from docs/benchmarks/real_traces.json, no simulation")
    parser.add_argument("--url", default=os.environ.get("FRONTIER_RATE_REDIS_URL"),
                        help="Redis URL (default: $FRONTIER_RATE_REDIS_URL, else embedded)")
    args = parser.parse_args(argv)
    traces = load_traces()
    if args.from_json:
        from _report import read_json, write_section
        from traces import summary as trace_summary

        saved = read_json("real_traces")
        write_section("real_traces", markdown(saved["runs"], trace_summary(traces),
                                              written_on=saved["machine"] + " (re-rendered from the JSON)"))
        return 0
    if args.quick:  # every k-th page, so that each kind and most hosts stay in
        traces = traces[::max(1, len(traces) // QUICK_PAGES)][:QUICK_PAGES]
    budgets = args.budgets or ((0.5,) if args.quick else BUDGETS)
    if args.ours:
        plan = {b: [tuple(x.split("+")) for x in args.ours] for b in budgets}
    elif args.quick:
        plan = {b: [DEFAULT, DATED] for b in budgets}
    else:
        every = [(e, p) for e in ESTIMATORS for p in POLICIES]
        plan = {b: [*(every if b < 1.0 or args.all else [DEFAULT, *AT_HIGH_BUDGET]), DATED]
                for b in budgets}
    with embedded_redis(args.url, "traces"):
        runs = run_plan(traces, plan, args.url, args.jobs, args.cache)
    for run in runs:
        for k, r in run["results"].items():
            spent = f"  spent/allowed {r['spent_of_allowed']:.3f}" if "spent_of_allowed" in r else ""
            print(f"B={run['per_page_day']:<5g} {k:26} ratio {r['ratio_to_oracle']:.3f}{spent}"
                  f"  violations {r.get('violations', 0)}")
    if args.quick and not args.write:
        return 0
    from _report import write_json, write_section
    from traces import summary as trace_summary

    summary = trace_summary(traces)
    write_json("real_traces", {
        "ratio_to_oracle": {f"{k}@{run['per_page_day']:g}": r["ratio_to_oracle"]
                            for run in runs for k, r in run["results"].items()},
        "ratio_to_oracle_all": {f"{k}@{run['per_page_day']:g}": r["ratio_to_oracle_all"]
                                for run in runs for k, r in run["results"].items()},
        "spent_of_allowed": {f"{k}@{run['per_page_day']:g}": r["spent_of_allowed"]
                             for run in runs for k, r in run["results"].items()
                             if "spent_of_allowed" in r},
        "runs": runs, "data": summary})
    write_section("real_traces", markdown(runs, summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The soak's end checks, on what ``World.run()`` recorded: pages, leases, fetches
observed once, politeness, memory growth, freshness against the control run.

Each check returns a dict with ``ok`` (True, False, or None when the run was too short
to judge it) and the numbers behind it.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np

from frontier_rate.testbed import weighted_freshness
from frontier_rate.testbed.freshness import FETCH_STATUSES

GAP_TOLERANCE = 0.005
"""Seconds of arrival jitter forgiven in a request gap (as the demo's politeness)."""

CLOCK_STEP = 1.0
"""Seconds the wall clock must step ahead of the site's monotonic one between two requests
to count as the machine frozen between them (a VM paused or snapshotted: its monotonic
clock stops, its wall clock is set right when it runs again). Time sync slews by
milliseconds and steps a running clock rarely; a step of a second or more on a running
machine is a freeze (``gap_violations``)."""

IN_FLIGHT_WINDOW = 5.0
"""Answers served to a process in its last seconds before a kill -9 count as in flight."""

MEMORY_LIMIT = 5.0
"""Most memory growth after warm-up, % per hour."""

FRESHNESS_RATIO = 0.95

FRESHNESS_MIN_DURATION = 600.0
"""Shorter runs are mostly warm-up (a crawler starts in 5-40 s on a loaded machine):
their freshness is reported, not judged."""


def pages_check(run: dict[str, Any]) -> dict[str, Any]:
    """Every page of the site (and each home page) is in the frontier with a due time (a
    leased page's is its lease's end: a crawler killed with it leased hands it back then,
    and the leases check holds no lease past its timeout)."""
    missing = [url for url, page in run["pages"].items() if page is None]
    no_due = [url for url, page in run["pages"].items()
              if page is not None and page["next_due"] is None and page["status"] != "gone"
              and not (page["status"] == "leased" and page.get("lease_ends") is not None)]
    return {"ok": not missing and not no_due, "pages": len(run["pages"]),
            "missing": missing[:20], "without_due": no_due[:20],
            "frontier_pages": len(run["frontier_pages"])}


def leases_check(run: dict[str, Any], lease_timeout: float, sample_every: float) -> dict[str, Any]:
    """No lease older than its timeout (give or take one sampling period and 5 s)."""
    ages = [s["lease_max_age"] for s in run["samples"] if "lease_max_age" in s]
    worst = max(ages, default=0.0)
    final = run["samples"][-1]
    return {"ok": worst <= lease_timeout + sample_every + 5.0, "max_age_s": worst,
            "timeout_s": lease_timeout, "max_outstanding": max(
                (s["leases"] for s in run["samples"] if "leases" in s), default=0),
            "outstanding_at_end": final.get("leases"), "spool_files_at_end":
            final.get("spool_files")}


def _answers(run: dict[str, Any], walls: bool = False) -> list[dict[str, Any]]:
    """The site's answers that give a copy of a page (GET, 200 or 304, a page URL); with
    ``walls``, a bot wall's bodies too, marked ``wall``."""
    pages = {p["url"] for p in run["truth"]["pages"]} | {u for u in run["pages"]}
    found = []
    for r in run["requests"]:
        if r["method"] != "GET" or r["status"] not in FETCH_STATUSES:
            continue
        url = r["url"] or f"http://{r['host']}:{run['port']}{r['path']}"  # home page, wall 304
        wall = bool(r.get("fault")) and r["status"] == 200  # its 304s are answers, though
        if url in pages and (walls or not wall):
            found.append({**r, "url": url, "wall": wall})
    return found


def observed_check(run: dict[str, Any]) -> dict[str, Any]:
    """Every answer since the namespace's start is a fetch of the frontier, once; only
    answers a kill -9 had in flight may be missing."""
    every = [r for r in _answers(run, walls=True) if r["real_time"] >= run["epoch"]]
    answers = [r for r in every if not r["wall"]]
    # A bot wall's body is a fetch when detection took it as the page's copy (a wall on a
    # short page, or the fourth wall in a row before 2026-12-04), and a not-content failure
    # otherwise: it may count, it need not.
    served = Counter(r["url"] for r in answers)
    served_or_walls = Counter(r["url"] for r in every)
    fetched = {url: (page or {}).get("fetches") or 0 for url, page in run["pages"].items()}
    unobserved = {u: served[u] - fetched.get(u, 0) for u in served if served[u] > fetched.get(u, 0)}
    twice = {u: fetched[u] - served_or_walls[u] for u in fetched
             if fetched[u] > served_or_walls[u]}
    kills = [(e["detail"], e["t"]) for e in run["events"] if e["kind"] == "kill -9"]
    in_flight = sum(1 for agent, t in kills for r in answers
                    if r.get("agent") == agent and t - IN_FLIGHT_WINDOW <= r["real_time"] <= t)
    lost = sum(unobserved.values())
    return {"ok": not twice and lost <= in_flight, "answers": len(answers),
            "fetches": sum(fetched.values()), "unobserved": lost,
            "in_flight_at_kills": in_flight, "counted_more_than_served": twice,
            "unobserved_pages": dict(list(unobserved.items())[:20])}


def robots_read(entries: list[dict[str, Any]]) -> dict[str, float]:
    """Per host, when its robots.txt was first fetched (``real_time``)."""
    first: dict[str, float] = {}
    for r in entries:
        if r["path"] == "/robots.txt":
            first[r["host"]] = min(first.get(r["host"], math.inf), r["real_time"])
    return first


def gap_violations(entries: list[dict[str, Any]], addresses: list[str], delays: list[float],
                   min_host_delay: float, robots_at: dict[str, float] | None = None
                   ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Gaps between requests (``real_time``) per host shorter than the delay in force:
    the host's (robots.txt's Crawl-delay) once its robots.txt was fetched, before that
    the smaller of it and ``min_host_delay``. Each says how long the machine was frozen
    between its two requests (``frozen_s``) and whether the gap and the freeze together
    reach the delay (``across_freeze``: real time the monotonic clock did not count)."""
    hosts, violations = {}, []
    for h, address in enumerate(addresses):
        mine = sorted((r for r in entries if r["host"] == address), key=lambda r: r["real_time"])
        robots = (robots_at or robots_read(mine)).get(address, math.inf)
        gaps = []
        for a, b in zip(mine, mine[1:], strict=False):
            gap = b["real_time"] - a["real_time"]
            in_force = delays[h] if b["real_time"] > robots else min(delays[h], min_host_delay)
            gaps.append(gap)
            if gap < in_force - GAP_TOLERANCE:
                frozen = frozen_between(a, b)
                violations.append({"host": address, "t": round(b["real_time"], 3),
                                   "gap_s": round(gap, 4), "delay_s": in_force,
                                   "agents": [a.get("agent"), b.get("agent")],
                                   "paths": [a["path"], b["path"]],
                                   "frozen_s": round(frozen, 3),
                                   "across_freeze": gap + frozen >= in_force - GAP_TOLERANCE})
        hosts[address] = {"requests": len(mine), "delay_s": delays[h],
                          "min_gap_s": round(min(gaps), 4) if gaps else None}
    return violations, hosts


def frozen_between(a: dict[str, Any], b: dict[str, Any]) -> float:
    """Seconds the machine was frozen between requests ``a`` and ``b`` of the site's log:
    how far its wall clock stepped ahead of its monotonic one (``real_time``) between
    them, when at least ``CLOCK_STEP``; 0 otherwise or without wall times. A site on
    another machine, not frozen with the crawlers, would have seen the gap this much
    longer; the crawlers' send slots (Redis's ``TIME``, wall time) count it too."""
    if "wall_time" not in a or "wall_time" not in b:
        return 0.0
    step = (b["wall_time"] - b["real_time"]) - (a["wall_time"] - a["real_time"])
    return step if step >= CLOCK_STEP else 0.0


def politeness_check(run: dict[str, Any]) -> dict[str, Any]:
    """Request gaps per host in the site's own log >= the host's delay; each violation
    with how late the site's process woke around it (its log's stamps are that late).
    A gap that reaches the delay only with the time the machine was frozen between its
    requests (``frozen_between``) is listed apart (``gaps_across_freeze``), not judged:
    the site shares the crawlers' machine, and its clock stopped with them."""
    found, hosts = gap_violations(run["requests"], run["addresses"], run["delays"],
                                  run["min_host_delay"])
    violations = [v for v in found if not v["across_freeze"]]
    frozen = [v for v in found if v["across_freeze"]]
    lags = sorted((e["real_time"], e["late_s"]) for e in run.get("site_lag", []))
    for violation in violations:  # did the site's own process wake late around then?
        near = [late for t, late in lags if abs(t - violation["t"]) <= 1.0]
        violation["site_late_s"] = max(near, default=0.0)
    explained = sum(v["site_late_s"] >= v["delay_s"] - v["gap_s"] for v in violations)
    private = sum(1 for r in run["requests"] if r["path"].startswith("/private/"))
    return {"ok": not violations and not private, "violations": len(violations),
            "violations_site_late": explained,
            "smallest_gap_ratio": round(min((v["gap_s"] / v["delay_s"] for v in violations),
                                            default=1.0), 3),
            "site_worst_lag_s": max((late for _t, late in lags), default=0.0),
            "disallowed_fetched": private, "details": violations[:50],
            "gaps_across_freeze": len(frozen), "freeze_details": frozen[:20], "hosts": hosts}


def capture_politeness_check(run: dict[str, Any], capture: list[dict[str, Any]]
                             ) -> dict[str, Any]:
    """The same gaps from the kernel's timestamps (``_soak_capture``): what the crawlers
    sent, whatever the site's process did. Wall times map onto the site log's clock by
    the median offset of its own entries."""
    offsets = sorted(r["wall_time"] - r["real_time"] for r in run["requests"])
    offset = offsets[len(offsets) // 2] if offsets else 0.0
    mine = [{**c, "real_time": c["wall_time"] - offset} for c in capture
            if c["host"] in run["addresses"] and c.get("port", run["port"]) == run["port"]]
    violations, hosts = gap_violations(mine, run["addresses"], run["delays"],
                                       run["min_host_delay"], robots_read(run["requests"]))
    return {"ok": not violations if mine else None, "requests": len(mine),
            "site_log_requests": len(run["requests"]), "violations": len(violations),
            "smallest_gap_ratio": round(min((v["gap_s"] / v["delay_s"] for v in violations),
                                            default=1.0), 3),
            "details": violations[:50], "hosts": hosts}


def memory_check(run: dict[str, Any], warmup: float, min_span: float) -> dict[str, Any]:
    """RSS growth (% per hour, least squares) of every process after its warm-up (and Redis's
    used_memory: one server's ``redis_used_memory``, each cluster node's
    ``node_used_memory``, labelled by the node's process): the first ``warmup`` s of the
    process's own life, the same for a process restarted by a fault as for one that started
    with the run. A process that lived less than ``min_span`` s after it is not judged.

    Every crawler of the hours of 2026-12-03 grew 7-29 %/h over its first 15 minutes and
    0-5 %/h after, restarted or not; a restarted crawler judged 120 s into its life (the
    earlier rule) failed on that warm-up alone (+14.9 %/h).

    A cluster node whose role changed (``node_role``: a replica promoted by a failover, or an
    old primary back as a replica) is judged from its last change, as a restarted process
    from its start: a promoted replica starts to run the scripts and fills its Lua heap,
    its clients' buffers and its AOF buffer for the first time (the 20-minute cluster soak
    of 2026-12-03: used_memory 3.7 to 4.4 MB within 30 s of its promotion, then flat),
    which is a role's warm-up, not a leak."""
    series: dict[str, list[tuple[float, float]]] = {}
    starts = {p["label"]: p["start"] for p in run["processes"].values()}
    for label, changed in _role_changes(run["samples"]).items():
        starts[label] = max(starts.get(label, 0.0), changed)
    for sample in run["samples"]:
        for label, rss in sample.get("rss", {}).items():
            if rss:
                series.setdefault(label, []).append((sample["t"], rss))
            if label.startswith("redis-") and sample.get("redis_used_memory"):
                name = f"{label} used_memory"  # the instance that answered, by its start
                starts[name] = starts.get(label, 0.0)
                series.setdefault(name, []).append((sample["t"], sample["redis_used_memory"]))
        for label, used in sample.get("node_used_memory", {}).items():  # a cluster's nodes
            if used:
                name = f"{label} used_memory"
                starts[name] = starts.get(label, 0.0)
                series.setdefault(name, []).append((sample["t"], used))
    result, worst = {}, None
    for label, points in series.items():
        begin = starts.get(label, 0.0)
        cut = begin + warmup
        kept = [(t, v) for t, v in points if t >= cut]
        if len(kept) < 3 or kept[-1][0] - kept[0][0] < min_span:
            result[label] = {"judged": False, "span_s": round(kept[-1][0] - kept[0][0], 1)
                             if kept else 0.0}
            continue
        t, v = np.array(kept).T
        slope, intercept = np.polyfit(t, v, 1)
        growth = float(slope * 3600.0 / (intercept + slope * t[0]) * 100.0)
        rise, rise_at = largest_rise(t, v, RISE_SPAN)
        result[label] = {"judged": True, "growth_pct_per_hour": round(growth, 2),
                         "first_mb": round(v[0] / 2**20, 1), "last_mb": round(v[-1] / 2**20, 1),
                         "peak_mb": round(v.max() / 2**20, 1), "span_s": round(t[-1] - t[0], 1),
                         "largest_rise_mb": round(rise / 2**20, 2), "rise_at_s": rise_at}
        if worst is None or growth > worst:
            worst, worst_label = growth, label
    judged = [r for r in result.values() if r["judged"]]
    ok = None if not judged else all(r["growth_pct_per_hour"] <= MEMORY_LIMIT for r in judged)
    return {"ok": ok, "limit_pct_per_hour": MEMORY_LIMIT, "worst_pct_per_hour": worst,
            "worst_process": worst_label if worst is not None else None, "processes": result}


RISE_SPAN = 60.0
"""Seconds within which ``largest_rise`` looks for a series' steepest rise."""


def largest_rise(t: np.ndarray, v: np.ndarray, span: float) -> tuple[float, float | None]:
    """The largest rise of ``v`` within ``span`` seconds (a sample to a later one at most
    ``span`` after it) and when it was reached: what tells a step (a fault's allocations, an
    allocator's run) from a creep in a judged series. A diagnostic beside the linear fit,
    which alone gives the verdict."""
    best, at = 0.0, None
    for i in range(len(t)):
        later = v[i:np.searchsorted(t, t[i] + span, side="right")]  # t is sorted
        top = int(later.argmax())
        if later[top] - v[i] > best:
            best, at = float(later[top] - v[i]), round(float(t[i + top]), 1)
    return best, at


def _role_changes(samples: list[dict[str, Any]]) -> dict[str, float]:
    """When each cluster node's role (``node_role``) last changed: the first sample of its
    last role, for the nodes whose role changed during the run."""
    last: dict[str, str] = {}
    changed: dict[str, float] = {}
    for sample in samples:
        for label, role in sample.get("node_role", {}).items():
            if role and last.get(label, role) != role:
                changed[label] = sample["t"]
            if role:
                last[label] = role
    return changed


def _site_end(run: dict[str, Any]) -> float:
    """The run's end on the site's simulated clock: its duration, or the moment the truth was
    taken when that came first (the site's clock starts with the site, a few seconds after
    the run's on a loaded machine: a 30-minute run's truth was 7.9 real s short)."""
    truth = run["truth"]
    return min(run["duration"] * truth["acceleration"], truth.get("now", math.inf))


def freshness_series(run: dict[str, Any], window: float) -> list[tuple[float, float]]:
    """Weighted freshness per ``window`` real seconds: (end of window, freshness)."""
    truth, accel = run["truth"], run["truth"]["acceleration"]
    answers = _answers(run)
    end = _site_end(run) / accel
    edges = [*np.arange(0.0, end, window).tolist(), end]
    return [(float(b), weighted_freshness(truth, answers, a * accel, b * accel))
            for a, b in zip(edges[:-1], edges[1:], strict=True)]


def freshness_check(run: dict[str, Any], control: dict[str, Any] | None) -> dict[str, Any]:
    """Freshness over the last half against the fault-free control run's."""
    half = run["duration"] / 2
    accel = run["truth"]["acceleration"]

    def last_half(r: dict[str, Any]) -> float:
        return weighted_freshness(r["truth"], _answers(r), half * accel, _site_end(r))

    mine = last_half(run)
    if control is None:
        return {"ok": None, "last_half": mine}
    judged = run["duration"] >= FRESHNESS_MIN_DURATION
    theirs = last_half(control)
    ratio = mine / theirs if theirs > 0 else float("nan")
    return {"ok": ratio >= FRESHNESS_RATIO if judged else None, "last_half": mine, "control_last_half": theirs,
            "ratio": ratio, "target": FRESHNESS_RATIO}


def all_checks(run: dict[str, Any], control: dict[str, Any] | None, lease_timeout: float,
               sample_every: float, warmup: float, min_span: float) -> dict[str, Any]:
    """Every check of the run (``control``: the fault-free run for freshness)."""
    return {"pages": pages_check(run),
            "leases": leases_check(run, lease_timeout, sample_every),
            "observed_once": observed_check(run),
            "politeness": politeness_check(run),
            "politeness_capture": capture_politeness_check(run, run.get("capture", [])),
            "memory": memory_check(run, warmup, min_span),
            "freshness": freshness_check(run, control)}

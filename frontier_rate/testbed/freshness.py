"""Freshness measured against the ground truth, for crawls and replayed schedules.

A page's copy is fresh at time t when no real change happened in
``(last fetch <= t, t]``; before its first fetch it is stale. Weighted
freshness is the weight-averaged fraction of ``[t_start, t_end]`` (simulated
seconds) during which copies are fresh, integrated exactly over the
piecewise-constant fresh/stale signal (no sampling). A fetch at exactly a
change time sees the new version, as the server does (``version_at`` counts
changes ``<= t``).
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

FETCH_STATUSES = (200, 304)
"""Responses that refresh the copy: a full body, or Not Modified."""


def page_freshness(
    change_times: Sequence[float], fetch_times: Iterable[float], t_start: float, t_end: float
) -> float:
    """Fraction of ``[t_start, t_end]`` during which one page's copy is fresh."""
    _check_window(t_start, t_end)
    changes = sorted(change_times)
    fetches = sorted(fetch_times)
    fresh = 0.0
    for j, fetched in enumerate(fetches):
        next_fetch = fetches[j + 1] if j + 1 < len(fetches) else math.inf
        if next_fetch <= t_start:
            continue
        if fetched >= t_end:
            break
        k = bisect.bisect_right(changes, fetched)
        stale_at = changes[k] if k < len(changes) else math.inf
        lo, hi = max(fetched, t_start), min(stale_at, next_fetch, t_end)
        if hi > lo:
            fresh += hi - lo
    return fresh / (t_end - t_start)


def freshness_by_page(
    truth: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    fetch_log: Iterable[Mapping[str, Any] | tuple[str, float]],
    t_start: float,
    t_end: float,
) -> dict[str, float]:
    """Each truth page's fresh fraction of ``[t_start, t_end]``.

    ``truth`` is ``Testbed.truth()`` (or its JSON, or just its ``pages``
    list). ``fetch_log`` holds ``Testbed.requests()`` entries (only GETs
    answered 200 or 304 count; other URLs are ignored) or ``(url, sim_time)``
    pairs.
    """
    pages = _truth_pages(truth, t_end)
    fetches: dict[str, list[float]] = {page["url"]: [] for page in pages}
    for record in fetch_log:
        if isinstance(record, Mapping):
            if record.get("method", "GET") != "GET":
                continue
            if record.get("status", 200) not in FETCH_STATUSES:
                continue
            url, when = record.get("url"), record.get("sim_time")
        else:
            url, when = record
        if url in fetches:
            fetches[url].append(float(when))
    return {
        page["url"]: page_freshness(page["change_times"], fetches[page["url"]], t_start, t_end)
        for page in pages
    }


def weighted_freshness(
    truth: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    fetch_log: Iterable[Mapping[str, Any] | tuple[str, float]],
    t_start: float,
    t_end: float,
) -> float:
    """Weight-averaged time fraction of ``[t_start, t_end]`` that copies are fresh.

    Equals ``sum_i w_i F_i / sum_i w_i`` with ``F_i`` from ``page_freshness``.
    """
    pages = _truth_pages(truth, t_end)
    per_page = freshness_by_page(pages, fetch_log, t_start, t_end)
    total = sum(page["weight"] for page in pages)
    if not total > 0:
        raise ValueError(f"truth weights sum to {total!r}: need a positive total")
    return sum(page["weight"] * per_page[page["url"]] for page in pages) / total


def replay_policy(
    truth: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    fetch_times_by_page: Mapping[str, Iterable[float]],
    t_start: float,
    t_end: float,
) -> float:
    """Weighted freshness of a schedule ``{url: [sim fetch times]}`` computed offline."""
    known = {page["url"] for page in _truth_pages(truth, t_end)}
    unknown = [url for url in fetch_times_by_page if url not in known]
    if unknown:
        raise ValueError(f"fetch_times_by_page has URLs not in the truth: {unknown[:3]}")
    log = [(url, t) for url, times in fetch_times_by_page.items() for t in times]
    return weighted_freshness(truth, log, t_start, t_end)


def periodic_schedule(
    intervals: Mapping[str, float | None], t_start: float, t_end: float, seed: int = 0
) -> dict[str, list[float]]:
    """Fetch each page every ``intervals[url]`` simulated seconds (None: never).

    Phases are uniform from ``seed``, and the first fetch falls in
    ``(t_start - interval, t_start]``, so the schedule is already in its
    steady state over ``[t_start, t_end]``.
    """
    _check_window(t_start, t_end)
    rng = random.Random(f"frontier-rate-schedule/{seed}")
    schedule: dict[str, list[float]] = {}
    for url, interval in intervals.items():
        if interval is None or interval == math.inf:
            schedule[url] = []
            continue
        if not interval > 0:
            raise ValueError(f"intervals[{url!r}]={interval!r}: must be positive or None")
        first = t_start - rng.random() * interval
        count = int((t_end - first) // interval) + 1
        schedule[url] = [first + k * interval for k in range(count)]
    return schedule


def uniform_schedule(
    truth: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    fetches_per_second: float,
    t_start: float,
    t_end: float,
    seed: int = 0,
) -> dict[str, list[float]]:
    """Every page at the same interval, spending ``fetches_per_second`` (simulated) in total."""
    if not fetches_per_second > 0:
        raise ValueError(f"fetches_per_second={fetches_per_second!r}: must be positive")
    pages = _truth_pages(truth, None)
    interval = len(pages) / fetches_per_second
    return periodic_schedule({page["url"]: interval for page in pages}, t_start, t_end, seed)


def _check_window(t_start: float, t_end: float) -> None:
    if not (math.isfinite(t_start) and math.isfinite(t_end) and t_end > t_start):
        raise ValueError(f"t_start={t_start!r}, t_end={t_end!r}: need finite t_end > t_start")


def _truth_pages(
    truth: Mapping[str, Any] | Sequence[Mapping[str, Any]], t_end: float | None
) -> Sequence[Mapping[str, Any]]:
    """The page list of a truth; refuses a window that ends after the truth was taken."""
    if isinstance(truth, Mapping):
        now = truth.get("now")
        if t_end is not None and now is not None and t_end > now + 1e-9:
            raise ValueError(
                f"t_end={t_end!r} is after the truth's now={now!r}: take the truth later"
            )
        return truth["pages"]
    return truth

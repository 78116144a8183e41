"""Rhythm: pages that change at a regular time of the hour, day or week.

A constant rate (Poisson) says when to fetch on average, not at which moment.
Many real pages change on a clock: a scraper's cron job, a nightly build, a
weekly release. For such a page the best moment to fetch is just after its
usual change time: the copy is then fresh until the next one (Nutch's
``sync_delta`` moves the fetch towards the last-modified time for the same
reason). This module learns the rhythm online from the change times servers
tell (dated changes, see ``dates``), in O(1) state per page, and moves a due
time onto it; lua/lib.lua mirrors it step by step.

The model: for each period P of ``PERIODS`` a change at time c has phase
θ = 2π (c mod P) / P. The page keeps exponentially decayed circular sums
W = Σ γ^j, C = Σ γ^j cos θ_j, S = Σ γ^j sin θ_j over its dated changes (most
recent j = 0, γ = ``DECAY``; memory about 1 / (1 − γ) = 10 changes). The mean
resultant length R = √(C² + S²) / W is 1 when every change falls at the same
phase and about 1/√n for n changes at random phases (Fisher, "Statistical
Analysis of Circular Data", 1993, §2.3 and §4.3). A period counts only when
the remembered changes reach back over it: their decayed mean age A (the
last dated change minus the decayed mean change time) must be at least P, or
a page seen for two days would look weekly. The page is rhythmic on the
longest period that counts with R ≥ ``MIN_R`` once W ≥ ``MIN_WEIGHT`` (a page
that changes at 02:00 every day is also "hourly"; the day is what matters).
Otherwise the evidence is too weak and the constant-rate schedule stands.
Its expected change phase is the mean direction atan2(S, C), with the
circular standard deviation σ = √(−2 ln R) as the margin after it.

A due time ``planned`` (from the constant-rate plan, ``planned_interval``
after the last fetch) moves to the first "change phase + margin" moment at
or after ``planned − P/2``: the fetch rate stays the plan's when the planned
interval is longer than a period, and drops to one per period, just after the
change, when it is shorter (fetching twice between two changes of a page that
changes once a period buys nothing; the budget this frees goes to other
pages through ``fill_budget``).
"""

from __future__ import annotations

import math

HOUR, DAY, WEEK = 3600.0, 86400.0, 7 * 86400.0
PERIODS = (HOUR, DAY, WEEK)
"""Candidate periods, in server seconds."""
DECAY = 0.9
MIN_WEIGHT = 4.0
MIN_R = 0.7
EMPTY = (0.0,) * (3 + 2 * len(PERIODS))
"""State (last, W, A, C_1, S_1, C_2, S_2, C_3, S_3) of a page with no dated change:
the last dated change, the decayed weight and mean age, the decayed circular sums."""


def update(state: tuple[float, ...], changed_at: float, clock_rate: float = 1.0
           ) -> tuple[float, ...]:
    """The state after one more dated change at ``changed_at`` (clock units; ``clock_rate``
    server seconds per clock unit scale the periods)."""
    last, w, age, *sums = state
    kept = DECAY * w
    age = kept * (age + max(changed_at - last, 0.0)) / (kept + 1.0) if w > 0 else 0.0
    out = [changed_at, kept + 1.0, age]
    for k, period in enumerate(PERIODS):
        theta = _phase(changed_at, period / clock_rate)
        out += [DECAY * sums[2 * k] + math.cos(theta), DECAY * sums[2 * k + 1] + math.sin(theta)]
    return tuple(out)


def rhythm(state: tuple[float, ...], clock_rate: float = 1.0) -> tuple[float, float, float] | None:
    """(period, mean phase in radians, R) of the page's rhythm, or None when the evidence
    is too weak (W < MIN_WEIGHT, or no period with A >= P and R >= MIN_R)."""
    _, w, age, *sums = state
    if w < MIN_WEIGHT:
        return None
    best = None
    for k, period in enumerate(PERIODS):
        period /= clock_rate
        c, s = sums[2 * k], sums[2 * k + 1]
        r = math.hypot(c, s) / w
        if age >= period and r >= MIN_R:
            best = (period, math.atan2(s, c), r)
    return best


def aligned_due(state: tuple[float, ...], planned: float, earliest: float,
                clock_rate: float = 1.0) -> float:
    """``planned`` moved onto the page's rhythm (unchanged without one): the first moment
    at or after max(planned − P/2, earliest) whose phase is the mean change phase plus
    one circular standard deviation."""
    found = rhythm(state, clock_rate)
    if found is None:
        return planned
    period, mean, r = found
    margin = min(math.sqrt(-2.0 * math.log(r)), math.pi / 2)
    target = (mean + margin) % (2 * math.pi) * period / (2 * math.pi)
    start = max(planned - period / 2, earliest)
    cycles = math.ceil((start - target) / period)
    return target + cycles * period


def _phase(t: float, period: float) -> float:
    return 2 * math.pi * math.fmod(t, period) / period

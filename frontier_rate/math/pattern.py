"""When a page changes, beyond a constant rate: rhythm and bursts (O(1) state per page).

A constant rate (Poisson) says how often to fetch, not at which moment. Real
pages change on a clock (a scraper's cron job, a nightly build, a weekly
release) or in bursts (a document edited in a session). This module learns
both online from the change times servers tell (dated changes, see
``dates``) and moves a page's due time accordingly; lua/lib.lua mirrors it
step by step. Without dated changes, or while the evidence is weak, the
constant-rate plan stands.

**Rhythm.** For each period P of ``PERIODS`` a change at time c has phase
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
Its expected change phase is the mean direction atan2(S, C), with the
circular standard deviation σ = √(−2 ln R) as the margin after it. A due
time ``planned`` moves to the first "change phase + margin" moment at or
after max(planned − P/2, earliest): the plan's fetch rate when the planned
interval is longer than a period, one fetch per period just after the change
when it is shorter (fetching twice between two changes of a page that changes
once a period buys nothing; ``fill_budget`` spends what this frees). Nutch's
``sync_delta`` moves fetches towards the last-modified time for the same
reason.

**Bursts.** A change seen very recently (younger than ``BURST_RECENT`` mean
gaps, 1 / rate) may be the start of a burst: a copy fetched now goes stale
again soon, and the burst's final version is the one worth having. The page
is then followed up ``BURST_WAIT`` times the change's age later (at least
``min_interval``), if that comes before its planned due time. Whether
follow-ups pay is learned per page: each one records whether it found a
change and the chance 1 − e^{−λτ} a Poisson page had to show one (decayed
like the rhythm sums). After ``BURST_TRIALS`` follow-ups they continue only
while they find more than ``BURST_LIFT`` times the changes Poisson predicts
(plus one half); otherwise the page is treated as steady.
"""

from __future__ import annotations

import math
import struct

HOUR, DAY, WEEK = 3600.0, 86400.0, 7 * 86400.0
PERIODS = (HOUR, DAY, WEEK)
"""Candidate periods, in server seconds."""
DECAY = 0.9
MIN_WEIGHT = 4.0
MIN_R = 0.7
BURST_RECENT, BURST_WAIT, BURST_TRIALS, BURST_LIFT = 0.1, 3.0, 3.0, 2.0
EMPTY = (0.0,) * (7 + 2 * len(PERIODS))
"""State of a page with no dated change: (last, W, A, C_1, S_1, C_2, S_2, C_3, S_3,
pending, F, S, E): the last dated change, the decayed weight and mean age, the decayed
circular sums; a follow-up pending (1/0), the decayed follow-ups, the changes they found
and the changes Poisson expected on them."""


def update(state: tuple[float, ...], changed_at: float, clock_rate: float = 1.0
           ) -> tuple[float, ...]:
    """The state after one more dated change at ``changed_at`` (clock units; ``clock_rate``
    server seconds per clock unit scale the periods)."""
    last, w, age, *sums = state[:9]
    kept = DECAY * w
    age = kept * (age + max(changed_at - last, 0.0)) / (kept + 1.0) if w > 0 else 0.0
    out = [changed_at, kept + 1.0, age]
    for k, period in enumerate(PERIODS):
        theta = _phase(changed_at, period / clock_rate)
        out += [DECAY * sums[2 * k] + math.cos(theta), DECAY * sums[2 * k + 1] + math.sin(theta)]
    return (*out, *state[9:])


def rhythm(state: tuple[float, ...], clock_rate: float = 1.0) -> tuple[float, float, float] | None:
    """(period, mean phase in radians, R) of the page's rhythm, or None when the evidence
    is too weak (W < MIN_WEIGHT, or no period with A >= P and R >= MIN_R)."""
    _, w, age, *sums = state[:9]
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
    margin = min(math.sqrt(max(-2.0 * math.log(r), 0.0)), math.pi / 2)  # R may round above 1
    target = (mean + margin) % (2 * math.pi) * period / (2 * math.pi)
    start = max(planned - period / 2, earliest)
    cycles = math.ceil((start - target) / period)
    return target + cycles * period


def follow_up_outcome(state: tuple[float, ...], changed: bool, interval: float, rate: float
                      ) -> tuple[float, ...]:
    """The state after a fetch; when it was a follow-up, record whether it found a change
    against the chance 1 − e^{−rate·interval} a Poisson page had to."""
    if state[9] == 0:
        return state
    f, s, e = state[10:13]
    expected = -math.expm1(-rate * interval)
    return (*state[:9], 0.0, DECAY * f + 1.0, DECAY * s + float(changed), DECAY * e + expected)


def burst_due(state: tuple[float, ...], due: float, now: float, since: float | None,
              rate: float, min_interval: float) -> tuple[float, tuple[float, ...]]:
    """(due time, state): a follow-up ``BURST_WAIT`` x ``since`` after ``now`` when the
    dated change (``since`` old) is recent, follow-ups still pay, and it comes before ``due``."""
    if since is None or since * rate >= BURST_RECENT:
        return due, state
    f, s, e = state[10:13]
    if f >= BURST_TRIALS and s < BURST_LIFT * e + 0.5:
        return due, state
    follow = now + max(min_interval, BURST_WAIT * since)
    if follow >= due:
        return due, state
    return follow, (*state[:9], 1.0, *state[10:])


PACKED = struct.Struct("<d12f")
"""The state as lua/lib.lua stores it (PATTERN): the last change a double, the rest float32."""


def unpack(raw: bytes | None) -> tuple[float, ...] | None:
    """A stored state, or None when absent or unreadable (the scripts then start afresh)."""
    if raw is None or len(raw) != PACKED.size:
        return None
    state = PACKED.unpack(raw)
    return state if all(math.isfinite(v) for v in state) else None


def describe(state: tuple[float, ...], clock_rate: float = 1.0) -> dict:
    """What the pattern says, for ``Frontier.page``: the rhythm (period, the usual change
    time within it, R) or None, and the follow-ups' record."""
    found = rhythm(state, clock_rate)
    return {"dated_changes": state[1],
            "rhythm": None if found is None else {
                "period": found[0], "change_time": found[1] % (2 * math.pi) * found[0] / (2 * math.pi),
                "r": found[2]},
            "follow_ups": state[10], "follow_up_changes": state[11],
            "follow_up_poisson_changes": state[12]}


def _phase(t: float, period: float) -> float:
    return 2 * math.pi * math.fmod(t, period) / period

"""Rhythm: fetch just after a page's usual change time (frontier_rate/rhythm.py, and its
mirror in lua/lib.lua on a real Redis)."""

from __future__ import annotations

import email.utils
import math

import numpy as np
import pytest

from frontier_rate import Frontier, rhythm
from frontier_rate.rhythm import DAY, DECAY, HOUR, WEEK

T0 = 1_700_000_000.0 - 1_700_000_000.0 % WEEK  # a week boundary, so phases read plainly


def _state(times, clock_rate=1.0):
    state = rhythm.EMPTY
    for t in times:
        state = rhythm.update(state, float(t), clock_rate)
    return state


def _daily(days=30, at=2 * HOUR, jitter=600.0, seed=0):
    rng = np.random.default_rng(seed)
    return T0 + np.arange(days) * DAY + at + rng.uniform(-jitter, jitter, days)


def test_the_sums_are_the_decayed_circular_sums():
    """Against the closed form Σ_j γ^(n-1-j) e^{iθ_j} and the decayed mean age."""
    times = _daily(12) + np.random.default_rng(1).uniform(0, 5 * HOUR, 12)
    state = _state(times)
    n = len(times)
    g = DECAY ** np.arange(n - 1, -1, -1)
    assert state[0] == times[-1]
    assert state[1] == pytest.approx(g.sum(), rel=1e-12)
    assert state[2] == pytest.approx(times[-1] - (g * times).sum() / g.sum(), rel=1e-9)
    for k, period in enumerate(rhythm.PERIODS):
        z = (g * np.exp(2j * np.pi * np.mod(times, period) / period)).sum()
        assert state[3 + 2 * k] == pytest.approx(z.real, abs=1e-9)
        assert state[4 + 2 * k] == pytest.approx(z.imag, abs=1e-9)


def test_a_daily_page_is_found_daily_with_its_change_time():
    found = rhythm.rhythm(_state(_daily()))
    assert found is not None
    period, mean, r = found
    assert period == DAY  # also "hourly" (each change falls near :00), the longest counts
    assert mean * DAY / (2 * math.pi) == pytest.approx(2 * HOUR, abs=300)
    assert r > 0.95


def test_poisson_pages_and_short_histories_have_no_rhythm():
    rng = np.random.default_rng(2)
    assert rhythm.rhythm(_state(T0 + np.cumsum(rng.exponential(DAY, 60)))) is None
    # 40 changes in two days: within one week, so "weekly" must not count
    burst = T0 + np.sort(rng.uniform(0, 2 * DAY, 40))
    assert rhythm.rhythm(_state(burst)) is None
    assert rhythm.rhythm(_state(_daily(days=3))) is None  # W < MIN_WEIGHT


def test_aligned_due_lands_just_after_the_change_time():
    state = _state(_daily())
    period, mean, r = rhythm.rhythm(state)
    margin = math.sqrt(-2 * math.log(r)) * DAY / (2 * math.pi)
    now = T0 + 40 * DAY + 5 * HOUR
    for planned_interval in (3 * HOUR, 2 * DAY, 5.5 * DAY):
        due = rhythm.aligned_due(state, now + planned_interval, now + 60.0)
        phase = math.fmod(due, DAY)
        assert phase == pytest.approx(mean * DAY / (2 * math.pi) + margin, abs=1e-3)
        assert due >= now + 60.0
        if planned_interval >= DAY:  # the plan's rate: within half a period of it
            assert abs(due - (now + planned_interval)) <= DAY / 2
        else:  # once a period: the next change time
            assert due - now < DAY
    assert rhythm.aligned_due(rhythm.EMPTY, 123.0, 0.0) == 123.0


def test_a_clock_rate_scales_the_periods():
    """On a test-bed whose server clock runs 86400x faster, one crawler second is a day."""
    times = (_daily() - T0) / DAY  # the same page seen on the crawler's clock
    period, _, _ = rhythm.rhythm(_state(times, clock_rate=DAY), clock_rate=DAY)
    assert period == 1.0


def test_the_engine_moves_due_times_onto_the_rhythm_as_python_does(redis_url, namespace):
    """A page that changes at about 02:00 every day, planned every 1.5 days (an ample
    budget: the plan is min_interval): each due time is the Python aligned_due."""
    f = Frontier(redis_url, namespace=namespace, estimator="interval", budget=1.0,
                 min_host_delay=0.0, min_interval=1.5 * DAY, max_interval=1e7, lease_timeout=1e9,
                 fill_budget=False, prior_rate=1 / DAY)
    url = "http://nightly.example/build"
    changes = np.floor(_daily(days=40))
    f.add(url, now=T0)
    t, dated, obs = T0 + 3 * HOUR, [], None
    for _ in range(25):
        got = []
        while not got:
            got = [d for d in f.next_requests(1, now=t) if d.url == url]
            if not got:
                t = max(t + 60.0, f.next_due_time() or t)
        version = int(np.searchsorted(changes, t, side="right"))
        last = float(changes[version - 1]) if version else None
        obs = f.observe(got[0], fingerprint=f"v{version}", fetched_at=t,
                        last_modified=email.utils.formatdate(last, usegmt=True) if last else None,
                        served_at=email.utils.formatdate(t, usegmt=True))
        if obs.dated:
            dated.append(last)
        t += 1.0
    state = _state(dated)
    assert rhythm.rhythm(state)[0] == DAY
    page = f.page(url)
    assert 1 / page["p"] == pytest.approx(1.5 * DAY)
    expected = rhythm.aligned_due(state, page["last_fetch"] + 1.5 * DAY, page["last_fetch"] + 1.5 * DAY)
    assert obs.next_due == pytest.approx(expected, abs=1.0)  # float32 sums, whole microseconds
    assert len(dated) >= 20

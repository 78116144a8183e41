"""Change patterns: fetch just after a page's usual change time, follow up after a burst
(frontier_rate/math/pattern.py, and its mirror in lua/lib.lua on a real Redis)."""

from __future__ import annotations

import email.utils
import math

import numpy as np
import pytest
from redis_servers import both_servers  # noqa: F401, I001  (every test on both script paths)

from frontier_rate import Frontier
from frontier_rate.math import pattern
from frontier_rate.math.dates import change_time
from frontier_rate.math.index import INTERVAL_FLOOR_SPAN
from frontier_rate.math.pattern import DAY, DECAY, HOUR, WEEK
from frontier_rate.store.keys import bucket_of, page_id

T0 = 1_700_000_000.0 - 1_700_000_000.0 % WEEK  # a week boundary, so phases read plainly


def _state(times, clock_rate=1.0):
    state = pattern.EMPTY
    for t in times:
        state = pattern.update(state, float(t), clock_rate)
    return state


def _stored(state):
    """The state as Redis keeps it: the last change as a double, the rest as float32."""
    return (state[0], *(float(np.float32(v)) for v in state[1:]))


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
    for k, period in enumerate(pattern.PERIODS):
        z = (g * np.exp(2j * np.pi * np.mod(times, period) / period)).sum()
        assert state[3 + 2 * k] == pytest.approx(z.real, abs=1e-9)
        assert state[4 + 2 * k] == pytest.approx(z.imag, abs=1e-9)


def test_a_daily_page_is_found_daily_with_its_change_time():
    found = pattern.rhythm(_state(_daily()))
    assert found is not None
    period, mean, r = found
    assert period == DAY  # also "hourly" (each change falls near :00), the longest counts
    assert mean * DAY / (2 * math.pi) == pytest.approx(2 * HOUR, abs=300)
    assert r > 0.95


def test_poisson_pages_and_short_histories_have_no_rhythm():
    rng = np.random.default_rng(2)
    assert pattern.rhythm(_state(T0 + np.cumsum(rng.exponential(DAY, 60)))) is None
    # 40 changes in two days: within one week, so "weekly" must not count
    burst = T0 + np.sort(rng.uniform(0, 2 * DAY, 40))
    assert pattern.rhythm(_state(burst)) is None
    assert pattern.rhythm(_state(_daily(days=3))) is None  # W < MIN_WEIGHT


def test_aligned_due_lands_just_after_the_change_time():
    state = _state(_daily())
    period, mean, r = pattern.rhythm(state)
    margin = math.sqrt(-2 * math.log(r)) * DAY / (2 * math.pi)
    now = T0 + 40 * DAY + 5 * HOUR
    for planned_interval in (3 * HOUR, 2 * DAY, 5.5 * DAY):
        due = pattern.aligned_due(state, now + planned_interval, now + 60.0)
        phase = math.fmod(due, DAY)
        assert phase == pytest.approx(mean * DAY / (2 * math.pi) + margin, abs=1e-3)
        assert due >= now + 60.0
        if planned_interval >= DAY:  # the plan's rate: within half a period of it
            assert abs(due - (now + planned_interval)) <= DAY / 2
        else:  # once a period: the next change time
            assert due - now < DAY
    assert pattern.aligned_due(pattern.EMPTY, 123.0, 0.0) == 123.0


def test_a_clock_rate_scales_the_periods():
    """On a test-bed whose server clock runs 86400x faster, one crawler second is a day."""
    times = (_daily() - T0) / DAY  # the same page seen on the crawler's clock
    period, _, _ = pattern.rhythm(_state(times, clock_rate=DAY), clock_rate=DAY)
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
    assert pattern.rhythm(state)[0] == DAY
    page = f.page(url)
    assert 1 / page["p"] == pytest.approx(1.5 * DAY)
    assert page["pattern"]["rhythm"]["period"] == DAY
    assert page["pattern"]["rhythm"]["change_time"] == pytest.approx(2 * HOUR, abs=600)
    assert pattern.unpack(f.client.hget(f.keys.pattern(f._shard_of("nightly.example"),
                                                       bucket_of(page_id(url), f.buckets)),
                                        page_id(url)))[0] == pytest.approx(state[0], abs=1.0)
    expected = pattern.aligned_due(state, page["last_fetch"] + 1.5 * DAY, page["last_fetch"] + 1.5 * DAY)
    assert obs.next_due == pytest.approx(expected, abs=1.0)  # float32 sums, whole microseconds
    assert len(dated) >= 20


def test_a_follow_up_comes_after_a_change_just_seen_while_follow_ups_pay():
    rate, now = 1 / DAY, T0
    state = pattern.update(pattern.EMPTY, now - 600.0)
    due, state = pattern.burst_due(state, now + DAY, now, 600.0, rate, 60.0)
    assert due == now + 3 * 600.0 and state[9] == 1.0
    # an old change, or a follow-up later than the plan: no follow-up
    assert pattern.burst_due(state, now + DAY, now, 0.2 * DAY, rate, 60.0)[0] == now + DAY
    assert pattern.burst_due(state, now + 1000.0, now, 600.0, rate, 60.0)[0] == now + 1000.0
    # three follow-ups that found nothing: the page is steady, no more follow-ups
    for _ in range(3):
        state = pattern.follow_up_outcome(state, False, 1800.0, rate)
        assert state[9] == 0.0
        state = (*state[:9], 1.0, *state[10:])
    state = pattern.follow_up_outcome(state, False, 1800.0, rate)
    expected = -math.expm1(-rate * 1800.0)
    g = DECAY ** np.arange(3, -1, -1)
    assert state[10:] == pytest.approx((g.sum(), 0.0, expected * g.sum()))
    assert pattern.burst_due(state, now + DAY, now, 600.0, rate, 60.0)[0] == now + DAY
    # ... and follow-ups that keep finding changes go on
    busy = (*state[:10], 4.0, 4.0, 0.1)
    assert pattern.burst_due(busy, now + DAY, now, 600.0, rate, 60.0)[0] == now + 1800.0


def test_the_engine_follows_up_bursts_as_python_does(redis_url, namespace):
    """A page edited in bursts (three edits 5 min apart, then a day of quiet), fetched with
    true Last-Modified dates: every due time and the pattern state match pattern.py."""
    f = Frontier(redis_url, namespace=namespace, estimator="interval", budget=1 / (6 * HOUR),
                 min_host_delay=0.0, min_interval=60.0, max_interval=DAY, lease_timeout=1e9,
                 fill_budget=False, prior_rate=1 / DAY)
    url = "http://wiki.example/page"
    floor = 1 / (INTERVAL_FLOOR_SPAN * DAY)  # the interval estimator's lowest planned rate
    starts = T0 + np.arange(12) * DAY + 7 * HOUR
    changes = np.sort(np.concatenate([starts, starts + 300.0, starts + 600.0]))
    f.add(url, now=T0)
    t, state, checked = T0 + 1.0, pattern.EMPTY, 0
    while t < T0 + 12 * DAY:
        got = [d for d in f.next_requests(1, now=t) if d.url == url]
        if not got:
            t = max(t + 300.0, f.next_due_time() or t)
            continue
        before = f.page(url)
        version = int(np.searchsorted(changes, t, side="right"))
        last = float(changes[version - 1]) if version else None
        modified = email.utils.formatdate(last, usegmt=True) if last else None
        served = email.utils.formatdate(t, usegmt=True)
        obs = f.observe(got[0], fingerprint=f"v{version}", fetched_at=t, last_modified=modified,
                        served_at=served)
        if before["fetches"] > 0:
            old_rate = max(before["estimate"], floor)
            state = pattern.follow_up_outcome(state, obs.changed, t - before["last_fetch"], old_rate)
            since = None
            if obs.dated:  # the change time as the engine reads it: whole seconds of server age
                changed_at = change_time(modified, served, t)
                since = t - changed_at
                state = pattern.update(state, t - since)
            page = f.page(url)
            mean = 1 / page["p"]
            due = pattern.aligned_due(state, t + mean, t + 60.0)
            due, state = pattern.burst_due(state, due, t, since, max(page["estimate"], floor), 60.0)
            # p is kept as a float32 (contract STATE_INTERVAL): 1/p is the mean to 6e-8 of it
            assert obs.next_due == pytest.approx(due, abs=max(1e-3, 1e-7 * mean))
            state = _stored(state)
            checked += 1
        t += 1.0
    assert checked > 20
    assert state[10] > 0, "some follow-ups were made"

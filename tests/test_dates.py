"""Change dates as evidence: HTTP dates, the interval estimator's exact-event term, and
hosts whose Last-Modified lies (a real Redis for the engine tests)."""

from __future__ import annotations

import email.utils
import logging
import math

import numpy as np
import pytest

from frontier_rate import Frontier
from frontier_rate.math.dates import change_time, http_date
from frontier_rate.math.estimators import make_estimator
from frontier_rate.store.wire import INTERVAL_MAX_STEP, INTERVAL_PRIOR_INFO

T0 = 1_700_000_000.0  # a realistic Unix time, so that HTTP dates are ordinary ones


def _date(t: float) -> str:
    return email.utils.formatdate(t, usegmt=True)


# -- dates.py -----------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["Sun, 06 Nov 1994 08:49:37 GMT",    # IMF-fixdate
                                  "Sunday, 06-Nov-94 08:49:37 GMT",   # obsolete RFC 850
                                  "Sun Nov  6 08:49:37 1994"])         # obsolete asctime
def test_http_date_reads_the_three_forms_of_rfc_9110(text):
    assert http_date(text) == 784111777.0


@pytest.mark.parametrize("text", [None, "", "yesterday", "Sun, 99 Nov 1994 08:49:37 GMT", b"\xff"])
def test_an_unreadable_date_is_no_date(text):
    assert http_date(text) is None


def test_change_time_counts_the_servers_age_back_from_the_fetch():
    # the server's clock is 1000 s behind: only the age (Date - Last-Modified) counts
    assert change_time(_date(T0 - 1300), _date(T0 - 1000), fetched_at=T0) == T0 - 300
    # a test-bed whose clock runs 60x faster: 3600 server seconds are 60 crawler seconds
    assert change_time(_date(T0), _date(T0 + 3600), fetched_at=50.0, clock_rate=60.0) == -10.0
    # "now" and future dates come out at or after the fetch (lua/observe.lua rejects them)
    assert change_time(_date(T0), _date(T0), fetched_at=5.0) == 5.0
    assert change_time(_date(T0 + 86400), _date(T0), fetched_at=5.0) > 5.0
    assert change_time(_date(T0), None, fetched_at=5.0) == T0  # no Date: a Unix time
    assert change_time(None, _date(T0), fetched_at=5.0) is None


# -- estimators: the exact-event term -------------------------------------------------------

def test_interval_with_dated_changes_converges_to_the_exact_map():
    """All changes dated: the log-posterior n·φ − e^φ·T + prior is exact in the state, so the
    one-Newton-step-per-fetch recursion tracks its root (found here by bisection). Each
    fetch moves the root by O(1/n) and one Newton step leaves an error of the order of that
    move squared (~1e-5 at n = 300), hence the tolerance."""
    rng = np.random.default_rng(3)
    rate, x0 = 1 / 3600, 1 / 86400
    est = make_estimator("interval", x0=x0, prior_info=INTERVAL_PRIOR_INFO,
                         max_step=INTERVAL_MAX_STEP)
    t, last, changes, exposure = 0.0, 0.0, 0, 0.0
    next_change = rng.exponential(1 / rate)
    for _ in range(300):
        t += 1800.0
        changed = next_change <= t
        if changed:
            while next_change <= t:
                latest = next_change
                next_change += rng.exponential(1 / rate)
            est.update(1, interval=t - last, since_change=t - latest)
            changes += 1
            exposure += t - latest
        else:
            est.update(0, interval=t - last)
            exposure += t - last
        last = t

    def score(phi):
        return changes - math.exp(phi) * exposure + INTERVAL_PRIOR_INFO * (math.log(x0) - phi)

    lo, hi = math.log(rate) - 5, math.log(rate) + 5
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if score(mid) > 0 else (lo, mid)
    assert math.log(est.estimate) == pytest.approx(lo, abs=1e-4)
    assert est.estimate == pytest.approx(rate, rel=0.25)  # and it is a good estimate


@pytest.mark.parametrize("kwargs, words", [
    ({"changed": 0, "since_change": 10.0}, "without a change"),
    ({"changed": 1, "since_change": 100.0}, "not shorter than the interval"),
    ({"changed": 1, "since_change": -1.0}, "since_change"),
])
def test_an_impossible_change_time_is_refused_by_name(kwargs, words):
    est = make_estimator("interval")
    with pytest.raises(ValueError, match=words):
        est.update(kwargs["changed"], interval=100.0, since_change=kwargs["since_change"])
    assert est.count == 0


def test_estimators_without_change_times_see_only_the_bit():
    a, b = make_estimator("sam"), make_estimator("sam")
    a.update(1, interval=100.0, since_change=5.0)
    b.update(1, interval=100.0)
    assert a.estimate == b.estimate


# -- the engine ------------------------------------------------------------------------------

def _frontier(redis_url, namespace, **kw):
    # a prior of one change in 10 min: a fetch every 3000 s is worth it from the first (at one
    # a day the page would wait 74 min for a 5% chance of a change, issue 60)
    args = {"estimator": "interval", "budget": 1.0, "min_host_delay": 0.0, "min_interval": 60.0,
            "max_interval": 1e6, "lease_timeout": 1e6, "seed": 1, "prior_rate": 1 / 600}
    args.update(kw)
    return Frontier(redis_url, namespace=namespace, **args)


def _changes(seed=5, rate=1 / 7200, span=40 * 86400):
    rng = np.random.default_rng(seed)
    return T0 + np.cumsum(rng.exponential(1 / rate, int(rate * span * 1.5)))


LIES = {"true": lambda last, t: _date(last) if last else None,
        "now": lambda last, t: _date(t),
        "constant": lambda last, t: _date(T0 - 10 * 86400),
        "future": lambda last, t: _date(t + 86400),
        "none": lambda last, t: None}


def _crawl(f, url, changes, lie, fetches=120, step=3000.0):
    """Fetch ``url`` every ``step`` s; the answer's Last-Modified is what ``lie`` says.
    Returns the observations."""
    f.add(url, now=T0)
    out = []
    for k in range(fetches):
        t = T0 + 1.0 + k * step
        got = [d for d in f.next_requests(5, now=t) if d.url == url]
        assert got, f"the page was not leased at fetch {k}"
        version = int(np.searchsorted(changes, t, side="right"))
        last = float(changes[version - 1]) if version else None
        out.append(f.observe(got[0], fingerprint=f"v{version}", fetched_at=t,
                             last_modified=LIES[lie](last, t), served_at=_date(t)))
    return out


def test_the_engine_learns_dated_changes_as_python_does(redis_url, namespace):
    """The Lua update with change dates equals estimators.Interval fed the same
    (changed, interval, since_change) sequence."""
    f = _frontier(redis_url, namespace)
    changes = _changes()
    obs = _crawl(f, "http://honest.example/p", changes, "true")
    python = make_estimator("interval", x0=f.prior_rate, prior_info=INTERVAL_PRIOR_INFO,
                            max_step=INTERVAL_MAX_STEP)
    times = T0 + 1.0 + 3000.0 * np.arange(len(obs))
    for k in range(1, len(obs)):
        since = None
        if obs[k].changed:
            version = int(np.searchsorted(changes, times[k], side="right"))
            since = times[k] - math.floor(changes[version - 1])  # HTTP dates are whole seconds
        python.update(int(obs[k].changed), interval=3000.0, since_change=since)
    assert sum(o.dated for o in obs) == sum(o.changed for o in obs) > 20
    assert f.page("http://honest.example/p")["estimate"] == pytest.approx(python.estimate, rel=1e-9)
    stats = f.stats(now=times[-1])
    assert stats["dated_changes"] == sum(o.changed for o in obs)
    assert stats["date_hosts_ignored"] == 0


@pytest.mark.parametrize("lie", ["now", "constant", "future"])
def test_a_lying_host_schedules_as_if_it_sent_no_date(redis_url, namespace, lie, caplog):
    """Dates that are "now", constant or in the future are never learned: every estimate and
    due time equals the run without Last-Modified, and the host is reported."""
    changes = _changes()
    plain = _crawl(_frontier(redis_url, f"{namespace}-none"), "http://liar.example/p", changes,
                   "none")
    f = _frontier(redis_url, f"{namespace}-{lie}")
    with caplog.at_level(logging.WARNING, logger="frontier_rate.engine.frontier"):
        lied = _crawl(f, "http://liar.example/p", changes, lie)
    assert [(o.estimate, o.next_due) for o in lied] == [(o.estimate, o.next_due) for o in plain]
    assert not any(o.dated for o in lied)
    assert f.stats()["date_hosts_ignored"] == 1
    assert "ignoring the change dates (Last-Modified) of host liar.example" in caplog.text


def test_honest_dates_move_the_estimate_and_change_dates_off_ignores_them(redis_url, namespace):
    changes = _changes()
    plain = _crawl(_frontier(redis_url, f"{namespace}-none"), "http://h.example/p", changes, "none")
    off = _crawl(_frontier(redis_url, f"{namespace}-off", change_dates=False), "http://h.example/p",
                 changes, "true")
    dated = _crawl(_frontier(redis_url, f"{namespace}-true"), "http://h.example/p", changes, "true")
    assert [o.estimate for o in off] == [o.estimate for o in plain]
    assert dated[-1].estimate != plain[-1].estimate
    true_rate = 1 / 7200
    assert abs(dated[-1].estimate / true_rate - 1) < abs(plain[-1].estimate / true_rate - 1)

"""The demo-estimates benchmark's reference: the offline MLE from fetch times and real change times."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import demo_estimates as de  # noqa: E402

from frontier_rate.math.updates import mle_solve  # noqa: E402


def _world(rate: float, fetch_times: list[float], change_times: list[float]) -> tuple[dict, list[dict]]:
    truth = {"pages": [{"url": "http://127.0.0.2/p", "rate": rate, "change_times": change_times}]}
    log = [{"url": "http://127.0.0.2/p", "sim_time": t, "status": 200, "method": "GET"} for t in fetch_times]
    return truth, log


def test_the_reference_is_events_over_exposure_with_dates_and_eq_15_without():
    fetches = [float(t) for t in range(0, 120, 10)]  # 12 fetches, 11 intervals of 10
    changes = [3.0, 7.0, 25.0, 61.0, 62.0, 99.0]
    truth, log = _world(0.05, fetches, changes)
    got = de.reference_errors(truth, log)
    # by hand: changed intervals (0,10] last change 7 -> exposure 3; (20,30] 25 -> 5;
    # (60,70] 62 -> 8; (90,100] 99 -> 1; the other 7 intervals unchanged: 70
    rate_dated = 4 / (3 + 5 + 8 + 1 + 70)
    assert got["dates"] == pytest.approx(abs(rate_dated / 0.05 - 1), rel=1e-12)
    rate_bit = mle_solve(np.array([10.0] * 4), 70.0)
    assert got["no_dates"] == pytest.approx(abs(rate_bit / 0.05 - 1), rel=1e-12)
    # eq. 15 at that root, computed here: sum over changed tau/(e^{rate tau} - 1) = unchanged time
    assert 4 * 10.0 / np.expm1(rate_bit * 10.0) == pytest.approx(70.0, rel=1e-6)


def test_pages_fetched_too_rarely_are_left_out():
    truth, log = _world(0.05, [0.0, 10.0, 20.0], [5.0])
    assert de.reference_errors(truth, log) == {"dates": None, "no_dates": None}

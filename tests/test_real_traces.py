"""The real-trace benchmark's world and its clairvoyant bound (benchmarks/real_traces.py)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import real_traces as rt  # noqa: E402
from policy import run_baseline  # noqa: E402

DAY = 86400.0


@dataclass(frozen=True)
class Page:
    page: str
    host: str
    kind: str
    changes: np.ndarray


def _world(per_page_day: float = 0.5, seed: int = 4) -> rt.World:
    rng = np.random.default_rng(seed)
    pages = []
    for h in range(3):
        for i in range(6):
            gaps = rng.exponential(DAY / (1 + 3 * i), 2000)
            times = 1.6e9 + h * 1e7 + np.cumsum(gaps)
            pages.append(Page(f"r{h}:{i}", f"r{h}", "scraped", times[times < 1.6e9 + h * 1e7 + 90 * DAY]))
    return rt.World(pages, per_page_day)


def test_each_host_replays_its_last_window_from_zero():
    world = _world()
    assert world.n == 18 and world.hosts == 3
    span = rt.WINDOW_DAYS * DAY
    for h in range(3):
        mine = [c for c, host in zip(world.changes, world.host, strict=True) if host == h]
        last = max(c.max() for c in mine if c.size)
        assert last == pytest.approx(span - 1.0)  # the window ends 1 s after the last change
        assert all(c.min() >= 0.0 for c in mine if c.size)
    assert world.budget == pytest.approx(0.5 * 18 / DAY)
    assert world.hosts / world.host_delay == pytest.approx(rt.HOST_SHARE * world.budget)


def test_clairvoyant_bound_by_hand():
    """One page, changes at 25, 30 and 38 days of a 60-day window scored from day 20: the copy is
    fresh 20-25 for free; with budget for one fetch in the window, the best fetch follows the
    change at 38 (fresh to the end: 22 days)."""
    page = Page("p", "h", "document", np.array([25.0, 30.0, 38.0]) * DAY + 1e9)
    world = rt.World([page], per_page_day=1.0 / 40.0 + 1e-9)
    shift = page.changes[-1] + 1.0 - rt.WINDOW_DAYS * DAY
    gaps = np.diff(np.append(page.changes - shift, world.t_end))
    free = page.changes[0] - shift - world.t_start
    assert rt.clairvoyant(world) == pytest.approx((free + gaps.max()) / (world.t_end - world.t_start))


@pytest.mark.parametrize("per_page_day", [0.2, 2.0])
def test_clairvoyant_bound_is_above_every_baseline(per_page_day):
    world = _world(per_page_day)
    bound = rt.clairvoyant(world)
    for name in rt.BASELINES:
        scored = rt.score(world, run_baseline(world, name))
        assert scored["freshness"] <= bound + 1e-12, name
        assert scored["violations"] == 0, name
        assert scored["spent_of_allowed"] <= 1.0 + 1e-9, name


def test_oracle_all_fetches_the_pages_that_did_not_change():
    """The plain oracle never fetches a page without changes in the window (rate 0);
    oracle_all counts it as changing once, so it gets a fetch and stays fresh."""
    world = _world()
    world.changes[0] = np.array([])
    world.rates[0] = 0.0
    plain = run_baseline(world, "oracle")
    every = rt.every_page_changes(world)
    assert every.rates[0] == pytest.approx(1 / (rt.WINDOW_DAYS * DAY))
    assert np.array_equal(every.rates[1:], world.rates[1:])
    assert plain[0].size == 0
    assert run_baseline(every, "oracle")[0].size >= 1
    assert world.rates[0] == 0.0, "the world itself is left alone"

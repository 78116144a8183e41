"""A living-web test-bed: loopback HTTP hosts whose pages change with known truth.

The demo and the tests run a crawler against it and score freshness against
the exact ground truth::

    from frontier_rate.testbed import Testbed, weighted_freshness

    with Testbed(n_pages=200, n_hosts=4, acceleration=3600) as tb:
        print(tb.seed_urls())          # crawl these
        ...
        t_end = tb.sim_time()
        score = weighted_freshness(tb.truth(), tb.requests(), 0.2 * t_end, t_end)

Modules: ``changes`` (rates and change models), ``site`` (layout and
documents), ``server`` (``Testbed``, HTTP), ``freshness`` (scoring and
replayed schedules), ``cli`` (``python -m frontier_rate.testbed``), ``demo`` (the ``frontier-rate
demo`` command) and ``demo_signals``. An optional part: may import every layer except the CLI;
nothing but the CLI imports it.
"""

from frontier_rate.testbed.changes import CHANGE_MODELS, DAY, RATE_DISTRIBUTIONS, ChangeProcess, draw_rates
from frontier_rate.testbed.cli import main
from frontier_rate.testbed.freshness import (
    freshness_by_page,
    page_freshness,
    periodic_schedule,
    replay_policy,
    uniform_schedule,
    weighted_freshness,
)
from frontier_rate.testbed.server import SIM_EPOCH, Testbed
from frontier_rate.testbed.site import PRIVATE_PATH

__all__ = [
    "CHANGE_MODELS",
    "DAY",
    "PRIVATE_PATH",
    "RATE_DISTRIBUTIONS",
    "SIM_EPOCH",
    "ChangeProcess",
    "Testbed",
    "draw_rates",
    "freshness_by_page",
    "main",
    "page_freshness",
    "periodic_schedule",
    "replay_policy",
    "uniform_schedule",
    "weighted_freshness",
]

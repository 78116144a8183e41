"""When to fetch: the Whittle index / Lagrangian revisit policy (seeds 001 and 002).

A page i changes as a Poisson process of rate λ_i and has weight w_i. Fetching
it every t = 1/f captures T̄_i(f) = f·w_i·(1 − e^{−λ_i/f}) value per unit time
(seed 001). With y = λ_i·t the marginal value of fetching more often is

    ∂T̄_i/∂f = w_i·F(y),   F(y) = 1 − (1 + y)·e^{−y}          (``index_curve``)

and the same function is the continuous-time limit of seed 002's Whittle index
(docs/MATH.md, seeds 001-002). So one threshold ν does everything: page i is due once its index
w_i·F(λ_i·age) reaches ν, i.e. after t_i = y(ν/w_i)/λ_i (``optimal_y``), and ν
is the Lagrange multiplier that makes the fetch rates Σ 1/t_i meet the budget.

Two objectives share this machinery through an *effective weight*:

- ``"changes"``: value of the changes captured (seed 001), weight w.
- ``"freshness"``: time-averaged freshness Σ w·(1 − e^{−λt})/(λt); the same
  problem with w replaced by w/λ (docs/MATH.md, seeds 001-002).

Solvers the frontier runs: ``solve_threshold`` (2-D (weight, rate) cells with
interval bounds and host caps: the engine's re-solve) and ``solve_with_host_caps``
(per page, a multiplier per host: the demo's oracle). The reference solvers that
tests and benchmarks compare them with (seed 001's exact solver and clusters, Azar
et al.'s Poisson optimum) are in ``frontier_rate.math.reference.solvers``.

numpy only: the engine imports this module at run time. The policy lives in two modules,
re-exported here under one name: ``frontier_rate.math.index`` (the per-page index and
intervals) and ``frontier_rate.math.budget`` (ν from the budget, cells, host caps).
"""

from frontier_rate.math.budget import (  # noqa: F401 (re-exported: the policy under one name)
    SOLVE_RTOL,
    HostCapSolution,
    ThresholdSolution,
    _bin,
    cell_of,
    cell_rates,
    cells_from_pages,
    host_threshold,
    solve_threshold,
    solve_with_host_caps,
)
from frontier_rate.math.index import (  # noqa: F401 (re-exported; the _names for tests of the series)
    _F_COEF,
    _F_TERMS,
    EXPLORE_C,
    EXPLORE_CHANGES,
    INTERVAL_FLOOR_SPAN,
    MIN_CHANGE_CHANCE,
    N_CELLS,
    N_RATE_BINS,
    N_WEIGHT_BINS,
    NEWTON_STEPS,
    NEWTON_TOL,
    OBJECTIVES,
    RATE_BINS_PER_DECADE,
    RATE_LOG10_MAX,
    RATE_LOG10_MIN,
    SERIES_TERMS,
    SMALL_C,
    TINY_S,
    WEIGHT_BINS_PER_DECADE,
    WEIGHT_LOG10_MAX,
    WEIGHT_LOG10_MIN,
    WORTH_Y,
    _index_curve,
    _series,
    effective_weight,
    explore_rate,
    frequency_for_threshold,
    index_curve,
    interval_for_threshold,
    objective_value,
    optimal_y,
    page_index,
    source_max_interval,
    source_min_interval,
    whittle_index,
    worth_interval,
)

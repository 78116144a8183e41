"""The engine's (weight, rate) cells: the id of a page's cell (``cell_of``, as lua/lib_policy.lua
``lib.cell_of`` computes it) and the dense cell table of a set of pages (``cells_from_pages``),
which ``frontier_rate.math.budget.solve_threshold`` solves over. numpy only.
"""

from __future__ import annotations

import math

import numpy as np

from frontier_rate.math.index import (
    N_CELLS,
    N_RATE_BINS,
    N_WEIGHT_BINS,
    RATE_BINS_PER_DECADE,
    RATE_LOG10_MIN,
    WEIGHT_BINS_PER_DECADE,
    WEIGHT_LOG10_MIN,
    _same_length,
    _scalar,
    _vector,
)


def cell_of(weight: float, rate: float) -> int:
    """The (weight, rate) cell of a page: wbin·N_RATE_BINS + rbin.

    wbin = floor((log10(w) − WEIGHT_LOG10_MIN)·WEIGHT_BINS_PER_DECADE) clamped
    to [0, N_WEIGHT_BINS − 1] (0 when w <= 0); rbin likewise from the rate with
    RATE_LOG10_MIN, RATE_BINS_PER_DECADE and N_RATE_BINS. Weight bins are finer
    because a cell straddling the margin w = ν dominates the approximation
    error. Uses the C library's log10 (``math.log10``), as Lua's ``math.log10``
    does, so both compute the same id. Store the id with the page so that it is
    removed from the same cell it was added to.
    """
    w = _scalar("weight", weight)
    lam = _scalar("rate", rate)
    wbin = _bin(w, WEIGHT_LOG10_MIN, WEIGHT_BINS_PER_DECADE, N_WEIGHT_BINS)
    return wbin * N_RATE_BINS + _bin(lam, RATE_LOG10_MIN, RATE_BINS_PER_DECADE, N_RATE_BINS)


def _bin(x: float, log10_min: float, per_decade: int, n_bins: int) -> int:
    if x <= 0:
        return 0
    b = math.floor((math.log10(x) - log10_min) * per_decade)
    return min(n_bins - 1, max(0, b))


def cells_from_pages(weights, rates) -> np.ndarray:
    """Accumulate pages into the dense cell table: shape (N_CELLS, 3), columns (n, Σλ, Σw)."""
    w = _vector("weights", weights)
    lam = _vector("rates", rates)
    _same_length(weights=w, rates=lam)
    ids = np.array([cell_of(a, b) for a, b in zip(w, lam, strict=True)], dtype=np.int64)
    cells = np.zeros((N_CELLS, 3))
    np.add.at(cells, (ids, 0), 1.0)
    np.add.at(cells, (ids, 1), lam)
    np.add.at(cells, (ids, 2), w)
    return cells

"""How benchmark scripts run: one embedded Redis per run, and tasks over worker processes."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from frontier_rate.store import connection


@contextmanager
def embedded_redis(url: str | None, name: str) -> Iterator[None]:
    """Without a Redis ``url``: one embedded server for the whole run, in a fresh temporary
    directory (``FRONTIER_RATE_DATA_DIR``), started here so that forked workers join it and
    shut down when the block ends (workers exit without running their clean-up)."""
    if url is not None:
        yield
        return
    os.environ["FRONTIER_RATE_DATA_DIR"] = tempfile.mkdtemp(prefix=f"frontier-rate-{name}-")
    keeper = connection.connect(None)
    try:
        yield
    finally:
        keeper.shutdown(nosave=True)


def pool_map(fn: Callable[[Any], Any], tasks: list, jobs: int) -> list:
    """``fn`` over ``tasks``: in ``jobs`` forked worker processes (results in the order they
    finish), or in this process when ``jobs`` <= 1."""
    if jobs <= 1:
        return [fn(t) for t in tasks]
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        return list(pool.imap_unordered(fn, tasks))

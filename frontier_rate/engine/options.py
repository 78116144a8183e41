"""``FrontierOptions``: what a ``Frontier`` is opened with, one frozen object.

Adapters build it from their settings (``crawl/settings.py``), tools and tests pass keywords
(``Frontier(url, budget=2.0)`` replaces those fields of the defaults); either way every value
is checked by ``check`` before Redis is reached. The shared settings (``budget`` ...
``prior_rate``) are what this process asks for (None: the namespace's stored value, or the
default of a namespace it creates).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from frontier_rate.engine.validation import Options, check_options, real
from frontier_rate.math.index import MIN_CHANGE_CHANCE
from frontier_rate.store.connection import SOCKET_TIMEOUT


@dataclass(frozen=True)
class FrontierOptions:
    """The options of ``Frontier`` (docs/ENGINE.md; the class docstring says each one)."""

    namespace: str = "default"
    estimator: str = "interval"
    policy: str = "whittle"
    objective: str = "freshness"
    budget: float | None = None
    min_host_delay: float | None = None
    min_interval: float | None = None
    max_interval: float | None = None
    lease_timeout: float | None = None
    prior_rate: float | None = None
    clock: Callable[[], float] = time.time
    seed: int | None = None
    redis_timeout: float = SOCKET_TIMEOUT
    fill_budget: bool | None = None
    change_dates: bool = True
    server_clock_rate: float = 1.0
    budget_first_fetches: bool = False
    override_settings: bool = False
    clock_sync: bool | None = None
    cochange: bool = False
    group_prior: bool = False
    min_change_chance: float = MIN_CHANGE_CHANCE

    def replace(self, **changes: Any) -> FrontierOptions:
        """These options with ``changes``; a TypeError names an unknown option."""
        unknown = sorted(set(changes) - FIELDS)
        if unknown:
            raise TypeError(f"unknown Frontier option(s) {', '.join(unknown)}; the options are "
                            f"{', '.join(sorted(FIELDS))}")
        return dataclasses.replace(self, **changes) if changes else self

    def check(self) -> tuple[Options, dict[str, float | None]]:
        """The process's own checked ``Options`` and the shared settings asked for; a
        ValueError names the first bad option (nothing is sent to Redis)."""
        real("redis_timeout", self.redis_timeout, minimum=0.0, strict=True)
        values = {name: getattr(self, name) for name in FIELDS if name != "redis_timeout"}
        return check_options(**values)


FIELDS = frozenset(field.name for field in dataclasses.fields(FrontierOptions))

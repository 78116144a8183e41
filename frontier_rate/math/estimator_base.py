"""The interface every change-rate estimator has (``update``, ``estimate``, ``count``,
``to_state`` / ``from_state``) and the checks of stored state; the estimators themselves are in
``frontier_rate.math.estimators``. numpy only.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from frontier_rate.math.updates import _changed, _non_negative, _positive, _real


def _state_value(field: str, kind: str, value: Any) -> Any:
    """Check one state field. Kinds: "int" (integer ≥ 0), "float" (finite),
    "positive" (finite > 0), "non_negative" (finite ≥ 0), "intervals" (list
    of finite floats > 0)."""
    if kind == "int":
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise ValueError(f"state field {field!r} must be an integer, got {value!r}")
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(f"state field {field!r} must be an integer, got {value!r}")
        if value < 0:
            raise ValueError(f"state field {field!r} must be >= 0, got {value!r}")
        return int(value)
    if kind == "intervals":
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"state field {field!r} must be a list, got {type(value).__name__}")
        return [_positive(f"state field {field!r} item", v) for v in value]
    label = f"state field {field!r}"
    if kind == "positive":
        return _positive(label, value)
    if kind == "non_negative":
        return _non_negative(label, value)
    value = _real(label, value)
    if math.isinf(value):
        raise ValueError(f"{label} must be finite, got {value!r}")
    return value


class Estimator:
    """Base class: one page's change-rate estimate, updated once per fetch.

    Constructor keywords use seed 004's names: ``p`` (Poisson crawl rate,
    default 1.0), ``x0`` (estimate before any update, default 1.0), and per
    class ``alpha``, ``eta``, ``beta``, ``omega``, ``prior_info``,
    ``max_step``. Keywords a class does not use are ignored, so one dict of
    parameters fits every estimator.
    """

    name: ClassVar[str] = ""
    needs_interval: ClassVar[bool] = False
    uses_change_time: ClassVar[bool] = False
    _since_change: float = math.nan
    state_fields: ClassVar[Mapping[str, str]] = {}

    def __init__(self, *, p: float = 1.0, x0: float = 1.0, **_unused: Any) -> None:
        self.p = _positive("p", p)
        self.x0 = _non_negative("x0", x0)
        self._count = 0

    @property
    def count(self) -> int:
        """Number of updates k so far."""
        return self._count

    @property
    def estimate(self) -> float:
        """The current estimate of Δ (``x0`` before any update)."""
        return self.x0 if self._count == 0 else float(self._estimate())

    def update(self, changed: Any, interval: float | None = None, p: float | None = None, *,
               since_change: float | None = None) -> float:
        """Record one fetch and return the new estimate.

        ``changed``: did the page change since the previous fetch (0/1/bool).
        ``interval``: realised time since the previous fetch (required by
        MLE, MM and Interval). ``p``: the Poisson crawl rate that produced
        this observation (default: the constructor's ``p``).
        ``since_change``: for a change whose time is known (Last-Modified),
        the time from it to this fetch, in [0, interval); only estimators
        with ``uses_change_time`` learn from it, the others see the bit.
        """
        changed = _changed(changed)
        if interval is not None:
            interval = _positive("interval", interval)
        elif self.needs_interval:
            raise ValueError(f"interval is required by the {self.name!r} estimator")
        p = self.p if p is None else _positive("p", p)
        if since_change is not None:
            since_change = _non_negative("since_change", since_change)
            if not changed:
                raise ValueError(f"since_change={since_change!r} given for a fetch without a change")
            if interval is not None and since_change >= interval:
                raise ValueError(f"since_change={since_change!r} is not shorter than the interval "
                                 f"{interval!r}: the change came before the previous fetch")
        self._since_change = math.nan if since_change is None else since_change
        self._observe(changed, interval, p)
        self._count += 1
        return self.estimate

    def to_state(self) -> dict[str, Any]:
        """The dynamic state as JSON-safe numbers (parameters are not included)."""
        return {"count": self._count, **self._get_state()}

    @classmethod
    def from_state(cls, state: Mapping[str, Any], **params: Any) -> Estimator:
        """Rebuild an estimator from :meth:`to_state` output and its parameters."""
        if not isinstance(state, Mapping):
            raise ValueError(f"state must be a mapping, got {type(state).__name__}")
        fields = {"count": "int", **cls.state_fields}
        unknown = sorted(set(state) - set(fields))
        if unknown:
            raise ValueError(f"unknown state field {unknown[0]!r} for {cls.name!r}")
        values = {}
        for field, kind in fields.items():
            if field not in state:
                raise ValueError(f"missing state field {field!r} for {cls.name!r}")
            values[field] = _state_value(field, kind, state[field])
        est = cls(**params)
        est._count = values.pop("count")
        est._set_state(values)
        return est

    def __repr__(self) -> str:
        return f"{type(self).__name__}(count={self._count}, estimate={self.estimate!r})"

    # Subclass hooks --------------------------------------------------------

    def _observe(self, changed: int, interval: float | None, p: float) -> None:
        raise NotImplementedError

    def _estimate(self) -> float:
        raise NotImplementedError

    def _get_state(self) -> dict[str, Any]:
        raise NotImplementedError

    def _set_state(self, values: dict[str, Any]) -> None:
        raise NotImplementedError

    def _trajectory(self, changed: np.ndarray, intervals: np.ndarray | None,
                    p: np.ndarray) -> np.ndarray:
        """Estimates after every observation; rows are runs. Default: repeated updates."""
        out = np.empty(changed.shape)
        params = self._params()
        for run in range(changed.shape[0]):
            est = type(self)(**params)
            for k in range(changed.shape[1]):
                tau = None if intervals is None else float(intervals[run, k])
                est._observe(int(changed[run, k]), tau, float(p[run, k]))
                est._count += 1
                out[run, k] = est.estimate
        return out

    def _params(self) -> dict[str, Any]:
        return {"p": self.p, "x0": self.x0}


def _check_consistent(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(f"inconsistent state: {message}")

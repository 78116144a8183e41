"""The ``FRONTIER_RATE_*`` settings and request-meta rules both crawler adapters share.

The Scrapy scheduler and the Frontera backend read the same settings and
store request meta the same way; this module is the one place that parses
them, so the two adapters cannot drift apart.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

WEIGHT_KEY = "frontier_rate_weight"
"""Request meta key for a page's importance w_i (default 1.0)."""
DONT_REVISIT_KEY = "dont_revisit"
"""Request meta key: fetch once as an ordinary request, never revisit."""
REDIS_RETRY_FIRST = 1.0
REDIS_RETRY_MAX = 30.0
"""Seconds between an adapter's attempts to reach Redis while it is down: 1, 2, 4 ... at most 30."""

def flag(value: Any) -> bool:
    """A boolean setting: a bool, 0/1, or true/false/yes/no/on/off in any case."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {value!r}")


FRONTIER_SETTINGS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "namespace": ("FRONTIER_RATE_NAMESPACE", str),
    "estimator": ("FRONTIER_RATE_ESTIMATOR", str),
    "policy": ("FRONTIER_RATE_POLICY", str),
    "objective": ("FRONTIER_RATE_OBJECTIVE", str),
    "budget": ("FRONTIER_RATE_BUDGET", float),
    "min_host_delay": ("FRONTIER_RATE_MIN_HOST_DELAY", float),
    "min_interval": ("FRONTIER_RATE_MIN_INTERVAL", float),
    "max_interval": ("FRONTIER_RATE_MAX_INTERVAL", float),
    "lease_timeout": ("FRONTIER_RATE_LEASE_TIMEOUT", float),
    "prior_rate": ("FRONTIER_RATE_PRIOR_RATE", float),
    "redis_timeout": ("FRONTIER_RATE_REDIS_TIMEOUT", float),
    "fill_budget": ("FRONTIER_RATE_FILL_BUDGET", flag),
    "change_dates": ("FRONTIER_RATE_CHANGE_DATES", flag),
    "server_clock_rate": ("FRONTIER_RATE_SERVER_CLOCK_RATE", float),
}
"""``Frontier`` keyword -> (setting name, type)."""


def frontier_kwargs(get: Callable[[str], Any]) -> dict[str, Any]:
    """``Frontier`` keywords from the settings that are set (``get`` reads one setting).

    ``DOWNLOAD_DELAY`` serves as the minimum host delay when
    ``FRONTIER_RATE_MIN_HOST_DELAY`` is not set. A value of the wrong type is
    a ValueError naming the setting.
    """
    kwargs: dict[str, Any] = {}
    for argument, (name, kind) in FRONTIER_SETTINGS.items():
        value = get(name)
        if value is None or value == "":
            continue
        try:
            kwargs[argument] = kind(value)
        except (TypeError, ValueError):
            raise ValueError(f"{name}={value!r} is not a valid {kind.__name__}") from None
    if "min_host_delay" not in kwargs:
        delay = get("DOWNLOAD_DELAY")
        try:
            delay = float(delay) if delay not in (None, "") else 0.0
        except (TypeError, ValueError):
            raise ValueError(f"DOWNLOAD_DELAY={delay!r} is not a valid float") from None
        if delay > 0:
            kwargs["min_host_delay"] = delay
    return kwargs


def strip_patterns(value: Any) -> list[str]:
    """FRONTIER_RATE_STRIP_PATTERNS: a list of regexes, a JSON list, or one regex."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        if not value.strip().startswith("["):
            return [value]
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ValueError(f"FRONTIER_RATE_STRIP_PATTERNS={value!r} is not a JSON list: {exc}") from None
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"FRONTIER_RATE_STRIP_PATTERNS must be a list of regexes, got {value!r}")
    return [str(pattern) for pattern in value]


def close_after(value: Any) -> tuple[float | None, bool]:
    """FRONTIER_RATE_CLOSE_AFTER: (seconds of running or None, close once idle)."""
    if value is None or value == "" or value == 0:
        return None, False
    if isinstance(value, str) and value.strip().lower() == "idle":
        return None, True
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if not 0 < seconds < math.inf:
        raise ValueError(f"FRONTIER_RATE_CLOSE_AFTER={value!r} must be a positive number of seconds or 'idle'")
    return seconds, False


def json_value(value: Any, what: str) -> Any:
    """``value`` if JSON carries it unchanged, else ValueError naming ``what``."""
    try:
        if json.loads(json.dumps(value, allow_nan=False)) != value:
            raise TypeError("it does not survive a JSON round trip unchanged")
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{what} is not JSON-serialisable ({type(value).__name__}: {exc}); frontier-rate "
            "stores request meta as JSON in Redis (never pickle). Store an id or a plain "
            f"value instead, or set meta[{DONT_REVISIT_KEY!r}]=True for a one-off request."
        ) from None
    return value


def page_weight(value: Any, url: str) -> float:
    """A page's weight from request meta ``frontier_rate_weight``: a positive finite number."""
    try:
        weight = float(value)
    except (TypeError, ValueError):
        weight = math.nan
    if not 0 < weight < math.inf:
        raise ValueError(f"request meta[{WEIGHT_KEY!r}]={value!r} of {url} must be a positive number")
    return weight

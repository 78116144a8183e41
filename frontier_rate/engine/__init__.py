"""The engine: the ``Frontier`` facade over its collaborators (intake, leases, results, threshold, signals,
inspection). Knows no crawler framework; may import ``store`` and ``math``.

The facade's public names (``frontier.__all__``, listed again here and checked equal by
tests/test_layers.py) are imported on first use (PEP 562): importing one engine module
(``validation``, ``records``) does not import the whole engine."""

from __future__ import annotations

from typing import Any

from frontier_rate.renamed import current

__all__ = ["Lease", "Frontier", "FrontierError", "FrontierOptions", "NamespaceLost",
           "Observation", "RedisFault",
           "RedisPermissionDenied", "RedisRefused", "RedisUnavailable", "SettingsMismatch",
           "UnknownNamespace", "parse_url"]


RENAMED = {"Dispatch": "Lease"}
"""Retired names still importable (issue 61): old -> new (``frontier_rate.renamed``)."""


def __getattr__(name: str) -> Any:
    name = current(__name__, name, RENAMED)
    if name in __all__:
        import frontier_rate.engine.frontier as frontier

        return getattr(frontier, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

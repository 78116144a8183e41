"""frontier-rate: a revisit scheduler for web crawlers.

Estimates each page's change rate online from what every fetch reveals,
turns the estimates into revisit priorities with the Whittle index /
Lagrangian policy, and keeps the frontier in Redis.

The names below are imported on first use (PEP 562), so that a process that needs one
module (the detection process) does not import the engine's facade, Redis or Scrapy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from frontier_rate.renamed import current

__version__ = "0.1.0"

__all__ = ["Frontier", "Lease", "Observation", "__version__"]

if TYPE_CHECKING:
    from frontier_rate.engine.frontier import Frontier as Frontier
    from frontier_rate.engine.frontier import Lease as Lease
    from frontier_rate.engine.frontier import Observation as Observation


RENAMED = {"Dispatch": "Lease"}
"""Retired names still importable (issue 61): old -> new (``frontier_rate.renamed``)."""


def __getattr__(name: str) -> Any:
    name = current(__name__, name, RENAMED)
    if name in __all__:
        import frontier_rate.engine.frontier as frontier

        return getattr(frontier, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

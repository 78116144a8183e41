"""frontier-rate: a revisit scheduler for web crawlers.

Estimates each page's change rate online from what every fetch reveals,
turns the estimates into revisit priorities with the Whittle index /
Lagrangian policy, and keeps the frontier in Redis.
"""

__version__ = "0.1.0"

from frontier_rate.engine.frontier import Dispatch, Frontier, Lease, Observation  # noqa: E402

__all__ = ["Dispatch", "Frontier", "Lease", "Observation", "__version__"]

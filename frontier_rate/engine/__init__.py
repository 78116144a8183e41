"""The engine: the ``Frontier`` facade over its collaborators (intake, leases, results, threshold, signals,
inspection). Knows no crawler framework; may import ``store`` and ``math``."""

from frontier_rate.engine.frontier import *  # noqa: F403 (the facade's public names, as before the split)
from frontier_rate.engine.frontier import __all__  # noqa: F401

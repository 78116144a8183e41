"""Reference math: what only tests and benchmarks use, kept apart from what the engine runs.

- ``solvers``: seed 001's exact solver, its clusters, dual and golden-section search;
  Azar et al.'s Poisson optimum (baselines and checks of ``frontier_rate.math.policy``);
- ``survival``: revisit planning from a survival curve (non-Poisson pages; benchmarks).

No module of the running frontier imports this package.
"""

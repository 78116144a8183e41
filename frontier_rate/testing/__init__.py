"""What only the tests and the benchmarks use: reference math kept out of the running frontier.

- ``solvers``: seed 001's exact solver, its clusters, dual and golden-section search; Azar et
  al.'s Poisson optimum (baselines, and checks of ``frontier_rate.math.index`` / ``math.budget``);
- ``survival``: revisit planning from a survival curve (non-Poisson pages; benchmarks/nonpoisson.py);
- ``population``: the censored gamma fit of a crawl's change rates (needs scipy).

No runtime module imports this package (an import-linter contract in setup.cfg says so), and it
may need the test extra (``pip install -e '.[test]'``: scipy); the runtime package imports with
the base install alone (tests/test_base_install.py checks both).
"""

"""pytest plugin: run Scrapy's own test suite with frontier-rate as the default scheduler.

Loaded by ``contract/scrapy_suite.py`` (``-p scrapy_plugin``) into a copy of the
``tests/`` folder of Scrapy's sdist. It changes nothing in Scrapy's tests; it
changes what Scrapy's defaults say:

- ``SCHEDULER`` is ``ContractScheduler``: ``frontier_rate.scrapy.Scheduler``
  with one fresh Redis namespace per scheduler, so two crawls of one test never
  share their pages (as two runs of Scrapy's in-memory scheduler never do); with
  ``JOBDIR`` set, the namespace is named by it, so a scheduler reopened on the
  same job directory finds its pages (as Scrapy's disk queues do).
  ``scrapy.core.scheduler.Scheduler`` names it too, so the tests that build
  "the" scheduler themselves (tests/test_scheduler.py) build ours.
- ``FRONTIER_RATE_CLOSE_AFTER = "idle"``: a test's crawl ends when nothing is due
  (frontier-rate's one-shot mode; its default is to revisit forever).
- The embedded Redis lives in a temporary data directory of this run.

Everything else is frontier-rate's own defaults.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import tempfile

import scrapy.core.scheduler
import scrapy.settings.default_settings as defaults

from frontier_rate.scrapy.scheduler import Scheduler

_namespaces = itertools.count(1)


class ContractScheduler(Scheduler):
    """frontier-rate's scheduler with a namespace of its own (see the module docstring)."""

    def open(self, spider):  # type: ignore[no-untyped-def]
        jobdir = self.crawler.settings.get("JOBDIR")
        if jobdir:  # a persistent job: a scheduler reopened on it finds its pages again
            name = hashlib.sha256(str(jobdir).encode()).hexdigest()[:16]
        else:
            name = f"{os.getpid()}-{next(_namespaces)}"
        self.settings.frontier["namespace"] = f"contract-{name}"
        return super().open(spider)


def pytest_configure(config) -> None:  # type: ignore[no-untyped-def]
    os.environ.setdefault("FRONTIER_RATE_DATA_DIR", tempfile.mkdtemp(prefix="fr-contract-"))
    defaults.SCHEDULER = f"{__name__}.ContractScheduler"
    defaults.FRONTIER_RATE_CLOSE_AFTER = "idle"
    scrapy.core.scheduler.Scheduler = ContractScheduler

"""pytest hooks for ``contract/frontera_suite.py``'s run (copied in as ``tests/conftest.py``).

Writes one JSON line per event to ``FRONTERA_SUITE_REPORT``: every collected
test, every setup/call/teardown report and every module that failed or was
skipped at collection, so the suite can tell passed, failed, skipped and never
run apart without parsing pytest's output. Also checks that the frontera under
test is the installed package, not a copy in the run directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import frontera
import pytest

_REPORT = os.environ["FRONTERA_SUITE_REPORT"]


def _write(**event: Any) -> None:
    with open(_REPORT, "a", encoding="utf-8") as out:
        out.write(json.dumps(event) + "\n")


def _text(longrepr: Any) -> str:
    if longrepr is None:
        return ""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, line, reason)
        return str(longrepr[2])
    return str(longrepr)[-3000:]


def pytest_configure(config: pytest.Config) -> None:
    here = Path(__file__).resolve().parent.parent
    assert here not in Path(frontera.__file__).resolve().parents, frontera.__file__


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        _write(event="collected", nodeid=item.nodeid)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.outcome != "passed":
        _write(event="collect", nodeid=report.nodeid, outcome=report.outcome,
               text=_text(report.longrepr))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _write(event="report", nodeid=report.nodeid, when=report.when, outcome=report.outcome,
           xfail=hasattr(report, "wasxfail"),
           text=_text(report.longrepr) if report.outcome != "passed" else "")

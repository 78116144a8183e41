"""The runtime package imports with the base install alone (``pip install .``, no extras).

Every module of ``frontier_rate`` but ``frontier_rate.testing`` (what only tests and benchmarks
use) is imported in a fresh interpreter whose import system refuses every top-level package that
is installed here (the test extra) but not brought by the base install (setup.cfg
``install_requires`` and what those require): scipy, pytest, hypothesis, matplotlib and the other
extras are refused by name. ``frontier_rate.frontera`` also gets the ``frontera`` extra, which it
documents as its own requirement (docs/FRONTERA.md).
"""

from __future__ import annotations

import importlib.metadata as metadata
import json
import re
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "frontier_rate"
TEST_ONLY = "frontier_rate.testing"
FRONTERA = "frontier_rate.frontera"

IMPORT_ALL = r"""
import importlib, importlib.abc, json, sys, traceback
refused, modules = set(json.loads(sys.argv[1])), json.loads(sys.argv[2])


class RefuseExtras(importlib.abc.MetaPathFinder):
    '''Refuses a top-level package the base install does not bring, naming it.'''

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] not in refused:
            return None
        raise ImportError(f"{name!r} is not in the base install (refused by tests/test_base_install.py)")


sys.meta_path.insert(0, RefuseExtras())
failed = {}
for module in modules:
    try:
        importlib.import_module(module)
    except Exception:
        failed[module] = traceback.format_exc(limit=-3)
print(json.dumps(failed))
"""


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _distributions(requirements: list[str], extras: set[str]) -> set[str]:
    """The distributions ``requirements`` bring, transitively (markers evaluated for ``extras``)."""
    seen: set[str] = set()
    todo = list(requirements)
    while todo:
        req = Requirement(todo.pop())
        if req.marker and not any(req.marker.evaluate({"extra": e}) for e in extras | {""}):
            continue
        name = _normal(req.name)
        if name in seen:
            continue
        seen.add(name)
        try:
            todo.extend(metadata.distribution(req.name).requires or [])
        except metadata.PackageNotFoundError:
            pass  # an optional platform dependency not installed here: nothing imports it
    return seen


def _refused_tops(extras: set[str]) -> list[str]:
    """Top-level import names installed here that the base install (plus ``extras``) does not bring."""
    dists = _distributions(metadata.distribution("frontier-rate").requires or [], extras)
    return sorted(top for top, owners in metadata.packages_distributions().items()
                  if top != "frontier_rate" and not any(_normal(owner) in dists for owner in owners))


def _runtime_modules() -> list[str]:
    """Every module of the package, ``frontier_rate.testing`` and ``__main__`` scripts left out."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        name = ".".join(parts)
        if parts[-1] == "__main__" or name == TEST_ONLY or name.startswith(TEST_ONLY + "."):
            continue
        names.append(name)
    return names


def _import_refusing_extras(modules: list[str], extras: set[str]) -> dict[str, str]:
    done = subprocess.run([sys.executable, "-c", IMPORT_ALL, json.dumps(_refused_tops(extras)), json.dumps(modules)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_refused_names_are_the_test_only_ones():
    """The finder refuses the test extra and not the base install (else the check is empty or wrong)."""
    refused = set(_refused_tops(set()))
    assert {"scipy", "pytest", "hypothesis", "matplotlib", "frontera"} <= refused
    assert not {"numpy", "redis", "scrapy", "twisted", "click", "frontier_rate"} & refused
    assert "frontera" not in _refused_tops({"frontera"})


def test_runtime_modules_import_with_the_base_install_alone():
    modules = [m for m in _runtime_modules() if not (m == FRONTERA or m.startswith(FRONTERA + "."))]
    assert "frontier_rate.engine.frontier" in modules and len(modules) > 80
    failed = _import_refusing_extras(modules, set())
    assert not failed, "\n".join(f"{m}:\n{tb}" for m, tb in failed.items())


def test_frontera_adapter_imports_with_its_own_extra_alone():
    modules = [m for m in _runtime_modules() if m == FRONTERA or m.startswith(FRONTERA + ".")]
    assert modules
    failed = _import_refusing_extras(modules, {"frontera"})
    assert not failed, "\n".join(f"{m}:\n{tb}" for m, tb in failed.items())

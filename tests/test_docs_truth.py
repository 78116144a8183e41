"""Docs that stay true (issue 61): docs/ARCHITECTURE.md's module list is drawn from the tree,
and every path a docstring or a doc cites exists. No Redis.

``python tests/test_docs_truth.py`` rewrites the module list from the tree (each module's
path and the first sentence of its docstring)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "frontier_rate"
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
BEGIN, END = "<!-- modules: begin (tests/test_docs_truth.py) -->", "<!-- modules: end -->"
SHARED = ROOT.parent / "shared"
"""Where the design brief lives beside the repository (``../shared/DESIGN.md``, as in CI)."""
CITED = re.compile(r"(?<![\w/.-])((?:\.\./shared/)?(?:[\w-]+/)*[\w-]+\.(?:md|py|lua))(?![\w/])")
"""A cited path: a doc (``X.md``, with or without folders) or a file given with its folder."""


def first_sentence(path: Path) -> str:
    """The first sentence of a module's docstring, on one line."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    text = " ".join(doc.split("\n\n")[0].split())
    match = re.search(r"^.*?\.(?=\s|$)", text)
    return (match.group(0) if match else text).rstrip(".").replace("``", "`")


def module_list() -> str:
    """The module list as the tree draws it: one line per module, grouped by folder."""
    lines, folder = [], None
    for path in sorted(PACKAGE.rglob("*.py"), key=lambda p: (p.parent.relative_to(PACKAGE).parts, p.name)):
        if "__pycache__" in path.parts:
            continue
        relative = path.relative_to(PACKAGE)
        here = str(relative.parent) if relative.parent.parts else "frontier_rate"
        if here != folder:
            lines += ["", f"**{here}/**" if here != "frontier_rate" else "**frontier_rate/**", ""]
            folder = here
        lines.append(f"- `{relative}`: {first_sentence(path) or '(no docstring)'}")
    return "\n".join(lines[1:])


def documented_section() -> str:
    text = ARCHITECTURE.read_text()
    return text[text.index(BEGIN) + len(BEGIN):text.index(END)].strip("\n")


def test_architecture_names_every_module_and_every_module_it_names_exists() -> None:
    section = documented_section()
    named = set(re.findall(r"^- `([\w/]+\.py)`", section, re.M))
    modules = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
               if "__pycache__" not in p.parts}
    assert modules - named == set(), "modules missing from docs/ARCHITECTURE.md"
    assert named - modules == set(), "docs/ARCHITECTURE.md names modules that do not exist"
    assert section == module_list(), "run: python tests/test_docs_truth.py"


def test_the_layer_table_names_only_modules_of_its_folders() -> None:
    """A module named (in backticks) in a folder's row of the layer table is in that folder."""
    text = ARCHITECTURE.read_text()
    table = text[text.index("| folder | job |"):text.index(BEGIN)]
    rows = re.findall(r"^\| `(\w+)/` [^|]*\| (.*) \|$", table, re.M)
    assert len(rows) >= 8
    for folder, job in rows:
        for name, slash in re.findall(r"`([a-z_]+)(/?)`", job):
            found = (PACKAGE / folder / name).is_dir() or (PACKAGE / name).is_dir() if slash \
                else (PACKAGE / folder / f"{name}.py").exists()
            assert found, f"{folder}/ row names {name + slash!r}"


def resolves(cited: str, where: Path) -> bool:
    """Whether a path cited in ``where`` exists: from the repository, the package, the citing
    file's folder, docs/ (a doc named alone), or beside the repository (``../shared/``)."""
    if cited.startswith("../shared/"):
        return (SHARED / cited[len("../shared/"):]).exists() or not SHARED.exists()
    bases = [ROOT, PACKAGE, where.parent, ROOT / "docs"]
    return any((base / cited).exists() for base in bases)


def citations(path: Path) -> list[str]:
    """The paths ``path`` cites (a Python file: in its docstrings and comments too)."""
    found = []
    for match in CITED.finditer(path.read_text()):
        cited = match.group(1)
        if "/" in cited or cited.endswith(".md"):
            found.append(cited)
    return found


def test_every_cited_path_resolves() -> None:
    sources = [*PACKAGE.rglob("*.py"), *(ROOT / "benchmarks").glob("*.py"),
               *(ROOT / "docs").rglob("*.md"), ROOT / "README.md"]
    missing = sorted({f"{path.relative_to(ROOT)}: {cited}" for path in sources
                      for cited in citations(path) if not resolves(cited, path)})
    assert missing == []


def test_a_missing_citation_and_a_missing_module_are_seen(tmp_path: Path) -> None:
    doc = tmp_path / "x.py"
    doc.write_text('"""See DESIGN.md section 5 and docs/NOWHERE.md; docs/SCRAPY.md is fine."""\n')
    assert [c for c in citations(doc) if not resolves(c, doc)] == ["DESIGN.md", "docs/NOWHERE.md"]
    assert "- `crawl/setting_table.py`: " in module_list()


if __name__ == "__main__":
    text = ARCHITECTURE.read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    ARCHITECTURE.write_text(text[:start] + "\n" + module_list() + "\n" + text[end:])
    sys.exit(0)

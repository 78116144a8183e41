"""Where benchmark scripts write their numbers: one JSON file per benchmark
under docs/benchmarks/, one marked section per benchmark in docs/BENCHMARKS.md,
plots under docs/img/. Nothing in docs/ is typed by hand."""

from __future__ import annotations

import json
import platform
import re
import time
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"
IMG = DOCS / "img"
BENCHMARKS_MD = DOCS / "BENCHMARKS.md"

_HEADER = """# Benchmarks

Every number on this page is written by a script in `benchmarks/`; re-run the
script to refresh its section (`--quick` runs small sizes, as CI does, and
writes nothing unless `--write` is given). Headline numbers are also in
`docs/benchmarks/<name>.json`.
"""


def machine() -> str:
    import os

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, "
            f"load average {load:.1f} when written")


def write_json(name: str, data: dict) -> Path:
    path = DOCS / "benchmarks" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {**data, "generated": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": machine()}
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return path


def read_json(name: str) -> dict:
    """What :func:`write_json` wrote for ``name`` (for a script's ``--from-json``)."""
    return json.loads((DOCS / "benchmarks" / f"{name}.json").read_text())


def write_section(name: str, markdown: str) -> Path:
    """Replace (or append) the section of ``name`` in docs/BENCHMARKS.md."""
    begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    text = BENCHMARKS_MD.read_text() if BENCHMARKS_MD.exists() else _HEADER
    block = f"{begin}\n{markdown.strip()}\n{end}"
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    BENCHMARKS_MD.write_text(text)
    return BENCHMARKS_MD


def table(headers: list[str], rows: list[list]) -> str:
    """A GitHub markdown table; floats with 4 significant digits."""
    def cell(v):
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(out)

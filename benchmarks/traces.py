"""Load the real change histories of ``benchmarks/data/real_traces.json.gz``.

    python benchmarks/traces.py          # prints a summary of the data file
    python benchmarks/traces.py --quick  # the same (the benchmarks' CI convention)

See ``benchmarks/make_real_traces.py`` for what a page, a change and a host are
and how the file is made.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DEFAULT_PATH = Path(__file__).resolve().parent / "data" / "real_traces.json.gz"


@dataclass(frozen=True)
class Trace:
    """One page: its name, host (the repository), kind and change times (unix seconds)."""

    page: str
    host: str
    kind: str
    changes: np.ndarray


def load_traces(path: Path = DEFAULT_PATH) -> list[Trace]:
    """Every page of the data file, change times decoded from their deltas."""
    with gzip.open(path, "rt") as fh:
        data = json.load(fh)
    if data.get("format") != 1:
        raise ValueError(f"{path}: unknown format {data.get('format')!r}")
    return [Trace(p["page"], p["host"], p["kind"], np.cumsum(np.asarray(p["changes"], dtype=float)))
            for p in data["pages"]]


def gap_cv(changes: np.ndarray) -> float:
    """Coefficient of variation of the gaps between changes (1 for a Poisson process)."""
    gaps = np.diff(changes)
    return float(gaps.std() / gaps.mean()) if gaps.size > 1 and gaps.mean() > 0 else float("nan")


def summary(traces: list[Trace]) -> dict:
    """Pages, hosts, change times, pages per kind, and the spread of per-page gap CVs."""
    cv = np.array([gap_cv(t.changes) for t in traces])
    cv = cv[np.isfinite(cv)]
    kinds: dict[str, int] = {}
    for t in traces:
        kinds[t.kind] = kinds.get(t.kind, 0) + 1
    return {"pages": len(traces), "hosts": len({t.host for t in traces}),
            "changes": int(sum(len(t.changes) for t in traces)), "kinds": kinds,
            "gap_cv_min": float(cv.min()), "gap_cv_median": float(np.median(cv)),
            "gap_cv_max": float(cv.max())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the same summary")
    parser.parse_args(argv)
    s = summary(load_traces())
    print(f"{s['pages']} pages, {s['hosts']} hosts, {s['changes']} change times; kinds {s['kinds']}; "
          f"gap CV min {s['gap_cv_min']:.2f}, median {s['gap_cv_median']:.2f}, "
          f"max {s['gap_cv_max']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

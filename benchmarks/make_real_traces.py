"""Regenerate ``benchmarks/data/real_traces.json.gz`` from public git histories.

    python benchmarks/make_real_traces.py --mirrors DIR [--out benchmarks/data/real_traces.json.gz]

A *page* is one file of a repository; its *changes* are the committer times
(unix seconds) of the first-parent commits that touched it (``git log
--first-parent``: a merged branch counts once, when it lands, as a crawler of
the published page would see it); a *host* is the repository. ``DIR`` holds
one git directory per repository, ``DIR/<owner>+<name>/repo`` (bare clones,
e.g. ``git clone --mirror https://github.com/<owner>/<name> DIR/<owner>+<name>/repo``).
The commit each repository was read at is recorded in the file's ``sources``.

``SOURCES`` below says which files of which repository are pages, and of what
kind: ``scraped`` (a scraper commits the page it fetched whenever it changed:
these are web-page change histories), ``document`` (edited by people) or
``release`` (release manifests and schedules). Only the history's committer
times are kept, never file contents.

Output: gzip of one JSON object ``{"format": 1, "generated_by", "sources",
"pages": [{"page": "owner/name:path", "host", "kind", "changes": [t0, d1,
...]}]}``, ``changes`` delta-encoded (first absolute, then differences,
ascending, duplicates dropped). Written deterministically (sorted, fixed gzip
mtime).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parent / "data" / "real_traces.json.gz"

# repository, kind, files (a regular expression on the path), fewest changes a page needs
SOURCES: list[tuple[str, str, str, int]] = [
    ("simonw/pge-outages", "scraped", r"outages\.json", 100),
    ("simonw/ca-fires-history", "scraped", r"incidents.*\.json", 100),
    ("simonw/cdc-vaccination-history", "scraped", r"(counties|states)\.json", 100),
    ("alex/nyt-2020-election-scraper", "scraped",
     r"(battleground-state-changes|all-state-changes)\.txt|results\.json|notification-updates\.json", 100),
    ("simonw/scrape-hacker-news-by-domain", "scraped", r"[a-z-]+\.json", 100),
    ("datasets/covid-19", "scraped", r"data/[a-z_-]+\.csv", 500),
    ("simonw/help-scraper", "scraped", r"(?!\.github/)[^ ]+\.(txt|graphql)", 40),
    ("docker-library/official-images", "release", r"library/[a-z0-9-]+", 100),
    ("endoflife-date/endoflife.date", "release", r"products/[a-z0-9-]+\.md|_data/release-data", 60),
    ("nodejs/Release", "release", r"README\.md|schedule\.json", 30),
    ("whatwg/html", "document", r"source", 100),
    ("python/peps", "document", r"(peps/)?pep-\d+\.(txt|rst)", 100),
    ("tldr-pages/tldr", "document",
     r"(README|MAINTAINERS|CONTRIBUTING)\.md|contributing-guides/style-guide\.md", 50),
]


def first_parent_changes(git_dir: Path) -> tuple[str, dict[str, list[int]]]:
    """(head commit, path -> sorted unique committer times of the first-parent commits
    that touched it) of one repository."""
    head = subprocess.run(["git", "--git-dir", str(git_dir), "rev-parse", "HEAD"],
                          check=True, capture_output=True, text=True).stdout.strip()
    log = subprocess.run(["git", "--git-dir", str(git_dir), "log", "--first-parent",
                          "--no-renames", "--format=@%ct", "--name-only", head],
                         check=True, capture_output=True, text=True).stdout
    changes: dict[str, set[int]] = defaultdict(set)
    when = None
    for line in log.splitlines():
        if line.startswith("@"):
            when = int(line[1:])
        elif line and when is not None:
            changes[line].add(when)
    return head, {path: sorted(times) for path, times in changes.items()}


def delta_encode(times: list[int]) -> list[int]:
    return [times[0]] + [b - a for a, b in zip(times, times[1:], strict=False)] if times else []


def build(mirrors: Path, sources: list[tuple[str, str, str, int]] = SOURCES) -> dict:
    """The data file's object from the git directories under ``mirrors``."""
    pages, used = [], []
    for repo, kind, pattern, fewest in sources:
        git_dir = mirrors / repo.replace("/", "+") / "repo"
        if not git_dir.exists():
            raise SystemExit(f"make_real_traces: no git directory for {repo} at {git_dir}")
        head, changes = first_parent_changes(git_dir)
        rule = re.compile(pattern)
        chosen = sorted(p for p, t in changes.items() if rule.fullmatch(p) and len(t) >= fewest)
        used.append({"repo": repo, "head": head, "kind": kind, "paths": chosen})
        for path in chosen:
            pages.append({"page": f"{repo}:{path}", "host": repo, "kind": kind,
                          "changes": delta_encode(changes[path])})
    return {"format": 1, "generated_by": "benchmarks/make_real_traces.py", "sources": used,
            "pages": pages}


def write(data: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, separators=(",", ":"), sort_keys=True).encode()
    with open(out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz:
        gz.write(text)


def options(argv: list[str] | None, doc: str, default_out: Path) -> argparse.Namespace:
    """The options of every ``make_*.py`` data script: ``--mirrors``, ``--out``, ``--quick``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--mirrors", type=Path, help="directory of <owner>+<name>/repo git dirs")
    parser.add_argument("--out", type=Path, default=default_out)
    parser.add_argument("--quick", action="store_true",
                        help="check the committed file against this script's table; write nothing")
    return parser.parse_args(argv)


def check_committed(script: str, path: Path, fields: tuple[str, ...], table: list[tuple]) -> int:
    """``--quick``: the committed data file at ``path`` lists the script's sources (their
    ``fields``), in the order of its ``table``; a file made from another table is an error."""
    with gzip.open(path, "rt") as fh:
        data = json.load(fh)
    listed = [tuple(s[f] for f in fields) for s in data["sources"]]
    if listed != table:
        raise SystemExit(f"{script}: the data file's sources {listed} are not the script's "
                         f"table {table}: regenerate it")
    print(f"{path.name}: {len(data['pages'])} pages from {len(listed)} repositories "
          "match the table (regenerate with --mirrors DIR)")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = options(argv, __doc__, DEFAULT_OUT)
    if args.quick or args.mirrors is None:
        return check_committed("make_real_traces", DEFAULT_OUT, ("repo", "kind"),
                               [(repo, kind) for repo, kind, _, _ in SOURCES])
    data = build(args.mirrors)
    write(data, args.out)
    total = sum(len(p["changes"]) for p in data["pages"])
    print(f"wrote {args.out}: {len(data['pages'])} pages, {total} change times, "
          f"{len(data['sources'])} repositories")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Regenerate ``benchmarks/data/web_like.json.gz`` from public document-tracking histories.

    python benchmarks/make_web_like.py --mirrors DIR [--out benchmarks/data/web_like.json.gz]
    python benchmarks/make_web_like.py --quick      # check the committed file against the table

The pages are terms of service, privacy policies, community guidelines and similar documents
of hundreds of web services, as the Open Terms Archive project records them: its crawler
fetches every tracked document about twice a day and commits a new *version* of the
document's text whenever it changed (repositories ``OpenTermsArchive/<collection>-versions``,
one folder per service, one file per document). A *page* is one document file, its *host*
the service (the folder), its *changes* the author times (unix seconds, the time of the
snapshot the version was recorded from) of the commits that recorded a new version of it:
subjects ``Record new changes of ...`` and ``Update ...``. Commits that re-extract the text
under new rules (``Refilter``, ``Apply technical or declaration upgrade``) are not changes of
the page, and the first record (``Start tracking``, ``First record``) is when tracking began.

``DIR`` holds one git directory per repository, ``DIR/<owner>+<name>/repo`` (bare clones).
Only commit times and file paths are kept, never file contents.

Output: gzip of one JSON object ``{"format": 1, "generated_by", "sources", "pages":
[{"page": "owner/name:path", "host", "kind", "first": t, "changes": [t0, d1, ...]}]}``:
``first`` is when tracking began, ``changes`` delta-encoded (first absolute, then
differences, ascending, duplicates dropped), ``kind`` "document". Every page of a source
is kept that was tracked from before the source's window (its last ``WINDOW_DAYS`` days)
and is still present at the commit read. Written deterministically.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_real_traces import (  # noqa: E402 (one data-file format for both)
    check_committed,
    delta_encode,
    options,
    write,
)

DEFAULT_OUT = Path(__file__).resolve().parent / "data" / "web_like.json.gz"
DAY = 86400
WINDOW_DAYS = 180
"""Each source's last WINDOW_DAYS days are what ``benchmarks/web_like.py`` replays."""

SOURCES: list[str] = [
    "OpenTermsArchive/contrib-versions",
    "OpenTermsArchive/france-versions",
    "OpenTermsArchive/pga-versions",
    "OpenTermsArchive/dating-versions",
    "OpenTermsArchive/vlopses-us-versions",
]
CHANGE = re.compile(r"(Record new changes of|Update) ")
START = re.compile(r"(Start tracking|First record of) ")
DOCUMENT = re.compile(r"[^/]+/[^/]+\.(md|html|pdf)")


def histories(git_dir: Path) -> tuple[str, int, dict[str, int], dict[str, list[int]], set[str]]:
    """(head commit, its time, path -> first time seen, path -> change times, paths at head)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "--git-dir", str(git_dir), *args], check=True,
                              capture_output=True, text=True).stdout

    head = git("rev-parse", "HEAD").strip()
    head_time = int(git("log", "-1", "--format=%at", head).strip())
    log = git("log", "--no-renames", "--format=@%at %s", "--name-only", head)
    first: dict[str, int] = {}
    changes: dict[str, set[int]] = defaultdict(set)
    when, subject = None, ""
    for line in log.splitlines():
        if line.startswith("@"):
            stamp, _, subject = line[1:].partition(" ")
            when = int(stamp)
        elif line and when is not None:
            first[line] = min(first.get(line, when), when)
            if CHANGE.match(subject) and not START.match(subject):
                changes[line].add(when)
    present = set(git("ls-tree", "-r", "--name-only", head).splitlines())
    return head, head_time, first, {p: sorted(t) for p, t in changes.items()}, present


def build(mirrors: Path, sources: list[str] = SOURCES) -> dict:
    """The data file's object from the git directories under ``mirrors``."""
    pages, used = [], []
    for repo in sources:
        git_dir = mirrors / repo.replace("/", "+") / "repo"
        if not git_dir.exists():
            raise SystemExit(f"make_web_like: no git directory for {repo} at {git_dir}")
        head, head_time, first, changes, present = histories(git_dir)
        start = head_time - WINDOW_DAYS * DAY
        chosen = sorted(p for p in present if DOCUMENT.fullmatch(p) and first.get(p, head_time) < start)
        used.append({"repo": repo, "head": head, "head_time": head_time, "pages": len(chosen)})
        for path in chosen:
            times = [t for t in changes.get(path, []) if t > first[path]]
            pages.append({"page": f"{repo}:{path}", "host": f"{repo.split('/')[1]}:{path.split('/')[0]}",
                          "kind": "document", "first": first[path], "changes": delta_encode(times)})
    return {"format": 1, "generated_by": "benchmarks/make_web_like.py", "window_days": WINDOW_DAYS,
            "sources": used, "pages": pages}


def main(argv: list[str] | None = None) -> int:
    args = options(argv, __doc__, DEFAULT_OUT)
    if args.quick or args.mirrors is None:
        return check_committed("make_web_like", DEFAULT_OUT, ("repo",), [(repo,) for repo in SOURCES])
    data = build(args.mirrors)
    write(data, args.out)
    total = sum(len(p["changes"]) for p in data["pages"])
    print(f"wrote {args.out}: {len(data['pages'])} pages of "
          f"{len({p['host'] for p in data['pages']})} hosts, {total} change times, "
          f"{len(data['sources'])} repositories")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Regenerate ``benchmarks/data/docs_sites.json.gz``: the pages of real web sites built from git.

    python benchmarks/make_docs_sites.py --mirrors DIR [--out benchmarks/data/docs_sites.json.gz]
    python benchmarks/make_docs_sites.py --quick      # check the committed file against the table

A second real population for issue 62, from another source than ``make_web_like.py``'s
Open Terms Archive: documentation sites and a blog whose pages are built from one source
file each, kept in a public git repository (``SOURCES``: the repository, the site it
publishes, which files are pages). A *page* is one such file, its *host* the site, its
*changes* the committer times of the first-parent commits that touched it after it was
added (``make_real_traces.first_parent_changes``: a merged pull request counts once, when it
lands and the site is rebuilt). Commits that touch many pages at once (a translation sync, a
renamed option, a new release's notes and links) are kept: they are the co-change a crawler
of these sites meets. A change of a source file is taken as a change of its page; a crawler
with frontier-rate's detection would miss the few that change no visible text.

Every page is kept that existed before its source's window (its last ``WINDOW_DAYS`` days,
ending at the commit read) and still exists there; ``first`` is when it was added, so a run
can also replay pages found during the window (``added``: pages added within the window,
with their times, kept apart).

``DIR`` holds one git directory per repository, ``DIR/<owner>+<name>/repo`` (bare clones).
Only commit times and file paths are kept, never file contents. Output: gzip of one JSON
object in ``make_web_like.py``'s format (``{"format": 1, "generated_by", "window_days",
"sources", "pages": [{"page", "host", "kind", "first", "changes"}], "added": [...]}``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_real_traces import (  # noqa: E402
    check_committed,
    delta_encode,
    first_parent_changes,
    options,
    write,
)

DEFAULT_OUT = Path(__file__).resolve().parent / "data" / "docs_sites.json.gz"
DAY = 86400
WINDOW_DAYS = 180

# repository, the site it publishes (the pages' host), which files are pages
SOURCES: list[tuple[str, str, str]] = [
    ("python/peps", "peps.python.org", r"peps/pep-\d+\.rst"),
    ("fastapi/fastapi", "fastapi.tiangolo.com", r"docs/[a-z-]+/docs/.+\.md"),
    ("reactjs/react.dev", "react.dev", r"src/content/.+\.md"),
    ("vuejs/docs", "vuejs.org", r"src/.+\.md"),
    ("pydantic/pydantic", "docs.pydantic.dev", r"docs/.+\.md"),
    ("scrapy/scrapy", "docs.scrapy.org", r"docs/.+\.rst"),
    ("rust-lang/blog.rust-lang.org", "blog.rust-lang.org", r"content/.+\.md"),
]


def build(mirrors: Path, sources: list[tuple[str, str, str]] = SOURCES) -> dict:
    """The data file's object from the git directories under ``mirrors``."""
    pages, added, used = [], [], []
    for repo, host, pattern in sources:
        git_dir = mirrors / repo.replace("/", "+") / "repo"
        if not git_dir.exists():
            raise SystemExit(f"make_docs_sites: no git directory for {repo} at {git_dir}")
        head, changes = first_parent_changes(git_dir)
        head_time = int(subprocess.run(["git", "--git-dir", str(git_dir), "log", "-1", "--format=%ct", head],
                                       check=True, capture_output=True, text=True).stdout)
        present = set(subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "-r", "--name-only", head],
                                     check=True, capture_output=True, text=True).stdout.splitlines())
        start = head_time - WINDOW_DAYS * DAY
        rule = re.compile(pattern)
        chosen = sorted(p for p in present if rule.fullmatch(p) and p in changes)
        kept = 0
        for path in chosen:
            first, *times = changes[path]
            row = {"page": f"{repo}:{path}", "host": host, "kind": "document", "first": first,
                   "changes": delta_encode(times)}
            if first < start:
                pages.append(row)
                kept += 1
            else:
                added.append(row)
        used.append({"repo": repo, "host": host, "head": head, "head_time": head_time,
                     "pages": kept, "added": len(chosen) - kept})
    return {"format": 1, "generated_by": "benchmarks/make_docs_sites.py", "window_days": WINDOW_DAYS,
            "sources": used, "pages": pages, "added": added}


def main(argv: list[str] | None = None) -> int:
    args = options(argv, __doc__, DEFAULT_OUT)
    if args.quick or args.mirrors is None:
        return check_committed("make_docs_sites", DEFAULT_OUT, ("repo", "host"),
                               [(repo, host) for repo, host, _ in SOURCES])
    data = build(args.mirrors)
    write(data, args.out)
    total = sum(len(p["changes"]) for p in data["pages"])
    print(f"wrote {args.out}: {len(data['pages'])} pages of {len(data['sources'])} sites, "
          f"{total} change times, {len(data['added'])} pages added within the window")
    for s in data["sources"]:
        print(f"  {s['host']}: {s['pages']} pages, {s['added']} added")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The committed real change histories and the script that makes them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import make_real_traces as mk  # noqa: E402
import traces  # noqa: E402


def test_committed_data_file_is_large_varied_and_well_formed():
    loaded = traces.load_traces()
    s = traces.summary(loaded)
    assert s["pages"] >= 30 and s["changes"] >= 100_000 and s["hosts"] >= 10
    assert set(s["kinds"]) == {"scraped", "document", "release"}
    for t in loaded:
        assert t.changes.size >= 1 and np.all(np.diff(t.changes) > 0), t.page
        assert t.page.startswith(t.host + ":")
    assert s["gap_cv_min"] < 0.8 < 2.0 < s["gap_cv_max"], "clock-like and bursty pages both"
    assert mk.main(["--quick"]) == 0  # the file lists the script's sources, in order


def _git(repo: Path, *args: str, when: int | None = None) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.org")
    if when is not None:
        env["GIT_COMMITTER_DATE"] = env["GIT_AUTHOR_DATE"] = f"@{when} +0000"
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout


def test_changes_are_first_parent_commit_times(tmp_path):
    """main: page.txt at 1000 and 2000; a branch edits page.txt at 1500 and 1600 and is merged
    at 3000: first-parent history gives 1000, 2000, 3000 (the branch's own times are not seen)."""
    work = tmp_path / "work"
    work.mkdir()
    _git(work, "init", "-q", "-b", "main")

    def commit(text: str, when: int, name: str = "page.txt") -> None:
        (work / name).write_text(text)
        _git(work, "add", name)
        _git(work, "commit", "-q", "-m", text, when=when)

    commit("v1", 1000)
    _git(work, "checkout", "-q", "-b", "side")
    commit("v1 side", 1500)
    commit("v2 side", 1600)
    _git(work, "checkout", "-q", "main")
    commit("other", 2000, "other.txt")
    commit("v2", 2500, "page.txt")
    _git(work, "merge", "-q", "-X", "theirs", "--no-ff", "-m", "merge", "side", when=3000)
    mirrors = tmp_path / "mirrors"
    subprocess.run(["git", "clone", "-q", "--mirror", str(work), str(mirrors / "me+site" / "repo")],
                   check=True)
    data = mk.build(mirrors, [("me/site", "document", r"page\.txt", 1)])
    (page,) = data["pages"]
    assert page["page"] == "me/site:page.txt" and page["host"] == "me/site"
    assert page["changes"] == [1000, 1500, 500]  # 1000, 2500, 3000, delta-encoded
    assert data["sources"][0]["paths"] == ["page.txt"]
    out = tmp_path / "t.json.gz"
    mk.write(data, out)
    first = out.read_bytes()
    mk.write(data, out)
    assert out.read_bytes() == first  # deterministic
    (loaded,) = traces.load_traces(out)
    assert loaded.changes.tolist() == [1000.0, 2500.0, 3000.0]

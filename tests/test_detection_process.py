"""The ``"content"`` detector in a child process gives the same detections as the one in
this process, answer for answer (the child keeps each page's memory and each host's mask
between answers): the worker (``detection/detection_worker.py``) through its pipes, and
``DetectionProcess`` driving it from a Twisted reactor (in a subprocess: a reactor runs
once per process)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import redis

from frontier_rate.crawl.shared_pages import SharedPages
from frontier_rate.detection.detection_record import decode
from frontier_rate.detection.detection_worker import PIPE_BYTES, READY, frame, read_line
from frontier_rate.detection.fingerprint import Fingerprinter
from frontier_rate.detection.not_content import wall_like
from frontier_rate.engine.validation import parse_url
from frontier_rate.store.detection_memory import last_detection
from frontier_rate.store.keys import Keys

ROOT = Path(__file__).resolve().parents[1]


def _copies(rng: random.Random) -> list[tuple[str, bytes]]:
    """Seeded answers of four pages of two hosts: tokens, clocks and counters that change
    every time (no change), a story that changes now and then (a change), a shared
    footer (boilerplate), an empty answer (no copy) and a non-HTML body."""
    answers = []
    story = 0
    for fetch in range(12):
        if rng.random() < 0.3:
            story += 1
        token = "".join(rng.choice("0123456789abcdef") for _ in range(24))
        for host in ("a.test", "b.test"):
            for path in ("/news", "/terms"):
                body = (f'<html><head><title>{path}</title></head><body>'
                        f'<div class="n{token}"><p>Story {story if path == "/news" else 0} '
                        f'of {host}, told at some length.</p>'
                        f'<input type="hidden" name="csrf" value="{token}">'
                        f'<p>Generated 2026-11-29T10:{fetch:02d}:00Z</p>'
                        f'<p>{rng.randint(1, 999)} comments</p></div>'
                        f'<footer><p>Footer of {host}</p></footer></body></html>')
                answers.append((f"http://{host}{path}", body.encode()))
        if fetch == 5:
            answers.append(("http://a.test/news", b""))
    return answers


def _worker(answers: list[tuple[str, bytes, str]], max_body: int = 10 * 1024 * 1024,
            **extra: tuple[bool, int | None]) -> list:
    """Run the worker over ``(url, body, content type)`` answers; what it wrote, read."""
    config = json.dumps({"mode": "content", "strip_patterns": [], "max_body": max_body})
    data = b"".join(frame(body, url, ctype, *extra.get(url, (False, None)))
                    for url, body, ctype in answers)
    done = subprocess.run([sys.executable, "-m", "frontier_rate.detection.detection_worker",
                           config], input=data, capture_output=True, timeout=120,
                          check=True, cwd=ROOT)
    ready, *lines = done.stdout.splitlines(keepends=True)
    assert ready == READY
    return [read_line(line) for line in lines]


def test_the_worker_detects_what_this_process_does():
    answers = [(url, body, "text/html") for url, body in _copies(random.Random(36))]
    answers.append(("http://a.test/api", b'{"b": 1, "a": 2}', "application/json"))
    here = Fingerprinter("content")
    expected = [here.detect(body, url, {"Content-Type": ctype}) for url, body, ctype in answers]
    got = _worker(answers)
    assert [found.detection for found in got] == expected
    # the run holds the cases the equality is about: no change, a change, no copy
    fingerprints = {}
    seen = {"same": 0, "changed": 0, "no copy": 0}
    for (url, _, _), detection in zip(answers, expected[:-1], strict=False):
        if detection.fingerprint is None:
            seen["no copy"] += 1
            continue
        if url in fingerprints:
            seen["same" if fingerprints[url] == detection.fingerprint else "changed"] += 1
        fingerprints[url] = detection.fingerprint
    assert min(seen.values()) >= 1, seen
    assert got[-1][1] == here.stats()  # the child's counters, after the same answers


def test_a_truncated_answer_is_hashed_with_its_declared_length():
    here = Fingerprinter("content", [], 64)
    body = b"<p>" + b"x" * 200 + b"</p>"
    (got, *_), = _worker([("http://a.test/big", body[:64], "text/html")], max_body=64,
                        **{"http://a.test/big": (True, len(body))})
    assert got == here.detect(body[:64], "http://a.test/big", {"Content-Type": "text/html"},
                              truncated=True, full_length=len(body))
    assert got != here.detect(body[:64], "http://a.test/big2", {"Content-Type": "text/html"},
                              truncated=True, full_length=len(body) + 1)


def test_the_worker_says_which_copies_read_like_a_bot_wall():
    """Whether an answer reads like a bot wall (its validators are then not kept) is worked
    out in the child, so the crawl's event loop never parses the body again; the same
    verdict as ``not_content.wall_like`` here, for a short page, a wall taken as its copy,
    a long page and an answer that is no copy."""
    page = (b"<html><body><p>Open Monday to Friday from nine to five, closed on public "
            b"holidays. Call us to book a visit.</p></body></html>")
    wall = (b"<html><head><title>Just a moment...</title></head><body><h1>Checking your "
            b"browser</h1><p>Are you a robot? Please complete the captcha.</p></body></html>")
    long_page = b"<html><body>" + b"<p>A paragraph of the page's own text.</p>" * 200 + \
        b"<p>captcha</p></body></html>"
    answers = [("http://a.test/hours", page, "text/html"),
               ("http://a.test/hours", wall, "text/html"),
               ("http://a.test/long", long_page, "text/html"),
               ("http://a.test/empty", b"", "text/html")]
    got = _worker(answers)
    assert [found.wall_like for found in got] == [False, True, False, False]
    assert [found.detection.fingerprint is not None for found in got] == [True, True, True, False]
    assert [wall_like(body, ctype) for _, body, ctype in answers] == [False, True, False, False]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="F_SETPIPE_SZ is Linux's")
def test_the_worker_widens_the_pipe_it_reads_so_a_large_page_passes_in_one_write():
    """A 64 KiB pipe made the crawl write a 250 KiB page in four or five pieces, each
    waiting for the child to read: the first crawl of real pages ran at 0.5x Scrapy's,
    0.70x with it widened (docs/CHANGE_DETECTION.md)."""
    import fcntl

    limit = int(Path("/proc/sys/fs/pipe-max-size").read_text())
    config = json.dumps({"mode": "content", "strip_patterns": [], "max_body": 1 << 20})
    child = subprocess.Popen([sys.executable, "-m", "frontier_rate.detection.detection_worker",
                              config], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
    try:
        assert child.stdout.readline() == READY
        size = fcntl.fcntl(child.stdin.fileno(), fcntl.F_GETPIPE_SZ)
    finally:
        child.stdin.close()
        child.wait(timeout=30)
    assert size >= min(PIPE_BYTES, limit) > 64 * 1024, (size, limit)


DRIVER = textwrap.dedent("""
    import json, logging, os, signal, sys
    from twisted.internet import reactor
    from frontier_rate.scrapy import detection_process
    from frontier_rate.scrapy.detection_process import DetectionProcess
    from frontier_rate.detection.fingerprint import Fingerprinter

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    answers = json.load(open(sys.argv[1]))
    kill_after = int(sys.argv[2])
    hang = sys.argv[3]
    if hang != "no":  # a child that never says READY (hung_worker.py, beside this script)
        detection_process.WORKER = "hung_worker"
        if hang == "deadline":
            detection_process.START_WAIT = 1.0
        else:  # "bytes:N"
            detection_process.START_BYTES = int(hang.split(":")[1])
    if "RESTART_FIRST" in os.environ:  # a new child after a death: how soon
        detection_process.RESTART_FIRST = float(os.environ["RESTART_FIRST"])
    child = DetectionProcess("content", [], 10 * 1024 * 1024)
    if len(sys.argv) > 4:  # the pages' memories shared in Redis (shared_pages.spec)
        child.share(sys.argv[4])
    here = Fingerprinter("content")
    argv = []
    got, expected, kinds, counters = [], [], [], []

    def values(detection):
        return [detection.fingerprint, detection.reason, detection.ignored,
                detection.changed_segments, detection.segments]

    def send(i):
        url, body = answers[i]
        expected.append(values(here.detect(body.encode(), url, {"Content-Type": "text/html"})))
        index = len(got)
        got.append(None)
        kinds.append("child")
        def done(found):
            got[index] = None if found is None else values(found[0])
            if found is not None:
                counters.append(found[1])
        submitted = child.submit(body.encode(), url, "text/html", truncated=False,
                                 full_length=None, done=done)
        if not argv and child.ready and child._worker.transport.pid:  # exec'd by now
            argv.append(open(f"/proc/{child._worker.transport.pid}/cmdline", "rb").read()
                        .decode(errors="replace"))
        if not submitted:
            got[index] = expected[index]  # detected here, as the adapter does
            kinds[index] = "stopped" if child.stopped else "starting"

    ready_at = {5, *(int(i) for i in os.environ.get("READY_AT", "").split(",") if i)}

    def step(i):
        if i in ready_at and not child.ready and not child.stopped:  # five while it starts
            reactor.callLater(0.05, step, i)  # (READY_AT: until a new child has started)
            return
        if i == kill_after and child._waiting and "DRAIN" in os.environ:
            reactor.callLater(0.05, step, i)  # every answer sent so far answered first
            return
        if i == kill_after:
            os.kill(child._worker.transport.pid, signal.SIGKILL)
            reactor.callLater(0.5, step, i + 1)  # the death is seen meanwhile
            return
        if i == len(answers):
            d = child.close()
            def report(_):
                if child._worker.transport.pid is not None:  # not reaped yet
                    reactor.callLater(0.1, report, None)
                    return
                pending = [c for c in reactor.getDelayedCalls() if c.active()]
                print(json.dumps({"got": got, "expected": expected, "kinds": kinds,
                                  "closed": d is not None, "stopped": child.stopped,
                                  "timers": len(pending), "argv": argv,
                                  "counters": counters}))
                reactor.stop()
            if d is None:
                reactor.callLater(0.5, report, None)
            else:
                d.addCallback(report)
            return
        send(i)
        reactor.callLater(0.01 if i % 3 else 0, step, i + 1)

    reactor.callWhenRunning(step, 0)
    reactor.run()
""")


def _drive(tmp_path: Path, answers: list[tuple[str, bytes]], kill_after: int,
           hang: str = "no", shared: str | None = None,
           restart_first: float | None = None, drain: bool = False,
           ready_at: int | None = None) -> tuple[dict, str]:
    (tmp_path / "answers.json").write_text(json.dumps(
        [(url, body.decode()) for url, body in answers]))
    (tmp_path / "driver.py").write_text(DRIVER)
    (tmp_path / "hung_worker.py").write_text("import time\ntime.sleep(120)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if restart_first is not None:
        env["RESTART_FIRST"] = str(restart_first)
    if drain:  # the kill waits until the child has answered all it was sent
        env["DRAIN"] = "1"
    if ready_at is not None:  # answer ``ready_at`` waits until a child is ready to take it
        env["READY_AT"] = str(ready_at)
    done = subprocess.run([sys.executable, str(tmp_path / "driver.py"),
                           str(tmp_path / "answers.json"), str(kill_after), hang,
                           *([shared] if shared is not None else [])],
                          capture_output=True, timeout=120, env=env, cwd=tmp_path, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


def test_the_process_answers_on_the_event_loop_in_order_and_exits_at_close(tmp_path):
    """The answers sent while the child starts are detected by the caller and still reach
    the child's memory: the child's later detections of the same pages are the caller's."""
    answers = _copies(random.Random(7))[:30]
    report, log = _drive(tmp_path, answers, kill_after=-1)
    assert report["got"] == report["expected"]
    assert report["kinds"][:5] == ["starting"] * 5
    assert report["kinds"][5:] == ["child"] * 25
    assert {url for url, _ in answers[:5]} <= {url for url, _ in answers[5:]}
    assert report["closed"] and report["stopped"]
    assert "detection process stopped" not in log  # a closed child is no warning


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_a_process_told_to_share_keeps_every_pages_memory_in_redis(tmp_path, redis_url,
                                                                  namespace):
    """``DetectionProcess.share``: the child is the shared worker, with the Redis URL in its
    environment and not in its argv; it detects as the unshared caller does, and writes
    each page's last copy to Redis (the caller here writes nothing: every key is the
    child's, the answers sent while it started included)."""
    answers = _copies(random.Random(9))[:30]
    spec = json.dumps({"url": redis_url, "namespace": namespace, "shards": 4, "ttl": 3600.0})
    report, log = _drive(tmp_path, answers, kill_after=-1, shared=spec)
    assert report["got"] == report["expected"]
    assert report["kinds"][5:] == ["child"] * 25
    [argv] = report["argv"]
    assert "shared_detection_worker" in argv and redis_url not in argv
    client = redis.Redis.from_url(redis_url)
    pages = SharedPages(client, namespace, 4, 3600.0)
    last = {url: fingerprint for (url, _), (fingerprint, *_) in
            zip(answers, report["expected"], strict=True) if fingerprint is not None}
    assert {url: pages.load(url).fingerprint for url in last} == last
    # and each page's last detection that parsed it, what ``inspect`` shows
    parsed = {url: fingerprint for (url, _), (fingerprint, *_, segments) in
              zip(answers, report["expected"], strict=True) if segments != -1}
    keys = Keys(namespace, 4)
    records = {url: decode(last_detection(client, keys, url, parse_url(url))) for url in parsed}
    assert {url: record["fingerprint"] for url, record in records.items()} == parsed
    assert all(record["segments"] >= 0 or record["not_content"] for record in records.values())
    assert "detection process stopped" not in log


def test_what_the_child_logs_reaches_the_crawls_log_at_its_level(tmp_path):
    """The shared worker with a Redis that never answers: the breaker's WARNING the child
    logs reaches the crawl's own logging (here the driver's ``basicConfig`` format, level
    and logger name included, password hidden), said to come from the detection process;
    the child lives and detects every answer. Before, it died at its start (it connected
    there), and what it logged went to stderr bare, outside Scrapy's ``LOG_FILE``."""
    answers = _copies(random.Random(3))[:12]
    url = f"redis://:s3cret-pw@127.0.0.1:{_free_port()}/0"
    spec = json.dumps({"url": url, "namespace": "relay", "shards": 4, "ttl": 3600.0})
    report, log = _drive(tmp_path, answers, kill_after=-1, shared=spec)
    assert report["got"] == report["expected"]
    relayed = [line for line in log.splitlines() if "(in the detection process)" in line]
    assert any(line.startswith("WARNING:frontier_rate.") and
               "shared detection memory cannot be read or written" in line
               for line in relayed), log[-3000:]
    assert "detection process stopped" not in log  # it started without Redis, and lived
    assert "s3cret-pw" not in log


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_a_child_that_died_answers_none_then_refuses_with_one_warning(tmp_path):
    """Killed after 10 answers (the 11th step is the kill): those it held get None (the
    adapter then detects them itself), the 9 later ones are refused (``submit`` False),
    and one WARNING says so."""
    answers = _copies(random.Random(8))[:20]
    report, log = _drive(tmp_path, answers, kill_after=10)
    got, expected, kinds = report["got"], report["expected"], report["kinds"]
    assert kinds[:10] == ["starting"] * 5 + ["child"] * 5
    assert all(answer in (None, want) for answer, want in zip(got[:10], expected, strict=False))
    assert got[10:] == expected[10:] and kinds[10:] == ["stopped"] * 9
    assert not report["closed"] and report["stopped"]
    assert log.count("the detection process stopped") == 1


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_a_child_that_died_is_replaced_by_a_new_one(tmp_path):
    """Killed after 10 answers, with no wait before a new child (``RESTART_FIRST`` 0): the
    next answer starts a new child, the answers sent while it starts are detected by the
    caller and reach it, and the last ones are the new child's again; none is lost (every
    answer detected once), one WARNING for the death and one INFO for the new child. The
    test above keeps the default wait (30 s) and sees no new child in its run."""
    answers = _copies(random.Random(8))[:38]
    answers[5:5] = [("http://b.test/news", b"")]  # not content, for the first child ...
    answers[35:35] = [("http://b.test/terms", b"")]  # ... and for the second
    # the second child takes the last five however slowly it starts (a loaded machine)
    report, log = _drive(tmp_path, answers, kill_after=10, restart_first=0.0, ready_at=35)
    got, expected, kinds = report["got"], report["expected"], report["kinds"]
    assert kinds[:10] == ["starting"] * 5 + ["child"] * 5
    after = kinds[10:]
    assert after[0] == "starting" and after[-5:] == ["child"] * 5, after
    assert after == sorted(after, key=["starting", "child"].index), after  # then the child
    assert all(answer is not None for answer in got[10:])
    assert [g for g, k in zip(got[10:], after, strict=True) if k == "starting"] == \
        [e for e, k in zip(expected[10:], after, strict=True) if k == "starting"]
    assert log.count("the detection process stopped") == 1
    assert "a new one starts in 0 s" in log
    # the counters the children report are the crawl's: the new child's go on from the
    # last the dead one reported, never from 0. Each empty answer is counted by the process
    # that detected it: the one at 5 by the first child, the one at 35 by the second.
    not_content = [c["not_content"] for c in report["counters"]]
    assert not_content == sorted(not_content), not_content
    sent = answers[:10] + answers[11:]  # the driver kills the child instead of sending 10
    by_children = sum(1 for (_, body), kind in zip(sent, kinds, strict=True)
                      if not body and kind == "child")
    assert kinds[5] == "child" and sum(1 for _, body in sent if not body) == 3
    assert not_content[-1] == by_children >= 2, (not_content, kinds)
    assert report["closed"] and report["stopped"] and report["timers"] == 0


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_answers_detected_by_the_caller_while_a_child_started_are_not_counted_again(tmp_path):
    """A child that answered the five answers sent while it started (the caller detected
    and counted those itself), then was killed before it took one: its counters are banked
    when a new child starts, but never the start-phase answers'. Each empty answer ("not
    content") is counted by exactly one process: the caller's count plus the children's
    last reported counter is the number of empty answers. Before, the children's counter
    carried the start-phase ones too, and the adapter only took them out at a child's first
    answer taken (``counted_twice``, gone), which this child never gave."""
    answers = _copies(random.Random(8))[:30]
    answers[1:1] = [("http://b.test/news", b"")]  # sent while the first child starts ...
    answers[3:3] = [("http://b.test/jobs", b"")]
    answers[25:25] = [("http://b.test/terms", b"")]  # ... and one the second child takes
    # the second child takes "terms" however slowly it starts (as on a loaded machine)
    report, log = _drive(tmp_path, answers, kill_after=5, restart_first=0.0, drain=True,
                         ready_at=25)
    got, kinds = report["got"], report["kinds"]
    assert kinds[:5] == ["starting"] * 5 and kinds[24] == "child"
    assert log.count("the detection process stopped") == 1
    sent = answers[:5] + answers[6:]  # the driver kills the child instead of sending 5
    empty = [i for i, (_, body) in enumerate(sent) if not body]
    by_caller = [i for i in empty if kinds[i] != "child" or got[i] is None]
    by_children = report["counters"][-1]["not_content"]
    assert 1 <= by_children and len(by_caller) + by_children == len(empty) >= 4, \
        (by_caller, by_children, empty)


@pytest.mark.parametrize("hang", ["deadline", "bytes"])
def test_a_child_that_never_says_ready_is_killed_and_the_crawl_detects_alone(tmp_path, hang):
    """A child hung at start (it never says READY) is given up after ``START_WAIT`` s, or
    once ``START_BYTES`` of answers wait for it: one WARNING, killed (the driver reports
    after the reactor reaped it), and every answer is detected in the caller's process,
    none lost. Fails without the deadline (the driver would wait for READY forever: the
    run's timeout) or the byte bound (the answers from the third on would be sent); no
    timer of the child is left on the reactor."""
    answers = _copies(random.Random(9))[:12]
    two_frames = sum(len(frame(body, url, "text/html", False, None)) for url, body in answers[:2])
    report, log = _drive(tmp_path, answers, kill_after=-1,
                         hang="deadline" if hang == "deadline" else f"bytes:{two_frames}")
    assert report["got"] == report["expected"]
    kinds = report["kinds"]
    if hang == "deadline":
        assert kinds[:5] == ["starting"] * 5 and kinds[5:] == ["stopped"] * 7
        assert "not ready after 1 s" in log
    else:  # the bound holds the first two frames exactly: the third passes it
        assert kinds[:2] == ["starting"] * 2 and kinds[2:] == ["stopped"] * 10
        assert f"not ready after {two_frames} bytes" in log
    assert log.count("the detection process stopped") == 1
    assert report["stopped"] and not report["closed"]
    assert report["timers"] == 0

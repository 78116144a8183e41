"""``DetectionProcess``: the ``"content"`` detector in a child process gives the same
detections as the one in this process, answer for answer (the child keeps each page's
memory and each host's mask between answers)."""

from __future__ import annotations

import logging
import os
import random
import signal
import sys
from pathlib import Path

import pytest

from frontier_rate.crawl.detection_process import DetectionProcess
from frontier_rate.crawl.fingerprint import Fingerprinter

sys.path.insert(0, str(Path(__file__).parent))
from scrapy_support.harness import spawned_children  # noqa: E402


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


def test_the_child_process_detects_what_this_process_does():
    answers = _copies(random.Random(36))
    here = Fingerprinter("content")
    expected = [here.detect(body, url, {"Content-Type": "text/html"}) for url, body in answers]
    expected.append(here.detect(b'{"b": 1, "a": 2}', "http://a.test/api",
                                {"Content-Type": "application/json"}))
    child = DetectionProcess("content", [], 10 * 1024 * 1024)
    try:
        futures = [child.submit(body, url, "text/html", truncated=False, full_length=None)
                   for url, body in answers]
        futures.append(child.submit(b'{"a": 2, "b": 1}', "http://a.test/api",
                                    "application/json", truncated=False, full_length=None))
        got = [future.result(timeout=60) for future in futures]
    finally:
        child.close()
    assert [detection for detection, _ in got] == expected
    # the run holds the cases the equality is about: no change, a change, no copy
    fingerprints = {}
    seen = {"same": 0, "changed": 0, "no copy": 0}
    for (url, _), detection in zip(answers, expected[:-1], strict=True):
        if detection.fingerprint is None:
            seen["no copy"] += 1
            continue
        if url in fingerprints:
            seen["same" if fingerprints[url] == detection.fingerprint else "changed"] += 1
        fingerprints[url] = detection.fingerprint
    assert min(seen.values()) >= 1, seen
    assert got[-1][1] == here.stats()  # the child's counters, after the same answers


def test_a_truncated_answer_is_hashed_with_its_declared_length():
    child = DetectionProcess("content", [], 64)
    here = Fingerprinter("content", [], 64)
    body = b"<p>" + b"x" * 200 + b"</p>"
    try:
        got, _ = child.submit(body[:64], "http://a.test/big", "text/html", truncated=True,
                              full_length=len(body)).result(timeout=60)
    finally:
        child.close()
    assert got == here.detect(body[:64], "http://a.test/big", {"Content-Type": "text/html"},
                              truncated=True, full_length=len(body))
    assert got != here.detect(body[:64], "http://a.test/big2", {"Content-Type": "text/html"},
                              truncated=True, full_length=len(body) + 1)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_a_child_that_died_gives_none_and_one_warning(caplog: pytest.LogCaptureFixture):
    """Killed: the futures it had fail, ``result`` gives None (the adapter then detects
    itself), ``submit`` gives None from then on, and one WARNING says so."""
    child = DetectionProcess("content", [], 1024)
    try:
        first = child.submit(b"<p>one</p>", "http://a.test/", "text/html", truncated=False,
                             full_length=None)
        assert first is not None and child.result(first) is not None
        (pid,) = spawned_children(os.getpid())
        os.kill(pid, signal.SIGKILL)
        with caplog.at_level(logging.WARNING, logger="frontier_rate"):
            later = child.submit(b"<p>two</p>", "http://a.test/", "text/html",
                                 truncated=False, full_length=None)
            if later is not None:  # taken before the pool saw the death
                later.exception(timeout=60)
                assert child.result(later) is None
            assert child.submit(b"<p>three</p>", "http://a.test/", "text/html",
                                truncated=False, full_length=None) is None
    finally:
        child.close()
    assert child.stopped
    assert caplog.text.count("the detection process stopped") == 1

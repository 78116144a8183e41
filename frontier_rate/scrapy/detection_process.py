"""Content detection in a child process, off the crawler's event loop (issue 36).

``Fingerprinter.detect`` in ``"content"`` mode is regular-expression work in Python:
~0.2 ms for a 1.5 KB page; on the real-HTML corpus (median first copy ~180 KiB) a median of
~1.8 ms of CPU per response and ~2.4 ms per first copy (docs/CHANGE_DETECTION.md). On the
event loop that is time the crawl neither fetches nor parses. ``DetectionProcess`` runs
one ``Fingerprinter`` in one child process, ``python -m
frontier_rate.detection.detection_worker``, started at the first answer. The event loop
writes each answer to the child's stdin and reads its detection from the child's stdout
through the reactor's own pipes (``reactor.spawnProcess``): no thread, no pickling, no
re-import of the crawl's main module. The one child holds every page's memory (the last
copy's segments) and every host's mask, as the in-process detector would, and answers in
the order it was sent, so the detections are the same, answer for answer. While it starts
(~0.2 s), the crawl detects answers itself and sends them to the child too, so that the
first answers wait for no import. A child that has not said it is ready after ``START_WAIT``
seconds, or before ``START_BYTES`` of answers wait for it, is killed and the crawl detects
everything itself: what waits for a child that hangs is bounded. A child that stopped
(killed, crashed, given up) is replaced by a new one at the first answer ``RESTART_FIRST``
seconds later, the wait doubling up to ``RESTART_MAX`` while children die young (issue 63:
after the soak killed one, the crawl detected on its event loop to its end, weeks in a
real deployment).

Measured in docs/BENCHMARKS.md ("Detection in a child process").
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.protocol import ProcessProtocol

from frontier_rate.crawl import scrapy_compat as compat
from frontier_rate.crawl.shared_pages import ENVIRONMENT
from frontier_rate.detection.content_rules import ContentRule
from frontier_rate.detection.detection_worker import READY, Found, frame, read_line

logger = logging.getLogger(__name__)

Done = Callable[["Found | None"], None]
"""Called on the event loop with an answer's ``Found``, or None: the child could not
detect it (it raised there, or the child stopped), so the caller detects it itself."""

STOP_WAIT = 5.0
"""Seconds a closed child gets to finish what it holds before it is killed."""
START_WAIT = 30.0
"""Seconds a child gets to say it is ready (it takes ~0.2 s) before it is killed."""
START_BYTES = 64 * 1024 * 1024
"""Bytes of answers sent to a child not ready yet beyond which it is killed: the pipe's
writer holds them in memory until the child reads."""
RESTART_FIRST = 30.0
"""Seconds after a child stopped before a new one starts (at the next answer)."""
RESTART_MAX = 3600.0
"""The longest wait for a new child: the wait doubles each time a child dies young."""
LIVED_LONG = 600.0
"""A child that lived this long died of something passing: the next wait is the first."""
WORKER = "frontier_rate.detection.detection_worker"
"""The module the child runs."""
SHARED_WORKER = "frontier_rate.crawl.shared_detection_worker"
"""... when the pages' memories are shared in Redis (``share``)."""

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
"""The folder holding ``frontier_rate``: on the child's path, wherever the crawl found it."""


class DetectionProcess:
    """``Fingerprinter(mode, strip_patterns, max_body).detect`` in one child process, on the
    event loop's pipes. Once the child has stopped (killed, crashed, not started),
    ``submit`` gives False and every answer it held gets None: the adapter detects in its
    own process, after one WARNING, until a new child starts (``RESTART_FIRST``)."""

    def __init__(self, mode: str, strip_patterns: list[str], max_body: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._config = json.dumps({"mode": mode, "strip_patterns": list(strip_patterns),
                                   "max_body": max_body})
        self._worker: _Worker | None = None
        self._waiting: deque[Done] = deque()
        self._ended: Deferred[None] | None = None
        self._kill_timer: Any = None
        self._start_timer: Any = None
        self._sent_starting = 0  # bytes sent before the child said READY
        self._shared: str | None = None  # shared_pages.spec, given to the child
        self.stopped = False
        self.closing = False
        self.ready = False  # the child has said READY
        self.clock = clock
        self.started_at: float | None = None  # when the running child was started
        self.restart_at: float | None = None  # when a new child may replace a stopped one
        self.restart_wait = 0.0  # the wait before the last new child (0: none yet)
        self._banked: dict[str, int] = {}  # the counters of the children replaced
        self._counts: dict[str, int] = {}  # the running child's last counters
        self._counted_by_caller: dict[str, int] = {}
        """What the children counted of the answers sent while they started: the caller
        detected (and counted) those itself, so they are left out of the counters given."""

    def share(self, spec: str) -> None:
        """The child keeps the pages' memories in Redis (``crawl/shared_pages.py``); before
        its start. ``spec`` goes in its environment, never its argv (it may hold a
        password)."""
        self._shared = spec

    def submit(self, body: bytes, url: str, content_type: str | None, *, truncated: bool,
               full_length: int | None, done: Done, rule: ContentRule | None = None) -> bool:
        """Send one 2xx answer; ``done`` gets its detection on the event loop. False (and
        ``done`` is never called) while the child starts and once it has stopped: the
        caller detects the answer itself. While it starts the answer is sent all the same,
        so that the child's memory holds every answer the caller's does. The answers of one
        page must be sent in the order they arrived (its memory is the last copy's)."""
        if self.stopped and not self.closing and self.restart_at is not None \
                and self.clock() >= self.restart_at:
            self._renew()
        if self.stopped or self.closing:
            return False
        if self._worker is None:
            self._start()
            if self.stopped:
                return False
        assert self._worker is not None and self._worker.transport is not None
        data = frame(bytes(body), url, content_type, truncated, full_length, rule)
        taken = self.ready
        if not taken:
            self._sent_starting += len(data)
            if self._sent_starting > START_BYTES:
                self._give_up(f"it was not ready after {START_BYTES} bytes of answers")
                return False
        self._waiting.append(done if taken else _ignore)
        self._worker.transport.write(data)
        return taken

    def _renew(self) -> None:
        """Forget the stopped child: the next answer starts a new one (and is detected by
        the caller while it starts, as at the crawl's first answer)."""
        stopped_at = (self.restart_at or 0.0) - self.restart_wait
        logger.info("frontier-rate: starting a new detection process (the last one "
                    "stopped %.0f s ago)", self.clock() - stopped_at)
        self._worker, self.stopped, self.ready = None, False, False
        self._sent_starting, self.restart_at = 0, None
        for name, value in self._counts.items():
            self._banked[name] = self._banked.get(name, 0) + value
        self._counts = {}

    def _start(self) -> None:
        self.started_at = self.clock()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [_PACKAGE_ROOT, *filter(None, [env.get("PYTHONPATH")])])
        module = WORKER
        if self._shared is not None:
            env[ENVIRONMENT], module = self._shared, SHARED_WORKER
        self._worker = _Worker(self)
        try:
            from twisted.internet import reactor

            reactor.spawnProcess(  # type: ignore[attr-defined]
                self._worker, sys.executable,
                [sys.executable, "-m", module, self._config],
                env=env, childFDs={0: "w", 1: "r", 2: "r"})
        except Exception as exc:  # no reactor, no fork: detect here
            self._stop(exc)
            return
        self._start_timer = compat.call_later(
            START_WAIT, self._give_up, f"it was not ready after {START_WAIT:g} s")

    def _give_up(self, reason: str) -> None:
        """The child never said READY: stop using it (one WARNING) and kill it."""
        self._end_start_wait()
        self._stop(reason)
        if self._worker is not None:
            self._worker.kill()

    def _end_start_wait(self) -> None:
        """No more ``START_WAIT`` timer: the child is ready, given up or gone."""
        compat.cancel(self._start_timer)
        self._start_timer = None

    def _answer(self, line: bytes) -> None:
        if line + b"\n" == READY and not self.ready:
            self.ready = True
            self._end_start_wait()
            logger.debug("frontier-rate: the detection process is ready")
            return
        if not self._waiting:
            return
        done = self._waiting.popleft()
        found = None
        try:
            found = read_line(line)
            if found is None:
                logger.debug("frontier-rate: detection failed in the child process: %s",
                             line[:300])
            else:
                counts = found.counters
                if done is _ignore:  # sent while the child started: counted by the caller
                    for name, value in counts.items():
                        self._counted_by_caller[name] = self._counted_by_caller.get(name, 0) \
                            + value - self._counts.get(name, 0)
                self._counts = counts
                found = found._replace(counters=self.counts())
        except (ValueError, TypeError, KeyError) as exc:
            logger.debug("frontier-rate: unreadable answer of the detection process: %r", exc)
        _call(done, found)

    def counts(self) -> dict[str, int]:
        """The detectors' counters of every child this crawl has had, less those of the
        answers the caller detected itself (sent while a child started): each answer is
        counted by exactly one process."""
        names = self._banked.keys() | self._counts.keys() | self._counted_by_caller.keys()
        return {name: self._banked.get(name, 0) + self._counts.get(name, 0)
                - self._counted_by_caller.get(name, 0) for name in names}

    def _stop(self, reason: Any) -> None:
        if not self.stopped:
            self.stopped = True
            if not self.closing:
                now = self.clock()
                lived = now - (self.started_at if self.started_at is not None else now)
                self.restart_wait = RESTART_FIRST if lived >= LIVED_LONG or \
                    not self.restart_wait else min(RESTART_MAX, 2 * self.restart_wait)
                self.restart_at = now + self.restart_wait
                logger.warning("frontier-rate: the detection process stopped (%s); detecting "
                               "in the crawl's process, a new one starts in %.0f s (each "
                               "page's next answer there is compared without its last copy)",
                               reason, self.restart_wait)
        while self._waiting:
            _call(self._waiting.popleft(), None)

    def _exited(self, worker: _Worker, reason: Any) -> None:
        if worker is not self._worker:  # a child given up and replaced since: gone now
            return
        self._stop(getattr(reason, "value", reason))
        compat.cancel(self._kill_timer)
        self._end_start_wait()
        if self._ended is not None and not self._ended.called:
            self._ended.callback(None)

    def close(self) -> Deferred[None] | None:
        """End the child's input: it answers what it holds, then exits. A Deferred that
        fires when it has (killed after ``STOP_WAIT`` s); None when no child runs."""
        self.closing = True
        worker = self._worker
        if worker is None or self.stopped or worker.transport is None:
            return None
        if self._ended is None:
            self._ended = Deferred()
            worker.transport.closeStdin()
            self._kill_timer = compat.call_later(STOP_WAIT, worker.kill)
        return self._ended


class _Worker(ProcessProtocol):
    """The child's pipes: JSON lines in from its stdout, its end to the owner."""

    def __init__(self, owner: DetectionProcess) -> None:
        self.owner = owner
        self._partial = b""
        self._partial_err = b""

    def outReceived(self, data: bytes) -> None:
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            if self is not self.owner._worker:  # a child replaced: its answers got None
                return
            self.owner._answer(line)

    def errReceived(self, data: bytes) -> None:
        *lines, self._partial_err = (self._partial_err + data).split(b"\n")
        for line in lines:
            relay_log_line(line)

    def processEnded(self, reason: Any) -> None:
        self.owner._exited(self, reason)

    def kill(self) -> None:
        try:
            self.transport.signalProcess("KILL")  # type: ignore[union-attr]
        except Exception:  # already gone
            pass


def relay_log_line(line: bytes) -> None:
    """Log one line of the child's stderr in the crawl's log: a record the child wrote
    (``detection_worker.LOG_FORMAT``) at its level and under its logger, said to come from
    the detection process; any other line (a crash's traceback) as a WARNING. Before, the
    child's records went to the crawl's stderr bare (no time, no level), and never into
    Scrapy's ``LOG_FILE``."""
    text = line.decode("utf-8", "replace").rstrip()
    if not text:
        return
    level, name, message = (text.split("\t", 2) + ["", ""])[:3]
    number = logging.getLevelName(level)
    if isinstance(number, int) and name:
        logging.getLogger(name).log(number, "%s (in the detection process)", message)
    else:
        logger.warning("frontier-rate: the detection process wrote: %s", text)


def _ignore(found: Found | None) -> None:
    """The answer to one sent while the child started: the caller detected it already."""


def _call(done: Done, found: Found | None) -> None:
    """Run one ``done``: what it raises is logged, and the pipes keep working."""
    try:
        done(found)
    except Exception:
        logger.exception("frontier-rate: recording a detected answer failed")

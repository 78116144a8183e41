"""Content detection in a child process, off the crawler's event loop (issue 36).

``Fingerprinter.detect`` in ``"content"`` mode is regular-expression work in Python:
~0.2 ms for a 1.5 KB page, 10-15 ms for a text-heavy first copy of 100 KiB. On the
event loop that is time the crawl neither fetches nor parses. ``DetectionProcess`` runs
one ``Fingerprinter`` in one child process (``concurrent.futures``, the ``spawn``
start method: no fork of a threaded crawler); the adapter sends the body and gets the
``Detection`` back as a future. The one child holds every page's memory (the last
copy's segments) and every host's mask, as the in-process detector would, so the
detections are the same, answer for answer, in the same order.

Sending costs the crawler process ~0.5 ms of CPU per answer (pickling, the executor's
threads): more than detecting a small page, less than detecting a large one. Measured in
docs/BENCHMARKS.md ("Detection in a child process"); off unless
``FRONTIER_RATE_DETECTION_PROCESS`` is set. Like any ``spawn`` child, it imports the
crawl's main module: a script that starts a crawl at import time needs the usual
``if __name__ == "__main__":``.
"""

from __future__ import annotations

import logging
import multiprocessing
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from frontier_rate.crawl.change_detection import Detection
from frontier_rate.crawl.fingerprint import Fingerprinter

logger = logging.getLogger(__name__)

_fingerprinter: Fingerprinter | None = None
"""The child's detector (set by ``_start``)."""


def _start(mode: str, strip_patterns: list[str], max_body: int) -> None:
    global _fingerprinter
    _fingerprinter = Fingerprinter(mode, strip_patterns, max_body)


def _detect(body: bytes, url: str, content_type: str | None, truncated: bool,
            full_length: int | None) -> tuple[Detection, dict[str, int]]:
    """In the child: one answer's ``Detection`` and the detector's counters after it."""
    if _fingerprinter is None:
        raise RuntimeError("detection process used before its start")
    headers = {"Content-Type": content_type} if content_type is not None else {}
    found = _fingerprinter.detect(body, url, headers, truncated=truncated,
                                  full_length=full_length)
    return found, _fingerprinter.stats()


class DetectionProcess:
    """``Fingerprinter(mode, strip_patterns, max_body).detect`` in one child process,
    started at the first ``submit``. Once the child has died (``stopped``), ``submit``
    and ``result`` give None: the adapter detects in its own process from then on."""

    def __init__(self, mode: str, strip_patterns: list[str], max_body: int) -> None:
        self._pool = ProcessPoolExecutor(
            1, mp_context=multiprocessing.get_context("spawn"), initializer=_start,
            initargs=(mode, list(strip_patterns), max_body))
        self.stopped = False

    def submit(self, body: bytes, url: str, content_type: str | None, *, truncated: bool,
               full_length: int | None) -> Future[tuple[Detection, dict[str, int]]] | None:
        """The ``(Detection, counters)`` of one 2xx answer, as a future (None once the child
        has stopped). The answers of one page must be submitted in the order they arrived
        (its memory is the last copy's)."""
        if self.stopped:
            return None
        try:
            return self._pool.submit(_detect, bytes(body), url, content_type, truncated,
                                     full_length)
        except (BrokenProcessPool, RuntimeError) as exc:  # died, or shut down
            self._stop(exc)
            return None

    def result(self, future: Future[tuple[Detection, dict[str, int]]]
               ) -> tuple[Detection, dict[str, int]] | None:
        """A done future's ``(Detection, counters)``, or None: the child died, or the
        detection raised there (the adapter then detects the answer itself)."""
        try:
            return future.result()
        except BrokenProcessPool as exc:
            self._stop(exc)
        except Exception as exc:
            logger.debug("frontier-rate: detection failed in the child process: %r", exc)
        return None

    def _stop(self, exc: BaseException) -> None:
        if not self.stopped:
            self.stopped = True
            logger.warning("frontier-rate: the detection process stopped (%r); detecting in "
                           "the crawl's process from now on (each page's next answer there is "
                           "compared without its last copy)", exc)

    def close(self) -> None:
        """Stop the child once what was submitted is done."""
        self._pool.shutdown(wait=True)

"""The detection process itself: ``python -m frontier_rate.detection.detection_worker CONFIG``.

One ``Fingerprinter`` (``CONFIG`` is the JSON ``{"mode", "strip_patterns", "max_body"}``)
detects the answers that arrive on stdin, in order, and writes one JSON line per answer on
stdout. It runs as a module, not through ``multiprocessing``: it imports no crawl script
and needs no thread in the crawl's process (``detection_process.py`` talks to it through
the event loop's pipes).

A frame in: ``FRAME.pack(len(meta), len(body))``, the JSON ``meta`` (``url``,
``content_type``, ``truncated``, ``full_length``, ``rule``: the page's ``ContentRule`` as
JSON or null), the body. A line out: ``{"detection":
[fingerprint, reason, ignored, changed_segments, segments], "counters": {...},
"wall_like": bool}``, or
``{"error": "..."}`` when the detection raised (the crawl then detects that answer
itself). The first line, ``ready``, says the worker has started (importing takes ~1 s: until
then the crawl detects answers itself and sends them here too, so that this memory holds
them). End of input ends the process.

What the process logs (INFO and above: a Redis outage of the shared memory, a memory that
does not unpack) goes to stderr one record a line, ``LOG_FORMAT``, which the crawl reads
and logs again in its own log (``scrapy/detection_process.py``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import struct
import sys
from typing import Any, BinaryIO, NamedTuple

from frontier_rate.detection.change_detection import Detection, PageStore
from frontier_rate.detection.content_rules import ContentRule
from frontier_rate.detection.fingerprint import Fingerprinter
from frontier_rate.detection.not_content import wall_like

FRAME = struct.Struct(">II")
"""Header of a frame: the lengths of its JSON meta and of its body."""
READY = b"ready\n"
"""The worker's first line."""
PIPE_BYTES = 1 << 20
"""The size asked of the input pipe (Linux's default limit for a user, fs.pipe-max-size)."""

LOG_FORMAT = "%(levelname)s\t%(name)s\t%(message)s"
"""A log record on the process's stderr: level name, logger, message (tab-separated)."""


class Found(NamedTuple):
    """One answer's ``Detection``, the worker's counters after it, and whether the body reads
    like a bot wall (``not_content.wall_like``, worked out here so that the crawl's event
    loop does not parse the body a second time)."""

    detection: Detection
    counters: dict[str, int]
    wall_like: bool = False


def frame(body: bytes, url: str, content_type: str | None, truncated: bool,
          full_length: int | None, rule: ContentRule | None = None) -> bytes:
    """One answer as the bytes the worker reads."""
    meta = json.dumps({"url": url, "content_type": content_type, "truncated": truncated,
                       "full_length": full_length,
                       "rule": rule.as_json() if rule is not None else None}).encode()
    return FRAME.pack(len(meta), len(body)) + meta + body


def answer_line(detection: Detection, counters: dict[str, int], wall: bool = False) -> bytes:
    """The line the worker writes for one detection."""
    return json.dumps({"detection": dataclasses.astuple(detection), "counters": counters,
                       "wall_like": wall}).encode() + b"\n"


def read_line(line: bytes) -> Found | None:
    """A worker's line as ``(Detection, counters)``; None for an ``error`` line."""
    found = json.loads(line)
    if "detection" not in found:
        return None
    return Found(Detection(*found["detection"]), found["counters"],
                 bool(found.get("wall_like", False)))


def _read_exactly(stream: BinaryIO, size: int) -> bytes | None:
    data = stream.read(size)
    return data if len(data) == size else None


def _widen_pipe(stream: BinaryIO) -> None:
    """Make the pipe the crawl writes answers into hold ``PIPE_BYTES``: a large page then
    passes in one write, not in 64 KiB pieces each waiting for this process to read (Linux;
    elsewhere, or beyond the system's limit, the pipe stays as it is)."""
    try:
        import fcntl  # not on Windows
    except ImportError:
        return
    command = getattr(fcntl, "F_SETPIPE_SZ", None)  # Linux only
    if command is None:
        return
    try:
        fcntl.fcntl(stream.fileno(), command, PIPE_BYTES)
    except (OSError, ValueError, AttributeError):
        pass


def serve(config: dict[str, Any], stdin: BinaryIO, stdout: BinaryIO,
          pages: PageStore | None = None) -> None:
    """Detect every frame of ``stdin`` until it ends; ``pages``: where the pages' memories
    are shared (``crawl/shared_detection_worker.py``)."""
    fingerprinter = Fingerprinter(config["mode"], config["strip_patterns"],
                                  config["max_body"])
    if pages is not None:
        fingerprinter.share(pages)
    _widen_pipe(stdin)
    stdout.write(READY)
    stdout.flush()
    while (header := _read_exactly(stdin, FRAME.size)) is not None:
        meta_size, body_size = FRAME.unpack(header)
        meta_bytes, body = _read_exactly(stdin, meta_size), _read_exactly(stdin, body_size)
        if meta_bytes is None or body is None:
            break
        meta = json.loads(meta_bytes)
        headers = ({"Content-Type": meta["content_type"]}
                   if meta["content_type"] is not None else {})
        try:
            found = fingerprinter.detect(body, meta["url"], headers,
                                         truncated=meta["truncated"],
                                         full_length=meta["full_length"],
                                         rule=ContentRule.from_json(meta.get("rule")))
            wall = found.fingerprint is not None and wall_like(body, meta["content_type"])
            line = answer_line(found, fingerprinter.stats(), wall)
        except Exception as exc:  # the crawl detects this answer itself
            line = json.dumps({"error": repr(exc)}).encode() + b"\n"
        stdout.write(line)
        stdout.flush()


def log_to_crawl() -> None:
    """Send this process's log records (INFO and above) to stderr in ``LOG_FORMAT``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    logging.basicConfig(level=logging.INFO, handlers=[handler])


if __name__ == "__main__":
    log_to_crawl()
    serve(json.loads(sys.argv[1]), sys.stdin.buffer, sys.stdout.buffer)

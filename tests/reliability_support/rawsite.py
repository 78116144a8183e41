"""A loopback HTTP server that answers with raw bytes, for bad-input tests.

``ChangingSite`` builds well-formed answers; this one writes exactly the
status line, headers and body a test chooses (non-ASCII or folded header
values, bodies of any size streamed in chunks), one connection per request.
An answer may depend on the path's hit number. The log records, per request,
the request headers as received (Latin-1 text, so bytes round-trip), the
bytes of body sent and whether the whole body went out (a client that stops
a download shows as ``complete=False``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from scrapy_support.server import LoopbackSite

CHUNK = 64 * 1024


@dataclass
class Answer:
    """A raw HTTP answer. ``length``: stream ``body`` then filler bytes up to this size."""

    body: bytes = b""
    status: int = 200
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    length: int | None = None
    filler: bytes = b"x"
    content_length: bool = True


@dataclass
class RawHit:
    path: str
    number: int
    time: float
    headers: list[tuple[str, str]]
    status: int = 0
    sent: int = 0
    complete: bool = False

    def header(self, name: str) -> str | None:
        values = [v for k, v in self.headers if k.lower() == name.lower()]
        return values[0] if values else None


Route = Callable[[int], Answer]


class RawSite(LoopbackSite):
    """A loopback HTTP/1.1 site whose answers are raw bytes; ``route`` maps paths."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        super().__init__(host)
        self._routes: dict[str, Route] = {}
        self._counts: dict[str, int] = {}
        self.hits: list[RawHit] = []

    def route(self, path: str, answer: Answer | Route) -> None:
        """Answer ``path`` with ``answer`` (or ``answer(hit_number)``, numbers from 1)."""
        with self._lock:
            self._routes[path] = answer if callable(answer) else (lambda n, a=answer: a)

    def hits_for(self, path: str) -> list[RawHit]:
        with self._lock:
            return [hit for hit in self.hits if hit.path == path]

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        path = handler.path
        with self._lock:
            route = self._routes.get(path)
            number = self._counts[path] = self._counts.get(path, 0) + 1
            hit = RawHit(path, number, time.time(), list(handler.headers.items()))
            self.hits.append(hit)
        answer = route(number) if route else Answer(b"not found", status=404)
        total = answer.length if answer.length is not None else len(answer.body)
        head = [b"HTTP/1.1 %d X" % answer.status, b"Connection: close"]
        head += [name + b": " + value for name, value in answer.headers]
        if answer.content_length:
            head.append(b"Content-Length: %d" % total)
        hit.status = answer.status
        handler.close_connection = True
        try:
            handler.wfile.write(b"\r\n".join(head) + b"\r\n\r\n")
            sent = 0
            for chunk in _chunks(answer.body, total, answer.filler):
                handler.wfile.write(chunk)
                sent += len(chunk)
                hit.sent = sent
            handler.wfile.flush()
            hit.complete = True
        except OSError:  # the client closed the connection: a stopped download
            pass


def _chunks(body: bytes, total: int, filler: bytes):
    for start in range(0, min(len(body), total), CHUNK):
        yield body[start:min(start + CHUNK, total)]
    remaining = total - min(len(body), total)
    block = (filler * (CHUNK // len(filler) + 1))[:CHUNK]
    while remaining > 0:
        yield block[:remaining]
        remaining -= min(remaining, CHUNK)

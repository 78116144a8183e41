"""A local HTTP site whose pages change on command, with a request log.

The site runs in a thread of the test process on a 127.0.0.0/8 address. Tests
set each page's body, status, redirect target and validators, change them
while a crawl runs in a subprocess, and read back every request the site
answered (time, path, conditional headers, answered status) to check gaps
and counts.
"""

from __future__ import annotations

import email.utils
import hashlib
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self


@dataclass
class Page:
    """What the site answers for one path."""

    body: bytes = b""
    status: int = 200
    content_type: str = "text/html; charset=utf-8"
    location: str | None = None
    etag: bool = False
    last_modified: bool = False
    modified_at: float = field(default_factory=time.time)
    delay: float = 0.0
    template: bool = False
    """Fill ``{n}`` (this page's hit count), ``{token}`` (random) and ``{time}`` per request."""
    hits: int = 0
    set_cookie: str | None = None
    """A ``Set-Cookie`` header value sent with every answer."""

    @property
    def etag_value(self) -> str:
        return '"' + hashlib.sha1(self.body).hexdigest()[:16] + '"'


@dataclass(frozen=True)
class Hit:
    """One answered request (``started``: arrival, ``time``: answer)."""

    time: float
    method: str
    path: str
    status: int
    if_none_match: str | None
    if_modified_since: str | None
    user_agent: str | None
    started: float = 0.0
    cookie: str | None = None


class LoopbackSite:
    """A threaded HTTP/1.1 server on ``host`` (127.0.0.0/8 only) that hands every GET
    and POST to ``self._answer(handler)``; subclasses decide what to send."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        if not host.startswith("127."):
            raise ValueError(f"test servers bind to 127.0.0.0/8 only, got {host!r}")
        self._lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 (http.server naming)
                site._answer(self)

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                site._answer(self)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        self._server = ThreadingHTTPServer((host, 0), Handler)
        self._server.daemon_threads = True
        self.host = host
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def netloc(self) -> str:
        return f"{self.host}:{self.port}"

    def url(self, path: str) -> str:
        return f"http://{self.netloc}{path}"


class ChangingSite(LoopbackSite):
    """A loopback site with mutable pages and a request log."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        super().__init__(host)
        self._pages: dict[str, Page] = {}
        self.hits: list[Hit] = []

    # -- pages ---------------------------------------------------------------
    def set(self, path: str, body: str | bytes = b"", **attributes: object) -> Page:
        """Create or replace the page at ``path`` (attributes as in ``Page``)."""
        if isinstance(body, str):
            body = body.encode("utf-8")
        page = Page(body=body, **attributes)  # type: ignore[arg-type]
        with self._lock:
            self._pages[path] = page
        return page

    def change(self, path: str, body: str | bytes) -> None:
        """New content for an existing page; its Last-Modified moves to now."""
        if isinstance(body, str):
            body = body.encode("utf-8")
        with self._lock:
            page = self._pages[path]
            page.body = body
            page.modified_at = time.time()

    def update(self, path: str, **attributes: object) -> None:
        with self._lock:
            page = self._pages[path]
            for name, value in attributes.items():
                setattr(page, name, value)

    # -- the log ---------------------------------------------------------------
    def hits_for(self, path: str) -> list[Hit]:
        with self._lock:
            return [hit for hit in self.hits if hit.path == path]

    def arrivals(self, path: str) -> int:
        """Requests for ``path`` that have arrived (counted before any ``delay``)."""
        with self._lock:
            page = self._pages.get(path)
            return page.hits if page is not None else 0

    def paths(self) -> list[str]:
        with self._lock:
            return [hit.path for hit in self.hits]

    # -- serving ---------------------------------------------------------------
    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        started = time.time()
        path = handler.path
        if_none_match = handler.headers.get("If-None-Match")
        if_modified_since = handler.headers.get("If-Modified-Since")
        with self._lock:
            page = self._pages.get(path)
            if page is not None:
                page.hits += 1
                page = Page(**page.__dict__)
        if page is not None and page.template:
            page.body = (
                page.body.replace(b"{n}", str(page.hits).encode())
                .replace(b"{token}", uuid.uuid4().hex.encode())
                .replace(b"{time}", time.strftime("%H:%M:%S").encode() + b".%d" % time.time_ns())
            )
        headers: list[tuple[str, str]] = []
        if page is None:
            status, body = 404, b"not found"
        else:
            if page.delay:
                time.sleep(page.delay)
            status, body = page.status, page.body
            headers.append(("Content-Type", page.content_type))
            if page.location:
                headers.append(("Location", page.location))
            if page.set_cookie:
                headers.append(("Set-Cookie", page.set_cookie))
            if page.etag:
                headers.append(("ETag", page.etag_value))
            if page.last_modified:
                headers.append(
                    ("Last-Modified", email.utils.formatdate(page.modified_at, usegmt=True))
                )
            if status == 200 and _not_modified(page, if_none_match, if_modified_since):
                status, body = 304, b""
        with self._lock:
            self.hits.append(
                Hit(time.time(), handler.command, path, status, if_none_match,
                    if_modified_since, handler.headers.get("User-Agent"), started,
                    handler.headers.get("Cookie"))
            )
        handler.send_response(status)
        for name, value in headers:
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(body)


def _not_modified(page: Page, if_none_match: str | None, if_modified_since: str | None) -> bool:
    if page.etag and if_none_match is not None:
        return page.etag_value in [tag.strip() for tag in if_none_match.split(",")]
    if page.last_modified and if_modified_since is not None:
        try:
            since = email.utils.parsedate_to_datetime(if_modified_since).timestamp()
        except (TypeError, ValueError):
            return False
        return int(page.modified_at) <= since
    return False

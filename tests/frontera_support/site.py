"""``ChangingSite`` that also keeps the headers of every request it answers."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler

from scrapy_support.server import ChangingSite


class HeaderLoggingSite(ChangingSite):
    """Adds ``requests``: (method, path, headers) of each request, in arrival order."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        super().__init__(host)
        self.requests: list[tuple[str, str, dict[str, str]]] = []

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.requests.append((handler.command, handler.path, dict(handler.headers.items())))
        super()._answer(handler)

    def headers_for(self, path: str) -> list[dict[str, str]]:
        with self._lock:
            return [headers for _, p, headers in self.requests if p == path]

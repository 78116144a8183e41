"""The book shop (``shop.Shop``) served on a loopback address, each answer rendered anew (the
deal box names another book every time), with a request log, a robots.txt, a redirect loop
(``/loop/a`` -> ``/loop/b`` -> ``/loop/a``) and a switch that turns the home page into a
bot wall answered with 200."""

from __future__ import annotations

import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler

from scrapy_support.server import LoopbackSite

from frontier_rate.testbed.shop import Shop

BOT_WALL = ("<html><head><title>Just a moment...</title></head><body><p>Checking your browser "
            "before accessing the shop. Please complete the captcha.</p></body></html>")
LOOP = {"/loop/a": "/loop/b", "/loop/b": "/loop/a"}


@dataclass(frozen=True)
class Request:
    """One answered request."""

    time: float
    path: str
    status: int


class ShopSite(LoopbackSite):
    """``shop`` on ``host`` (127.0.0.0/8): every path of ``shop.pages()``, ``/robots.txt``,
    the redirect loop, and 404 for anything else. ``bot_wall = True`` answers the home page
    with ``BOT_WALL``; ``delay`` seconds before each answer."""

    def __init__(self, shop: Shop, host: str = "127.0.0.1", delay: float = 0.0) -> None:
        super().__init__(host)
        self.shop = shop
        self.delay = delay
        self.bot_wall = False
        self.requests: list[Request] = []

    def paths(self) -> list[str]:
        with self._lock:
            return [request.path for request in self.requests]

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        path = handler.path
        if self.delay:
            time.sleep(self.delay)
        location = None
        with self._lock:
            if path == "/robots.txt":
                status, body, kind = 200, "User-agent: *\nDisallow: /private/\n", "text/plain"
            elif path in LOOP:
                status, body, kind, location = 302, "", "text/html", LOOP[path]
            elif path == "/" and self.bot_wall:
                status, body, kind = 200, BOT_WALL, "text/html; charset=utf-8"
            else:
                pages = self.shop.pages()
                status, body, kind = (200, pages[path], "text/html; charset=utf-8") \
                    if path in pages else (404, "not found", "text/plain")
            self.requests.append(Request(time.time(), path, status))
        data = body.encode("utf-8")
        handler.send_response(status)
        handler.send_header("Content-Type", kind)
        if location:
            handler.send_header("Location", location)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(data)

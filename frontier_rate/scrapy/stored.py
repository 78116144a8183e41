"""What a stored page keeps of a Scrapy request: what the spider gave, nothing more.

Scrapy's downloader middlewares write into the request object they process:
``UserAgentMiddleware`` and ``DefaultHeadersMiddleware`` set headers with
``setdefault``, ``HttpCompressionMiddleware`` sets ``Accept-Encoding``, and
``CookiesMiddleware`` replaces any ``Cookie`` header with the cookie jar's. A request
built from one already sent (a redirect, ``response.request.replace(...)`` in a
spider) carries them all. Stored as a page, such a request froze them: a later run
with another ``USER_AGENT`` still sent the old one on the revisit, and a session
cookie sat in Redis (issue 33). ``AddedHeaders`` takes them out of what is stored;
each revisit gets them fresh from the middlewares.

A redirect of a one-off request (a login POST answered by ``302 -> GET /``) is a
one-off too (``OneOffRedirects``): it is part of that one fetch, not a page the
spider asked to revisit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.downloadermiddlewares.httpcompression import ACCEPTED_ENCODINGS

from frontier_rate.crawl.settings import flag

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.settings import BaseSettings

ONE_OFF_KEY = "_frontier_rate_one_off"
"""Request meta key of a one-off request this scheduler sent (a number, per crawl)."""
MAX_ONE_OFFS = 10_000
"""One-off requests remembered for their redirects (the oldest are forgotten)."""


class AddedHeaders:
    """The header values Scrapy's downloader middlewares add, from the crawl's settings."""

    def __init__(self, settings: BaseSettings, spider: Any) -> None:
        added: dict[str, set[bytes]] = {}

        def add(name: str, value: Any) -> None:
            if value is None:
                return
            data = value if isinstance(value, bytes) else str(value).encode("latin-1", "replace")
            added.setdefault(name.lower(), set()).add(data)

        add("user-agent", getattr(spider, "user_agent", None) or settings.get("USER_AGENT"))
        for name, value in (settings.getdict("DEFAULT_REQUEST_HEADERS") or {}).items():
            add(str(name), value)
        if settings.getbool("COMPRESSION_ENABLED", True):
            add("accept-encoding", b", ".join(ACCEPTED_ENCODINGS))
        self.added = added
        self.cookies = flag(settings.get("COOKIES_ENABLED", True))

    def clean(self, stored: dict[str, Any], request: Request) -> None:
        """Drop from ``stored["h"]`` the headers a middleware set (same value as it sets)
        and a ``Cookie`` header ``CookiesMiddleware`` would replace anyway."""
        headers = stored.get("h")
        if not headers:
            return
        keep_cookie = not self.cookies or request.meta.get("dont_merge_cookies")
        for name in list(headers):
            lower = name.lower()
            if lower == "cookie" and not keep_cookie:
                del headers[name]
                continue
            values = self.added.get(lower)
            if values and all(v.encode("latin-1", "replace") in values for v in headers[name]):
                del headers[name]
        if not headers:
            del stored["h"]


class OneOffRedirects:
    """Which requests are redirects of a one-off request this scheduler sent.

    A one-off gets a number in ``meta[ONE_OFF_KEY]``; Scrapy's redirect keeps the meta
    and the callback object. A request is a redirect of it when it has Scrapy's
    ``redirect_urls`` and the very callback object of that one-off (a spider that
    copies ``response.meta`` into a new request passes a callback of its own).
    """

    def __init__(self) -> None:
        self._callbacks: dict[int, Any] = {}
        self._count = 0

    def note(self, request: Request) -> None:
        self._count += 1
        if len(self._callbacks) >= MAX_ONE_OFFS:
            self._callbacks.pop(next(iter(self._callbacks)))
        self._callbacks[self._count] = request.callback
        request.meta[ONE_OFF_KEY] = self._count

    def redirected(self, request: Request) -> bool:
        number = request.meta.get(ONE_OFF_KEY)
        if number not in self._callbacks or not request.meta.get("redirect_urls"):
            return False
        return self._callbacks[number] is request.callback

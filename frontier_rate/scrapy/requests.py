"""Scrapy requests as frontier pages: what is stored with a page, and what a revisit rebuilds.

A GET request becomes a page of the frontier; a revisit must rebuild the
request the spider gave, with everything Scrapy would have sent and called:
callback, errback, headers, cookies, meta, cb_kwargs, flags, priority and
encoding. They are stored as JSON (never pickle). A request that cannot be
stored that way (a meta value JSON cannot carry, a lambda callback, a URL the
frontier does not accept) is not lost: the scheduler fetches it once, as
Scrapy's own scheduler falls back to memory for a request its disk queue
cannot serialise (``scrapy.core.scheduler``, stat ``scheduler/unserializable``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urldefrag

from w3lib.url import safe_url_string

from frontier_rate.crawl.settings import DONT_REVISIT_KEY, WEIGHT_KEY, json_value, page_weight
from frontier_rate.crawl.signal_reader import SITEMAP_KEY
from frontier_rate.engine.frontier import parse_url
from frontier_rate.renamed import resolve
from frontier_rate.store.keys import page_id

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.spiders import Spider
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

RequestPage = tuple[str, float, dict[str, Any], int]
"""A page for the frontier: (url, weight, stored request, priority)."""
MAX_WARNINGS = 100
"""Requests not revisitable logged at WARNING level per crawl; later ones at DEBUG (all are
counted in the stat ``frontier_rate/not_revisitable``)."""

TOKEN_KEY = "_frontier_rate_flight"
"""Request meta key that ties a request (and its redirects/retries) to its lease."""
RESULT_KEY = "frontier_rate"
"""Response meta key filled before the spider's callback runs (``client.result_meta``)."""

PER_FETCH_META = frozenset({
    TOKEN_KEY, RESULT_KEY, "download_slot", "download_latency", "redirect_urls",
    "redirect_times", "redirect_ttl", "redirect_reasons", "retry_times", "_scheme_proxy",
    "_frontier_rate_one_off",  # scrapy_stored.ONE_OFF_KEY
})
"""Meta keys that describe one fetch; not stored when a spider copies ``response.meta``."""


def page_url(url: str) -> str:
    """The URL a page is known by: the request's URL without its fragment (a fragment is
    never sent to the server, and Scrapy's request fingerprint ignores it too)."""
    return urldefrag(url)[0] if "#" in url else url


def written_page_url(url: str) -> str:
    """The URL a page is known by for a URL as a person writes it: made safe as Scrapy's
    ``Request`` makes it (scheme and host lower case, unsafe characters escaped: w3lib's
    ``safe_url_string``), then ``page_url``. ``frontier-rate inspect`` looks pages up by it."""
    return page_url(safe_url_string(url))


def one_off_reason(request: Request) -> str | None:
    """Why ``request`` is fetched once and never revisited, or None for a revisitable GET."""
    if request.method != "GET":
        return f"a {request.method} request"
    if request.body:
        return "a GET request with a body"
    if request.meta.get(DONT_REVISIT_KEY):
        return f"meta[{DONT_REVISIT_KEY!r}]"
    if not request.url.startswith(("http://", "https://")):
        return "not an http(s) URL"
    return None


def page_weight_of(request: Request) -> float:
    """The page's importance from ``meta["frontier_rate_weight"]`` (default 1.0)."""
    return page_weight(request.meta.get(WEIGHT_KEY, 1.0), request.url)


def _method_name(spider: Spider, func: Callable[..., Any] | None, role: str) -> str | None:
    """The name of a spider method, as Scrapy's ``request_to_dict`` stores it."""
    if func is None:
        return None
    func = getattr(func, "frontier_rate_wraps", func)
    name = getattr(func, "__name__", None)
    if getattr(func, "__self__", None) is spider and name and getattr(spider, name, None) == func:
        return name
    raise ValueError(
        f"request {role} {func!r} is not a method of spider {spider.name!r}; frontier-rate "
        "stores callbacks by name, so revisited requests need spider methods"
    )


def request_to_page_meta(request: Request, spider: Spider) -> dict[str, Any]:
    """The JSON dict stored with a page so a revisit rebuilds ``request``.

    Keys are short and only present when not default: ``cb``/``eb`` callback and
    errback names, ``h`` headers, ``c`` cookies, ``m`` meta, ``kw`` cb_kwargs,
    ``p`` priority, ``f`` flags, ``e`` encoding. Raises ValueError naming the first
    part that cannot be stored.
    """
    where = request.url if len(request.url) <= 100 else request.url[:100] + "..."
    stored: dict[str, Any] = {}
    callback = _method_name(spider, request.callback, "callback")
    if callback and callback != "parse":
        stored["cb"] = callback
    errback = _method_name(spider, request.errback, "errback")
    if errback:
        stored["eb"] = errback
    meta = {k: v for k, v in request.meta.items() if k not in PER_FETCH_META}
    for key, value in meta.items():
        json_value(value, f"request meta[{key!r}] of {where}")
    if meta:
        stored["m"] = meta
    if request.cb_kwargs:
        for key, value in request.cb_kwargs.items():
            json_value(value, f"request cb_kwargs[{key!r}] of {where}")
        stored["kw"] = dict(request.cb_kwargs)
    if request.cookies:
        stored["c"] = json_value(request.cookies, f"request cookies of {where}")
    if request.headers:
        stored["h"] = {
            name.decode("latin-1"): [v.decode("latin-1") for v in values]
            for name, values in request.headers.items()
        }
    if request.priority:
        stored["p"] = request.priority
    if request.flags:
        stored["f"] = json_value(list(request.flags), f"request flags of {where}")
    if request.encoding != "utf-8":
        stored["e"] = request.encoding
    return stored


def stored_priority(stored: dict[str, Any] | None) -> int:
    """The priority a stored page's requests carry (0 when none was given)."""
    return int((stored or {}).get("p") or 0)


def request_kwargs(stored: dict[str, Any] | None) -> dict[str, Any]:
    """Keyword arguments of ``scrapy.Request`` rebuilt from a stored page (callback and
    errback are left to the caller, which resolves their names on its spider)."""
    stored = stored or {}
    kwargs: dict[str, Any] = {
        "headers": {name: [_header_bytes(value) for value in values]
                    for name, values in (stored.get("h") or {}).items()},
        "meta": dict(stored.get("m") or {}),
        "cb_kwargs": dict(stored.get("kw") or {}),
        "priority": stored_priority(stored),
    }
    if stored.get("c"):
        kwargs["cookies"] = stored["c"]
    if stored.get("f"):
        kwargs["flags"] = list(stored["f"])
    if stored.get("e"):
        kwargs["encoding"] = stored["e"]
    return kwargs


class PageIntake:
    """Which requests of one crawl become pages; the others are fetched once.

    ``page(request)`` is the page a request becomes, or None for a one-off fetch: a
    request ``one_off_reason`` names, a repeat (``dont_filter``) of a page this crawl took
    already, or one the frontier cannot store (then named in a WARNING and counted in
    ``frontier_rate/not_revisitable``).
    """

    def __init__(self, spider: Spider, stats: StatsCollector,
                 clean: Callable[[dict[str, Any], Request], None] | None = None) -> None:
        self.spider, self.stats, self.clean = spider, stats, clean
        self._taken: set[bytes] = set()  # ids of the pages this crawl took
        self._warnings = 0

    def page(self, request: Request) -> RequestPage | None:
        reason = one_off_reason(request)
        if reason is not None:
            logger.debug("frontier-rate: %s is fetched once (%s)", request, reason)
            return None
        url = page_url(request.url)
        try:
            parse_url(url)
            weight = page_weight_of(request)
            meta = request_to_page_meta(request, self.spider)
            if self.clean is not None:
                self.clean(meta, request)  # what middlewares added: scrapy_stored
        except ValueError as exc:
            self._not_revisitable(request, exc)
            return None
        key = page_id(url)
        if key in self._taken:
            return None  # dont_filter: fetched again, as Scrapy would
        self._taken.add(key)
        return url, weight, meta, stored_priority(meta), bool(request.meta.get(SITEMAP_KEY))

    def _not_revisitable(self, request: Request, exc: ValueError) -> None:
        self.stats.inc_value("frontier_rate/not_revisitable")
        self._warnings += 1
        url = request.url if len(request.url) <= 200 else request.url[:200] + "..."
        level = logging.WARNING if self._warnings <= MAX_WARNINGS else logging.DEBUG
        logger.log(level, "frontier-rate: <%s %s> is fetched once, not revisited: %s",
                   request.method, url, exc)
        if self._warnings == MAX_WARNINGS:
            logger.warning("frontier-rate: %d requests not revisitable; further ones are "
                           "logged at DEBUG level (stat frontier_rate/not_revisitable counts "
                           "them all)", MAX_WARNINGS)


def _header_bytes(value: Any) -> bytes:
    """A stored request header value (decoded as Latin-1 when stored) as its original bytes."""
    text = str(value)
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8")


RENAMED = {"NewPage": "RequestPage"}
"""Retired names still importable (issue 61): old -> new (``frontier_rate.renamed``)."""


def __getattr__(name: str) -> Any:
    return resolve(globals(), name, RENAMED)

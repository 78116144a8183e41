"""Scrapy scheduler adapter: turn a Scrapy project into a revisiting crawler.

Enable it with settings alone::

    SCHEDULER = "frontier_rate.scrapy.Scheduler"
    FRONTIER_RATE_REDIS_URL = "redis://localhost:6379/0"   # leave out: embedded Redis

How a request travels (DESIGN.md section 5 has the Scrapy facts this rests on):

1. ``enqueue_request``: a GET request becomes a *page* of the frontier
   (``Frontier.add_many``, batched). Its callback and errback are stored by
   spider method name, its headers, meta and cb_kwargs as JSON; anything that
   is not JSON raises ``ValueError`` naming the key (nothing is pickled).
   Non-GET requests, ``meta["dont_revisit"]`` and the retries/redirects of a
   request this scheduler sent go to a local one-off queue instead.
2. ``next_request``: pages come back from ``Frontier.next_requests`` as
   leased ``Dispatch`` objects, held in a small local buffer, and leave as
   Requests with the stored callback, errback, headers and meta plus
   ``If-None-Match`` / ``If-Modified-Since`` from the last fetch.
3. Outcomes reach the scheduler without any middleware: the
   ``response_received`` signal carries every response that reaches the
   engine (non-2xx included, before HttpErrorMiddleware filters them), and
   download errors reach the errback this scheduler wraps around the
   spider's (no Scrapy signal carries download errors in 2.19). 2xx ->
   ``observe`` with a fingerprint; 304 -> ``observe(not_modified=True)`` and
   swallowed (never passed to the spider); anything else -> ``failed``.
4. When nothing is due the scheduler keeps the spider open and wakes the
   engine when the next page falls due (within ``WAKE_LIMIT`` seconds),
   instead of waiting for Scrapy's 5-second heartbeat.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.asyncio import call_later, create_looping_call
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.misc import build_from_crawler, load_object

from frontier_rate.connection import RedisUnavailable
from frontier_rate.fingerprint import DEFAULT_MAX_BODY, Fingerprinter, header_value
from frontier_rate.settings import (
    DONT_REVISIT_KEY,
    WEIGHT_KEY,
    close_after,
    frontier_kwargs,
    json_value,
    page_weight,
    strip_patterns,
)

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.spiders import Spider
    from twisted.python.failure import Failure

    from frontier_rate.engine import Dispatch, Frontier, Observation

logger = logging.getLogger(__name__)

__all__ = [
    "DONT_REVISIT_KEY",
    "RESULT_KEY",
    "Scheduler",
    "TOKEN_KEY",
    "WEIGHT_KEY",
    "request_to_page_meta",
]

PACE_MARGIN = 0.01
"""Seconds added to a host's delay on its download slot (see ``Scheduler._pace``)."""
TOKEN_KEY = "_frontier_rate_flight"
"""Request meta key that ties a request (and its redirects/retries) to its lease."""
RESULT_KEY = "frontier_rate"
"""Response meta key the scheduler fills before the callback runs:
``{"changed": bool, "not_modified": bool, "estimate": float, "next_due": float}``."""

_PER_FETCH_META = frozenset({
    TOKEN_KEY, RESULT_KEY, "download_slot", "download_latency", "redirect_urls",
    "redirect_times", "redirect_ttl", "redirect_reasons", "retry_times", "_scheme_proxy",
})
"""Meta keys that describe one fetch; not stored when a spider copies ``response.meta``."""

WAKE_LIMIT = 1.0
"""Longest sleep (seconds) between polls of the frontier while pages wait."""
MIN_WAKE = 0.05
"""Shortest sleep between polls when pages are due but held back (host delay, budget)."""
FLUSH_DELAY = 0.05
"""Longest wait (seconds) before new pages are added to the frontier in one batch."""
BUFFER_BATCHES = 4
"""Leased pages held locally: at most this many batches (FRONTIER_RATE_BATCH each)."""
CLOCK_SLACK = 0.005
"""Timers may fire this early by ``time.time()``; a poll that early still counts."""

def _method_name(spider: Spider, func: Callable[..., Any] | None, role: str) -> str | None:
    """The name of a spider method, as Scrapy's ``request_to_dict`` stores it."""
    if func is None:
        return None
    name = getattr(func, "__name__", None)
    if getattr(func, "__self__", None) is spider and name and getattr(spider, name, None) == func:
        return name
    raise ValueError(
        f"request {role} {func!r} is not a method of spider {spider.name!r}; frontier-rate "
        "stores callbacks by name, so revisited requests need spider methods"
    )


def request_to_page_meta(request: Request, spider: Spider) -> dict[str, Any]:
    """The JSON dict stored with a page so a revisit rebuilds ``request``.

    Keys are short and only present when not default: ``cb``/``eb`` callback
    and errback names, ``h`` headers, ``m`` meta, ``kw`` cb_kwargs, ``p`` priority.
    Raises ValueError naming the first meta key that JSON cannot carry.
    """
    stored: dict[str, Any] = {}
    callback = _method_name(spider, request.callback, "callback")
    if callback and callback != "parse":
        stored["cb"] = callback
    errback = _method_name(spider, request.errback, "errback")
    if errback:
        stored["eb"] = errback
    meta = {k: v for k, v in request.meta.items() if k not in _PER_FETCH_META}
    for key, value in meta.items():
        json_value(value, f"request meta[{key!r}] of {request.url}")
    if meta:
        stored["m"] = meta
    if request.cb_kwargs:
        for key, value in request.cb_kwargs.items():
            json_value(value, f"request cb_kwargs[{key!r}] of {request.url}")
        stored["kw"] = dict(request.cb_kwargs)
    if request.headers:
        stored["h"] = {
            name.decode("latin-1"): [v.decode("latin-1") for v in values]
            for name, values in request.headers.items()
        }
    if request.priority:
        stored["p"] = request.priority
    return stored


def _weight(request: Request) -> float:
    return page_weight(request.meta.get(WEIGHT_KEY, 1.0), request.url)


@dataclass
class _Robots:
    """What this process knows about one host's robots.txt."""

    fetched_at: float | None = None
    pending: bool = False
    crawl_delay: float | None = None


@dataclass
class _InFlight:
    dispatch: Dispatch
    sent_at: float
    answered: int | None = None  # status of the response observed, if any


class Scheduler:
    """Scrapy scheduler backed by a ``frontier_rate.Frontier`` (see module docstring)."""

    def __init__(self, crawler: Crawler, frontier: Frontier | None = None) -> None:
        self.crawler = crawler
        settings = crawler.settings
        self.stats = crawler.stats
        self.spider: Spider | None = None
        self.frontier: Frontier | None = frontier
        self._redis_url: str | None = settings.get("FRONTIER_RATE_REDIS_URL") or None
        self.fingerprinter = Fingerprinter(
            settings.get("FRONTIER_RATE_FINGERPRINT", "raw"),
            strip_patterns(settings.get("FRONTIER_RATE_STRIP_PATTERNS")),
            settings.getint("FRONTIER_RATE_MAX_BODY", DEFAULT_MAX_BODY),
        )
        self.conditional = settings.getbool("FRONTIER_RATE_CONDITIONAL", True)
        self.batch_size = settings.getint(
            "FRONTIER_RATE_BATCH", max(1, settings.getint("CONCURRENT_REQUESTS", 16))
        )
        self.per_host = max(1, settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN", 8))
        self.obey_crawl_delay = settings.getbool(
            "FRONTIER_RATE_OBEY_CRAWL_DELAY", settings.getbool("ROBOTSTXT_OBEY", False)
        )
        self.robots_ttl = settings.getfloat("FRONTIER_RATE_ROBOTS_TTL", 86400.0)
        self.scrapy_reads_robots = settings.getbool("ROBOTSTXT_OBEY", False)
        self.robots_agent: str = (
            settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT") or "*"
        )
        self.close_after, self.close_when_idle = close_after(
            settings.get("FRONTIER_RATE_CLOSE_AFTER")
        )
        self.log_interval = settings.getfloat("FRONTIER_RATE_LOG_INTERVAL", 60.0)
        self._frontier_kwargs = frontier_kwargs(settings.get)
        dupefilter_cls = load_object(settings["DUPEFILTER_CLASS"])
        self.dupefilter = build_from_crawler(dupefilter_cls, crawler)

        self._new_pages: list[tuple[str, float, dict[str, Any]]] = []
        self._new_since = 0.0  # when the oldest of _new_pages was enqueued
        self._one_off: deque[Request] = deque()
        self._buffer: deque[tuple[Dispatch, float]] = deque()
        self._in_flight: dict[str, _InFlight] = {}  # by flight id (TOKEN_KEY)
        self._flights = 0
        self._observed = 0
        self._warned_at = -float("inf")
        self._not_modified: set[str] = set()
        self._host_load: dict[str, int] = {}
        self._robots: dict[str, _Robots] = {}
        self._host_ready_at: dict[str, float] = {}  # hosts with a Crawl-delay: next send
        self._paced: dict[str, float] = {}  # host -> delay set on its download slot
        self._next_poll = 0.0
        self._next_due_at: float | None = None
        self._next_due_checked = 0.0
        self._wakeup: Any = None
        self._wakeup_at = float("inf")
        self._timers: list[Any] = []
        self._loops: list[Any] = []
        self._closing = False

        crawler.signals.connect(self._on_response, signal=signals.response_received)
        crawler.signals.connect(self._on_downloaded, signal=signals.response_downloaded)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Scheduler:
        return cls(crawler)

    # -- Scrapy scheduler interface -------------------------------------------------
    def open(self, spider: Spider) -> None:
        self.spider = spider
        if self.frontier is None:
            from frontier_rate.engine import Frontier

            kwargs = dict(self._frontier_kwargs)
            kwargs.setdefault("namespace", spider.name)
            self.frontier = Frontier(self._redis_url, **kwargs)
        self.dupefilter.open()
        if self.close_after:
            self._timers.append(call_later(self.close_after, self._close_spider, "close_after"))
        if self.log_interval > 0:
            self._start_loop(self._log_summary, self.log_interval)
        logger.info("frontier-rate scheduler opened: namespace=%r, fingerprint=%s",
                    self._namespace, self.fingerprinter.mode)

    def close(self, reason: str) -> None:
        self._closing = True
        for timer in self._timers:
            timer.cancel()
        if self._wakeup is not None:
            self._wakeup.cancel()
        for loop in self._loops:
            if loop.running:
                loop.stop()
        if self.frontier is not None:
            self._flush_new_pages()
            self._release_buffer()
            self._log_summary()
            self.frontier.close()
        self.dupefilter.close(reason)

    def enqueue_request(self, request: Request) -> bool:
        if self._is_continuation(request):
            self._one_off.append(request)  # a redirect or retry of a page in flight
            return True
        if request.method != "GET" or request.meta.get(DONT_REVISIT_KEY):
            if not request.dont_filter and self.dupefilter.request_seen(request):
                self.dupefilter.log(request, self.spider)
                return False
            self._one_off.append(request)
            self.stats.inc_value("frontier_rate/one_off")
            return True
        assert self.spider is not None
        page = (request.url, _weight(request), request_to_page_meta(request, self.spider))
        if not self._new_pages:
            self._new_since = time.time()
            self._wake_at(self._new_since + FLUSH_DELAY)
        self._new_pages.append(page)
        if len(self._new_pages) >= self.batch_size:
            self._flush_new_pages()
        return True

    def _is_continuation(self, request: Request) -> bool:
        """A redirect or retry Scrapy made from a request this scheduler sent.

        Those copies keep the errback this scheduler installed; a spider that
        copies ``response.meta`` into a new request does not, so its request
        becomes a page of its own.
        """
        token = request.meta.get(TOKEN_KEY)
        return (
            token is not None
            and token in self._in_flight
            and getattr(request.errback, "frontier_rate_token", None) == token
        )

    def next_request(self) -> Request | None:
        if self._one_off:
            request = self._one_off.popleft()
            host = urlsplit(request.url).hostname
            if host:
                self._pace(host)
            return request
        now = time.time()
        try:
            self._flush_new_pages(now)
            dispatch = self._take_ready(now)
            if dispatch is None and now >= self._next_poll - CLOCK_SLACK:
                self._refill(now)
                dispatch = self._take_ready(now)
        except RedisUnavailable as exc:
            self._redis_down(exc, now)
            return None
        if dispatch is None:
            self._wake_at(self._next_poll)
            return None
        self._pace(dispatch.host)
        return self._to_request(dispatch, now)

    def _host_delay(self, host: str) -> float:
        robots = self._robots.get(host)
        return max(self._frontier.min_host_delay, (robots.crawl_delay or 0.0) if robots else 0.0)

    def _pace(self, host: str) -> None:
        """Have Scrapy's downloader keep ``host``'s delay between requests on the wire.

        The frontier spaces leases, but the downloader may send leased requests
        in a burst. So the host's download slot gets the delay (plus
        ``PACE_MARGIN``), no jitter and one request at a time; and since a slot
        measures the delay from when it *decided* to send (a busy reactor can
        put the bytes on the wire tens of milliseconds later),
        ``_on_downloaded`` restarts the clock when each answer arrives. The gap
        between two requests to a host is then at least its delay, for every
        request (revisits, one-off requests, robots.txt). Uses the downloader's
        per-slot settings (Scrapy's DOWNLOAD_SLOTS) and slots, which are not
        public API: guarded.
        """
        delay = self._host_delay(host) + PACE_MARGIN
        if self._paced.get(host) == delay:
            return
        downloader = getattr(self.crawler.engine, "downloader", None)
        per_slot = getattr(downloader, "per_slot_settings", None)
        slots = getattr(downloader, "slots", None)
        if not isinstance(per_slot, dict) or not isinstance(slots, dict):
            return
        per_slot[host] = {**per_slot.get(host, {}), "delay": delay, "jitter": 0.0, "concurrency": 1}
        slot = slots.get(host)
        if slot is not None:
            slot.delay, slot.jitter, slot.concurrency = delay, 0.0, 1
        self._paced[host] = delay

    def _on_downloaded(self, response: Response, request: Request, spider: Spider) -> None:
        """Restart a paced host's delay when its answer arrives (see ``_pace``)."""
        downloader = getattr(self.crawler.engine, "downloader", None)
        key = request.meta.get("download_slot")
        slot = getattr(downloader, "slots", {}).get(key) if key in self._paced else None
        if slot is not None and hasattr(slot, "lastseen"):
            slot.lastseen = max(slot.lastseen, _downloader_clock())

    def has_pending_requests(self) -> bool:
        if self._one_off or self._new_pages or self._buffer:
            return True
        now = time.time()
        if self._next_due_at is None or now - self._next_due_checked > MIN_WAKE * 4:
            try:
                self._next_due_at = self._frontier.next_due_time()
            except RedisUnavailable as exc:
                self._redis_down(exc, now)
                return True  # keep the spider open; the wake-up timer retries
            self._next_due_checked = now
        if self._next_due_at is None:
            return False
        if not self.close_when_idle:
            return True  # wait for pages due in the future
        # "idle" mode ends the run once nothing is due beyond a host delay from now.
        return self._next_due_at <= now + self._longest_host_delay() + MIN_WAKE

    def _longest_host_delay(self) -> float:
        delays = [r.crawl_delay for r in self._robots.values() if r.crawl_delay]
        return max([self._frontier.min_host_delay, *delays])

    def __len__(self) -> int:
        return len(self._one_off) + len(self._new_pages) + len(self._buffer)

    # -- from the frontier to the downloader -------------------------------------
    @property
    def _frontier(self) -> Frontier:
        if self.frontier is None:
            raise RuntimeError("frontier-rate scheduler used before open()")
        return self.frontier

    @property
    def _namespace(self) -> str:
        return str(getattr(self.frontier, "namespace", self._frontier_kwargs.get("namespace")))

    def _redis_down(self, exc: Exception, now: float) -> None:
        """Redis is unreachable: keep what is buffered, warn now and then, retry soon."""
        if now - self._warned_at > 10.0:
            logger.warning("frontier-rate: %s; retrying every %.0f s", exc, WAKE_LIMIT)
            self._warned_at = now
        self.stats.inc_value("frontier_rate/redis_errors")
        self._next_poll = now + WAKE_LIMIT
        self._wake_at(self._next_poll)

    def _flush_new_pages(self, now: float | None = None) -> None:
        """Add the pages enqueued since the last flush in one call.

        With ``now``, only when it pays: a full batch, the oldest page waiting
        ``FLUSH_DELAY``, or nothing in flight (so a lone new page goes at once).
        """
        if not self._new_pages:
            return
        if now is not None and not (
            len(self._new_pages) >= self.batch_size
            or now - self._new_since >= FLUSH_DELAY - CLOCK_SLACK
            or not self._in_flight
        ):
            return
        batch, self._new_pages = self._new_pages, []
        try:
            added = self._frontier.add_many(batch)
        except RedisUnavailable:
            self._new_pages = batch + self._new_pages
            raise
        self.stats.inc_value("frontier_rate/new_pages", added)
        if added:
            self._next_due_at, self._next_due_checked = time.time(), time.time()
            self._next_poll = 0.0

    def _refill(self, now: float) -> None:
        """Lease due pages in one batch; if none, sleep until the next falls due."""
        # Leases held back (host at its concurrency, robots.txt pending) may fill
        # part of the buffer; room for more keeps other hosts from starving.
        room = min(self.batch_size, BUFFER_BATCHES * self.batch_size - len(self._buffer))
        fresh = self._frontier.next_requests(room, now=now) if room > 0 else []
        for dispatch in fresh:
            self._buffer.append((dispatch, now))
        if fresh:
            self._next_poll = now  # more may be due: poll again once these are sent
            return
        if room <= 0:  # buffer full of held pages: a response or robots.txt wakes us
            self._next_poll = now + WAKE_LIMIT
            return
        due = self._frontier.next_due_time()
        self._next_due_at, self._next_due_checked = due, now
        if due is None:
            self._next_poll = now + WAKE_LIMIT
        else:
            self._next_poll = min(max(due, now + MIN_WAKE), now + WAKE_LIMIT)
        self._wake_at(self._next_poll)

    def _take_ready(self, now: float) -> Dispatch | None:
        """The first buffered dispatch whose host has room, known robots rules and
        no Crawl-delay pending.

        Pages leased before a host's robots.txt was read wait here, and leave
        one Crawl-delay apart, so the delay holds from the very first fetch.
        """
        lease_limit = 0.5 * self._frontier.lease_timeout
        for _ in range(len(self._buffer)):
            dispatch, leased_at = self._buffer.popleft()
            if now - leased_at > lease_limit:
                logger.debug("dropping a lease held too long: %s", dispatch.url)
                continue
            host = dispatch.host
            if (
                self._host_load.get(host, 0) < self.per_host
                and self._robots_ready(dispatch, now)
                and self._host_ready_at.get(host, 0.0) <= now + CLOCK_SLACK
            ):
                delay = self._robots[host].crawl_delay if host in self._robots else None
                if delay:
                    self._host_ready_at[host] = now + delay
                return dispatch
            self._buffer.append((dispatch, leased_at))
            if self._host_ready_at.get(host, 0.0) > now:
                self._wake_at(self._host_ready_at[host])
        return None

    def _to_request(self, dispatch: Dispatch, now: float) -> Request:
        assert self.spider is not None
        stored = dispatch.meta or {}
        headers = dict(stored.get("h") or {})
        if self.conditional:
            present = {name.lower() for name in headers}
            if dispatch.etag and "if-none-match" not in present:
                headers["If-None-Match"] = dispatch.etag
            if dispatch.last_modified and "if-modified-since" not in present:
                headers["If-Modified-Since"] = dispatch.last_modified
        meta = dict(stored.get("m") or {})
        self._flights += 1
        flight_id = str(self._flights)
        meta[TOKEN_KEY] = flight_id
        callback = getattr(self.spider, stored.get("cb") or "parse", None)
        validators = bool(dispatch.etag or dispatch.last_modified)
        if self.conditional and validators and self._allows_304(meta):
            callback = self._wrap_callback(callback or self.spider._parse)
        errback_name = stored.get("eb")
        errback = getattr(self.spider, errback_name) if errback_name else None
        self._in_flight[flight_id] = _InFlight(dispatch, now)
        self._host_load[dispatch.host] = self._host_load.get(dispatch.host, 0) + 1
        return Request(
            dispatch.url,
            callback=callback,
            errback=self._wrap_errback(errback, flight_id),
            headers=headers,
            meta=meta,
            cb_kwargs=dict(stored.get("kw") or {}),
            priority=int(stored.get("p") or 0),
            dont_filter=True,
        )

    def _release_buffer(self) -> None:
        """Hand unsent leases back so other crawlers need not wait for them to expire."""
        release = getattr(self.frontier, "release", None)
        for dispatch, _ in self._buffer:
            if release is not None:
                release(dispatch)
        self._buffer.clear()

    # -- from the downloader back to the frontier ---------------------------------
    def _on_response(self, response: Response, request: Request, spider: Spider) -> None:
        if self.obey_crawl_delay and urlsplit(response.url).path == "/robots.txt":
            self._learn_robots(response)
        token = request.meta.get(TOKEN_KEY)
        flight = self._in_flight.get(token) if token else None
        if flight is None or flight.answered is not None:
            return
        flight.answered = response.status
        try:
            self._record_response(response, request, flight, token)
        except RedisUnavailable as exc:  # the lease expires and the page comes back
            self._redis_down(exc, time.time())
        finally:
            if response.url != flight.dispatch.url:
                self.stats.inc_value("frontier_rate/redirected")
                logger.debug("%s redirected to %s", flight.dispatch.url, response.url)
            self._finish(token)

    def _record_response(
        self, response: Response, request: Request, flight: _InFlight, token: str
    ) -> None:
        status = response.status
        if 200 <= status < 300:
            observation = self._frontier.observe(
                flight.dispatch,
                fingerprint=self.fingerprinter(response.body, response.url, response.headers),
                status=status,
                etag=header_value(response.headers, "ETag"),
                last_modified=header_value(response.headers, "Last-Modified"),
            )
            self._count_observation(observation, flight.dispatch, not_modified=False)
            request.meta[RESULT_KEY] = _result(observation, not_modified=False)
        elif status == 304:
            observation = self._frontier.observe(
                flight.dispatch, not_modified=True, status=status,
                etag=header_value(response.headers, "ETag") or flight.dispatch.etag,
                last_modified=header_value(response.headers, "Last-Modified")
                or flight.dispatch.last_modified,
            )
            self._count_observation(observation, flight.dispatch, not_modified=True)
            request.meta[RESULT_KEY] = _result(observation, not_modified=True)
            if len(self._not_modified) > 10_000:  # tokens some middleware swallowed
                self._not_modified.clear()
            self._not_modified.add(token)
        else:
            self._frontier.failed(flight.dispatch, f"http {status}", status=status)
            self.stats.inc_value("frontier_rate/failed")
            if status in (404, 410):
                self.stats.inc_value(f"frontier_rate/http_{status}")
                if self._frontier_page_gone(flight.dispatch.url):
                    self.stats.inc_value("frontier_rate/gone")

    def _frontier_page_gone(self, url: str) -> bool:
        page = self._frontier.page(url)
        return page is not None and page.get("status") == "gone"

    def _count_observation(
        self, observation: Observation, dispatch: Dispatch, *, not_modified: bool
    ) -> None:
        if not observation.accepted:
            self.stats.inc_value("frontier_rate/stale_lease")  # expired while in flight
            return
        self.stats.inc_value(
            "frontier_rate/changed" if observation.changed else "frontier_rate/unchanged"
        )
        if not_modified:
            self.stats.inc_value("frontier_rate/not_modified")
        self._observed += 1
        fetches = getattr(dispatch, "fetches", None)
        if fetches is not None:
            if fetches > 0:
                self.stats.inc_value("frontier_rate/revisits")
        else:  # approximation: observations beyond the pages this process added
            new_pages = self.stats.get_value("frontier_rate/new_pages", 0)
            self.stats.set_value("frontier_rate/revisits", max(0, self._observed - new_pages))

    def _allows_304(self, meta: dict[str, Any]) -> bool:
        """Whether HttpErrorMiddleware would pass a 304 on to the callback."""
        if meta.get("handle_httpstatus_all"):
            return True
        if "handle_httpstatus_list" in meta:
            return 304 in meta["handle_httpstatus_list"]
        settings = self.crawler.settings
        if settings.getbool("HTTPERROR_ALLOW_ALL"):
            return True
        allowed = getattr(
            self.spider, "handle_httpstatus_list", settings.getlist("HTTPERROR_ALLOWED_CODES")
        )
        return 304 in {int(code) for code in allowed}

    def _wrap_callback(self, callback: Callable[..., Any]) -> Callable[..., Any]:
        """Only where a spider lets 304s through: keep observed 304s from the callback."""

        def frontier_rate_callback(response: Response, **kwargs: Any) -> Any:
            token = response.meta.get(TOKEN_KEY)
            if response.status == 304 and token in self._not_modified:
                self._not_modified.discard(token)
                return None
            return callback(response, **kwargs)

        return frontier_rate_callback

    def _wrap_errback(
        self, errback: Callable[[Failure], Any] | None, token: str
    ) -> Callable[[Failure], Any]:
        """The errback Scrapy calls: report the failure, then run the spider's errback."""

        def frontier_rate_errback(failure: Failure) -> Any:
            request = getattr(failure, "request", None)
            token = request.meta.get(TOKEN_KEY) if request is not None else None
            flight = self._in_flight.get(token) if token else None
            if token in self._not_modified:
                self._not_modified.discard(token)
                return None  # a 304, observed as unchanged: not an error for the spider
            if flight is not None:
                reason = type(failure.value).__name__
                if isinstance(failure.value, IgnoreRequest):
                    reason = f"ignored: {failure.value}"
                try:
                    self._frontier.failed(flight.dispatch, reason)
                    self.stats.inc_value("frontier_rate/failed")
                except RedisUnavailable as exc:
                    self._redis_down(exc, time.time())
                self._finish(token)
            if errback is None:
                return failure
            return errback(failure)

        frontier_rate_errback.frontier_rate_token = token  # type: ignore[attr-defined]
        return frontier_rate_errback

    def _finish(self, token: str) -> None:
        flight = self._in_flight.pop(token, None)
        if flight is None:
            return
        host = flight.dispatch.host
        load = self._host_load.get(host, 0) - 1
        if load > 0:
            self._host_load[host] = load
        else:
            self._host_load.pop(host, None)
        self._next_poll = 0.0 if self._buffer else self._next_poll

    # -- robots.txt Crawl-delay ----------------------------------------------------
    def _robots_ready(self, dispatch: Dispatch, now: float) -> bool:
        """True once this host's robots.txt is known (fetching it if stale).

        With ROBOTSTXT_OBEY, Scrapy's RobotsTxtMiddleware reads robots.txt
        before the first request to a host leaves, and ``_on_response`` learns
        the Crawl-delay from that answer before the request reaches its download
        slot; this scheduler then fetches robots.txt itself only to refresh it.
        """
        if not self.obey_crawl_delay:
            return True
        state = self._robots.setdefault(dispatch.host, _Robots())
        if state.fetched_at is None and self.scrapy_reads_robots:
            return True
        stale = state.fetched_at is None or now - state.fetched_at > self.robots_ttl
        if stale and not state.pending:
            state.pending = True
            self._pace(dispatch.host)
            parts = urlsplit(dispatch.url)
            url = f"{parts.scheme}://{parts.netloc}/robots.txt"
            deferred_from_coro(self._fetch_robots(dispatch.host, url, state))
        return state.fetched_at is not None

    async def _fetch_robots(self, host: str, url: str, state: _Robots) -> None:
        try:
            request = Request(url, meta={"dont_obey_robotstxt": True, "dont_retry": False},
                              priority=1000, dont_filter=True)
            await _download(self.crawler, request)  # _on_response reads the answer
            self.stats.inc_value("frontier_rate/robots_fetched")
        except Exception as exc:  # a missing robots.txt must never stop the crawl
            logger.debug("robots.txt of %s not fetched: %r", host, exc)
        state.fetched_at, state.pending = state.fetched_at or time.time(), False
        self._wake_at(time.time())

    def _learn_robots(self, response: Response) -> None:
        """Apply the Crawl-delay of any robots.txt answer that passes the engine."""
        from protego import Protego

        host = urlsplit(response.url).hostname
        if not host:
            return
        state = self._robots.setdefault(host, _Robots())
        delay: float | None = None
        if 200 <= response.status < 300:
            try:
                body = response.body.decode("utf-8", errors="replace")
                delay = Protego.parse(body).crawl_delay(self.robots_agent)
            except Exception as exc:  # a malformed robots.txt means no Crawl-delay
                logger.debug("robots.txt of %s not parsed: %r", host, exc)
        state.fetched_at = time.time()
        if delay is not None and delay != state.crawl_delay and not self._closing:
            logger.info("robots.txt Crawl-delay %.3gs for %s", delay, host)
            self._frontier.set_host_delay(host, float(delay))
        state.crawl_delay = delay
        self._pace(host)

    # -- wake-up, close, logging ------------------------------------------------------
    def _wake_at(self, when: float) -> None:
        """Have the engine call next_request at ``when`` (not on its 5 s heartbeat)."""
        if self._closing or (self._wakeup is not None and self._wakeup_at <= when):
            return
        if self._wakeup is not None:
            self._wakeup.cancel()
        self._wakeup_at = when
        self._wakeup = call_later(max(0.0, when - time.time()), self._wake)

    def _wake(self) -> None:
        self._wakeup, self._wakeup_at = None, float("inf")
        # Private Scrapy API (engine._slot.nextcall), guarded: without it the
        # engine still polls on its 5-second heartbeat.
        slot = getattr(self.crawler.engine, "_slot", None)
        nextcall = getattr(slot, "nextcall", None)
        if nextcall is not None and callable(getattr(nextcall, "schedule", None)):
            nextcall.schedule()

    def _start_loop(self, func: Callable[[], None], interval: float) -> None:
        loop = create_looping_call(func)
        loop.start(interval, now=False)
        self._loops.append(loop)

    def _close_spider(self, why: str) -> None:
        if self._closing:
            return
        reason = f"frontier_rate_{why}"
        logger.info("frontier-rate closing the spider: %s", reason)
        engine = self.crawler.engine
        deferred_from_coro(engine.close_spider_async(reason=reason))

    def _sweep_in_flight(self, now: float) -> None:
        """Forget requests that never came back (their leases have expired by now)."""
        limit = self._frontier.lease_timeout
        for token in [t for t, f in self._in_flight.items() if now - f.sent_at > limit]:
            logger.debug("no outcome for %s; its lease expired", self._in_flight[token].dispatch.url)
            self._finish(token)

    def _log_summary(self) -> None:
        if self.frontier is None:
            return
        self._sweep_in_flight(time.time())
        try:
            summary = self.frontier.stats()
        except Exception as exc:
            logger.warning("frontier-rate stats unavailable: %r", exc)
            return
        threshold = summary.get("nu")
        if threshold is not None:
            self.stats.set_value("frontier_rate/threshold", threshold)
        logger.info(
            "frontier-rate [%s]: %s", self._namespace,
            ", ".join(f"{key}={_short(value)}" for key, value in sorted(summary.items())),
        )


async def _download(crawler: Crawler, request: Request) -> Response:
    engine = crawler.engine
    download_async = getattr(engine, "download_async", None)
    if download_async is not None:
        return await download_async(request)
    from scrapy.utils.defer import maybe_deferred_to_future

    return await maybe_deferred_to_future(engine.download(request))


def _result(observation: Any, *, not_modified: bool) -> dict[str, Any]:
    return {
        "changed": bool(observation.changed),
        "not_modified": not_modified,
        "estimate": observation.estimate,
        "next_due": observation.next_due,
    }


def _downloader_clock() -> float:
    """The clock Scrapy's download slots keep ``lastseen`` in (monotonic in 2.19)."""
    from scrapy.core import downloader

    return getattr(downloader, "monotonic", time.monotonic)()


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)

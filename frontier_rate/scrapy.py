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

Faults and bad input (issue 8):

- Redis unreachable or slow: results (``observe`` / ``failed`` with their
  ``fetched_at``) that cannot reach Redis are held locally and replayed in
  order when it answers again (both calls are idempotent per lease token, so
  a result whose call timed out after the server ran it is not counted
  twice). A circuit breaker makes no Redis call at all until the next attempt
  (1, 2, 4 ... at most 30 s apart), so one reactor turn blocks for at most
  one ``FRONTIER_RATE_REDIS_TIMEOUT``. Buffered leases keep being fetched; no
  new lease is taken until every held result is in. The held queue needs no
  cap of its own: it only holds results of leases already taken, at most
  ``BUFFER_BATCHES`` batches plus the requests in flight. A result replayed
  after its lease expired (an outage longer than ``FRONTIER_RATE_LEASE_
  TIMEOUT``) is refused as stale and that page is fetched again.
- URLs the frontier cannot keep (not http(s), no host, longer than the
  engine's ``MAX_URL_LENGTH``, whitespace or control characters) are refused
  one by one with a WARNING and ``frontier_rate/rejected``; the rest of the
  batch goes in.
- Bodies past ``FRONTIER_RATE_MAX_BODY`` are cut (``StopDownload``) and
  fingerprinted by their first bytes plus the declared Content-Length.
- robots.txt Crawl-delays that are not numbers, negative or beyond
  ``FRONTIER_RATE_MAX_CRAWL_DELAY`` are ignored or clamped with a WARNING.
- Conditional headers carry a validator only when it is exactly the
  printable-ASCII value the server sent; anything else is not sent.
- Closing while Redis is still unreachable: the held results and the pages
  not yet added are written to a spool file (``frontier_rate.spool``) in
  ``FRONTIER_RATE_SPOOL_DIR`` and replayed by the next crawl of the namespace.
"""

from __future__ import annotations

import logging
import math
import re
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest, StopDownload
from scrapy.utils.asyncio import call_later, create_looping_call
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.misc import build_from_crawler, load_object

from frontier_rate.connection import RedisUnavailable, data_dir, redact_url
from frontier_rate.engine import MAX_VALIDATOR_LENGTH, parse_url
from frontier_rate.fingerprint import DEFAULT_MAX_BODY, Fingerprinter, header_value
from frontier_rate.settings import (
    DONT_REVISIT_KEY,
    REDIS_RETRY_FIRST,
    REDIS_RETRY_MAX,
    WEIGHT_KEY,
    close_after,
    frontier_kwargs,
    json_value,
    page_weight,
    strip_patterns,
)
from frontier_rate.spool import Spool, call_entry, page_entry, read_entry

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
``{"changed": bool, "not_modified": bool, "estimate": float, "next_due": float}``.
While Redis is unreachable the result is held for later and the value is
``{"held": True, "not_modified": bool, "changed": None, "estimate": None,
"next_due": None}``."""

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
REPLAY_BATCH = 256
"""Held observations sent per ``observe_many`` call when Redis is back."""
MAX_REJECTION_WARNINGS = 100
"""Refused URLs logged at WARNING level per crawl; later ones at DEBUG (all are counted)."""
DEFAULT_MAX_CRAWL_DELAY = 60.0
"""Largest robots.txt Crawl-delay obeyed (FRONTIER_RATE_MAX_CRAWL_DELAY); larger ones are clamped."""
ROBOTS_MAX_BYTES = 500 * 1024
"""Bytes of a robots.txt that are parsed (Google's limit, RFC 9309 asks for at least 500 KiB)."""
_PRINTABLE_ASCII = re.compile(r"[\x20-\x7e]+")
_CRAWL_DELAY_LINE = re.compile(r"^[ \t]*crawl[-_ ]?delay[ \t]*:[ \t]*([^\r\n#]*)", re.I | re.M)

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


@dataclass(eq=False)
class _Result:
    """A call for Redis in the order it happened: kept until Redis has taken it.

    ``kind``: "observe" (``args`` are ``Frontier.observe`` keywords, with
    ``fetched_at``), "failed" (``reason``, ``status``, ``now``) or
    "host_delay" (``host``, ``seconds``).
    """

    kind: str
    dispatch: Dispatch | None
    args: dict[str, Any]
    observation: Observation | None = None
    sent: bool = False  # Redis has taken it
    held: bool = False  # waited for Redis at least once


def clean_validator(value: str | None) -> str | None:
    """``value`` if it may go back verbatim in If-None-Match / If-Modified-Since, else None.

    Only printable ASCII (space to ``~``) up to the engine's
    ``MAX_VALIDATOR_LENGTH``: no control character (CR, LF, NUL ...) can end
    up in a request header, and the value sent is byte for byte the one the
    server sent. A validator with other bytes (legal but rare) means no
    conditional request for that page; change detection still works.
    """
    if not isinstance(value, str) or not value or len(value) > MAX_VALIDATOR_LENGTH:
        return None
    return value if _PRINTABLE_ASCII.fullmatch(value) else None


def robots_crawl_delay(body: bytes, agent: str, host: str, maximum: float) -> float | None:
    """The Crawl-delay robots.txt ``body`` sets for ``agent``, made safe.

    Parsed with Protego (as Scrapy does) from the first ``ROBOTS_MAX_BYTES``;
    a delay above ``maximum`` is clamped to it with a WARNING. Values Protego
    ignores (not a number, negative, nan, inf) are named in a WARNING too, so
    a site owner's typo is visible. Never raises.
    """
    from protego import Protego

    text = body[:ROBOTS_MAX_BYTES].decode("utf-8", errors="replace")
    for match in _CRAWL_DELAY_LINE.finditer(text):
        raw = match.group(1).strip()
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not 0 <= value < math.inf:
            logger.warning("robots.txt of %s: Crawl-delay %r is not a number of seconds >= 0; "
                           "ignored", host, raw[:50])
    try:
        delay = Protego.parse(text).crawl_delay(agent)
    except Exception as exc:  # a malformed robots.txt means no Crawl-delay
        logger.debug("robots.txt of %s not parsed: %r", host, exc)
        return None
    if delay is None:
        return None
    delay = float(delay)
    if not 0 <= delay < math.inf:
        return None
    if delay > maximum:
        logger.warning("robots.txt of %s: Crawl-delay %g s clamped to %g s "
                       "(FRONTIER_RATE_MAX_CRAWL_DELAY)", host, delay, maximum)
        return maximum
    return delay


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
        self.max_crawl_delay = settings.getfloat(
            "FRONTIER_RATE_MAX_CRAWL_DELAY", DEFAULT_MAX_CRAWL_DELAY
        )
        if not 0 <= self.max_crawl_delay < math.inf:
            raise ValueError(f"FRONTIER_RATE_MAX_CRAWL_DELAY={self.max_crawl_delay!r} must be "
                             "a finite number of seconds >= 0")
        self.scrapy_reads_robots = settings.getbool("ROBOTSTXT_OBEY", False)
        self.robots_agent: str = (
            settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT") or "*"
        )
        self.close_after, self.close_when_idle = close_after(
            settings.get("FRONTIER_RATE_CLOSE_AFTER")
        )
        self.log_interval = settings.getfloat("FRONTIER_RATE_LOG_INTERVAL", 60.0)
        self.spool_dir = settings.get("FRONTIER_RATE_SPOOL_DIR") or (
            f"{settings['JOBDIR']}/frontier-rate" if settings.get("JOBDIR") else str(data_dir() / "spool")
        )
        self._frontier_kwargs = frontier_kwargs(settings.get)
        if self.close_when_idle:  # "idle" means nothing due: do not lease pages before they are
            self._frontier_kwargs.setdefault("fill_budget", False)
        dupefilter_cls = load_object(settings["DUPEFILTER_CLASS"])
        self.dupefilter = build_from_crawler(dupefilter_cls, crawler)

        self._new_pages: list[tuple[str, float, dict[str, Any]]] = []
        self._new_since = 0.0  # when the oldest of _new_pages was enqueued
        self._one_off: deque[Request] = deque()
        self._buffer: deque[tuple[Dispatch, float]] = deque()
        self._in_flight: dict[str, _InFlight] = {}  # by flight id (TOKEN_KEY)
        self._flights = 0
        self._observed = 0
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
        self._held: deque[_Result] = deque()  # results Redis has not taken yet, in order
        self._outage_since: float | None = None  # when Redis stopped answering
        self._retry_at = 0.0  # no Redis call before this while it is down
        self._backoff = REDIS_RETRY_FIRST
        self._replayed_in_outage = 0
        self._rejections = 0
        self._received: weakref.WeakKeyDictionary[Request, int] = weakref.WeakKeyDictionary()

        crawler.signals.connect(self._on_response, signal=signals.response_received)
        crawler.signals.connect(self._on_downloaded, signal=signals.response_downloaded)
        crawler.signals.connect(self._on_bytes, signal=signals.bytes_received)

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
        self._replay_spool()
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
            self._drain(force=True)  # one last attempt, whatever the retry schedule
            if self._outage_since is None:
                try:
                    self._flush_new_pages()
                except RedisUnavailable as exc:
                    self._redis_down(exc)
            if self._outage_since is None:
                self._release_buffer()
                self._log_summary()
            else:
                self._save_spool()
            self.frontier.close()
        self.dupefilter.close(reason)

    def _save_spool(self) -> None:
        """Closing while Redis is down: write what it has not taken to the spool."""
        entries = [page_entry(*page) for page in self._new_pages]
        entries += [call_entry(held.kind, held.dispatch, held.args) for held in self._held]
        if not entries:
            return
        try:
            path = Spool(self.spool_dir, self._namespace).save(entries)
        except (OSError, ValueError) as exc:
            logger.error("frontier-rate: could not write the spool in %s: %s", self.spool_dir, exc)
            self._report_loss()
            return
        results = self._held_results()
        self.stats.set_value("frontier_rate/spooled", len(entries))
        logger.warning(
            "frontier-rate: closing while Redis at %s is unreachable: %d fetch results and %d new "
            "pages saved to %s; the next crawl of namespace %r replays them (results whose lease "
            "has expired by then, after %.0f s, are refused and those pages fetched again)",
            redact_url(self._redis_url), results, len(self._new_pages), path, self._namespace,
            self._frontier.lease_timeout,
        )

    def _replay_spool(self) -> None:
        """Queue what an earlier crawl of this namespace could not give Redis, and send it."""
        entries = Spool(self.spool_dir, self._namespace).claim()
        if not entries:
            return
        pages = results = 0
        for entry in entries:
            try:
                kind, item, args = read_entry(entry)
            except ValueError as exc:
                logger.warning("frontier-rate: skipping a spool entry of namespace %r: %s",
                               self._namespace, exc)
                continue
            if kind == "page":
                self._new_pages.append(item)
                pages += 1
            else:
                self._held.append(_Result(kind, item, args, held=True))
                results += 1
        self._new_since = time.time()
        logger.info("frontier-rate: replaying %d results and %d new pages an earlier crawl of "
                    "namespace %r could not give Redis", results, pages, self._namespace)
        self.stats.inc_value("frontier_rate/spool_replayed", results + pages)
        self._drain(force=True)

    def _report_loss(self) -> None:
        """Closing while Redis is down: say what is lost and why."""
        results = sum(1 for held in self._held if held.kind != "host_delay")
        self.stats.set_value("frontier_rate/lost_results", results)
        logger.warning(
            "frontier-rate: closing while Redis at %s is unreachable: %d fetch results lost "
            "(their leases expire after %.0f s and those pages are fetched again; these "
            "fetches are not counted) and %d new pages not added",
            redact_url(self._redis_url), results, self._frontier.lease_timeout,
            len(self._new_pages),
        )

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
        try:
            parse_url(request.url)
        except ValueError as exc:
            self._reject(exc)
            return False
        page = (request.url, _weight(request), request_to_page_meta(request, self.spider))
        if not self._new_pages:
            self._new_since = time.time()
            self._wake_at(self._new_since + FLUSH_DELAY)
        self._new_pages.append(page)
        if len(self._new_pages) >= self.batch_size and self._redis_ready(time.time()):
            try:
                self._flush_new_pages()
            except RedisUnavailable as exc:
                self._redis_down(exc)
        return True

    def _reject(self, exc: ValueError) -> None:
        """A page the frontier cannot keep: count it, name it (the engine truncates it)."""
        self.stats.inc_value("frontier_rate/rejected")
        self._rejections += 1
        if self._rejections <= MAX_REJECTION_WARNINGS:
            logger.warning("frontier-rate: request refused, not a page the frontier can keep: %s",
                           exc)
            if self._rejections == MAX_REJECTION_WARNINGS:
                logger.warning("frontier-rate: %d requests refused; further refusals are logged "
                               "at DEBUG level (stat frontier_rate/rejected counts them all)",
                               MAX_REJECTION_WARNINGS)
        else:
            logger.debug("frontier-rate: request refused: %s", exc)

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
        if self._drain(now) and self._redis_ready(now):
            try:
                self._flush_new_pages(now)
            except RedisUnavailable as exc:
                self._redis_down(exc)
        dispatch = self._take_ready(now)  # buffered leases leave even while Redis is down
        if (dispatch is None and now >= self._next_poll - CLOCK_SLACK
                and self._redis_ready(now) and not self._held):
            try:
                self._refill(now)
            except RedisUnavailable as exc:
                self._redis_down(exc)
            dispatch = self._take_ready(now)
        if dispatch is None:
            self._wake_at(self._retry_at if self._outage_since is not None else self._next_poll)
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
        if self._one_off or self._new_pages or self._buffer or self._held:
            return True
        if self._outage_since is not None:
            return True  # keep the spider open; the wake-up timer retries
        now = time.time()
        if self._next_due_at is None or now - self._next_due_checked > MIN_WAKE * 4:
            try:
                self._next_due_at = self._frontier.next_due_time()
            except RedisUnavailable as exc:
                self._redis_down(exc)
                return True
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

    # -- Redis outages: circuit breaker, held results, replay --------------------------
    def _redis_ready(self, now: float) -> bool:
        """Whether a Redis call may be made now (the breaker is closed or due a retry)."""
        return self._outage_since is None or now >= self._retry_at - CLOCK_SLACK

    def _redis_down(self, exc: Exception) -> None:
        """A Redis call failed: open the breaker until the next attempt (backing off)."""
        now = time.time()
        self.stats.inc_value("frontier_rate/redis_errors")
        for result in self._held:
            result.held = True
        url = redact_url(self._redis_url)
        reason = str(exc)
        if f" at {url}: " in reason:  # the engine's message names the URL already
            reason = reason.split(f" at {url}: ", 1)[1]
        if self._outage_since is None:
            self._outage_since, self._backoff, self._replayed_in_outage = now, REDIS_RETRY_FIRST, 0
            self.stats.inc_value("frontier_rate/redis_outages")
            logger.warning("frontier-rate: Redis at %s unreachable (%s); holding %d results, "
                           "retrying in %.0f s", url, reason, self._held_results(), self._backoff)
        else:
            self._backoff = min(2 * self._backoff, REDIS_RETRY_MAX)
            logger.info("frontier-rate: Redis at %s still unreachable after %.0f s (%s); "
                        "holding %d results, retrying in %.0f s", url, now - self._outage_since,
                        reason, self._held_results(), self._backoff)
        self._retry_at = now + self._backoff
        self._wake_at(self._retry_at)

    def _redis_up(self) -> None:
        now = time.time()
        assert self._outage_since is not None
        logger.warning("frontier-rate: Redis at %s back after %.1f s; replayed %d results",
                       redact_url(self._redis_url), now - self._outage_since,
                       self._replayed_in_outage)
        self._outage_since, self._backoff, self._retry_at = None, REDIS_RETRY_FIRST, 0.0
        self._next_poll = 0.0
        self._wake_at(now)

    def _held_results(self) -> int:
        return sum(1 for held in self._held if held.kind != "host_delay")

    def _submit(self, result: _Result) -> _Result:
        """Queue a call behind any held ones and send what Redis takes now (never raises
        RedisUnavailable: an unreachable Redis leaves it held)."""
        self._held.append(result)
        self._drain()
        if not result.sent:
            result.held = True
        return result

    def _drain(self, now: float | None = None, *, force: bool = False) -> bool:
        """Send the held calls in order; False when Redis is (still) unreachable.

        Makes no Redis call while the breaker is open (unless ``force``); an
        attempt with nothing held probes with ``next_due_time``.
        """
        if not self._held and self._outage_since is None:
            return True
        if not force and not self._redis_ready(time.time() if now is None else now):
            return False
        try:
            if not self._held:
                self._next_due_at = self._frontier.next_due_time()
                self._next_due_checked = time.time()
            while self._held:
                self._send_held()
        except RedisUnavailable as exc:
            self._redis_down(exc)
            return False
        if self._outage_since is not None:
            self._redis_up()
        return True

    def _send_held(self) -> None:
        """Send the oldest held call (with the observations right behind it, in one batch)."""
        first = self._held[0]
        if first.kind == "observe":
            batch: list[_Result] = []
            for result in self._held:
                if result.kind != "observe" or len(batch) >= REPLAY_BATCH:
                    break
                batch.append(result)
            while True:
                try:
                    observations = self._frontier.observe_many(
                        [(result.dispatch, result.args) for result in batch]
                    )
                    break
                except ValueError as exc:  # bad data cannot block the queue
                    if len(batch) > 1:
                        batch = batch[:1]  # the chunks before the bad one may have applied
                        continue
                    logger.warning("frontier-rate: dropping an observation of %s the frontier "
                                   "refused: %s", first.dispatch.url if first.dispatch else "?", exc)
                    self._held.popleft()
                    return
            for result, observation in zip(batch, observations, strict=True):
                result.observation = observation
                self._held.popleft()
                self._applied(result)
            return
        try:
            if first.kind == "failed":
                assert first.dispatch is not None
                self._frontier.failed(first.dispatch, first.args["reason"],
                                      status=first.args["status"], now=first.args["now"])
            else:
                self._frontier.set_host_delay(first.args["host"], first.args["seconds"])
        except ValueError as exc:  # bad data cannot block the queue
            logger.warning("frontier-rate: dropping a %s call the frontier refused: %s",
                           first.kind, exc)
        self._held.popleft()
        self._applied(first)

    def _applied(self, result: _Result) -> None:
        result.sent = True
        if result.held and result.kind != "host_delay":
            self._replayed_in_outage += 1
            self.stats.inc_value("frontier_rate/replayed")
        if result.kind == "observe" and result.observation is not None:
            assert result.dispatch is not None
            self._count_observation(result.observation, result.dispatch,
                                    not_modified=bool(result.args.get("not_modified")))
        elif result.kind == "failed" and result.args["status"] in (404, 410):
            assert result.dispatch is not None
            if self._frontier_page_gone(result.dispatch.url):
                self.stats.inc_value("frontier_rate/gone")

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
            try:
                added = self._frontier.add_many(batch)
            except ValueError:  # one bad page refuses the batch: add one at a time
                added = 0
                for page in batch:
                    try:
                        added += self._frontier.add_many([page])
                    except ValueError as exc:
                        self._reject(exc)
        except RedisUnavailable:
            self._new_pages = batch + self._new_pages  # add_many is idempotent
            raise
        self.stats.inc_value("frontier_rate/new_pages", added)
        if added:
            self._next_due_at, self._next_due_checked = time.time(), time.time()
            self._next_poll = 0.0

    def _refill(self, now: float) -> None:
        """Lease due pages in one batch; if none, sleep until the next falls due (or, with
        ``fill_budget``, until the budget holds another token)."""
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
            if self._frontier.fill_budget:  # the next token may lease a page not yet due
                self._next_poll = min(self._next_poll,
                                      now + max(MIN_WAKE, 1.0 / self._frontier.budget))
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
        headers: dict[str, Any] = {
            name: [_header_bytes(value) for value in values]
            for name, values in (stored.get("h") or {}).items()
        }
        etag = clean_validator(dispatch.etag)
        last_modified = clean_validator(dispatch.last_modified)
        if self.conditional:
            present = {name.lower() for name in headers}
            if etag and "if-none-match" not in present:
                headers["If-None-Match"] = etag.encode("ascii")
            if last_modified and "if-modified-since" not in present:
                headers["If-Modified-Since"] = last_modified.encode("ascii")
        meta = dict(stored.get("m") or {})
        self._flights += 1
        flight_id = str(self._flights)
        meta[TOKEN_KEY] = flight_id
        callback = getattr(self.spider, stored.get("cb") or "parse", None)
        validators = bool(etag or last_modified)
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
        dispatches = [dispatch for dispatch, _ in self._buffer]
        self._buffer.clear()
        if not dispatches:
            return
        try:
            released = self._frontier.release_many(dispatches)
        except RedisUnavailable as exc:
            logger.warning("frontier-rate: could not hand back %d unsent leases (%s); they "
                           "expire after FRONTIER_RATE_LEASE_TIMEOUT", len(dispatches), exc)
            return
        self.stats.inc_value("frontier_rate/released", released)

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
        finally:
            if response.url != flight.dispatch.url:
                self.stats.inc_value("frontier_rate/redirected")
                logger.debug("%s redirected to %s", flight.dispatch.url, response.url)
            self._finish(token)

    def _record_response(
        self, response: Response, request: Request, flight: _InFlight, token: str
    ) -> None:
        """Observe a 2xx or 304, report anything else as failed (held if Redis is down)."""
        status, now, dispatch = response.status, time.time(), flight.dispatch
        if 200 <= status < 300 or status == 304:
            not_modified = status == 304
            args = {"status": status, "fetched_at": now,
                    "etag": self._validator(response, "ETag"),
                    "last_modified": self._validator(response, "Last-Modified"),
                    "served_at": header_value(response.headers, "Date")}
            if not_modified:
                args["not_modified"] = True
                args["etag"] = args["etag"] or clean_validator(dispatch.etag)
                args["last_modified"] = (args["last_modified"]
                                         or clean_validator(dispatch.last_modified))
                if len(self._not_modified) > 10_000:  # tokens some middleware swallowed
                    self._not_modified.clear()
                self._not_modified.add(token)
            else:
                truncated = "download_stopped" in response.flags
                args["fingerprint"] = self.fingerprinter(
                    response.body, response.url, response.headers, truncated=truncated,
                    full_length=_content_length(response.headers) if truncated else None,
                )
            result = self._submit(_Result("observe", dispatch, args))
            request.meta[RESULT_KEY] = _result(result.observation, not_modified=not_modified)
            return
        self.stats.inc_value("frontier_rate/failed")
        if status in (404, 410):
            self.stats.inc_value(f"frontier_rate/http_{status}")
        self._submit(_Result("failed", dispatch,
                             {"reason": f"http {status}", "status": status, "now": now}))

    def _validator(self, response: Response, name: str) -> str | None:
        """A validator header of ``response`` that may be sent back verbatim, or None."""
        value = header_value(response.headers, name)
        clean = clean_validator(value)
        if value and clean is None:
            self.stats.inc_value("frontier_rate/bad_validator")
            logger.debug("not keeping %s %r of %s: not printable ASCII of at most %d characters",
                         name, value[:100], response.url, MAX_VALIDATOR_LENGTH)
        return clean

    def _on_bytes(self, data: bytes, request: Request, spider: Spider) -> None:
        """Stop a download of this scheduler's past ``FRONTIER_RATE_MAX_BODY`` bytes.

        The response keeps what arrived (``"download_stopped"`` in its flags)
        and is fingerprinted by its first ``max_body`` bytes plus its declared
        Content-Length, so memory stays bounded by the cap whatever the size
        of the body. Other requests (one-off, robots.txt) are not touched.
        """
        if TOKEN_KEY not in request.meta:
            return
        received = self._received.get(request, 0) + len(data)
        if received <= self.fingerprinter.max_body:
            self._received[request] = received
            return
        self._received.pop(request, None)
        self.stats.inc_value("frontier_rate/body_cut")
        logger.debug("frontier-rate: download of %s stopped after %d bytes "
                     "(FRONTIER_RATE_MAX_BODY=%d)", request.url, received,
                     self.fingerprinter.max_body)
        raise StopDownload(fail=False)

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
                self.stats.inc_value("frontier_rate/failed")
                self._submit(_Result("failed", flight.dispatch,
                                     {"reason": reason, "status": None, "now": time.time()}))
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
        host = urlsplit(response.url).hostname
        if not host:
            return
        state = self._robots.setdefault(host, _Robots())
        delay: float | None = None
        if 200 <= response.status < 300:
            delay = robots_crawl_delay(response.body, self.robots_agent, host,
                                       self.max_crawl_delay)
        state.fetched_at = time.time()
        if delay is not None and delay != state.crawl_delay and not self._closing:
            logger.info("robots.txt Crawl-delay %.3gs for %s", delay, host)
            self._submit(_Result("host_delay", None, {"host": host, "seconds": delay}))
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
        now = time.time()
        self._sweep_in_flight(now)
        if self._outage_since is not None:
            logger.info("frontier-rate [%s]: Redis unreachable for %.0f s; holding %d results",
                        self._namespace, now - self._outage_since, self._held_results())
            return
        try:
            summary = self.frontier.stats()
        except RedisUnavailable as exc:
            self._redis_down(exc)
            return
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
    if observation is None:  # held until Redis answers again
        return {"held": True, "changed": None, "not_modified": not_modified,
                "estimate": None, "next_due": None}
    return {
        "changed": bool(observation.changed),
        "not_modified": not_modified,
        "estimate": observation.estimate,
        "next_due": observation.next_due,
    }


def _content_length(headers: Any) -> int | None:
    """The declared Content-Length as a non-negative int, or None."""
    value = header_value(headers, "Content-Length")
    try:
        length = int(value) if value is not None else -1
    except ValueError:
        return None
    return length if length >= 0 else None


def _header_bytes(value: Any) -> bytes:
    """A stored request header value (decoded as Latin-1 when stored) as its original bytes."""
    text = str(value)
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8")


def _downloader_clock() -> float:
    """The clock Scrapy's download slots keep ``lastseen`` in (monotonic in 2.19)."""
    from scrapy.core import downloader

    return getattr(downloader, "monotonic", time.monotonic)()


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)

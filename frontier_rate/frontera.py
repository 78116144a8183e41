"""Frontera backend adapter: a revisiting frontier for Frontera 0.7 / scrapy-frontera.

Enable it in a Scrapy project that uses scrapy-frontera::

    SCHEDULER = "scrapy_frontera.scheduler.FronteraScheduler"
    BACKEND = "frontier_rate.frontera.RevisitBackend"
    FRONTIER_RATE_REDIS_URL = "redis://localhost:6379/0"   # leave out: embedded Redis
    EXTENSIONS = {"frontier_rate.frontera.KeepAlive": 500}  # keep the spider open for revisits

(plus scrapy-frontera's spider and downloader middlewares and its
``FRONTERA_SCHEDULER_*`` settings; the README section lists them).

``RevisitBackend`` drives the same ``frontier_rate.Frontier`` as the Scrapy
adapter and the CLI, so a namespace's state is shared with, and inspectable
by, them. How a page travels:

1. ``add_seeds`` / ``links_extracted``: a GET request becomes a page
   (``Frontier.add_many``). Its callback and errback names, cb_kwargs, Scrapy
   meta, headers and cookies are stored as JSON (never pickled); anything JSON
   cannot carry raises ``ValueError`` naming the URL and key. Non-GET requests
   and ``dont_revisit`` requests are handed out once from a local queue.
2. ``get_next_requests``: due pages come back as leased ``Dispatch`` objects
   and leave as frontera Requests whose ``meta[b"scrapy_meta"]`` (the Scrapy
   request meta that scrapy-frontera rebuilds) and ``meta[b"frontier_rate_dispatch"]``
   carry the lease (``DISPATCH_KEY``), with ``If-None-Match`` /
   ``If-Modified-Since`` from the stored validators. Pages of overused
   download slots (``overused_keys``) are held locally until their slot frees.
3. ``page_crawled``: 2xx -> ``observe`` with a content fingerprint
   (``frontier_rate.fingerprint``); 304 -> ``observe(not_modified=True)``;
   any other status -> ``failed`` (404/410 three times in a row: gone).
   ``request_error`` -> ``failed`` (retried with backoff).
4. ``finished`` is False while the frontier holds scheduled pages, unless a
   close condition (``FRONTIER_RATE_CLOSE_AFTER``) is met. scrapy-frontera
   itself lets a spider close as soon as nothing is due locally; the
   ``KeepAlive`` extension keeps it open until ``finished`` and wakes it when
   the next page falls due.
"""

from __future__ import annotations

import importlib
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from frontera.core.components import Backend
from frontera.core.models import Request as FrontierRequest

from frontier_rate.connection import data_dir, redact_url
from frontier_rate.engine import Dispatch, Frontier, Observation, RedisUnavailable, parse_url
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

logger = logging.getLogger(__name__)

__all__ = ["DISPATCH_KEY", "DONT_REVISIT_KEY", "KeepAlive", "RESULT_KEY", "RevisitBackend",
           "WEIGHT_KEY", "lease_of", "page_meta"]

DISPATCH_KEY = "frontier_rate_dispatch"
"""Meta key (str in Scrapy meta, bytes in frontera meta) that carries the lease of a fetch."""
RESULT_KEY = b"frontier_rate"
"""Frontera response meta key that ``page_crawled`` fills with the observation."""

DEFAULT_BATCH = 64
"""Requests per ``get_next_requests`` call when the caller asks for 0 (frontera's default)."""
MIN_POLL, MAX_POLL = 0.05, 1.0
"""Seconds between frontier polls after one found nothing due (bounded by the next due time)."""
FINISHED_CACHE = 0.5
"""Seconds ``finished()`` reuses its answer (frontera calls it before every poll)."""
HOLD_FRACTION = 0.5
"""A page held for an overused slot is dropped after this fraction of the lease timeout
(its lease then expires in Redis and the page is dispatched again)."""

_PER_FETCH_META = frozenset({
    DISPATCH_KEY, "download_slot", "download_latency", "download_timeout", "redirect_urls",
    "redirect_times", "redirect_ttl", "redirect_reasons", "retry_times", "_scheme_proxy",
    "frontier_request", "frontier_rate",
})
"""Scrapy meta keys that describe one fetch: never stored with a page."""
_CONDITIONAL = ("if-none-match", "if-modified-since")


class RevisitBackend(Backend):
    """Frontera backend backed by a ``frontier_rate.Frontier`` (see the module docstring).

    Built by frontera's ``FrontierManager`` through ``from_manager``; for
    tests and scripts ``RevisitBackend(settings, frontier=..., clock=...)``
    works too. ``settings`` is anything with ``get(name)`` (frontera settings,
    a dict); ``clock`` (or the ``FRONTIER_RATE_CLOCK`` setting, a callable or
    its dotted path) replaces ``time.time`` for the frontier and the backend.
    """

    component_name = "frontier-rate Revisit Backend"

    def __init__(self, settings: Any = None, *, frontier: Frontier | None = None,
                 clock: Callable[[], float] | None = None,
                 request_model: type[FrontierRequest] = FrontierRequest) -> None:
        settings = settings if settings is not None else {}
        get = settings.get
        self.clock = clock or _clock(get("FRONTIER_RATE_CLOCK"))
        self.frontier_kwargs = _frontier_kwargs(get)
        self.redis_url: str | None = get("FRONTIER_RATE_REDIS_URL") or None
        self.fingerprinter = Fingerprinter(
            get("FRONTIER_RATE_FINGERPRINT") or "raw",
            strip_patterns(get("FRONTIER_RATE_STRIP_PATTERNS")),
            _number(get, "FRONTIER_RATE_MAX_BODY", int, DEFAULT_MAX_BODY),
        )
        self.conditional = _flag(get, "FRONTIER_RATE_CONDITIONAL", True)
        self.close_after, self.close_when_idle = close_after(get("FRONTIER_RATE_CLOSE_AFTER"))
        if self.close_when_idle:  # "idle" means nothing due: do not lease pages before they are
            self.frontier_kwargs.setdefault("fill_budget", False)
        self.stats = get("STATS_MANAGER")
        self.request_model = request_model
        self.frontier = frontier
        self._own_frontier = frontier is None
        self._one_off: deque[FrontierRequest] = deque()
        self._held: list[tuple[Dispatch, float]] = []
        self._next_poll = -math.inf
        self._finished_at = -math.inf
        self._finished = False
        self._started_at: float | None = None
        self._last_observation: Observation | None = None
        self.spool_dir = get("FRONTIER_RATE_SPOOL_DIR") or str(data_dir() / "spool")
        self._pending: deque[tuple[str, Dispatch, dict[str, Any]]] = deque()  # Redis has not taken
        self._unadded: list[tuple[str, float, dict[str, Any]]] = []
        self._outage_since: float | None = None
        self._retry_at = -math.inf
        self._backoff = REDIS_RETRY_FIRST

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
        if self.frontier is None:
            self.frontier = Frontier(self.redis_url, clock=self.clock, **self.frontier_kwargs)
        self._started_at = self.clock()
        logger.info("frontier-rate backend started: namespace=%r, fingerprint=%s",
                    self.frontier.namespace, self.fingerprinter.mode)
        self._replay_spool()

    def frontier_stop(self) -> None:
        if self.frontier is None:
            return
        if not self._flush(force=True):
            self._save_spool()
        held = [dispatch for dispatch, _ in self._held]
        self._held.clear()
        if held:
            try:
                self.frontier.release_many(held)
            except RedisUnavailable as exc:
                logger.warning("frontier-rate: could not hand back %d held leases (%s); they "
                               "expire after FRONTIER_RATE_LEASE_TIMEOUT", len(held), exc)
        if self._own_frontier:
            self.frontier.close()
            self.frontier = None

    @property
    def _frontier(self) -> Frontier:
        if self.frontier is None:
            raise RuntimeError("RevisitBackend used before frontier_start()")
        return self.frontier

    # -- new pages ---------------------------------------------------------------
    def add_seeds(self, seeds: Iterable[FrontierRequest]) -> None:
        self._add(seeds, "seed")

    def links_extracted(self, request: FrontierRequest, links: Iterable[FrontierRequest]) -> None:
        self._add(links, "link")

    def _add(self, requests: Iterable[FrontierRequest], kind: str) -> None:
        """Add the revisitable requests as pages; queue the rest once.

        A request the frontier cannot hold (non-JSON meta, a bad URL) does not
        stop the others: they are added first, then ValueError names it.
        """
        pages: list[tuple[str, float, dict[str, Any]]] = []
        problem: str | None = None
        for request in requests:
            if _method(request) != "GET" or _meta_flag(request, DONT_REVISIT_KEY):
                self._one_off.append(request)
                self._count("one_off")
                continue
            if not request.url.lower().startswith(("http://", "https://")):
                logger.debug("frontier-rate: not an HTTP URL, skipped: %s", request.url)
                self._count("skipped")
                continue
            try:
                parse_url(request.url)
                pages.append((request.url, _weight(request), page_meta(request)))
            except ValueError as exc:
                self._count("skipped")
                problem = problem or f"{kind} {request.url[:200]!r}: {exc}"
        if pages:
            self._unadded += pages
            self._flush()
        if problem is not None:
            raise ValueError(problem)

    # -- dispatch ----------------------------------------------------------------
    def get_next_requests(self, max_n_requests: int, **kwargs: Any) -> list[FrontierRequest]:
        """Up to ``max_n_requests`` requests (0: ``DEFAULT_BATCH``) of due pages.

        ``kwargs`` as scrapy-frontera passes them: ``key_type`` ("domain" or
        "ip") and ``overused_keys`` (download slots to spare). Pages of an
        overused slot stay leased in a local buffer and go out once it frees.
        """
        if isinstance(max_n_requests, bool) or not isinstance(max_n_requests, int) \
                or max_n_requests < 0:
            raise ValueError(f"max_n_requests must be a non-negative int, got {max_n_requests!r}")
        limit = max_n_requests or DEFAULT_BATCH
        key_type = kwargs.get("key_type") or "domain"
        if key_type not in ("domain", "ip"):
            raise ValueError(f"key_type must be 'domain' or 'ip', got {key_type!r}")
        overused = {str(key) for key in kwargs.get("overused_keys") or ()}
        now = self.clock()
        out: list[FrontierRequest] = []
        while self._one_off and len(out) < limit:
            out.append(self._one_off.popleft())
        out += self._release_held(limit - len(out), key_type, overused, now)
        room = limit - len(out)
        if room > 0 and len(self._held) < limit and now >= self._next_poll and self._flush():
            try:
                dispatches = self._frontier.next_requests(room)
                for dispatch in dispatches:
                    if _slot_key(dispatch.host, key_type) in overused:
                        self._held.append((dispatch, now))
                    else:
                        out.append(self._to_request(dispatch))
                if not dispatches:
                    self._next_poll = now + self._wait(now)
            except RedisUnavailable as exc:
                self._redis_down(exc)
        self._count("dispatched", len(out))
        return out

    def _release_held(self, room: int, key_type: str, overused: set[str],
                      now: float) -> list[FrontierRequest]:
        out: list[FrontierRequest] = []
        keep: list[tuple[Dispatch, float]] = []
        max_age = HOLD_FRACTION * self._frontier.lease_timeout
        for dispatch, held_at in self._held:
            if now - held_at > max_age:
                logger.debug("frontier-rate: dropped held %s (its lease will expire)", dispatch.url)
            elif len(out) < room and _slot_key(dispatch.host, key_type) not in overused:
                out.append(self._to_request(dispatch))
            else:
                keep.append((dispatch, held_at))
        self._held = keep
        return out

    def _wait(self, now: float) -> float:
        """Seconds until a page may be dispatched, within [MIN_POLL, MAX_POLL]."""
        due = self._frontier.next_due_time()
        if due is None:
            return MAX_POLL
        return min(MAX_POLL, max(MIN_POLL, due - now))

    def _to_request(self, dispatch: Dispatch) -> FrontierRequest:
        stored = dispatch.meta or {}
        headers: dict[bytes, list[bytes]] = {
            name.encode("latin-1"): [v.encode("latin-1") for v in values]
            for name, values in (stored.get("h") or {}).items()
            if name.lower() not in _CONDITIONAL
        }
        if self.conditional:
            if dispatch.etag:
                headers[b"If-None-Match"] = [dispatch.etag.encode("latin-1", "replace")]
            if dispatch.last_modified:
                headers[b"If-Modified-Since"] = [
                    dispatch.last_modified.encode("latin-1", "replace")]
        lease = {"url": dispatch.url, "token": dispatch.token, "host": dispatch.host,
                 "etag": dispatch.etag, "last_modified": dispatch.last_modified,
                 "due": dispatch.due}
        scrapy_meta = dict(stored.get("m") or {})
        scrapy_meta[DISPATCH_KEY] = lease
        callback, errback = stored.get("cb"), stored.get("eb")
        meta = {
            b"scrapy_callback": callback.encode() if callback else None,
            b"scrapy_errback": errback.encode() if errback else None,
            b"scrapy_cb_kwargs": dict(stored.get("kw") or {}),
            b"scrapy_meta": scrapy_meta,
            b"origin_is_frontier": True,
            DISPATCH_KEY.encode(): lease,
        }
        return self.request_model(dispatch.url, method=b"GET", headers=headers,
                                  cookies=dict(stored.get("c") or {}), meta=meta)

    # -- results -----------------------------------------------------------------
    def page_crawled(self, response: Any) -> None:
        """Record a response: 2xx observed with a fingerprint, 304 unchanged, else failed."""
        dispatch = lease_of(response.request)
        if dispatch is None:
            logger.debug("frontier-rate: response of %s was not dispatched by the frontier",
                         response.url)
            self._count("untracked")
            return
        status = int(response.status_code)
        headers = response.headers
        now = self.clock()
        if 200 <= status < 300:
            args = {"status": status, "fetched_at": now,
                    "fingerprint": self.fingerprinter(_body(response.body), response.url, headers),
                    "etag": header_value(headers, "ETag"),
                    "last_modified": header_value(headers, "Last-Modified"),
                    "served_at": header_value(headers, "Date")}
        elif status == 304:
            args = {"status": status, "fetched_at": now, "not_modified": True,
                    "etag": header_value(headers, "ETag") or dispatch.etag,
                    "last_modified": header_value(headers, "Last-Modified")
                    or dispatch.last_modified}
        else:
            self._submit("failed", dispatch, {"reason": f"HTTP {status}", "status": status,
                                              "now": now})
            return
        observation = self._submit("observe", dispatch, args)
        if observation is None:
            response.meta[RESULT_KEY] = {"held": True, "changed": None,
                                         "not_modified": status == 304}
        else:
            response.meta[RESULT_KEY] = {"changed": observation.changed,
                                         "not_modified": status == 304,
                                         "estimate": observation.estimate,
                                         "next_due": observation.next_due}

    def request_error(self, page: FrontierRequest, error: Any) -> None:
        """A fetch without a response (DNS, timeout, refused): retried with backoff."""
        dispatch = lease_of(page)
        if dispatch is None:
            self._count("untracked")
            return
        self._submit("failed", dispatch, {"reason": str(error) or "error", "status": None,
                                          "now": self.clock()})

    # -- Redis outages: results held in order, a circuit breaker, the spool ----------
    def _submit(self, kind: str, dispatch: Dispatch, args: dict[str, Any]) -> Observation | None:
        """Queue a result behind any held ones and send what Redis takes now; the
        observation if this one was applied at once, else None (held for later)."""
        self._pending.append((kind, dispatch, args))
        applied = self._flush()
        return self._last_observation if applied and kind == "observe" else None

    def _flush(self, *, force: bool = False) -> bool:
        """Send unadded pages and held results in order; False while Redis is unreachable.

        While it is down nothing is sent before the next attempt (1, 2, 4 ... at
        most 30 s apart), so a caller blocks for at most one Redis timeout.
        """
        if not self._pending and not self._unadded and self._outage_since is None:
            return True
        if not force and self.clock() < self._retry_at:
            return False
        try:
            if self._unadded:
                new = self._frontier.add_many(self._unadded)
                self._unadded = []
                self._count("new_pages", new)
                self._next_poll = -math.inf
                self._finished_at = -math.inf
            while self._pending:
                kind, dispatch, args = self._pending[0]
                try:
                    self._apply(kind, dispatch, args)
                except ValueError as exc:  # bad data (a tampered spool) cannot block the rest
                    logger.warning("frontier-rate: dropping a %s of %s the frontier refused: %s",
                                   kind, dispatch.url, exc)
                self._pending.popleft()
                if self._outage_since is not None:
                    self._count("replayed")
        except RedisUnavailable as exc:
            self._redis_down(exc)
            return False
        if self._outage_since is not None:
            logger.warning("frontier-rate: Redis at %s back after %.1f s",
                           redact_url(self.redis_url), self.clock() - self._outage_since)
            self._outage_since, self._backoff, self._retry_at = None, REDIS_RETRY_FIRST, -math.inf
        return True

    def _apply(self, kind: str, dispatch: Dispatch, args: dict[str, Any]) -> None:
        if kind == "observe":
            observation = self._frontier.observe(dispatch, **args)
            self._count_observation(observation, not_modified=bool(args.get("not_modified")))
            self._last_observation = observation
            return
        self._frontier.failed(dispatch, args["reason"], status=args["status"], now=args["now"])
        self._count("failed")
        if args["status"] in (404, 410):
            page = self._frontier.page(dispatch.url)
            if page is not None and page["status"] == "gone":
                self._count("gone")

    def _redis_down(self, exc: Exception) -> None:
        now = self.clock()
        self._count("redis_errors")
        if self._outage_since is None:
            self._outage_since, self._backoff = now, REDIS_RETRY_FIRST
            self._count("redis_outages")
            logger.warning("frontier-rate: %s; holding %d results and %d new pages, retrying in "
                           "%.0f s", exc, len(self._pending), len(self._unadded), self._backoff)
        else:
            self._backoff = min(2 * self._backoff, REDIS_RETRY_MAX)
        self._retry_at = now + self._backoff

    def _save_spool(self) -> None:
        """Stopping while Redis is down: keep what it has not taken for the next crawl."""
        entries = [page_entry(*page) for page in self._unadded]
        entries += [call_entry(kind, dispatch, args) for kind, dispatch, args in self._pending]
        if not entries:
            return
        try:
            path = Spool(self.spool_dir, self._frontier.namespace).save(entries)
        except (OSError, ValueError) as exc:
            logger.error("frontier-rate: could not write the spool in %s (%s): %d results and %d "
                         "new pages lost", self.spool_dir, exc, len(self._pending),
                         len(self._unadded))
            return
        self._count("spooled", len(entries))
        logger.warning("frontier-rate: stopping while Redis at %s is unreachable: %d results and "
                       "%d new pages saved to %s for the next crawl of namespace %r",
                       redact_url(self.redis_url), len(self._pending), len(self._unadded), path,
                       self._frontier.namespace)
        self._pending.clear()
        self._unadded = []

    def _replay_spool(self) -> None:
        """Queue and send what an earlier crawl of this namespace could not give Redis."""
        entries = Spool(self.spool_dir, self._frontier.namespace).claim()
        for entry in entries:
            try:
                kind, item, args = read_entry(entry)
                if kind == "host_delay":
                    raise ValueError("host delays are not replayed by the Frontera backend")
                if kind == "page":
                    parse_url(item[0])
            except ValueError as exc:
                logger.warning("frontier-rate: skipping a spool entry: %s", exc)
                continue
            if kind == "page":
                self._unadded.append(item)
            else:
                self._pending.append((kind, item, args))
        if entries:
            logger.info("frontier-rate: replaying %d results and %d new pages from the spool",
                        len(self._pending), len(self._unadded))
            self._count("spool_replayed", len(self._pending) + len(self._unadded))
            self._flush(force=True)

    def _count_observation(self, observation: Observation, *, not_modified: bool) -> None:
        if not observation.accepted:
            self._count("stale_lease")
            return
        self._count("changed" if observation.changed else "unchanged")
        if not_modified:
            self._count("not_modified")

    def _count(self, name: str, n: int = 1) -> None:
        if self.stats is not None and n:
            self.stats.inc_value(f"frontier_rate/{name}", n)

    # -- end of crawl ------------------------------------------------------------
    def finished(self) -> bool:
        """True once a close condition holds, or when the frontier has nothing scheduled.

        ``FRONTIER_RATE_CLOSE_AFTER`` = seconds since ``frontier_start``, or
        "idle": finished as soon as no page is due. Cached for
        ``FINISHED_CACHE`` seconds (frontera asks before every poll).
        """
        now = self.clock()
        if self._started_at is not None and self.close_after is not None \
                and now - self._started_at >= self.close_after:
            return True
        if self._one_off or self._held or self._pending or self._unadded \
                or self._outage_since is not None:
            return False
        if abs(now - self._finished_at) >= FINISHED_CACHE:
            try:
                if self.close_when_idle:
                    self._finished = self._frontier.stats(now=now)["due_now"] == 0
                else:
                    self._finished = self._frontier.next_due_time() is None
            except RedisUnavailable as exc:
                self._redis_down(exc)
                return False
            self._finished_at = now
        return self._finished

    def seconds_to_wake(self) -> float:
        """Seconds until the backend may have something to do (a page due, or the close time)."""
        if self._one_off or self._held:
            return MIN_POLL
        now = self.clock()
        if self._outage_since is not None or self._pending or self._unadded:
            return min(MAX_POLL, max(MIN_POLL, self._retry_at - now))
        try:
            wait = self._wait(now)
        except RedisUnavailable as exc:
            self._redis_down(exc)
            return MAX_POLL
        if self.close_after is not None and self._started_at is not None:
            wait = min(wait, max(0.0, self._started_at + self.close_after - now))
        return wait


class KeepAlive:
    """Scrapy extension: keep a scrapy-frontera spider open while ``RevisitBackend`` works.

    scrapy-frontera lets the spider close as soon as its local queue is empty,
    which for a revisiting crawl is whenever nothing is due. On ``spider_idle``
    this extension asks the frontier manager whether it is ``finished``; if
    not, it raises ``DontCloseSpider`` and wakes the engine when the next page
    falls due (Scrapy would otherwise poll only every 5 s). Enable it with
    ``EXTENSIONS = {"frontier_rate.frontera.KeepAlive": 500}``.
    """

    def __init__(self, crawler: Any) -> None:
        from scrapy import signals

        self.crawler = crawler
        self._timer: Any = None
        crawler.signals.connect(self.spider_idle, signal=signals.spider_idle)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Any) -> KeepAlive:
        return cls(crawler)

    def _manager(self) -> Any:
        """scrapy-frontera's FrontierManager, or None (private Scrapy API, guarded)."""
        engine = self.crawler.engine
        slot = getattr(engine, "_slot", None) or getattr(engine, "slot", None)
        scheduler = getattr(slot, "scheduler", None)
        return getattr(getattr(scheduler, "frontier", None), "manager", None)

    def spider_idle(self, spider: Any) -> None:
        from scrapy.exceptions import DontCloseSpider

        manager = self._manager()
        backend = getattr(manager, "backend", None)
        if not isinstance(backend, RevisitBackend) or manager.finished:
            return
        if self._timer is None:
            self._wake_in(backend.seconds_to_wake())
        raise DontCloseSpider

    def _wake_in(self, seconds: float) -> None:
        try:
            from scrapy.utils.asyncio import call_later
        except ImportError:  # Scrapy < 2.13
            from twisted.internet import reactor

            call_later = reactor.callLater  # type: ignore[attr-defined]
        self._timer = call_later(max(0.0, seconds), self._wake)

    def _wake(self) -> None:
        self._timer = None
        slot = getattr(self.crawler.engine, "_slot", None)
        nextcall = getattr(slot, "nextcall", None)
        if nextcall is not None and callable(getattr(nextcall, "schedule", None)):
            nextcall.schedule()

    def spider_closed(self, spider: Any) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


# -- request <-> page ------------------------------------------------------------------
def page_meta(request: FrontierRequest) -> dict[str, Any]:
    """The JSON dict stored with a page so that a revisit rebuilds ``request``.

    Keys (present only when not empty): ``cb``/``eb`` callback and errback
    names, ``kw`` cb_kwargs, ``m`` Scrapy meta (per-fetch keys dropped), ``h``
    headers, ``c`` cookies. Raises ValueError naming the first value JSON
    cannot carry.
    """
    meta = request.meta or {}
    stored: dict[str, Any] = {}
    for key, short in ((b"scrapy_callback", "cb"), (b"scrapy_errback", "eb")):
        name = meta.get(key)
        if name:
            stored[short] = name.decode() if isinstance(name, bytes) else str(name)
    scrapy_meta = {k: v for k, v in (meta.get(b"scrapy_meta") or {}).items()
                   if k not in _PER_FETCH_META}
    for name, value in (("m", scrapy_meta), ("kw", meta.get(b"scrapy_cb_kwargs") or {})):
        if value:
            for key, item in value.items():
                json_value(item, f"{'meta' if name == 'm' else 'cb_kwargs'}[{key!r}]")
            stored[name] = dict(value)
    headers = {_text(name): [_text(v) for v in (values if isinstance(values, list) else [values])]
               for name, values in (request.headers or {}).items()
               if _text(name).lower() not in _CONDITIONAL}
    if headers:
        stored["h"] = headers
    if request.cookies:
        stored["c"] = {_text(k): _text(v) for k, v in request.cookies.items()}
    return stored


def lease_of(request: Any) -> Dispatch | None:
    """The lease a request carries, or None if the frontier did not dispatch it.

    Looks in ``meta[b"frontier_rate_dispatch"]`` and in the Scrapy meta (which
    survives scrapy-frontera's round trip, redirects and retries). A lease
    copied into an unrelated request (a spider passing ``response.meta`` on)
    is ignored: its URL must be the request's URL or one it redirected from.
    """
    if request is None:
        return None
    meta = request.meta or {}
    scrapy_meta = meta.get(b"scrapy_meta") or {}
    lease = scrapy_meta.get(DISPATCH_KEY) or meta.get(DISPATCH_KEY.encode())
    if not isinstance(lease, dict) or not isinstance(lease.get("url"), str) \
            or not isinstance(lease.get("token"), str):
        return None
    if lease["url"] != request.url and lease["url"] not in (scrapy_meta.get("redirect_urls") or ()):
        return None
    due = lease.get("due")
    return Dispatch(url=lease["url"], token=lease["token"],
                    host=lease.get("host") or parse_url(lease["url"]),
                    etag=lease.get("etag"), last_modified=lease.get("last_modified"),
                    due=float(due) if isinstance(due, (int, float)) else None)


def _method(request: FrontierRequest) -> str:
    method = request.method
    return (method.decode() if isinstance(method, bytes) else str(method)).upper()


def _meta_flag(request: FrontierRequest, key: str) -> bool:
    meta = request.meta or {}
    return bool(meta.get(key.encode()) or (meta.get(b"scrapy_meta") or {}).get(key))


def _weight(request: FrontierRequest) -> float:
    meta = request.meta or {}
    value = (meta.get(b"scrapy_meta") or {}).get(WEIGHT_KEY, meta.get(WEIGHT_KEY.encode(), 1.0))
    return page_weight(value, _text(request.url))


def _text(value: Any) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


def _body(body: Any) -> bytes:
    if isinstance(body, str):
        return body.encode("utf-8")
    return bytes(body or b"")


def _slot_key(host: str, key_type: str) -> str:
    """The downloader slot key of a host, as scrapy-frontera reports overused ones.

    "ip" uses Scrapy's DNS cache (never a blocking lookup); a host not in it
    is compared by name.
    """
    if key_type != "ip":
        return host
    try:
        from scrapy.resolver import dnscache
    except ImportError:
        return host
    return str(dnscache.get(host, host))


# -- settings ----------------------------------------------------------------------------
def _frontier_kwargs(get: Callable[[str], Any]) -> dict[str, Any]:
    """``Frontier`` keywords; the namespace defaults to BOT_NAME (a backend never sees the spider)."""
    kwargs = frontier_kwargs(get)
    if "namespace" not in kwargs:
        bot = get("BOT_NAME")
        kwargs["namespace"] = str(bot) if bot else "default"
    return kwargs


def _number(get: Callable[[str], Any], name: str, kind: type, default: Any) -> Any:
    value = get(name)
    if value is None or value == "":
        return default
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={value!r} is not a valid {kind.__name__}") from None


def _flag(get: Callable[[str], Any], name: str, default: bool) -> bool:
    value = get(name)
    if value is None or value == "":
        return default
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"{name}={value!r} is not a boolean")
    return bool(value)


def _clock(value: Any) -> Callable[[], float]:
    """FRONTIER_RATE_CLOCK: a callable or its dotted path (tests use a virtual clock)."""
    if value is None or value == "":
        return time.time
    if isinstance(value, str):
        module, _, name = value.rpartition(".")
        try:
            value = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError, ValueError) as exc:
            raise ValueError(f"FRONTIER_RATE_CLOCK={value!r} cannot be imported: {exc}") from None
    if not callable(value):
        raise ValueError(f"FRONTIER_RATE_CLOCK={value!r} is not callable")
    return value

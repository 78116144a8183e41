"""The Scrapy-version-dependent parts of the adapters, each in one place.

Supported: Scrapy 2.13 (the lowest declared in setup.cfg, tested in CI) to
2.19. Public APIs are used where a version has them; the private ones, each
guarded so a missing attribute costs a feature and never the crawl, are
listed in docs/ARCHITECTURE.md ("Private Scrapy internals"):

- ``engine._slot.nextcall``: wake the engine now instead of on its 5 s
  heartbeat (no public API in any version).
- ``engine.downloader.slots`` / ``per_slot_settings`` and ``Slot.delay`` and
  ``jitter`` (2.19) or ``randomize_delay`` (2.13-2.18): pace a host's download
  slot (DOWNLOAD_SLOTS can only be set before a crawl starts, a robots.txt
  Crawl-delay is learned during it).
- ``engine._slot.scheduler`` before 2.14, where ``engine.scheduler`` is not public.
- ``engine.downloader.handlers.download_request_async`` (2.14+) or
  ``download_request``: take a host's shared send slot at the moment a request is
  sent (``frontier_rate.crawl.scrapy_politeness``; no signal or middleware runs that late).
- ``RobotsTxtMiddleware._parsers`` (through ``downloader.middleware.middlewares``): drop
  the parse of a robots.txt that answered a server error once it answers again
  (``forget_robots``).
- ``crawler.spider`` cleared once the engine stopped (``fail_crawl``): Scrapy's crawler
  runners count a crawl that ends without a spider as failed (``bootstrap_failed``, so
  ``scrapy crawl`` exits with 1); the only other way to fail a crawl is an exception,
  which Scrapy prints with two unrelated tracebacks around it.
- ``engine.scraper.enqueue_scrape``: settle an answer before the spider middlewares
  see it (``frontier_rate.scrapy.delivery``; the ``response_received`` signal cannot
  be awaited, and a spider middleware's ``process_spider_input`` cannot wait).
"""

from __future__ import annotations

import inspect
import logging
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import IgnoreRequest
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future

from frontier_rate.renamed import resolve

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.python.failure import Failure

logger = logging.getLogger(__name__)

try:  # 2.14+
    from scrapy.utils.asyncio import call_later as _call_later
    from scrapy.utils.asyncio import create_looping_call as _looping_call
except ImportError:  # 2.13
    _call_later = _looping_call = None  # type: ignore[assignment]


def call_later(delay: float, func: Callable[..., Any], *args: Any) -> Any:
    """Run ``func(*args)`` on the event loop after ``delay`` seconds; has ``cancel()``."""
    if _call_later is not None:
        return _call_later(delay, func, *args)
    from twisted.internet import reactor

    return reactor.callLater(delay, func, *args)  # type: ignore[attr-defined]


def cancel(timer: Any) -> None:
    """Cancel a ``call_later`` timer that may have fired or been cancelled already: Twisted's
    ``DelayedCall`` raises then (its ``active()`` says so); Scrapy 2.14+'s timers have no
    ``active()`` and may be cancelled twice."""
    if timer is not None and getattr(timer, "active", lambda: True)():
        timer.cancel()


def looping_call(func: Callable[[], Any]) -> Any:
    """A looping call with ``start(interval, now=False)``, ``stop()`` and ``running``."""
    if _looping_call is not None:
        return _looping_call(func)
    from twisted.internet.task import LoopingCall

    return LoopingCall(func)


def from_thread(func: Callable[[], Any]) -> None:
    """Run ``func`` on the event loop's thread (called from another thread)."""
    from twisted.internet import reactor

    reactor.callFromThread(func)  # type: ignore[attr-defined]


async def settled(call: Any) -> None:
    """Wait (without blocking the loop) until a ``client.Call`` is settled."""
    if call.settled:
        return
    from scrapy.utils.defer import maybe_deferred_to_future
    from twisted.internet.defer import Deferred

    done: Deferred[None] = Deferred()
    call.when_settled(lambda _call: done.callback(None))
    await maybe_deferred_to_future(done)


def warn_if_deferred(output: Any, callback: Any) -> None:
    """Warn as Scrapy 2.14+ does when a spider callback returns a Deferred (the scheduler's
    callback wrapper awaits it, so Scrapy's own check never sees it)."""
    from twisted.internet.defer import Deferred

    if not isinstance(output, Deferred):
        return
    import scrapy

    if tuple(int(part) for part in scrapy.__version__.split(".")[:2]) < (2, 14):
        return
    import warnings

    from scrapy.exceptions import ScrapyDeprecationWarning

    warnings.warn(f"{callback} returned a Deferred. Returning Deferreds from spider callbacks "
                  "is deprecated.", ScrapyDeprecationWarning, stacklevel=3)


def fail_crawl(crawler: Crawler) -> None:
    """Have the crawler's runner count this crawl as failed (``scrapy crawl`` and ``scrapy
    runspider`` then exit with 1), after the engine stopped cleanly: Scrapy's runners set
    ``bootstrap_failed`` for a crawler whose ``spider`` is unset when its crawl ends
    (2.13-2.19). Call it only once the engine has stopped (``engine_stopped``)."""
    crawler.spider = None


def close_spider(crawler: Crawler, reason: str) -> None:
    """Ask the engine to close the spider (``close_spider_async`` is 2.14+)."""
    from scrapy.utils.defer import deferred_from_coro

    engine = crawler.engine
    assert engine is not None
    if hasattr(engine, "close_spider_async"):
        deferred_from_coro(engine.close_spider_async(reason=reason))
    else:
        engine.close_spider(crawler.spider, reason=reason)


async def download(crawler: Crawler, request: Request) -> Response:
    """Download ``request`` through the downloader middlewares (``download_async`` is 2.14+)."""
    engine = crawler.engine
    assert engine is not None
    download_async = getattr(engine, "download_async", None)
    if download_async is not None:
        return await download_async(request)
    from scrapy.utils.defer import maybe_deferred_to_future

    return await maybe_deferred_to_future(engine.download(request))


def _engine_nextcall(crawler: Crawler) -> Any:
    slot = getattr(getattr(crawler, "engine", None), "_slot", None)
    nextcall = getattr(slot, "nextcall", None)
    return nextcall if callable(getattr(nextcall, "schedule", None)) else None


def wake_engine(crawler: Crawler) -> None:
    """Have the engine ask the scheduler for requests now (private API, guarded:
    without it the engine still polls on its 5-second heartbeat)."""
    nextcall = _engine_nextcall(crawler)
    if nextcall is not None:
        nextcall.schedule()


def engine_wakes(crawler: Crawler) -> bool:
    """Can ``wake_engine`` reach a running engine? (Not in a test that calls a scheduler
    without one, as Scrapy's own scheduler tests do with a ``Mock`` engine.)"""
    running = getattr(getattr(crawler, "engine", None), "running", None) is True
    return running and _engine_nextcall(crawler) is not None


def engine_scheduler(crawler: Crawler) -> Any:
    """The engine's scheduler: public ``engine.scheduler`` (2.14+), else the private slot's."""
    engine = crawler.engine
    if engine is None:
        return None
    if "scheduler" in dir(type(engine)):
        return engine.scheduler
    slot = getattr(engine, "_slot", None) or getattr(engine, "slot", None)
    return getattr(slot, "scheduler", None)


def _slot_jitter_field() -> str:
    """The per-slot randomisation field: ``jitter`` (2.19) or ``randomize_delay`` (older)."""
    try:
        from scrapy.core.downloader import Slot
    except ImportError:
        return "randomize_delay"
    params = inspect.signature(Slot.__init__).parameters
    return "jitter" if "jitter" in params else "randomize_delay"


_JITTER = None


def pace_slot(crawler: Crawler, host: str, delay: float) -> bool:
    """Keep ``delay`` seconds between the *starts* of requests on ``host``'s download slot,
    without randomisation, as Scrapy keeps ``DOWNLOAD_DELAY``: up to the slot's concurrency
    (Scrapy's own: ``CONCURRENT_REQUESTS_PER_DOMAIN`` or ``_PER_IP``) may be in flight.
    Under AutoThrottle ``delay`` is a floor: AutoThrottle's longer delay (from
    ``AUTOTHROTTLE_START_DELAY`` on a new slot) stays the slot's, as with Scrapy's scheduler.

    Private API (the downloader's slots, per-slot settings and ``Slot.lastseen``), guarded:
    False when this Scrapy does not have them.
    """
    global _JITTER
    if _JITTER is None:
        _JITTER = _slot_jitter_field()
    downloader = getattr(crawler.engine, "downloader", None)
    per_slot = getattr(downloader, "per_slot_settings", None)
    slots = getattr(downloader, "slots", None)
    if not isinstance(per_slot, dict) or not isinstance(slots, dict):
        return False
    settings = crawler.settings
    throttled = settings.getbool("AUTOTHROTTLE_ENABLED")
    start = max(delay, settings.getfloat("DOWNLOAD_DELAY"),
                settings.getfloat("AUTOTHROTTLE_START_DELAY")) if throttled else delay
    off: Any = 0.0 if _JITTER == "jitter" else False
    per_slot[host] = {**per_slot.get(host, {}), "delay": start, _JITTER: off}
    slot = slots.get(host)
    if slot is not None:
        longer = max(slot.delay, delay) if throttled else delay
        if longer > slot.delay and isinstance(getattr(slot, "lastseen", None), (int, float)):
            # a longer delay (a Crawl-delay just read) counts from now: the request after the
            # robots.txt fetch waits it whole, whenever that fetch started
            slot.lastseen = max(slot.lastseen, _slot_clock(slot)())
        slot.delay = longer
        setattr(slot, _JITTER, off)
    return True


def _slot_clock(slot: Any) -> Callable[[], float]:
    """The clock of ``Slot.lastseen``: ``time.monotonic`` in Scrapy 2.14+, ``time.time``
    before (whichever the downloader's module imported)."""
    module = sys.modules.get(type(slot).__module__)
    clock = getattr(module, "monotonic", None)
    if not callable(clock):
        clock = getattr(module, "time", None)
    return clock if callable(clock) and clock in (time.monotonic, time.time) else time.monotonic


def before_download(crawler: Crawler, hook: Callable[[Request], Any],
                    failed: Callable[[Request, Exception], Any] | None = None) -> bool:
    """Have the downloader await ``hook(request)`` right before each request goes to its
    download handler, after the download slot let it through: the moment it is sent (an
    exception it raises fails the request). ``failed(request, exc)`` hears of each download
    the handler failed (no answer: a refused connection, a timeout).

    Private API (``downloader.handlers``: ``download_request_async`` 2.14+, else
    ``download_request``), guarded: False when this Scrapy does not have it.
    """
    handlers = getattr(getattr(crawler.engine, "downloader", None), "handlers", None)
    if handlers is None:
        return False

    def tell(request: Request, exc: Exception) -> None:
        if failed is not None:
            try:
                failed(request, exc)
            except Exception:
                logger.exception("frontier-rate: could not note the failure of %s", request)

    download_async = getattr(handlers, "download_request_async", None)
    if callable(download_async):
        async def sent_async(request: Request, *args: Any) -> Any:
            await hook(request)
            try:
                return await download_async(request, *args)
            except Exception as exc:
                tell(request, exc)
                raise

        handlers.download_request_async = sent_async
        return True
    download = getattr(handlers, "download_request", None)
    if not callable(download):
        return False

    async def sent(request: Request, *args: Any) -> Any:
        await hook(request)
        try:
            return await maybe_deferred_to_future(download(request, *args))
        except Exception as exc:
            tell(request, exc)
            raise

    handlers.download_request = lambda request, *args: deferred_from_coro(sent(request, *args))
    return True


def before_scrape(crawler: Crawler,
                  hook: Callable[[Response | Failure, Request], bool | Awaitable[bool]]) -> bool:
    """Have the engine ask ``hook(result, request)`` before it hands a download's result to
    its scraper (the spider middlewares, then the callback or errback): True hands it over
    at once, as Scrapy does; False keeps it from the spider; an awaitable is awaited first.
    Whatever is not waited for goes on in the same turn of the event loop, so the engine
    never sees the result in neither the downloader nor the scraper (it would take the
    spider for idle). A hook that raises lets the result through (logged).

    Private API (``engine.scraper.enqueue_scrape``, the same call in 2.13 to 2.19),
    guarded: False when this Scrapy does not have it.
    """
    from twisted.internet.defer import succeed

    scraper = getattr(getattr(crawler, "engine", None), "scraper", None)
    enqueue = getattr(scraper, "enqueue_scrape", None)
    if not callable(enqueue):
        return False

    async def after(wanted: Awaitable[bool], result: Any, request: Request, args: Any) -> None:
        try:
            go = await wanted
        except Exception:
            logger.exception("frontier-rate: could not settle the answer to %s", request)
            go = True
        if go:
            await maybe_deferred_to_future(enqueue(result, request, *args))

    def scrape(result: Any, request: Request, *args: Any) -> Any:
        try:
            wanted = hook(result, request)
        except Exception:
            logger.exception("frontier-rate: could not settle the answer to %s", request)
            wanted = True
        if wanted is True:
            return enqueue(result, request, *args)
        if wanted is False:
            return succeed(None)
        return deferred_from_coro(after(wanted, result, request, args))

    scraper.enqueue_scrape = scrape  # type: ignore[union-attr]
    return True


def forget_robots(crawler: Crawler, netloc: str) -> bool:
    """Have Scrapy's ``RobotsTxtMiddleware`` fetch ``netloc``'s robots.txt again before the
    host's next request: it keeps its first answer for the process's life, and reads a
    server error's body, or no answer at all, as "allow all".

    Private API (the downloader middleware manager's ``middlewares`` and the middleware's
    ``_parsers``, the same in 2.13 to 2.19), guarded: False when it is not there, or while
    a fetch of that robots.txt is under way.
    """
    from twisted.internet.defer import Deferred

    try:
        from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
    except ImportError:
        return False
    manager = getattr(getattr(crawler.engine, "downloader", None), "middleware", None)
    for middleware in getattr(manager, "middlewares", ()):
        parsers = getattr(middleware, "_parsers", None)
        if isinstance(middleware, RobotsTxtMiddleware) and isinstance(parsers, dict) \
                and netloc in parsers and not isinstance(parsers[netloc], Deferred):
            del parsers[netloc]
            return True
    return False


async def sleep(seconds: float) -> None:
    """Wait ``seconds`` without blocking the event loop (any reactor)."""
    from twisted.internet import reactor
    from twisted.internet.task import deferLater

    await maybe_deferred_to_future(deferLater(reactor, max(0.0, seconds)))  # type: ignore[arg-type]


async def in_thread(func: Callable[..., Any], *args: Any) -> Any:
    """``func(*args)`` in the reactor's thread pool, awaited without blocking the loop."""
    from twisted.internet.threads import deferToThread

    return await maybe_deferred_to_future(deferToThread(func, *args))


ROBOTS_REFUSAL = "Forbidden by robots.txt"
"""The message of the ``IgnoreRequest`` Scrapy's ``RobotsTxtMiddleware`` raises (it has no
exception class of its own; the same text in Scrapy 2.13 to 2.19)."""


def exception_reason(exc: BaseException) -> tuple[str, bool]:
    """The reason a request failed with ``exc``, and whether it is Scrapy's robots.txt
    refusal (``ROBOTS_REFUSAL``: then no retry soon can pass)."""
    if isinstance(exc, IgnoreRequest):
        return f"ignored: {exc}", str(exc) == ROBOTS_REFUSAL
    return type(exc).__name__, False


RENAMED = {"failure_reason": "exception_reason"}
"""Retired names still importable (issue 61): old -> new (``frontier_rate.renamed``)."""


def __getattr__(name: str) -> Any:
    return resolve(globals(), name, RENAMED)

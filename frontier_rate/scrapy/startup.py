"""The Scrapy scheduler's set-up pieces: its settings as the adapter reads them, the
stand-in scheduler that reports bad settings, and sitemap requests (split from
``frontier_rate.scrapy`` to keep that module to the request path)."""

from __future__ import annotations

import atexit
import difflib
import functools
import logging
import os
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy import signals as scrapy_signals
from scrapy.settings import SETTINGS_PRIORITIES

from frontier_rate.crawl import scrapy_compat as compat
from frontier_rate.crawl.settings import WEIGHT_KEY
from frontier_rate.crawl.signal_reader import SITEMAP_KEY, SignalReader
from frontier_rate.engine import Frontier
from frontier_rate.math.dates import http_date
from frontier_rate.store.errors import SettingsMismatch

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.spiders import Spider

logger = logging.getLogger("frontier_rate.scrapy")


SCRAPY_DEFAULTS = {"min_host_delay": 0.0}
"""Shared settings a namespace a Scrapy crawl creates gets where the crawl set none."""


def user_settings(settings: Any) -> Callable[[str], Any]:
    """``settings.get``, except that a ``DOWNLOAD_DELAY`` the user did not set reads as unset:
    Scrapy's default (0) is this scheduler's default too, but not an explicit value that
    would conflict with a host delay the namespace stores."""
    def get(name: str) -> Any:
        if name == "DOWNLOAD_DELAY" and \
                settings.getpriority(name) <= SETTINGS_PRIORITIES["default"]:
            return None
        return settings.get(name)

    return get


class SettingError(ValueError):
    """A ``FRONTIER_RATE_*`` (or Scrapy) setting the scheduler cannot use; the message names
    the setting and its value."""


SettingError.__module__ = "frontier_rate.scrapy"  # where users import it from; printed so


REFUSED_REASON = "frontier_rate_setting_error"
"""The close reason of a crawl the scheduler refused for its settings."""


class Refusing:
    """The scheduler of a crawl whose settings it cannot use: what ``Scheduler.from_crawler``
    returns for a bad setting, and what a ``Scheduler`` turns into when the frontier refuses
    its settings (``stand_in``). It takes no request; once the engine runs it closes
    the spider, and once the engine has stopped it logs the error, one line naming the
    setting, last, and fails the crawl (exit code 1). Raising the error from ``open`` made
    Scrapy print it inside two unrelated tracebacks (issue 60). Building it must not fail,
    or Scrapy's own clean-up masks the error."""

    def __init__(self, crawler: Crawler, error: SettingError) -> None:
        self.crawler, self.error = crawler, error
        self._closing = False

    @classmethod
    def stand_in(cls, scheduler: Any, error: SettingError) -> Refusing:
        """A ``Refusing`` whose methods ``scheduler`` (which the engine holds) answers with
        from now on."""
        refusing = cls(scheduler.crawler, error)
        for name in ("close", "has_pending_requests", "enqueue_request", "next_request"):
            setattr(scheduler, name, getattr(refusing, name))
        return refusing

    def open(self, spider: Spider) -> None:
        # weak=False: the engine drops its scheduler when the spider closes
        self.crawler.signals.connect(self._engine_stopped, signal=scrapy_signals.engine_stopped,
                                     weak=False)

    def _engine_stopped(self) -> None:
        logger.error("frontier-rate: %s", self.error)
        compat.fail_crawl(self.crawler)

    def close(self, reason: str) -> None:
        pass

    def has_pending_requests(self) -> bool:
        return False

    def enqueue_request(self, request: Request) -> bool:
        return False

    def next_request(self) -> None:
        """The engine asks once it runs: then the spider is closed (earlier, the engine's
        stop would not run, nor the error be said)."""
        if not self._closing:
            self._closing = True
            compat.call_later(0.0, compat.close_spider, self.crawler, REFUSED_REASON)
        return None

    def __len__(self) -> int:
        return 0


def refuses_stored_settings(open_: Callable[[Any, Spider], None]) -> Callable[[Any, Spider], None]:
    """``Scheduler.open`` that, when the frontier refuses the crawl's settings (a
    ``SettingError``: an earlier run stored other shared settings), turns the scheduler into
    a ``Refusing`` stand-in instead of raising into Scrapy's engine (issue 60)."""

    @functools.wraps(open_)
    def open(scheduler: Any, spider: Spider) -> None:
        try:
            open_(scheduler, spider)
        except SettingError as exc:
            Refusing.stand_in(scheduler, exc).open(spider)

    return open


def sitemap_request(url: str, weight: float) -> Request:
    """A sitemap or feed as a page of the frontier (``adapter_signals``), marked so that its
    answer is read by the frontier (``sitemap_callback``), not the spider."""
    return Request(url, meta={SITEMAP_KEY: True, WEIGHT_KEY: weight})


def sitemap_callback(reader: SignalReader) -> Callable[..., None]:
    """The callback of a sitemap or feed: its entries become claims; nothing reaches the
    spider (pages it discovers do, through the spider's ``parse``)."""

    def read_sitemap(response: Response, **kwargs: Any) -> None:
        served = http_date(response.headers.get("Date"))
        reader.read(response.url, response.body, served)

    return read_sitemap


PREFIX = "FRONTIER_RATE_"
KNOWN_SETTINGS = frozenset(
    PREFIX + name for name in (
        "BATCH BUDGET BUDGET_FIRST_FETCHES CHANGE_DATES CLOCK CLOSE_AFTER CONDITIONAL CONTENT DATA_DIR "
        "DETECTION_PROCESS ESTIMATOR FILL_BUDGET FINGERPRINT FRONTERA_DRIVER IGNORE_TEXT LEASE_TIMEOUT "
        "LOG_INTERVAL MAX_BODY MAX_CRAWL_DELAY MAX_INTERVAL MIN_HOST_DELAY MIN_INTERVAL "
        "NAMESPACE OBEY_CRAWL_DELAY OBJECTIVE OVERRIDE_SETTINGS POLICY PRIOR_RATE "
        "REDIS_TIMEOUT REDIS_URL ROBOTS_TTL SERVER_CLOCK_RATE SHARED_PAGE_MEMORY SHARED_SEND "
        "SITEMAPS SITEMAPS_FROM_ROBOTS SITEMAP_DISCOVER SITEMAP_MAX_BYTES SITEMAP_MAX_FILES "
        "SITEMAP_MAX_URLS SITEMAP_WEIGHT SPOOL_DIR STRIP_PATTERNS UNCHANGED_TO_CALLBACK").split())
"""Every ``FRONTIER_RATE_*`` setting an adapter reads (tests/test_scrapy_setup.py checks the
sources mention no other)."""


def warn_unknown_settings(settings: Any) -> list[str]:
    """A WARNING for each ``FRONTIER_RATE_*`` setting nobody reads, naming the closest known
    one (a typo of BUDGET was silently ignored before issue 33)."""
    unknown = sorted(name for name in settings if isinstance(name, str)
                     and name.startswith(PREFIX) and name not in KNOWN_SETTINGS)
    for name in unknown:
        suffixes = sorted(known[len(PREFIX):] for known in KNOWN_SETTINGS)
        close = difflib.get_close_matches(name[len(PREFIX):], suffixes, n=1, cutoff=0.6)
        hint = f"; did you mean {PREFIX}{close[0]}?" if close else ""
        logger.warning("frontier-rate: unknown setting %s is ignored%s", name, hint)
    return unknown


def use_data_dir_setting(settings: Any) -> None:
    """``FRONTIER_RATE_DATA_DIR`` as a Scrapy setting: where the embedded Redis (and the
    default spool) live, for this process. It sets the environment variable of the same
    name, which ``connection.data_dir`` and the ``frontier-rate`` command read; an
    environment variable the user set wins."""
    value = settings.get("FRONTIER_RATE_DATA_DIR")
    if value and not os.environ.get("FRONTIER_RATE_DATA_DIR"):
        os.environ["FRONTIER_RATE_DATA_DIR"] = str(value)


def mismatch_error(exc: Exception, settings: Any) -> SettingError:
    """A ``SettingsMismatch`` said in Scrapy's terms: the setting the user changed between
    runs, the stored value, and the settings that accept the change."""
    differ, stored = getattr(exc, "differ", None), getattr(exc, "stored", None)
    namespace = getattr(exc, "namespace", "?")
    if not differ or stored is None:
        return SettingError(str(exc))
    parts, options = [], []
    for field, asked in differ.items():
        name = f"FRONTIER_RATE_{field.upper()}"
        if field == "min_host_delay" and settings.get(name) in (None, ""):
            name = "DOWNLOAD_DELAY"
        parts.append(f"{name} = {asked!r} but the frontier stores {stored[field]!r} from an "
                     "earlier run")
        options.append(f"--{field.replace('_', '-')} {asked!r}")
    return SettingError(
        f"namespace {namespace!r}: {'; '.join(parts)}. Set FRONTIER_RATE_OVERRIDE_SETTINGS = "
        "True to store the new value for every crawl of this frontier (or run 'frontier-rate "
        f"settings -n {namespace} {' '.join(options)}'), or go back to the stored value.")


def open_scrapy_frontier(redis_url: str | None, kwargs: dict[str, Any], settings: Any) -> Any:
    """The crawl's ``Frontier``: where neither DOWNLOAD_DELAY nor the frontier's host delay is
    set, a namespace it creates gets Scrapy's own politeness (no delay;
    CONCURRENT_REQUESTS_PER_DOMAIN holds). ``FRONTIER_RATE_OVERRIDE_SETTINGS`` stores this
    crawl's shared settings for every process; without it a changed one is a
    ``SettingError`` in Scrapy's terms (``mismatch_error``)."""
    override = settings.getbool("FRONTIER_RATE_OVERRIDE_SETTINGS", False)
    try:
        return Frontier(redis_url, setting_defaults=SCRAPY_DEFAULTS, override_settings=override,
                        **kwargs)
    except SettingsMismatch as exc:
        raise mismatch_error(exc, settings) from None


def hand_back_at_exit(scheduler: Any) -> Callable[[], None]:
    """Hand back a crawl's leases when its process exits without closing the scheduler
    (a double Ctrl-C stops Scrapy's reactor at once; ``close`` never runs). Before issue
    33 those pages stayed leased for ``FRONTIER_RATE_LEASE_TIMEOUT`` (300 s) and the next
    run fetched nothing. Leases buffered or in flight without an answer go back at exit;
    answers already received are sent first (``FrontierClient.close``), then the pages of
    answers whose items had not left the item pipelines are redone (``settling.py``, issue
    60). A process killed outright (SIGKILL, power loss) still leaves its leases to expire."""
    ref = weakref.ref(scheduler)

    def at_exit() -> None:
        s = ref()
        if s is None or s._closing or s.client is None:
            return
        s._closing = True
        unsent = [d for d, _ in s._buffer] + [d for flight, d in s._in_flight.items()
                                              if flight not in s._answered]
        unsettled = s._settling.unsettled()
        logger.warning("frontier-rate: the crawl stopped without closing; handing back %d "
                       "leases, and %d pages whose answers had not gone through the item "
                       "pipelines (fetched again at once, without validators)", len(unsent),
                       len(unsettled))
        try:
            s.client.close(unsent, unsettled=unsettled)
        except Exception as exc:  # at exit: say it, never raise
            logger.warning("frontier-rate: leases not handed back (%r); they expire after "
                           "FRONTIER_RATE_LEASE_TIMEOUT", exc)

    atexit.register(at_exit)
    return at_exit

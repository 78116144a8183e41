"""The ``FRONTIER_RATE_*`` settings and request-meta rules both crawler adapters share.

The Scrapy scheduler and the Frontera backend read the same settings and
store request meta the same way; this module is the one place that parses
them, so the two adapters cannot drift apart.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from scrapy.utils.misc import load_object

from frontier_rate.client.clock import CLOCK_SLACK, REDIS_RETRY_FIRST, REDIS_RETRY_MAX  # noqa: F401 (public names)
from frontier_rate.crawl.content_rules import ContentRules, check_settings
from frontier_rate.crawl.fingerprint import DEFAULT_MAX_BODY, Fingerprinter
from frontier_rate.crawl.politeness import DEFAULT_MAX_CRAWL_DELAY
from frontier_rate.crawl.signal_sources import MAX_BYTES, MAX_URLS, SITEMAP_WEIGHT
from frontier_rate.engine.frontier import Frontier
from frontier_rate.store.connection import data_dir

WEIGHT_KEY = "frontier_rate_weight"
"""Request meta key for a page's importance w_i (default 1.0)."""
DONT_REVISIT_KEY = "dont_revisit"
"""Request meta key: fetch once as an ordinary request, never revisit."""

def flag(value: Any) -> bool:
    """A boolean setting: a bool, 0/1, or true/false/yes/no/on/off in any case."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {value!r}")


FRONTIER_SETTINGS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "namespace": ("FRONTIER_RATE_NAMESPACE", str),
    "estimator": ("FRONTIER_RATE_ESTIMATOR", str),
    "policy": ("FRONTIER_RATE_POLICY", str),
    "objective": ("FRONTIER_RATE_OBJECTIVE", str),
    "budget": ("FRONTIER_RATE_BUDGET", float),
    "min_host_delay": ("FRONTIER_RATE_MIN_HOST_DELAY", float),
    "min_interval": ("FRONTIER_RATE_MIN_INTERVAL", float),
    "max_interval": ("FRONTIER_RATE_MAX_INTERVAL", float),
    "lease_timeout": ("FRONTIER_RATE_LEASE_TIMEOUT", float),
    "prior_rate": ("FRONTIER_RATE_PRIOR_RATE", float),
    "redis_timeout": ("FRONTIER_RATE_REDIS_TIMEOUT", float),
    "fill_budget": ("FRONTIER_RATE_FILL_BUDGET", flag),
    "change_dates": ("FRONTIER_RATE_CHANGE_DATES", flag),
    "server_clock_rate": ("FRONTIER_RATE_SERVER_CLOCK_RATE", float),
    "budget_first_fetches": ("FRONTIER_RATE_BUDGET_FIRST_FETCHES", flag),
    "cochange": ("FRONTIER_RATE_COCHANGE", flag),
}
"""``Frontier`` keyword -> (setting name, type)."""


def frontier_kwargs(get: Callable[[str], Any]) -> dict[str, Any]:
    """``Frontier`` keywords from the settings that are set (``get`` reads one setting).

    ``DOWNLOAD_DELAY`` (Scrapy's politeness setting, 0 by default) serves as the
    minimum host delay when ``FRONTIER_RATE_MIN_HOST_DELAY`` is not set; where
    neither is set (Frontera's own settings) the engine's default applies. A value
    of the wrong type is a ValueError naming the setting.
    """
    kwargs: dict[str, Any] = {}
    for argument, (name, kind) in FRONTIER_SETTINGS.items():
        value = get(name)
        if value is None or value == "":
            continue
        try:
            kwargs[argument] = kind(value)
        except (TypeError, ValueError):
            raise ValueError(f"{name}={value!r} is not a valid {kind.__name__}") from None
    if "min_host_delay" not in kwargs:
        delay = get("DOWNLOAD_DELAY")
        try:
            delay = float(delay) if delay not in (None, "") else None
        except (TypeError, ValueError):
            raise ValueError(f"DOWNLOAD_DELAY={delay!r} is not a valid float") from None
        if delay is not None:
            kwargs["min_host_delay"] = delay
    return kwargs


def strip_patterns(value: Any) -> list[str]:
    """FRONTIER_RATE_STRIP_PATTERNS: a list of regexes, a JSON list, or one regex."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        if not value.strip().startswith("["):
            return [value]
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ValueError(f"FRONTIER_RATE_STRIP_PATTERNS={value!r} is not a JSON list: {exc}") from None
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"FRONTIER_RATE_STRIP_PATTERNS must be a list of regexes, got {value!r}")
    return [str(pattern) for pattern in value]


def close_after(value: Any) -> tuple[float | None, bool]:
    """FRONTIER_RATE_CLOSE_AFTER: (seconds of running or None, close once idle)."""
    if value is None or value == "" or value == 0:
        return None, False
    if isinstance(value, str) and value.strip().lower() == "idle":
        return None, True
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if not 0 < seconds < math.inf:
        raise ValueError(f"FRONTIER_RATE_CLOSE_AFTER={value!r} must be a positive number of seconds or 'idle'")
    return seconds, False


_JSON_SCALARS = (str, int, bool, type(None))
"""Exact types that JSON carries unchanged (not float: NaN and infinities are refused)."""


def json_value(value: Any, what: str) -> Any:
    """``value`` if JSON carries it unchanged, else ValueError naming ``what``."""
    if type(value) in _JSON_SCALARS:
        return value  # always survives the round trip (most request meta: depth, flags)
    try:
        if json.loads(json.dumps(value, allow_nan=False)) != value:
            raise TypeError("it does not survive a JSON round trip unchanged")
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{what} is not JSON-serialisable ({type(value).__name__}: {exc}); frontier-rate "
            "stores request meta as JSON in Redis (never pickle). Store an id or a plain "
            f"value instead, or set meta[{DONT_REVISIT_KEY!r}]=True for a one-off request."
        ) from None
    return value


def page_weight(value: Any, url: str) -> float:
    """A page's weight from request meta ``frontier_rate_weight``: a positive finite number."""
    try:
        weight = float(value)
    except (TypeError, ValueError):
        weight = math.nan
    if not 0 < weight < math.inf:
        raise ValueError(f"request meta[{WEIGHT_KEY!r}]={value!r} of {url} must be a positive number")
    return weight


def number(get: Callable[[str], Any], name: str, kind: type, default: Any) -> Any:
    """A numeric setting of type ``kind`` (int or float), ``default`` when not set."""
    value = get(name)
    if value is None or value == "":
        return default
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={value!r} is not a valid {kind.__name__}") from None


def flag_setting(get: Callable[[str], Any], name: str, default: bool) -> bool:
    """A boolean setting, ``default`` when not set; a ValueError names a bad value."""
    value = get(name)
    if value is None or value == "":
        return default
    try:
        return flag(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not a boolean") from None


def clock_setting(value: Any) -> Callable[[], float]:
    """FRONTIER_RATE_CLOCK: a callable or its dotted path (tests use a virtual clock)."""
    if value is None or value == "":
        return time.time
    if isinstance(value, str):
        try:
            value = load_object(value)
        except (ImportError, NameError, ValueError) as exc:
            raise ValueError(f"FRONTIER_RATE_CLOCK={value!r} cannot be imported: {exc}") from None
    if not callable(value):
        raise ValueError(f"FRONTIER_RATE_CLOCK={value!r} is not callable")
    return value


FRONTERA_DRIVERS = ("auto", "background", "inline")
"""FRONTIER_RATE_FRONTERA_DRIVER values: how the Frontera backend drives its ``FrontierClient``."""


def frontera_driver(value: Any) -> str:
    """FRONTIER_RATE_FRONTERA_DRIVER: "auto" (default), "background" or "inline".

    "background": a worker thread makes every Redis round trip, so Frontera's
    calls never wait on Redis (except at start and stop). "inline": each call
    does its Redis I/O in the caller's thread, which keeps a virtual clock
    exact. "auto" picks background on the real clock (``time.time``) and
    inline on any other clock. The Scrapy scheduler always runs background.
    """
    if value is None or value == "":
        return "auto"
    text = str(value).strip().lower()
    if text not in FRONTERA_DRIVERS:
        raise ValueError(f"FRONTIER_RATE_FRONTERA_DRIVER={value!r} must be one of "
                         f"{', '.join(FRONTERA_DRIVERS)}")
    return text


def check_frontier_kwargs(kwargs: dict[str, Any], get: Callable[[str], Any]) -> None:
    """Check the ``Frontier`` keywords taken from settings now, not when Redis is opened: a
    ValueError names the setting and its value (the engine's own checks, no connection)."""
    names = {argument: name for argument, (name, _) in FRONTIER_SETTINGS.items()}
    if get("FRONTIER_RATE_MIN_HOST_DELAY") in (None, ""):
        names["min_host_delay"] = "DOWNLOAD_DELAY"
    try:
        Frontier.check_options(**kwargs)
    except ValueError as exc:
        for argument, value in kwargs.items():  # the setting whose value alone is at fault
            try:
                Frontier.check_options(**{a: v for a, v in kwargs.items() if a != argument})
            except ValueError:
                continue
            raise ValueError(f"{names.get(argument, argument)}={value!r}: {exc}") from None
        shown = ", ".join(f"{names.get(a, a)}={v!r}" for a, v in kwargs.items())
        raise ValueError(f"{exc} (settings: {shown})") from None


def check_fingerprint_settings(mode: str, patterns: list[str], max_body: int) -> None:
    """Build the fingerprinter the settings describe; a ValueError names the setting."""
    for name, value, args in (("FRONTIER_RATE_MAX_BODY", max_body, ("raw", None, max_body)),
                              ("FRONTIER_RATE_STRIP_PATTERNS", patterns, ("raw", patterns)),
                              ("FRONTIER_RATE_FINGERPRINT", mode, (mode,))):
        try:
            Fingerprinter(*args)
        except ValueError as exc:
            text = str(exc)
            raise ValueError(text if text.startswith(name) else f"{name}={value!r}: {text}") \
                from None


@dataclass
class AdapterSettings:
    """Everything an adapter reads from its settings, parsed once (the tables in
    docs/SCRAPY.md and docs/FRONTERA.md)."""

    redis_url: str | None
    frontier: dict[str, Any]
    fingerprint: str
    strip_patterns: list[str]
    max_body: int
    detection_process: bool
    shared_page_memory: bool
    conditional: bool
    batch: int | None
    close_after: float | None
    close_when_idle: bool
    log_interval: float
    spool_dir: str
    clock: Callable[[], float]
    obey_crawl_delay: bool
    robots_ttl: float
    max_crawl_delay: float
    robots_agent: str
    per_host: int
    framework_reads_robots: bool
    frontera_driver: str = "auto"
    unchanged_to_callback: bool | None = None
    """Scrapy: do unchanged revisits reach the spider's callbacks? None: not set (yes)."""
    content_rules: ContentRules = field(default_factory=lambda: ContentRules({}, []))
    """``FRONTIER_RATE_CONTENT`` and ``FRONTIER_RATE_IGNORE_TEXT``, and each request's meta."""
    sitemaps: list[str] = field(default_factory=list)
    sitemaps_from_robots: bool = False
    sitemap_discover: bool = True
    sitemap_weight: float = 0.3
    sitemap_max_bytes: int = 50 * 1024 * 1024
    sitemap_max_urls: int = 50_000
    sitemap_max_files: int = 1000


def adapter_settings(get: Callable[[str], Any]) -> AdapterSettings:
    """Parse and check the adapter settings; a bad value is a ValueError naming the setting
    (every check that needs no Redis is made here, when the adapter is built).

    The spool goes to FRONTIER_RATE_SPOOL_DIR, else ``<JOBDIR>/frontier-rate``,
    else the data directory. With FRONTIER_RATE_CLOSE_AFTER = "idle", pages are
    not leased before they fall due (``fill_budget`` off unless set).
    """
    seconds, idle = close_after(get("FRONTIER_RATE_CLOSE_AFTER"))
    kwargs = frontier_kwargs(get)
    if idle:
        kwargs.setdefault("fill_budget", False)
    check_frontier_kwargs(kwargs, get)
    jobdir = get("JOBDIR")
    robots_obey = flag_setting(get, "ROBOTSTXT_OBEY", False)
    batch = number(get, "FRONTIER_RATE_BATCH", int, None)
    if batch is not None and batch < 1:
        raise ValueError(f"FRONTIER_RATE_BATCH={batch!r} must be at least 1")
    fingerprint = get("FRONTIER_RATE_FINGERPRINT") or "content"
    patterns = strip_patterns(get("FRONTIER_RATE_STRIP_PATTERNS"))
    max_body = number(get, "FRONTIER_RATE_MAX_BODY", int, DEFAULT_MAX_BODY)
    check_fingerprint_settings(fingerprint, patterns, max_body)
    by_site, ignore_text = check_settings(get("FRONTIER_RATE_CONTENT"),
                                          get("FRONTIER_RATE_IGNORE_TEXT"))
    if (by_site or ignore_text) and fingerprint not in ("content", "text"):
        raise ValueError(f"FRONTIER_RATE_CONTENT and FRONTIER_RATE_IGNORE_TEXT need "
                         f"FRONTIER_RATE_FINGERPRINT 'content' or 'text', not {fingerprint!r}")
    return AdapterSettings(
        redis_url=get("FRONTIER_RATE_REDIS_URL") or None,
        frontier=kwargs,
        fingerprint=fingerprint,
        strip_patterns=patterns,
        max_body=max_body,
        detection_process=flag_setting(get, "FRONTIER_RATE_DETECTION_PROCESS", True),
        shared_page_memory=flag_setting(get, "FRONTIER_RATE_SHARED_PAGE_MEMORY", False),
        conditional=flag_setting(get, "FRONTIER_RATE_CONDITIONAL", True),
        batch=batch,
        close_after=seconds,
        close_when_idle=idle,
        log_interval=number(get, "FRONTIER_RATE_LOG_INTERVAL", float, 60.0),
        spool_dir=get("FRONTIER_RATE_SPOOL_DIR")
        or (f"{jobdir}/frontier-rate" if jobdir else str(data_dir() / "spool")),
        clock=clock_setting(get("FRONTIER_RATE_CLOCK")),
        obey_crawl_delay=flag_setting(get, "FRONTIER_RATE_OBEY_CRAWL_DELAY", robots_obey),
        robots_ttl=number(get, "FRONTIER_RATE_ROBOTS_TTL", float, 86400.0),
        max_crawl_delay=number(get, "FRONTIER_RATE_MAX_CRAWL_DELAY", float,
                               DEFAULT_MAX_CRAWL_DELAY),
        robots_agent=get("ROBOTSTXT_USER_AGENT") or get("USER_AGENT") or "*",
        per_host=max(1, number(get, "CONCURRENT_REQUESTS_PER_IP", int, 0)
                     or number(get, "CONCURRENT_REQUESTS_PER_DOMAIN", int, 8)),
        framework_reads_robots=robots_obey,
        frontera_driver=frontera_driver(get("FRONTIER_RATE_FRONTERA_DRIVER")),
        unchanged_to_callback=None if get("FRONTIER_RATE_UNCHANGED_TO_CALLBACK") in (None, "")
        else flag_setting(get, "FRONTIER_RATE_UNCHANGED_TO_CALLBACK", True),
        content_rules=ContentRules(by_site, ignore_text),
        **sitemap_settings(get),
    )


def sitemap_settings(get: Callable[[str], Any]) -> dict[str, Any]:
    """The ``FRONTIER_RATE_SITEMAP*`` settings (docs/SIGNALS.md), checked."""
    urls = get("FRONTIER_RATE_SITEMAPS") or []
    if isinstance(urls, str):
        urls = [u for u in re.split(r"[\s,]+", urls) if u]
    if not isinstance(urls, (list, tuple)) or not all(isinstance(u, str) for u in urls):
        raise ValueError(f"FRONTIER_RATE_SITEMAPS={urls!r} must be a list of URLs")
    for url in urls:
        if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
            raise ValueError(f"FRONTIER_RATE_SITEMAPS: {url!r} is not an http(s) URL")
    out = {"sitemaps": list(urls),
           "sitemaps_from_robots": flag_setting(get, "FRONTIER_RATE_SITEMAPS_FROM_ROBOTS", False),
           "sitemap_discover": flag_setting(get, "FRONTIER_RATE_SITEMAP_DISCOVER", True),
           "sitemap_weight": number(get, "FRONTIER_RATE_SITEMAP_WEIGHT", float, SITEMAP_WEIGHT),
           "sitemap_max_bytes": number(get, "FRONTIER_RATE_SITEMAP_MAX_BYTES", int, MAX_BYTES),
           "sitemap_max_urls": number(get, "FRONTIER_RATE_SITEMAP_MAX_URLS", int, MAX_URLS),
           "sitemap_max_files": number(get, "FRONTIER_RATE_SITEMAP_MAX_FILES", int, 1000)}
    for name in ("sitemap_weight", "sitemap_max_bytes", "sitemap_max_urls", "sitemap_max_files"):
        if not out[name] > 0:
            raise ValueError(f"FRONTIER_RATE_{name.upper()}={out[name]!r} must be positive")
    return out

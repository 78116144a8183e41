"""Every ``FRONTIER_RATE_*`` setting, declared once: name, type, default, check, whether the
namespace shares it, and which adapter reads it.

The readers (``crawl/settings.py``: Scrapy's and Frontera's), the misspelling warnings
(``warn_unknown_settings``), the ``Frontier`` options an adapter passes on and the settings
tables of docs/SCRAPY.md and docs/FRONTERA.md (tests/test_setting_table.py holds them to this
table) all come from ``TABLE``; before issue 61 each kept its own list.

To add a setting: one ``Setting(...)`` row in ``TABLE`` (and, when an adapter keeps the value,
the ``AdapterSettings`` field named by ``field``); its docs row is checked against it.
"""

from __future__ import annotations

import difflib
import json
import logging
import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from scrapy.settings import SETTINGS_PRIORITIES
from scrapy.utils.misc import load_object

from frontier_rate.crawl.robots_txt import DEFAULT_MAX_CRAWL_DELAY
from frontier_rate.crawl.signal_sources import MAX_BYTES, MAX_URLS, SITEMAP_WEIGHT
from frontier_rate.detection.fingerprint import DEFAULT_MAX_BODY

logger = logging.getLogger("frontier_rate.settings")

PREFIX = "FRONTIER_RATE_"
SCRAPY, FRONTERA = "scrapy", "frontera"
BOTH = frozenset({SCRAPY, FRONTERA})
PROCESS, SHARED, FIXED = "process", "shared", "fixed"
"""A setting's scope: this process's own; stored in the namespace for every process (changed
only with ``FRONTIER_RATE_OVERRIDE_SETTINGS``); fixed when the namespace is created."""

Get = Callable[[str], Any]
"""Reads one setting by name (``Settings.get``, ``dict.get``); None or "" is unset."""


# -- checks: a raw value -> the value; ValueError saying what is wrong (the reader names it) --

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


def boolean(value: Any) -> bool:
    """``flag`` with the reader's wording."""
    try:
        return flag(value)
    except ValueError:
        raise ValueError("is not a boolean") from None


def typed(kind: type) -> Callable[[Any], Any]:
    """A check converting to ``kind`` (int, float, str)."""
    def check(value: Any) -> Any:
        try:
            return kind(value)
        except (TypeError, ValueError):
            raise ValueError(f"is not a valid {kind.__name__}") from None
    check.__name__ = kind.__name__
    return check


def positive(kind: type) -> Callable[[Any], Any]:
    """A check converting to ``kind``, then refusing zero and below."""
    convert = typed(kind)

    def check(value: Any) -> Any:
        number = convert(value)
        if not number > 0:
            raise ValueError("must be positive")
        return number
    check.__name__ = f"positive {kind.__name__}"
    return check


def batch(value: Any) -> int:
    """FRONTIER_RATE_BATCH: pages leased per frontier call, at least 1."""
    number = typed(int)(value)
    if number < 1:
        raise ValueError("must be at least 1")
    return number


def strip_patterns(value: Any) -> list[str]:
    """FRONTIER_RATE_STRIP_PATTERNS: a list of regexes, a JSON list, or one regex."""
    if isinstance(value, str):
        if not value.strip().startswith("["):
            return [value]
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ValueError(f"is not a JSON list: {exc}") from None
    if not isinstance(value, (list, tuple)):
        raise ValueError("must be a list of regexes")
    return [str(pattern) for pattern in value]


def close_after(value: Any) -> tuple[float | None, bool]:
    """FRONTIER_RATE_CLOSE_AFTER: (seconds of running or None, close once idle)."""
    if value == 0:
        return None, False
    if isinstance(value, str) and value.strip().lower() == "idle":
        return None, True
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if not 0 < seconds < math.inf:
        raise ValueError("must be a positive number of seconds or 'idle'")
    return seconds, False


def clock(value: Any) -> Callable[[], float]:
    """FRONTIER_RATE_CLOCK: a callable or its dotted path (tests use a virtual clock)."""
    if isinstance(value, str):
        try:
            value = load_object(value)
        except (ImportError, NameError, ValueError) as exc:
            raise ValueError(f"cannot be imported: {exc}") from None
    if not callable(value):
        raise ValueError("is not callable")
    return value


FRONTERA_DRIVERS = ("auto", "background", "inline")
"""FRONTIER_RATE_FRONTERA_DRIVER values: how the Frontera backend drives its ``FrontierClient``."""


def frontera_driver(value: Any) -> str:
    """FRONTIER_RATE_FRONTERA_DRIVER: "auto", "background" or "inline" (docs/SCRAPY.md)."""
    text = str(value).strip().lower()
    if text not in FRONTERA_DRIVERS:
        raise ValueError(f"must be one of {', '.join(FRONTERA_DRIVERS)}")
    return text


def url_list(value: Any) -> list[str]:
    """FRONTIER_RATE_SITEMAPS: http(s) URLs, as a list or one string split at commas/spaces."""
    if isinstance(value, str):
        value = [u for u in re.split(r"[\s,]+", value) if u]
    if not isinstance(value, (list, tuple)) or not all(isinstance(u, str) for u in value):
        raise ValueError("must be a list of URLs")
    for url in value:
        if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
            raise ValueError(f"{url!r} is not an http(s) URL")
    return list(value)


def anything(value: Any) -> Any:
    """Checked by its user (content rules, the data directory)."""
    return value


# -- the table ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Setting:
    """One ``FRONTIER_RATE_*`` setting."""

    name: str
    check: Callable[[Any], Any]
    """Raw value -> value; ValueError saying what is wrong (the reader adds name and value)."""
    default: Any
    """The value when unset (None: the engine's or the caller's own)."""
    shown: str
    """The default as the docs' settings tables show it."""
    readers: frozenset[str] = BOTH
    scope: str = PROCESS
    option: str | None = None
    """The ``FrontierOptions`` field it sets, if any."""
    field: str | None = None
    """The ``AdapterSettings`` field it sets, if any."""
    fallback: str | None = None
    """Another setting read with the same check when this one is unset (Scrapy's own)."""
    unread: str | None = None
    """Said in a WARNING when an adapter that does not read it finds it set to a true value."""

    @property
    def kind(self) -> str:
        """The type, as the table says it."""
        return self.check.__name__


def _s(suffix: str, check: Callable[[Any], Any], default: Any, shown: str,
       **rest: Any) -> Setting:
    return Setting(PREFIX + suffix, check, default, shown, **rest)


TABLE: tuple[Setting, ...] = (
    _s("REDIS_URL", anything, None, "unset: embedded Redis", field="redis_url"),
    _s("NAMESPACE", typed(str), None, "`<project>.<spider>` ([above](#which-frontier-a-crawl-opens))",
       option="namespace"),
    _s("DATA_DIR", anything, None, "`$FRONTIER_RATE_DATA_DIR`, else `~/.local/share/frontier-rate`",
       readers=frozenset({SCRAPY})),
    _s("COCHANGE", boolean, False, "`False`", option="cochange"),
    _s("GROUP_PRIOR", boolean, False, "`False`", option="group_prior"),
    _s("MIN_CHANGE_CHANCE", typed(float), None, "`0.02`", option="min_change_chance"),
    _s("SHARED_SEND", boolean, True, "`True`", field="shared_send"),
    _s("OVERRIDE_SETTINGS", boolean, False, "`False`", readers=frozenset({SCRAPY}),
       field="override_settings"),
    _s("REDIS_TIMEOUT", typed(float), None, "`5.0`", option="redis_timeout"),
    _s("OPEN_WAIT", typed(float), 60.0, "`60`", field="open_wait"),
    _s("ESTIMATOR", typed(str), None, '`"interval"`', scope=FIXED, option="estimator"),
    _s("FILL_BUDGET", boolean, None, "on for `interval`", option="fill_budget"),
    _s("CHANGE_DATES", boolean, None, "`True`", option="change_dates"),
    _s("SERVER_CLOCK_RATE", typed(float), None, "`1`", option="server_clock_rate"),
    _s("POLICY", typed(str), None, '`"whittle"`', option="policy"),
    _s("OBJECTIVE", typed(str), None, '`"freshness"`', scope=FIXED, option="objective"),
    _s("BUDGET", typed(float), None, "`1.0`", scope=SHARED, option="budget"),
    _s("BUDGET_FIRST_FETCHES", boolean, None, "`False`", option="budget_first_fetches"),
    _s("MIN_HOST_DELAY", typed(float), None, "`DOWNLOAD_DELAY` (Scrapy's default: 0)",
       scope=SHARED, option="min_host_delay", fallback="DOWNLOAD_DELAY"),
    _s("MIN_INTERVAL", typed(float), None, "`60`", scope=SHARED, option="min_interval"),
    _s("MAX_INTERVAL", typed(float), None, "`2592000` (30 days)", scope=SHARED,
       option="max_interval"),
    _s("LEASE_TIMEOUT", typed(float), None, "`300`", scope=SHARED, option="lease_timeout"),
    _s("PRIOR_RATE", typed(float), None, "`1/86400`", scope=SHARED, option="prior_rate"),
    _s("CLOSE_AFTER", close_after, (None, False), "unset: run forever"),
    _s("FINGERPRINT", anything, "content", '`"content"`', field="fingerprint"),
    _s("DETECTION_PROCESS", boolean, True, "`True`", readers=frozenset({SCRAPY}),
       field="detection_process", unread="it detects changes in the crawler's process"),
    _s("SHARED_PAGE_MEMORY", boolean, True, "`True`", field="shared_page_memory"),
    _s("STRIP_PATTERNS", strip_patterns, [], "`[]`", field="strip_patterns"),
    _s("CONTENT", anything, None, "`{}`"),
    _s("IGNORE_TEXT", anything, None, "`[]`"),
    _s("MAX_BODY", typed(int), DEFAULT_MAX_BODY, f"`{DEFAULT_MAX_BODY}`", field="max_body"),
    _s("MAX_CRAWL_DELAY", typed(float), DEFAULT_MAX_CRAWL_DELAY, "`60`",
       readers=frozenset({SCRAPY}), field="max_crawl_delay"),
    _s("SPOOL_DIR", anything, None, "`JOBDIR/frontier-rate` if `JOBDIR` is set, else the "
       "data directory's `spool/`", field="spool_dir"),
    _s("CONDITIONAL", boolean, True, "`True`", field="conditional"),
    _s("UNCHANGED_TO_CALLBACK", boolean, None, "`True`", readers=frozenset({SCRAPY}),
       field="unchanged_to_callback"),
    _s("OBEY_CRAWL_DELAY", boolean, False, "`ROBOTSTXT_OBEY`", readers=frozenset({SCRAPY}),
       field="obey_crawl_delay", fallback="ROBOTSTXT_OBEY"),
    _s("ROBOTS_TTL", typed(float), 86400.0, "`86400`", readers=frozenset({SCRAPY}),
       field="robots_ttl"),
    _s("BATCH", batch, None, "`CONCURRENT_REQUESTS`", readers=frozenset({SCRAPY}), field="batch"),
    _s("CLOCK", clock, time.time, "`time.time`", field="clock"),
    _s("FRONTERA_DRIVER", frontera_driver, "auto", '`"auto"`', readers=frozenset({FRONTERA}),
       field="frontera_driver"),
    _s("LOG_INTERVAL", typed(float), 60.0, "`60`", field="log_interval"),
    _s("SITEMAPS", url_list, [], "`[]`", field="sitemaps"),
    _s("SITEMAPS_FROM_ROBOTS", boolean, False, "`False`", readers=frozenset({SCRAPY}),
       field="sitemaps_from_robots", unread="it never sees robots.txt; list the sitemaps in "
       "FRONTIER_RATE_SITEMAPS"),
    _s("SITEMAP_DISCOVER", boolean, True, "`True`", field="sitemap_discover"),
    _s("SITEMAP_WEIGHT", positive(float), SITEMAP_WEIGHT, "`0.3`", field="sitemap_weight"),
    _s("SITEMAP_MAX_BYTES", positive(int), MAX_BYTES, f"`{MAX_BYTES}`",
       field="sitemap_max_bytes"),
    _s("SITEMAP_MAX_URLS", positive(int), MAX_URLS, f"`{MAX_URLS}`", field="sitemap_max_urls"),
    _s("SITEMAP_MAX_FILES", positive(int), 1000, "`1000`", field="sitemap_max_files"),
)
"""Every ``FRONTIER_RATE_*`` setting (tests/test_scrapy_setup.py checks the sources read no
other; tests/test_setting_table.py checks the docs' tables against it)."""

BY_NAME: dict[str, Setting] = {setting.name: setting for setting in TABLE}
KNOWN_SETTINGS = frozenset(BY_NAME)


def unset(value: Any) -> bool:
    """A setting left out (None) or set empty."""
    return value is None or (isinstance(value, str) and value == "")


def named_error(name: str, value: Any, exc: Exception) -> ValueError:
    """The ValueError of a bad value: the setting's name, its value, and what is wrong."""
    text = str(exc)
    return ValueError(text if text.startswith(name) else f"{name}={value!r} {text}")


def parse(name: str, value: Any) -> Any:
    """``value`` of the setting ``name`` checked (its default when unset); a bad value is a
    ValueError naming the setting and the value."""
    setting = BY_NAME[name]
    if unset(value):
        return setting.default
    try:
        return setting.check(value)
    except (TypeError, ValueError) as exc:
        raise named_error(name, value, exc) from None


def read(get: Get, name: str) -> Any:
    """One setting of ``TABLE`` read with ``get`` and checked (``parse``); its fallback, a
    setting of the crawler framework, is read when it is unset."""
    fallback = BY_NAME[name].fallback
    if fallback is not None and unset(get(name)) and not unset(get(fallback)):
        try:
            return BY_NAME[name].check(get(fallback))
        except (TypeError, ValueError) as exc:
            raise named_error(fallback, get(fallback), exc) from None
    return parse(name, get(name))


def own(get: Get, name: str, check: Callable[[Any], Any], default: Any) -> Any:
    """A crawler framework's own setting (``ROBOTSTXT_OBEY`` ...) read with ``check``;
    ``default`` when unset, a ValueError naming it when bad."""
    value = get(name)
    if unset(value):
        return default
    try:
        return check(value)
    except (TypeError, ValueError) as exc:
        raise named_error(name, value, exc) from None


def is_set(get: Get, name: str) -> bool:
    """Whether ``name`` (or its fallback) is set."""
    fallback = BY_NAME[name].fallback
    return not unset(get(name)) or (fallback is not None and not unset(get(fallback)))


def read_by(reader: str) -> tuple[Setting, ...]:
    """The settings ``reader`` ("scrapy" or "frontera") reads."""
    return tuple(setting for setting in TABLE if reader in setting.readers)


def warn_unread(get: Get, reader: str) -> list[str]:
    """A WARNING for each setting ``reader`` does not read that is set to a true value and has
    an ``unread`` note (the Frontera backend detects in the crawler's process, sees no
    robots.txt); the Scrapy default of such a setting, left unset, says nothing."""
    ignored = []
    for setting in TABLE:
        if reader in setting.readers or setting.unread is None or unset(get(setting.name)) \
                or not read(get, setting.name):
            continue
        ignored.append(setting.name)
        logger.warning("frontier-rate: %s is not read by the %s %s: %s", setting.name,
                       reader.capitalize(), "backend" if reader == FRONTERA else "scheduler",
                       setting.unread)
    return ignored


def warn_unknown_settings(settings: Any) -> list[str]:
    """A WARNING for each ``FRONTIER_RATE_*`` setting nobody reads, naming the closest known
    one (a typo of BUDGET was silently ignored before issue 33)."""
    unknown = sorted(name for name in settings if isinstance(name, str)
                     and name.startswith(PREFIX) and name not in KNOWN_SETTINGS)
    suffixes = sorted(known[len(PREFIX):] for known in KNOWN_SETTINGS)
    for name in unknown:
        close = difflib.get_close_matches(name[len(PREFIX):], suffixes, n=1, cutoff=0.6)
        hint = f"; did you mean {PREFIX}{close[0]}?" if close else ""
        logger.warning("frontier-rate: unknown setting %s is ignored%s", name, hint)
    return unknown


def user_settings(settings: Any) -> Get:
    """Scrapy's ``settings.get``, except that a ``DOWNLOAD_DELAY`` the user did not set reads
    as unset: Scrapy's default (0) is this scheduler's default too, but not an explicit value
    that would conflict with a host delay the namespace stores."""
    def get(name: str) -> Any:
        if name == "DOWNLOAD_DELAY" and \
                settings.getpriority(name) <= SETTINGS_PRIORITIES["default"]:
            return None
        return settings.get(name)

    return get


def use_data_dir_setting(get: Get) -> None:
    """``FRONTIER_RATE_DATA_DIR`` as a Scrapy setting: where the embedded Redis (and the
    default spool) live, for this process. It sets the environment variable of the same
    name, which ``connection.data_dir`` and the ``frontier-rate`` command read; an
    environment variable the user set wins."""
    value = read(get, PREFIX + "DATA_DIR")
    if value and not os.environ.get("FRONTIER_RATE_DATA_DIR"):
        os.environ["FRONTIER_RATE_DATA_DIR"] = str(value)

"""The ``FRONTIER_RATE_*`` settings as the crawler adapters read them, and the request-meta
rules both share.

Every setting is declared once, in ``setting_table.TABLE`` (type, default, check, who reads
it); this module turns a crawler's settings into the ``AdapterSettings`` both adapters use
and the ``FrontierOptions`` they open the frontier with (``scrapy_settings`` for Scrapy's
``Settings``, ``frontera_settings`` for Frontera's), so the two adapters cannot drift apart.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from frontier_rate.client.clock import CLOCK_SLACK, REDIS_RETRY_FIRST, REDIS_RETRY_MAX  # noqa: F401 (public names)
from frontier_rate.crawl.setting_table import (  # noqa: F401 (public names)
    FRONTERA,
    FRONTERA_DRIVERS,
    PREFIX,
    SCRAPY,
    TABLE,
    Get,
    boolean,
    flag,
    is_set,
    own,
    parse,
    read,
    typed,
    unset,
    use_data_dir_setting,
    user_settings,
    warn_unknown_settings,
    warn_unread,
)
from frontier_rate.detection.content_rules import ContentRules, check_settings
from frontier_rate.detection.fingerprint import Fingerprinter
from frontier_rate.engine.options import FrontierOptions
from frontier_rate.store.connection import data_dir

WEIGHT_KEY = "frontier_rate_weight"
"""Request meta key for a page's importance w_i (default 1.0)."""
DONT_REVISIT_KEY = "dont_revisit"
"""Request meta key: fetch once as an ordinary request, never revisit."""

FRONTIER_SETTINGS: dict[str, str] = {setting.option: setting.name for setting in TABLE
                                     if setting.option is not None}
"""``FrontierOptions`` field -> the setting that sets it."""


def frontier_kwargs(get: Get) -> dict[str, Any]:
    """``FrontierOptions`` fields from the settings that are set (``get`` reads one setting).

    ``DOWNLOAD_DELAY`` (Scrapy's politeness setting, 0 by default) serves as the
    minimum host delay when ``FRONTIER_RATE_MIN_HOST_DELAY`` is not set; where
    neither is set (Frontera's own settings) the engine's default applies. A value
    of the wrong type is a ValueError naming the setting.
    """
    return {option: read(get, name) for option, name in FRONTIER_SETTINGS.items()
            if is_set(get, name)}


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


def strip_patterns(value: Any) -> list[str]:
    """FRONTIER_RATE_STRIP_PATTERNS: a list of regexes, a JSON list, or one regex."""
    return list(parse(PREFIX + "STRIP_PATTERNS", value))


def close_after(value: Any) -> tuple[float | None, bool]:
    """FRONTIER_RATE_CLOSE_AFTER: (seconds of running or None, close once idle)."""
    return parse(PREFIX + "CLOSE_AFTER", value)


def check_frontier_kwargs(kwargs: dict[str, Any], get: Get) -> None:
    """Check the ``Frontier`` options taken from settings now, not when Redis is opened: a
    ValueError names the setting and its value (the engine's own checks, no connection)."""
    names = dict(FRONTIER_SETTINGS)
    if unset(get("FRONTIER_RATE_MIN_HOST_DELAY")):
        names["min_host_delay"] = "DOWNLOAD_DELAY"
    try:
        FrontierOptions().replace(**kwargs).check()
    except ValueError as exc:
        for argument, value in kwargs.items():  # the setting whose value alone is at fault
            try:
                FrontierOptions().replace(
                    **{a: v for a, v in kwargs.items() if a != argument}).check()
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


@dataclass(frozen=True)
class AdapterSettings:
    """Everything an adapter reads from its settings, parsed once (``setting_table.TABLE``
    names the setting of each field; docs/SCRAPY.md and docs/FRONTERA.md say them)."""

    redis_url: str | None
    frontier: dict[str, Any]
    """The ``FrontierOptions`` fields the settings set (``options`` makes the object)."""
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
    shared_send: bool = True
    override_settings: bool = False
    open_wait: float = 60.0
    """Scrapy: seconds a crawl that opens while Redis cannot be reached waits for it."""
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

    def options(self, **changes: Any) -> FrontierOptions:
        """The frozen ``FrontierOptions`` the adapter opens its ``Frontier`` with: the
        settings' values, then ``changes`` (the namespace chosen, the adapter's clock)."""
        return FrontierOptions().replace(**{**self.frontier, **changes})


def adapter_settings(get: Get) -> AdapterSettings:
    """Read and check every setting of ``TABLE``; a bad value is a ValueError naming the
    setting (every check that needs no Redis is made here, when the adapter is built).

    The spool goes to FRONTIER_RATE_SPOOL_DIR, else ``<JOBDIR>/frontier-rate``,
    else the data directory. With FRONTIER_RATE_CLOSE_AFTER = "idle", pages are
    not leased before they fall due (``fill_budget`` off unless set).
    """
    seconds, idle = read(get, "FRONTIER_RATE_CLOSE_AFTER")
    kwargs = frontier_kwargs(get)
    if idle:
        kwargs.setdefault("fill_budget", False)
    check_frontier_kwargs(kwargs, get)
    values = {setting.field: read(get, setting.name) for setting in TABLE if setting.field}
    values["strip_patterns"], values["sitemaps"] = list(values["strip_patterns"]), \
        list(values["sitemaps"])
    check_fingerprint_settings(values["fingerprint"], values["strip_patterns"],
                               values["max_body"])
    by_site, ignore_text = check_settings(get("FRONTIER_RATE_CONTENT"),
                                          get("FRONTIER_RATE_IGNORE_TEXT"))
    if (by_site or ignore_text) and values["fingerprint"] not in ("content", "text"):
        raise ValueError(f"FRONTIER_RATE_CONTENT and FRONTIER_RATE_IGNORE_TEXT need "
                         f"FRONTIER_RATE_FINGERPRINT 'content' or 'text', not "
                         f"{values['fingerprint']!r}")
    jobdir = get("JOBDIR")
    values["spool_dir"] = values["spool_dir"] or \
        (f"{jobdir}/frontier-rate" if jobdir else str(data_dir() / "spool"))
    robots_obey = own(get, "ROBOTSTXT_OBEY", boolean, False)
    return AdapterSettings(
        frontier=kwargs, close_after=seconds, close_when_idle=idle,
        robots_agent=get("ROBOTSTXT_USER_AGENT") or get("USER_AGENT") or "*",
        per_host=max(1, own(get, "CONCURRENT_REQUESTS_PER_IP", typed(int), 0)
                     or own(get, "CONCURRENT_REQUESTS_PER_DOMAIN", typed(int), 8)),
        framework_reads_robots=robots_obey, content_rules=ContentRules(by_site, ignore_text),
        **values)


def scrapy_settings(settings: Any) -> AdapterSettings:
    """The Scrapy scheduler's reader: a WARNING for each misspelled ``FRONTIER_RATE_*``
    setting, ``FRONTIER_RATE_DATA_DIR`` put in the environment, then ``adapter_settings``
    (a ``DOWNLOAD_DELAY`` left at Scrapy's default reads as unset)."""
    warn_unknown_settings(settings)
    get = user_settings(settings)
    use_data_dir_setting(get)
    return adapter_settings(get)


def frontera_settings(get: Get) -> AdapterSettings:
    """The Frontera backend's reader: ``adapter_settings``, and a WARNING for each setting set
    that the backend does not read (``warn_unread``)."""
    config = adapter_settings(get)
    warn_unread(get, FRONTERA)
    return config

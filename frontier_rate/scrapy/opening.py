"""How a Scrapy crawl opens its ``Frontier``: Scrapy's politeness defaults for a namespace it
creates, and a shared setting changed since an earlier run said in Scrapy's terms."""

from __future__ import annotations

from frontier_rate.crawl.setting_table import Get, unset
from frontier_rate.crawl.settings import FRONTIER_SETTINGS
from frontier_rate.engine import Frontier, FrontierOptions
from frontier_rate.scrapy.refusal import SettingError
from frontier_rate.store.errors import SettingsMismatch

SCRAPY_DEFAULTS = {"min_host_delay": 0.0}
"""Shared settings a namespace a Scrapy crawl creates gets where the crawl set none."""


def mismatch_error(exc: Exception, get: Get) -> SettingError:
    """A ``SettingsMismatch`` said in Scrapy's terms: the setting the user changed between
    runs, the stored value, and the settings that accept the change."""
    differ, stored = getattr(exc, "differ", None), getattr(exc, "stored", None)
    namespace = getattr(exc, "namespace", "?")
    if not differ or stored is None:
        return SettingError(str(exc))
    parts, options = [], []
    for field, asked in differ.items():
        name = FRONTIER_SETTINGS.get(field, field)
        if field == "min_host_delay" and unset(get(name)):
            name = "DOWNLOAD_DELAY"
        parts.append(f"{name} = {asked!r} but the frontier stores {stored[field]!r} from an "
                     "earlier run")
        options.append(f"--{field.replace('_', '-')} {asked!r}")
    return SettingError(
        f"namespace {namespace!r}: {'; '.join(parts)}. Set FRONTIER_RATE_OVERRIDE_SETTINGS = "
        "True to store the new value for every crawl of this frontier (or run 'frontier-rate "
        f"settings -n {namespace} {' '.join(options)}'), or go back to the stored value.")


def open_scrapy_frontier(redis_url: str | None, options: FrontierOptions, get: Get) -> Frontier:
    """The crawl's ``Frontier``: where neither DOWNLOAD_DELAY nor the frontier's host delay is
    set, a namespace it creates gets Scrapy's own politeness (no delay;
    CONCURRENT_REQUESTS_PER_DOMAIN holds). ``FRONTIER_RATE_OVERRIDE_SETTINGS`` (in
    ``options``) stores this crawl's shared settings for every process; without it a changed
    one is a ``SettingError`` in Scrapy's terms (``mismatch_error``)."""
    try:
        return Frontier(redis_url, options, setting_defaults=SCRAPY_DEFAULTS)
    except SettingsMismatch as exc:
        raise mismatch_error(exc, get) from None

"""What counts on a page, when the user knows (issue 59): a CSS or XPath selector for the part
of the page that is its content, and "ignore text" patterns removed from the visible text.

Page-monitoring tools (changedetection.io, Visualping, Distill) let their users say which part
of a page matters; this is the same, the Scrapy way:

- per request, ``meta["frontier_rate_content"]`` (a selector) and
  ``meta["frontier_rate_ignore_text"]`` (a list of regular expressions); a revisit carries the
  meta the spider gave, so the rule holds for every fetch of the page;
- per site, ``FRONTIER_RATE_CONTENT``: ``{"shop.example": "div.product_main", "*": "main"}``
  (the longest host suffix that matches the page's host, ``"*"`` for any other);
- everywhere, ``FRONTIER_RATE_IGNORE_TEXT``: a list of regular expressions.

A selector is XPath when it starts with ``/`` or ``(``, CSS otherwise. The elements it
matches, in document order, are the page's content; the learned default (volatile fragments,
the host's boilerplate) still applies inside them. A selector that matches nothing makes the
answer no copy of the page (``Detection.reason`` names the selector), never a change: the
adapters count it as a failed fetch and say so in a WARNING. Ignore-text patterns are removed
from each visible-text segment (``content`` mode) or from the visible text (``text`` mode);
a segment left empty is dropped.

The selection parses the document with lxml (through parsel, which Scrapy already installs),
only for pages that have a rule.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

logger = logging.getLogger(__name__)

META_CONTENT = "frontier_rate_content"
"""The request meta key of a page's content selector."""
META_IGNORE_TEXT = "frontier_rate_ignore_text"
"""The request meta key of a page's ignore-text patterns."""


@dataclass(frozen=True)
class ContentRule:
    """A page's rule: ``select`` (CSS or XPath, None: the whole page) and ``ignore_text``
    (regular expressions removed from the visible text)."""

    select: str | None = None
    ignore_text: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.select is not None:
            check_selector(self.select)
        for pattern in self.ignore_text:
            _compiled(pattern)

    def as_json(self) -> list[Any]:
        """The rule as the detection process's frame carries it."""
        return [self.select, list(self.ignore_text)]

    @classmethod
    def from_json(cls, value: list[Any] | None) -> ContentRule | None:
        return None if value is None else cls(value[0], tuple(value[1]))

    def remove_ignored(self, text: str) -> str:
        """``text`` without the matches of the ignore-text patterns."""
        for pattern in self.ignore_text:
            text = _compiled(pattern).sub("", text)
        return text


def check_selector(selector: str) -> None:
    """ValueError naming ``selector`` when it is neither valid CSS nor valid XPath."""
    if not isinstance(selector, str) or not selector.strip():
        raise ValueError(f"content selector must be a non-empty string, got {selector!r}")
    _selector_error(selector)


@lru_cache(maxsize=256)
def _selector_error(selector: str) -> None:
    from parsel import Selector

    try:
        _select(Selector(text="<html><body></body></html>"), selector)
    except Exception as exc:  # cssselect's SelectorError, lxml's XPath errors (as ValueError)
        kind = "XPath" if _is_xpath(selector) else "CSS"
        raise ValueError(f"content selector {selector!r} is not valid {kind}: {exc}") from None


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    if not isinstance(pattern, str):
        raise ValueError(f"ignore-text pattern must be a string, got {pattern!r}")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"ignore-text pattern {pattern!r} is not a valid regex: {exc}") from None


def _is_xpath(selector: str) -> bool:
    return selector.lstrip().startswith(("/", "("))


def _select(document: Any, selector: str) -> Any:
    return document.xpath(selector) if _is_xpath(selector) else document.css(selector)


def select(markup: str, selector: str) -> str | None:
    """The HTML of the elements of ``markup`` that ``selector`` matches, in document order
    (text nodes an XPath selects as their text); None when it matches nothing."""
    from parsel import Selector

    found = _select(Selector(text=markup), selector).getall()
    return "\n".join(found) if found else None


def rule_for(url: str, meta: Mapping[str, Any] | None, by_site: Mapping[str, str],
             ignore_text: Iterable[str]) -> ContentRule | None:
    """The rule of the page at ``url``: its request ``meta``'s, else the site setting's
    (``by_site``: host suffix or ``"*"`` -> selector), with the ignore-text patterns of the
    meta and of the setting; None when nothing is said. ValueError names a bad value."""
    meta = meta or {}
    selector = meta.get(META_CONTENT)
    if selector is None and by_site:
        selector = site_selector(url, by_site)
    patterns = list(ignore_text)
    extra = meta.get(META_IGNORE_TEXT)
    if extra is not None:
        if isinstance(extra, str) or not isinstance(extra, (list, tuple)):
            raise ValueError(f"meta[{META_IGNORE_TEXT!r}] must be a list of regexes, got {extra!r}")
        patterns.extend(extra)
    if selector is None and not patterns:
        return None
    return ContentRule(selector, tuple(patterns))


def site_selector(url: str, by_site: Mapping[str, str]) -> str | None:
    """The selector ``by_site`` gives the host of ``url``: the longest key that is the host or
    a parent domain of it (``shop.example`` matches ``www.shop.example``), else ``"*"``."""
    host = url.split("://", 1)[-1].split("/", 1)[0].split("@")[-1].rsplit(":", 1)[0].lower()
    best: str | None = None
    for site in by_site:
        if site != "*" and (host == site or host.endswith("." + site)):
            if best is None or len(site) > len(best):
                best = site
    return by_site[best] if best is not None else by_site.get("*")


def check_settings(by_site: Any, ignore_text: Any) -> tuple[dict[str, str], list[str]]:
    """``FRONTIER_RATE_CONTENT`` (a dict, or its JSON) and ``FRONTIER_RATE_IGNORE_TEXT`` (a
    list, its JSON, or one regex) checked; ValueError names the setting and the bad value."""
    if by_site in (None, ""):
        by_site = {}
    if isinstance(by_site, str):
        try:
            by_site = json.loads(by_site)
        except ValueError as exc:
            raise ValueError(f"FRONTIER_RATE_CONTENT={by_site!r} is not a JSON object: {exc}") from None
    if not isinstance(by_site, Mapping):
        raise ValueError(f"FRONTIER_RATE_CONTENT must be a dict of host -> selector, got {by_site!r}")
    sites: dict[str, str] = {}
    for site, selector in by_site.items():
        if not isinstance(site, str) or not site:
            raise ValueError(f"FRONTIER_RATE_CONTENT: a host must be a non-empty string, got {site!r}")
        try:
            check_selector(selector)
        except ValueError as exc:
            raise ValueError(f"FRONTIER_RATE_CONTENT[{site!r}]: {exc}") from None
        sites[site.lower()] = selector
    if ignore_text in (None, ""):
        ignore_text = []
    if isinstance(ignore_text, str):
        try:
            ignore_text = json.loads(ignore_text) if ignore_text.lstrip().startswith("[") \
                else [ignore_text]
        except ValueError as exc:
            raise ValueError(f"FRONTIER_RATE_IGNORE_TEXT={ignore_text!r} is not a JSON list: "
                             f"{exc}") from None
    if not isinstance(ignore_text, (list, tuple)):
        raise ValueError(f"FRONTIER_RATE_IGNORE_TEXT must be a list of regexes, got {ignore_text!r}")
    for pattern in ignore_text:
        try:
            _compiled(pattern)
        except ValueError as exc:
            raise ValueError(f"FRONTIER_RATE_IGNORE_TEXT: {exc}") from None
    return sites, list(ignore_text)


MAX_WARNED = 1000
"""Pages whose unmatched selector or bad rule is said at WARNING level (once each)."""


class ContentRules:
    """An adapter's rules: the settings' (``check_settings``) and each request's meta. A bad
    meta value is said once per page at WARNING level and the page is judged without a
    rule (the crawl goes on); so is a selector that matched nothing (a failed fetch)."""

    def __init__(self, by_site: dict[str, str], ignore_text: list[str]) -> None:
        self.by_site = by_site
        self.ignore_text = ignore_text
        self._warned: set[str] = set()

    def rule(self, url: str, meta: Mapping[str, Any] | None) -> ContentRule | None:
        """The rule of the page at ``url`` (``rule_for``), None when nothing is said or what
        its meta says is not valid (a WARNING names it)."""
        if not self.by_site and not self.ignore_text and not meta_has_rule(meta):
            return None
        try:
            return rule_for(url, meta, self.by_site, self.ignore_text)
        except ValueError as exc:
            self._warn(url, "frontier-rate: %s: %s; the page is judged without it", url, exc)
            return None

    def unmatched(self, url: str, reason: str | None) -> None:
        """Say (once per page) that an answer was no copy because its selector matched
        nothing (``reason``: the detection's)."""
        if reason is not None and "content selector" in reason and "matched nothing" in reason:
            self._warn(url, "frontier-rate: %s: %s; the answer counts as a failed fetch, "
                       "not a change (the page may have changed its layout)", url, reason)

    def _warn(self, url: str, message: str, *args: Any) -> None:
        if url in self._warned or len(self._warned) >= MAX_WARNED:
            logger.debug(message, *args)
            return
        self._warned.add(url)
        logger.warning(message, *args)


def meta_has_rule(meta: Mapping[str, Any] | None) -> bool:
    """Does a request's meta say something of what counts?"""
    return bool(meta) and (META_CONTENT in meta or META_IGNORE_TEXT in meta)  # type: ignore[operator]

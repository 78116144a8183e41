"""Sitemaps, feeds and pushes: what sites publish about their changes, parsed safely.

No Redis and no Scrapy: bytes in, ``Entry`` lists out, for the adapters to hand to
``Frontier.signal_many`` (which decides whether to believe them: ``evidence``).

- Sitemaps (sitemaps.org protocol 0.9): ``<urlset>`` (``<loc>``, ``<lastmod>``) and
  ``<sitemapindex>`` (child sitemaps), plain or gzip; at most ``MAX_BYTES`` uncompressed
  (the protocol's 50 MB) and ``MAX_URLS`` entries (its 50,000); robots.txt ``Sitemap:``
  lines (``robots_sitemaps``).
- Feeds: RSS 2.0 (``<item>``: ``<link>``, ``<pubDate>``, or ``<guid isPermaLink>``) and
  Atom (RFC 4287 ``<entry>``: ``<link rel="alternate">``, ``<updated>``, ``<published>``).
- Pushes (``parse_push``): an IndexNow-style JSON body (``{"host", "urlList"}``), a
  WebSub content distribution (the feed itself), or plain lines ``URL [date]``.

XML is parsed with defusedxml (``forbid_dtd``: a document with a DTD, hence with entity
declarations, external or expanding, is refused before any entity is read), gzip is
inflated in bounded steps (a gzip bomb stops at the limit), and every problem is a
``SignalError`` naming the document and what was wrong, or a warning in
``Parsed.warnings`` for an entry dropped (unreadable URL, a URL of another host,
unreadable date): what is readable is kept.
"""

from __future__ import annotations

import calendar
import email.utils
import io
import json
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import iterparse
from protego import Protego

from frontier_rate.math.evidence import IGNORED_WEIGHT
from frontier_rate.renamed import resolve

MAX_BYTES = 50 * 1024 * 1024
"""Largest uncompressed sitemap or feed read (the sitemap protocol's limit)."""
MAX_URLS = 50_000
"""Most entries read from one sitemap or feed (the sitemap protocol's limit)."""
MAX_WARNINGS = 20
"""Dropped entries described one by one in ``Parsed.warnings`` (the rest are counted)."""
FUTURE_SLACK = 60.0
"""A date later than ``now`` by more than this is called a future date (a warning; the
frontier counts it against its source: ``evidence``)."""
SITEMAP_WEIGHT = 0.3
"""Default importance of a sitemap per page it lists (``sitemap_weight``)."""
UNREAD_WEIGHT = 1.0
"""The least weight of a sitemap or feed not read yet (``unread_weight``)."""


class SignalError(ValueError):
    """A sitemap, feed or push that cannot be read at all (the message names it)."""


@dataclass(frozen=True)
class Entry:
    """One page a document tells about: its URL and, if given, when it last changed (Unix
    seconds)."""

    url: str
    changed_at: float | None = None


@dataclass
class Parsed:
    """What one document said: ``kind`` "urlset", "sitemapindex", "rss" or "atom";
    ``entries`` (pages; for an index the child sitemaps, with their lastmod); warnings
    for what was dropped, and how many entries were dropped."""

    kind: str
    entries: list[Entry] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    dropped: int = 0
    future: int = 0

    def warn(self, text: str) -> None:
        self.dropped += 1
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(text)


def sitemap_weight(pages: float, ignored: bool = False, per_page: float = SITEMAP_WEIGHT) -> float:
    """The weight a sitemap gets as a page of the frontier: ``per_page`` times the weight of
    the pages it lists (its planned interval shrinks as it covers more of the host: one
    fetch of it tells about all of them), ``IGNORED_WEIGHT`` once its claims are ignored
    for the host (docs/SIGNALS.md)."""
    if ignored:
        return IGNORED_WEIGHT
    return max(per_page * pages, IGNORED_WEIGHT)


def unread_weight(per_page: float = SITEMAP_WEIGHT) -> float:
    """The weight a sitemap or feed gets before it is read: one listed page's, and at least
    one page's (``UNREAD_WEIGHT``), since how many pages it lists is unknown until then. A
    source read and found to list few pages weighs less than a page; where every fetch takes
    a token, a source below one page's weight is not read while its host's pages are fetched
    too rarely to check its claims or are expected not to change (lua/candidates.lua), so
    an unread one must not look like that."""
    return max(per_page, UNREAD_WEIGHT)


# ---------------------------------------------------------------------------- bytes

def inflate(body: bytes, name: str, limit: int = MAX_BYTES) -> bytes:
    """``body``, gunzipped when it is gzip (by its magic bytes, whatever the URL or the
    headers say), at most ``limit`` bytes either way; SignalError past it (a gzip bomb
    stops after ``limit`` bytes of output, not at its end)."""
    if body[:2] != b"\x1f\x8b":
        if len(body) > limit:
            raise SignalError(f"{name}: {len(body)} bytes, more than the limit of {limit}")
        return body
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = bytearray()
    try:
        chunk = inflater.decompress(body, limit + 1)
        out += chunk
        while inflater.unconsumed_tail and len(out) <= limit:
            out += inflater.decompress(inflater.unconsumed_tail, limit + 1 - len(out))
    except zlib.error as exc:
        raise SignalError(f"{name}: not valid gzip ({exc})") from None
    if len(out) > limit:
        raise SignalError(f"{name}: more than {limit} bytes once gunzipped (a gzip bomb?)")
    if not inflater.eof:
        raise SignalError(f"{name}: not valid gzip (truncated)")
    return bytes(out)


# ---------------------------------------------------------------------------- dates

_W3C = re.compile(r"(\d{4})(?:-(\d{2})(?:-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?"
                  r"\s*(Z|z|[+-]\d{2}:?\d{2})?)?)?)?")


def w3c_date(text: str | None) -> float | None:
    """A W3C datetime (sitemaps' lastmod, Atom's RFC 3339 dates: ``YYYY``, ``YYYY-MM``,
    ``YYYY-MM-DD``, ``YYYY-MM-DDThh:mm[:ss[.s]]TZD``) as Unix seconds; no zone means UTC;
    None when unreadable. A date without a time is the start of that day (UTC)."""
    if not text:
        return None
    m = _W3C.fullmatch(text.strip())
    if not m:
        return None
    year, month, day, hour, minute, second, _, zone = m.groups()
    try:
        parts = (int(year), int(month or 1), int(day or 1), int(hour or 0), int(minute or 0),
                 int(second or 0))
        if not (1 <= parts[1] <= 12 and 1 <= parts[2] <= 31 and parts[3] <= 24 and parts[4] < 60
                and parts[5] <= 60):
            return None
        seconds = float(calendar.timegm((*parts, 0, 0, 0)))
    except (ValueError, OverflowError):
        return None
    if m.group(7):
        seconds += float("0." + m.group(7))
    if zone and zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        seconds -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return seconds


def any_date(text: str | None) -> float | None:
    """A W3C / RFC 3339 date, else an RFC 822 one (RSS ``pubDate``); None when neither."""
    value = w3c_date(text)
    if value is not None or not text:
        return value
    try:
        parsed = email.utils.parsedate_tz(text.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if parsed is None:
        return None
    try:
        return float(email.utils.mktime_tz(parsed))
    except (OverflowError, ValueError):
        return None


# ---------------------------------------------------------------------------- XML

def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1].lower() if isinstance(tag, str) else ""


def _events(body: bytes, name: str):
    """(event, element) pairs of a safe parse; SignalError for a DTD, entities or bad XML."""
    try:
        yield from iterparse(io.BytesIO(body), events=("start", "end"), forbid_dtd=True,
                             forbid_entities=True, forbid_external=True)
    except DefusedXmlException as exc:
        raise SignalError(f"{name}: refused: {type(exc).__name__} (a DTD or entity "
                          f"declarations: entity expansion and external entities are never "
                          f"read)") from None
    except SyntaxError as exc:  # xml.etree.ElementTree.ParseError
        raise SignalError(f"{name}: not well-formed XML ({exc})") from None


def parse(body: bytes, url: str, *, now: float | None = None, max_bytes: int = MAX_BYTES,
          max_urls: int = MAX_URLS, same_host: bool = True) -> Parsed:
    """A sitemap, sitemap index, RSS 2.0 or Atom document fetched from ``url`` (gzip or not).

    Entries whose URL is not http(s) on ``url``'s host (``same_host``; the sitemap
    protocol's rule, and a feed of one site tells about that site) are dropped with a
    warning; so are entries past ``max_urls``. A date after ``now + FUTURE_SLACK`` is kept
    (the frontier counts it against the source) and counted in ``Parsed.future``. Relative
    links of feeds are resolved against ``url``.
    """
    text = inflate(body, url, max_bytes)
    host = (urlsplit(url).hostname or "").lower()
    parsed: Parsed | None = None
    depth = 0
    item: dict | None = None
    item_tag = ""
    for event, element in _events(text, url):
        tag = _local(element.tag)
        if event == "start":
            depth += 1
            if depth == 1:
                if tag in ("urlset", "sitemapindex", "feed"):
                    parsed = Parsed("atom" if tag == "feed" else tag)
                elif tag in ("rss", "rdf"):
                    parsed = Parsed("rss")
                else:
                    raise SignalError(f"{url}: not a sitemap or feed (root element <{tag}>)")
            elif parsed is not None and item is None and tag in ("url", "sitemap", "item", "entry"):
                item, item_tag = {}, tag
            continue
        depth -= 1
        if parsed is None:
            continue
        if item is not None and tag == item_tag:
            _finish(parsed, item, url, host, now, max_urls, same_host)
            item = None
            element.clear()
        elif item is not None:
            _field(item, tag, element)
        elif depth <= 1:
            element.clear()
    if parsed is None:
        raise SignalError(f"{url}: empty document")
    return parsed


def _field(item: dict, tag: str, element) -> None:
    text = (element.text or "").strip()
    if tag == "loc":
        item["url"] = text
    elif tag == "lastmod" or tag == "updated":
        item["date"] = text
    elif tag in ("pubdate", "published", "date", "modified") and "date" not in item:
        item["date"] = text
    elif tag == "link":
        href = element.get("href")
        if href is not None:  # Atom: the entry's page is rel="alternate" (the default)
            if element.get("rel", "alternate") == "alternate" and "url" not in item:
                item["url"] = href.strip()
        elif text:
            item["url"] = text
    elif tag == "guid" and element.get("isPermaLink", "true") == "true" and text:
        item.setdefault("guid", text)


def _finish(parsed: Parsed, item: dict, url: str, host: str, now: float | None, max_urls: int,
            same_host: bool) -> None:
    link = item.get("url") or item.get("guid")
    if not link:
        parsed.warn(f"{url}: an entry without a URL")
        return
    if parsed.kind in ("rss", "atom"):
        link = urljoin(url, link)
    if len(parsed.entries) >= max_urls:
        parsed.warn(f"{url}: more than {max_urls} entries; {link} and the rest dropped")
        return
    try:
        parts = urlsplit(link)
        other = (parts.hostname or "").lower()
    except ValueError:
        parsed.warn(f"{url}: unreadable URL {link[:200]!r}")
        return
    if parts.scheme not in ("http", "https") or not other or len(link) > 2048 \
            or any(ord(c) <= 32 for c in link):
        parsed.warn(f"{url}: unusable URL {link[:200]!r}")
        return
    if same_host and other != host:
        parsed.warn(f"{url}: {link[:200]} is on another host ({other}); dropped")
        return
    changed = None
    if item.get("date"):
        changed = any_date(item["date"])
        if changed is None:
            parsed.warn(f"{url}: unreadable date {item['date'][:60]!r} of {link[:200]}; "
                        "used without a date")
            parsed.dropped -= 1  # the entry is kept
        elif now is not None and changed > now + FUTURE_SLACK:
            parsed.future += 1
    parsed.entries.append(Entry(link, changed))


# ---------------------------------------------------------------------------- robots.txt

def robots_sitemaps(robots: str | bytes, robots_url: str) -> list[str]:
    """The ``Sitemap:`` URLs of a robots.txt (any group; relative ones resolved against
    ``robots_url``), http(s) only, in order, without repeats. Protego (Scrapy's robots.txt
    parser) reads the lines; this keeps what the frontier may fetch."""
    if isinstance(robots, bytes):
        robots = robots.decode("utf-8", "replace")
    found: dict[str, None] = {}
    for value in Protego.parse(robots).sitemaps:
        link = urljoin(robots_url, value.strip())
        if urlsplit(link).scheme in ("http", "https"):
            found[link] = None
    return list(found)


# ---------------------------------------------------------------------------- pushes

PUSH_FORMS = ("indexnow", "websub", "lines")
"""What ``parse_push`` reads when told (``form``); without it the body says which."""


def parse_push(body: bytes, name: str = "push", *, content_type: str = "",
               now: float | None = None, max_urls: int = MAX_URLS,
               form: str | None = None) -> Parsed:
    """Change notifications handed to the frontier from outside.

    - JSON (IndexNow's body): ``{"host": "example.org", "urlList": [url, ...]}`` (each URL
      on ``host`` when it is given), or a list of URLs or of ``{"url", "changed_at"}``
      objects (``changed_at`` Unix seconds or a W3C date);
    - a feed (WebSub delivers the updated feed: RSS or Atom, by its root element);
    - text: one ``URL [date]`` per line (``#`` comments).
    Entries without a date mean "changed, time unknown" (``Entry.changed_at`` None).
    ``form`` ("indexnow", "websub" or "lines", ``PUSH_FORMS``) reads the body as that
    (a WebSub body must then be an RSS or Atom feed); else ``content_type`` and the body's
    first character decide.
    """
    if form is not None and form not in PUSH_FORMS:
        raise ValueError(f"form must be one of {', '.join(PUSH_FORMS)}, got {form!r}")
    text = inflate(body, name)
    head = text.lstrip()[:1]
    told = form is not None
    if form is None:
        form = "indexnow" if "json" in content_type or head in (b"{", b"[") else \
            "websub" if "xml" in content_type or head == b"<" else "lines"
    if form == "indexnow":
        return _push_json(text, name, now, max_urls)
    if form == "websub":
        parsed = parse(text, name if "://" in name else "http://push.invalid/", now=now,
                       max_urls=max_urls, same_host=False)
        if told and parsed.kind not in ("rss", "atom"):
            raise SignalError(f"{name}: a WebSub body is an RSS or Atom feed, not a "
                              f"{parsed.kind}")
        return parsed
    return _push_lines(text, name, now, max_urls)


def _push_lines(text: bytes, name: str, now: float | None, max_urls: int) -> Parsed:
    parsed = Parsed("lines")
    for n, line in enumerate(text.decode("utf-8", "replace").splitlines(), 1):
        line = line.split("#", 1)[0].strip() if line.lstrip().startswith("#") else line.strip()
        if not line:
            continue
        link, _, date = line.partition(" ")
        _push_entry(parsed, name, link, date.strip() or None, now, max_urls, f"line {n}")
    return parsed


def _push_json(text: bytes, name: str, now: float | None, max_urls: int) -> Parsed:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise SignalError(f"{name}: not valid JSON ({exc})") from None
    parsed = Parsed("indexnow")
    host = None
    if isinstance(data, dict):
        host = data.get("host")
        if host is not None and not isinstance(host, str):
            raise SignalError(f"{name}: host must be a string, got {host!r}")
        data = data.get("urlList")
        if not isinstance(data, list):
            raise SignalError(f"{name}: an IndexNow body needs a urlList array")
    if not isinstance(data, list):
        raise SignalError(f"{name}: expected a JSON object or array")
    for n, item in enumerate(data):
        date = None
        if isinstance(item, dict):
            item, date = item.get("url"), item.get("changed_at")
        if not isinstance(item, str):
            parsed.warn(f"{name}: entry {n} is not a URL: {item!r:.100}")
            continue
        if host is not None and (urlsplit(item).hostname or "").lower() != host.lower():
            parsed.warn(f"{name}: {item[:200]} is not on host {host}; dropped")
            continue
        _push_entry(parsed, name, item, date, now, max_urls, f"entry {n}")
    return parsed


def _push_entry(parsed: Parsed, name: str, link: str, date, now: float | None, max_urls: int,
                where: str) -> None:
    if len(parsed.entries) >= max_urls:
        parsed.warn(f"{name}: more than {max_urls} entries; {where} and the rest dropped")
        return
    try:
        parts = urlsplit(link)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and len(link) <= 2048
    except ValueError:
        ok = False
    if not ok:
        parsed.warn(f"{name}: {where}: unusable URL {link[:200]!r}")
        return
    changed = None
    if date is not None:
        if isinstance(date, bool) or not isinstance(date, (int, float, str)):
            changed = None
        elif isinstance(date, str):
            changed = any_date(date)
        elif date == date and abs(date) < 1e11:
            changed = float(date)
        if changed is None:
            parsed.warn(f"{name}: {where}: unreadable date {date!r:.60}; entry dropped")
            return
        if now is not None and changed > now + FUTURE_SLACK:
            parsed.future += 1
    parsed.entries.append(Entry(link, changed))


def claims_of(entries: Iterable[Entry], source: str, *, offset: float = 0.0,
              dated_only: bool = False) -> list[tuple[str, float | None, str]]:
    """``Frontier.signal_many`` items for ``entries``: their dates moved by ``offset`` (onto
    the frontier's clock); ``dated_only`` leaves out entries without a date (a sitemap URL
    without lastmod tells nothing about a change)."""
    return [(e.url, None if e.changed_at is None else e.changed_at + offset, source)
            for e in entries if e.changed_at is not None or not dated_only]


RENAMED = {"hints": "claims_of"}
"""Retired names still importable (issue 61): old -> new (``frontier_rate.renamed``)."""


def __getattr__(name: str) -> Any:
    return resolve(globals(), name, RENAMED)

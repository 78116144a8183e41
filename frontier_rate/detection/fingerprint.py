"""Change detection: normalise a response body and hash it.

The scheduler only learns whether a page changed between two fetches
(the design brief ../shared/DESIGN.md, beside the repository, section 1: the change
indicator I_k). This module turns a body into a short fingerprint; two fetches of one
page changed iff their fingerprints differ. It imports no crawler framework (the standard
library and the package's detection modules), so the Scrapy and Frontera adapters and the
detection process share it.

Modes:

- ``"raw"``: the bytes as received.
- ``"text"``: the visible text only. Comments, ``<script>``, ``<style>`` and
  ``<template>`` blocks and all tags are removed, character references are
  decoded and whitespace is collapsed, so markup-only churn (attributes,
  class names, wrapper elements, indentation) is no change.
- ``"content"``: the content of the page (``frontier_rate.detection.change_detection``):
  for HTML the visible text in block segments without volatile fragments (times,
  dates, relative times, tokens, counters) and without the boilerplate learned per
  host, with a per-process memory of each page's last copy; bot walls, empty and
  error pages are no copy (``detect`` says why). JSON is hashed canonically, other
  bodies by their bytes.
- a callable ``(body: bytes, url: str, headers) -> str | bytes`` (or its
  dotted path): the result is hashed.

``strip_patterns`` (regular expressions) remove volatile fragments such as
timestamps, CSRF tokens and session ids before anything else. In ``"text"``
mode they run on the decoded text (markup included, so a pattern may match an
attribute); in ``"raw"`` and callable modes on the bytes.

Memory and time are bounded: only the first ``max_body`` bytes are read (the
Scrapy adapter also stops the download there), the full length is hashed in
as well, so growth beyond the cap still counts as change, and every pattern
runs in time linear in the body (no catastrophic backtracking on hostile
markup). Any bytes are accepted: wrong or unknown charsets and binary bodies
fall back to UTF-8 / Latin-1 decoding in ``"text"`` mode.
"""

from __future__ import annotations

import codecs
import hashlib
import html
import re
from collections.abc import Callable, Iterable, Mapping
from importlib import import_module
from typing import Any

from frontier_rate.detection.change_detection import ContentDetector, Detection, PageStore, is_html
from frontier_rate.detection.content_rules import ContentRule, select
from frontier_rate.detection.detection_record import encode, explain

__all__ = [
    "DEFAULT_MAX_BODY",
    "Fingerprinter",
    "content_charset",
    "fingerprint",
    "header_value",
    "visible_text",
]

DEFAULT_MAX_BODY = 10 * 1024 * 1024
"""Bytes of a body that are hashed (10 MiB); the rest only counts by length."""

DIGEST_SIZE = 8
"""Bytes of blake2b output. 64 bits keep the Redis page hash compact; the
chance that one page's two consecutive versions collide is 2**-64."""

CustomFingerprint = Callable[[bytes, str, Any], str | bytes]

_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
# The rest of a tag (name and attributes) never spans a "<", and each of its
# characters can be read only one way (the alternatives start differently), so
# an unclosed tag or quote fails at the next "<" after linear work. Unbounded
# (as before) they took O(n^2): 1.3 s for 16 KB of '<a "', hours for 1 MB,
# all on the crawler's event loop. An attribute value containing "<" (rare)
# is left as text, which changes nothing but what counts as visible.
_ATTRIBUTES = r"(?:[^<>\"']|\"[^\"<]*\"|'[^'<]*')*"
_HIDDEN_BLOCK = re.compile(
    r"<(script|style|template)\b" + _ATTRIBUTES + r">.*?(?:</\1\s*>|\Z)",
    re.S | re.I,
)
_CDATA_OR_DECL = re.compile(r"<!\[CDATA\[.*?(?:\]\]>|\Z)|<![^<>]*>|<\?[^<>]*>", re.S)
_TAG = re.compile(r"</?[A-Za-z]" + _ATTRIBUTES + ">")
_SPACE = re.compile(r"\s+")
_CHARSET = re.compile(r"charset\s*=\s*[\"']?([A-Za-z0-9._:-]+)", re.I)
_META_CHARSET = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?([A-Za-z0-9._:-]+)", re.I)


def header_value(headers: Any, name: str) -> str | None:
    """One header from a str/bytes mapping (Scrapy ``Headers``, dict, ...) or None.

    Scrapy's ``Headers`` return the first value as bytes; plain dicts may hold
    str, bytes or a list of either. Lookup is case-insensitive for dicts.
    """
    if not headers:
        return None
    value: Any = None
    for key in (name, name.encode("latin-1")):
        try:
            value = headers.get(key)
        except (AttributeError, TypeError):
            return None
        if value is not None:
            break
    if value is None and isinstance(headers, Mapping):
        lowered = name.lower()
        for key, candidate in headers.items():
            key_text = key.decode("latin-1") if isinstance(key, bytes) else str(key)
            if key_text.lower() == lowered:
                value = candidate
                break
    if isinstance(value, (list, tuple)):
        value = value[0] if value else None
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return None if value is None else str(value)


def content_charset(headers: Any, body: bytes) -> str | None:
    """The charset named by Content-Type, else by a ``<meta>`` in the first 2 KiB."""
    content_type = header_value(headers, "Content-Type")
    match = _CHARSET.search(content_type) if content_type else None
    if match is None:
        meta = _META_CHARSET.search(body[:2048])
        return meta.group(1).decode("ascii") if meta else None
    return match.group(1)


def _decode(body: bytes, headers: Any) -> str:
    """Decode a body; never fails (unknown charsets and binary fall back).

    A declared charset that is unknown, not a text encoding, or a codec that
    cannot replace bad bytes (``idna``, ``punycode``, ``undefined``) is ignored.
    """
    charset = content_charset(headers, body)
    if charset:
        try:
            return body.decode(charset, errors="replace")
        except (LookupError, UnicodeError, ValueError, TypeError):
            pass
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return body.decode("latin-1")


def utf8_body(body: bytes, headers: Any) -> bytes:
    """The body as UTF-8, decoded as ``_decode`` decodes it: the body itself where it is
    UTF-8 (declared so, or declaring nothing and valid), else decoded and encoded again.
    Change detection cuts the UTF-8 bytes and decodes only the pieces it has not seen
    (``segments.VisibleMarkup``); a declared UTF-8 body's invalid bytes are replaced there
    as ``_decode`` replaces them."""
    charset = content_charset(headers, body)
    try:
        declared = codecs.lookup(charset).name if charset else None
    except (LookupError, TypeError, ValueError):
        declared = None
    if declared == "utf-8" or (declared is None and body.isascii()):
        return body
    if declared is None:
        try:
            body.decode("utf-8")  # valid: decoded as the body is (``_decode``)
        except UnicodeDecodeError:
            return body.decode("latin-1").encode("utf-8")
        return body
    return _decode(body, headers).encode("utf-8", "surrogatepass")


def visible_text(markup: str) -> str:
    """The text a reader sees in an HTML document, whitespace collapsed.

    Regex-based rather than a full parser so it is fast and never raises on
    broken markup; each tag becomes a space so that adding or removing wrapper
    elements does not join or split words.
    """
    text = _COMMENT.sub(" ", markup)
    text = _HIDDEN_BLOCK.sub(" ", text)
    text = _CDATA_OR_DECL.sub(" ", text)
    text = _TAG.sub(" ", text)
    text = html.unescape(text)
    return _SPACE.sub(" ", text).strip()


def _load_callable(path: str) -> CustomFingerprint:
    if "." not in path.strip("."):
        raise ValueError(
            f"FRONTIER_RATE_FINGERPRINT={path!r}: expected 'content', 'raw', 'text' or a dotted path "
            "to a callable (body, url, headers) -> str | bytes"
        )
    module, _, name = path.rpartition(".")
    try:
        target = getattr(import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ValueError(f"FRONTIER_RATE_FINGERPRINT={path!r} cannot be imported: {exc}") from exc
    if not callable(target):
        raise ValueError(f"FRONTIER_RATE_FINGERPRINT={path!r} is not callable")
    return target


class Fingerprinter:
    """Turns a response body into a short hex fingerprint (blake2b, 64 bits).

    ``mode`` is ``"raw"``, ``"text"``, a callable or a dotted path to one;
    ``strip_patterns`` are regular expressions removed first; ``max_body`` caps
    the bytes read. Instances are immutable and cheap to call.
    """

    def __init__(
        self,
        mode: str | CustomFingerprint = "raw",
        strip_patterns: Iterable[str] | str | None = None,
        max_body: int = DEFAULT_MAX_BODY,
    ) -> None:
        if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body <= 0:
            raise ValueError(f"max_body must be a positive integer, got {max_body!r}")
        self.max_body = max_body
        self._custom: CustomFingerprint | None = None
        self._detector: ContentDetector | None = None
        if callable(mode):
            self._custom = mode
            self.mode = getattr(mode, "__qualname__", repr(mode))
        elif not isinstance(mode, str):
            raise ValueError(f"fingerprint mode must be a string or callable, got {mode!r}")
        elif mode in ("raw", "text"):
            self.mode = mode
        elif mode == "content":
            self.mode = mode
            self._detector = ContentDetector()
        else:
            self._custom = _load_callable(mode)
            self.mode = mode
        if isinstance(strip_patterns, str):
            strip_patterns = [strip_patterns]
        self._text_patterns: list[re.Pattern[str]] = []
        self._byte_patterns: list[re.Pattern[bytes]] = []
        for pattern in strip_patterns or ():
            if not isinstance(pattern, str):
                raise ValueError(f"strip pattern must be a string, got {pattern!r}")
            try:
                self._text_patterns.append(re.compile(pattern))
                self._byte_patterns.append(re.compile(pattern.encode("utf-8")))
            except re.error as exc:
                raise ValueError(f"strip pattern {pattern!r} is not a valid regex: {exc}") from exc

    def normalise(self, body: bytes, url: str = "", headers: Any = None) -> bytes:
        """The bytes that get hashed (without the length suffix); for debugging."""
        if not isinstance(body, (bytes, bytearray, memoryview)):
            raise ValueError(f"body must be bytes, got {type(body).__name__}")
        head = bytes(memoryview(body)[: self.max_body])
        if self.mode in ("text", "content") and self._custom is None:
            text = _decode(head, headers)
            for pattern in self._text_patterns:
                text = pattern.sub("", text)
            return visible_text(text).encode("utf-8")
        for byte_pattern in self._byte_patterns:
            head = byte_pattern.sub(b"", head)
        if self._custom is None:
            return head
        result = self._custom(head, url, headers)
        if isinstance(result, str):
            return result.encode("utf-8")
        if isinstance(result, (bytes, bytearray)):
            return bytes(result)
        raise ValueError(
            f"custom fingerprint {self.mode} returned {type(result).__name__}; "
            "expected str or bytes"
        )

    def __call__(self, body: bytes, url: str = "", headers: Any = None, *,
                 truncated: bool = False, full_length: int | None = None) -> str:
        """Hex fingerprint of ``body``; equal iff the normalised content is equal.

        ``truncated``: ``body`` is only the start of the document (the download
        was stopped past ``max_body``); ``full_length`` is then its declared
        length (Content-Length), or None when unknown. A stopped download and
        a complete one of the same document give the same fingerprint: both
        hash the first ``max_body`` bytes and the full length. What a cut
        fingerprint misses: edits after the first ``max_body`` bytes that keep
        the length (and, without a Content-Length, every edit after them).
        """
        if self._detector is not None:
            found = self.detect(body, url, headers, truncated=truncated,
                                full_length=full_length).fingerprint
            if found is not None:
                return found
        digest = hashlib.blake2b(self.normalise(body, url, headers), digest_size=DIGEST_SIZE)
        if truncated:
            if full_length is not None and full_length >= 0:
                digest.update(b"\x00len=%d" % full_length)
            else:
                digest.update(b"\x00len=?")
        elif len(body) > self.max_body:
            digest.update(b"\x00len=%d" % len(body))
        return digest.hexdigest()

    def detect(self, body: bytes, url: str = "", headers: Any = None, *,
               truncated: bool = False, full_length: int | None = None,
               rule: ContentRule | None = None) -> Detection:
        """The ``Detection`` for one 2xx answer: in ``"content"`` mode its fingerprint, or
        None with the reason when the answer is no copy of the page (bot wall, empty,
        error page, a ``rule`` whose selector matches nothing); in the other modes
        ``Detection(self(...))``. ``rule`` (``content_rules.ContentRule``): the part of an
        HTML page that counts and the text to ignore, in ``"content"`` and ``"text"``
        modes (the others hash what they hash: a rule there is refused by the adapters)."""
        if rule is not None and self.mode == "text" and self._custom is None:
            return self._detect_text(body, headers, rule, truncated, full_length)
        if self._detector is None:
            return Detection(self(body, url, headers, truncated=truncated,
                                  full_length=full_length))
        if not isinstance(body, (bytes, bytearray, memoryview)):
            raise ValueError(f"body must be bytes, got {type(body).__name__}")
        head = bytes(memoryview(body)[: self.max_body])
        suffix = b""
        if truncated:
            suffix = b"\x00len=%d" % full_length if full_length is not None and \
                full_length >= 0 else b"\x00len=?"
        elif len(body) > self.max_body:
            suffix = b"\x00len=%d" % len(body)
        content_type = header_value(headers, "Content-Type")
        markup: str | bytes | None = None
        if is_html(head, content_type):
            markup = self._html(head, headers, rule)
            if markup is None:
                self._detector.not_content += 1
                return self._noted(Detection(
                    None, f"content selector {rule.select!r} matched nothing"), url, rule)
        else:
            for byte_pattern in self._byte_patterns:
                head = byte_pattern.sub(b"", head)
        return self._noted(self._detector.detect(markup, head, url, content_type, suffix, rule),
                           url, rule)

    def _html(self, head: bytes, headers: Any, rule: ContentRule | None) -> str | bytes | None:
        """What the content detection reads of an HTML body: its UTF-8 bytes (most pages: the
        body itself, not decoded), or, with strip patterns or a rule's selector, the decoded
        text they leave (None: the selector matched nothing)."""
        if not self._text_patterns and (rule is None or rule.select is None):
            return utf8_body(head, headers)
        text = _decode(head, headers)
        for pattern in self._text_patterns:
            text = pattern.sub("", text)
        if rule is not None and rule.select is not None:
            return select(text, rule.select)
        return text

    def _noted(self, detection: Detection, url: str, rule: ContentRule | None) -> Detection:
        """``detection``, its record written beside the page's shared memory, if shared
        (``detection_record``: what ``frontier-rate inspect`` shows); not for the same bytes
        as the page's last copy (nothing was parsed: its record stands, and that answer
        costs no write)."""
        shared = self._detector.shared if self._detector is not None else None
        note = getattr(shared, "note", None)
        if note is not None and detection.segments != -1:
            note(url, encode(explain(detection, self._detector, url, rule)))
        return detection

    def _detect_text(self, body: bytes, headers: Any, rule: ContentRule, truncated: bool,
                     full_length: int | None) -> Detection:
        """``"text"`` mode with a rule: the visible text of the selected part of an HTML
        page, the ignored text removed; any other body as without a rule."""
        head = bytes(memoryview(body)[: self.max_body])
        if not is_html(head, header_value(headers, "Content-Type")):
            return Detection(self(body, "", headers, truncated=truncated, full_length=full_length))
        text = _decode(head, headers)
        for pattern in self._text_patterns:
            text = pattern.sub("", text)
        if rule.select is not None:
            text = select(text, rule.select)
            if text is None:
                return Detection(None, f"content selector {rule.select!r} matched nothing")
        visible = _SPACE.sub(" ", rule.remove_ignored(visible_text(text))).strip()
        digest = hashlib.blake2b(visible.encode("utf-8"), digest_size=DIGEST_SIZE)
        if truncated or len(body) > self.max_body:
            digest.update(b"\x00len=%d" % (full_length if truncated and full_length is not None
                                             and full_length >= 0 else len(body)))
        return Detection(digest.hexdigest())

    def share(self, pages: PageStore) -> None:
        """Keep each page's memory in ``pages`` (``crawl/shared_pages.py``), where every
        process of the frontier reads it; ``"content"`` mode only (the other modes keep
        none)."""
        if self._detector is not None:
            self._detector.shared = pages

    def stats(self) -> dict[str, int]:
        """``"content"`` mode's counters for the crawler stats: ``volatile_ignored`` (copies
        whose bytes differed from the page's last copy but whose content did not),
        ``not_content`` (2xx answers taken as no copy) and, with the pages' memories shared,
        ``page_memory_failures`` (Redis calls for them that failed) and
        ``page_memory_heap_trims`` (``crawl/shared_pages.TRIM_EVERY``); empty in the other
        modes."""
        if self._detector is None:
            return {}
        counts = {"volatile_ignored": self._detector.ignored_changes,
                  "not_content": self._detector.not_content}
        if self._detector.shared is not None:
            counts["page_memory_failures"] = self._detector.shared.failures
            counts["page_memory_heap_trims"] = self._detector.shared.trims
        return counts

    def __repr__(self) -> str:
        patterns = [p.pattern for p in self._text_patterns]
        return (
            f"Fingerprinter(mode={self.mode!r}, strip_patterns={patterns!r}, "
            f"max_body={self.max_body})"
        )


def fingerprint(
    body: bytes,
    mode: str | CustomFingerprint = "raw",
    *,
    url: str = "",
    headers: Any = None,
    strip_patterns: Iterable[str] | None = None,
    max_body: int = DEFAULT_MAX_BODY,
) -> str:
    """One-off ``Fingerprinter(mode, strip_patterns, max_body)(body, url, headers)``."""
    return Fingerprinter(mode, strip_patterns, max_body)(body, url, headers)

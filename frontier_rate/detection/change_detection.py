"""Content change detection for HTML: the ``"content"`` fingerprint mode (issue 34).

A raw-byte hash calls almost every revisit of a real HTML page "changed" (nonces,
CSRF tokens, hashed asset names, cache-busting queries, injected scripts), and even
the visible text changes without the content changing (relative times, counters,
rotating widgets, cookie banners, bot walls). This module decides, per response,
whether the *content* changed, in four steps:

1. **Segments**: the visible text of the document, cut at block-level elements
   (``p``, ``div``, ``li``, ``td``, headings ...). Comments, ``script``, ``style``,
   ``template``, ``noscript``, ``svg`` and ``head`` (except ``title``) are dropped;
   attributes (ids, classes, asset URLs, hidden form inputs' values) never count.
2. **Volatile fragments** are removed from each segment: ISO timestamps and clock
   times, relative times ("5 min ago", "Vor 18 Min", "il y a 3 heures"), runs of 10+
   digits, long random-looking tokens (hex ids, UUIDs, base64-like nonces, trace ids),
   counters ("123 comments", a segment that is only a number) and consent banners'
   partner counts. Other numbers and written dates stay: they are content.
3. **Per-host learned boilerplate**: a segment seen on two different pages of a host is the
   host's boilerplate (navigation, footer, widgets, cookie banners); a short segment that
   went away from a page and came back later (a block that alternates between fetches:
   rotating widget, A/B banner) is the host's volatile text; so are runs of up to
   ``MENU_RUN`` new short segments beside boilerplate (a renamed menu item; never a new
   segment with a digit: a dated teaser or a price is a listing's entry) and consent
   banner runs. All are kept in the host's *mask* and ignored on that host from then on; a
   segment that shows a price never is (issue 59). A segment that is only on one page and
   never came back is the page's own content: its first change always counts (a one-word
   edit of a legal paragraph makes a new, unseen segment); masked text inside the page's own
   text still counts (``inside_content``), and a mask covering most of a page applies only
   to its short segments (``MAJORITY``).
4. **Sticky fingerprint**: the process remembers, per URL, the segment hashes of the
   last copy. A new copy whose differences from it are all masked gets the previous
   fingerprint again (no change); otherwise a new fingerprint (blake2b of the content
   segments not masked). So a mask that grows does not make every page "change" once.
   The copies are multisets of segments: the k-th copy of a text on a page is hashed as
   (text, k) (``segment_hashes.copies_apart``), so a paragraph that gains a second copy is a
   change; segments that only move are none.

Not-content answers (``not_content``): a bot wall or captcha, an empty or near-empty
body, or a page whose text is a small fraction of the page's previous copy and reads
like an error page, is not a copy of the page: the adapter records it as a failed
fetch (``responses.outcome``), never stored, never a change.

Non-HTML bodies: JSON is hashed canonically (keys sorted, whitespace dropped), any
other type (XML, PDF, text, images) by its bytes.

State and memory (process-local and bounded unless shared, rebuilt after a restart):

- per host (``host_mask.HostMask``): up to ``host_segments`` segment hashes (8 bytes each)
  with the 4-byte id of the first page they were seen on, plus the masked hashes; an LRU
  of ``max_hosts`` hosts. About 16 bytes per remembered segment: 2,048 segments take
  ~32 KiB of payload per host (Python object overhead on top). With ``shared``, the masks
  other processes learned of the host are read with the page's memory, and those this
  process learns are written with it.
- per URL (``page_memory.PageMemory``): the fingerprint returned last, a CRC-32 of its
  bytes (the same bytes again are not parsed), the 8-byte hashes of its segments (an
  ``array('Q')``) and its text length; an LRU of ``max_pages`` URLs (a page with 300
  segments: ~2.5 KiB). With ``shared`` (a ``PageStore``: ``crawl/shared_pages.py``,
  ``FRONTIER_RATE_SHARED_PAGE_MEMORY``) it is read from Redis before each answer and
  written after it, so that another process of the frontier, or this crawl after a
  restart, compares with the page's last copy; without it such a process compares the
  first copy it sees of each page with nothing (docs/CHANGE_DETECTION.md measures both).

Sources: the block/visible-text segmentation follows the "text blocks" of
Kohlschütter, Fankhauser and Nejdl, "Boilerplate detection using shallow text
features", WSDM 2010; treating text shared across a site's pages as boilerplate
follows Bar-Yossef and Rajagopalan, "Template detection via data mining and its
applications", WWW 2002. The thresholds here are this project's, measured in
``benchmarks/change_detection.py``.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from array import array
from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass
from itertools import accumulate, compress, filterfalse
from operator import not_, or_
from typing import Any, Protocol

from frontier_rate.detection.bounded_cache import cached, once_table
from frontier_rate.detection.content_rules import ContentRule
from frontier_rate.detection.fresh_runs import (
    boilerplate_runs,
    consent_runs,
    inside_content,
    replaced_slots,
)
from frontier_rate.detection.host_mask import HostMask, host_of
from frontier_rate.detection.not_content import (
    ALWAYS_REFUSED,
    MIN_OVERLAP_SEGMENTS,
    MIN_TEXT,
    REJECT_LIMIT,
    error_in_frame,
    not_content,
    served_in_place,
)
from frontier_rate.detection.page_memory import PageMemory
from frontier_rate.detection.segment_hashes import (
    _SHORT_BIT,
    copies_apart,
    further_copies,
    segment_hashes,
)
from frontier_rate.detection.segments import (
    _DIGIT,
    VisibleMarkup,
    is_html,
    segments,
    stable_segments,
)

__all__ = ["ContentDetector", "Detection", "HostMask", "is_html", "segments"]


@dataclass(frozen=True)
class Detection:
    """What one response says: ``fingerprint`` (None for a not-content answer),
    ``reason`` (why it is not content), ``ignored`` (differences from the page's last
    copy that were ignored as volatile/boilerplate), ``changed_segments`` (content
    segments added or removed), ``segments`` (content segments in this copy; -1 when the
    bytes were those of the page's last copy and nothing was parsed)."""

    fingerprint: str | None
    reason: str | None = None
    ignored: int = 0
    changed_segments: int = 0
    segments: int = 0


MAJORITY = 0.5
"""When the host's mask covers more than this share of a page's visible characters, the
shared text is the page's own content (one document under two addresses): only the
short masked segments are ignored there."""


def long_order(hashes: list[int]) -> int:
    """The low 16 bits of the CRC-32 of the long segments (longer than ``SHORT_BLOCK``: paragraphs, headlines,
    entries) in their order: kept with a page's memory, so a copy whose long segments only
    moved is told apart (``_moved``), in Redis as here. Masked ones too: what is masked
    grows between two copies, and a page's order must not change with it."""
    return zlib.crc32(array("Q", [h for h in hashes if not h & _SHORT_BIT]).tobytes()) & 0xFFFF


def _moved(hashes: list[int], order: int, memory: PageMemory) -> bool:
    """True when this copy (``hashes``, its ``long_order``) holds the last copy's long
    segments, no more and no fewer, in another order: stories of a front page or rows of a
    list reordered is a change of the page. Short ones (menu items, the headings a table
    of contents repeats) may move."""
    if order == memory.order:
        return False
    long_now = {h for h in hashes if not h & _SHORT_BIT}
    return long_now == {h for h in memory.hashes if not h & _SHORT_BIT}


def _restore_earlier(memory: PageMemory, parts: list[str], hashes: list[int],
                     host: HostMask) -> None:
    """Restore a memory written before version 5 (``PageMemory.earlier``: a segment with a
    volatile fragment hashed lower-cased, a copyright line's numbers kept) against this
    copy's ``parts`` hashed that way, then give each of its segments this copy shows, and
    its order, this copy's hash (``hashes``): an upgrade is then no change of the page. A
    segment removed since keeps its old hash: a difference either way."""
    earlier = copies_apart(segment_hashes(stable_segments(parts, earlier=True)))
    same_order = memory.order == long_order(earlier)
    memory.restore(earlier, host.seen)
    now = dict(zip(earlier, hashes, strict=True))
    memory.hashes = array("Q", [now.get(h, h) for h in memory.hashes])
    memory.gone = array("Q", [now.get(h, h) for h in memory.gone])
    if same_order:
        memory.order = long_order(hashes)
    memory.earlier = False


def _ignored_here(lengths: list[int], hashes: list[int], masked: set[int]) -> set[int]:
    """The masked hashes that are ignored on this page (``MAJORITY``); ``lengths``: the
    segments' lengths in characters."""
    total = sum(lengths) or 1
    covered = sum(compress(lengths, map(masked.__contains__, hashes)))
    if covered <= MAJORITY * total:
        return masked
    return {h for h in hashes if h in masked and h & _SHORT_BIT}


def _with_slots(ignore: set[int], host: HostMask, *orders: list[int] | array) -> set[int]:
    """``ignore`` and the segments of ``orders`` (this copy, the last one) in the host's
    volatile slots. ``ignore`` itself when there are none: it may be the host's mask, which
    ``HostMask.see`` grows before the fingerprint is taken (a segment this copy makes
    boilerplate is not hashed in it)."""
    extra = set().union(*map(host.in_volatile_slots, orders))
    return ignore | extra if extra else ignore


PRICE = re.compile(r"[$€£¥\d](?:(?<=[$€£¥])\s?\d|(?<=\d)\s?(?:[€$£]|(?i:eur|usd|chf)\b))")
"""A price in a segment: a currency sign or code beside a number. Its first character is
a set, so sre skips other positions in C (an alternation was tried at each: 1.5x slower)."""


def priced_positions(parts: list[str]) -> list[int]:
    """The positions of the ``parts`` that show a price ("$ 24.99 Add to cart", "ab 14,00 €"):
    a value of the pages (a product's price and stock line, a listing's entry), never learned
    as the host's boilerplate (``HostMask.value_shown``), so its change counts on every page
    that shows it (issue 59).

    One ``PRICE`` search over the parts joined by NULs, each match mapped back to its part
    by its offset (``bisect``), then on from the next part: Python works per priced part,
    not per part. The same parts as ``PRICE.search`` on each: no match holds a NUL (a sign
    or code beside a digit, at most a white space between), and ``\b`` reads the NUL after
    a part as the part's end."""
    joined = "\x00".join(parts)
    starts = list(accumulate(map((1).__add__, map(len, parts)), initial=0))
    found: list[int] = []
    search = PRICE.search
    match = search(joined)
    while match is not None:
        position = bisect_right(starts, match.start()) - 1
        found.append(position)
        match = search(joined, starts[position + 1])
    return found


def _page_id(url: str) -> int:
    """The 32-bit id a host's mask knows a page by (``HostMask.see``)."""
    return zlib.crc32(url.encode("utf-8", "surrogatepass"))


def _whole_text_hash(parts: list[str], hashes: list[int], ignore: set[int]) -> bytes:
    """Hash of the content text with segment boundaries and spaces removed: a change of
    markup that only moves block boundaries (a link turned into a block) is no change.
    ``parts`` come from ``segments``: their only white space is single U+0020 spaces. Four
    bytes, the first of an 8-byte BLAKE2b (those a version 3 page memory kept whole)."""
    text = "".join(compress(parts, map(not_, map(ignore.__contains__, hashes))))
    # the spaces removed from the UTF-8 bytes (the same bytes: no other character's UTF-8
    # holds 0x20), faster than from the text
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass").replace(b" ", b""),
                           digest_size=8).digest()[:4]


class PageStore(Protocol):
    """Where the pages' memories and the hosts' masks are shared between processes
    (``crawl/shared_pages.py``): ``load`` gives None when it has no memory of the page (or
    cannot be read now), and folds into ``host`` what other processes learned of the page's
    host; ``save`` stores the page's memory and writes what this process learned of the host;
    ``touch`` keeps the stored copy (the same bytes came again); ``failures`` counts the calls
    that failed, ``trims`` the hand-backs of freed memory its client left behind."""

    failures: int
    trims: int

    def load(self, url: str, host: HostMask) -> PageMemory | None: ...

    def save(self, url: str, memory: PageMemory, host: HostMask) -> None: ...

    def touch(self, url: str, host: HostMask) -> None: ...


class ContentDetector:
    """Stateful content fingerprinting for one crawler process (module docstring).

    ``__call__`` is ``Fingerprinter``-compatible (body, url, headers -> hex); ``detect``
    returns the full ``Detection``. Counters: ``ignored_changes`` (copies whose bytes
    differed but whose content did not) and ``not_content`` (answers not taken as a copy).
    """

    def __init__(self, max_hosts: int = 10_000, max_pages: int = 100_000,
                 host_segments: int = 2048, remember_gone: int = 64,
                 cache_segments: int = 200_000) -> None:
        for name, value in (("max_hosts", max_hosts), ("max_pages", max_pages),
                            ("host_segments", host_segments), ("remember_gone", remember_gone),
                            ("cache_segments", cache_segments)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.max_hosts = max_hosts
        self.max_pages = max_pages
        self.host_segments = host_segments
        self.remember_gone = remember_gone
        self.cache_segments = cache_segments
        self._stable_cache: dict[int, int] = {}
        self._stable_once = once_table(1 << 16)  # segments seen once (``seen_again``)
        self._priced_keys: set[int] = set()  # the cache's keys of segments showing a price
        self._hosts: OrderedDict[str, HostMask] = OrderedDict()
        self._pages: OrderedDict[str, PageMemory] = OrderedDict()
        self.ignored_changes = 0
        self.not_content = 0
        self.shared: PageStore | None = None

    def _host_mask(self, host: str) -> HostMask:
        mask = self._hosts.get(host)
        if mask is None:
            mask = self._hosts[host] = HostMask(self.host_segments, self.shared is not None)
            if len(self._hosts) > self.max_hosts:
                self._hosts.popitem(last=False)
        else:
            self._hosts.move_to_end(host)
        return mask

    def detect(self, markup: str | bytes | None, body: bytes, url: str,
               content_type: str | None, suffix: bytes = b"",
               rule: ContentRule | None = None) -> Detection:
        """Fingerprint one 2xx answer. ``markup``: the HTML body as text or its UTF-8 bytes
        (None for a non-HTML body), or the part of it ``rule`` selects; ``suffix``: bytes
        hashed in after the content (the truncation length); ``rule``: its ignore-text
        patterns are removed from each segment."""
        if markup is None:
            return Detection(_non_html_fingerprint(body, content_type, suffix))
        host = self._host_mask(host_of(url))
        if self.shared is None:
            return self._compare(markup, body, url, suffix, self._pages.get(url), host, rule)
        memory = loaded = self.shared.load(url, host)
        own = self._pages.get(url)
        if loaded is not None and own is not None and own.sketch is None \
                and (own.raw, own.fingerprint) == (loaded.raw, loaded.fingerprint):
            memory = own  # this process fetched the last copy: its whole memory, no sketch
        elif loaded is not None:
            self._remember(url, loaded)
        else:  # none shared (never written, expired, or Redis failed): this process's own
            memory = self._pages.get(url)
        detection = self._compare(markup, body, url, suffix, memory, host, rule)
        kept = self._pages.get(url)
        if loaded is not None and detection.segments == -1:  # its bytes again: it stands
            self.shared.touch(url, host)
        elif kept is not None:
            self.shared.save(url, kept, host)
        return detection

    def _remember(self, url: str, memory: PageMemory) -> None:
        self._pages[url] = memory
        self._pages.move_to_end(url)
        if len(self._pages) > self.max_pages:
            self._pages.popitem(last=False)

    def _compare(self, markup: str | bytes, body: bytes, url: str, suffix: bytes,
                 memory: PageMemory | None, host: HostMask,
                 rule: ContentRule | None = None) -> Detection:
        """``detect`` of an HTML answer (``markup``: as ``detect`` takes it) against
        ``memory``, the page's last copy (None: no copy known), with ``host``'s mask; the
        page's memory in ``_pages`` becomes this copy's."""
        raw = zlib.crc32(suffix, zlib.crc32(body))
        if memory is not None and memory.raw == raw:  # the same bytes as the last copy
            self._pages.move_to_end(url)
            return Detection(memory.fingerprint, None, 0, 0, -1)
        visible = VisibleMarkup(markup)
        key = None if rule is not None and rule.ignore_text else visible.key
        if memory is not None and key is not None and memory.markup == key and \
                self._as_it_was(memory, host):
            return self._same_text(url, memory, host, raw)
        parts = visible.segments()
        if rule is not None and rule.ignore_text:
            parts = [part for part in (" ".join(rule.remove_ignored(p).split()) for p in parts)
                     if part]
        lengths = list(map(len, parts))
        length = sum(lengths)
        reason = not_content(parts, length, memory.length if memory else None)
        if reason is not None:
            if reason in ALWAYS_REFUSED or memory is None or memory.rejected < REJECT_LIMIT:
                if memory is not None and reason not in ALWAYS_REFUSED:
                    memory.rejected += 1  # a wall spends no refusal of the others
                self.not_content += 1
                return Detection(None, reason)
        texts, priced = self._stable_hashes(parts)
        hashes = copies_apart(texts)
        if memory is not None and memory.sketch is not None:  # read from Redis: page_memory
            if memory.earlier:
                _restore_earlier(memory, parts, hashes, host)
            else:
                memory.restore(hashes, host.seen)
        if host.pending:  # masks other processes learned, of segments not seen here yet
            host.resolve(hashes, memory.hashes if memory is not None else ())
        hash_set = set(hashes)
        before = set(memory.hashes) if memory is not None else set()
        added = hash_set - before
        if memory is not None and memory.rejected == 0 and \
                len(memory.hashes) >= MIN_OVERLAP_SEGMENTS:
            if served_in_place(hash_set, before, added, host):  # a redirect target, mostly
                memory.rejected += 1
                self.not_content += 1
                return Detection(None, "replaced")
        if memory is not None and memory.rejected < REJECT_LIMIT and \
                error_in_frame(parts, lengths, hashes, added, memory.length):
            memory.rejected += 1
            self.not_content += 1
            return Detection(None, "error page")
        page_id = _page_id(url)
        host.value_shown(list(compress(hashes, priced)))
        ignore = _with_slots(_ignored_here(lengths, hashes, host.masked), host, hashes)
        ignored = changed = 0
        fingerprint: str | None = None
        if memory is not None:
            removed = before - hash_set
            gone = set(memory.gone)
            for h in added:
                if h in gone and h & _SHORT_BIT:  # a short block went and came back
                    host.mask(h)
            host.revisited(hashes)
            for anchor, text in replaced_slots(hashes, memory.hashes, added, removed,
                                               host.masked):
                host.slot_replaced(anchor, text, page_id)
            # a new short entry with a digit (a dated teaser, a price) is a listing's entry,
            # not a renamed menu item: no boilerplate run takes it (issue 59)
            numbered = {hashes[i] for i in compress(range(len(hashes)),
                                                    map(added.__contains__, hashes))
                        if _DIGIT.search(parts[i]) is not None}
            for h in boilerplate_runs(hashes, added - numbered, ignore) | \
                    boilerplate_runs(memory.hashes, removed, ignore) | \
                    consent_runs(hashes, added) | consent_runs(memory.hashes, removed):
                host.mask(h)
            ignore = _with_slots(_ignored_here(lengths, hashes, host.masked), host, hashes,
                                 memory.hashes)
            whole = _whole_text_hash(parts, hashes, ignore)
            counted = {h for h in added | removed if h not in ignore}
            inside = inside_content(hashes, added, ignore) | \
                inside_content(memory.hashes, removed, ignore)
            if inside:  # a learned further copy of a text still here: volatile, not content
                inside -= further_copies(texts)
            changed = len(counted | inside)
            ignored = len(added) + len(removed) - changed
            order = long_order(hashes)
            if changed == 0 and _moved(hashes, order, memory):
                changed = 1  # the same segments, long ones in another order
            elif changed == 0 or (whole == memory.whole and not inside):
                fingerprint = memory.fingerprint
                self.ignored_changes += 1  # the bytes differed (else returned above)
                ignored, changed = ignored + changed, 0
            new_gone = array("Q", [h for h in memory.gone if h not in hash_set])
            new_gone.extend(removed)
            memory.gone = new_gone[-self.remember_gone:]
        else:
            whole = _whole_text_hash(parts, hashes, ignore)
            order = long_order(hashes)
        mask_version = host.version  # what this copy ignores was worked out with it
        host.see(hash_set, page_id)
        if fingerprint is None:
            digest = hashlib.blake2b(
                array("Q", filterfalse(ignore.__contains__, hashes)).tobytes(), digest_size=8)
            digest.update(suffix)
            fingerprint = digest.hexdigest()
        content = len(hashes) - sum(map(ignore.__contains__, hashes))
        stored = array("Q", hashes)
        if memory is None:
            memory = PageMemory(fingerprint, stored, length, array("Q"), whole)
            memory.raw, memory.order = raw, order
            self._remember(url, memory)
        else:
            memory.fingerprint, memory.hashes, memory.length = fingerprint, stored, length
            memory.whole, memory.rejected, memory.raw = whole, 0, raw
            memory.order = order
            self._pages.move_to_end(url)
        memory.markup, memory.mask_version, memory.content = key, mask_version, content
        return Detection(fingerprint, None, ignored, changed, content)

    @staticmethod
    def _as_it_was(memory: PageMemory, host: HostMask) -> bool:
        """Whether a copy showing the page's last copy's visible markup again would be
        detected just as it was: the host's mask has not changed since (its version), none of
        the page's segments has left the host's record (their counts, prices), no other
        process's mask waits to be resolved, and the copy was content (not empty)."""
        return memory.mask_version == host.version and not host.pending and \
            memory.length >= MIN_TEXT and all(map(host.seen.__contains__, memory.hashes))

    def _same_text(self, url: str, memory: PageMemory, host: HostMask, raw: int) -> Detection:
        """A copy whose visible markup is the last copy's (``VisibleMarkup.key``; the bytes
        differed in scripts, styles, comments or the head) under the same mask: no change,
        what ``_compare`` finds for it, without cutting it into segments. The host's record of
        the page is refreshed as ``_compare`` does."""
        host.revisited(memory.hashes)
        host.see(memory.hashes, _page_id(url))
        memory.raw, memory.rejected = raw, 0
        self._pages.move_to_end(url)
        self.ignored_changes += 1
        return Detection(memory.fingerprint, None, 0, 0, memory.content)

    def _stable_hashes(self, parts: list[str]) -> tuple[list[int], list[bool]]:
        """``segment_hash(stable segment)`` of each part, through a bounded per-process
        cache keyed by the raw segment (``bounded_cache.cached``: most segments repeat from fetch
        to fetch, and the volatile patterns are the costly step; one that never comes again,
        a counter or a time, is not kept), and whether each part shows a price
        (``priced_positions``, worked out with the stable hash for the parts not in the
        cache only). The priced parts' keys are kept in ``_priced_keys`` only while the
        cache holds them (emptied with it), so that set is bounded by the cache too."""
        keys = list(map(hash, parts))
        priced: set[int] = set()

        def work(missing: list[int]) -> list[int]:
            fresh = list(map(parts.__getitem__, missing))
            priced.update(keys[missing[i]] for i in priced_positions(fresh))
            return segment_hashes(stable_segments(fresh))

        hashes = cached(self._stable_cache, self.cache_segments, keys, work,
                        self._stable_once, self._priced_keys.clear)
        known = self._priced_keys
        if priced:  # this call's priced parts, and the known ones: no copy of the known set
            # filter over this call's few priced keys: set.intersection(dict) walks the dict
            known.update(filter(self._stable_cache.__contains__, priced))
            return hashes, list(map(or_, map(priced.__contains__, keys),
                                    map(known.__contains__, keys)))
        return hashes, list(map(known.__contains__, keys))

    def stats(self) -> dict[str, int]:
        """Counters for the adapters' stats (``ignored_changes``, ``not_content``)."""
        return {"ignored_changes": self.ignored_changes, "not_content": self.not_content,
                "hosts": len(self._hosts), "pages": len(self._pages)}


def _non_html_fingerprint(body: bytes, content_type: str | None, suffix: bytes) -> str:
    data = body
    if content_type and "json" in content_type.lower():
        try:
            data = json.dumps(json.loads(body), sort_keys=True, separators=(",", ":"),
                              ensure_ascii=False).encode("utf-8")
        except (ValueError, UnicodeDecodeError, RecursionError):
            data = body
    digest = hashlib.blake2b(data, digest_size=8)
    digest.update(suffix)
    return digest.hexdigest()


def describe(detection: Detection) -> dict[str, Any]:
    """A JSON-ready view of one detection (for logs and ``inspect``)."""
    return {"fingerprint": detection.fingerprint, "not_content": detection.reason,
            "ignored_segments": detection.ignored,
            "changed_segments": detection.changed_segments, "segments": detection.segments}

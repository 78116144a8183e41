"""One host's learned boilerplate (``HostMask``), and the log that shares it between processes.

``ContentDetector`` ignores, on each host, the segments it has learned are not a page's own
content: seen on two pages of the host (navigation, footer), or masked for another reason (a
block that went and came back, a run of new short segments beside boilerplate, a consent
banner); never a segment that shows a price (``value_shown``: a product's price or stock
line on several pages is their content, issue 59). A process that learned nothing yet of a
host (another process of the frontier, the crawl after a restart) counts those segments as
content the first time it fetches each page, so a revisit whose content did not change may
be called changed.

With ``FRONTIER_RATE_SHARED_PAGE_MEMORY`` (on by default) every process appends the segments it
masks to one Redis string per host (``crawl/shared_pages.py``), and masks those the other
processes appended before it compares a copy of one of the host's pages:

- the log is a ``HEADER`` (``MAGIC`` and a random generation), then one or more chunks, each
  the masks one write logged: a 21-bit word per mask, the segment's 20-bit ``tag`` with
  ``SPREAD_FLAG`` set when it was masked for its spread, the words sorted and their gaps
  Golomb-Rice coded (``write_log``: ~2 bytes a mask for a host of ~160 masks, against 4
  bytes a word before, issue 59's <= 300 B a page). A log word masks a segment this process
  saw on the host (up to ``HostMask.limit``, 2,048) whose tag it is: one of them by chance
  with probability ~n x seen / 2^20 for n masks (~0.3 segments a host for the corpus' ~160
  masks; ~4 of 2,048 for a host of 2,000 masks), and a segment masked by chance has its
  changes missed. Version 3's logs (``WIDE_MAGIC``) had 23-bit tags: they read exactly as
  this version's (``narrow``), and are written again at the process's next write;
- reading it masks each segment this process knows by its tag (``fold``); a tag of a segment
  not seen here yet waits in ``pending`` until a copy shows it (``resolve``); masking twice,
  or a segment this process appended itself, changes nothing;
- only masks are shared, not which page each segment was first seen on: that would cost
  ~16 bytes for every segment of every page for 0.1 point fewer false changes
  (docs/CHANGE_DETECTION.md);
- when the log holds more than ``COMPACT_AFTER`` words (and 1.5x the reader's masks), the
  next writer replaces it with its own masks under a new generation, and a reader that
  finds another generation reads it again from its start: a log stays under ~6 KiB.
  Masks another process appended during that replacement are lost: a segment it had just
  masked is learned again. A log of an earlier layout (``OLD_MAGICS``: 8-byte hashes, then
  4-byte words) is replaced the same way, its masks re-learned.
"""

from __future__ import annotations

import math
import random
import struct
from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from itertools import compress, count, islice, repeat
from operator import and_, not_

from frontier_rate.detection.segment_hashes import SHORT_BIT

HEADER = struct.Struct("<8sQ")
"""The log's first 16 bytes: ``MAGIC`` and its generation."""
MAGIC = b"frhmask4"
WIDE_MAGIC = b"frhmask3"
"""Version 3's magic: the same chunks of words of a 23-bit tag (``WIDE_TAG_BITS``) and the
flag above it, read as this version's words (``narrow``)."""
WIDE_TAG_BITS = 23
OLD_MAGICS = (b"frhmask1", b"frhmask2")
"""The magics of the earlier layouts (8-byte hashes, a zero word before a spread mask; then
4-byte words, one a mask, uncoded)."""
COMPACT_AFTER = 256
"""Words in a host's log (and half as many again as the reader's masks) after which the next
writer replaces it with its own masks: a log holds each mask about once (processes append
the masks each learns, the same ones too), under ~6 KiB for a host of 2,048 masks."""
TAG_BITS = 20
"""Bits of a segment's ``tag`` in a log word: 20 rather than version 3's 23 cost ~0.4 byte a
mask less (issue 59's <= 300 B a page; docs/CHANGE_DETECTION.md has the measure)."""
WORD_BITS = TAG_BITS + 1
"""Bits of a log word: the tag and ``SPREAD_FLAG``."""
CHUNK_COUNT = 0xFFFF
"""The most words in one chunk of a log (its count is 16 bits); more are written as several."""
PARTIAL = 0xFFFFFFFF
"""The low bits of a hash known only by its top 32 (all zero: a whole hash's are its
Adler-32, never 0)."""
SPREAD_FLAG = 1 << TAG_BITS
"""In a log word: the mask was learned from the segment's spread (``SPREAD_MARK``)."""
PENDING_LIMIT = 4096
"""Masks a process keeps unwritten while Redis does not answer; past it they are dropped and
its whole set is written once Redis answers (``compact``)."""


BOILERPLATE_SHARE = 0.2
"""A segment is a host's boilerplate once it is on this share of the host's pages (at least
two pages, at most ``BOILERPLATE_PAGES``). Template text (navigation, footer, a sidebar) is on
most of a host's pages; a value a site shows on a few of them (a product's price and stock on
its page, its category's list and the home page; a listing's entries) is content, and on a
shop its changes are what a revisiting crawler is for (issue 59). On a host of up to ten
pages (a service's legal documents) two pages are enough, as before."""
BOILERPLATE_PAGES = 32
"""The most pages a segment needs to be on to be boilerplate, however large the host: the
mask remembers a bounded number of segments, so a count over hundreds of pages would be
forgotten before it is reached."""
COUNTED_PAGES = math.ceil(BOILERPLATE_PAGES / BOILERPLATE_SHARE)
"""How many of a host's pages are counted (past it the threshold no longer moves)."""
SLOT_VALUES = 4
"""A slot (the place right after one of the host's boilerplate segments) whose short text was
replaced by this many different texts, on revisits of at least two pages, and on at least
``SLOT_SHARE`` of the revisits that showed the slot, is volatile: a "deal of the moment" box,
a rotating teaser after the menu. What sits there is ignored on the host's pages. One edit of
the host's template (a menu item renamed on every page) is one text, however many pages show
it; each page's own "updated" line after the same heading changes on few of its revisits; a
value a few pages show (a price, a stock line) follows the page's own text, not the host's
template, so it never makes a slot."""
SLOT_SHARE = 0.5
SLOTS = 256
"""Slots remembered per host (the oldest forgotten first)."""
_EXPLICIT = -1
"""``HostMask.seen`` value of a segment masked by a rule other than its spread (``mask``)."""
_FOLDED = -2
"""``HostMask.seen`` value of a segment another process masked for its spread (``fold``)."""
SPREAD_MARK = 0
"""In a shared log, the word before a hash masked for its spread (no segment hashes to 0: its
Adler-32 half is never 0). A process that knows more of the host's pages than another may
find it is on too few of them, so such a mask is kept only while few pages of the host are
known here (``fold``); a hash without the mark was masked by a rule that always holds."""


_VERSIONS = count(1)
"""``HostMask.version``: one sequence for every mask, so a mask made afresh never repeats an
old one's number."""


def spread_threshold(pages: int) -> int:
    """On how many pages of a host of ``pages`` known pages a segment must be seen to be its
    boilerplate (``BOILERPLATE_SHARE``, between 2 and ``BOILERPLATE_PAGES``)."""
    return max(2, min(BOILERPLATE_PAGES, math.ceil(BOILERPLATE_SHARE * pages)))


def page_bit(page: int) -> int:
    """The bit of a page in a segment's page set: a 256-bit set, the page's 32-bit id hashed to
    one of 256 bits (Fibonacci hashing). Two pages on one bit count once: a segment's spread
    is never over-counted, at worst under-counted (on ~34 distinct pages for a threshold of
    32)."""
    return 1 << (((page & 0xFFFFFFFF) * 0x9E3779B1 & 0xFFFFFFFF) >> 24)


class HostMask:
    """One host's learned boilerplate: segment hash -> the set of the host's pages it was seen
    on (``page_bit``; ``_EXPLICIT`` once masked by another rule), the set of masked hashes, the
    host's pages counted (up to ``COUNTED_PAGES``), and the slots after boilerplate whose text
    was replaced (``slot_replaced``). Bounded: the segments seen least recently are dropped
    first.

    A segment is masked once it is on ``spread_threshold`` pages; as the host's known pages
    grow the threshold rises and a segment below it is content again (a book's title seen
    on the home page and its category's page before the rest of the shop was known).

    ``events``: the hashes this process masked and has not written to the shared log yet
    (None: not shared); ``generation`` / ``offset`` / ``logged``: how much of the shared log
    it has folded in (bytes, words); ``compact``: write all its masks instead of the events next time. Masks are
    shared as they are learned; a segment another process masked stays masked here."""

    __slots__ = ("seen", "masked", "limit", "pages", "threshold", "slots", "volatile_slots",
                 "events", "generation", "offset", "logged", "compact", "pending", "values",
                 "version")

    def __init__(self, limit: int, shared: bool = False) -> None:
        self.seen: OrderedDict[int, int] = OrderedDict()
        self.masked: set[int] = set()
        self.limit = limit
        self.pages: set[int] = set()
        self.threshold = spread_threshold(0)
        self.slots: dict[int, list[int]] = {}
        self.volatile_slots: set[int] = set()
        self.events: list[int] | None = [] if shared else None
        self.generation: int | None = None
        self.offset = 0
        self.logged = 0
        self.compact = False
        self.pending: dict[int, int] = {}  # tag -> log word of a mask read, segment unseen
        self.values: set[int] = set()  # segments showing a price: never masked
        self.version = next(_VERSIONS)  # a new one whenever what a copy ignores may differ

    def value_shown(self, values: Iterable[int]) -> None:
        """``values``: segments of a copy that show a value of the pages (a price: a product's
        price or stock line on its page and its lists). None of them is ever masked on the
        host, by any rule: it is the pages' content, and its change counts on every page that
        shows it (issue 59). A price on a large share of the host's pages that never changes
        costs nothing; one that changes is a change of the pages that show it."""
        for h in values:
            if h not in self.values:
                self.values.add(h)
                self.masked.discard(h)
                self.version = next(_VERSIONS)

    def see(self, hashes: Iterable[int], page: int) -> None:
        """Record the segments of one copy of ``page`` (a 32-bit id); a segment now on
        ``threshold`` pages of this host becomes boilerplate (never a ``value_shown``).

        The segments already counted on this page (or masked by a rule), most of a revisit's,
        are only made the most recent, in C; Python walks the others (a front page of 10,000
        segments: ~3 ms a revisit before). They are made recent before the others are added,
        so a segment of this copy is never the oldest dropped for room while it is read."""
        if page not in self.pages and len(self.pages) < COUNTED_PAGES:
            self.pages.add(page)
            self._rethreshold()
        seen = self.seen
        masked = self.masked
        values = self.values
        threshold = self.threshold
        bit = page_bit(page)
        hashes = list(hashes)
        known = list(map(seen.get, hashes, repeat(0)))
        if _FOLDED not in known:  # -1 & bit is the bit: a rule's mask is only made recent
            counted = list(map(and_, known, repeat(bit)))
            deque(map(seen.move_to_end, compress(hashes, counted)), maxlen=0)
            hashes = list(compress(hashes, map(not_, counted)))
        for h in hashes:
            known = seen.get(h)
            if known is None:
                seen[h] = bit
                if len(seen) > self.limit:
                    self._forget_oldest()
                continue
            seen.move_to_end(h)
            if known == _FOLDED:  # masked elsewhere: counted here from now on
                seen[h] = bit
                continue
            if known == _EXPLICIT or known & bit:
                continue
            known |= bit
            seen[h] = known
            if known.bit_count() >= threshold and h not in masked and h not in values:
                if self.events is not None:
                    self.events += (SPREAD_MARK, h)
                masked.add(h)
                self.version = next(_VERSIONS)
        self._bound_events()

    def mask(self, h: int) -> None:
        """Mask ``h`` on this host (learned by a rule other than its spread). A segment known
        only by its top 32 bits (``PARTIAL``: removed from a copy another process fetched)
        waits by its tag until a copy shows it (``resolve``). A ``value_shown`` is never
        masked."""
        if h in self.values:
            return
        if not h & PARTIAL:
            self.pending[tag(h)] = tag(h)
        if self.events is not None and h not in self.masked:
            self.events.append(h)
            self._bound_events()
        self.masked.add(h)
        self.version = next(_VERSIONS)
        self.seen[h] = _EXPLICIT
        self.seen.move_to_end(h)

    def fold(self, words: Iterable[int]) -> None:
        """Mask the segments other processes masked (``read_log``'s words), as if this
        process had learned them; none of them becomes an event of this process. A segment
        not seen here yet waits in ``pending`` (``resolve``). A spread mask is taken only
        while the threshold here is 2 (few of the host's pages known); then the host's own
        pages decide. The oldest remembered segments make room, as ``see`` does."""
        words = list(words)
        if not words:
            return
        by_tag = {tag(h): h for h in self.seen}
        pending = self.pending
        for word in words:
            h = by_tag.get(word & ~SPREAD_FLAG)
            if h is None:
                pending[word & ~SPREAD_FLAG] = word
            else:
                self._fold_one(h, word)
        while len(pending) > self.limit:
            del pending[next(iter(pending))]
        while len(self.seen) > self.limit:
            self._forget_oldest()

    def resolve(self, hashes: Iterable[int], last: Iterable[int] = ()) -> None:
        """Fold the pending masks of the segments of a copy about to be compared, and of
        those of the page's last copy known only by their top 32 bits (``last``)."""
        pending = self.pending
        for h in hashes:
            word = pending.pop(tag(h), None)
            if word is not None:
                self._fold_one(h, word)
        for h in last:
            if not h & PARTIAL and tag(h) in pending:
                self._fold_one(h, pending[tag(h)])

    def _fold_one(self, h: int, word: int) -> None:
        events, self.events = self.events, None
        try:
            if not word & SPREAD_FLAG:
                self.mask(h)
            elif self.seen.get(h) != _EXPLICIT:
                if self.threshold <= 2:
                    self.masked.add(h)
                    self.version = next(_VERSIONS)
                self.seen[h] = _FOLDED
                self.seen.move_to_end(h)
        finally:
            self.events = events

    def state(self) -> list[int]:
        """What a compacted log holds: the word of every mask here, and of those pending."""
        found = dict(self.pending)
        for h in self.masked:
            found[tag(h)] = tag(h) | (0 if self.seen.get(h) == _EXPLICIT else SPREAD_FLAG)
        return list(found.values())

    def revisited(self, order: Iterable[int]) -> None:
        """A revisit of a page whose copy is ``order``: each slot it shows was revisited."""
        slots = self.slots
        if slots:
            for h in filter(slots.__contains__, order):  # the few slots, found in C
                slots[h][3] += 1

    def slot_replaced(self, anchor: int, text: int, page: int) -> None:
        """The short text right after boilerplate segment ``anchor`` was replaced by the
        segment ``text`` on a revisit of ``page`` (after ``revisited``); the slot's rule is
        ``SLOT_VALUES``."""
        slot = self.slots.pop(anchor, None)  # re-inserted last: the oldest first
        if slot is None:  # [pages, texts, replacements, revisits]
            slot = [0, 0, 0, 1]
        slot[0] |= page_bit(page)
        slot[1] |= page_bit(text ^ (text >> 32))
        slot[2] += 1
        self.slots[anchor] = slot
        if len(self.slots) > SLOTS:
            del self.slots[next(iter(self.slots))]
        if slot[1].bit_count() >= SLOT_VALUES and slot[0].bit_count() >= 2 \
                and slot[2] >= SLOT_SHARE * slot[3]:
            self.volatile_slots.add(anchor)
            self.version = next(_VERSIONS)

    def in_volatile_slots(self, order: Sequence[int]) -> set[int]:
        """The short segments of ``order`` (a copy's hashes) that sit in a volatile slot."""
        slots = self.volatile_slots
        if not slots:
            return set()
        # the segment after each anchor in a slot, found in C (``order[1:]`` picked by
        # ``order``'s anchors)
        after = compress(islice(order, 1, None), map(slots.__contains__, order))
        return {h for h in after if h & SHORT_BIT}

    def _rethreshold(self) -> None:
        """A new page counted: when the threshold rises, the segments masked for their spread
        that are now below it are content again."""
        threshold = spread_threshold(len(self.pages))
        if threshold == self.threshold:
            return
        self.threshold = threshold
        seen = self.seen
        self.masked = {h for h in self.masked if seen.get(h, _EXPLICIT) == _EXPLICIT
                       or seen[h] != _FOLDED and seen[h].bit_count() >= threshold}
        self.version = next(_VERSIONS)

    def _forget_oldest(self) -> None:
        old, _ = self.seen.popitem(last=False)
        self.masked.discard(old)
        self.values.discard(old)
        self.version = next(_VERSIONS)

    def _bound_events(self) -> None:
        events = self.events
        if events is not None and len(events) > PENDING_LIMIT:
            events.clear()
            self.compact = True


def host_of(url: str) -> str:
    """The host a mask is kept for: the URL's authority, lowercased (port included)."""
    rest = url.split("://", 1)[-1]
    return rest.split("/", 1)[0].split("?", 1)[0].lower()


def tag(h: int) -> int:
    """A segment's ``TAG_BITS``-bit tag in a shared log (never 0), of its top 32 bits: those a
    page's shared memory keeps of a removed segment (``detection/page_memory.py``), so a
    segment known only by them has its tag."""
    return ((((h >> 32) * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF) >> (64 - TAG_BITS)) or 1


def words_of(events: Iterable[int]) -> list[int]:
    """The log words of ``HostMask.events`` (a hash, or ``SPREAD_MARK`` then a hash)."""
    found: list[int] = []
    spread = False
    for h in events:
        if h == SPREAD_MARK:
            spread = True
        else:
            found.append(tag(h) | (SPREAD_FLAG if spread else 0))
            spread = False
    return found


def new_generation() -> int:
    """A random generation for a log written afresh."""
    return random.getrandbits(64)


def write_log(words: Iterable[int], generation: int | None = None) -> bytes:
    """Log ``words`` (each below ``2**WORD_BITS``) as bytes; with ``generation``, a whole log
    (its header first). Each chunk of at most ``CHUNK_COUNT`` words: its count (2 bytes) and
    Rice parameter k (1 byte), then the gaps between the sorted words, each as its quotient by
    2^k in unary (ones, then a zero) and its k low bits, padded to a byte. Chunks are
    self-delimiting, so two writes one after the other read as the words of both."""
    head = HEADER.pack(MAGIC, generation) if generation is not None else b""
    values = sorted(words)
    if values and (values[0] < 0 or values[-1] >> WORD_BITS):
        raise ValueError(f"host mask log words are {WORD_BITS}-bit, got {values[-1]}")
    chunks = [_chunk(values[i:i + CHUNK_COUNT]) for i in range(0, len(values), CHUNK_COUNT)]
    return head + b"".join(chunks)


def _chunk(values: list[int]) -> bytes:
    """One chunk of sorted ``values`` (``write_log``). The Rice parameter is the one near the
    optimum for gaps spread evenly over the words' range (log2 of 0.69x the mean gap)."""
    mean = (values[-1] + 1) // len(values)
    k = max(0, (mean * 69 // 100).bit_length() - 1)
    low, mask = f"0{k}b", (1 << k) - 1
    parts = []
    previous = 0
    for value in values:
        gap, previous = value - previous, value
        parts.append("1" * (gap >> k) + "0" + (format(gap & mask, low) if k else ""))
    bits = "".join(parts)
    bits += "0" * (-len(bits) % 8)
    return len(values).to_bytes(2, "big") + bytes([k]) + int(bits, 2).to_bytes(len(bits) // 8, "big")


def log_generation(head: bytes) -> int | None:
    """The generation of a log whose first bytes are ``head`` (None: no header), of this
    version or version 3 (``is_wide_log``)."""
    if len(head) >= HEADER.size:
        magic, generation = HEADER.unpack_from(head)
        if magic in (MAGIC, WIDE_MAGIC):
            return generation
    return None


def is_wide_log(head: bytes) -> bool:
    """Whether a log's first bytes are version 3's (``WIDE_MAGIC``: 23-bit tags)."""
    return head[:len(WIDE_MAGIC)] == WIDE_MAGIC


def narrow(word: int) -> int:
    """Version 3's log word (a 23-bit tag, the flag above it) as this version's: a tag is the
    top bits of the same product (``tag``), so its top ``TAG_BITS`` are this version's tag of
    the same segment (both never 0)."""
    narrowed = (word & ((1 << WIDE_TAG_BITS) - 1)) >> (WIDE_TAG_BITS - TAG_BITS) or 1
    return narrowed | (SPREAD_FLAG if word >> WIDE_TAG_BITS & 1 else 0)


def is_old_log(head: bytes) -> bool:
    """Whether a log's first bytes are those of an earlier layout (``OLD_MAGICS``)."""
    return head[:len(MAGIC)] in OLD_MAGICS


def read_log(data: bytes, whole: bool, wide: bool = False) -> list[int]:
    """The words of log bytes (``whole``: from the log's start, whose header is skipped),
    each chunk's sorted; ValueError naming the fault when they are not whole chunks.
    ``wide``: the bytes of a version 3 log (``is_wide_log``), its words ``narrow``-ed."""
    if whole and log_generation(data) is not None:
        data = data[HEADER.size:]
    if wide:
        return [narrow(word) for word in _words(data, WIDE_TAG_BITS + 1)]
    return _words(data, WORD_BITS)


def _words(data: bytes, word_bits: int) -> list[int]:
    """The words of a log's chunks, each of at most ``word_bits``."""
    if not data:
        return []
    bits = format(int.from_bytes(data, "big"), f"0{8 * len(data)}b")
    end = len(bits)
    found: list[int] = []
    pos = 0
    while pos < end:
        if end - pos < 24:
            raise ValueError(f"host mask log of {len(data)} bytes ends inside a chunk's head")
        count, k = int(bits[pos:pos + 16], 2), int(bits[pos + 16:pos + 24], 2)
        pos += 24
        if not count or k > word_bits:
            raise ValueError(f"host mask log of {len(data)} bytes has a chunk of {count} words "
                             f"with a Rice parameter of {k}")
        value = 0
        for _ in range(count):
            stop = bits.find("0", pos)
            if stop < 0 or stop + 1 + k > end:
                raise ValueError(f"host mask log of {len(data)} bytes ends inside a word")
            value += (stop - pos) << k | (int(bits[stop + 1:stop + 1 + k], 2) if k else 0)
            pos = stop + 1 + k
            found.append(value)
        if value >> word_bits:
            raise ValueError(f"host mask log of {len(data)} bytes has a word past "
                             f"{word_bits} bits")
        pos += -pos % 8
    return found


def log_hashes(words: Iterable[int]) -> list[int]:
    """The tags of a log's words, without their ``SPREAD_FLAG``."""
    return [word & ~SPREAD_FLAG for word in words]

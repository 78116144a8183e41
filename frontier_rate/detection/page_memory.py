"""What the ``"content"`` detection remembers of one page's last copy, and its bytes.

``ContentDetector`` compares each copy of a page with the page's last copy: the segments
added and removed, not the fingerprints. So the memory of that last copy decides whether
an unchanged page is called unchanged. A process keeps its own pages' memories whole (an
``array`` of 8-byte segment hashes); ``pack`` turns one into at most 75 bytes that can live in
Redis (``crawl/shared_pages.py``) for whichever process fetches the page next, and
``unpack`` back into a memory whose segments are a *sketch* until the next copy comes.

The sketch is an invertible Bloom lookup table (Goodrich and Mitzenmacher, "Invertible
Bloom lookup tables", 2011; Eppstein et al., "What's the difference?", SIGCOMM 2011) of
the copy's distinct segments: ``SKETCH.cells`` cells, each the XOR of the 32-bit keys (a
hash's top 32 bits: its two flag bits and 30 of CRC-32; two of a page's ~250 segments share
one with probability ~2^-15) and the XOR of their 8-bit checks, 5 bytes a cell. A cell is
pure when its check is its key's and it is one of its key's cells; whether a pure key was
removed or added is whether the next copy holds it, so the cells need no count (versions 3
to 5 kept one: ``THIRTEEN_CELLS``). ``restore``
subtracts the next copy's segments and peels the difference: the segments added and
removed. The last copy's order is guessed as the next copy's with each added segment in
turn replaced by a removed one (exact for an edit or a rotated text). On the real-HTML
corpus 86% of parsed revisits differ in no segment and 94% in at most eight; a
difference too large to peel (a rewrite, mostly) reads as a last copy with no segments:
the whole-text hash still says "the same content", anything else is a change. Nine cells
of 5 bytes rather than version 5's thirteen of 6 peel less often (a difference of four
segments ~78% of the time rather than ~92%, two ~96% rather than ~99%), and make the value
at most 75 bytes, which Redis keeps in an 80-byte allocation instead of 112
(docs/CHANGE_DETECTION.md has the measure: issue 59's <= 300 B a page). The key stays 32
bits: ``HostMask`` knows a segment removed from a copy another process fetched by the tag
of those bits (``host_mask.tag``).

A removed key is made a whole hash again from the host's remembered segments
(``HostMask.seen``); one the host never showed keeps its key's bits (its flags intact, its
Adler-32 half 0, which no whole hash has), all a removed content segment needs: it counts
as a change. The recently gone short segments (a block that goes and comes back is
volatile) are kept as ``GONE`` 16-bit tags, matched against the next copy's segments.
Nothing is pickled: a ``struct`` header and fixed-size cells.
"""

from __future__ import annotations

import math
import struct
import sys
from array import array
from collections.abc import Container, Iterable, Sequence
from typing import NamedTuple

VERSION = 6
"""The packed layout's version (its first byte). Versions 4 and 5 are the same head with
``THIRTEEN_CELLS`` (at most 108 bytes), read as they are and written back so while their
sketch stands (the next copy's detection writes version 6). Version 3 (the same cells, a
35-byte head, five gone tags: at most 123 bytes) is read and migrated exactly
(``_from_v3``). Versions 3 and 4 hashed a segment with a volatile fragment lower-cased and
kept a copyright line's numbers, so their memories read as ``earlier`` (the detector
restores them against the next copy hashed that way: ``change_detection._restore_earlier``).
Versions 1 (every 8-byte hash, ~2.4 KB a page) and 2 (every segment hashed lower-cased, no
order) are earlier memories, re-learned (``crawl/shared_pages.py``); any other reads as
none."""
EARLIER_HASHING = (3, 4)
"""Versions whose segments were hashed before version 5 (``segments.stable_segments``'s
``earlier``)."""
OLD_VERSIONS = (1, 2)
HEADER = struct.Struct("<BIHB4s8sH")
"""version, raw (CRC-32 of the bytes; 0xFFFFFFFF: none), visible length (``length_code``),
rejected answers in a row, whole-text hash (32 bits), fingerprint, order (16 bits): 22
bytes. With the cells and ``GONE`` tags a value of at most 75 bytes, which Redis keeps in
an 80-byte allocation (a field of the shard's hash 32 bytes less than version 5's 108, in
a 112-byte one; issue 59's <= 300 B a page). The 32-bit hashes cost a parse (raw) or a
change seen as none (whole) once in 2^32 compares, the 16-bit order a reordering of the
long segments seen as none once in 65,536."""
V3_HEADER = struct.Struct("<BqIB8s8sIB")
"""Version 3's head: raw (64 bits: its CRC-32 and length), length (32 bits), rejected,
whole (64 bits), fingerprint, order (32 bits), the count of gone tags."""
RAW_NONE = 0xFFFFFFFF
"""The packed raw of a memory whose bytes are unknown (-1 here); a copy whose CRC-32 is
this value is parsed, never taken as the same bytes."""
LENGTH_STEPS = 2040
"""``length_code`` steps a doubling of the visible length: within 0.02% (the length is
compared in ratios: half, a tenth); 16 bits reach 2^32 (65,535 / 2,040 > 32), the most a
version 3 memory held."""


class Layout(NamedTuple):
    """How a version's sketch lays out its cells: how many, in which three parts (a key
    has one cell in each), the count's mask (0: no count) and a cell's bytes (``cell``:
    count, key, check; without a count key and check). A key is a hash's top 32 bits."""

    cells: int
    parts: tuple[tuple[int, int], tuple[int, int], tuple[int, int]]
    count_mask: int
    cell: struct.Struct


SKETCH = Layout(9, ((0, 3), (3, 6), (6, 9)), 0, struct.Struct("<IB"))
"""Version 6: nine cells of 5 bytes, the 32-bit key and the 8-bit check, no count."""
THIRTEEN_CELLS = Layout(13, ((0, 5), (5, 10), (10, 13)), 0xFF, struct.Struct("<BIB"))
"""Versions 3 to 5: thirteen cells of 6 bytes (count mod 256, 32-bit key, check)."""
GONE = 4
"""Recently gone short segments remembered (16-bit tags)."""
SHORT = 1 << 63
_MIX = 0x9E3779B97F4A7C15
_CHECK = 0xC2B2AE3D27D4EB4F
_M64 = (1 << 64) - 1


class PageMemory:
    """One page's last copy, as the detector compares the next one with it.

    ``sketch``: the packed cells of a memory read from Redis, until ``restore`` rebuilds
    ``hashes`` (then None); ``gone``: whole hashes, or 16-bit tags (< 2^16, never a
    segment's hash) of gone short segments not seen since; ``earlier``: a memory of
    ``EARLIER_HASHING``, whose segments were hashed as before version 5, until it is
    restored."""

    __slots__ = ("fingerprint", "hashes", "length", "gone", "rejected", "whole", "raw",
                 "sketch", "order", "earlier", "layout", "markup", "mask_version", "content")

    def __init__(self, fingerprint: str, hashes: array, length: int, gone: array,
                 whole: bytes) -> None:
        self.whole = whole  # hash of the content text, segment boundaries and spaces removed
        self.fingerprint = fingerprint
        self.hashes = hashes
        self.length = length
        self.gone = gone  # hashes removed from this page recently (to spot alternation)
        self.rejected = 0  # answers in a row taken as no copy
        self.raw = -1  # CRC-32 of the last copy's bytes (-1: unknown)
        self.sketch: bytes | None = None
        self.order = 0  # 16 bits of the CRC-32 of its long segments in order (change_detection)
        self.earlier = False
        self.layout = SKETCH  # the sketch's, while it stands
        # this process's own copy: its ``VisibleMarkup.key`` (None: not known), the host mask's
        # version its ignored segments were worked out with, and its content segments
        self.markup: int | None = None
        self.mask_version = 0
        self.content = 0

    def restore(self, hashes: Sequence[int], known: Iterable[int] = ()) -> bool:
        """Rebuild ``hashes`` (the last copy, in order) from the sketch and ``hashes``, the
        next copy's segments; ``known``: whole hashes of segments seen elsewhere (the host's);
        False when the difference is too large to peel (``hashes`` is then empty)."""
        sketch, self.sketch = self.sketch, None
        if sketch is None:
            return True
        layout, self.layout = self.layout, SKETCH
        self.gone = _match_gone(self.gone, hashes)
        cells = _cells_from(sketch, layout)
        here = {h >> 32: h for h in hashes}
        for key in here:
            _add(cells, key, -1, layout)
        peeled = _peel(cells, layout, here)
        if peeled is None:
            self.hashes = array("Q")
            return False
        removed, added = peeled
        if any(key not in here for key in removed):
            here.update((h >> 32, h) for h in known if h >> 32 not in here)
        old = [here.get(key) or key << 32 for key in removed]
        self.hashes = _merge(hashes, added, old)
        return True


def _merge(hashes: Sequence[int], added: set[int], removed: list[int]) -> array:
    """The last copy's order, guessed: the next copy's segments with each added one in
    turn replaced by a removed one (an edit, a rotated text: exact), the removed ones left
    over at the end."""
    order = array("Q")
    rest = iter(removed)
    for h in hashes:
        if h >> 32 in added:
            h = next(rest, None)
            if h is None:
                continue
        order.append(h)
    order.extend(rest)
    return order


def _match_gone(gone: array, hashes: Sequence[int]) -> array:
    """``gone`` with each tag the next copy's segments match replaced by that segment's
    whole hash (the detector looks whole hashes up in it)."""
    tags = {g for g in gone if g < 0x10000}
    if not tags:
        return gone
    whole = {tag(h): h for h in hashes if h & SHORT and tag(h) in tags}
    return array("Q", [whole.get(g, g) for g in gone])


def tag(h: int) -> int:
    """A gone short segment's 16-bit tag (never 0), of its top 32 bits (all a removed
    segment not seen elsewhere is known by)."""
    return ((((h >> 32) * _MIX) & _M64) >> 48) or 1


def _add(cells: list[list[int]], key: int, sign: int, layout: Layout) -> None:
    """Add (``sign`` 1) or take away (-1) one key in its three cells."""
    check = ((key * _CHECK) & _M64) >> 56
    for i in _cells_of(key, layout.parts):
        cell = cells[i]
        cell[0] = (cell[0] + sign) & layout.count_mask
        cell[1] ^= key
        cell[2] ^= check


def _cells_of(key: int, parts: Sequence[tuple[int, int]]) -> tuple[int, int, int]:
    """The key's three cells, one in each third of the table."""
    x = (key * _MIX) & _M64
    (a, b), (c, d), (e, f) = parts
    return a + (x >> 8) % (b - a), c + (x >> 24) % (d - c), e + (x >> 40) % (f - e)


def _peel(cells: list[list[int]], layout: Layout,
          present: Container[int]) -> tuple[list[int], set[int]] | None:
    """The difference the cells hold: (removed keys, added keys), or None when it does not
    peel to empty cells. ``present``: the next copy's keys (a pure key among them was
    added, any other removed)."""
    removed: list[int] = []
    added: set[int] = set()
    counted = layout.count_mask != 0
    progress = True
    while progress:
        progress = False
        for i, (count, key, check) in enumerate(cells):
            if not (key or check) or (counted and count not in (1, layout.count_mask)) \
                    or check != ((key * _CHECK) & _M64) >> 56 \
                    or i not in _cells_of(key, layout.parts):
                continue
            if key in added or key in removed or len(added) + len(removed) > layout.cells:
                return None  # a cell that only looked pure: the difference is too large
            if key in present:
                added.add(key)
                _add(cells, key, 1, layout)
            else:
                removed.append(key)
                _add(cells, key, -1, layout)
            progress = True
    if any(count or key or check for count, key, check in cells):
        return None
    return removed, added


def _cells_from(sketch: bytes, layout: Layout) -> list[list[int]]:
    """The cells of packed ``sketch``, each [count, key, check]."""
    if not layout.count_mask:
        return [[0, key, check] for key, check in layout.cell.iter_unpack(sketch)]
    return [list(cell) for cell in layout.cell.iter_unpack(sketch)]


def sketch_of(hashes: Sequence[int], layout: Layout = SKETCH) -> bytes:
    """The packed cells of a copy's distinct segments."""
    cells = [[0, 0, 0] for _ in range(layout.cells)]
    for key in {h >> 32 for h in hashes}:
        _add(cells, key, 1, layout)
    if not layout.count_mask:
        return b"".join(layout.cell.pack(key, check) for _, key, check in cells)
    return b"".join(layout.cell.pack(*cell) for cell in cells)


def length_code(length: int) -> int:
    """A visible length as 16 bits: ``LENGTH_STEPS`` a doubling (``length_of`` reads it)."""
    return min(0xFFFF, round(math.log2(length + 1) * LENGTH_STEPS))


def length_of(code: int) -> int:
    """The visible length ``length_code`` gave ``code`` (within 0.02%)."""
    return round(2 ** (code / LENGTH_STEPS)) - 1


def pack(memory: PageMemory) -> bytes:
    """``memory`` as one string (``HEADER``, the cells, the gone tags): at most 75 bytes.
    A memory read from Redis whose sketch still stands (no copy compared with it: the same
    bytes, a refused answer) is written back in its own layout and version."""
    try:
        fingerprint = bytes.fromhex(memory.fingerprint)
    except ValueError:
        fingerprint = b""
    if len(fingerprint) != 8:
        raise ValueError(f"fingerprint {memory.fingerprint!r} is not 16 hex digits")
    if len(memory.whole) != 4:
        raise ValueError(f"whole-text hash {memory.whole!r} is not 4 bytes")
    version, sketch = VERSION, memory.sketch
    if sketch is None:
        sketch = sketch_of(memory.hashes)
    elif memory.layout is THIRTEEN_CELLS:
        version = 4 if memory.earlier else 5
    gone = [g if g < 0x10000 else tag(g) for g in memory.gone if g < 0x10000 or g & SHORT]
    gone = gone[-GONE:]
    return b"".join((
        HEADER.pack(version, RAW_NONE if memory.raw < 0 else memory.raw,
                    length_code(memory.length), min(memory.rejected, 255), memory.whole,
                    fingerprint, memory.order & 0xFFFF),
        sketch, array("H", gone).tobytes() if sys.byteorder == "little"
        else struct.pack(f"<{len(gone)}H", *gone)))


def unpack(data: bytes) -> PageMemory:
    """The ``PageMemory`` of ``pack``'s bytes, of versions 4 and 5 (the same head, their
    ``THIRTEEN_CELLS``) or of version 3's (``_from_v3``): a sketch until ``restore``;
    ValueError naming what is wrong with them (another version, a short or long value): the
    caller then has no memory of the page."""
    if data[:1] == b"\x03":
        return _from_v3(data)
    if len(data) < HEADER.size:
        raise ValueError(f"page memory of {len(data)} bytes is shorter than its header "
                         f"({HEADER.size})")
    if data[0] not in (4, 5, VERSION):
        raise ValueError(f"page memory of version {data[0]}, not {VERSION}")
    layout = SKETCH if data[0] == VERSION else THIRTEEN_CELLS
    _, raw, length, rejected, whole, fingerprint, order = HEADER.unpack_from(data)
    end = HEADER.size + layout.cell.size * layout.cells
    gone = (len(data) - end) // 2
    if len(data) < end or (len(data) - end) % 2 or gone > GONE:
        raise ValueError(f"page memory of {len(data)} bytes, expected {end} for "
                         f"{layout.cells} cells (version {data[0]}) and 2 bytes for each of "
                         f"at most {GONE} gone tags")
    memory = _memory(data, end, gone, fingerprint, length_of(length), whole, rejected,
                     -1 if raw == RAW_NONE else raw, order, layout)
    memory.earlier = data[0] in EARLIER_HASHING
    return memory


def _from_v3(data: bytes) -> PageMemory:
    """A version 3 memory as version 4 held it (``earlier``): the raw's CRC-32 (its low 32
    bits), the whole-text hash's first 4 bytes, the order's low 16 bits (what this version computes of
    the same copy), the length as ``length_code`` gives it back, the last ``GONE`` tags."""
    if len(data) < V3_HEADER.size:
        raise ValueError(f"page memory of {len(data)} bytes is shorter than version 3's "
                         f"header ({V3_HEADER.size})")
    _, raw, length, rejected, whole, fingerprint, order, gone = V3_HEADER.unpack_from(data)
    end = V3_HEADER.size + THIRTEEN_CELLS.cell.size * THIRTEEN_CELLS.cells
    if len(data) != end + 2 * gone:
        raise ValueError(f"page memory of {len(data)} bytes, expected {end + 2 * gone} for "
                         f"{THIRTEEN_CELLS.cells} cells and {gone} gone tags (version 3)")
    memory = _memory(data, end, gone, fingerprint, length_of(length_code(length)), whole[:4],
                     rejected, -1 if raw < 0 else raw & 0xFFFFFFFF, order & 0xFFFF,
                     THIRTEEN_CELLS)
    memory.gone = memory.gone[-GONE:]
    memory.earlier = True
    return memory


def _memory(data: bytes, end: int, gone: int, fingerprint: bytes, length: int, whole: bytes,
            rejected: int, raw: int, order: int, layout: Layout) -> PageMemory:
    memory = PageMemory(fingerprint.hex(), array("Q"), length,
                        array("Q", struct.unpack_from(f"<{gone}H", data, end)), whole)
    memory.rejected, memory.raw, memory.order = rejected, raw, order
    memory.sketch, memory.layout = data[end - layout.cell.size * layout.cells:end], layout
    return memory

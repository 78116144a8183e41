"""What the ``"content"`` detection remembers of one page's last copy, and its bytes.

``ContentDetector`` compares each copy of a page with the page's last copy: the segments
added and removed, not the fingerprints. So the memory of that last copy decides whether
an unchanged page is called unchanged. ``pack`` and ``unpack`` turn it into one string and
back, so that it can live in Redis (``crawl/shared_pages.py``) and be read by whichever
process fetches the page next. Nothing is pickled: a fixed ``struct`` header, the
fingerprint's ASCII, and the two arrays of 8-byte segment hashes (little-endian).
"""

from __future__ import annotations

import struct
import sys
from array import array

VERSION = 1
"""The packed layout's version (its first byte); another version reads as no memory."""
HEADER = struct.Struct("<BqqB8sBII")
"""version, raw (CRC-32 ^ length << 32, or -1), visible length, rejected answers in a row,
whole-text hash, fingerprint length, segment hashes, recently gone hashes."""


class PageMemory:
    """One page's last copy, as the detector compares the next one with it."""

    __slots__ = ("fingerprint", "hashes", "length", "gone", "rejected", "whole", "raw")

    def __init__(self, fingerprint: str, hashes: array, length: int, gone: array,
                 whole: bytes) -> None:
        self.whole = whole  # hash of the content text, segment boundaries and spaces removed
        self.fingerprint = fingerprint
        self.hashes = hashes
        self.length = length
        self.gone = gone  # hashes removed from this page recently (to spot alternation)
        self.rejected = 0  # answers in a row taken as no copy
        self.raw = -1  # CRC-32 and length of the last copy's bytes


def little_endian(values: array) -> bytes:
    """8-byte hashes as little-endian bytes (the stored form on every machine)."""
    if sys.byteorder == "little":
        return values.tobytes()
    swapped = array("Q", values)
    swapped.byteswap()
    return swapped.tobytes()


def hashes_of(data: bytes) -> array:
    """The 8-byte hashes of ``little_endian``'s bytes."""
    values = array("Q")
    values.frombytes(data)
    if sys.byteorder != "little":
        values.byteswap()
    return values


def pack(memory: PageMemory) -> bytes:
    """``memory`` as one string (``HEADER``, the fingerprint, the hashes, the gone hashes)."""
    fingerprint = memory.fingerprint.encode("ascii")
    return b"".join((
        HEADER.pack(VERSION, memory.raw, memory.length, min(memory.rejected, 255),
                    memory.whole, len(fingerprint), len(memory.hashes), len(memory.gone)),
        fingerprint, little_endian(memory.hashes), little_endian(memory.gone)))


def unpack(data: bytes) -> PageMemory:
    """The ``PageMemory`` of ``pack``'s bytes; ValueError naming what is wrong with them
    (another version, a short or long value): the caller then has no memory of the page."""
    if len(data) < HEADER.size:
        raise ValueError(f"page memory of {len(data)} bytes is shorter than its header "
                         f"({HEADER.size})")
    version, raw, length, rejected, whole, size, count, gone = HEADER.unpack_from(data)
    if version != VERSION:
        raise ValueError(f"page memory of version {version}, not {VERSION}")
    start = HEADER.size + size
    if len(data) != start + 8 * (count + gone):
        raise ValueError(f"page memory of {len(data)} bytes, expected "
                         f"{start + 8 * (count + gone)} for {count} + {gone} hashes")
    try:
        fingerprint = data[HEADER.size:start].decode("ascii")
    except UnicodeDecodeError:
        raise ValueError("page memory whose fingerprint is not ASCII") from None
    middle = start + 8 * count
    memory = PageMemory(fingerprint, hashes_of(data[start:middle]), length,
                        hashes_of(data[middle:]), whole)
    memory.rejected, memory.raw = rejected, raw
    return memory

"""Hashes of segments (``segments``' stable texts): 64 bits each, with flags for a short
segment and a consent banner's, and each further copy of a text hashed apart (a page
that gains another copy of a paragraph differs by a segment)."""

from __future__ import annotations

import zlib
from itertools import compress
from operator import ne

SHORT_BLOCK = 64
"""Segments up to this many characters may be learned as boilerplate from their place
(a menu item, a widget line); longer ones (paragraphs) only from other pages."""
SHORT_BIT = 1 << 63
"""Set in the hash of a segment of at most ``SHORT_BLOCK`` characters."""
_SHORT_BIT = SHORT_BIT
_CONSENT_BIT = 1 << 62
CONSENT_WORDS = (
    "cookie", "consent", "partners can use", "privacy choices", "privacy preference",
    "accept all", "reject all", "tracking technolog", "personalised ads", "personalized ads",
    "personalised advertising", "personalized advertising", "your choices", "gdpr", "rgpd",
    "traceurs", "datenschutz-einstellungen", "einwilligung")
"""Words of a consent (cookie) banner, in lower case as segments are hashed; a segment
holding one has ``_CONSENT_BIT``. Plain substrings, found with ``in`` (a C search that
skips ahead), where an alternation of them made sre try every position: ~6.7 us of a
240-character segment, a fifth of a first copy's detection on a text-heavy page."""


def segment_hash(text: str) -> int:
    """A stable 64-bit hash of one segment: 62 bits of CRC-32 and Adler-32 of its UTF-8,
    the top bit set for a short segment (at most ``SHORT_BLOCK`` characters), the next
    for one with consent-banner words (``CONSENT_WORDS``)."""
    lowered = text.lower()
    return _hash(text, any(word in lowered for word in CONSENT_WORDS))


def segment_hashes(texts: list[str]) -> list[int]:
    """``segment_hash`` of each text. The consent words are first looked for in all the
    texts joined (no word holds the NUL between them): a page that has none of them, most
    pages, skips the search per segment."""
    joined = "\x00".join(texts).lower()
    words = [word for word in CONSENT_WORDS if word in joined]
    if not words:
        return [_hash(text, False) for text in texts]
    lowered = joined.split("\x00")
    return [_hash(text, any(word in low for word in words))
            for text, low in zip(texts, lowered, strict=True)]


_FLAGS = _SHORT_BIT | _CONSENT_BIT
_COPY = 0x9E3779B97F4A7C15
_MIX = 0xBF58476D1CE4E5B9
_M64 = (1 << 64) - 1


def copies_apart(hashes: list[int]) -> list[int]:
    """``hashes`` with each further copy of a text hashed apart: the k-th copy of a segment
    (k >= 2) as (its hash, k), with the same flags. So a copy of a page that gains or loses
    a repeat of text already on it (a paragraph twice, a list entry added again) differs
    from the last one by a segment, in the detector's sets, the host's masks and the shared
    memory's sketch alike (issue 59 item 2: multisets, not sets); segments that only move
    keep their hashes."""
    size = len(hashes)
    first = dict(zip(reversed(hashes), range(size - 1, -1, -1), strict=True))  # text: place
    out = list(hashes)
    if len(first) == size:  # no text twice
        return out
    # Python walks only the further copies, found in C: the places not their text's first
    copies: dict[int, int] = {}
    for i in compress(range(size), map(ne, map(first.__getitem__, hashes), range(size))):
        h = hashes[i]
        copy = copies[h] = copies.get(h, 1) + 1
        out[i] = copy_hash(h, copy)
    return out


def copy_hash(h: int, copy: int) -> int:
    """The hash of the ``copy``-th copy (>= 2) of the text hashed ``h``, with its flags."""
    mixed = ((h ^ (copy * _COPY & _M64)) * _MIX) & _M64
    return (h & _FLAGS) | ((mixed ^ mixed >> 31) & ~_FLAGS & _M64)


FURTHER = 2
"""Copies past a page's own that ``further_copies`` names (a copy the last one had more)."""


def further_copies(hashes: list[int]) -> set[int]:
    """The hashes of every further copy (the 2nd, 3rd ...) of a text of ``hashes`` (this
    copy's texts, not told apart), up to ``FURTHER`` past the copies on it."""
    counts: dict[int, int] = {}
    for h in hashes:
        counts[h] = counts.get(h, 0) + 1
    return {copy_hash(h, k) for h, count in counts.items() for k in range(2, count + FURTHER + 1)}


def _hash(text: str, consent: bool) -> int:
    data = text.encode("utf-8", "surrogatepass")
    value = ((zlib.crc32(data) & 0x3FFFFFFF) << 32) | zlib.adler32(data)
    if len(text) <= SHORT_BLOCK:
        value |= _SHORT_BIT
    if consent:
        value |= _CONSENT_BIT
    return value

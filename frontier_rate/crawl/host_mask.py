"""One host's learned boilerplate (``HostMask``), and the log that shares it between processes.

``ContentDetector`` ignores, on each host, the segments it has learned are not a page's own
content: seen on two pages of the host (navigation, footer), or masked for another reason
(a block that went and came back, a run of new short segments beside boilerplate, a consent
banner). A process that learned nothing yet of a host (another process of the frontier, the
crawl after a restart) counts those segments as content the first time it fetches each page,
so a revisit whose content did not change may be called changed.

With ``FRONTIER_RATE_SHARED_PAGE_MEMORY`` every process appends the segments it masks to one
Redis string per host (``crawl/shared_pages.py``), and masks those the other processes
appended before it compares a copy of one of the host's pages:

- the log is a ``HEADER`` (``MAGIC`` and a random generation), then 8-byte segment hashes
  (little-endian), each appended by the process that masked it;
- reading it masks each hash (``fold``): masking twice, or a hash this process appended
  itself, changes nothing;
- only masks are shared, not which page each segment was first seen on: that would cost
  ~16 bytes for every segment of every page (22-31 KB a host on the real-HTML corpus
  against ~1.8 KB) for 0.1 point fewer false changes (docs/CHANGE_DETECTION.md);
- when the log holds more than ``COMPACT_AFTER`` hashes (and twice the reader's masks), the
  next writer replaces it with its own masks under a new generation, and a reader that
  finds another generation reads it again from its start. Hashes another process appended
  during that replacement are lost: a segment it had just masked is learned again.
"""

from __future__ import annotations

import random
import struct
from array import array
from collections import OrderedDict
from collections.abc import Iterable

from frontier_rate.crawl.page_memory import hashes_of, little_endian

HEADER = struct.Struct("<8sQ")
"""The log's first 16 bytes: ``MAGIC`` and its generation."""
MAGIC = b"frhmask1"
COMPACT_AFTER = 4096
"""Hashes in a host's log after which the next writer replaces it with its own masks (8 bytes
a hash: a host's log stays under ~32 KiB)."""
PENDING_LIMIT = 4096
"""Masks a process keeps unwritten while Redis does not answer; past it they are dropped and
its whole set is written once Redis answers (``compact``)."""


class HostMask:
    """One host's learned boilerplate: segment hash -> first page id (or -1 once seen on
    two pages), and the set of masked hashes. Bounded (oldest entries dropped first).

    ``events``: the hashes this process masked and has not written to the shared log yet
    (None: not shared); ``generation`` / ``offset``: how much of the shared log it has
    folded in; ``compact``: write all its masks instead of the events next time."""

    __slots__ = ("first_page", "masked", "limit", "events", "generation", "offset", "compact")

    def __init__(self, limit: int, shared: bool = False) -> None:
        self.first_page: OrderedDict[int, int] = OrderedDict()
        self.masked: set[int] = set()
        self.limit = limit
        self.events: list[int] | None = [] if shared else None
        self.generation: int | None = None
        self.offset = 0
        self.compact = False

    def see(self, hashes: Iterable[int], page: int) -> None:
        """Record the segments of one copy of ``page``; a segment already seen on another
        page of this host becomes boilerplate."""
        first = self.first_page
        events = self.events
        for h in hashes:
            known = first.get(h)
            if known is None:
                first[h] = page
                if len(first) > self.limit:
                    self._forget_oldest()
            elif known != page and known != -1:
                first[h] = -1
                if events is not None and h not in self.masked:
                    events.append(h)
                self.masked.add(h)
        self._bound_events()

    def mask(self, h: int) -> None:
        """Mask ``h`` on this host (learned by a rule other than "seen on two pages")."""
        if self.events is not None and h not in self.masked:
            self.events.append(h)
            self._bound_events()
        self.masked.add(h)
        if h not in self.first_page:
            self.first_page[h] = -1

    def fold(self, hashes: Iterable[int]) -> None:
        """Mask the hashes other processes masked (``read_log``), as if this process had
        learned them; none of them becomes an event of this process. The oldest remembered
        segments make room, as ``see`` does."""
        events, self.events = self.events, None
        try:
            for h in hashes:
                self.mask(h)
        finally:
            self.events = events
        while len(self.first_page) > self.limit:
            self._forget_oldest()

    def state(self) -> list[int]:
        """What a compacted log holds: every hash masked here."""
        return list(self.masked)

    def _forget_oldest(self) -> None:
        old, _ = self.first_page.popitem(last=False)
        self.masked.discard(old)

    def _bound_events(self) -> None:
        events = self.events
        if events is not None and len(events) > PENDING_LIMIT:
            events.clear()
            self.compact = True


def host_of(url: str) -> str:
    """The host a mask is kept for: the URL's authority, lowercased (port included)."""
    rest = url.split("://", 1)[-1]
    return rest.split("/", 1)[0].split("?", 1)[0].lower()


def new_generation() -> int:
    """A random generation for a log written afresh."""
    return random.getrandbits(64)


def write_log(hashes: Iterable[int], generation: int | None = None) -> bytes:
    """``hashes`` as log bytes; with ``generation``, a whole log (its header first)."""
    head = HEADER.pack(MAGIC, generation) if generation is not None else b""
    return head + little_endian(array("Q", hashes))


def log_generation(head: bytes) -> int | None:
    """The generation of a log whose first bytes are ``head`` (None: no header)."""
    if len(head) >= HEADER.size:
        magic, generation = HEADER.unpack_from(head)
        if magic == MAGIC:
            return generation
    return None


def read_log(data: bytes, whole: bool) -> list[int]:
    """The hashes of log bytes (``whole``: from the log's start, whose header is skipped);
    ValueError naming the fault when they are not whole 8-byte hashes."""
    if whole and log_generation(data) is not None:
        data = data[HEADER.size:]
    if len(data) % 8:
        raise ValueError(f"host mask log of {len(data)} bytes is not a whole number of "
                         "8-byte hashes")
    return hashes_of(data).tolist()

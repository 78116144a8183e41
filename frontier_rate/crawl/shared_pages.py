"""Each page's detection memory and each host's masks in Redis, shared by every process of a
frontier (``FRONTIER_RATE_SHARED_PAGE_MEMORY``).

The ``"content"`` detection decides "unchanged" by comparing a copy with the page's last
copy (``crawl/page_memory.py``). A process keeps that memory for the pages it fetched; a
revisit leased to another process, or to the same crawl after a restart, found none and
compared without it: on real HTML, unchanged revisits called changed went from 1.8% with
one process to 17.6% with two and 27.7% with four (docs/CHANGE_DETECTION.md). Here the
memory is one Redis string per page, read before the page's answer is detected and written
after it, by the process that detects it (the detection process, or the crawl's own). A
page is leased to one process at a time and its answer is detected before its observation
is sent, so the next lease of the page reads the copy this one wrote.

Key: ``fr:{ns:s}:pm:<page id>`` (the page's shard ``s``: a Cluster spreads them as it does
the pages), a string of ``~8 x (segments + gone)`` bytes (~2.3 KiB for a page of 270
segments; ~2.4 KB with Redis's own overhead), expiring ``TTL_INTERVALS`` x ``max_interval``
(at least a day) after its last fetch: each fetch writes it (or, when the copy's bytes are
the last one's, only moves its expiry), so only the pages that left the crawl expire. A
Redis error costs the shared memory of some answers, never an answer: the process's own
memory is used (``BACKOFF``), one WARNING.

The masks a process learns of a host (boilerplate, volatile blocks) go to the host's log
``fr:{ns:s}:hm:<host id>`` in the same shard (``crawl/host_mask.py``): read from where the
process last read, in the round trip that reads the page's memory, and appended to in the
one that writes it, so sharing them costs no round trip of its own. Without them a process
that learned nothing yet of a host called changed 0.1-0.9 point more unchanged revisits
(docs/CHANGE_DETECTION.md).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from frontier_rate.crawl.host_mask import (
    COMPACT_AFTER,
    HEADER,
    HostMask,
    host_of,
    log_generation,
    new_generation,
    read_log,
    write_log,
)
from frontier_rate.crawl.page_memory import PageMemory, pack, unpack
from frontier_rate.engine.validation import parse_url
from frontier_rate.store.connection import connect, describe_error
from frontier_rate.store.keys import Keys, page_id, shard_of

logger = logging.getLogger(__name__)

TTL_INTERVALS = 3
"""A page's memory lives this many ``max_interval`` after its last fetch ..."""
MIN_TTL = 86400.0
"""... and at least this many seconds (a crawl restarted within a day keeps every memory
whatever its ``max_interval``)."""
TIMEOUT = 0.2
"""Seconds one read or write of a memory may block (an answer waits for it; with the
detection in the crawl's process, the event loop too: within its 0.25 s lag bound)."""
BACKOFF = 5.0
"""Seconds without trying Redis after a failed call: a Redis that does not answer costs one
``TIMEOUT``, not one per answer."""
ENVIRONMENT = "FRONTIER_RATE_SHARED_PAGE_MEMORY"
"""The environment variable that tells the detection process where the memories are (JSON
of ``spec``; the setting's name, as the child's copy of it): never its argv, which ``ps``
shows to every user (the URL may hold a password)."""


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
        self._client = client
        self._url = url  # only to scrub its password from what is logged
        self._keys = Keys(namespace, shards)
        self._ttl_ms = int(max(MIN_TTL, ttl) * 1000)
        self.failures = 0  # Redis calls that failed (the process's own memory was used)
        self._retry_at = 0.0
        self.unreadable = 0  # stored memories that did not unpack (another version, damaged)

    @classmethod
    def from_spec(cls, text: str) -> SharedPages:
        """The ``SharedPages`` of a ``spec``, on a client of its own (``TIMEOUT``)."""
        values = json.loads(text)
        return cls(connect(values["url"], timeout=TIMEOUT), values["namespace"],
                   int(values["shards"]), float(values["ttl"]), values["url"])

    def key(self, url: str) -> str:
        """The page's memory key, in its shard (the host as the frontier reads it)."""
        return self._key_pair(url)[0]

    def mask_key(self, url: str) -> str:
        """The key of the masks of the page's host (``crawl/host_mask.py``), in its shard."""
        return self._key_pair(url)[1]

    def _key_pair(self, url: str) -> tuple[str, str]:
        """The page's memory key and its host's mask key, both in the page's shard."""
        try:
            host = parse_url(url)
        except ValueError:  # a URL the frontier would refuse: still one key per URL
            host = ""
        shard = shard_of(host, self._keys.shards)
        return (self._keys.page_memory(shard, page_id(url)),
                self._keys.host_mask(shard, host_of(url)))

    def load(self, url: str, host: HostMask | None = None) -> PageMemory | None:
        """The memory of the page's last copy, or None (none stored, unreadable, Redis
        failed); with ``host``, the page's host's mask first learns what the other
        processes wrote of it since it last read (one round trip for both)."""
        page_key, mask_key = self._key_pair(url)
        if host is None or host.events is None:
            data = self._call(self._client.get, page_key)
        else:
            pipe = self._client.pipeline(transaction=False)
            pipe.get(page_key)
            pipe.getrange(mask_key, 0, HEADER.size - 1)
            pipe.getrange(mask_key, host.offset, -1)
            replies = self._call(pipe.execute)
            if replies is None:
                return None
            data, head, tail = replies
            self._fold(url, mask_key, host, head, tail)
        if data is None:
            return None
        try:
            return unpack(data)
        except ValueError as exc:
            self._unreadable(f"the shared memory of {url}", exc)
            return None

    def save(self, url: str, memory: PageMemory, host: HostMask | None = None) -> None:
        """Store ``memory`` as the page's last copy (expiring, module docstring), and what
        this process learned of its host."""
        page_key, mask_key = self._key_pair(url)
        pipe = self._client.pipeline(transaction=False)
        pipe.set(page_key, pack(memory), px=self._ttl_ms)
        self._write_mask(pipe, mask_key, host)

    def touch(self, url: str, host: HostMask | None = None) -> None:
        """The page's stored copy stands (its bytes came again): only its expiry moves (and
        its host's, with what this process learned of the host and has not written)."""
        page_key, mask_key = self._key_pair(url)
        pipe = self._client.pipeline(transaction=False)
        pipe.pexpire(page_key, self._ttl_ms)
        self._write_mask(pipe, mask_key, host)

    def note(self, url: str, record: bytes) -> None:
        """Store ``record`` as the page's last detection (crawl/detection_record.py, what
        ``inspect`` shows), expiring as its memory does."""
        try:
            host = parse_url(url)
        except ValueError:
            host = ""
        key = self._keys.last_detection(shard_of(host, self._keys.shards), page_id(url))
        self._call(self._client.set, key, record, px=self._ttl_ms)

    def _fold(self, url: str, key: str, host: HostMask, head: bytes, tail: bytes) -> None:
        """Mask in ``host`` the hashes of the log read from its offset (``tail``); the log's
        header (``head``) says whether it was written afresh since (then it is read whole)."""
        generation = log_generation(head)
        if generation != host.generation:
            if host.offset > 0:  # another process compacted the log: read it from its start
                tail = self._call(self._client.get, key) or b""
            host.generation, host.offset = generation, 0
        try:
            hashes = read_log(tail, whole=host.offset == 0)
        except ValueError as exc:
            self._unreadable(f"the shared mask of the host of {url}", exc)
            host.compact = True  # this process's masks replace it at its next write
            return
        host.offset += len(tail)
        host.fold(hashes)
        if host.offset > HEADER.size + 8 * max(COMPACT_AFTER, 2 * len(host.masked)):
            host.compact = True  # (a log no shorter than the masks it would be replaced by)

    def _write_mask(self, pipe: Any, key: str, host: HostMask | None) -> None:
        """Run ``pipe`` (the page memory's command queued) with the writes of ``host``'s
        events, or of its whole state when it is to be compacted; the events are dropped once
        written. The log's offset moves past them when nothing else was written between."""
        events = host.events if host is not None else None
        if events is None:
            self._call(pipe.execute)
            return
        count = len(events)
        if host.compact:
            generation = new_generation()
            data = write_log(host.state(), generation)
            pipe.set(key, data, px=self._ttl_ms)
            if self._call(pipe.execute) is not None:
                host.generation, host.offset, host.compact = generation, len(data), False
                del events[:count]
            return
        if not events:
            pipe.pexpire(key, self._ttl_ms)
            self._call(pipe.execute)
            return
        generation = new_generation()
        data = write_log(events)
        pipe.set(key, write_log((), generation), nx=True, px=self._ttl_ms)
        pipe.append(key, data)
        pipe.pexpire(key, self._ttl_ms)
        replies = self._call(pipe.execute)
        if replies is None:
            return  # kept for the next write (at most PENDING_LIMIT: HostMask)
        del events[:count]
        created, length = replies[-3], replies[-2]  # SET NX, APPEND (then PEXPIRE)
        if created:  # a new log: this header, these events and any appended since
            host.generation = generation
            host.offset = length if length == HEADER.size + len(data) else 0
        elif length == host.offset + len(data):  # nothing else written since it last read
            host.offset = length

    def _unreadable(self, what: str, exc: ValueError) -> None:
        self.unreadable += 1
        if self.unreadable == 1:
            logger.warning("frontier-rate: %s is unreadable (%s); its answer is compared "
                           "without it", what, exc)

    def _call(self, command: Any, *args: Any, **options: Any) -> Any:
        """One Redis call; None, and the process's own memory for ``BACKOFF`` s, when it
        fails (or failed less than ``BACKOFF`` s ago)."""
        if time.monotonic() < self._retry_at:
            return None
        try:
            return command(*args, **options)
        except Exception as exc:  # redis.RedisError, OSError: this answer goes on without
            self._failed(exc)
            return None

    def _failed(self, exc: Exception) -> None:
        self.failures += 1
        self._retry_at = time.monotonic() + BACKOFF
        if self.failures == 1:
            logger.warning("frontier-rate: the pages' shared detection memory cannot be read "
                           "or written (%s); detecting with this process's own memory until "
                           "Redis answers", describe_error(exc, self._url))


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
                        "and each host's learned masks in Redis for every process (~2.4 KB a "
                        "page; docs/CHANGE_DETECTION.md)")
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

"""The ``"content"`` detection's memory in Redis: its keys and its calls, beside every other
key of a namespace (``store/keys.py``).

Two kinds of key, both in the page's shard (a Cluster spreads them as it does the pages):

- ``Keys.page_memories`` ``fr:{ns:s}:pm``, a hash: page id (8 bytes) -> the page's packed
  memory (``detection/page_memory.py``, at most 75 bytes). One hash a shard rather than one string a
  page: a string costs ~100 bytes of key and Redis overhead on top of its value, a hash
  field ~50. Its expiry moves with every write, so the memories live while the shard is
  crawled (at least ``ttl``); a page that left the crawl keeps its field until then.
- ``Keys.host_mask`` ``fr:{ns:s}:hm:<host id>``, a string: the host's log of masks
  (``detection/host_mask.py``), written whole, expiring ``ttl`` after its last write.

- ``Keys.last_detections`` ``fr:{ns:s}:ld``, a stream: the shard's last ``DETECTIONS_KEPT``
  (about: Redis trims whole nodes) detections, each a page id and its record
  (``detection/detection_record.py``), what ``frontier-rate inspect`` shows. A capped log rather
  than a record a page: what it costs is bounded per namespace (16 shards x 64 records of
  ~250 bytes), not paid by every page; a page not among its shard's recent detections says
  so.

``Keys.page_memory`` (one string a page) is the earlier layout: a read deletes the page's
old string (``UNLINK``, in the same round trip) and says whether there was one, so that the
caller can say once that old memories are re-learned. Every call raises what redis-py
raises; the caller decides what an outage costs (``client/outage.Breaker``).
"""

from __future__ import annotations

from typing import Any

from frontier_rate.store.keys import Keys, page_id, shard_of

DETECTIONS_KEPT = 64
"""Detections kept a shard for ``inspect`` (``Keys.last_detections``)."""


def last_detection(client: Any, keys: Keys, url: str, host: str) -> bytes | None:
    """The record of the page's last detection among its shard's kept ones, or None."""
    pid = page_id(url)
    entries = client.xrevrange(keys.last_detections(shard_of(host, keys.shards)),
                               count=2 * DETECTIONS_KEPT)
    for _, fields in entries:
        if fields.get(b"page") == pid:
            return fields.get(b"record")
    return None


class DetectionMemoryStore:
    """Reads and writes of the pages' memories and the hosts' mask logs of one namespace."""

    def __init__(self, client: Any, namespace: str, shards: int, ttl_ms: int) -> None:
        self.client = client
        self.keys = Keys(namespace, shards)
        self.ttl_ms = ttl_ms

    def place(self, url: str, host: str, mask_host: str) -> tuple[int, bytes, str]:
        """The page's shard (that of ``host``, as the frontier places it), its id and its
        host's log key (``mask_host``: the authority the masks are kept for)."""
        shard = shard_of(host, self.keys.shards)
        return shard, page_id(url), self.keys.host_mask(shard, mask_host)

    def read(self, shard: int, pid: bytes, log: str | None = None, offset: int = 0,
             head: int = 0) -> tuple[bytes | None, bool, bytes, bytes]:
        """The page's packed memory (None: none), whether an old-layout memory of it was
        there (now deleted), and with ``log`` its first ``head`` bytes and those from
        ``offset`` on: one round trip."""
        pipe = self.client.pipeline(transaction=False)
        pipe.hget(self.keys.page_memories(shard), pid)
        pipe.unlink(self.keys.page_memory(shard, pid))
        if log is not None:
            pipe.getrange(log, 0, head - 1)
            pipe.getrange(log, offset, -1)
        replies = pipe.execute()
        if log is None:
            return replies[0], bool(replies[1]), b"", b""
        return replies[0], bool(replies[1]), replies[2], replies[3]

    def read_log(self, log: str) -> bytes:
        """A host's whole log (b"" when there is none)."""
        return self.client.get(log) or b""

    def write(self, shard: int, pid: bytes, memory: bytes | None, log: str | None = None,
              replace: bytes | None = None) -> list[Any]:
        """Store the page's packed ``memory`` (None: only keep it), and with ``log``: write
        it afresh as ``replace``, or only keep it. Returns the replies of the log's SET or
        PEXPIRE."""
        pipe = self.client.pipeline(transaction=False)
        memories = self.keys.page_memories(shard)
        if memory is not None:
            pipe.hset(memories, pid, memory)
        pipe.pexpire(memories, self.ttl_ms)
        if log is not None:
            if replace is not None:
                pipe.set(log, replace, px=self.ttl_ms)
            else:
                pipe.pexpire(log, self.ttl_ms)
        replies = pipe.execute()
        return replies[2 if memory is not None else 1:]

    def note(self, shard: int, pid: bytes, record: bytes) -> None:
        """Append the page's last detection to its shard's capped log (one round trip)."""
        key = self.keys.last_detections(shard)
        pipe = self.client.pipeline(transaction=False)
        pipe.xadd(key, {b"page": pid, b"record": record}, maxlen=DETECTIONS_KEPT,
                  approximate=True)
        pipe.pexpire(key, self.ttl_ms)
        pipe.execute()

"""The Redis key schema: the keys of a namespace and of its shards, named once (``Keys``),
and the ids that place a page in it (page id, shard, bucket); every key of a namespace is
named here (tests/test_layers.py fails on an ``fr:{`` key built anywhere else).
``store.contract`` declares the names Lua shares; ``store.scripts`` runs the scripts over
these keys.

Layout (``ns`` = namespace, ``s`` = shard = hash(host) mod ``shards``, ``b`` =
bucket of a page id within its shard):

====================================  =====  ==============================================
key                                   type   content
====================================  =====  ==============================================
``fr:{ns}:cfg``                       hash   shards, buckets, estimator, objective, prior_rate,
                                             policy cell layout (fixed at creation)
``fr:{ns}:tokens``                    hash   the shared token bucket (tokens, ts)
``fr:{ns}:nu``                        hash   threshold ν, solved_at, budget, planned_rate, pages
``fr:{ns}:send``                      hash   host -> "<time>,<delay>" of its last send (the
                                             shared send slot, lua/send_slot.lua)
``fr:{ns}:senders``                   zset   process id -> when it last took a send slot
``fr:{ns}:origin``                    hash   project, spider, folder that created the namespace
``fr:{ns}:due``                       hash   per shard s: "<s>" -> earliest time (µs) the shard
                                             may have work (ready host or lease deadline,
                                             "inf": none), "v<s>" -> its version (lua/due.lua)
``fr:{ns:s}:ready``                   zset   host -> time the host may dispatch next (µs)
``fr:{ns:s}:hosts``                   hash   host -> packed (next_allowed, delay)
``fr:{ns:s}:leases``                  zset   page id + host -> lease deadline (µs)
``fr:{ns:s}:agg``                     hash   per policy cell c: n:c, l:c (Σλ), w:c (Σw)
``fr:{ns:s}:cnt``                     hash   pages, gone, fetches, changes, quarantined,
                                             dated_changes, date_hosts_ignored, claims,
                                             signal_sources_ignored; bl, bs: the
                                             bucket layout's level and split pointer; hi: 1
                                             once the host page index is kept
``fr:{ns:s}:cursor``                  str    background refresh cursor (bucket number)
``fr:{ns:s}:hr``                      hash   host -> packed (pages, Σ log rate): the host's
                                             pooled prior (pages with an observed interval)
``fr:{ns:s}:ha``                      hash   "<cell>:<host>" -> packed (pages, Σλ, Σw): each
                                             host's own policy cells, to cap it in the solve
``fr:{ns:s}:hnu``                     hash   host -> τ_h, for hosts whose cap binds: their
                                             pages plan with max(ν, τ_h)
``fr:{ns:s}:hp``                      zset   host -> its pages (the host page index, kept
                                             once lua/host_index.lua built it: cnt "hi")
``fr:{ns:s}:hs``                      zset   host -> pages x its own delay (> 0): the re-solve
                                             reads only hosts whose sweep may pass their cap
``fr:{ns:s}:lm``                      hash   host -> packed (dates checked, dates that
                                             disagreed with the content): whether its
                                             Last-Modified dates are believed
``fr:{ns:s}:sg``                      hash   page id -> the latest claim of a sitemap, feed or
                                             push about the page, and the window of its last
                                             change seen by a fetch (lua/signals.lua)
``fr:{ns:s}:st``                      hash   "<host>|<source>" -> packed (claims checked,
                                             claims contradicted): whether the source is
                                             believed for the host (``evidence``)
``fr:{ns:s}:cc``                      hash   host -> packed (event lo, event hi, checks, hits,
                                             expected): whether its pages change together
                                             (``math.cochange``, issue 62)
``fr:{ns:s}:q:<host>``                zset   page id -> due time (µs)
``fr:{ns:s}:s:<b>``                   hash   page id -> packed state (48/64 bytes, ``wire.STATE``)
``fr:{ns:s}:u:<b>``                   hash   page id -> URL
``fr:{ns:s}:x:<b>``                   hash   page id -> etag, last_modified, meta JSON
``fr:{ns:s}:m:<b>``                   hash   page id -> packed change pattern (56 bytes), only
                                             for pages with dated changes (``pattern``)
``fr:{ns:s}:bad``                     hash   page id -> quarantine record (host, reason, raw
                                             corrupt value; ``wire.unpack_quarantine``)
``fr:{ns:s}:pm``                      hash   page id -> a sketch of the page's last copy as
                                             the ``"content"`` detection compares with it
                                             (``FRONTIER_RATE_SHARED_PAGE_MEMORY``;
                                             store/detection_memory.py), expiring
``fr:{ns:s}:pm:<page id>``            str    the same in the earlier layout: deleted when
                                             read
``fr:{ns:s}:hm:<host id>``            str    what the ``"content"`` detection learned of a
                                             host's boilerplate, a log of coded 21-bit words
                                             (with the setting above; detection/host_mask.py),
                                             expiring
``fr:{ns:s}:ld:<page id>``            str    the page's last detection, a JSON object of
                                             counts and the rule applied (< 400 bytes, with
                                             the setting above; ``inspect`` shows it;
                                             detection/detection_record.py), expiring
====================================  =====  ==============================================

A page id is the first 8 bytes of BLAKE2b(URL). Pages live in bucketed small
hashes so that each hash keeps Redis's compact (listpack/ziplist) encoding.
The buckets grow online by linear hashing (``Layout``, lua/lib_pages.lua ``grow``):
when a shard holds more than 48 pages per bucket, ``add`` splits the next
bucket in turn, moving about half its pages to bucket ``b + buckets*2^level``
inside the same atomic script, so lookups and memory per page stay flat from
10^3 to 10^7+ pages; a namespace stored before the layout grew reads as level 0,
split 0 (its old fixed layout) and starts growing with its next adds;
every key of a shard carries the hash tag ``{ns:s}``, so each script touches
one Redis Cluster slot. Scripts get the five fixed shard keys in KEYS and
derive the bucket and host-queue keys from the same prefix (same tag, same
slot); all data comes in ARGV. Nothing is pickled: states are ``struct``
packed numbers and meta is JSON text.

Corrupt data: every script validates a state before using it (``validate``
in lua/lib.lua, the same checks as ``wire.unpack_state``). A page whose
state, URL or extras cannot be used is quarantined: it leaves its host queue
and the lease set, its raw value moves to ``bad``, ``cnt`` moves it from
``pages`` to ``quarantined``, and the rest of the batch goes on. Adding the
URL again gives it a fresh state.
"""

from __future__ import annotations

import hashlib
import re
import struct
from dataclasses import dataclass

NAMESPACE_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def page_id(url: str) -> bytes:
    """8-byte page id: BLAKE2b of the URL (collisions: ~N²/2^65, negligible below 10^8)."""
    return hashlib.blake2b(url.encode("utf-8"), digest_size=8).digest()


def digest(text: str | bytes) -> bytes:
    """4-byte digest of a content fingerprint, as stored with the page.

    Two different fingerprints collide (a change goes unseen) with
    probability 2^-32 per fetch, far below any estimator's noise.
    """
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    return hashlib.blake2b(data, digest_size=4, person=b"fingerpr").digest()


def float32(value: float) -> float:
    """``value`` rounded to the float32 the page state stores (weights, p)."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


def shard_of(host: str, shards: int) -> int:
    """Shard of a host: BLAKE2b(host) mod shards (all pages of a host share a shard)."""
    h = hashlib.blake2b(host.encode("utf-8"), digest_size=4).digest()
    return int.from_bytes(h, "big") % shards


def bucket_of(pid: bytes, buckets: int, level: int = 0, split: int = 0) -> int:
    """Bucket of a page id within its shard, whose layout has grown to ``level`` and
    ``split`` (linear hashing; lua/lib.lua computes the same, see ``Layout``)."""
    h = int.from_bytes(pid[:4], "big")
    nb = buckets << level
    b = h % nb
    return h % (2 * nb) if b < split else b


@dataclass(frozen=True)
class Layout:
    """A shard's bucket layout: ``buckets`` (the namespace's base count) x 2^``level``
    buckets, the first ``split`` of which are split in two (lua/lib_pages.lua ``grow``)."""

    buckets: int
    level: int = 0
    split: int = 0

    @classmethod
    def read(cls, buckets: int, raw: list) -> Layout:
        """The layout from HMGET <prefix>cnt bl bs (absent: the fixed layout of old data)."""
        level, split = (int(x) if x is not None and x.isdigit() else 0 for x in raw)
        if not (0 <= level <= 24 and 0 <= split < buckets << level):
            level, split = 0, 0
        return cls(buckets, level, split)

    @property
    def count(self) -> int:
        return (self.buckets << self.level) + self.split

    def bucket(self, pid: bytes) -> int:
        return bucket_of(pid, self.buckets, self.level, self.split)


@dataclass(frozen=True)
class Keys:
    """Key names of one namespace."""

    namespace: str
    shards: int

    @property
    def cfg(self) -> str:
        return f"fr:{{{self.namespace}}}:cfg"

    @property
    def tokens(self) -> str:
        return f"fr:{{{self.namespace}}}:tokens"

    @property
    def nu(self) -> str:
        return f"fr:{{{self.namespace}}}:nu"

    @property
    def due(self) -> str:
        return f"fr:{{{self.namespace}}}:due"

    @property
    def send(self) -> str:
        """hash host -> its last shared send ("<time>,<delay>", Redis's clock; lua/send_slot.lua)."""
        return f"fr:{{{self.namespace}}}:send"

    @property
    def senders(self) -> str:
        """zset process id ("<ms it joined>/<host>:<pid>:<random>") -> when it last took a send
        slot (lua/send_slot.lua)."""
        return f"fr:{{{self.namespace}}}:senders"

    @property
    def patterns(self) -> tuple[str, str]:
        """The two glob patterns every key of the namespace matches: its own keys and its
        shards' (for SCAN, and what an ACL rule must cover)."""
        return f"fr:{{{self.namespace}}}:*", f"fr:{{{self.namespace}:*"

    @property
    def origin(self) -> str:
        """hash: the project, spider and script folder that created the namespace."""
        return f"fr:{{{self.namespace}}}:origin"

    def prefix(self, shard: int) -> str:
        return f"fr:{{{self.namespace}:{shard}}}:"

    def shard_keys(self, shard: int) -> list[str]:
        """KEYS of every shard script (order fixed by lua/lib.lua)."""
        p = self.prefix(shard)
        return [p + "ready", p + "hosts", p + "leases", p + "agg", p + "cnt"]

    def ready(self, shard: int) -> str:
        """zset host -> when it may dispatch next (µs)."""
        return f"{self.prefix(shard)}ready"

    def hosts(self, shard: int) -> str:
        """hash host -> packed (next dispatch, own delay) (``wire.HOST_RECORD``)."""
        return f"{self.prefix(shard)}hosts"

    def leases(self, shard: int) -> str:
        """zset page id + host -> lease deadline (µs)."""
        return f"{self.prefix(shard)}leases"

    def agg(self, shard: int) -> str:
        """hash of the policy cells: n:c, l:c (Σλ), w:c (Σw)."""
        return f"{self.prefix(shard)}agg"

    def cnt(self, shard: int) -> str:
        """hash of the shard's counters, bucket layout (bl, bs), marker (id), index flag (hi)."""
        return f"{self.prefix(shard)}cnt"

    def host_prior(self, shard: int) -> str:
        """hash host -> packed pooled prior (``contract.STRUCTS`` HOST_POOL; lua/lib_hosts.lua)."""
        return f"{self.prefix(shard)}hr"

    def dates(self, shard: int) -> str:
        """hash host -> packed Last-Modified checks (``contract.STRUCTS`` DATE_TALLY)."""
        return f"{self.prefix(shard)}lm"

    def probe(self, shard: int) -> str:
        """The write probe of lua/lib_pages.lua ``lib.start``: SETRANGE of "", never created."""
        return f"{self.prefix(shard)}probe"

    def host_agg(self, shard: int) -> str:
        return f"{self.prefix(shard)}ha"

    def host_nu(self, shard: int) -> str:
        return f"{self.prefix(shard)}hnu"

    def host_pages(self, shard: int) -> str:
        return f"{self.prefix(shard)}hp"

    def host_sweep(self, shard: int) -> str:
        return f"{self.prefix(shard)}hs"

    def signal_pages(self, shard: int) -> str:
        """hash page id -> its latest claim (lua/signals.lua)."""
        return f"{self.prefix(shard)}sg"

    def signal_trust(self, shard: int) -> str:
        """hash host|source -> packed tally of its claims (``wire.SIGNAL_TALLY``)."""
        return f"{self.prefix(shard)}st"

    def cochange(self, shard: int) -> str:
        """host -> its co-change record (``contract.STRUCTS`` COCHANGE; math/cochange.py)."""
        return f"{self.prefix(shard)}cc"

    def state(self, shard: int, bucket: int) -> str:
        return f"{self.prefix(shard)}s:{bucket}"

    def url(self, shard: int, bucket: int) -> str:
        return f"{self.prefix(shard)}u:{bucket}"

    def extras(self, shard: int, bucket: int) -> str:
        return f"{self.prefix(shard)}x:{bucket}"

    def pattern(self, shard: int, bucket: int) -> str:
        return f"{self.prefix(shard)}m:{bucket}"

    def queue(self, shard: int, host: str) -> str:
        return f"{self.prefix(shard)}q:{host}"

    def group_pages(self, shard: int, group: str) -> str:
        """zset page id -> last fetch (µs; 0: never): a URL group's pages, ``group`` its host
        and path template, kept only with co-change on (lua/signals.lua)."""
        return f"{self.prefix(shard)}cg:{group}"

    def cursor(self, shard: int) -> str:
        return f"{self.prefix(shard)}cursor"

    def bad(self, shard: int) -> str:
        return f"{self.prefix(shard)}bad"

    def page_memories(self, shard: int) -> str:
        """hash page id -> its detection memory (store/detection_memory.py), expiring."""
        return f"{self.prefix(shard)}pm"

    def page_memory(self, shard: int, pid: bytes) -> str:
        """str: one page's detection memory in the earlier layout, deleted when read
        (store/detection_memory.py)."""
        return f"{self.prefix(shard)}pm:{pid.hex()}"

    def last_detections(self, shard: int) -> str:
        """stream: the shard's last detections (detection/detection_record.py), each a page id
        and its record, capped (store/detection_memory.py ``DETECTIONS_KEPT``), expiring."""
        return f"{self.prefix(shard)}ld"

    def host_mask(self, shard: int, host: str) -> str:
        """str: one host's learned boilerplate as a log of events (detection/host_mask.py),
        expiring; named by the BLAKE2b of the host, as a page by that of its URL."""
        return f"{self.prefix(shard)}hm:{page_id(host).hex()}"

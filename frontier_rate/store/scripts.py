"""The Redis key schema and the Lua scripts that read and write it.

Layout (``ns`` = namespace, ``s`` = shard = hash(host) mod ``shards``, ``b`` =
bucket of a page id within its shard):

====================================  =====  ==============================================
key                                   type   content
====================================  =====  ==============================================
``fr:{ns}:cfg``                       hash   shards, buckets, estimator, objective, prior_rate,
                                             policy cell layout (fixed at creation)
``fr:{ns}:tokens``                    hash   the shared token bucket (tokens, ts)
``fr:{ns}:nu``                        hash   threshold ν, solved_at, budget, planned_rate
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
``fr:{ns:s}:q:<host>``                zset   page id -> due time (µs)
``fr:{ns:s}:s:<b>``                   hash   page id -> packed state (48/64 bytes, ``wire.STATE``)
``fr:{ns:s}:u:<b>``                   hash   page id -> URL
``fr:{ns:s}:x:<b>``                   hash   page id -> etag, last_modified, meta JSON
``fr:{ns:s}:m:<b>``                   hash   page id -> packed change pattern (56 bytes), only
                                             for pages with dated changes (``pattern``)
``fr:{ns:s}:bad``                     hash   page id -> quarantine record (host, reason, raw
                                             corrupt value; ``wire.unpack_quarantine``)
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
import logging
import re
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import redis
from redis.cluster import RedisCluster

from frontier_rate.store import scripting

logger = logging.getLogger(__name__)

NAMESPACE_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
SHARD_SCRIPTS = scripting.SHARD_SCRIPTS
SIGNAL_SCRIPTS = scripting.SIGNAL_SCRIPTS
"""Shard scripts that also get lua/signals.lua (claims of sitemaps, feeds, pushes)."""
READ_ONLY_SCRIPTS = scripting.READ_ONLY_SCRIPTS
"""Shard scripts that never write: they run on a read-only replica and under maxmemory."""
HINT_SCRIPTS = ("due",)
"""Scripts whose failure leaves the call applied: the due summary only tells which shards to
ask first, and every shard is asked at least once a second anyway (lua/due.lua)."""
STREAM_WINDOW = 64
"""Script calls ``Scripts.stream`` keeps in flight before it reads a reply."""


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

    def cursor(self, shard: int) -> str:
        return f"{self.prefix(shard)}cursor"

    def bad(self, shard: int) -> str:
        return f"{self.prefix(shard)}bad"


class Scripts:
    """The Lua scripts, loaded on one client and called by name: FCALL of one Redis Functions
    library on Redis >= 7, EVALSHA elsewhere (``frontier_rate/store/scripting.py`` builds both).

    ``mode`` "auto" (the default) takes Functions when every primary runs Redis >= 7 and
    accepts FUNCTION LOAD, else EVALSHA; "functions" or "eval" forces one (ValueError for
    another word). The library is loaded once per primary (on a Cluster, on each) under a
    name holding the hash of its text, so a library already there is kept. When the server
    has lost the scripts or the library (restart without persistence, failover to a
    replica that never got them, SCRIPT FLUSH, FUNCTION FLUSH), ``run`` and ``stream``
    load them again and rebuild the call. Plain EVALSHA / FCALL in a pipeline avoids the
    SCRIPT EXISTS round trip redis-py's ``Script`` adds to every pipeline.
    """

    MODES = ("auto", "functions", "eval")

    def __init__(self, client: redis.Redis, mode: str = "auto") -> None:
        if mode not in self.MODES:
            raise ValueError(f"script mode {mode!r} is not one of {self.MODES}")
        self.client = client
        self.cluster = isinstance(client, RedisCluster)
        self.source = {name: scripting.eval_source(name)
                       for name in SHARD_SCRIPTS + scripting.STANDALONE}
        self.sha = {name: hashlib.sha1(text.encode("utf-8")).hexdigest()
                    for name, text in self.source.items()}
        self.library: scripting.FunctionLibrary | None = None
        self._queued: list[tuple[int, str]] | None = None
        self.functions = mode == "functions" or (mode == "auto" and self._functions_available())
        if self.functions:
            self.library = scripting.FunctionLibrary()
            try:
                self.load()
                return
            except redis.exceptions.ResponseError as exc:  # e.g. an ACL without FUNCTION
                if mode == "functions":
                    raise
                logger.info("Redis refused FUNCTION LOAD (%s); the scripts run by EVALSHA", exc)
                self.functions, self.library = False, None
        self.load()

    def _primaries(self) -> list[redis.Redis]:
        if self.cluster:
            return [node.redis_connection for node in self.client.get_primaries()]
        return [self.client]

    def _functions_available(self) -> bool:
        """Whether every primary runs Redis >= 7 (Functions); an ACL that forbids INFO or
        FUNCTION reads as no."""
        try:
            for node in self._primaries():
                version = str(node.info("server").get("redis_version", "0"))
                if int(version.split(".", 1)[0]) < 7:
                    return False
        except (redis.exceptions.ResponseError, ValueError):
            return False
        return True

    def load(self) -> None:
        """Load the scripts (or the library) on every primary."""
        for node in self._primaries():
            if self.library is not None:
                try:
                    node.function_load(self.library.code)
                except redis.exceptions.ResponseError as exc:
                    if "already exists" not in str(exc) and not self._loaded_on(node):
                        raise
            else:
                for text in self.source.values():
                    node.script_load(text)

    def _loaded_on(self, node: redis.Redis) -> bool:
        """Whether ``node`` holds this library already (loaded by a user allowed FUNCTION LOAD,
        for one who may only list and call functions: docs/SECURITY.md)."""
        try:
            return bool(node.function_list(library=self.library.name))
        except redis.exceptions.ResponseError:
            return False

    def command(self, name: str) -> tuple[str, str]:
        """(the command, its first argument) that calls script ``name``."""
        if self.library is not None:
            return "FCALL", self.library.function[name]
        return "EVALSHA", self.sha[name]

    def call(self, target: Any, name: str, keys: list[str], args: list) -> Any:
        """Queue (on a pipeline) or run (on a client) one script."""
        if self._queued is not None and target is not self.client:
            self._queued.append((len(target), name))  # its place in the pipeline (``run``)
        if self.library is not None:
            return target.fcall(self.library.function[name], len(keys), *keys, *args)
        return target.evalsha(self.sha[name], len(keys), *keys, *args)

    def stream(self, commands: Iterable[tuple[str, list[str], list]],
               on_reply: Callable[[int, Any], None] | None = None) -> list:
        """Run scripts one after another on one connection, sending while the server works.

        ``commands`` yields (script name, keys, args) and may be a generator:
        each command is sent as soon as it is produced, so packing the next
        one overlaps with the server running the previous. Replies come back
        in order; ``on_reply(i, reply)``, if given, is called for each reply
        that is not an error as soon as it is read, so unpacking it overlaps
        with the server running the later ones. Redis Cluster clients fall
        back to one pipeline.
        """
        if self.cluster:
            commands = list(commands)
            replies = self.run(lambda pipe: [self.call(pipe, *c) for c in commands])
            if on_reply is not None:
                for i, reply in enumerate(replies):
                    on_reply(i, reply)
            return replies
        pool = self.client.connection_pool
        conn = pool.get_connection()
        replies: list = []
        names: list[str] = []

        def read_one() -> None:
            try:
                replies.append(conn.read_response())
            except redis.exceptions.ResponseError as exc:
                replies.append(exc)
                return
            if on_reply is not None:
                on_reply(len(replies) - 1, replies[-1])

        try:
            count = 0
            try:
                for name, keys, args in commands:
                    conn.send_command(*self.command(name), len(keys), *keys, *args)
                    names.append(name)
                    count += 1
                    if count - len(replies) > STREAM_WINDOW:
                        read_one()  # parse a finished reply while the server works
            finally:
                while len(replies) < count:  # always drain, so the connection stays in step
                    read_one()
        except BaseException:
            conn.disconnect()
            raise
        finally:
            pool.release(conn)
        lost = [r for r in replies if _lost_script(r)]
        if lost:
            logger.info("Redis lost the frontier scripts; loading them again")
            self.load()
            if len(lost) == len(replies):
                raise ScriptsReloaded()
        return self._checked(names, replies)

    def run(self, build: Any) -> list:
        """Execute ``build(pipeline)`` as one pipeline; reload scripts once if the server lost them.

        Every reply is read before an error is raised: the first error of a script
        call that is not a hint (``HINT_SCRIPTS``) or of a plain command, as
        ``PartlyApplied`` when other script calls of the pipeline took effect. A
        pipeline whose every script call found NOSCRIPT ran none of them (the server
        lost them all), so building it again is safe.
        """
        for attempt in (1, 2):
            self._queued = []
            try:
                if self.cluster:
                    recorder = _Recorder()
                    build(recorder)
                    replies = self._execute(recorder.calls)
                else:
                    pipe = self.client.pipeline(transaction=False)
                    build(pipe)
                    replies = pipe.execute(raise_on_error=False)
                queued = self._queued
            finally:
                self._queued = None
            if not any(isinstance(r, Exception) for r in replies):
                return replies
            names: list[str | None] = [None] * len(replies)
            for at, name in queued:
                names[at] = name
            lost = [r for r in replies if _lost_script(r)]
            if lost:
                logger.info("Redis lost the frontier scripts; loading them again")
                self.load()
                if attempt == 1 and len(lost) == len(queued):
                    continue
            return self._checked(names, replies)
        raise AssertionError("unreachable")

    def _checked(self, names: list[str | None], replies: list) -> list:
        """``replies`` when no call that matters failed (``names``: the script of each
        command, None for a plain one); else its first error, as ``PartlyApplied`` when
        other script calls took effect."""
        errors = [(i, r) for i, r in enumerate(replies) if isinstance(r, Exception)]
        if not errors:
            return replies
        for i, error in errors:
            if names[i] in HINT_SCRIPTS:
                logger.debug("the %s script failed (%s); every shard is asked within a second",
                             names[i], error)
        fatal = [error for i, error in errors if names[i] not in HINT_SCRIPTS]
        if not fatal:
            return replies
        scripts = [i for i, name in enumerate(names) if name is not None
                   and name not in HINT_SCRIPTS]
        applied = sum(not isinstance(replies[i], Exception) for i in scripts)
        if applied:
            raise PartlyApplied(fatal[0], applied, len(scripts))
        raise fatal[0]

    def _execute(self, calls: list[tuple[str, tuple, dict]]) -> list:
        """Redis Cluster: send recorded commands and return every reply, errors included,
        in order. redis-py refuses EVALSHA and FCALL in cluster pipelines, so the commands are
        grouped by the node owning their key and sent as one plain pipeline per node."""
        pipes: dict[str, Any] = {}
        placed = []
        for name, args, kwargs in calls:
            key = args[2] if name in ("evalsha", "fcall") else args[0]
            node = self.client.get_node_from_key(key)
            if node.name not in pipes:
                pipes[node.name] = node.redis_connection.pipeline(transaction=False)
            getattr(pipes[node.name], name)(*args, **kwargs)
            placed.append(node.name)
        results = {name: iter(pipe.execute(raise_on_error=False)) for name, pipe in pipes.items()}
        return [next(results[name]) for name in placed]


class _Recorder:
    """Stands in for a pipeline and records the commands queued on it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple, dict]] = []

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: self.calls.append((name, args, kwargs))

    def __len__(self) -> int:
        return len(self.calls)


class PartlyApplied(Exception):
    """A pipeline's call failed after other script calls of it took effect: ``error`` is
    the first failure, ``applied`` of ``total`` script calls were applied (each whole)."""

    def __init__(self, error: Exception, applied: int, total: int) -> None:
        super().__init__(f"{applied} of {total} script calls applied before: {error}")
        self.error, self.applied, self.total = error, applied, total


class ScriptsReloaded(Exception):
    """The server had lost the scripts and they were loaded again: nothing ran; resend."""


def _lost_script(reply: Any) -> bool:
    """Whether a reply says the server lost the scripts (NOSCRIPT) or the library of their
    functions ("Function not found": FUNCTION FLUSH, a restart, a failover)."""
    if isinstance(reply, redis.exceptions.NoScriptError):
        return True
    return (isinstance(reply, redis.exceptions.ResponseError)
            and "function not found" in str(reply).lower())


def _read(name: str) -> str:
    """The text of lua/<name>; for "lib.lua" the whole library as an EVAL script runs it
    (the contract's prelude and ``scripting.LIB_FILES``), so that Lua put after it finds
    every ``lib`` function, H and C."""
    if name == "lib.lua":
        return scripting.library_text()
    return scripting.read(name)

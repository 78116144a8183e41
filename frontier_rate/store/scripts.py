"""The script runner: loads the Lua scripts (EVALSHA or a Redis Functions library, ``store.scripting``)
and calls them over the key schema of ``store.keys``, in pipelined per-shard batches.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable
from typing import Any

import redis
from redis.cluster import RedisCluster

from frontier_rate.store import cluster_slots, scripting

logger = logging.getLogger(__name__)

ADVISORY_SCRIPTS = ("due",)
"""Scripts whose failure leaves the call applied: the due summary only tells which shards to
ask first, and every shard is asked at least once a second anyway (lua/due.lua)."""
STREAM_WINDOW = 64
"""Script calls ``Scripts.stream`` keeps in flight before it reads a reply."""
MOVED_TRIES = 3
"""Sends of a Redis Cluster call answered MOVED, each after the slot map was read again."""


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
                       for name in scripting.SHARD_SCRIPTS + scripting.STANDALONE}
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
        call that is not advisory (``ADVISORY_SCRIPTS``) or of a plain command, as
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
            if names[i] in ADVISORY_SCRIPTS:
                logger.debug("the %s script failed (%s); every shard is asked within a second",
                             names[i], error)
        fatal = [error for i, error in errors if names[i] not in ADVISORY_SCRIPTS]
        if not fatal:
            return replies
        scripts = [i for i, name in enumerate(names) if name is not None
                   and name not in ADVISORY_SCRIPTS]
        applied = sum(not isinstance(replies[i], Exception) for i in scripts)
        if applied:
            raise PartlyApplied(fatal[0], applied, len(scripts))
        raise fatal[0]

    def _execute(self, calls: list[tuple[str, tuple, dict]]) -> list:
        """Redis Cluster: send recorded commands and return every reply, errors included,
        in order. redis-py refuses EVALSHA and FCALL in cluster pipelines, so the commands are
        grouped by the node owning their key and sent as one plain pipeline per node.

        Those pipelines bypass redis-py's own handling of a moved slot, so it is done here
        (``cluster_slots.py``): a call answered MOVED (a failover or a resharding since
        the slot map was read; Redis refuses it before it runs) is sent again to the node
        now serving its slot, after the map is read again, up to ``MOVED_TRIES`` times. A
        node that cannot be reached also has the map read again before the error is
        raised, so the caller's next try goes to the replica promoted in its place."""
        replies: list = [None] * len(calls)
        pending = list(range(len(calls)))
        for _ in range(MOVED_TRIES):
            pipes: dict[str, Any] = {}
            placed = []
            for i in pending:
                name, args, kwargs = calls[i]
                key = args[2] if name in ("evalsha", "fcall") else args[0]
                node = self.client.get_node_from_key(key)
                if node.name not in pipes:
                    pipes[node.name] = node.redis_connection.pipeline(transaction=False)
                getattr(pipes[node.name], name)(*args, **kwargs)
                placed.append((i, node.name))
            try:
                results = {name: iter(pipe.execute(raise_on_error=False))
                           for name, pipe in pipes.items()}
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
                cluster_slots.read_again(self.client, after_error=True)
                raise
            for i, name in placed:
                replies[i] = next(results[name])
            pending = [i for i in pending if isinstance(replies[i], redis.exceptions.MovedError)]
            if not pending:
                break
            logger.info("Redis Cluster moved a slot (MOVED %s); reading its slots again and "
                        "sending %d call(s) there", replies[pending[0]], len(pending))
            cluster_slots.read_again(self.client)
        return replies


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

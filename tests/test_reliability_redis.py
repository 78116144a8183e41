"""Redis-side faults and security with real servers: AOF restart, AUTH, ACL, TLS.

- Restart: a frontier on a redis-server with ``--appendonly yes --appendfsync
  always`` is filled (adds, leases, observations, failures, a host delay, a
  re-solved threshold), the server is killed (SIGKILL) or shut down cleanly
  and started again on the same port and directory. The same ``Frontier``
  object goes on working (reconnect, scripts reloaded after NOSCRIPT) and
  ``stats()``, every ``page()`` and ``iter_pages()`` read exactly as before.
- AUTH (``--requirepass`` and an ACL user): the right password works; a wrong
  or missing one is a ``RedisUnavailable`` that never shows the password.
- ACL: the key patterns docs/SECURITY.md recommends confine a user to its
  namespace.
- TLS: a ``RedisProxy`` terminating TLS (certificates made here with the
  ``cryptography`` package) in front of the plain server.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import ssl
import traceback
from array import array
from pathlib import Path

import pytest
import redis
from redis_servers import RedisServer  # noqa: I001
from reliability_support.proxy import RedisProxy

from frontier_rate import Frontier
from frontier_rate.crawl.shared_pages import SharedPages, spec
from frontier_rate.detection.host_mask import HostMask, tag
from frontier_rate.detection.page_memory import PageMemory
from frontier_rate.store.connection import RedisPermissionDenied, RedisUnavailable

pytestmark = pytest.mark.reliability

PASSWORD = "pw-Zq8vX3-never-shown"


# ---------------------------------------------------------------- helpers

def cycle(f: Frontier, t0: float, rounds: int = 3) -> tuple[int, float]:
    """Lease and observe everything due for ``rounds`` steps; (fetches, clock after)."""
    t, fetched = t0, 0
    for _ in range(rounds):
        got = drain(f, t)
        results = f.observe_many([(d, {"fingerprint": f"{d.url}@{int(t) // 50}", "fetched_at": t})
                                  for d in got])
        assert all(r.accepted for r in results)
        fetched += len(got)
        t = max(t + 1.0, f.next_due_time() or t + 1.0)
    return fetched, t


def drain(f: Frontier, t: float) -> list:
    """Every page due at ``t`` (one lease per host per call, so call until none is left)."""
    got: list = []
    while more := f.next_requests(50, now=t):
        got += more
    return got


def snapshot(f: Frontier, urls: list[str], now: float) -> tuple[dict, dict, list]:
    pages = sorted(f.iter_pages(), key=lambda p: p["url"])
    return f.stats(now=now), {u: f.page(u) for u in urls}, pages


def fill(f: Frontier) -> tuple[list[str], float]:
    """A frontier in every state: observed, changed, leased (open), retrying, a host delay, ν."""
    urls = [f"http://h{i}.example/p{j}" for i in range(6) for j in range(5)]
    assert f.add_many([(u, 1.0 + i % 3, {"n": i}) for i, u in enumerate(urls)], now=0.0) == 30
    t = 0.0
    for step in range(4):
        got = drain(f, t)
        for k, d in enumerate(got):
            if step == 3 and k % 4 == 0:
                continue  # leave this lease open across the restart
            if k % 7 == 3:
                f.failed(d, "HTTP 500", status=500, now=t)
            else:
                f.observe(d, fingerprint=f"{d.url}@{step // 2}", fetched_at=t,
                          etag=f'"e{step}"', last_modified="Mon, 01 Jan 2024 00:00:00 GMT")
        t += 20.0
    f.set_host_delay("h2.example", 7.5)
    f.resolve(now=t)
    stats = f.stats(now=t)
    assert stats["fetches"] > 30 and stats["changes"] > 0 and stats["leased"] > 0
    assert any(f.page(u)["status"] == "retrying" for u in urls)
    return urls, t


# ---------------------------------------------------------------- restart with AOF

@pytest.mark.parametrize("stop", ["kill -9", "SHUTDOWN"])
def test_state_survives_redis_restart_with_aof(tmp_path, stop):
    server = RedisServer(tmp_path / "aof", args=["--appendonly", "yes", "--appendfsync", "always"])
    with server:
        f = Frontier(server.url, namespace="aof", estimator="sam", budget=100.0,
                     min_host_delay=0.0, min_interval=10.0, max_interval=1000.0,
                     lease_timeout=30.0, seed=3)
        urls, t = fill(f)
        before = snapshot(f, urls, t)
        if stop == "kill -9":
            server.kill()
        else:
            server.shutdown()
        server.start()
        admin = server.client()
        # Redis 6.2 replays SCRIPT LOAD from the AOF; Redis 7 keeps no scripts across a
        # restart. Flush them so the NOSCRIPT path runs as it would there.
        admin.script_flush()
        assert admin.script_exists(*f.scripts.sha.values()) == [False] * len(f.scripts.sha)
        admin.close()
        after = snapshot(f, urls, t)  # the same object: reconnects and reloads the scripts
        assert after == before
        fetched, _ = cycle(f, t + 50.0)
        assert fetched > 0
        assert f.stats(now=t + 50.0)["fetches"] == before[0]["fetches"] + fetched
        f.close()


def test_open_lease_taken_before_restart_is_honoured_after(tmp_path):
    """A dispatch leased before a kill -9 is observed once after the restart, and only once."""
    server = RedisServer(tmp_path / "aof", args=["--appendonly", "yes", "--appendfsync", "always"])
    with server:
        f = Frontier(server.url, namespace="lease", budget=100.0, min_host_delay=0.0,
                     min_interval=10.0, max_interval=100.0, lease_timeout=30.0, seed=1)
        f.add("http://a.example/x", now=0.0)
        (d,) = f.next_requests(5, now=0.0)
        server.kill()
        server.start()
        assert f.observe(d, fingerprint="v1", fetched_at=1.0).accepted
        replay = f.observe(d, fingerprint="v1", fetched_at=1.0)
        assert f.page(d.url)["fetches"] == 1 and f.stats(now=1.0)["fetches"] == 1
        assert replay.next_due == f.page(d.url)["next_due"]
        f.close()


# ---------------------------------------------------------------- AUTH

def _text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """A redis-server with --requirepass PASSWORD."""
    with RedisServer(tmp_path_factory.mktemp("auth"), password=PASSWORD) as server:
        yield server


def test_requirepass_right_password_works(secured):
    with Frontier(secured.url, namespace="auth-ok", min_host_delay=0.0, budget=100.0,
                  min_interval=10.0, max_interval=100.0) as f:
        f.add_many([f"http://a.example/{i}" for i in range(5)], now=0.0)
        fetched, _ = cycle(f, 0.0, rounds=1)
        assert fetched == 5


@pytest.mark.parametrize("auth", [":wrong-Pw-77@", "", "default:wrong-Pw-77@"])
def test_wrong_or_missing_password_is_redis_unavailable_without_secret(secured, auth, caplog):
    caplog.set_level(logging.DEBUG)
    url = f"redis://{auth}127.0.0.1:{secured.port}/0"
    with pytest.raises(RedisUnavailable) as info:
        Frontier(url, namespace="auth-bad")
    text = _text(info.value) + caplog.text
    assert "wrong-Pw-77" not in text and PASSWORD not in text
    assert f"127.0.0.1:{secured.port}" in str(info.value)
    assert "auth" in str(info.value).lower()  # the reason is named (AuthenticationError)


def test_acl_user_with_password_in_url(secured):
    admin = secured.client()
    admin.execute_command("ACL", "SETUSER", "crawler", "on", ">crawler-Pw-1", "~*", "+@all")
    try:
        url = f"redis://crawler:crawler-Pw-1@127.0.0.1:{secured.port}/0"
        with Frontier(url, namespace="acl-ok", min_host_delay=0.0, budget=100.0,
                      min_interval=10.0, max_interval=100.0) as f:
            f.add("http://a.example/", now=0.0)
            assert cycle(f, 0.0, rounds=1)[0] == 1
            assert f.client.acl_whoami() == "crawler"
        wrong = url.replace("crawler-Pw-1", "crawler-Pw-2")
        with pytest.raises(RedisUnavailable) as info:
            Frontier(wrong, namespace="acl-ok")
        assert "crawler-Pw-2" not in _text(info.value) and "crawler-Pw-1" not in _text(info.value)
        assert "crawler:***@" in str(info.value)
    finally:
        admin.execute_command("ACL", "DELUSER", "crawler")
        admin.close()


# ---------------------------------------------------------------- ACL confinement

def acl_rule(namespace: str) -> list[str]:
    """The per-namespace ACL rule of docs/SECURITY.md (key patterns from store.Keys)."""
    return ["on", "resetkeys", f"~fr:{{{namespace}}}:*", f"~fr:{{{namespace}:*",
            "resetchannels", "-@all", "+@read", "+@write", "+@transaction", "+@connection",
            "+evalsha", "+script|load", "+time", "-@dangerous"]


def test_documented_acl_rule_confines_a_user_to_its_namespace(secured):
    doc = (Path(__file__).resolve().parent.parent / "docs" / "SECURITY.md").read_text()
    for part in acl_rule("crawl_a")[1:]:
        assert part in doc, f"docs/SECURITY.md should show the tested ACL rule ({part})"
    admin = secured.client()
    admin.execute_command("ACL", "SETUSER", "user_a", ">a-Pw-1", *acl_rule("crawl_a"))
    admin.execute_command("ACL", "SETUSER", "user_b", ">b-Pw-1", *acl_rule("crawl_b"))
    try:
        url_a = f"redis://user_a:a-Pw-1@127.0.0.1:{secured.port}/0"
        url_b = f"redis://user_b:b-Pw-1@127.0.0.1:{secured.port}/0"
        options = {"min_host_delay": 0.0, "budget": 100.0, "min_interval": 10.0,
                   "max_interval": 100.0}
        with Frontier(url_a, namespace="crawl_a", **options) as fa, \
                Frontier(url_b, namespace="crawl_b", **options) as fb:
            fa.add_many([f"http://a{i}.example/" for i in range(20)], now=0.0)
            fb.add_many([f"http://b{i}.example/" for i in range(10)], now=0.0)
            assert cycle(fa, 0.0)[0] >= 20 and cycle(fb, 0.0)[0] >= 10
            assert len(list(fa.iter_pages())) == 20 and fa.stats(now=5.0)["pages"] == 20
            fa.set_host_delay("a1.example", 3.0)
            fa.resolve(now=5.0)
            # the pages' shared detection memory (FRONTIER_RATE_SHARED_PAGE_MEMORY) under the
            # same rule: its HGET / HSET of fr:{crawl_a:s}:pm and the host's mask log
            # (GETRANGE, SET NX, APPEND, PEXPIRE of fr:{crawl_a:s}:hm:...) are allowed,
            # crawl_b's are not
            mine = SharedPages.from_spec(spec(fa))
            copy = PageMemory("ab" * 8, array("Q", [1, 2]), 12, array("Q"), b"w" * 4)
            learned = HostMask(8, shared=True)
            learned.mask(5)
            mine.save("http://a1.example/", copy, learned)
            fresh = HostMask(8, shared=True)
            assert mine.load("http://a1.example/", fresh).fingerprint == copy.fingerprint
            assert set(fresh.pending) == {tag(5)} and learned.events == []
            assert mine.failures == 0
            theirs = SharedPages(fa.client, "crawl_b", fb.shards, 3600.0)  # user_a's client
            assert theirs.load("http://b1.example/") is None and theirs.failures == 1
        with Frontier.attach(url_a, "crawl_a") as again:  # as the CLI opens it
            assert again.page("http://a1.example/")["fetches"] >= 1

        # user_a cannot open, read or write crawl_b, neither directly nor through a script
        with pytest.raises(RedisPermissionDenied) as refused:
            Frontier(url_a, namespace="crawl_b")
        assert "'crawl_b'" in str(refused.value) and "a-Pw-1" not in str(refused.value)
        assert "user_a" in str(refused.value)  # the URL, redacted
        client_a = redis.Redis.from_url(url_a)
        try:
            with pytest.raises(redis.exceptions.NoPermissionError):
                client_a.hgetall("fr:{crawl_b}:cfg")
            with pytest.raises(redis.exceptions.NoPermissionError):
                client_a.hgetall("fr:{crawl_b:0}:cnt")
            with pytest.raises(redis.exceptions.NoPermissionError):
                client_a.delete("fr:{crawl_b}:nu")
            with pytest.raises(redis.exceptions.NoPermissionError):
                client_a.eval("return redis.call('hgetall', KEYS[1])", 1, "fr:{crawl_b:0}:cnt")
            with pytest.raises(redis.exceptions.NoPermissionError):  # a key not declared in KEYS
                client_a.eval("return redis.call('hgetall', 'fr:{crawl_b:0}:cnt')", 0)
            with pytest.raises(redis.exceptions.NoPermissionError):
                client_a.flushall()
            with pytest.raises(redis.exceptions.NoPermissionError):
                client_a.flushdb()
            with pytest.raises(redis.exceptions.NoPermissionError):
                client_a.config_get("requirepass")
            with pytest.raises(redis.exceptions.NoPermissionError):
                client_a.keys("*")
            with pytest.raises(redis.exceptions.NoPermissionError):
                client_a.script_flush()
            # what it does NOT hide: SCAN lists every key name (namespaces and host names)
            names = {k.decode() for k in client_a.scan_iter(match="fr:{crawl_b*", count=1000)}
            assert "fr:{crawl_b}:cfg" in names
        finally:
            client_a.close()
        assert admin.hget("fr:{crawl_b}:cfg", "estimator") == b"interval"
    finally:
        admin.execute_command("ACL", "DELUSER", "user_a", "user_b")
        admin.close()


# ---------------------------------------------------------------- TLS

def _certificates(directory: Path, name: str) -> dict[str, Path]:
    """A self-signed CA and a certificate it signs for 127.0.0.1 / localhost (PEM files)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                       False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                         critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
                critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = {"ca": directory / f"{name}-ca.pem", "cert": directory / f"{name}-cert.pem",
             "key": directory / f"{name}-key.pem"}
    paths["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths["key"].write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                               serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
    return paths


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    """(plain server, server certs, a second unrelated CA, client certs) for TLS tests."""
    directory = tmp_path_factory.mktemp("tls")
    with RedisServer(directory / "redis") as server:
        yield (server, _certificates(directory, "server"), _certificates(directory, "other"),
               _certificates(directory, "client"))


def _server_context(certs: dict[str, Path], client_ca: Path | None = None) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs["cert"], certs["key"])
    if client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(client_ca)
    return context


def test_rediss_url_with_ca_runs_a_crawl_cycle(tls):
    server, certs, _, _ = tls
    with RedisProxy(server.port, _server_context(certs)) as proxy:
        url = f"rediss://127.0.0.1:{proxy.port}/0?ssl_ca_certs={certs['ca']}&ssl_cert_reqs=required"
        with Frontier(url, namespace="tls", min_host_delay=0.0, budget=100.0,
                      min_interval=10.0, max_interval=100.0) as f:
            f.add_many([f"http://h{i}.example/" for i in range(8)], now=0.0)
            fetched, t = cycle(f, 0.0)
            assert fetched >= 8 and f.stats(now=t)["fetches"] == fetched
            assert f.client.connection_pool.connection_class.__name__ == "SSLConnection"
    plain = server.client()
    assert plain.hget("fr:{tls}:cfg", "estimator") == b"interval"  # it went through to the server
    plain.close()


def test_rediss_with_wrong_ca_is_refused(tls):
    server, certs, other, _ = tls
    with RedisProxy(server.port, _server_context(certs)) as proxy:
        url = f"rediss://127.0.0.1:{proxy.port}/0?ssl_ca_certs={other['ca']}&ssl_cert_reqs=required"
        with pytest.raises(RedisUnavailable) as info:
            Frontier(url, namespace="tls-bad")
        assert "CERTIFICATE_VERIFY_FAILED" in str(info.value) or "certificate" in str(info.value)


def test_rediss_client_certificate(tls):
    """A server that demands client certificates: ssl_certfile/ssl_keyfile in the URL work."""
    server, certs, _, client = tls
    with RedisProxy(server.port, _server_context(certs, client_ca=client["ca"])) as proxy:
        base = f"rediss://127.0.0.1:{proxy.port}/0?ssl_ca_certs={certs['ca']}"
        with Frontier(f"{base}&ssl_certfile={client['cert']}&ssl_keyfile={client['key']}",
                      namespace="tls-client", min_host_delay=0.0, budget=100.0,
                      min_interval=10.0, max_interval=100.0) as f:
            f.add("http://a.example/", now=0.0)
            assert cycle(f, 0.0, rounds=1)[0] == 1
        with pytest.raises(RedisUnavailable):
            Frontier(base, namespace="tls-client")

"""Stored requests hold what the spider gave (issue 33), with real crawls.

A login POST is redirected to ``GET /home`` with a session cookie; the spider then sends
``response.request.replace(url=/account)``, which carries the User-Agent,
Accept-Encoding and Cookie headers Scrapy's middlewares wrote into the downloaded
request. Before the fix ``/home`` became a revisited page, and both stored pages froze
those headers: a second run with another ``USER_AGENT`` sent the old one, and the
session cookie sat in Redis.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import redis

sys.path.insert(0, str(Path(__file__).parent))
from scrapy_support.harness import open_frontier, run_crawl  # noqa: E402
from scrapy_support.server import ChangingSite  # noqa: E402

pytestmark = pytest.mark.timeout(120)

SECRET = "s3cret-session-7f1c"


def _namespace_bytes(redis_url: str, namespace: str) -> bytes:
    """Every key and value of ``namespace`` in Redis, concatenated."""
    client = redis.Redis.from_url(redis_url)
    out = []
    for key in client.scan_iter(match=f"fr:{{{namespace}*"):
        kind = client.type(key)
        out.append(key)
        if kind == b"hash":
            out.extend(b"%s=%s" % item for item in client.hgetall(key).items())
        elif kind == b"string":
            out.append(client.get(key) or b"")
        elif kind == b"zset":
            out.extend(member for member, _ in client.zrange(key, 0, -1, withscores=True))
    client.close()
    return b"\n".join(out)


def test_one_off_redirects_stay_one_off_and_no_middleware_header_is_stored(
        redis_url, namespace, tmp_path):
    with ChangingSite("127.0.0.1") as site:
        site.set("/login", "", status=302, location="/home",
                 set_cookie=f"session={SECRET}; Path=/")
        site.set("/home", "<p>welcome</p>")
        site.set("/account", "<p>account</p>")
        base = site.url("")
        settings = {"FRONTIER_RATE_CLOSE_AFTER": 3, "USER_AGENT": "agent-one"}
        first = run_crawl(tmp_path, redis_url, namespace, [{"url": base}], settings,
                          spider="login_spider.LoginSpider", name="first")
        assert first.returncode == 0, first.log[-3000:]
        account_hits = site.hits_for("/account")
        assert account_hits and account_hits[0].cookie == f"session={SECRET}", account_hits
        stored = _namespace_bytes(redis_url, namespace)
        second = run_crawl(tmp_path, redis_url, namespace, [{"url": base}],
                           {**settings, "USER_AGENT": "agent-two",
                            "COOKIES_ENABLED": False}, spider="login_spider.LoginSpider",
                           name="second")
        assert second.returncode == 0, second.log[-3000:]
        later = site.hits_for("/account")[len(account_hits):]
    frontier = open_frontier(redis_url, namespace)
    try:
        assert frontier.page(site.url("/home")) is None  # the login's redirect: a one-off
        assert frontier.page(site.url("/account")) is not None
    finally:
        frontier.close()
    assert SECRET.encode() not in stored
    assert b"agent-one" not in stored
    assert b"Accept-Encoding" not in stored
    assert later, second.log[-3000:]
    assert all(hit.user_agent == "agent-two" and hit.cookie is None for hit in later), later

"""A robots.txt that answers a server error holds its host's pages (RFC 9309 2.3.1.4), with
real crawls under Scrapy's ``ROBOTSTXT_OBEY``.

Scrapy's ``RobotsTxtMiddleware`` reads a 5xx robots.txt (its error body: no rules) or one
it could not fetch as "allow all", and keeps that for the process's life: in issue 63's
soak a crawler restarted while a host answered 503 fetched ``/private/secret``. Now no page
of the host is sent while its robots.txt fails; robots.txt is asked again every
``min(FRONTIER_RATE_ROBOTS_TTL, 300 s)``, and once it answers, the held pages go, under
its rules (Scrapy's middleware is made to read it again).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scrapy_support.harness import finish_crawl, start_crawl  # noqa: E402
from scrapy_support.server import ChangingSite  # noqa: E402

pytestmark = pytest.mark.timeout(120)

ROBOTS = "User-agent: *\nDisallow: /private\n"
SETTINGS = {"ROBOTSTXT_OBEY": True, "FRONTIER_RATE_ROBOTS_TTL": 2.0,
            "FRONTIER_RATE_CLOSE_AFTER": 12, "LOG_LEVEL": "INFO"}


@pytest.mark.parametrize("failure", ["503", "timeout"])
def test_a_robots_txt_that_fails_holds_the_hosts_pages_until_it_answers(
        redis_url, namespace, tmp_path, failure):
    """``failure``: robots.txt answers 503, or answers too late (``DOWNLOAD_TIMEOUT``)."""
    with ChangingSite("127.0.0.1") as site:
        if failure == "503":
            site.set("/robots.txt", "Service Unavailable", status=503, content_type="text/plain")
        else:
            site.set("/robots.txt", ROBOTS, content_type="text/plain", delay=2.0)
        site.set("/", '<p>home</p><a href="/private/secret">s</a> <a href="/public">p</a>')
        site.set("/private/secret", "<p>secret</p>")
        site.set("/public", "<p>public</p>")
        proc, output, log = start_crawl(tmp_path, f"robots-{failure}", redis_url, namespace,
                                        [{"url": site.url("/")}],
                                        {**SETTINGS, "DOWNLOAD_TIMEOUT": 1}, follow=True)
        deadline = time.monotonic() + 60
        while not site.hits_for("/robots.txt") and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(4.0)  # the host's robots.txt fails for 4 s, then answers with its rules
        answering = time.time()
        site.set("/robots.txt", ROBOTS, content_type="text/plain")
        crawl = finish_crawl(proc, output, log, timeout=90)
        hits = list(site.hits)
    assert crawl.returncode == 0, crawl.log[-3000:]
    assert [h.path for h in hits if h.path.startswith("/private")] == [], crawl.log[-3000:]
    pages = [h for h in hits if h.path != "/robots.txt"]
    assert pages and all(h.started > answering for h in pages), \
        [(h.path, h.status, round(h.started - answering, 3)) for h in hits]  # none while failing
    assert {"/", "/public"} <= {h.path for h in pages}  # held, not lost
    assert crawl.stats.get("frontier_rate/robots_held", 0) >= 1

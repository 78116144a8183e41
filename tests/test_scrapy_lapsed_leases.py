"""A leased page whose request waits in the downloader past half the lease timeout is not
sent (issue 63), with a real crawl.

The lease expires in Redis after the lease timeout and the page is leased again; a request
that left after that would fetch the page a second time (and, from two processes, send it
twice with no lease between them). Here another sender holds the host's shared send slot
``HOLD`` seconds ahead when the crawl starts, so the first request waits longer than its
lease; the page must still be fetched exactly once, after that slot.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import redis

from frontier_rate.crawl.politeness import LEASE_LAPSED, SEND_BY_KEY, send_by
from frontier_rate.crawl.scrapy_politeness import LAPSED_STAT, LeaseLapsed
from frontier_rate.engine.records import Lease
from frontier_rate.scrapy.one_pass import OnePass
from frontier_rate.store.keys import Keys

sys.path.insert(0, str(Path(__file__).parent))
from scrapy_support.harness import run_crawl  # noqa: E402
from scrapy_support.server import ChangingSite  # noqa: E402

pytestmark = pytest.mark.timeout(120)

LEASE_TIMEOUT = 4.0
HOLD = 6.0
"""Seconds ahead the other sender's slot lies: past the lease timeout, so without the check
the first request leaves after its lease expired and the page was leased again."""


def test_a_request_that_waited_past_its_lease_is_not_sent_and_the_page_is_fetched_once(
        redis_url, namespace, tmp_path):
    admin = redis.Redis.from_url(redis_url)
    try:
        with ChangingSite("127.0.0.1") as site:
            site.set("/held", "<p>a page whose host is busy</p>")
            seconds, micros = admin.time()
            slot = seconds + micros / 1e6 + HOLD
            admin.hset(Keys(namespace, 1).send, "127.0.0.1", f"{slot:.6f},0.2")
            started = time.time()
            crawl = run_crawl(tmp_path, redis_url, namespace, [{"url": site.url("/held")}], {
                "FRONTIER_RATE_LEASE_TIMEOUT": LEASE_TIMEOUT,
                "FRONTIER_RATE_MIN_HOST_DELAY": 0.2,
                "FRONTIER_RATE_MIN_INTERVAL": 3600.0, "FRONTIER_RATE_MAX_INTERVAL": 7200.0,
                "FRONTIER_RATE_CLOSE_AFTER": 3 * HOLD, "LOG_LEVEL": "DEBUG"})
            hits = [hit for hit in site.hits if hit.path == "/held"]
        assert crawl.returncode == 0, crawl.log[-3000:]
        assert len(hits) == 1, [round(hit.started - started, 2) for hit in hits]
        assert hits[0].started >= started + HOLD - 1.0  # not before the other's slot
        assert crawl.stats.get(LAPSED_STAT, 0) >= 1
        assert len(crawl.responses(site.url("/held"))) == 1
        assert not crawl.errors(), crawl.errors()  # a lapsed request is no error for the spider
    finally:
        admin.close()


def test_a_lapsed_page_of_an_idle_run_may_still_be_fetched_in_the_run():
    class Stats:
        def inc_value(self, name):
            pass

    url = "http://a.test/p"
    one_pass = OnePass(Stats(), enabled=True)
    one_pass.sent(url)
    again = Lease(url=url, token="2", host="a.test")
    assert one_pass.keep([(again, 5.0)]) == []  # leased again while the first waited: held
    assert one_pass.lapsed(url) == [(again, 5.0)]  # the first was never sent: fetch this one
    later = Lease(url=url, token="3", host="a.test")
    assert one_pass.keep([(later, 9.0)]) == [(later, 9.0)]
    assert one_pass.held() == []


def test_the_lapse_rule_is_half_the_lease_timeout_and_frontera_knows_its_name():
    assert send_by(100.0, 300.0) == 250.0
    assert LeaseLapsed.__name__ == LEASE_LAPSED
    assert SEND_BY_KEY.startswith("frontier_rate_")

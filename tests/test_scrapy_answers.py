"""What a crawl does with an answer's validators and a cut body (issue 60, item 6), with
real crawls of a loopback site."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scrapy_support.harness import run_crawl  # noqa: E402
from scrapy_support.server import ChangingSite  # noqa: E402

pytestmark = pytest.mark.timeout(120)


def test_an_etag_the_site_stopped_sending_is_not_sent_back(redis_url, namespace, tmp_path):
    """Before, the stored ETag stayed for good once a 200 came without one: every revisit
    sent the old If-None-Match."""
    with ChangingSite("127.0.0.1") as site:
        site.set("/", "<p>one</p>", etag=True)
        first = run_crawl(tmp_path, redis_url, namespace, [{"url": site.url("/")}],
                          {"FRONTIER_RATE_CLOSE_AFTER": "idle"}, name="first")
        assert first.returncode == 0, first.log[-3000:]
        site.set("/", "<p>two</p>", etag=False)
        second = run_crawl(tmp_path, redis_url, namespace, [{"url": site.url("/")}],
                           {"FRONTIER_RATE_CLOSE_AFTER": 4}, name="second")
        assert second.returncode == 0, second.log[-3000:]
        sent = [hit.if_none_match for hit in site.hits_for("/")]
    # first crawl: no validator yet; second: the stored ETag once, answered by a 200
    # without one; then none
    assert len(sent) >= 3, sent
    assert sent[0] is None and sent[1] is not None, sent
    assert sent[2:] == [None] * (len(sent) - 2), sent


def test_a_cut_body_is_a_warning_once_per_page(redis_url, namespace, tmp_path):
    """Before, a body cut at FRONTIER_RATE_MAX_BODY was said at DEBUG level only."""
    with ChangingSite("127.0.0.1") as site:
        site.set("/big", "<p>" + "x" * 5000 + "</p>")
        site.set("/small", "<p>small</p>")
        crawl = run_crawl(tmp_path, redis_url, namespace,
                          [{"url": site.url("/big")}, {"url": site.url("/small")}],
                          {"FRONTIER_RATE_MAX_BODY": 1000, "FRONTIER_RATE_CLOSE_AFTER": 4,
                           "FRONTIER_RATE_DETECTION_PROCESS": False})
        cuts = len(site.hits_for("/big"))
    assert crawl.returncode == 0, crawl.log[-3000:]
    assert cuts >= 2 and crawl.stats["frontier_rate/body_cut"] == cuts, crawl.log[-3000:]
    url = re.escape(site.url("/big"))
    warnings = re.findall(rf"WARNING: frontier-rate: download of {url} stopped after (\d+) "
                          r"bytes, past the limit of 1000 \(FRONTIER_RATE_MAX_BODY\)", crawl.log)
    assert len(warnings) == 1 and int(warnings[0]) > 1000, crawl.log[-3000:]
    assert len(re.findall(rf"DEBUG: frontier-rate: download of {url} stopped after \d+ bytes "
                          r"\(limit 1000\)", crawl.log)) == cuts - 1
    assert "/small stopped" not in crawl.log

"""A bot wall's validators are never kept as the page's (issue 63's soak), with a real crawl.

A short page (its visible text under twice a wall's) turns into a bot wall served with an
``ETag``, as a CDN's challenge is. Change detection takes such a wall as the page's copy (it
is not shorter than half the page), and before, its ``ETag`` became the page's validator:
the next revisit sent it back, the site answered 304 against the wall, and the page looked
unchanged for as long as the wall stood (the soak: 143 such 304s on one page in 12 minutes).
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

PAGE = ("<html><head><title>Opening hours</title></head><body><p>Open Monday to Friday "
        "from nine to five, closed on public holidays. Call us to book a visit.</p></body></html>")
WALL = ("<html><head><title>Just a moment...</title></head><body><h1>Checking your browser"
        "</h1><p>Are you a robot? Please complete the captcha to continue.</p></body></html>")


def test_a_wall_taken_as_a_short_pages_copy_never_gets_its_etag_sent_back(
        redis_url, namespace, tmp_path):
    with ChangingSite("127.0.0.1") as site:
        site.set("/hours", PAGE, etag=True, last_modified=True)
        proc, output, log = start_crawl(tmp_path, "wall", redis_url, namespace,
                                        [{"url": site.url("/hours")}],
                                        {"FRONTIER_RATE_FINGERPRINT": "content",
                                         "FRONTIER_RATE_CLOSE_AFTER": 7, "LOG_LEVEL": "INFO"})
        deadline = time.monotonic() + 60
        while not site.hits_for("/hours") and time.monotonic() < deadline:
            time.sleep(0.01)
        wall_etag = site.set("/hours", WALL, etag=True, last_modified=True).etag_value
        crawl = finish_crawl(proc, output, log, timeout=90)
        hits = site.hits_for("/hours")
    assert crawl.returncode == 0, crawl.log[-3000:]
    assert len(hits) >= 4, (hits, crawl.log[-3000:])  # the page, then the wall three times
    assert [hit.if_none_match for hit in hits if hit.if_none_match == wall_etag] == []
    assert all(hit.status == 200 for hit in hits), [hit.status for hit in hits]

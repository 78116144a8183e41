"""Redirects as Scrapy's own scheduler handles them (issue 60, item 4), with real crawls.

Scrapy's scheduler passes every redirect hop through the dupefilter: a loop ``a -> b -> a``
costs two requests, a self-redirect one. Before, the hops of a page the frontier leased
went past the dupefilter: the loop was followed to ``REDIRECT_MAX_TIMES`` (21 requests)
and retried. Each test crawls the same site with Scrapy's default scheduler and with the
frontier's, and compares what the site answered.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scrapy_support.harness import open_frontier, run_crawl  # noqa: E402
from scrapy_support.server import ChangingSite  # noqa: E402

pytestmark = pytest.mark.timeout(120)

SCRAPYS_OWN = {"SCHEDULER": "scrapy.core.scheduler.Scheduler"}
ONE_PASS = {"FRONTIER_RATE_CLOSE_AFTER": "idle", "FRONTIER_RATE_MIN_INTERVAL": 3600.0,
            "FRONTIER_RATE_MAX_INTERVAL": 7200.0}
"""Each page fetched once (a failed fetch is retried 60 s later): the crawl ends after
the first pass."""


def hits_by_scheduler(site: ChangingSite, tmp_path: Path, redis_url: str, namespace: str,
                      start: list[dict], follow: bool = False) -> tuple[list[str], list[str]]:
    """The paths the site answered for a crawl with Scrapy's scheduler, then with the
    frontier's (``ONE_PASS``); each crawl must end cleanly."""
    scrapys = run_crawl(tmp_path, redis_url, namespace + ".scrapy", start, SCRAPYS_OWN,
                        follow=follow, name="scrapy")
    assert scrapys.returncode == 0, scrapys.log[-3000:]
    before = len(site.hits)
    frontiers = run_crawl(tmp_path, redis_url, namespace, start, ONE_PASS, follow=follow,
                          name="frontier")
    assert frontiers.returncode == 0, frontiers.log[-3000:]
    paths = site.paths()
    return paths[:before], paths[before:]


def test_a_redirect_loop_costs_what_it_costs_with_scrapys_scheduler(redis_url, namespace,
                                                                   tmp_path):
    """``/a -> /b -> /a`` and ``/self -> /self``: 3 requests with Scrapy's scheduler, the
    same 3 with the frontier's; both pages' fetches are recorded as failed (retried later),
    none is left leased after the crawl."""
    with ChangingSite("127.0.0.1") as site:
        site.set("/a", "", status=302, location=site.url("/b"))
        site.set("/b", "", status=302, location=site.url("/a"))
        site.set("/self", "", status=301, location=site.url("/self"))
        scrapys, frontiers = hits_by_scheduler(site, tmp_path, redis_url, namespace,
                                               [{"url": site.url("/a")},
                                                {"url": site.url("/self")}])
        assert sorted(scrapys) == ["/a", "/b", "/self"]
        assert sorted(frontiers) == sorted(scrapys)
        frontier = open_frontier(redis_url, namespace)
        try:
            for path in ("/a", "/self"):
                page = frontier.page(site.url(path))
                assert page["status"] == "retrying" and page["fails"] == 1, page
            assert frontier.page(site.url("/b")) is None  # a hop, not a page
        finally:
            frontier.close()


def test_a_redirect_to_a_url_the_crawl_took_is_dropped_as_a_duplicate(redis_url, namespace,
                                                                      tmp_path):
    """``/home`` links to ``/old``, which redirects back to ``/home``: Scrapy's dupefilter
    drops that hop (2 requests), and so does the frontier's scheduler; ``/old``'s fetch
    is recorded as failed."""
    with ChangingSite("127.0.0.1") as site:
        site.set("/home", f'<a href="{site.url("/old")}">old</a>')
        site.set("/old", "", status=301, location=site.url("/home"))
        scrapys, frontiers = hits_by_scheduler(site, tmp_path, redis_url, namespace,
                                               [{"url": site.url("/home")}], follow=True)
        assert scrapys == ["/home", "/old"]
        assert frontiers == scrapys
        frontier = open_frontier(redis_url, namespace)
        try:
            page = frontier.page(site.url("/old"))
            assert page["status"] == "retrying" and page["fails"] == 1, page
        finally:
            frontier.close()

"""Sitemaps and feeds in the Frontera backend (docs/SIGNALS.md).

Real scrapy-frontera crawls in subprocesses against a loopback site
(``test_frontera_crawl.run_crawl``): a sitemap is a page the backend leases and revisits,
its answer becomes claims and never reaches the spider (nor its errback), the pages it
lists are added; a malformed one is a WARNING and the crawl goes on. Plus the backend alone
with a virtual clock (no network), for what a crawl cannot pin exactly.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import pytest

from frontier_rate.crawl.signal_reader import SITEMAP_KEY
from frontier_rate.engine.frontier import Frontier

sys.path.insert(0, str(Path(__file__).parent))
from scrapy_support.server import ChangingSite  # noqa: E402
from test_frontera import Counter, VirtualClock, backend_of, make_manager, respond  # noqa: E402
from test_frontera_crawl import run_crawl, tracebacks  # noqa: E402
from test_scrapy_signals import iso, urlset  # noqa: E402

pytestmark = pytest.mark.timeout(120)


def test_a_sitemap_is_a_revisited_page_whose_entries_become_claims(
        tmp_path: Path, redis_url: str, namespace: str) -> None:
    """The sitemap is fetched as a page and revisited conditionally (304s); its dated
    entries are claims, the pages it lists are added and reach the spider's ``parse``;
    neither the sitemap nor its 304s reach the spider's callback or errback."""
    with ChangingSite("127.0.0.1") as site:
        site.set("/a", "<p>a</p>")
        site.set("/b", "<p>b</p>")
        site.set("/c", "<p>c, found only in the sitemap</p>")
        site.set("/sitemap.xml", urlset(site, [("/a", iso(time.time() - 3600)), ("/b", None),
                                               ("/c", iso(time.time() - 60))]),
                 content_type="application/xml", etag=True)
        crawl = run_crawl(tmp_path, redis_url, namespace, [site.url("/a")],
                          spider="ErrbackSpider", settings={
                              "FRONTIER_RATE_SITEMAPS": [site.url("/sitemap.xml")],
                              "FRONTIER_RATE_CLOSE_AFTER": 4.5})
        sitemap_hits = site.hits_for("/sitemap.xml")
        hits = {path: site.hits_for(path) for path in ("/a", "/b", "/c")}
    assert crawl.returncode == 0, crawl.log[-3000:]
    assert not tracebacks(crawl.log), tracebacks(crawl.log)[0]
    stats = crawl.closed["stats"]
    assert stats["frontier_rate/sitemaps"] == 1
    assert stats["frontier_rate/sitemap_entries"] == 3  # read once: the revisits were 304s
    assert stats["frontier_rate/signal_claims"] == 2  # /a and /c are dated; /b only listed
    assert "frontier_rate/sitemap_to_spider" not in stats
    # revisited as a page, with conditional requests
    assert len(sitemap_hits) >= 2, crawl.log[-3000:]
    assert sitemap_hits[0].status == 200
    assert all(h.if_none_match and h.status == 304 for h in sitemap_hits[1:])
    # the spider sees the pages the sitemap made known, never the sitemap
    seen = {r["url"] for r in crawl.records if r["kind"] == "response"}
    assert {site.url("/b"), site.url("/c")} <= seen, crawl.log[-3000:]
    assert site.url("/sitemap.xml") not in seen
    errors = [r for r in crawl.records if r["kind"] == "error"]
    assert all(e["url"] != site.url("/sitemap.xml") for e in errors), errors
    assert hits["/b"] and hits["/c"]
    with Frontier(redis_url, namespace=namespace, estimator="interval") as frontier:
        page = frontier.page(site.url("/sitemap.xml"))
        assert page["fetches"] == len(sitemap_hits) or page["fetches"] == len(sitemap_hits) - 1
        assert page["weight"] == pytest.approx(0.3 * 3, rel=1e-6)
        assert page["source"] is True and frontier.stats()["sources"] == 1
        assert frontier.page(site.url("/c"))["fetches"] >= 1
        assert frontier.page(site.url("/c"))["source"] is False
        assert frontier.stats()["claims"] >= 1  # /a's, known when the sitemap told


@pytest.mark.parametrize("body, words", [
    (b"<urlset><url><loc>http://x", "not well-formed XML"),
    (b"<html><body>not a sitemap</body></html>", "root element <html>"),
])
def test_a_malformed_sitemap_is_a_warning_and_the_crawl_goes_on(
        tmp_path: Path, redis_url: str, namespace: str, body: bytes, words: str) -> None:
    with ChangingSite("127.0.0.1") as site:
        site.set("/a", "<p>a</p>")
        site.set("/sitemap.xml", body, content_type="application/xml")
        crawl = run_crawl(tmp_path, redis_url, namespace, [site.url("/a")], settings={
            "FRONTIER_RATE_SITEMAPS": [site.url("/sitemap.xml")],
            "FRONTIER_RATE_CLOSE_AFTER": 3.5})
        page_hits, sitemap_hits = site.hits_for("/a"), site.hits_for("/sitemap.xml")
    assert crawl.returncode == 0, crawl.log[-3000:]
    assert crawl.closed["reason"] == "finished"
    stats = crawl.closed["stats"]
    assert stats["frontier_rate/sitemap_errors"] == len(sitemap_hits) >= 1
    assert "WARNING" in crawl.log and "sitemap or feed not read" in crawl.log
    assert words in crawl.log
    assert len(page_hits) >= 2  # the crawl went on: the page is revisited
    assert not [r for r in crawl.records if r["kind"] == "response"
                and r["url"] == site.url("/sitemap.xml")]


def test_the_backend_reads_a_sitemap_answer_into_claims(redis_url: str, namespace: str,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    """No network, virtual clock: the sitemap is leased as a marked page; its answer adds
    the pages it lists (discover) and makes claims; an answer whose callback is the
    spider's (no KeepAlive) is read too, with one WARNING."""
    clock = VirtualClock()
    host = "http://site.test"
    counter = Counter()
    manager = make_manager(redis_url, namespace, clock, FRONTIER_RATE_SITEMAPS=[f"{host}/sm.xml"],
                           FRONTIER_RATE_SITEMAPS_FROM_ROBOTS=True, STATS_MANAGER=counter,
                           FRONTIER_RATE_DETECTION_PROCESS=True)
    try:
        backend = backend_of(manager)
        (request,) = manager.get_next_requests(10, key_type="domain", overused_keys=[])
        assert request.url == f"{host}/sm.xml"
        assert request.meta[b"scrapy_meta"][SITEMAP_KEY] is True
        body = (f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                f"<url><loc>{host}/x</loc><lastmod>{iso(clock.now - 600)}</lastmod></url>"
                f"<url><loc>{host}/y</loc></url></urlset>").encode()
        request.meta[b"scrapy_callback"] = b"parse"  # as without KeepAlive
        with caplog.at_level(logging.WARNING, logger="frontier_rate"):
            respond(manager, request, body=body, headers={b"Content-Type": [b"text/xml"]})
        frontier = backend.frontier
        assert frontier.page(f"{host}/x") is not None and frontier.page(f"{host}/y") is not None
        assert frontier.page(f"{host}/sm.xml")["fetches"] == 1
        assert {name: counter.values.get(f"frontier_rate/{name}") for name in (
            "sitemaps", "sitemap_entries", "signal_claims", "signal_added", "sitemap_to_spider")} \
            == {"sitemaps": 1, "sitemap_entries": 2, "signal_claims": 1, "signal_added": 1,
                "sitemap_to_spider": 1}
        text = caplog.text
        assert "reached the spider's callback" in text and "KeepAlive" in text
        assert "FRONTIER_RATE_SITEMAPS_FROM_ROBOTS is not read" in text
        assert "FRONTIER_RATE_DETECTION_PROCESS is not read" in text
        later = manager.get_next_requests(10, key_type="domain", overused_keys=[])
        assert {r.url for r in later} == {f"{host}/x", f"{host}/y"}
        assert not any(r.meta[b"scrapy_meta"].get(SITEMAP_KEY) for r in later)
    finally:
        manager.stop()


def test_the_backend_warns_of_the_detection_process_only_when_it_is_set(
        redis_url: str, namespace: str, caplog: pytest.LogCaptureFixture) -> None:
    """``FRONTIER_RATE_DETECTION_PROCESS`` defaults to True for Scrapy; the backend, which
    detects in the crawler's process, says so only to a user who set it."""
    for settings, warned in (({}, False), ({"FRONTIER_RATE_DETECTION_PROCESS": False}, False),
                             ({"FRONTIER_RATE_DETECTION_PROCESS": True}, True)):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="frontier_rate"):
            manager = make_manager(redis_url, namespace, VirtualClock(), **settings)
            manager.stop()
        assert ("FRONTIER_RATE_DETECTION_PROCESS is not read" in caplog.text) is warned, settings

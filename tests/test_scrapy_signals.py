"""Sitemaps and feeds in real Scrapy crawls (subprocesses against a loopback site): found from
FRONTIER_RATE_SITEMAPS and robots.txt, fetched as pages of the frontier (revisited, conditional),
read into claims; bad documents are a WARNING and the crawl goes on."""

from __future__ import annotations

import gzip
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scrapy_support.harness import open_frontier, run_crawl  # noqa: E402
from scrapy_support.server import ChangingSite  # noqa: E402

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def site():
    with ChangingSite("127.0.0.1") as running:
        yield running


def urlset(site: ChangingSite, entries: list[tuple[str, str | None]]) -> str:
    rows = "".join(f"<url><loc>{site.url(path)}</loc>"
                   + (f"<lastmod>{date}</lastmod>" if date else "") + "</url>"
                   for path, date in entries)
    return ('<?xml version="1.0" encoding="UTF-8"?><urlset '
            f'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{rows}</urlset>')


def iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def test_a_sitemap_is_a_revisited_page_whose_entries_become_claims(site, redis_url, namespace,
                                                                   tmp_path):
    site.set("/a", "<p>a</p>")
    site.set("/b", "<p>b</p>")
    site.set("/sitemap.xml", urlset(site, [("/a", iso(time.time() - 3600)), ("/b", None),
                                           ("/c", iso(time.time() - 60))]),
             content_type="application/xml")
    site.set("/c", "<p>c, found only in the sitemap</p>")
    crawl = run_crawl(tmp_path, redis_url, namespace, [{"url": site.url("/a")}], {
        "FRONTIER_RATE_SITEMAPS": [site.url("/sitemap.xml")], "FRONTIER_RATE_CLOSE_AFTER": 4})
    stats = crawl.stats
    assert stats["frontier_rate/sitemaps"] == 1
    assert stats["frontier_rate/sitemap_entries"] >= 3
    assert stats["frontier_rate/signal_claims"] >= 2
    hits = [h for h in site.hits if h.path == "/sitemap.xml"]
    assert len(hits) >= 2, crawl.log[-3000:]  # revisited, as a page
    # the spider never sees the sitemap; it sees the pages the sitemap made known
    assert not crawl.responses(site.url("/sitemap.xml"))
    assert crawl.responses(site.url("/b")) and crawl.responses(site.url("/c"))
    f = open_frontier(redis_url, namespace)
    page = f.page(site.url("/sitemap.xml"))
    assert page["fetches"] >= 2 and page["weight"] == pytest.approx(0.3 * 3, rel=1e-6)
    assert page["source"] is True and f.page(site.url("/a"))["source"] is False
    assert f.stats()["claims"] >= 2 and f.stats()["sources"] == 1


@pytest.mark.parametrize("body, words", [
    (b"<urlset><url><loc>http://x", "not well-formed XML"),
    (b'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
     b"<urlset><url><loc>&b;</loc></url></urlset>", "DTDForbidden"),
    (gzip.compress(b"<urlset>" + b" " * (3 * 1024 * 1024) + b"</urlset>"), "gzip bomb"),
    (b"<html><body>not a sitemap</body></html>", "root element <html>"),
])
def test_a_bad_sitemap_is_a_warning_and_the_crawl_goes_on(site, redis_url, namespace, tmp_path,
                                                         body, words):
    site.set("/a", "<p>a</p>")
    site.set("/sitemap.xml", body, content_type="application/xml")
    crawl = run_crawl(tmp_path, redis_url, namespace, [{"url": site.url("/a")}], {
        "FRONTIER_RATE_SITEMAPS": [site.url("/sitemap.xml")], "FRONTIER_RATE_CLOSE_AFTER": 3,
        "FRONTIER_RATE_SITEMAP_MAX_BYTES": 1024 * 1024})
    assert crawl.returncode == 0
    assert crawl.stats["frontier_rate/sitemap_errors"] >= 1
    assert "WARNING" in crawl.log and words in crawl.log and "sitemap or feed not read" in crawl.log
    assert len(crawl.responses(site.url("/a"))) >= 2  # nothing lost: the page is revisited


def test_robots_sitemap_lines_and_an_index_with_a_feed(site, redis_url, namespace, tmp_path):
    site.set("/robots.txt", f"User-agent: *\nSitemap: {site.url('/index.xml')}\n"
             "Sitemap: http://127.0.0.9/elsewhere.xml\n", content_type="text/plain")
    site.set("/index.xml", '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
             f"<sitemap><loc>{site.url('/feed.xml')}</loc></sitemap>"
             "<sitemap><loc>http://127.0.0.9/foreign.xml</loc></sitemap></sitemapindex>",
             content_type="application/xml")
    site.set("/feed.xml", '<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>'
             f'<entry><link href="/post"/><updated>{iso(time.time() - 30)}</updated></entry>'
             f'<entry><link href="http://127.0.0.9/x"/><updated>{iso(time.time())}</updated>'
             "</entry></feed>", content_type="application/atom+xml")
    site.set("/post", "<p>post</p>")
    site.set("/a", "<p>a</p>")
    crawl = run_crawl(tmp_path, redis_url, namespace, [{"url": site.url("/a")}], {
        "ROBOTSTXT_OBEY": True, "FRONTIER_RATE_SITEMAPS_FROM_ROBOTS": True,
        "FRONTIER_RATE_CLOSE_AFTER": 4})
    paths = {h.path for h in site.hits}
    assert {"/index.xml", "/feed.xml", "/post"} <= paths, crawl.log[-3000:]
    assert crawl.stats["frontier_rate/sitemaps"] == 2  # the index and the feed, not the foreign
    assert crawl.stats["frontier_rate/sitemap_dropped"] >= 2  # foreign child, foreign entry
    assert "another host" in crawl.log

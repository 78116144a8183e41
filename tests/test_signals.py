"""signals.py: sitemaps, feeds and pushes parsed safely; every bad input a clear error or a
warning, and what is readable kept (no Redis)."""

from __future__ import annotations

import gzip
import json

import pytest

from frontier_rate.crawl import signal_sources as signals

SM = "http://a.test/sitemap.xml"


def urlset(rows: str) -> bytes:
    return ('<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            + rows + "</urlset>").encode()


def test_w3c_dates_are_read_in_every_form_the_protocol_allows():
    assert signals.w3c_date("2024-01-02") == 1704153600.0
    assert signals.w3c_date("2024") == 1704067200.0
    assert signals.w3c_date("2024-01-02T03:04:05Z") == 1704164645.0
    assert signals.w3c_date("2024-01-02T04:04:05+01:00") == 1704164645.0
    assert signals.w3c_date("2024-01-02T03:04:05.5Z") == 1704164645.5
    for bad in ("", "yesterday", "2024-13-01", "2024-01-02T25:00Z", "2024-01-02T03:04:05+0x:00"):
        assert signals.w3c_date(bad) is None
    assert signals.any_date("Sat, 07 Sep 2002 00:00:01 GMT") == 1031356801.0


def test_a_sitemap_keeps_its_entries_and_drops_foreign_and_unusable_urls():
    body = urlset("<url><loc>http://a.test/1</loc><lastmod>2024-01-02</lastmod></url>"
                  "<url><loc>http://b.test/2</loc></url>"
                  "<url><loc>javascript:alert(1)</loc></url>"
                  "<url><loc>http://a.test/3</loc><lastmod>soon</lastmod></url>"
                  "<url><loc>http://a.test/4</loc><lastmod>2999-01-01</lastmod></url>")
    parsed = signals.parse(gzip.compress(body), SM, now=1.8e9)
    assert [e.url for e in parsed.entries] == ["http://a.test/1", "http://a.test/3", "http://a.test/4"]
    assert parsed.entries[0].changed_at == 1704153600.0 and parsed.entries[1].changed_at is None
    assert parsed.dropped == 2 and parsed.future == 1
    assert any("another host" in w for w in parsed.warnings)
    assert any("unreadable date" in w for w in parsed.warnings)


def test_an_index_lists_its_sitemaps():
    body = (b'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><sitemap>'
            b"<loc>http://a.test/s1.xml.gz</loc><lastmod>2024-01-01</lastmod></sitemap></sitemapindex>")
    parsed = signals.parse(body, SM)
    assert parsed.kind == "sitemapindex" and parsed.entries[0].url == "http://a.test/s1.xml.gz"


@pytest.mark.parametrize("body, words", [
    (b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "a"><!ENTITY b "&a;&a;&a;&a;&a;&a;">]>'
     b"<urlset><url><loc>&b;</loc></url></urlset>", "DTDForbidden"),
    (b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
     b"<urlset><url><loc>&x;</loc></url></urlset>", "DTDForbidden"),
    (b"<urlset><url><loc>http://a.test/1</loc></url>", "not well-formed"),
    (b"\x1f\x8b\x08\x00garbage", "not valid gzip"),
    (b"<html/>", "root element <html>"),
    (b"", "not well-formed"),
])
def test_bad_documents_are_refused_by_name(body, words):
    with pytest.raises(signals.SignalError, match=words) as info:
        signals.parse(body, SM)
    assert SM in str(info.value)


def test_size_limits_hold_for_plain_and_gzip_bombs():
    big = urlset("<url><loc>http://a.test/x</loc></url>" * 10) + b" " * (50 * 1024 * 1024)
    with pytest.raises(signals.SignalError, match="more than the limit"):
        signals.parse(big, SM)
    bomb = gzip.compress(b"<urlset>" + b"\0" * (60 * 1024 * 1024), compresslevel=9)
    assert len(bomb) < 100_000  # a bomb: small on the wire
    with pytest.raises(signals.SignalError, match="gzip bomb"):
        signals.parse(bomb, SM)


def test_the_url_limit_keeps_the_first_entries():
    body = urlset("".join(f"<url><loc>http://a.test/{i}</loc></url>" for i in range(30)))
    parsed = signals.parse(body, SM, max_urls=10)
    assert len(parsed.entries) == 10 and parsed.dropped == 20
    assert len(parsed.warnings) <= signals.MAX_WARNINGS


def test_rss_and_atom_entries_give_links_and_dates():
    rss = (b'<rss version="2.0"><channel><link>http://a.test/</link><item><link>http://a.test/p'
           b"</link><pubDate>Sat, 07 Sep 2002 00:00:01 GMT</pubDate></item></channel></rss>")
    assert signals.parse(rss, "http://a.test/feed").entries == [
        signals.Entry("http://a.test/p", 1031356801.0)]
    atom = (b'<feed xmlns="http://www.w3.org/2005/Atom"><entry><link rel="edit" href="/e"/>'
            b'<link href="/post"/><published>2003-12-13T08:00:00Z</published>'
            b"<updated>2003-12-13T18:30:02Z</updated></entry></feed>")
    assert signals.parse(atom, "http://a.test/atom").entries == [
        signals.Entry("http://a.test/post", 1071340202.0)]


def test_pushes_in_three_forms():
    body = json.dumps({"host": "a.test", "urlList": ["http://a.test/1", "http://evil.test/2", 5]})
    parsed = signals.parse_push(body.encode())
    assert [e.url for e in parsed.entries] == ["http://a.test/1"] and parsed.dropped == 2
    lines = b"http://a.test/1 2024-01-01\n# a comment\nhttp://a.test/2\nhttp://a.test/3 never\n"
    parsed = signals.parse_push(lines, now=1.8e9)
    assert parsed.entries == [signals.Entry("http://a.test/1", 1704067200.0),
                              signals.Entry("http://a.test/2", None)]
    assert parsed.dropped == 1
    with pytest.raises(signals.SignalError, match="not valid JSON"):
        signals.parse_push(b"{nope", content_type="application/json")
    assert signals.claims_of(parsed.entries, "push", offset=10.0) == [
        ("http://a.test/1", 1704067210.0, "push"), ("http://a.test/2", None, "push")]
    assert signals.claims_of(parsed.entries, "sitemap", dated_only=True) == [
        ("http://a.test/1", 1704067200.0, "sitemap")]


def test_robots_sitemap_lines():
    robots = "User-agent: *\nDisallow: /x\nSitemap: /s.xml\nSITEMAP: http://a.test/t.xml # c\n" \
             "Sitemap: ftp://a.test/u\nSitemap: /s.xml\n"
    assert signals.robots_sitemaps(robots, "http://a.test/robots.txt") == [
        "http://a.test/s.xml", "http://a.test/t.xml"]


def test_sitemap_weight_per_page_and_when_ignored():
    assert signals.sitemap_weight(10) == pytest.approx(3.0)
    assert signals.sitemap_weight(10, ignored=True) == signals.IGNORED_WEIGHT


def test_a_sitemap_not_read_yet_weighs_at_least_one_page():
    """Before it is read, how many pages a sitemap lists is unknown: it weighs one listed
    page's, at least one page's (a source below that is one known to list few pages, which
    the engine does not read where every fetch counts and its host's pages are fetched too
    rarely to check its claims or are expected not to change)."""
    assert signals.unread_weight() == signals.UNREAD_WEIGHT == 1.0
    assert signals.unread_weight(0.3) == 1.0 and signals.unread_weight(2.5) == 2.5


def test_the_reader_adds_a_sitemap_at_its_unread_weight():
    from frontier_rate.crawl.settings import adapter_settings
    from frontier_rate.crawl.signal_reader import SignalReader

    added = []
    settings = adapter_settings({"FRONTIER_RATE_SITEMAP_WEIGHT": 0.3}.get)
    reader = SignalReader(settings, None, lambda url, w: added.append((url, w)),
                          lambda name, n: None, lambda: 0.0)
    assert reader.add("http://a.test/sitemap.xml")
    assert added == [("http://a.test/sitemap.xml", 1.0)]


def test_a_push_read_as_the_format_it_is_told():
    with pytest.raises(signals.SignalError, match="not valid JSON"):
        signals.parse_push(b"http://a.test/1\n", form="indexnow")
    with pytest.raises(signals.SignalError, match="RSS or Atom feed, not a urlset"):
        signals.parse_push(b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"/>',
                           form="websub")
    with pytest.raises(ValueError, match="form must be one of"):
        signals.parse_push(b"http://a.test/1\n", form="rss")
    lines = signals.parse_push(b"[http://a.test/1\nhttp://a.test/2 2024-01-01\n", form="lines")
    assert lines.kind == "lines" and lines.dropped == 1
    assert lines.entries == [signals.Entry("http://a.test/2", 1704067200.0)]

"""The test-bed's sitemaps and feed (docs/TESTBED.md): real HTTP on 127.0.0.x, read with the
crawler's own parser (frontier_rate.crawl.signal_sources), checked against the ground truth."""

from __future__ import annotations

import email.utils
import math
import sys
from pathlib import Path

import pytest
from protego import Protego

from frontier_rate.crawl import signal_sources as signals
from frontier_rate.testbed import SIM_EPOCH, Testbed

sys.path.insert(0, str(Path(__file__).parent))
from test_testbed import FakeClock, fetch  # noqa: E402

pytestmark = pytest.mark.timeout(60)


def bed(clock: FakeClock, **kwargs) -> Testbed:
    """16 pages on 8 hosts changing about every 100 simulated seconds (one real s = one sim s)."""
    settings = dict(n_pages=16, n_hosts=8, acceleration=1.0, rate_min=0.01, rate_max=0.01,
                    churn_fraction=0.0, volatile_fraction=0.0, clock=clock, seed=3)
    return Testbed(**{**settings, **kwargs})


def last_change(truth: dict, url: str, now: float) -> float:
    page = next(p for p in truth["pages"] if p["url"] == url)
    return max([0.0, *[c for c in page["change_times"] if c <= now]])


def read(url: str, now: float) -> tuple[dict, signals.Parsed]:
    status, headers, body = fetch(url)
    assert status == 200, (url, status)
    return headers, signals.parse(body, url, now=now)


def test_hosts_get_their_sitemap_modes_from_the_seed():
    clock = FakeClock()
    modes = bed(clock, sitemap_true=0.5, sitemap_lying=0.25).sitemap_modes
    assert sorted(modes) == ["lying"] * 2 + ["none"] * 2 + ["true"] * 4
    assert bed(clock, sitemap_true=0.5, sitemap_lying=0.25).sitemap_modes == modes
    others = {tuple(bed(clock, seed=s, sitemap_true=0.5, sitemap_lying=0.25).sitemap_modes)
              for s in range(6)}
    assert len(others) > 1, "the seed draws which hosts do what"
    assert bed(clock).sitemap_modes == ["plain"] * 8 and bed(clock).feed_host is None
    feed_host = bed(clock, sitemap_true=0.5, sitemap_lying=0.25, feed=True).feed_host
    assert modes[feed_host] == "none", "the feed is on a host without a dated sitemap"
    for kwargs, name in (({"sitemap_true": 1.5}, "sitemap_true"),
                         ({"sitemap_lying": -0.1}, "sitemap_lying"),
                         ({"sitemap_true": 0.75, "sitemap_lying": 0.5}, "sitemap_true \\+"),
                         ({"feed": True, "feed_items": 0}, "feed_items")):
        with pytest.raises(ValueError, match=name):
            bed(clock, **kwargs)


def test_true_sitemaps_give_the_true_last_change_and_lying_ones_the_fetch_time():
    clock = FakeClock()
    with bed(clock, sitemap_true=0.5, sitemap_lying=0.25) as tb:
        for step in (250.0, 333.3):
            clock.t += step
            now = tb.sim_time()
            truth = tb.truth()
            for base, mode in zip(tb.hosts, tb.sitemap_modes, strict=True):
                if mode == "none":
                    continue
                headers, parsed = read(base + "/sitemap.xml", SIM_EPOCH + now)
                assert parsed.kind == "urlset" and not parsed.dropped
                assert len(parsed.entries) == 2
                served = email.utils.parsedate_to_datetime(headers["Date"]).timestamp()
                assert served == math.floor(SIM_EPOCH + now)
                for entry in parsed.entries:
                    expected = {"true": math.floor(SIM_EPOCH + last_change(truth, entry.url, now)),
                                "lying": served}[mode]
                    assert entry.changed_at == expected, (mode, entry)
        changed = [c for p in truth["pages"] for c in p["change_times"] if c <= now]
        assert len(changed) >= 16, "enough changes for the comparison to mean something"


def test_hosts_without_a_sitemap_say_so_in_robots_txt_and_answer_404():
    clock = FakeClock()
    with bed(clock, sitemap_true=0.25, sitemap_lying=0.25) as tb:
        assert tb.sitemap_urls() == [base + "/sitemap.xml" for base, mode
                                     in zip(tb.hosts, tb.sitemap_modes, strict=True)
                                     if mode != "none"]
        for base, mode in zip(tb.hosts, tb.sitemap_modes, strict=True):
            robots = fetch(base + "/robots.txt")[2]
            listed = list(Protego.parse(robots.decode()).sitemaps)
            assert listed == ([] if mode == "none" else [base + "/sitemap.xml"])
            assert signals.robots_sitemaps(robots, base + "/robots.txt") == listed
            assert fetch(base + "/sitemap.xml")[0] == (404 if mode == "none" else 200)
            assert fetch(base + "/feed.xml")[0] == 404, "no feed unless asked for"


def test_a_true_sitemap_answers_304_until_a_page_changes():
    clock = FakeClock()
    with bed(clock, sitemap_true=1.0) as tb:
        clock.t += 150.0
        url = tb.hosts[0] + "/sitemap.xml"
        _, headers, _ = fetch(url)
        assert fetch(url, {"If-None-Match": headers["ETag"]})[0] == 304
        assert fetch(url, {"If-Modified-Since": headers["Last-Modified"]})[0] == 304
        clock.t += 1000.0  # both pages of host 0 have changed by now (rate 0.01/s)
        assert fetch(url, {"If-None-Match": headers["ETag"]})[0] == 200


def test_the_feed_lists_the_latest_changes_with_their_dates():
    clock = FakeClock()
    with bed(clock, n_pages=40, n_hosts=2, feed=True, feed_items=5) as tb:
        assert tb.manifest()["feed"] == tb.feed_url() == tb.hosts[tb.feed_host] + "/feed.xml"
        for step in (40.0, 500.0):
            clock.t += step
            now = tb.sim_time()
            truth = tb.truth()
            _, parsed = read(tb.feed_url(), SIM_EPOCH + now)
            assert parsed.kind == "atom" and not parsed.dropped
            host_pages = [p for p in truth["pages"] if p["host"] == tb.addresses[tb.feed_host]]
            latest = sorted(((last_change(truth, p["url"], now), p["url"]) for p in host_pages
                             if last_change(truth, p["url"], now) > 0), reverse=True)[:5]
            assert latest, "some page of the host changed"
            assert [(e.changed_at, e.url) for e in parsed.entries] == [
                (math.floor(SIM_EPOCH + c), url) for c, url in latest]
        assert len(parsed.entries) == 5
        other = tb.hosts[1 - tb.feed_host]
        assert fetch(other + "/feed.xml")[0] == 404

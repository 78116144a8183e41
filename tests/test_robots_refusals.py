"""A robots.txt answer that refuses the crawler, or is a page of markup without a rule (a bot
wall answering for every path), says nothing of the host's rules: the Crawl-delay known
before stands (``crawl/politeness.HostGate.learn``). Read as "no rules", the host that had
just walled the crawler lost its Crawl-delay in the process's gate until robots.txt was asked
again (a day later by default)."""

from __future__ import annotations

import logging

import pytest

from frontier_rate.crawl.politeness import HostGate
from frontier_rate.crawl.robots_txt import is_robots_txt

ROBOTS = b"User-agent: *\nDisallow: /private\nCrawl-delay: 2\n"
WALL = (b"<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>"
        b"<p>Checking your browser before accessing the site.</p></body></html>")


def _gate() -> HostGate:
    return HostGate(per_host=1, min_delay=0.25, obey_crawl_delay=True,
                    framework_reads_robots=True, robots_ttl=3600.0, max_crawl_delay=60.0,
                    agent="frontier-rate-test")


@pytest.mark.parametrize(("status", "body"), [(200, WALL), (403, WALL), (429, b"Too many"),
                                              (401, b"")])
def test_a_wall_or_refusal_keeps_the_crawl_delay_known(status, body, caplog):
    gate = _gate()
    assert gate.learn("walled.test", 200, ROBOTS, now=0.0) == 2.0
    with caplog.at_level(logging.WARNING, logger="frontier_rate.crawl.politeness"):
        assert gate.learn("walled.test", status, body, now=10.0) is None
        gate.learn("walled.test", status, body, now=20.0)
    assert gate.delay("walled.test") == 2.0
    said = [r.message for r in caplog.records if "walled.test" in r.message]
    assert len(said) == 1 and "Crawl-delay of 2 s is kept" in said[0], said


def test_a_robots_txt_that_drops_its_crawl_delay_or_is_empty_is_believed():
    """The site's own word: rules without a Crawl-delay, an empty file, a 404 (no robots.txt:
    no rules, RFC 9309) drop the delay to the frontier's own; after a wall, a robots.txt
    read again is believed again."""
    for status, body in ((200, b"User-agent: *\nDisallow: /tmp\n"), (200, b""), (404, WALL)):
        gate = _gate()
        gate.learn("site.test", 200, ROBOTS, now=0.0)
        gate.learn("site.test", status, body, now=10.0)
        assert gate.delay("site.test") == 0.25, (status, body)
    gate = _gate()
    gate.learn("site.test", 200, ROBOTS, now=0.0)
    gate.learn("site.test", 200, WALL, now=10.0)
    assert gate.learn("site.test", 200, b"User-agent: *\nCrawl-delay: 5\n", now=20.0) == 5.0


def test_what_reads_as_a_robots_txt():
    assert is_robots_txt(ROBOTS) and is_robots_txt(b"") and is_robots_txt(b"# nothing here\n")
    assert is_robots_txt(b"<!-- generated -->\nUser-agent: *\nAllow: /\n")
    assert not is_robots_txt(WALL)
    assert not is_robots_txt(b"<html><body>Disallowed by policy: contact us</body></html>")

"""RevisitBackend in real Scrapy crawls through scrapy-frontera, in subprocesses.

Each test serves a site on 127.0.0.1 (``tests/scrapy_support/server.py``'s
``ChangingSite``, reused as is), runs ``tests/frontera_support/crawl.py`` with
scrapy-frontera's scheduler and middlewares, ``RevisitBackend`` and the
``KeepAlive`` extension against the session's real Redis, and checks the
site's request log, the spider's records and the frontier's state.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import scrapy

from frontier_rate.engine.frontier import Frontier
from frontier_rate.engine.results import GONE_AFTER

sys.path.insert(0, str(Path(__file__).parent))
from frontera_support.site import HeaderLoggingSite  # noqa: E402
from scrapy_support.server import ChangingSite  # noqa: E402

CRAWL = Path(__file__).parent / "frontera_support" / "crawl.py"
ROOT = Path(__file__).parent.parent
MIN_INTERVAL, MAX_INTERVAL, RUN = 1.0, 1.5, 6.0

pytestmark = pytest.mark.timeout(90)


@dataclass
class Crawl:
    returncode: int
    records: list[dict[str, Any]]
    log: str

    @property
    def closed(self) -> dict[str, Any]:
        closing = [r for r in self.records if r["kind"] == "closed"]
        assert closing, f"spider never closed; log tail:\n{self.log[-3000:]}"
        return closing[-1]


def run_crawl(tmp_path: Path, redis_url: str, namespace: str, seeds: list[str],
              spider: str = "RevisitSpider", settings: dict[str, Any] | None = None) -> Crawl:
    output, log = tmp_path / "records.jsonl", tmp_path / "crawl.log"
    config = {
        "spider": spider,
        "args": {"output": str(output), "seeds": json.dumps(seeds)},
        "settings": {
            "FRONTIER_RATE_REDIS_URL": redis_url,
            "FRONTIER_RATE_NAMESPACE": namespace,
            "FRONTIER_RATE_ESTIMATOR": "interval",  # periodic intervals: countable revisits
            "FRONTIER_RATE_MIN_INTERVAL": MIN_INTERVAL,
            "FRONTIER_RATE_MAX_INTERVAL": MAX_INTERVAL,
            "FRONTIER_RATE_MIN_HOST_DELAY": 0.05,
            "FRONTIER_RATE_BUDGET": 100.0,
            "FRONTIER_RATE_CLOSE_AFTER": RUN,
            "LOG_FILE": str(log),
            "LOG_LEVEL": "DEBUG",
            **(settings or {}),
        },
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    proc = subprocess.run([sys.executable, str(CRAWL), str(path)], cwd=ROOT, timeout=60,
                          capture_output=True, text=True)
    records = [json.loads(line) for line in output.read_text().splitlines()] \
        if output.exists() else []
    text = log.read_text() if log.exists() else ""
    return Crawl(proc.returncode, records, text + proc.stderr)


def tracebacks(log: str) -> list[str]:
    """Log records with a traceback, except tldextract's: Scrapy's cookie middleware makes it
    fetch the public suffix list, which fails offline (it falls back to its snapshot)."""
    records = re.split(r"\n(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[)", log)
    return [r[:5000] for r in records if "Traceback" in r and " [tldextract] " not in r[:40]]


def test_revisits_and_change_detection(tmp_path: Path, redis_url: str, namespace: str) -> None:
    with ChangingSite("127.0.0.1") as site:
        site.set("/", '<a href="/counter">c</a> <a href="/static">s</a> '
                      '<a href="/stamped">t</a> <a href="/missing">m</a>')
        site.set("/counter", "<p>visit {n}</p>", template=True)  # new content on every fetch
        site.set("/static", "<p>same</p>", etag=True)  # conditional revisits -> 304
        site.set("/stamped", '<p>same</p><span class="t">{time}</span>', template=True)
        crawl = run_crawl(tmp_path, redis_url, namespace, [site.url("/")], settings={
            # gaps are checked against the due times: no early revisits to fill the budget
            "FRONTIER_RATE_FILL_BUDGET": False,
            "FRONTIER_RATE_FINGERPRINT": "text",
            "FRONTIER_RATE_STRIP_PATTERNS": [r'<span class="t">[^<]*</span>'],
        })
        hits = {path: site.hits_for(path) for path in ("/", "/counter", "/static", "/stamped",
                                                       "/missing")}
    assert crawl.returncode == 0, crawl.log[-3000:]
    assert crawl.closed["reason"] == "finished"
    assert "Traceback" not in crawl.log, crawl.log[crawl.log.index("Traceback") - 2000:][:5000]

    # Revisits: a page discovered ~immediately, then every 1-1.5 s for RUN seconds.
    for path in ("/", "/counter", "/static", "/stamped"):
        assert len(hits[path]) >= 3, (path, [h.status for h in hits[path]], crawl.log[-3000:])
        times = [h.time for h in hits[path]]
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        # The engine plans >= MIN_INTERVAL between fetches (allow 50 ms of clock/IO jitter);
        # KeepAlive wakes the idle engine when a page falls due, so no gap is near Scrapy's
        # 5 s heartbeat (MAX_INTERVAL + 1 s poll bound + 1 s of slack on a busy machine).
        assert min(gaps) >= MIN_INTERVAL - 0.05, (path, gaps)
        assert max(gaps) <= MAX_INTERVAL + 2.0, (path, gaps)

    # Conditional requests: after the first fetch /static carries If-None-Match and gets 304.
    static = hits["/static"]
    assert static[0].if_none_match is None and static[0].status == 200
    assert all(h.if_none_match and h.status == 304 for h in static[1:])
    # 404: retried after the backoff (capped by MAX_INTERVAL), gone after the third, never again.
    assert [h.status for h in hits["/missing"]] == [404] * GONE_AFTER

    with Frontier(redis_url, namespace=namespace, estimator="interval") as frontier:
        pages = {p["url"].removeprefix(site.url("")): p for p in frontier.iter_pages()}
        counter, static_page, stamped = pages["/counter"], pages["/static"], pages["/stamped"]
        # Change detection, checked against the site's own log.
        assert counter["fetches"] == len(hits["/counter"])
        assert counter["changes"] == counter["fetches"] - 1  # every fetch after the first
        assert static_page["fetches"] == len(static) and static_page["changes"] == 0
        assert stamped["fetches"] == len(hits["/stamped"]) and stamped["changes"] == 0
        assert pages["/missing"]["status"] == "gone"
    stats = crawl.closed["stats"]
    assert stats["frontier_rate/not_modified"] == len(static) - 1
    assert stats["frontier_rate/changed"] == counter["changes"]
    assert stats["frontier_rate/failed"] == GONE_AFTER and stats["frontier_rate/gone"] == 1
    responses = [r for r in crawl.records if r["kind"] == "response"]
    assert responses and all(r["lease"] for r in responses)  # the lease reached the spider


def test_start_only_spider_cannot_seed_the_frontier(tmp_path: Path, redis_url: str,
                                                    namespace: str) -> None:
    """scrapy-frontera 0.3.0 seeds the frontier from ``spider.start_requests()``.

    Scrapy 2.19's Spider has no default ``start_requests`` any more, so a
    spider that only defines ``async def start()`` fails at scheduler open
    when FRONTERA_SCHEDULER_START_REQUESTS_TO_FRONTIER is set. Scrapy 2.13's
    deprecated default ``start_requests`` yields ``start_urls`` (none here),
    and frontera refuses the empty seed list. Either way nothing is fetched;
    this pins that behaviour for docs/FRONTERA.md's limits section.
    """
    with ChangingSite("127.0.0.1") as site:
        site.set("/", "<p>home</p>")
        crawl = run_crawl(tmp_path, redis_url, namespace, [site.url("/")],
                          spider="StartOnlySpider", settings={"FRONTIER_RATE_CLOSE_AFTER": 2})
        hits = site.hits_for("/")
    if hasattr(scrapy.Spider, "start_requests"):  # 2.13 has it (the CI's lowest run), 2.19 not
        assert "AssertionError: Empty seeds list" in crawl.log, crawl.log[-3000:]
    else:
        assert "AttributeError: 'StartOnlySpider' object has no attribute 'start_requests'" \
            in crawl.log
    assert hits == []


def test_start_requests_outside_the_frontier_are_fetched_once(
        tmp_path: Path, redis_url: str, namespace: str) -> None:
    """Without START_REQUESTS_TO_FRONTIER, ``start()`` requests bypass the frontier.

    They are fetched once from Scrapy's own queue (their responses carry no
    lease and are not observed); the links their callbacks yield enter the
    frontier and are revisited.
    """
    with ChangingSite("127.0.0.1") as site:
        site.set("/", '<a href="/page">p</a>')
        site.set("/page", "<p>page</p>")
        crawl = run_crawl(tmp_path, redis_url, namespace, [site.url("/")],
                          spider="StartOnlySpider",
                          settings={"FRONTERA_SCHEDULER_START_REQUESTS_TO_FRONTIER": False,
                                    "FRONTIER_RATE_CLOSE_AFTER": 3.5})
        root, page = site.hits_for("/"), site.hits_for("/page")
    assert crawl.closed["reason"] == "finished", crawl.log[-3000:]
    assert len(root) == 1
    assert len(page) >= 2  # discovered, then revisited every 1-1.5 s
    assert crawl.closed["stats"]["frontier_rate/untracked"] == 1


def test_without_keepalive_the_spider_stops_after_one_round(
        tmp_path: Path, redis_url: str, namespace: str) -> None:
    """scrapy-frontera closes an idle spider even though revisits are scheduled.

    Without the KeepAlive extension the crawl ends as soon as nothing is due
    locally, long before FRONTIER_RATE_CLOSE_AFTER: no page is revisited. The
    seed is fetched even on the background driver: the first
    ``get_next_requests`` waits once for the worker's first lease rounds, so
    scrapy-frontera's first poll does not find the frontier empty while the
    seed is still on its way to Redis.
    """
    with ChangingSite("127.0.0.1") as site:
        site.set("/", '<a href="/page">p</a>')
        site.set("/page", "<p>page</p>")
        crawl = run_crawl(tmp_path, redis_url, namespace, [site.url("/")],
                          settings={"EXTENSIONS": {}, "FRONTIER_RATE_CLOSE_AFTER": 30})
        root, page = site.hits_for("/"), site.hits_for("/page")
    assert crawl.closed["reason"] == "finished", crawl.log[-3000:]
    assert len(root) == 1 and len(page) <= 1
    assert "redis i/o=background" in crawl.log
    with Frontier(redis_url, namespace=namespace, estimator="interval") as frontier:
        assert frontier.next_due_time() is not None  # the revisits were scheduled all along


def test_304_reaches_a_spider_errback_and_is_still_observed(
        tmp_path: Path, redis_url: str, namespace: str) -> None:
    """A 304 is an HttpError for Scrapy: a spider ``errback`` sees it, the frontier observes it."""
    with ChangingSite("127.0.0.1") as site:
        site.set("/", "<p>same</p>", etag=True)
        crawl = run_crawl(tmp_path, redis_url, namespace, [site.url("/")], spider="ErrbackSpider",
                          settings={"FRONTIER_RATE_CLOSE_AFTER": 3.5})
        hits = site.hits_for("/")
    statuses = [h.status for h in hits]
    assert statuses[0] == 200 and statuses[1:] and set(statuses[1:]) == {304}
    errors = [r for r in crawl.records if r["kind"] == "error"]
    assert [(e["error"], e["status"]) for e in errors] == [("HttpError", 304)] * (len(hits) - 1)
    assert crawl.closed["stats"]["frontier_rate/not_modified"] == len(hits) - 1


def test_requests_keep_what_the_spider_gave_and_post_cycles_end(
        tmp_path: Path, redis_url: str, namespace: str) -> None:
    """One crawl through scrapy-frontera: the seed's cookie and header reach the server on
    every visit; its bytes and tuple meta and tuple cb_kwargs reach the callback on every
    revisit; POST forms linking in a cycle are each fetched once (before: fetched over and
    over until the crawl closed, and the seed's bytes meta stopped the crawl at open); a
    ``dont_revisit`` GET yielded on every visit is fetched once, a ``dont_filter`` POST each
    time it is yielded, as Scrapy's dupefilter would.
    """
    with HeaderLoggingSite("127.0.0.1") as site:
        site.set("/", "<p>home</p>", template=True)
        for path in ("/form", "/form2", "/once", "/again"):
            site.set(path, "<p>form</p>")
        crawl = run_crawl(tmp_path, redis_url, namespace, [site.url("/")], spider="FidelitySpider",
                          settings={"FRONTIER_RATE_CLOSE_AFTER": 4.5,
                                    "FRONTERA_SCHEDULER_REQUEST_CALLBACKS_TO_FRONTIER":
                                        ["parse_home", "parse_form"]})
        hits = {path: site.hits_for(path) for path in ("/", "/form", "/form2", "/once", "/again")}
        home_headers = site.headers_for("/")
    assert crawl.closed["reason"] == "finished", crawl.log[-3000:]
    assert not tracebacks(crawl.log), tracebacks(crawl.log)[0]
    assert len(hits["/"]) >= 3, crawl.log[-3000:]  # fetched, then revisited every 1-1.5 s
    assert all(h.get("Cookie") == "session=abc" and h.get("X-Token") == "t1"
               for h in home_headers), home_headers
    homes = [r for r in crawl.records if r["kind"] == "home"]
    assert len(homes) == len(hits["/"]) and all(r["lease"] for r in homes)
    assert {(r["kwarg"], r["raw"], r["pair"], r["label"]) for r in homes} == {
        ("('home', 1)", "b'\\x00\\xff'", "(1, 'two')", "home")}
    assert [(len(hits[p]), {h.method for h in hits[p]}) for p in ("/form", "/form2", "/once")] \
        == [(1, {"POST"}), (1, {"POST"}), (1, {"GET"})]
    assert 2 <= len(hits["/again"]) <= len(hits["/"])  # the last one may be cut by the close
    stats = crawl.closed["stats"]
    assert stats["frontier_rate/one_off_duplicate"] >= len(hits["/"]) - 1

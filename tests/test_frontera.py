"""RevisitBackend through frontera's own FrontierManager, with a virtual clock.

No network: requests and responses are frontera model objects built the way
scrapy-frontera builds them (Scrapy meta under ``meta[b"scrapy_meta"]``,
callback names as bytes). State lives in the session's real Redis. The
clock is virtual, so due times, backoffs and close conditions are exact.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from frontera.core.manager import FrontierManager
from frontera.core.models import Request, Response
from frontera.settings import Settings
from frontera.utils.tester import BaseDownloaderSimulator, FrontierTester

from frontier_rate.crawl.politeness import HOLD_FRACTION, LEASE_LAPSED, SEND_BY_KEY
from frontier_rate.engine.frontier import Frontier
from frontier_rate.engine.results import BACKOFF_BASE
from frontier_rate.frontera import (
    LEASE_KEY,
    RESULT_KEY,
    RevisitBackend,
    lease_of,
    pack,
    page_meta,
    page_request,
    unpack,
)

sys.path.insert(0, str(Path(__file__).parent))
from frontera_support.graph import Graph  # noqa: E402
from reliability_support.proxy import RedisProxy  # noqa: E402

pytestmark = pytest.mark.timeout(60)

MIN_INTERVAL = 10.0
MAX_INTERVAL = 20.0


class VirtualClock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


class Counter:
    """A stats manager as scrapy-frontera passes one (``STATS_MANAGER``): plain counters."""

    def __init__(self) -> None:
        self.values: dict[str, float] = {}

    def inc_value(self, key: str, value: float = 1) -> None:
        self.values[key] = self.values.get(key, 0) + value

    def set_value(self, key: str, value: float) -> None:
        self.values[key] = value


def make_manager(redis_url: str, namespace: str, clock: VirtualClock | None,
                 **extra) -> FrontierManager:
    """A FrontierManager over RevisitBackend; ``clock=None``: the real clock (background driver)."""
    settings = Settings(attributes={
        "BACKEND": "frontier_rate.frontera.RevisitBackend",
        "FRONTIER_RATE_REDIS_URL": redis_url,
        "FRONTIER_RATE_NAMESPACE": namespace,
        **({"FRONTIER_RATE_CLOCK": clock} if clock is not None else {}),
        # "interval" plans periodic intervals, so due times are exact, not exponential draws.
        "FRONTIER_RATE_ESTIMATOR": "interval",
        "FRONTIER_RATE_MIN_INTERVAL": MIN_INTERVAL,
        "FRONTIER_RATE_MAX_INTERVAL": MAX_INTERVAL,
        "FRONTIER_RATE_MIN_HOST_DELAY": 0.0,
        "FRONTIER_RATE_BUDGET": 100.0,
        # due times exactly: tokens no due page can use are not spent early (tested apart)
        "FRONTIER_RATE_FILL_BUDGET": False,
        # pages believed to change every second: a revisit after MIN_INTERVAL is worth it (at
        # the default prior of one change a day it waits for a 5% chance, 74 min: issue 60)
        "FRONTIER_RATE_PRIOR_RATE": 1.0,
        **extra,
    })
    return FrontierManager.from_settings(settings)


@pytest.fixture
def manager(redis_url: str, namespace: str, clock: VirtualClock):
    manager = make_manager(redis_url, namespace, clock)
    yield manager
    manager.stop()


def scrapy_request(url: str, *, meta: dict | None = None, callback: bytes | None = b"parse",
                   method: bytes = b"GET", headers: dict | None = None) -> Request:
    """A frontera Request as scrapy-frontera's RequestConverter.to_frontier builds it."""
    return Request(url, method=method, headers=headers or {}, meta={
        b"scrapy_callback": callback, b"scrapy_errback": None, b"scrapy_cb_kwargs": {},
        b"scrapy_meta": dict(meta or {}), b"scrapy_body": b"", b"origin_is_frontier": True,
    })


def respond(manager: FrontierManager, request: Request, status: int = 200, body: bytes = b"",
            headers: dict | None = None) -> Response:
    response = Response(request.url, status_code=status, headers=headers or {}, body=body,
                        request=request)
    manager.page_crawled(response)
    return response


def urls(requests: list[Request]) -> list[str]:
    return sorted(r.url for r in requests)


def backend_of(manager: FrontierManager) -> RevisitBackend:
    assert isinstance(manager.backend, RevisitBackend)
    return manager.backend


def test_budget_filling_hands_out_a_page_before_it_is_due(redis_url, namespace, clock) -> None:
    """With FRONTIER_RATE_FILL_BUDGET on (the default for `interval`), a budget with tokens
    and nothing due leases the page that falls due next, once MIN_INTERVAL has passed.

    A budget of 0.2 fetches/s plans the one page 5 s apart; MIN_INTERVAL is 2 s, so 4 s
    after its fetch the page is past MIN_INTERVAL and 1 s before its due time.
    """
    manager = make_manager(redis_url, namespace, clock, FRONTIER_RATE_FILL_BUDGET=True,
                           FRONTIER_RATE_BUDGET=0.2, FRONTIER_RATE_MIN_INTERVAL=2.0)
    try:
        url = "http://site.test/a"
        manager.add_seeds([scrapy_request(url)])
        (first,) = manager.get_next_requests(10, key_type="domain", overused_keys=[])
        respond(manager, first, body=b"<p>v1</p>")
        due = backend_of(manager).frontier.page(url)["next_due"]
        assert due == pytest.approx(clock.now + 5.0)
        clock.advance(4.0)
        early = manager.get_next_requests(10, key_type="domain", overused_keys=[])
        assert urls(early) == [url]
        assert early[0].meta[b"scrapy_meta"][LEASE_KEY]["due"] == pytest.approx(due)
        assert clock.now < due
    finally:
        manager.stop()


def test_seed_fetch_wait_revisit(manager: FrontierManager, clock: VirtualClock) -> None:
    """Seeds go out once, nothing comes back before the due time, the revisit after it."""
    assert backend_of(manager).driver == "inline"  # a virtual clock: Redis I/O in the caller
    url = "http://site.test/a"
    manager.add_seeds([scrapy_request(url, meta={"category": "news"}, callback=b"parse_item",
                                      headers={b"Accept": [b"text/html"]})])
    first = manager.get_next_requests(10, key_type="domain", overused_keys=[])
    assert urls(first) == [url]
    request = first[0]
    assert request.meta[b"scrapy_callback"] == b"parse_item"
    assert request.meta[b"scrapy_meta"]["category"] == "news"
    assert request.meta[b"scrapy_meta"][LEASE_KEY]["url"] == url
    assert request.headers[b"Accept"] == [b"text/html"]
    assert b"If-None-Match" not in request.headers  # no validators known yet
    assert manager.get_next_requests(10, key_type="domain", overused_keys=[]) == []  # leased

    response = respond(manager, request, body=b"<p>v1</p>", headers={b"ETag": [b'"v1"']})
    # a first fetch: its copy is new (the estimator counts no change), as in the Scrapy adapter
    assert response.meta[RESULT_KEY]["new"] is True and response.meta[RESULT_KEY]["changed"] is True
    frontier = backend_of(manager).frontier
    page = frontier.page(url)
    assert page["fetches"] == 1 and page["etag"] == '"v1"'
    due = page["next_due"]
    assert due == pytest.approx(clock.now + MIN_INTERVAL, abs=1e-6)

    clock.advance(due - clock.now - 0.5)
    assert manager.get_next_requests(10, key_type="domain", overused_keys=[]) == []
    clock.advance(1.0)
    second = manager.get_next_requests(10, key_type="domain", overused_keys=[])
    assert urls(second) == [url]
    assert second[0].headers[b"If-None-Match"] == b'"v1"'  # conditional revisit
    assert second[0].headers[b"Accept"] == [b"text/html"]  # as given
    assert second[0].meta[b"scrapy_callback"] == b"parse_item"

    response = respond(manager, second[0], body=b"<p>v2</p>", headers={b"ETag": [b'"v2"']})
    assert response.meta[RESULT_KEY]["changed"] is True
    page = frontier.page(url)
    assert (page["fetches"], page["changes"], page["etag"]) == (2, 1, '"v2"')

    clock.advance(page["next_due"] - clock.now + 0.1)
    third = manager.get_next_requests(10, key_type="domain", overused_keys=[])
    response = respond(manager, third[0], status=304)
    assert response.meta[RESULT_KEY] == {**response.meta[RESULT_KEY], "changed": False,
                                         "not_modified": True}
    page = frontier.page(url)
    assert (page["fetches"], page["changes"], page["etag"]) == (3, 1, '"v2"')


def drain(manager: FrontierManager, overused: list[str], key_type: str = "domain",
          calls: int = 6) -> list[Request]:
    """Everything due, over several calls (the engine leases one page per host per call)."""
    out: list[Request] = []
    for _ in range(calls):
        out += manager.get_next_requests(10, key_type=key_type, overused_keys=overused)
    return out


def test_overused_keys_are_skipped_then_served(manager: FrontierManager) -> None:
    busy = [f"http://busy.test/{i}" for i in range(3)]
    calm = [f"http://calm.test/{i}" for i in range(2)]
    manager.add_seeds([scrapy_request(u) for u in busy + calm])
    assert urls(drain(manager, ["busy.test"])) == sorted(calm)
    # busy.test's leased pages are held while it stays overused.
    assert manager.backend._buffer and not manager.finished
    assert urls(drain(manager, [])) == sorted(busy)
    assert manager.get_next_requests(10, key_type="domain", overused_keys=[]) == []


def test_overused_ip_keys(manager: FrontierManager) -> None:
    """key_type "ip": an IP-literal host is its own slot key (Scrapy's DNS cache is empty)."""
    manager.add_seeds([scrapy_request("http://127.0.0.9:8000/x"),
                       scrapy_request("http://127.0.0.10:8000/y")])
    assert urls(drain(manager, ["127.0.0.9"], key_type="ip")) == ["http://127.0.0.10:8000/y"]


def test_404_three_times_is_gone(manager: FrontierManager, clock: VirtualClock) -> None:
    url = "http://site.test/missing"
    manager.add_seeds([scrapy_request(url)])
    frontier = backend_of(manager).frontier
    for attempt in range(1, 4):
        got = manager.get_next_requests(10, key_type="domain", overused_keys=[])
        assert urls(got) == [url], f"attempt {attempt}"
        respond(manager, got[0], status=404)
        page = frontier.page(url)
        assert page["fails"] == attempt
        if attempt < 3:
            assert page["status"] != "gone"
            # Backoff 60 s x 2^(n-1), capped by max_interval (engine.failed).
            wait = min(BACKOFF_BASE * 2 ** (attempt - 1), MAX_INTERVAL)
            assert page["next_due"] == pytest.approx(clock.now + wait, abs=1e-6)
            clock.advance(wait + 0.1)
    assert frontier.page(url)["status"] == "gone"
    clock.advance(10 * MAX_INTERVAL)
    assert manager.get_next_requests(10, key_type="domain", overused_keys=[]) == []
    assert manager.finished  # nothing scheduled any more


def test_request_error_retries_later(manager: FrontierManager, clock: VirtualClock) -> None:
    url = "http://site.test/flaky"
    manager.add_seeds([scrapy_request(url)])
    got = manager.get_next_requests(10, key_type="domain", overused_keys=[])
    manager.request_error(got[0], "ConnectionRefusedError")
    page = backend_of(manager).frontier.page(url)
    assert (page["status"], page["fails"], page["fetches"]) == ("retrying", 1, 0)  # failed before its first fetch
    wait = page["next_due"] - clock.now
    assert wait == pytest.approx(min(BACKOFF_BASE, MAX_INTERVAL), abs=1e-6)
    clock.advance(wait - 0.5)
    assert manager.get_next_requests(10, key_type="domain", overused_keys=[]) == []
    clock.advance(1.0)
    retry = manager.get_next_requests(10, key_type="domain", overused_keys=[])
    assert urls(retry) == [url]
    respond(manager, retry[0], body=b"ok")
    page = backend_of(manager).frontier.page(url)
    assert (page["status"], page["fails"], page["fetches"]) == ("active", 0, 1)


def test_a_request_kept_back_past_its_lease_is_no_failure_and_carries_its_send_by(
        manager: FrontierManager, clock: VirtualClock) -> None:
    url = "http://site.test/kept-back"
    manager.add_seeds([scrapy_request(url)])
    got = manager.get_next_requests(10, key_type="domain", overused_keys=[])
    timeout = backend_of(manager).frontier.lease_timeout
    assert got[0].meta[b"scrapy_meta"][SEND_BY_KEY] == pytest.approx(
        clock.now + HOLD_FRACTION * timeout, abs=1e-3)  # the send hook's limit
    manager.request_error(got[0], LEASE_LAPSED)  # the send hook did not send it
    page = backend_of(manager).frontier.page(url)
    assert (page["fails"], page["fetches"]) == (0, 0)  # not counted as a failed fetch
    clock.advance(timeout + 1)  # its lease expires: due again, at once
    assert urls(manager.get_next_requests(10, key_type="domain", overused_keys=[])) == [url]


def test_links_extracted_adds_pages_with_their_request(manager: FrontierManager) -> None:
    seed = scrapy_request("http://site.test/")
    manager.add_seeds([seed])
    [got] = manager.get_next_requests(10, key_type="domain", overused_keys=[])
    respond(manager, got, body=b"index")
    # A spider that copies response.meta into its links also copies the lease and
    # per-fetch keys: they must not be stored with the new page.
    copied = dict(got.meta[b"scrapy_meta"], download_latency=0.1, depth=1)
    links = [scrapy_request("http://site.test/p1", meta=copied, callback=b"parse_page"),
             scrapy_request("mailto:someone@site.test"),
             scrapy_request("http://site.test/form", method=b"POST")]
    links[0].meta[b"scrapy_cb_kwargs"] = {"section": "p"}
    manager.links_extracted(got, links)
    out = manager.get_next_requests(10, key_type="domain", overused_keys=[])
    by_url = {r.url: r for r in out}
    # the mailto: link is no page: handed out once, as a one-off (Scrapy's downloader says
    # what it makes of it), like the POST
    assert sorted(by_url) == ["http://site.test/form", "http://site.test/p1",
                              "mailto:someone@site.test"]
    assert by_url["http://site.test/form"].method == b"POST"  # one-off, handed out once
    p1 = by_url["http://site.test/p1"]
    assert p1.meta[b"scrapy_callback"] == b"parse_page"
    assert p1.meta[b"scrapy_cb_kwargs"] == {"section": "p"}
    assert p1.meta[b"scrapy_meta"]["depth"] == 1
    assert "download_latency" not in p1.meta[b"scrapy_meta"]
    assert lease_of(p1).url == "http://site.test/p1"  # its own lease, not the copied one
    assert manager.get_next_requests(10, key_type="domain", overused_keys=[]) == []


def test_non_json_meta_is_fetched_once_and_good_links_kept(
        manager: FrontierManager, caplog: pytest.LogCaptureFixture) -> None:
    """As the Scrapy scheduler: a request the frontier cannot store is fetched once, named
    in a WARNING; it is not a page (a second poll does not hand it out again)."""
    good = scrapy_request("http://site.test/good")
    bad = scrapy_request("http://site.test/bad", meta={"tags": {"a", "set"}})
    manager.add_seeds([bad, good])
    assert re.search(r"<GET http://site.test/bad> is fetched once, not revisited: .*"
                     r"meta\['tags'\]", caplog.text)
    assert sorted(urls(manager.get_next_requests(10, key_type="domain", overused_keys=[]))) \
        == ["http://site.test/bad", "http://site.test/good"]
    assert manager.backend.frontier.page("http://site.test/bad") is None


def test_foreign_lease_is_ignored(manager: FrontierManager) -> None:
    """A response whose request carries another page's lease changes nothing."""
    manager.add_seeds([scrapy_request("http://site.test/a")])
    [got] = manager.get_next_requests(10, key_type="domain", overused_keys=[])
    other = scrapy_request("http://site.test/unrelated", meta=got.meta[b"scrapy_meta"])
    assert lease_of(other) is None
    respond(manager, other, body=b"x")
    assert backend_of(manager).frontier.page("http://site.test/a")["fetches"] == 0
    # A redirect keeps the lease: the original URL is in redirect_urls.
    redirected = scrapy_request("http://site.test/a-moved",
                                meta={**got.meta[b"scrapy_meta"],
                                      "redirect_urls": ["http://site.test/a"]})
    respond(manager, redirected, body=b"x")
    assert backend_of(manager).frontier.page("http://site.test/a")["fetches"] == 1


def test_strip_patterns_ignore_volatile_parts(redis_url: str, namespace: str,
                                              clock: VirtualClock) -> None:
    manager = make_manager(redis_url, namespace, clock, FRONTIER_RATE_FINGERPRINT="text",
                           FRONTIER_RATE_STRIP_PATTERNS=r'["generated at [0-9:]+"]')
    try:
        url = "http://site.test/a"
        manager.add_seeds([scrapy_request(url)])
        bodies = [b"<p>News</p><i>generated at 10:00</i>", b"<p>News</p><i>generated at 10:05</i>",
                  b"<div><p>News!</p></div><i>generated at 10:09</i>"]
        changed = []
        for body in bodies:
            [got] = manager.get_next_requests(10, key_type="domain", overused_keys=[])
            changed.append(respond(manager, got, body=body).meta[RESULT_KEY]["changed"])
            clock.advance(MAX_INTERVAL + 1)
        assert changed == [True, False, True]  # the first copy is new, then text decides
    finally:
        manager.stop()


def test_content_rules_say_what_counts_and_an_unmatched_selector_is_a_failed_fetch(
        redis_url: str, namespace: str, clock: VirtualClock, caplog) -> None:
    manager = make_manager(redis_url, namespace, clock,
                           FRONTIER_RATE_CONTENT={"site.test": "div.product"},
                           FRONTIER_RATE_IGNORE_TEXT=[r"\d+ watching"])
    try:
        page, gone = "http://site.test/hat", "http://other.test/hat"
        manager.add_seeds([scrapy_request(page),
                           scrapy_request(gone, meta={"frontier_rate_content": "#sold-out"})])
        bodies = [b"<aside>Trending: scarves</aside><div class='product'>Hat 10 (3 watching)</div>",
                  b"<aside>Trending: gloves</aside><div class='product'>Hat 10 (9 watching)</div>",
                  b"<aside>Trending: gloves</aside><div class='product'>Hat 12 (9 watching)</div>"]
        changed, failed = [], 0
        for body in bodies:
            with caplog.at_level(logging.WARNING):
                for got in manager.get_next_requests(10, key_type="domain", overused_keys=[]):
                    if got.url == page:
                        changed.append(respond(manager, got, body=body,
                                               headers={"Content-Type": "text/html"})
                                       .meta[RESULT_KEY]["changed"])
                    else:
                        failed += 1
                        respond(manager, got, body=body, headers={"Content-Type": "text/html"})
            clock.advance(MAX_INTERVAL + 1)
        assert changed == [True, False, True]  # the aside and the watchers never count
        assert failed >= 1 and backend_of(manager).frontier.page(gone)["fails"] >= 1
        said = [r for r in caplog.records if "'#sold-out' matched nothing" in r.getMessage()]
        assert len(said) == 1 and said[0].levelno == logging.WARNING
    finally:
        manager.stop()


@pytest.mark.parametrize("shared", [True, False])
def test_a_restarted_backend_compares_with_the_copies_fetched_before_when_shared(
        redis_url: str, namespace: str, clock: VirtualClock, shared: bool) -> None:
    """``FRONTIER_RATE_SHARED_PAGE_MEMORY``: the backend stops, the page's next copy has the
    same words with a paragraph cut in two, and a new backend on the namespace gets it:
    with the page's last copy in Redis that is no change; without, a new fingerprint."""
    url = "http://site.test/tos"
    terms = ('<html><body><div class="c%d"><h1>Terms of service</h1>%s<p>Governing law: '
             'the courts of Paris.</p></div></body></html>')
    one = "<p>These terms apply to every user. Read them well.</p>"
    two = "<p>These terms apply to every user.</p><p>Read them well.</p>"
    changed = []
    for copies in ([one, one], [two]):
        manager = make_manager(redis_url, namespace, clock,
                               FRONTIER_RATE_SHARED_PAGE_MEMORY=shared)
        try:
            manager.add_seeds([scrapy_request(url)])
            for token, text in enumerate(copies):
                [got] = manager.get_next_requests(10, key_type="domain", overused_keys=[])
                body = (terms % (token, text)).encode()
                changed.append(respond(manager, got, body=body, headers={
                    "Content-Type": "text/html"}).meta[RESULT_KEY]["changed"])
                clock.advance(MAX_INTERVAL + 1)
        finally:
            manager.stop()
    assert changed == [True, False, not shared]


def test_the_backend_detects_as_the_scheduler_does_a_repeat_counts_a_move_does_not(
        redis_url: str, namespace: str, clock: VirtualClock) -> None:
    """The backend's detection is the ``detection`` layer's with its memory in Redis, as the
    Scrapy scheduler's (issue 59 item 5): across restarts, the paragraphs in another order
    are no change, one paragraph there twice is one (item 2: multisets of segments)."""
    url = "http://site.test/tos"
    paragraphs = ["<p>These terms apply to every user. Read them well.</p>",
                  "<p>We may change these terms and will tell you by e-mail.</p>",
                  "<p>Governing law: the courts of Paris.</p>"]
    changed = []
    for token, parts in enumerate((paragraphs, paragraphs[::-1], [*paragraphs, paragraphs[1]])):
        manager = make_manager(redis_url, namespace, clock)
        try:
            manager.add_seeds([scrapy_request(url)])
            [got] = manager.get_next_requests(10, key_type="domain", overused_keys=[])
            body = (f'<html><body><div class="c{token}"><h1>Terms of service</h1>'
                    f'{"".join(parts)}</div></body></html>').encode()
            changed.append(respond(manager, got, body=body, headers={
                "Content-Type": "text/html"}).meta[RESULT_KEY]["changed"])
            clock.advance(MAX_INTERVAL + 1)
        finally:
            manager.stop()
    assert changed == [True, False, True]


def test_finished_and_close_conditions(redis_url: str, namespace: str,
                                       clock: VirtualClock) -> None:
    manager = make_manager(redis_url, namespace, clock)
    assert manager.finished  # empty frontier: nothing scheduled
    manager.add_seeds([scrapy_request("http://site.test/a")])
    assert not manager.finished
    [got] = manager.get_next_requests(10, key_type="domain", overused_keys=[])
    respond(manager, got, body=b"a")
    clock.advance(5 * MAX_INTERVAL)
    assert not manager.finished  # a revisit is scheduled: a revisiting crawl never finishes
    manager.stop()

    idle = make_manager(redis_url, namespace, clock, FRONTIER_RATE_CLOSE_AFTER="idle")
    assert not idle.finished  # the page is due
    [got] = idle.get_next_requests(10, key_type="domain", overused_keys=[])
    respond(idle, got, body=b"a")
    clock.advance(1.0)
    assert idle.finished  # next due in MIN_INTERVAL: "idle" stops here
    idle.stop()

    timed = make_manager(redis_url, namespace, clock, FRONTIER_RATE_CLOSE_AFTER="30")
    assert not timed.finished
    assert timed.backend.seconds_to_wake() <= 1.0
    clock.advance(30.0)
    assert timed.finished
    timed.stop()


def test_state_is_shared_with_other_frontiers(manager: FrontierManager, redis_url: str,
                                              namespace: str, clock: VirtualClock) -> None:
    """The CLI (or a Scrapy crawler) on the same namespace sees the backend's pages."""
    manager.add_seeds([scrapy_request("http://site.test/shared", meta={"frontier_rate_weight": 3})])
    [got] = manager.get_next_requests(10, key_type="domain", overused_keys=[])
    respond(manager, got, body=b"x")
    with Frontier(redis_url, namespace=namespace, estimator="interval", clock=clock) as other:
        page = other.page("http://site.test/shared")
        assert page["weight"] == 3.0 and page["fetches"] == 1
        stored = page["meta"]["fr"]["m"]["$k"]  # pack()ed frontera meta, readable keys
        assert stored["scrapy_callback"] == {"$b": "cGFyc2U="}  # b"parse"
        assert stored["scrapy_meta"] == {"frontier_rate_weight": 3}
        assert other.stats()["pages"] == 1


@pytest.mark.parametrize(("name", "value", "message"), [
    ("FRONTIER_RATE_BUDGET", "lots", "FRONTIER_RATE_BUDGET='lots'"),
    ("FRONTIER_RATE_CLOSE_AFTER", "-3", "FRONTIER_RATE_CLOSE_AFTER='-3'"),
    ("FRONTIER_RATE_STRIP_PATTERNS", "[unclosed", "FRONTIER_RATE_STRIP_PATTERNS"),
    ("FRONTIER_RATE_CONDITIONAL", "maybe", "FRONTIER_RATE_CONDITIONAL='maybe'"),
    ("FRONTIER_RATE_CLOCK", "no.such.module.clock", "FRONTIER_RATE_CLOCK"),
    ("FRONTIER_RATE_FRONTERA_DRIVER", "thread", "FRONTIER_RATE_FRONTERA_DRIVER='thread'"),
    ("FRONTIER_RATE_ESTIMATOR", "naive", "estimator 'naive'"),  # the engine's message
])
def test_bad_settings_name_the_setting(redis_url: str, namespace: str, name: str, value: str,
                                       message: str) -> None:
    settings = {"FRONTIER_RATE_REDIS_URL": redis_url, "FRONTIER_RATE_NAMESPACE": namespace,
                name: value}
    with pytest.raises(ValueError, match=message.replace("[", r"\[")):
        RevisitBackend(settings).frontier_start()


def test_bad_arguments(manager: FrontierManager) -> None:
    with pytest.raises(ValueError, match="max_n_requests"):
        manager.backend.get_next_requests(-1)
    with pytest.raises(ValueError, match="key_type"):
        manager.backend.get_next_requests(1, key_type="slot")
    manager.add_seeds([scrapy_request("http://site.test/w", meta={"frontier_rate_weight": 0})])
    assert manager.backend.frontier.page("http://site.test/w") is None  # fetched once only


CYCLE = {  # POST forms linking to each other and to themselves, as in frontera's SITE_03 / 09
    "http://a.test/": ["http://a.test/1", "http://a.test/2", "http://b.test/"],
    "http://a.test/1": ["http://a.test/", "http://a.test/1", "http://a.test/2#frag"],
    "http://a.test/2": ["http://a.test/1", "http://b.test/"],
    "http://b.test/": ["http://a.test/", "http://b.test/"],
    "http://a.test/2#frag": ["http://a.test/"],
}


def run_tester(manager: FrontierManager, tester: FrontierTester, cap: int = 100) -> list[str]:
    """frontera's FrontierTester loop (seeds, then poll / download / report until nothing
    comes), bounded: a backend that keeps handing out requests fails instead of hanging."""
    tester._add_seeds()
    sent: list[str] = []
    for _ in range(cap):
        requests, _, _ = tester._run_iteration()
        sent += [r.url for r in requests]
        if not requests and tester.downloader_simulator.idle():
            return sent
    raise AssertionError(f"no end after {cap} polls: {len(sent)} requests, {len(set(sent))} URLs")


@pytest.mark.parametrize("max_next", [1, 5])
def test_cyclic_post_graph_ends_each_request_once(manager: FrontierManager,
                                                  max_next: int) -> None:
    """frontera's tester (every request a POST) over a cyclic graph: each request once.

    POSTs are one-offs; each was handed out again whenever a page linked to it,
    so a cycle never ended (frontera's harness sites 03 and 09: 383 dispatches
    of 31 pages until the timeout). As Scrapy's dupefilter, the canonical URL
    decides: ``/2#frag`` is ``/2``. The tester asserts meta, header, method and
    cookie on every request.
    """
    tester = FrontierTester(manager, Graph(CYCLE), BaseDownloaderSimulator(),
                            max_next_requests=max_next)
    sent = run_tester(manager, tester)
    assert sorted(sent) == sorted(set(CYCLE) - {"http://a.test/2#frag"})
    assert manager.finished


def test_one_offs_are_deduplicated_as_scrapy_would(redis_url: str, namespace: str,
                                                   clock: VirtualClock) -> None:
    """Same method, canonical URL and body: once per crawl. Another body, method or a
    scrapy-frontera fingerprint that differs (``dont_filter``) is another request."""
    def post(url: str, body: bytes = b"q=1", fingerprint: str | None = None) -> Request:
        request = scrapy_request(url, method=b"POST")
        request.meta[b"scrapy_body"] = body
        if fingerprint:
            request.meta[b"frontier_fingerprint"] = fingerprint
        return request

    stats = Counter()
    manager = make_manager(redis_url, namespace, clock, STATS_MANAGER=stats)
    try:
        manager.add_seeds([post("http://f.test/form"), post("http://f.test/form"),
                           post("http://f.test/form?b=2&a=1"), post("http://f.test/form?a=1&b=2"),
                           post("http://f.test/form", b"q=2"),
                           post("http://f.test/form", fingerprint="x1"),
                           post("http://f.test/form", fingerprint="x2"),
                           post("http://f.test/form", fingerprint="x2"),
                           scrapy_request("http://f.test/once", meta={"dont_revisit": True}),
                           scrapy_request("http://f.test/once", meta={"dont_revisit": True})])
        out = manager.get_next_requests(20, key_type="domain", overused_keys=[])
        assert [(r.url, r.method, r.meta[b"scrapy_body"]) for r in out] == [
            ("http://f.test/form", b"POST", b"q=1"), ("http://f.test/form?b=2&a=1", b"POST", b"q=1"),
            ("http://f.test/form", b"POST", b"q=2"), ("http://f.test/form", b"POST", b"q=1"),
            ("http://f.test/form", b"POST", b"q=1"), ("http://f.test/once", b"GET", b"")]
        assert stats.values["frontier_rate/one_off_duplicate"] == 4
        assert stats.values["frontier_rate/one_off"] == 6
        manager.links_extracted(out[0], [post("http://f.test/form")])  # later on: still seen
        assert manager.get_next_requests(20, key_type="domain", overused_keys=[]) == []
    finally:
        manager.stop()


def test_one_offs_wait_while_their_slot_is_overused(manager: FrontierManager) -> None:
    busy = [scrapy_request(f"http://busy.test/{i}", method=b"POST") for i in range(2)]
    calm = [scrapy_request("http://calm.test/x", method=b"POST")]
    manager.add_seeds(busy + calm)
    assert urls(manager.get_next_requests(10, key_type="domain",
                                          overused_keys=["busy.test"])) == ["http://calm.test/x"]
    assert not manager.finished
    assert urls(manager.get_next_requests(10, key_type="domain", overused_keys=[])) == \
        ["http://busy.test/0", "http://busy.test/1"]


def test_frontera_testers_request_comes_back_as_given(manager: FrontierManager,
                                                      clock: VirtualClock) -> None:
    """frontera's tester request (bytes header value, bytes cookie, a meta key of its own),
    made a GET so that it is a page: the first fetch and the revisit carry all of it.
    Before: the header value came back as a list, the cookie as str, the meta key not at all."""
    tester = FrontierTester(manager, Graph({}), BaseDownloaderSimulator())
    seed = tester._make_request("http://site.test/given")
    seed._method = b"GET"
    manager.add_seeds([seed])
    for _ in range(2):
        [got] = manager.get_next_requests(10, key_type="domain", overused_keys=[])
        assert got.method == b"GET"
        assert got.meta[b"this_param"] == b"should be passed over"
        assert got.headers[b"X-Important-Header"] == b"Frontera"
        assert got.cookies == {b"currency": b"USD"}
        respond(manager, got, body=b"x")
        clock.advance(MAX_INTERVAL + 1)


def test_page_meta_round_trip() -> None:
    """page_meta stores the request as given, as JSON; page_request rebuilds it exactly."""
    request = scrapy_request("http://site.test/x", meta={"k": [1, "two"], "retry_times": 2,
                                                         "raw": b"\x00\xff", "pair": (1, b"z"),
                                                         "$ref": {3: "int key"}},
                             callback=b"parse_x", headers={b"X-A": [b"1"], "X-B": "2",
                                                           b"If-None-Match": [b'"old"']})
    request.cookies[b"currency"] = b"USD"
    request.cookies["session"] = "abc"
    request.meta[b"this_param"] = b"should be passed over"
    request.meta[b"scrapy_cb_kwargs"] = {"when": ("a", 1.5)}
    request.meta[LEASE_KEY.encode()] = {"url": "http://site.test/x", "token": "t"}
    request._body = b"\x01body"
    stored = page_meta(request)
    text = json.dumps(stored, allow_nan=False)  # plain JSON: nothing pickled
    rebuilt = page_request(request.url, json.loads(text))
    expected_meta = dict(request.meta)
    del expected_meta[LEASE_KEY.encode()]  # per-fetch: the lease of the fetch it came from
    expected_meta[b"scrapy_meta"] = {k: v for k, v in request.meta[b"scrapy_meta"].items()
                                     if k != "retry_times"}
    assert rebuilt.meta == expected_meta
    assert rebuilt.headers == {b"X-A": [b"1"], "X-B": "2"}  # as given; validators are the frontier's
    assert rebuilt.cookies == {b"currency": b"USD", "session": "abc"}
    assert rebuilt.body == b"\x01body" and rebuilt.method == b"GET"
    assert type(rebuilt.meta[b"scrapy_meta"]["pair"]) is tuple


def test_pack_refuses_what_it_cannot_give_back() -> None:
    """Sets, objects, NaN and cycles are named in a ValueError; malformed stored values too."""
    for value in ({"a", "b"}, object(), float("nan")):
        with pytest.raises(ValueError, match="meta\\['v'\\]"):
            pack({"v": value}, "meta")
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="nested deeper"):
        pack(loop)
    for bad in ({"$b": "!!"}, {"$t": "x"}, {"$d": {"ab": 1}}, {"$d": [[[1], 2]]}):
        with pytest.raises(ValueError, match="malformed"):
            unpack(bad)
    assert unpack(pack({"$b": "not bytes"})) == {"$b": "not bytes"}  # a user's "$" key is escaped


def test_a_page_stored_by_an_earlier_version_is_rebuilt(
        manager: FrontierManager, redis_url: str, namespace: str, clock: VirtualClock) -> None:
    """Pages stored with the earlier JSON keys (cb/eb/kw/m/h/c) still come back as they were."""
    url = "http://site.test/old"
    with Frontier(redis_url, namespace=namespace, estimator="interval", clock=clock) as other:
        other.add(url, 1.0, {"cb": "parse_old", "kw": {"a": 1}, "m": {"depth": 2},
                             "h": {"Accept": ["text/html"]}, "c": {"session": "abc"}})
    [got] = manager.get_next_requests(10, key_type="domain", overused_keys=[])
    assert got.meta[b"scrapy_callback"] == b"parse_old"
    assert got.meta[b"scrapy_cb_kwargs"] == {"a": 1}
    assert got.meta[b"scrapy_meta"]["depth"] == 2 and lease_of(got).url == url
    assert got.headers == {b"Accept": [b"text/html"]} and got.cookies == {"session": "abc"}


def test_a_corrupt_stored_request_is_fetched_bare(
        manager: FrontierManager, redis_url: str, namespace: str, clock: VirtualClock,
        caplog) -> None:
    url = "http://site.test/corrupt"
    with Frontier(redis_url, namespace=namespace, estimator="interval", clock=clock) as other:
        other.add(url, 1.0, {"fr": {"m": {"$b": "%%%"}}})
    with caplog.at_level("WARNING", logger="frontier_rate"):
        [got] = manager.get_next_requests(10, key_type="domain", overused_keys=[])
    assert got.url == url and lease_of(got).url == url
    assert got.meta[b"scrapy_cb_kwargs"] == {}  # what scrapy-frontera needs to rebuild it
    assert "stored request of http://site.test/corrupt unreadable" in caplog.text


@pytest.mark.reliability
def test_redis_outage_holds_results_and_the_spool_carries_them_over(
        redis_url: str, namespace: str, clock: VirtualClock, tmp_path) -> None:
    """With Redis cut, results and new links are held (no exception reaches Frontera),
    sent when it is back; a stop during an outage spools them for the next start."""
    with RedisProxy(urlsplit(redis_url).port) as proxy:
        spool = {"FRONTIER_RATE_SPOOL_DIR": str(tmp_path), "FRONTIER_RATE_REDIS_TIMEOUT": 1.0}
        manager = make_manager(proxy.url, namespace, clock, **spool)
        a, b = "http://a.test/a", "http://b.test/b"
        manager.add_seeds([scrapy_request(a), scrapy_request(b)])
        first = {r.url: r for r in manager.get_next_requests(10, key_type="domain",
                                                             overused_keys=[])}
        proxy.cut()
        response = respond(manager, first[a], body=b"<p>a</p>")
        assert response.meta[RESULT_KEY]["held"] is True
        manager.links_extracted(first[a], [scrapy_request("http://c.test/c")])
        assert manager.get_next_requests(10, key_type="domain", overused_keys=[]) == []
        assert manager.backend.finished() is False
        clock.advance(1.0)  # the first retry: still cut
        assert manager.get_next_requests(10, key_type="domain", overused_keys=[]) == []
        proxy.restore()
        clock.advance(2.0)  # the second retry gets through: held result and link sent
        got = manager.get_next_requests(10, key_type="domain", overused_keys=[])
        assert urls(got) == ["http://c.test/c"]
        frontier = Frontier(redis_url, namespace=namespace, estimator="interval")
        assert frontier.page(a)["fetches"] == 1

        proxy.cut()
        respond(manager, first[b], body=b"<p>b</p>")
        manager.stop()  # Redis still cut: the result goes to the spool
        assert frontier.page(b)["fetches"] == 0 and len(list(tmp_path.iterdir())) == 1
        proxy.restore()
        again = make_manager(proxy.url, namespace, clock, **spool)
        try:
            assert frontier.page(b)["fetches"] == 1  # replayed at start, counted once
            assert list(tmp_path.iterdir()) == []
        finally:
            again.stop()
            frontier.close()


@pytest.mark.reliability
def test_a_tampered_spool_entry_is_dropped_with_a_warning_and_the_rest_replayed(
        redis_url: str, namespace: str, clock: VirtualClock, tmp_path, caplog) -> None:
    from frontier_rate.client.spool import Spool, call_entry, page_entry

    frontier = Frontier(redis_url, namespace=namespace, estimator="interval")
    try:
        Spool(tmp_path, namespace).save([
            page_entry("http://good.test/", 1.0, None),
            page_entry("ftp://bad.test/", 1.0, None),
            call_entry("observe", None, {"fingerprint": "x"}),
        ])
        with caplog.at_level("WARNING", logger="frontier_rate"):
            manager = make_manager(redis_url, namespace, clock,
                                   FRONTIER_RATE_SPOOL_DIR=str(tmp_path))
        try:
            assert frontier.page("http://good.test/") is not None
            assert "ftp://bad.test/" in caplog.text
            assert caplog.text.count("skipping a spool entry") == 2  # the URL and the dispatchless call
            assert list(tmp_path.iterdir()) == []
        finally:
            manager.stop()
    finally:
        frontier.close()

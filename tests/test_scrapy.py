"""The Scrapy scheduler, tested with real crawls in subprocesses.

Each test starts a ``ChangingSite`` on a loopback address, runs
``tests/scrapy_support/crawl.py`` (RecordingSpider + ``frontier_rate.scrapy.scheduler.
Scheduler``) against it with the session's real Redis, and checks what the
site's request log and the spider's records show. Intervals are short
(``FRONTIER_RATE_MIN_INTERVAL`` of a second) so each crawl lasts a few seconds
and ends through ``FRONTIER_RATE_CLOSE_AFTER``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scrapy_support.harness import (  # noqa: E402
    finish_crawl,
    open_frontier,
    revisits,
    run_crawl,
    spawned_children,
    start_crawl,
)
from scrapy_support.server import ChangingSite  # noqa: E402

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def site():
    with ChangingSite("127.0.0.1") as running:
        yield running


# -- change detection -----------------------------------------------------------


def test_text_mode_ignores_markup_churn_and_sees_text_change(site, redis_url, namespace, tmp_path):
    """Markup-only churn plus a stripped timestamp is no change; new text is."""
    site.set("/churn", '<div class="c{token}"><p>Same story</p>'
             '<input name="csrf" value="{token}"><p>Generated {time}</p></div>', template=True)
    site.set("/news", "<div><p>Story number {n}</p></div>", template=True)
    crawl = run_crawl(tmp_path, redis_url, namespace, [
        {"url": site.url("/churn")}, {"url": site.url("/news")}], {
        "FRONTIER_RATE_FINGERPRINT": "text",
        "FRONTIER_RATE_STRIP_PATTERNS": [r"Generated [0-9:.]+"],
    })
    churn, news = revisits(crawl, site.url("/churn")), revisits(crawl, site.url("/news"))
    assert len(churn) >= 2 and len(news) >= 2, crawl.log[-3000:]
    assert [r["meta"]["frontier_rate"]["changed"] for r in churn] == [False] * len(churn)
    assert [r["meta"]["frontier_rate"]["changed"] for r in news] == [True] * len(news)
    assert crawl.stats["frontier_rate/unchanged"] >= len(churn)
    assert crawl.stats["frontier_rate/changed"] >= len(news)
    assert crawl.closed["reason"] == "frontier_rate_close_after"
    assert crawl.returncode == 0


def test_raw_mode_sees_markup_churn(site, redis_url, namespace, tmp_path):
    """The same churning page counts as changed on every fetch in raw mode."""
    site.set("/churn", '<div class="c{token}"><p>Same story</p></div>', template=True)
    crawl = run_crawl(tmp_path, redis_url, namespace, [{"url": site.url("/churn")}],
                      {"FRONTIER_RATE_CLOSE_AFTER": 3, "FRONTIER_RATE_FINGERPRINT": "raw"})
    churn = revisits(crawl, site.url("/churn"))
    assert len(churn) >= 1, crawl.log[-3000:]
    assert all(r["meta"]["frontier_rate"]["changed"] for r in churn)


@pytest.mark.parametrize("detection_process", [False, True])
def test_default_content_mode_ignores_tokens_and_sees_text_change(
        site, redis_url, namespace, tmp_path, detection_process):
    """Default settings: tokens, a clock and a counter changing on every fetch are no
    change (counted in the ``volatile_ignored`` stat), a new story is; an empty answer is
    no copy (reported as failed: its callback gets ``changed`` False and ``failed`` naming
    why). The same with the
    detection in a child process (``FRONTIER_RATE_DETECTION_PROCESS``, the default), and
    without it."""
    site.set("/churn", '<div class="c{token}"><p>Same story, told at length here.</p>'
             '<input type="hidden" name="csrf" value="{token}"><p>Generated {time}</p>'
             '<p>{n} comments</p></div>', template=True)
    site.set("/news", "<div><p>Story number {n}</p></div>", template=True)
    site.set("/empty", "")
    crawl = run_crawl(tmp_path, redis_url, namespace, [
        {"url": site.url("/churn")}, {"url": site.url("/news")}, {"url": site.url("/empty")}],
        {"FRONTIER_RATE_DETECTION_PROCESS": detection_process,
         # the child takes ~1 s to start (answers are detected here meanwhile): time for
         # answers after it
         "FRONTIER_RATE_CLOSE_AFTER": 8 if detection_process else 4})
    churn, news = revisits(crawl, site.url("/churn")), revisits(crawl, site.url("/news"))
    assert len(churn) >= 2 and len(news) >= 2, crawl.log[-3000:]
    assert [r["meta"]["frontier_rate"]["changed"] for r in churn] == [False] * len(churn)
    assert [r["meta"]["frontier_rate"]["changed"] for r in news] == [True] * len(news)
    assert crawl.stats["frontier_rate/volatile_ignored"] >= len(churn)
    empty = crawl.responses(site.url("/empty"))
    assert empty and all(r["meta"]["frontier_rate"]["failed"] == "not content: empty"
                         and r["meta"]["frontier_rate"]["changed"] is False for r in empty)
    assert crawl.stats["frontier_rate/not_content"] >= len(empty)
    assert crawl.stats["frontier_rate/failed"] >= len(empty)
    in_process = crawl.stats.get("frontier_rate/detected_in_process", 0)
    if detection_process:  # the revisits after its start were detected in the child,
        assert in_process >= 1  # with the memory of the copies detected here before it
    else:
        assert in_process == 0
    assert "detection process stopped" not in crawl.log
    assert crawl.returncode == 0


TERMS = ('<html><body><div class="c{token}"><h1>Terms of service</h1>%s'
         '<p>Governing law: the courts of Paris.</p></div></body></html>')


@pytest.mark.parametrize("shared,detection_process", [(True, True), (True, False),
                                                      (False, True)])
def test_a_restarted_crawl_compares_with_the_copies_it_fetched_before_when_shared(
        site, redis_url, namespace, tmp_path, shared, detection_process):
    """``FRONTIER_RATE_SHARED_PAGE_MEMORY``: a crawl stops, the page's next copy has the same
    words with a paragraph cut in two, and a new crawl process (a restart, or another
    process of the frontier) fetches it. Compared with the last copy it is no change, and
    the new process has that copy in Redis (in its detection process, or in its own); with
    the setting off it has none and counts a change."""
    site.set("/tos", TERMS % "<p>These terms apply to every user. Read them well.</p>",
             template=True)
    settings = {"FRONTIER_RATE_SHARED_PAGE_MEMORY": shared,
                "FRONTIER_RATE_DETECTION_PROCESS": detection_process,
                "FRONTIER_RATE_CLOSE_AFTER": 4}
    first = run_crawl(tmp_path, redis_url, namespace, [{"url": site.url("/tos")}], settings)
    assert len(first.responses(site.url("/tos"))) >= 2, first.log[-3000:]
    site.set("/tos", TERMS % "<p>These terms apply to every user.</p><p>Read them well.</p>",
             template=True)
    second = run_crawl(tmp_path, redis_url, namespace, [{"url": site.url("/tos")}], settings,
                       name="again")
    answers = second.responses(site.url("/tos"))
    assert answers, second.log[-3000:]
    assert answers[0]["meta"]["frontier_rate"]["changed"] is (not shared)
    assert [a["meta"]["frontier_rate"]["changed"] for a in answers[1:]] == \
        [False] * (len(answers) - 1)
    assert second.stats.get("frontier_rate/page_memory_failures") == (0 if shared else None)
    hint = "FRONTIER_RATE_SHARED_PAGE_MEMORY = True keeps each page's last copy"
    assert hint not in first.log  # a new namespace: nothing was fetched before
    assert (hint in second.log) is (not shared)
    assert second.returncode == 0


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_a_detection_process_that_dies_is_replaced_by_detection_here(
        site, redis_url, namespace, tmp_path):
    """The detection process killed mid-crawl: a warning, and every later answer is
    detected on the crawl's thread; no answer is lost (each revisit still gets its result)
    and the crawl ends normally."""
    import os
    import signal
    import time

    site.set("/churn", '<div class="c{token}"><p>Same story, told at length here.</p>'
             '<p>Generated {time}</p></div>', template=True)
    proc, output, log = start_crawl(tmp_path, "c", redis_url, namespace,
                                    [{"url": site.url("/churn")}],
                                    {"FRONTIER_RATE_DETECTION_PROCESS": True,
                                     "FRONTIER_RATE_CLOSE_AFTER": 10})
    deadline = time.time() + 60
    # the child answers only once it has said it is ready (a slow start is detected here)
    ready_seen = hits_after_ready = None
    while hits_after_ready is None or len(site.hits_for("/churn")) < hits_after_ready + 2:
        assert time.time() < deadline and proc.poll() is None, "no ready detection process"
        if ready_seen is None and log.exists() and \
                "the detection process is ready" in log.read_text(errors="replace"):
            ready_seen = True
            hits_after_ready = len(site.hits_for("/churn"))
        time.sleep(0.05)
    assert spawned_children(proc.pid)
    for child in spawned_children(proc.pid):
        os.kill(child, signal.SIGKILL)
    killed_at = len(site.hits_for("/churn"))
    crawl = finish_crawl(proc, output, log)
    responses = crawl.responses(site.url("/churn"))
    assert len(site.hits_for("/churn")) >= killed_at + 2, crawl.log[-3000:]
    assert all("frontier_rate" in r["meta"] for r in responses), crawl.log[-3000:]
    assert "the detection process stopped" in crawl.log
    assert crawl.stats["frontier_rate/detected_in_process"] >= 1
    # every revisit's token and clock were ignored, in the child and here, except the
    # first one here: it has no last copy to compare with
    assert crawl.stats["frontier_rate/volatile_ignored"] >= len(responses) - 2
    assert crawl.returncode == 0


# -- conditional requests ----------------------------------------------------------


@pytest.mark.parametrize("validator", ["etag", "last_modified"])
def test_not_modified_is_observed_and_never_reaches_the_spider(
        site, redis_url, namespace, tmp_path, validator):
    """Revisits send the stored validator; 304s count as unchanged and stay out of callbacks."""
    site.set("/static", "<p>never changes</p>", **{validator: True})
    crawl = run_crawl(tmp_path, redis_url, namespace, [{"url": site.url("/static")}])
    hits = site.hits_for("/static")
    assert len(hits) >= 3, crawl.log[-3000:]
    assert hits[0].status == 200
    assert all(hit.status == 304 for hit in hits[1:])
    header = "if_none_match" if validator == "etag" else "if_modified_since"
    assert all(getattr(hit, header) for hit in hits[1:])
    assert len(crawl.responses(site.url("/static"))) == 1  # only the 200 reached the callback
    assert crawl.errors() == []  # and no 304 reached the errback as an HttpError
    assert crawl.stats["frontier_rate/not_modified"] == len(hits) - 1
    assert "Ignoring response <304" not in crawl.log


def test_changed_page_answers_200_again(site, redis_url, namespace, tmp_path):
    """After a change the validator no longer matches: a 200, marked changed."""
    site.set("/page", "<p>v1</p>", etag=True)
    proc, output, log = start_crawl(tmp_path, "c", redis_url, namespace,
                                    [{"url": site.url("/page")}], {"FRONTIER_RATE_CLOSE_AFTER": 5})
    import time

    deadline = time.time() + 20
    while len([h for h in site.hits_for("/page") if h.status == 304]) < 1:
        assert time.time() < deadline, "no 304 seen"
        time.sleep(0.1)
    site.change("/page", "<p>v2</p>")
    crawl = finish_crawl(proc, output, log)
    bodies = [(r["body"], r["meta"].get("frontier_rate", {}).get("changed"))
              for r in crawl.responses(site.url("/page"))]
    assert bodies[0][0] == "<p>v1</p>"
    assert ("<p>v2</p>", True) in bodies
    assert len(bodies) == 2  # later revisits of v2 are 304s again


# -- status handling ----------------------------------------------------------------


def test_redirect_is_followed_and_the_original_page_observed(site, redis_url, namespace, tmp_path):
    site.set("/old", "", status=301, location=site.url("/new"))
    site.set("/new", "<p>moved here</p>")
    # due fetches only: an early revisit racing the close could leave /old one hit ahead
    crawl = run_crawl(tmp_path, redis_url, namespace, [{"url": site.url("/old")}],
                      {"FRONTIER_RATE_FILL_BUDGET": False})
    responses = crawl.responses(site.url("/new"))  # request_url is the final request
    assert len(responses) >= 2, crawl.log[-3000:]
    assert all(r["url"] == site.url("/new") for r in responses)
    old, new = site.hits_for("/old"), site.hits_for("/new")
    # revisits start at /old, each followed to /new; the last may be cut by the close before
    # its hop (CI on Scrapy 2.13.4, 2026-12-05: /old 4 hits, /new 3, the 4th /old at the end)
    assert len(old) - len(new) in (0, 1), (old, new)
    assert len(old) == len(new) or old[-1].time > new[-1].time, (old, new)
    frontier = open_frontier(redis_url, namespace)
    try:
        assert frontier.page(site.url("/old")) is not None
        assert frontier.page(site.url("/new")) is None
    finally:
        frontier.close()
    assert crawl.stats["frontier_rate/redirected"] == len(responses)


def test_missing_gone_and_server_errors_are_failures(site, redis_url, namespace, tmp_path):
    """404/410 and 5xx are failures (never observations): backed off, 404/410 end as gone."""
    site.set("/missing", "nope", status=404)
    site.set("/removed", "gone", status=410)
    site.set("/broken", "oops", status=500)
    site.set("/ok", "<p>fine</p>")
    dead = ChangingSite("127.0.0.2")  # bound but never serving, then closed: refused
    dead_url = dead.url("/x")
    dead._server.server_close()
    crawl = run_crawl(tmp_path, redis_url, namespace, [
        {"url": site.url(p)} for p in ("/missing", "/removed", "/broken", "/ok")] + [
        {"url": dead_url}], {"RETRY_ENABLED": False, "FRONTIER_RATE_CLOSE_AFTER": 5})
    stats = crawl.stats
    failures = sum(len(site.hits_for(p)) for p in ("/missing", "/removed", "/broken"))
    refused = crawl.errors(dead_url)
    assert refused and all("ConnectionRefused" in e["error"] for e in refused)
    assert stats["frontier_rate/failed"] == failures + len(refused)
    # Non-2xx answers reach the spider's errback (stored by name), never an observation.
    assert {e["status"] for e in crawl.errors() if e["url"] != dead_url} == {404, 410, 500}
    # Three 404/410 answers in a row mark a page gone: it is never fetched again.
    for path in ("/missing", "/removed"):
        assert len(site.hits_for(path)) == 3, path
    assert len(site.hits_for("/broken")) >= 3  # 5xx keep being retried (backoff capped)
    assert stats["frontier_rate/first_fetches"] == 1  # /ok is the only page observed
    assert stats.get("frontier_rate/changed", 0) + stats.get("frontier_rate/unchanged", 0) == len(
        crawl.responses(site.url("/ok"))) - 1
    frontier = open_frontier(redis_url, namespace)
    try:
        gone = [p for p in ("/missing", "/removed", "/broken")
                if frontier.page(site.url(p))["status"] == "gone"]
    finally:
        frontier.close()
    assert "/broken" not in gone
    assert stats.get("frontier_rate/gone", 0) == len(gone)


# -- timing, politeness --------------------------------------------------------------


def test_due_pages_are_fetched_within_a_second_of_their_due_time(
        site, redis_url, namespace, tmp_path):
    """Each revisit hits the site at most 1 s after the due time the previous fetch set.

    The engine's 5 s heartbeat would miss this by up to 5 s; the scheduler's
    wake-up timer must fire. Lower bound: a page is never fetched before it is
    due (small slack for clock reads in two processes on one machine).
    """
    for name in ("a", "b", "c"):
        site.set(f"/{name}", f"<p>{name} {{n}}</p>", template=True)
    crawl = run_crawl(tmp_path, redis_url, namespace,
                      [{"url": site.url(f"/{n}")} for n in ("a", "b", "c")],
                      {"FRONTIER_RATE_CLOSE_AFTER": 5, "FRONTIER_RATE_FILL_BUDGET": False})
    checked = 0
    for name in ("a", "b", "c"):
        responses = crawl.responses(site.url(f"/{name}"))
        hits = site.hits_for(f"/{name}")
        for response, next_hit in zip(responses, hits[1:], strict=False):
            due = response["meta"]["frontier_rate"]["next_due"]
            assert due - 0.05 <= next_hit.time <= due + 1.0, (name, due, next_hit.time)
            checked += 1
    assert checked >= 6, crawl.log[-3000:]


def test_robots_disallow_and_crawl_delay(site, redis_url, namespace, tmp_path):
    """robots.txt Disallow is obeyed and its Crawl-delay spaces all fetches of the host.

    Crawl-delay is 1 s; the engine's host clock starts at the lease, the site
    logs arrival, so gaps may shrink by the spread of request latency (ms on
    loopback): 0.1 s slack.
    """
    site.set("/robots.txt", "User-agent: *\nDisallow: /private\nCrawl-delay: 1\n",
             content_type="text/plain")
    for name in ("a", "b", "c", "private"):
        site.set(f"/{name}", f"<p>{name}</p>")
    crawl = run_crawl(tmp_path, redis_url, namespace,
                      [{"url": site.url(f"/{n}")} for n in ("a", "b", "c", "private")],
                      # 7 s: the robots.txt re-reads and the retries of /private (each
                      # takes the host's 1 s slot) leave room for four page fetches
                      {"ROBOTSTXT_OBEY": True, "FRONTIER_RATE_CLOSE_AFTER": 7,
                       "FRONTIER_RATE_ROBOTS_TTL": 1.5,
                       # due pages only: the count below assumes no early revisit takes the
                       # host's one slot per second
                       "FRONTIER_RATE_FILL_BUDGET": False})
    assert site.hits_for("/private") == []
    # Scrapy's middleware reads robots.txt first (the scheduler learns the Crawl-delay
    # from that answer); the scheduler re-reads it once the TTL has passed.
    robots = site.hits_for("/robots.txt")
    assert len(robots) >= 2, crawl.log[-3000:]
    assert robots[1].time - robots[0].time >= 1.5
    pages = [hit for hit in site.hits if hit.path != "/robots.txt"]
    assert len(pages) >= 4, crawl.log[-3000:]
    gaps = [b.time - a.time for a, b in zip(pages, pages[1:], strict=False)]
    assert min(gaps) >= 0.9, gaps


def test_a_page_robots_txt_forbids_waits_max_interval_not_a_backoff(site, redis_url, namespace,
                                                                     tmp_path):
    """Scrapy's robots.txt refusal of a leased page is parked: its next try is max_interval
    (1 h here) after the refusal, not the 60 s of a failure's first backoff (issue 33: such
    pages were retried with backoff forever); the page is kept and the refusal counted."""
    site.set("/robots.txt", "User-agent: *\nDisallow: /private\n", content_type="text/plain")
    for name in ("a", "private"):
        site.set(f"/{name}", f"<p>{name}</p>")
    crawl = run_crawl(tmp_path, redis_url, namespace,
                      [{"url": site.url(f"/{n}")} for n in ("a", "private")],
                      {"ROBOTSTXT_OBEY": True, "FRONTIER_RATE_CLOSE_AFTER": 3,
                       "FRONTIER_RATE_MAX_INTERVAL": 3600.0})
    assert site.hits_for("/private") == []
    assert crawl.stats["frontier_rate/robots_forbidden"] == 1, crawl.log[-3000:]
    frontier = open_frontier(redis_url, namespace)
    try:
        page = frontier.page(site.url("/private"))
        assert page["status"] == "retrying" and page["fails"] == 1
        assert page["next_due"] - crawl.closed["time"] > 3000.0, page
    finally:
        frontier.close()


def test_a_slow_host_does_not_fill_the_downloader(redis_url, namespace, tmp_path):
    """At most CONCURRENT_REQUESTS_PER_DOMAIN requests per host leave the scheduler.

    With 2 global slots, 1 per domain and a slow host (1 s per answer), the
    second slot stays free for the fast host, whose pages keep being revisited.
    """
    with ChangingSite("127.0.0.1") as slow, ChangingSite("127.0.0.2") as fast:
        for i in range(6):
            slow.set(f"/s{i}", f"<p>slow {i}</p>", delay=1.0)
        fast.set("/f", "<p>fast</p>")
        crawl = run_crawl(tmp_path, redis_url, namespace,
                          [{"url": slow.url(f"/s{i}")} for i in range(6)] + [{"url": fast.url("/f")}],
                          {"CONCURRENT_REQUESTS": 2, "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
                           "FRONTIER_RATE_MIN_HOST_DELAY": 0.0, "FRONTIER_RATE_CLOSE_AFTER": 4})
        slow_hits = sorted(slow.hits, key=lambda h: h.started)
        assert len(slow_hits) >= 2, crawl.log[-3000:]
        for a, b in zip(slow_hits, slow_hits[1:], strict=False):
            assert b.started >= a.time - 0.05  # one at a time on the slow host
        assert len(fast.hits_for("/f")) >= 3  # revisited about every second meanwhile
        # Slow pages still leased in the scheduler's buffer at close are handed back,
        # not left to expire after the lease timeout.
        frontier = open_frontier(redis_url, namespace)
        never_sent = [i for i in range(6) if not slow.hits_for(f"/s{i}")]
        assert never_sent and crawl.stats.get("frontier_rate/released", 0) >= 1, crawl.stats
        assert [frontier.page(slow.url(f"/s{i}"))["status"] for i in never_sent] == \
            ["new"] * len(never_sent)


# -- request round trip ---------------------------------------------------------------


def test_meta_callback_errback_and_headers_survive_revisits(site, redis_url, namespace, tmp_path):
    meta = {"kind": "article", "nested": {"ids": [1, 2, 3]}, "score": 0.5,
            "frontier_rate_weight": 3.0}
    site.set("/article", "<p>text {n}</p>", template=True)
    site.set("/post", "<p>posted</p>")
    site.set("/once", "<p>once</p>")
    crawl = run_crawl(tmp_path, redis_url, namespace, [
        {"url": site.url("/article"), "meta": meta, "callback": "parse_other",
         "headers": {"X-Test": "yes"}},
        {"url": site.url("/post"), "method": "POST"},
        {"url": site.url("/once"), "meta": {"dont_revisit": True}},
    ])
    responses = crawl.responses(site.url("/article"))
    assert len(responses) >= 3, crawl.log[-3000:]
    for response in responses:
        assert response["callback"] == "parse_other"
        assert {k: response["meta"][k] for k in meta} == meta
        assert response["headers"]["X-Test"] == "yes"
    assert len(site.hits_for("/post")) == 1 and site.hits_for("/post")[0].method == "POST"
    assert len(site.hits_for("/once")) == 1
    frontier = open_frontier(redis_url, namespace)
    try:
        assert frontier.page(site.url("/article"))["weight"] == 3.0
        assert frontier.page(site.url("/once")) is None
    finally:
        frontier.close()
    assert crawl.stats["frontier_rate/one_off"] == 2


def test_unserialisable_meta_is_fetched_once_naming_the_key(site, redis_url, namespace,
                                                            tmp_path):
    """A request the frontier cannot store is not lost: fetched once, as Scrapy's own
    scheduler falls back to memory for a request it cannot serialise, with a WARNING that
    names it; the revisits of /index yield the link again, and the dupefilter drops it."""
    site.set("/index", '<a href="/fine">fine</a> <a href="/bad-meta">bad</a>')
    site.set("/fine", "<p>fine</p>")
    site.set("/bad-meta", "<p>bad</p>")
    crawl = run_crawl(tmp_path, redis_url, namespace, [{"url": site.url("/index")}],
                      {"FRONTIER_RATE_CLOSE_AFTER": 3}, follow=True)
    assert "request meta['tags']" in crawl.log and "not JSON-serialisable" in crawl.log
    assert "is fetched once, not revisited" in crawl.log
    assert len(site.hits_for("/index")) >= 2, crawl.log[-3000:]
    assert len(site.hits_for("/bad-meta")) == 1
    assert crawl.stats["frontier_rate/not_revisitable"] == 1
    assert site.hits_for("/fine")  # followed links still become pages
    frontier = open_frontier(redis_url, namespace)
    try:
        assert frontier.page(site.url("/bad-meta")) is None
        assert frontier.page(site.url("/fine")) is not None
    finally:
        frontier.close()


def test_followed_links_become_pages_fetched_promptly(site, redis_url, namespace, tmp_path):
    """New pages are fetched at once; without ROBOTSTXT_OBEY robots.txt is not read."""
    site.set("/robots.txt", "User-agent: *\nCrawl-delay: 30\n", content_type="text/plain")
    site.set("/index", '<a href="/x">x</a> <a href="/y">y</a> <a href="/index">self</a>')
    site.set("/x", "<p>x</p>")
    site.set("/y", "<p>y</p>")
    crawl = run_crawl(tmp_path, redis_url, namespace, [{"url": site.url("/index")}],
                      {"FRONTIER_RATE_CLOSE_AFTER": 3, "FRONTIER_RATE_LOG_INTERVAL": 1},
                      follow=True)
    first = site.hits_for("/index")[0].time
    for path in ("/x", "/y"):
        assert site.hits_for(path)[0].time - first < 1.0
    assert crawl.stats["frontier_rate/new_pages"] == 3
    assert site.hits_for("/robots.txt") == []
    assert len(site.hits_for("/x")) >= 2  # revisited: no 30 s Crawl-delay applied
    assert "frontier-rate [" in crawl.log  # the periodic summary line


# -- several processes -----------------------------------------------------------------


def test_two_processes_share_one_frontier(site, redis_url, namespace, tmp_path):
    """Two crawlers on one Redis never fetch one page twice within one interval.

    Each fetch's response carries the due time the frontier set for the next
    one; whichever process makes the next fetch, it must not come before that
    time (0.05 s slack for clock reads), and every hit must be one lease.
    """
    paths = [f"/p{i}" for i in range(8)]
    for path in paths:
        site.set(path, f"<p>{path} {{n}}</p>", template=True)
    start = [{"url": site.url(p)} for p in paths]
    # due times as the exclusivity check: no page is leased before it is due
    settings = {"FRONTIER_RATE_CLOSE_AFTER": 5, "FRONTIER_RATE_FILL_BUDGET": False}
    runs = [start_crawl(tmp_path, f"w{i}", redis_url, namespace, start, settings) for i in (0, 1)]
    crawls = [finish_crawl(*run) for run in runs]
    assert all(c.returncode == 0 for c in crawls)
    assert all(c.responses() for c in crawls), "both processes should take part"
    for path in paths:
        url = site.url(path)
        responses = sorted((r for c in crawls for r in c.responses(url)), key=lambda r: r["time"])
        hits = site.hits_for(path)
        assert len(hits) == len(responses)
        for response, next_hit in zip(responses, hits[1:], strict=False):
            assert next_hit.time >= response["meta"]["frontier_rate"]["next_due"] - 0.05


def test_close_after_idle_ends_after_one_pass(site, redis_url, namespace, tmp_path):
    """FRONTIER_RATE_CLOSE_AFTER="idle": every page fetched once, then a clean finish."""
    for name in ("a", "b", "c"):
        site.set(f"/{name}", f"<p>{name}</p>")
    crawl = run_crawl(tmp_path, redis_url, namespace,
                      [{"url": site.url(f"/{n}")} for n in ("a", "b", "c")],
                      {"FRONTIER_RATE_CLOSE_AFTER": "idle", "FRONTIER_RATE_MIN_INTERVAL": 3.0,
                       "FRONTIER_RATE_MAX_INTERVAL": 3.0})
    assert crawl.returncode == 0
    assert crawl.closed["reason"] == "finished"
    assert sorted(site.paths()) == ["/a", "/b", "/c"]
    frontier = open_frontier(redis_url, namespace)
    try:
        assert all(frontier.page(site.url(f"/{n}"))["fetches"] == 1 for n in ("a", "b", "c"))
    finally:
        frontier.close()

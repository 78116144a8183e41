"""The Scrapy scheduler under faults and bad input (issue 8), with real crawls.

Every test runs ``tests/scrapy_support/crawl.py`` (RecordingSpider +
``frontier_rate.scrapy.Scheduler``) in a subprocess against loopback HTTP
servers and a real redis-server, then checks the servers' request logs, the
frontier's page records and the crawl's log. "No observation lost, none
counted twice" is checked the same way everywhere: for each page, the
frontier's ``fetches`` equals the number of 200/304 answers the site logged.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis
from w3lib.url import safe_url_string

sys.path.insert(0, str(Path(__file__).parent))
from conftest import start_redis_server  # noqa: E402
from reliability_support.proxy import RedisProxy  # noqa: E402
from reliability_support.rawsite import Answer, RawSite  # noqa: E402
from scrapy_support.harness import Crawl, finish_crawl, open_frontier, start_crawl  # noqa: E402
from scrapy_support.server import ChangingSite  # noqa: E402

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(180)]

STALL_METER = {"EXTENSIONS": {"reliability_support.stall.StallMeter": 0}}


def _crawl_ok(crawl: Crawl) -> None:
    """The crawl ran to its planned end: no crash, no exception in any handler."""
    assert crawl.returncode == 0, crawl.log[-4000:]
    assert crawl.closed["reason"] == "frontier_rate_close_after", crawl.log[-4000:]
    assert "Traceback" not in crawl.log, crawl.log[crawl.log.find("Traceback") - 2000:][:6000]


def _answered(hits: list) -> int:
    return sum(1 for hit in hits if hit.status in (200, 304))


def _assert_counted_once(frontier, site, paths: list[str]) -> dict[str, int]:
    """Per page: the frontier's fetches equal the 200/304 answers the site logged."""
    counts = {}
    for path in paths:
        page = frontier.page(site.url(path))
        answered = _answered(site.hits_for(path))
        assert page is not None and page["fetches"] == answered, (path, page, answered)
        counts[path] = answered
    return counts


def _meter(tmp_path: Path, name: str) -> tuple[dict, Path]:
    output = tmp_path / f"{name}-stall.json"
    return {**STALL_METER, "STALL_METER_OUTPUT": str(output)}, output


# -- Redis unreachable for 30 s mid-crawl -----------------------------------------------


OUTAGE = 30.0


def test_redis_outage_holds_results_and_replays_them(redis_url, namespace, tmp_path):
    """Redis cut for 30 s mid-crawl: no crash, results held and replayed, none lost.

    The cut is timed to catch a slow page (2 s server delay) in flight, so at
    least one result must be held: its response arrives while Redis is gone.
    Each fetch of /slow links a new page /late<n>; the one found during the
    outage can only be added (and fetched) after the restore. The client's
    breaker is checked by its failed attempts (``redis_errors``): its backoff
    (1, 2, 4, 8, 16 s) allows the first failure and 4 retries in 30 s, and one
    more if the cut outlasts 31 s on a slow machine; the scheduler polls Redis
    at least once a second while it runs, so without the breaker there would be
    30 or more. The connections the cut proxy refused are not the measure: the
    shared send slots ask Redis again every second while a request waits for a
    host (``SEND_RETRY_MAX``), by design, so their count grows with the sends
    the outage catches (10-20 here, 70 once with a CPU hog beside the crawl).
    """
    port = urlsplit(redis_url).port
    with ChangingSite("127.0.0.1") as site, ChangingSite("127.0.0.2") as other, \
            RedisProxy(port) as proxy:
        site.set("/news", "<p>story {n}</p>", template=True)
        site.set("/etag", "<p>same</p>", etag=True)
        site.set("/dated", "<p>same too</p>", last_modified=True)
        other.set("/slow", '<p>slow {n}</p><a href="/late{n}">next</a>', template=True, delay=2.0)
        for n in range(1, 30):
            other.set(f"/late{n}", f"<p>late {n}</p>")
        paths = ["/news", "/etag", "/dated"]
        proc, output, log = start_crawl(
            tmp_path, "outage", proxy.url, namespace,
            [{"url": site.url(p)} for p in paths] + [{"url": other.url("/slow")}],
            {"FRONTIER_RATE_LEASE_TIMEOUT": 120, "FRONTIER_RATE_CLOSE_AFTER": 46,
             "LOG_LEVEL": "INFO"},
            follow=True,
        )
        deadline = time.time() + 20
        while other.arrivals("/slow") < 2 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.01)
        assert other.arrivals("/slow") >= 2, "the crawl never revisited /slow"
        proxy.cut()
        cut_at = time.time()
        other.update("/slow", delay=0.0)  # the fetch in flight keeps its 2 s
        found_during = other.arrivals("/slow")  # its answer links /late<found_during>
        time.sleep(OUTAGE)
        refused = proxy.refused
        proxy.restore()
        restored_at = time.time()
        crawl = finish_crawl(proc, output, log, timeout=90)

        _crawl_ok(crawl)
        down = re.findall(r"WARNING: frontier-rate: Redis at (\S+) unreachable \(.*\); "
                          r"holding (\d+) results, retrying in 1 s", crawl.log)
        back = re.findall(r"WARNING: frontier-rate: Redis at \S+ back after ([0-9.]+) s; "
                          r"replayed (\d+) results", crawl.log)
        assert len(down) == 1 and down[0][0] == proxy.url, crawl.log[-4000:]
        assert len(back) == 1, crawl.log[-4000:]
        outage, replayed = float(back[0][0]), int(back[0][1])
        assert OUTAGE - 1 <= outage <= OUTAGE + 17, outage  # next attempt after the restore
        assert replayed >= 1  # at least the /slow answer that arrived during the cut
        stats = crawl.stats
        assert stats["frontier_rate/redis_outages"] == 1
        assert stats["frontier_rate/replayed"] == replayed
        # the breaker: the first failure and 4 retries, no Redis call between attempts
        assert 5 <= stats["frontier_rate/redis_errors"] <= 6, stats["frontier_rate/redis_errors"]
        assert "frontier_rate/lost_results" not in stats
        print(f"outage: back after {outage} s, replayed {replayed}, "
              f"connections refused by the cut proxy {refused}")

        slow_hits = other.hits_for("/slow")
        assert any(cut_at < hit.time < restored_at for hit in slow_hits)  # answered while cut
        for hits in (site.hits_for("/news"), slow_hits):  # fetches went on after the restore
            assert any(hit.time > restored_at + 1 for hit in hits)
        late = other.hits_for(f"/late{found_during}")
        assert late and all(hit.time > restored_at for hit in late)

        frontier = open_frontier(redis_url, namespace)
        try:
            _assert_counted_once(frontier, site, paths)
            late_paths = sorted({h.path for h in other.hits} - {"/slow"})
            _assert_counted_once(frontier, other, ["/slow", *late_paths])
            assert frontier.page(site.url("/etag"))["fetches"] >= 5
        finally:
            frontier.close()


def test_closing_while_redis_is_down_spools_and_the_next_crawl_replays(redis_url, namespace,
                                                                       tmp_path):
    """The crawl ends while Redis is still cut: the held results go to the spool with
    one WARNING counting them; the next crawl of the namespace replays them, so in
    the end every answered fetch is counted once."""
    port = urlsplit(redis_url).port
    spool = tmp_path / "spool"
    settings = {"FRONTIER_RATE_LEASE_TIMEOUT": 60, "LOG_LEVEL": "INFO",
                "FRONTIER_RATE_SPOOL_DIR": str(spool)}
    with ChangingSite("127.0.0.1") as site, ChangingSite("127.0.0.2") as other, \
            RedisProxy(port) as proxy:
        site.set("/news", "<p>story {n}</p>", template=True)
        other.set("/slow", "<p>slow {n}</p>", template=True, delay=1.5)
        start = [{"url": site.url("/news")}, {"url": other.url("/slow")}]
        proc, output, log = start_crawl(tmp_path, "first", proxy.url, namespace, start,
                                        {**settings, "FRONTIER_RATE_CLOSE_AFTER": 6})
        deadline = time.time() + 20
        while other.arrivals("/slow") < 2 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.01)
        proxy.cut()
        crawl = finish_crawl(proc, output, log)
        _crawl_ok(crawl)
        saved = re.findall(rf"WARNING: frontier-rate: closing while Redis at {re.escape(proxy.url)} "
                           r"is unreachable: (\d+) fetch results and 0 new pages saved to (\S+); "
                           rf"the next crawl of namespace '{namespace}' replays them", crawl.log)
        assert len(saved) == 1, crawl.log[-3000:]
        held, path = int(saved[0][0]), Path(saved[0][1])
        assert held >= 1 and path.parent == spool and path.exists()
        assert crawl.stats["frontier_rate/spooled"] == held

        def unanswered() -> int:
            frontier = open_frontier(redis_url, namespace)
            try:
                answered = _answered(site.hits_for("/news")) + _answered(other.hits_for("/slow"))
                return answered - (frontier.page(site.url("/news"))["fetches"]
                                   + frontier.page(other.url("/slow"))["fetches"])
            finally:
                frontier.close()

        assert unanswered() == held  # exactly the spooled results are missing so far

        proxy.restore()
        again = start_crawl(tmp_path, "second", proxy.url, namespace, start,
                            {**settings, "FRONTIER_RATE_CLOSE_AFTER": 3})
        second = finish_crawl(*again)
        _crawl_ok(second)
        assert f"replaying {held} results and 0 new pages" in second.log, second.log[-3000:]
        assert not path.exists() and list(spool.iterdir()) == []
        assert unanswered() == 0  # every answered fetch counted once, none twice


# -- slow Redis ----------------------------------------------------------------------------


REDIS_TIMEOUT = 1.0
PAUSE = 4.5


def test_slow_redis_never_stalls_the_event_loop(namespace, tmp_path):
    """CLIENT PAUSE on the crawl's Redis: the event loop never waits out a Redis timeout.

    Every Redis call runs on the client's worker thread. With
    FRONTIER_RATE_REDIS_TIMEOUT=1 the worker's first call into the paused
    server fails after 1 s and opens the breaker; the attempts after 1 s and
    2 s wait one timeout each on that thread (the pause lasts 4.5 s); the one
    after that gets through. Meanwhile the loop keeps ticking: its longest
    gap stays below one timeout (the scheduler that called Redis on the loop
    stalled it for 1.01-1.04 s here). The pause starts while a slow page
    (1.5 s server delay) is in flight, so its result is held and replayed; an
    observe Redis applied after the client gave up is answered as a replay
    (accepted, not counted again), which the per-page count checks.
    """
    proc_redis, port = start_redis_server(str(tmp_path))
    url = f"redis://127.0.0.1:{port}/0"
    admin = redis.Redis(host="127.0.0.1", port=port)
    try:
        with ChangingSite("127.0.0.1") as site, ChangingSite("127.0.0.2") as other:
            paths = ["/a", "/b", "/c", "/d"]
            for path in paths:
                site.set(path, f"<p>{path} {{n}}</p>", template=True)
            other.set("/slow", "<p>slow {n}</p>", template=True, delay=1.5)
            meter, stall_file = _meter(tmp_path, "slow")
            proc, output, log = start_crawl(
                tmp_path, "slow", url, namespace,
                [{"url": site.url(p)} for p in paths] + [{"url": other.url("/slow")}],
                {"FRONTIER_RATE_REDIS_TIMEOUT": REDIS_TIMEOUT, "FRONTIER_RATE_LEASE_TIMEOUT": 30,
                 "FRONTIER_RATE_CLOSE_AFTER": 13, "LOG_LEVEL": "INFO", **meter},
            )
            deadline = time.time() + 20
            while other.arrivals("/slow") < 2 and time.time() < deadline and proc.poll() is None:
                time.sleep(0.01)
            assert other.arrivals("/slow") >= 2, "the crawl never revisited /slow"
            paused_at = time.time()
            admin.execute_command("CLIENT", "PAUSE", int(PAUSE * 1000), "ALL")
            crawl = finish_crawl(proc, output, log, timeout=60)
            _crawl_ok(crawl)
            stall = json.loads(stall_file.read_text())
            assert stall["max_gap"] < REDIS_TIMEOUT, stall
            assert crawl.stats["frontier_rate/redis_outages"] == 1
            assert crawl.stats["frontier_rate/replayed"] >= 1  # the /slow answer at least
            assert "frontier_rate/lost_results" not in crawl.stats
            assert any(hit.time > paused_at + PAUSE + 1 for hit in site.hits)
            frontier = open_frontier(url, namespace)
            try:
                _assert_counted_once(frontier, site, paths)
                _assert_counted_once(frontier, other, ["/slow"])
            finally:
                frontier.close()
            (tmp_path / "slow-result.json").write_text(json.dumps(stall))
            print(f"slow redis: max reactor gap {stall['max_gap']:.3f} s, "
                  f"gaps over 0.2 s: {[round(g, 3) for _, g in stall['long_gaps']]}")
    finally:
        admin.close()
        proc_redis.terminate()
        proc_redis.wait(timeout=10)


SHORT_PAUSE = 6.0
STARVED_WAIT = 0.25  # scrapy/scheduler.STARVED_WAIT: what the loop waited before


def test_pages_due_during_a_redis_pause_never_hold_the_event_loop(namespace, tmp_path):
    """Pages fall due while Redis is paused (shorter than the Redis timeout, so no outage):
    nothing is buffered, and ``next_request`` has the worker lease and returns at once; the
    leases wake the engine when Redis answers. Before, it waited up to STARVED_WAIT on the
    event loop (then again 1, 2, 4 ... s later): a 0.253 s gap in the loop's ticks during
    the pause, 2 runs of 2. The pause outlasts the backoff of the waits before it (at most
    4 s here), so a wait would fall inside it. The meter ticks every 50 ms; a gap reaching
    STARVED_WAIT while Redis is paused fails the test.
    """
    proc_redis, port = start_redis_server(str(tmp_path))
    url = f"redis://127.0.0.1:{port}/0"
    admin = redis.Redis(host="127.0.0.1", port=port)
    try:
        with ChangingSite("127.0.0.1") as site:
            paths = [f"/p{i}" for i in range(6)]
            for path in paths:
                site.set(path, f"<p>{path} {{n}}</p>", template=True)
            meter, stall_file = _meter(tmp_path, "pause")
            proc, output, log = start_crawl(
                tmp_path, "pause", url, namespace, [{"url": site.url(p)} for p in paths],
                {"FRONTIER_RATE_REDIS_TIMEOUT": 10, "FRONTIER_RATE_CLOSE_AFTER": 12,
                 "LOG_LEVEL": "INFO", **meter},
            )
            deadline = time.time() + 20
            while len(site.hits_for("/p0")) < 2 and time.time() < deadline and proc.poll() is None:
                time.sleep(0.01)
            assert len(site.hits_for("/p0")) >= 2, "the crawl never revisited /p0"
            paused_at = time.time()
            admin.execute_command("CLIENT", "PAUSE", int(SHORT_PAUSE * 1000), "ALL")
            crawl = finish_crawl(proc, output, log, timeout=60)
            _crawl_ok(crawl)
            assert "frontier_rate/redis_outages" not in crawl.stats  # a pause, not an outage
            assert any(hit.time > paused_at + SHORT_PAUSE + 0.5 for hit in site.hits)
            stall = json.loads(stall_file.read_text())
            during = [gap for at, gap in stall["long_gaps"]
                      if paused_at < at < paused_at + SHORT_PAUSE + 0.5]
            assert all(gap < STARVED_WAIT for gap in during), stall
    finally:
        admin.close()
        proc_redis.terminate()
        proc_redis.wait(timeout=10)


# -- bad URLs from the spider ------------------------------------------------------------------


def _builds(url: str) -> bool:
    """Can Scrapy build a request for ``url`` (w3lib's ``safe_url_string`` accepts it)?"""
    try:
        safe_url_string(url)
    except ValueError:
        return False
    return True


def test_bad_urls_are_fetched_once_and_good_ones_crawled(namespace, redis_url, tmp_path):
    """Start requests and followed links with URLs the frontier cannot keep as pages.

    Before, one bad URL made ``add_many`` refuse its whole batch; then each was refused.
    Now each is fetched once, as Scrapy would fetch it (issue 23: nothing a spider yields
    is lost), with a WARNING naming it when it is an http(s) URL the frontier cannot keep
    (over 2048 characters, a bad host) and counted; other schemes are plain one-off
    fetches. The revisits of /links yield the bad links again: Scrapy's dupefilter drops
    them, so each is fetched once. Scrapy itself strips CR/LF/NUL from URLs (w3lib's
    ``safe_url_string``), so a URL carrying them reaches the site as a plain path; the
    request log shows no header was injected.
    """
    with ChangingSite("127.0.0.1") as site:
        # over the engine's MAX_URL_LENGTH (2048), under Scrapy's URLLENGTH_LIMIT (2083)
        long_path = "/" + "x" * (2060 - len(site.url("/")))
        # a host with a space: w3lib < 2.6 lets Scrapy build its request (the frontier refuses
        # it), w3lib >= 2.6 makes scrapy.Request itself raise, so no crawl can yield it there
        spaced = ["http://exa mple.com/", "http://exa mple.com/x"] if _builds(
            "http://exa mple.com/") else []
        bad_links = ["ftp://127.0.0.1/file", *spaced[1:], long_path]
        site.set("/links", "".join(f'<a href="{href}">l</a>' for href in
                                   [*bad_links, "/good3"]))
        for path in ("/good1", "/good2", "/good3"):
            site.set(path, f"<p>{path}</p>")
        long_start = "/" + "y" * (2060 - len(site.url("/")))
        bad_starts = [*spaced[:1], "data:text/plain,hello", "ftp://127.0.0.1/x",
                      site.url(long_start)]
        crlf = site.url("/good1\r\nX-Injected: 1\x00")
        starts = [{"url": site.url("/good1")}, *({"url": u} for u in bad_starts),
                  {"url": site.url("/links")}, {"url": site.url("/good2")}, {"url": crlf}]
        proc, output, log = start_crawl(tmp_path, "urls", redis_url, namespace, starts,
                                        {"FRONTIER_RATE_CLOSE_AFTER": 3}, follow=True)
        crawl = finish_crawl(proc, output, log)

        _crawl_ok(crawl)
        for path in ("/good1", "/good2", "/good3", "/links"):
            assert site.hits_for(path), (path, crawl.log[-3000:])
        assert _answered(site.hits_for("/links")) >= 2  # revisited: its links came again
        for path in (long_path, long_start):
            assert len(site.hits_for(path)) == 1, path[:40]  # fetched once, never revisited
        warned = re.findall(r"WARNING: frontier-rate: <GET (.*?)> is fetched once, not "
                            r"revisited: url '", crawl.log)
        assert all(len(url) <= 203 for url in warned)  # named, truncated
        assert sorted(warned) == sorted(
            u if len(u) <= 200 else u[:200] + "..." for u in
            [*spaced, site.url(long_start), site.url(long_path)]), warned
        assert crawl.stats["frontier_rate/not_revisitable"] == len(warned) == 2 + len(spaced)
        frontier = open_frontier(redis_url, namespace)
        try:
            assert frontier.page(site.url("/good3")) is not None
            assert frontier.stats()["pages"] == 5  # /good1-3, /links, the CR/LF one
        finally:
            frontier.close()
        injected = [h for h in site.hits if "X-Injected" in h.path or "\n" in h.path]
        assert all(h.path == "/good1X-Injected:%201" for h in injected), injected
        # the whole request log: only the headers Scrapy sends
        assert all(h.user_agent and "\n" not in h.user_agent for h in site.hits)


# -- bodies: non-UTF-8, binary, wrong charsets, hostile markup --------------------------------


BINARY = bytes(range(256)) * 4 + b"\x00\x00\xff\xfe"
BODIES: dict[str, tuple[bytes, str]] = {
    "/latin1-as-utf8": (b"<p>caf\xe9 cr\xe8me {n}</p>", "text/html; charset=utf-8"),
    "/utf16-odd": (b"<p>odd length ascii {n}</p>", "text/html; charset=utf-16"),
    "/idna": (b"<p>\xff\xfe idna {n}</p>", "text/html; charset=idna"),
    "/unknown-charset": (b"<p>\xe9 {n}</p>", "text/html; charset=x-no-such-charset"),
    "/binary": (b"{n}" + BINARY, "application/octet-stream"),
    "/nul": (b"\x00{n}\x00" * 100, "text/html"),
    "/unclosed-tags": (b"<p>{n}</p>" + b'<a "' * 50_000, "text/html"),
}
"""Path -> (body template, Content-Type). Each exists changing (``{n}``: the hit
number) and static (``/static`` prefix, no ``{n}``)."""


def _body_site(site: ChangingSite) -> list[str]:
    paths = []
    for path, (body, content_type) in BODIES.items():
        site.set(path, body, content_type=content_type, template=True)
        site.set("/static" + path, body.replace(b"{n}", b"7"), content_type=content_type)
        paths += [path, "/static" + path]
    return paths


def test_odd_bodies_are_observed_with_change_detection_right(redis_url, namespace, tmp_path):
    """Non-UTF-8, wrongly declared, binary, NUL-filled and hostile-markup bodies, raw and text.

    Two crawls run at once (one per fingerprint mode, each on its own site).
    Every changing page must count a change on every revisit and every static
    one none. The 200 KB of unclosed ``<a "`` took hours in ``text`` mode
    before the patterns were made linear; now the crawl's reactor never
    stalls long (checked through the stall meter).

    Scrapy's MetaRefreshMiddleware reads ``response.text``, which raises
    UnicodeError for ``charset=idna`` (Python's idna codec cannot replace bad
    bytes); Scrapy then fails the download and the scheduler can only record
    a failure. The crawls turn that middleware off so the /idna pages reach
    the scheduler and test its own decoding.
    """
    runs = []
    with ChangingSite("127.0.0.1") as raw_site, ChangingSite("127.0.0.2") as text_site:
        for mode, site in (("raw", raw_site), ("text", text_site)):
            paths = _body_site(site)
            meter, stall_file = _meter(tmp_path, mode)
            started = start_crawl(
                tmp_path, mode, redis_url, f"{namespace}-{mode}",
                [{"url": site.url(p), "callback": "parse_bytes"} for p in paths],
                {"FRONTIER_RATE_FINGERPRINT": mode, "METAREFRESH_ENABLED": False, **meter})
            runs.append((mode, site, paths, started, stall_file))
        for mode, site, paths, (proc, output, log), stall_file in runs:
            crawl = finish_crawl(proc, output, log)
            _crawl_ok(crawl)
            frontier = open_frontier(redis_url, f"{namespace}-{mode}")
            try:
                counts = _assert_counted_once(frontier, site, paths)
                for path in paths:
                    page = frontier.page(site.url(path))
                    assert counts[path] >= 2, (mode, path, counts)
                    expected = 0 if path.startswith("/static") else page["fetches"] - 1
                    assert page["changes"] == expected, (mode, path, page)
            finally:
                frontier.close()
            flags = [r["meta"]["frontier_rate"]["changed"] for r in crawl.responses()
                     if r["request_url"] == site.url("/binary")]
            assert flags[1:] and all(flags[1:]), (mode, flags)
            stall = json.loads(stall_file.read_text())
            assert stall["max_gap"] < 1.0, (mode, stall)



# -- a 50 MB body ---------------------------------------------------------------------------------


BIG = 50 * 1024 * 1024
CAP = 1024 * 1024
RSS_BOUND_KIB = 20 * 1024
"""Growth of the crawl's peak RSS allowed with a 1 MiB cap.

A cut body is held a few times at once (Twisted's read buffer, Scrapy's
BytesIO and its ``getvalue()`` copy, the Response, the fingerprint's prefix
copy): about 5 x (1 MiB + one 64 KiB read) plus the crawl's ordinary growth
(a few MiB, see the other crawls' meters). A whole 50 MiB body needs at least
50 MiB for the Response alone, which the uncapped control crawl shows."""


def _big(prefix: bytes) -> Answer:
    return Answer(prefix, length=BIG, headers=[(b"Content-Type", b"application/octet-stream")])


def test_big_body_is_cut_at_the_cap_with_bounded_memory(redis_url, namespace, tmp_path):
    """A 50 MiB body, FRONTIER_RATE_MAX_BODY=1 MiB: the download stops, memory stays flat.

    The server streams 50 MiB per fetch; its first bytes change from the
    third fetch on. The capped crawl must stop every transfer early, observe
    every fetch (change seen exactly at the third), and keep its peak RSS
    growth under RSS_BOUND_KIB. A control crawl with a 64 MiB cap (run at the
    same time on its own site) downloads whole bodies and grows by more than
    the body size, which shows the meter would catch an uncut download.
    """
    runs = []
    with RawSite("127.0.0.1") as capped_site, RawSite("127.0.0.2") as control_site:
        for name, site, cap in (("capped", capped_site, CAP), ("control", control_site, 64 * CAP)):
            site.route("/big", lambda n: _big(b"version A " * 10 if n < 3 else b"version B " * 10))
            site.route("/small", Answer(b"<p>small</p>"))
            meter, stall_file = _meter(tmp_path, name)
            started = start_crawl(
                tmp_path, name, redis_url, f"{namespace}-{name}",
                [{"url": site.url("/big"), "callback": "parse_bytes"}, {"url": site.url("/small")}],
                {"FRONTIER_RATE_MAX_BODY": cap, "FRONTIER_RATE_CLOSE_AFTER": 5 if cap == CAP else 3,
                 "LOG_LEVEL": "INFO", **meter})
            runs.append((name, site, started, stall_file))
        results = {}
        for name, site, (proc, output, log), stall_file in runs:
            crawl = finish_crawl(proc, output, log, timeout=90)
            _crawl_ok(crawl)
            stall = json.loads(stall_file.read_text())
            results[name] = (crawl, site, stall, stall["rss_peak_kib"] - stall["rss_open_kib"])

        crawl, site, stall, growth = results["capped"]
        big = site.hits_for("/big")
        assert len(big) >= 3, crawl.log[-3000:]
        assert not any(hit.complete for hit in big)  # every transfer was cut short
        assert all(hit.sent < BIG // 2 for hit in big), [hit.sent for hit in big]
        responses = crawl.responses(site.url("/big"))
        assert all("download_stopped" in r["flags"] and CAP < r["body_length"] < 2 * CAP
                   for r in responses), [(r["flags"], r["body_length"]) for r in responses]
        changed = [r["meta"]["frontier_rate"]["changed"] for r in responses]
        # the first fetch is new (changed: the copy is new), then the edit is seen once
        assert changed == [True, False, True] + [False] * (len(changed) - 3), changed
        assert [r["meta"]["frontier_rate"]["new"] for r in responses] == \
            [True] + [False] * (len(changed) - 1)
        assert crawl.stats["frontier_rate/body_cut"] == len(big)
        frontier = open_frontier(redis_url, f"{namespace}-capped")
        try:
            page = frontier.page(site.url("/big"))
            assert page["fetches"] == len(big) and page["changes"] == 1, page
        finally:
            frontier.close()
        assert growth < RSS_BOUND_KIB, stall

        control_crawl, control_site_, control_stall, control_growth = results["control"]
        assert any(hit.complete for hit in control_site_.hits_for("/big")), control_crawl.log[-2000:]
        assert control_growth > BIG // 1024, control_stall
        print(f"big body: capped peak RSS growth {growth / 1024:.1f} MiB "
              f"(open {stall['rss_open_kib'] / 1024:.1f} MiB), uncapped control "
              f"{control_growth / 1024:.1f} MiB; bytes sent per cut fetch "
              f"{[hit.sent for hit in big]}")


# -- malformed robots.txt ---------------------------------------------------------------------------


MAX_CRAWL_DELAY = 1.5
ROBOTS: dict[str, tuple[bytes, str | None]] = {
    "127.0.0.2": (bytes(range(256)) * 8 + b"\nCrawl-delay: \xff\xfe\n", "'\ufffd\ufffd'"),
    "127.0.0.3": (b"User-agent: *\nCrawl-delay: abc\n", "'abc'"),
    "127.0.0.4": (b"User-agent: *\nCrawl-delay: -1\n", "'-1'"),
    "127.0.0.5": (b"User-agent: *\nCrawl-delay: nan\n", "'nan'"),
    "127.0.0.6": (b"User-agent: *\nCrawl-delay: inf\n", "'inf'"),
    "127.0.0.7": (b"User-agent: *\nCrawl-delay: 1e9\n", None),
}
"""Host -> (robots.txt, the value a WARNING must name as ignored; None: clamped)."""


def test_malformed_robots_txt_is_ignored_or_clamped_with_a_warning(redis_url, namespace, tmp_path):
    """Binary garbage and bad Crawl-delay values: no crash, one WARNING naming host and value.

    Values that are not a number of seconds >= 0 are ignored (the host keeps
    the minimum delay, so its page is revisited about every second); 1e9 is
    clamped to FRONTIER_RATE_MAX_CRAWL_DELAY (1.5 s here), which the gaps
    between that host's fetches show.
    """
    sites = [RawSite(host) for host in ROBOTS]
    for site in sites:
        site.__enter__()
    try:
        for site in sites:
            site.route("/robots.txt", Answer(ROBOTS[site.host][0],
                                             headers=[(b"Content-Type", b"text/plain")]))
            site.route("/p", Answer(b"<p>page</p>"))
        starts = [{"url": site.url("/p")} for site in sites]
        proc, output, log = start_crawl(
            tmp_path, "robots", redis_url, namespace, starts,
            {"ROBOTSTXT_OBEY": True, "FRONTIER_RATE_MAX_CRAWL_DELAY": MAX_CRAWL_DELAY,
             "FRONTIER_RATE_CLOSE_AFTER": 5})
        crawl = finish_crawl(proc, output, log)
        _crawl_ok(crawl)
        for site in sites:
            value = ROBOTS[site.host][1]
            fetches = [hit.time for hit in site.hits_for("/p")]
            if value is None:
                assert re.search(rf"WARNING: robots.txt of {re.escape(site.host)}: Crawl-delay "
                                 rf"1e\+09 s clamped to {MAX_CRAWL_DELAY:g} s", crawl.log)
                assert len(fetches) >= 2, crawl.log[-3000:]
                gaps = [b - a for a, b in zip(fetches, fetches[1:], strict=False)]
                assert min(gaps) >= MAX_CRAWL_DELAY - 0.05, gaps
            else:
                warning = (f"WARNING: robots.txt of {site.host}: Crawl-delay {value} is not a "
                           "number of seconds >= 0; ignored")
                assert crawl.log.count(warning) == 1, (warning, crawl.log[-3000:])
                assert len(fetches) >= 3, (site.host, fetches)  # min interval 1 s, no delay
    finally:
        for site in sites:
            site.__exit__(None, None, None)


# -- garbage ETag / Last-Modified --------------------------------------------------------------------


VALIDATORS: dict[str, list[tuple[bytes, bytes]]] = {
    "/long": [(b"ETag", b'"' + b"e" * 3000 + b'"'),
              (b"Last-Modified", b"Mon, 01 Jan 2024 00:00:00 GMT" + b" " + b"z" * 1100)],
    "/non-ascii": [(b"ETag", b'"\xe9t\xe9"'), (b"Last-Modified", b"Mon, 01 Jan 2024 \xff\xfe")],
    "/control": [(b"ETag", b'"a\x01b"'), (b"Last-Modified", b"Mon,\x0b01 Jan 2024")],
    "/folded": [(b"ETag", b'"f1"\r\n X-Injected: folded'),
                (b"Last-Modified", b"Mon, 01 Jan 2024\r\n\tX-Injected: tab")],
    "/unquoted": [(b"ETag", b"abc123"), (b"Last-Modified", b"not a date at all")],
    "/empty": [(b"ETag", b""), (b"Last-Modified", b"")],
}
"""Path -> raw validator headers. /unquoted is printable ASCII: it goes back verbatim."""

EXPECTED_HEADERS = {"accept", "accept-language", "accept-encoding", "user-agent", "host",
                    "if-none-match", "if-modified-since", "connection"}


def test_garbage_validators_never_build_a_header(redis_url, namespace, tmp_path):
    """Very long, non-ASCII, control, folded, unquoted and empty ETag / Last-Modified.

    Every page is observed on every fetch; what goes back in If-None-Match /
    If-Modified-Since is exactly the value the server sent (printable ASCII,
    at most 1024 characters) or nothing; no request carries a header beyond
    the ones Scrapy sends. A folded header (obs-fold) reaches the client
    unfolded, each fold replaced by one space (RFC 9112 section 5.2 allows
    that); that one-line value is what the server sent as far as HTTP goes,
    and it goes back as one header.
    """
    with RawSite("127.0.0.1") as site:
        for path, headers in VALIDATORS.items():
            site.route(path, Answer(b"<p>same</p>", headers=headers))
        proc, output, log = start_crawl(
            tmp_path, "validators", redis_url, namespace,
            [{"url": site.url(path), "callback": "parse_bytes"} for path in VALIDATORS])
        crawl = finish_crawl(proc, output, log)
        _crawl_ok(crawl)

        for hit in site.hits:
            names = {name.lower() for name, _ in hit.headers}
            assert names <= EXPECTED_HEADERS, (hit.path, hit.headers)
            sent = {name: re.sub(rb"\r\n[ \t]+", b" ", value)
                    for name, value in VALIDATORS[hit.path]}
            for request_header, response_header in (("If-None-Match", b"ETag"),
                                                    ("If-Modified-Since", b"Last-Modified")):
                value = hit.header(request_header)
                assert value is None or value.encode("latin-1") == sent[response_header], \
                    (hit.path, request_header, value)
        unquoted = site.hits_for("/unquoted")
        assert len(unquoted) >= 3
        assert all(hit.header("If-None-Match") == "abc123" and
                   hit.header("If-Modified-Since") == "not a date at all" for hit in unquoted[1:])
        for path in ("/long", "/non-ascii", "/control", "/empty"):
            assert all(hit.header("If-None-Match") is None and
                       hit.header("If-Modified-Since") is None for hit in site.hits_for(path))
        assert crawl.stats["frontier_rate/bad_validator"] >= 6
        frontier = open_frontier(redis_url, namespace)
        try:
            counts = _assert_counted_once(frontier, site, list(VALIDATORS))
            assert min(counts.values()) >= 3, counts
        finally:
            frontier.close()

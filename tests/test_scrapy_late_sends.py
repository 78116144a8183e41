"""A request that misses its send slot takes the next free one (issue 63's soak), and a
crawler's first send is widened by the stalls of its start, with real crawls.

One crawler, a host delay of 1 s, one-off requests to one loopback host (four may be in
the downloader at once), and its Redis under ``CLIENT PAUSE`` for 3 s: the requests the
download slot lets through meanwhile each wait for their shared send slot in Redis, and
Redis answers them all when the pause ends. Their slots are in the past by then. Before,
each went at once (its slot mapped onto the clock after the call), so the site got them
within milliseconds of each other (the soak: 0.6 ms apart under a 0.5 s delay; a crawler
starting up on a loaded machine, whose Redis calls are slow: 0.087 s under 0.3 s). Now a
request whose slot was missed by more than the margin leaves only if no other send was
reserved after that slot, else it takes the next free one.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import redis

from frontier_rate.crawl.loop_stalls import START_SHARE, START_STALL
from frontier_rate.crawl.scrapy_politeness import STALL_TICK

sys.path.insert(0, str(Path(__file__).parent))
from conftest import start_redis_server  # noqa: E402
from scrapy_support.harness import finish_crawl, recorded_send_gap, start_crawl  # noqa: E402
from scrapy_support.server import ChangingSite  # noqa: E402

pytestmark = pytest.mark.timeout(120)

DELAY = 1.0
PAUSE = 3.0


def test_requests_answered_late_by_redis_keep_the_host_delay(namespace, tmp_path):
    proc_redis, port = start_redis_server(str(tmp_path))
    url = f"redis://127.0.0.1:{port}/0"
    admin = redis.Redis(host="127.0.0.1", port=port)
    try:
        with ChangingSite("127.0.0.1") as site:
            paths = [f"/p{i}" for i in range(9)]
            for path in paths:
                site.set(path, f"<p>{path}</p>")
            start = [{"url": site.url(p), "meta": {"dont_revisit": True}} for p in paths]
            proc, output, log = start_crawl(tmp_path, "late", url, namespace, start, {
                "FRONTIER_RATE_MIN_HOST_DELAY": DELAY, "CONCURRENT_REQUESTS_PER_DOMAIN": 4,
                "FRONTIER_RATE_CLOSE_AFTER": "idle", "FRONTIER_RATE_REDIS_TIMEOUT": 10.0,
                "LOG_LEVEL": "INFO"})
            deadline = time.monotonic() + 60
            while len(site.hits) < 2 and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.01)
            assert len(site.hits) >= 2, "the crawl never fetched two pages"
            admin.execute_command("CLIENT", "PAUSE", int(PAUSE * 1000), "ALL")
            crawl = finish_crawl(proc, output, log, timeout=90)
            assert crawl.returncode == 0, crawl.log[-3000:]
            arrivals = sorted(hit.started for hit in site.hits)
        assert len(arrivals) == len(paths), crawl.log[-3000:]
        gaps = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
        assert min(gaps) >= DELAY - 0.05, [round(g, 3) for g in gaps]
        assert crawl.stats.get("frontier_rate/late_sends", 0) >= 1  # the pause made some late
    finally:
        admin.close()
        proc_redis.terminate()
        proc_redis.wait()


def _first_send_gap(tmp_path, redis_url, namespace, delay: float, args: dict) -> float:
    """The gap a crawl of one page recorded with its first (and only) shared send slot."""
    with ChangingSite("127.0.0.1") as site:
        site.set("/only", "<p>one page</p>")
        proc, output, log = start_crawl(
            tmp_path, "stalled", redis_url, namespace,
            [{"url": site.url("/only"), "meta": {"dont_revisit": True}}],
            {"FRONTIER_RATE_MIN_HOST_DELAY": delay, "FRONTIER_RATE_CLOSE_AFTER": "idle",
             "ROBOTSTXT_OBEY": False, "LOG_LEVEL": "INFO"},
            args=args)
        crawl = finish_crawl(proc, output, log, timeout=90)
        assert crawl.returncode == 0, crawl.log[-3000:]
        assert len(site.hits) == 1, crawl.log[-3000:]
    return recorded_send_gap(redis_url, namespace, "127.0.0.1")


def test_a_crawlers_first_send_is_widened_by_the_stalls_of_its_start(redis_url, namespace,
                                                                     tmp_path):
    """The hour's soak: a restarted crawler's first request left while its loop stalled at
    its start, and the next crawler's, at its own slot, came 0.4775 s after it under a 0.5
    s delay. The loop's stalls are measured from the spider's opening, so the gap recorded
    with a crawler's first send slot is widened by the stalls of its start (here the
    spider's ``start()`` blocks the loop for 0.6 s before its first request)."""
    stall, delay = 0.6, 0.5
    gap = _first_send_gap(tmp_path, redis_url, namespace, delay, {"start_stall": str(stall)})
    assert gap >= delay + stall - STALL_TICK, gap  # without the stall: delay + margin


def test_a_crawlers_first_send_is_widened_by_the_stall_expected_at_its_start(
        redis_url, namespace, tmp_path):
    """The Cluster hour: two crawlers' first requests 0.2921 s and 0.2892 s apart under a
    0.3 s delay, the loop held after the first slot where no stall measured before it
    foretold it. A crawler's sends in the first ``START_SPAN`` seconds are widened by
    ``START_STALL`` (at most ``START_SHARE`` of the delay) though its loop has not stalled
    (without: delay + margin, 0.55 s)."""
    delay = 0.5
    gap = _first_send_gap(tmp_path, redis_url, namespace, delay, {})
    assert gap >= delay + min(START_STALL, START_SHARE * delay), gap


def test_a_request_whose_write_the_loop_held_keeps_the_next_one_a_delay_away(
        redis_url, namespace, tmp_path):
    """The 5-minute Cluster run of 2026-12-07: one crawler sent a host's ``/manifest.json``
    and its next page 0.183 s apart under a 0.3 s delay. The first had waited for its send
    slot while the second queued behind it, which took its slot as soon as the first left
    (before any stall); the first was then held ~0.3 s between the hand-over and its write,
    and the second left at its own slot. Here another process's send is recorded 3 s ahead,
    so ``/stall`` waits for its slot and ``/next`` queues behind it, and the download handler
    blocks the loop 0.4 s right after ``/stall`` is handed to it
    (``scrapy_support/stalling_handler.py``): ``/next`` waits the delay after the stall's
    end (``HeldWrites``). Without that the two reached the site ~0.4 s apart under 0.5 s."""
    from scrapy_support.stalling_handler import STALL_AFTER_HANDOFF

    from frontier_rate.store.keys import Keys

    delay = 0.5
    admin = redis.Redis.from_url(redis_url)
    seconds, micros = admin.time()
    admin.hset(Keys(namespace, 1).send, "127.0.0.1", f"{seconds + micros / 1e6 + 3.0:.6f},{delay}")
    admin.close()
    with ChangingSite("127.0.0.1") as site:
        for path in ("/stall", "/next"):
            site.set(path, f"<p>{path}</p>")
        start = [{"url": site.url(p), "meta": {"dont_revisit": True}} for p in ("/stall", "/next")]
        handler = "scrapy_support.stalling_handler.StallingHandler"
        proc, output, log = start_crawl(tmp_path, "held-write", redis_url, namespace, start, {
            "FRONTIER_RATE_MIN_HOST_DELAY": delay, "FRONTIER_RATE_CLOSE_AFTER": "idle",
            "DOWNLOAD_HANDLERS": {"http": handler}, "LOG_LEVEL": "INFO"})
        crawl = finish_crawl(proc, output, log, timeout=90)
        hits = sorted(site.hits, key=lambda hit: hit.started)
    assert crawl.returncode == 0, crawl.log[-3000:]
    assert [hit.path for hit in hits] == ["/stall", "/next"], crawl.log[-3000:]
    assert hits[1].started - hits[0].started >= delay, (hits, crawl.log[-3000:])
    assert crawl.stats.get("frontier_rate/sends_after_held_write", 0) == 1, crawl.stats
    assert STALL_AFTER_HANDOFF > min(START_STALL, START_SHARE * delay) + 0.05  # no widening covers it

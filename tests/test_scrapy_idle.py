"""With real crawls: a run that fetches nothing says why, once, at INFO (issue 33); a run
told to end when idle ends after one pass, whatever the site's size (issue 60)."""

from __future__ import annotations

import math
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scrapy_support.harness import (  # noqa: E402
    finish_crawl,
    open_frontier,
    run_crawl,
    start_crawl,
)
from scrapy_support.server import ChangingSite  # noqa: E402

pytestmark = pytest.mark.timeout(120)

LINE = "INFO: frontier-rate: this run fetched no page of the frontier: "


def test_a_second_run_within_min_interval_says_nothing_is_due_until_when(
        redis_url, namespace, tmp_path):
    with ChangingSite("127.0.0.1") as site:
        for name in ("a", "b"):
            site.set(f"/{name}", f"<p>{name}</p>")
        start = [{"url": site.url("/a")}, {"url": site.url("/b")}]
        settings = {"FRONTIER_RATE_CLOSE_AFTER": "idle", "FRONTIER_RATE_MIN_INTERVAL": 60.0,
                    "FRONTIER_RATE_MAX_INTERVAL": 60.0, "LOG_LEVEL": "INFO"}
        first = run_crawl(tmp_path, redis_url, namespace, start, settings, name="first")
        second = run_crawl(tmp_path, redis_url, namespace, start, settings, name="second")
    assert first.returncode == 0 and second.returncode == 0
    assert len(first.responses()) == 2 and second.responses() == []
    assert LINE not in first.log
    assert second.log.count(LINE) == 1, second.log[-3000:]
    line = second.log[second.log.index(LINE):].splitlines()[0]
    assert f"namespace {namespace!r} holds 2 pages" in line
    assert "nothing due before " in line and "(in 5" in line, line


def _idle_crawl(tmp_path, redis_url, namespace, site, pages, settings, name):
    """An "idle" crawl of ``pages`` pages of ``site``: the crawl must end by itself within
    90 s (killed and failed otherwise); returns the Crawl."""
    start = [{"url": site.url(f"/p{i}")} for i in range(pages)]
    proc, output, log = start_crawl(tmp_path, name, redis_url, namespace, start, {
        "FRONTIER_RATE_CLOSE_AFTER": "idle", "FRONTIER_RATE_MIN_INTERVAL": 5.0,
        "FRONTIER_RATE_MAX_INTERVAL": 30 * 86400.0, "FRONTIER_RATE_MIN_HOST_DELAY": 0.15,
        "FRONTIER_RATE_BUDGET": 1.0, **settings})
    try:
        return finish_crawl(proc, output, log, timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"the idle crawl {name!r} did not end by itself within 90 s "
                             f"({pages} pages, first pass > MIN_INTERVAL)") from None


@pytest.mark.timeout(240)
def test_idle_ends_after_one_pass_over_a_site_longer_than_min_interval(
        redis_url, namespace, tmp_path):
    """Issue 60: 60 never-changing pages at 0.15 s a fetch (a 9 s pass) with MIN_INTERVAL 5 s
    and the default budget. Before, every page was due again 5 s after its first fetch (the
    budget is spent whatever the estimates say), something was always due, and the crawl
    never ended. Now a page estimated to change once a day waits until the chance that it
    changed reaches 2% (29 min): the crawl ends after its pass, each page fetched once, and
    says that the budget is not worth spending (INFO line, stat budget_use < 1)."""
    with ChangingSite("127.0.0.1") as site:
        for i in range(60):
            site.set(f"/p{i}", f"<p>book {i}</p>")
        crawl = _idle_crawl(tmp_path, redis_url, namespace, site, 60, {}, "shop")
    assert crawl.returncode == 0, crawl.log[-3000:]
    fetched = Counter(r["request_url"] for r in crawl.responses())
    assert len(fetched) == 60 and set(fetched.values()) == {1}, fetched.most_common(3)
    assert crawl.closed["reason"] == "finished"
    assert "left unspent" in crawl.log and "% of the budget" in crawl.log
    assert 0 <= crawl.stats["frontier_rate/budget_use"] < 1
    pages = {p["url"]: p for p in open_frontier(redis_url, namespace).iter_pages()}
    assert len(pages) == 60
    for page in pages.values():  # next fetch: no sooner than a 2% chance of a change
        wait = page["next_due"] - page["last_fetch"]
        assert wait >= -math.log(0.98) / page["estimate"] * (1 - 1e-6) > 1500, page


@pytest.mark.timeout(240)
def test_idle_holds_pages_this_run_fetched_even_when_they_are_worth_a_revisit(
        redis_url, namespace, tmp_path):
    """Pages believed to change every second (FRONTIER_RATE_PRIOR_RATE = 1) are worth a
    revisit as often as the host allows (40 pages at 0.15 s: every 6 s); answers take 0.3 s
    one at a time, so the pass takes ~18 s, and without the one-pass rule something is
    always due and the run never ends. The run fetches each page once, keeps the leases of
    the pages that fell due again, ends, and hands them back: the next run fetches them."""
    with ChangingSite("127.0.0.1") as site:
        for i in range(40):
            site.set(f"/p{i}", f"<p>news {i}</p>", delay=0.3)
        settings = {"FRONTIER_RATE_PRIOR_RATE": 1.0, "FRONTIER_RATE_BUDGET": 100.0,
                    "CONCURRENT_REQUESTS_PER_DOMAIN": 1}
        first = _idle_crawl(tmp_path, redis_url, namespace, site, 40, settings, "first")
        assert first.returncode == 0, first.log[-3000:]
        fetched = Counter(r["request_url"] for r in first.responses())
        assert len(fetched) == 40 and set(fetched.values()) == {1}, fetched.most_common(3)
        held = first.stats.get("frontier_rate/held_for_next_run", 0)
        assert held > 0, "the test must make pages fall due again within the run"
        assert first.stats.get("frontier_rate/released", 0) >= held
        assert f"{held} pages fetched in this run fell due again" in first.log
        second = _idle_crawl(tmp_path, redis_url, namespace, site, 40, settings, "second")
    assert second.returncode == 0, second.log[-3000:]
    again = Counter(r["request_url"] for r in second.responses())
    assert len(again) >= held and set(again.values()) == {1}

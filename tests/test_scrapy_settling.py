"""A stopped crawl loses no item (issue 60): a page's new copy counts only once its items
have left the item pipelines. Pages whose items were still in a slow pipeline when the crawl
was stopped by force (Ctrl-C twice) are fetched again at once by the next run, and those of
a crawl killed outright (SIGKILL) at their next revisit; both times without validators, so
the answer is a 200 that reaches the callback and its item the pipeline."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scrapy_support.harness import (  # noqa: E402
    Crawl,
    finish_crawl,
    open_frontier,
    run_crawl,
    start_crawl,
)
from scrapy_support.server import ChangingSite, Hit  # noqa: E402

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(180)]

BOOKS = 8
BOOK_PATHS = [f"/book/{i}" for i in range(BOOKS)]
SPIDER = "pipeline_spider.BookSpider"
SLOW = 3.0
"""Seconds the pipeline takes per item in the run that is stopped."""


def _settings(items: Path, delay: float, close_after: float) -> dict:
    return {"ITEM_PIPELINES": {"scrapy_support.pipeline_spider.SlowPipeline": 300},
            "TEST_ITEMS_FILE": str(items), "TEST_ITEM_DELAY": delay,
            "FRONTIER_RATE_MIN_INTERVAL": 3.0, "FRONTIER_RATE_MAX_INTERVAL": 3.0,
            "FRONTIER_RATE_LEASE_TIMEOUT": 300, "FRONTIER_RATE_CLOSE_AFTER": close_after,
            "LOG_LEVEL": "INFO"}


def _written(items: Path) -> set[str]:
    """The paths of the items the pipeline finished with."""
    urls = items.read_text().split() if items.exists() else []
    return {urlsplit(url).path for url in urls}


def _book_shop(site: ChangingSite) -> list[dict]:
    """An index linking to the books; each book answers with an ETag and a Last-Modified."""
    site.set("/", "".join(f'<a href="{path}">{path}</a>' for path in BOOK_PATHS))
    for path in BOOK_PATHS:
        site.set(path, f"<h1>Book {path}</h1><p>in stock</p>", etag=True, last_modified=True)
    return [{"url": site.url("/")}]


def _stop_with_items_in_the_pipeline(site: ChangingSite, redis_url: str, namespace: str,
                                     start: list[dict], items: Path, tmp_path: Path,
                                     stop: str) -> tuple[Crawl, set[str]]:
    """Crawl the shop with a pipeline of ``SLOW`` s per item and stop it once every book's
    answer is in Redis: "ctrl-c" twice, or "kill" (SIGKILL). The crawl and the books whose
    items never left the pipeline."""
    proc, output, log = start_crawl(tmp_path, stop, redis_url, namespace, start,
                                    _settings(items, SLOW, 60), spider=SPIDER)
    frontier = open_frontier(redis_url, namespace)
    try:
        deadline = time.time() + 40
        while time.time() < deadline and not all(
                (frontier.page(site.url(path)) or {}).get("fetches") for path in BOOK_PATHS):
            time.sleep(0.05)
    finally:
        frontier.close()
    assert all(site.hits_for(path) for path in BOOK_PATHS), site.paths()
    time.sleep(0.3)  # the answers reach the spider; its items wait SLOW s in the pipeline
    if stop == "kill":
        proc.kill()
    else:
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)  # "forcing unclean shutdown"
    stopped = finish_crawl(proc, output, log, timeout=30)
    lost = set(BOOK_PATHS) - _written(items)
    assert lost, "every item left the pipeline before the stop: the test proves nothing"
    return stopped, lost


def _check_nothing_lost(site: ChangingSite, again: Crawl, items: Path, lost: set[str],
                        hits: dict[str, list[Hit]]) -> None:
    """Every book's item reached the pipeline's output; each lost one through an
    unconditional fetch reported changed, after which its revisits are conditional (304).
    ``hits``: the site's requests of the run ``again``."""
    assert again.returncode == 0, again.log[-3000:]
    assert _written(items) == set(BOOK_PATHS), f"lost: {sorted(set(BOOK_PATHS) - _written(items))}"
    for path in lost:
        redo = again.responses(site.url(path))
        assert redo and redo[0]["status"] == 200, path
        assert "If-None-Match" not in redo[0]["headers"], redo[0]["headers"]
        assert "If-Modified-Since" not in redo[0]["headers"]
        assert redo[0]["meta"]["frontier_rate"]["changed"] is True  # same content, redone
        redone, *revisits = hits[path]  # this run's requests
        assert redone.if_none_match is None and redone.if_modified_since is None, path
        assert revisits and all(hit.if_none_match and hit.status == 304 for hit in revisits)


def test_a_double_ctrl_c_with_items_in_the_pipeline_loses_no_item(redis_url, namespace,
                                                                  tmp_path):
    items = tmp_path / "items.txt"
    with ChangingSite("127.0.0.1") as site:
        start = _book_shop(site)
        stopped, lost = _stop_with_items_in_the_pipeline(site, redis_url, namespace, start,
                                                         items, tmp_path, "ctrl-c")
        assert "pages whose answers had not gone through the item pipelines" in stopped.log
        frontier = open_frontier(redis_url, namespace)
        try:  # handed back: due now (else in 3 s, and then conditional: a 304, no callback)
            for path in lost:
                assert frontier.page(site.url(path))["next_due"] <= time.time(), path
        finally:
            frontier.close()
        since = time.time()
        again = run_crawl(tmp_path, redis_url, namespace, start, _settings(items, 0.1, 10),
                          name="again", spider=SPIDER)
        hits = {path: [hit for hit in site.hits_for(path) if hit.started >= since]
                for path in BOOK_PATHS}
    _check_nothing_lost(site, again, items, lost, hits)


def test_a_crawl_killed_with_items_in_the_pipeline_loses_no_item(redis_url, namespace,
                                                                 tmp_path):
    """No exit hook runs: the pages' answers were observed as unsettled, and the settles
    never came, so their next revisits (due 3 s later) are unconditional."""
    items = tmp_path / "items.txt"
    with ChangingSite("127.0.0.1") as site:
        start = _book_shop(site)
        stopped, lost = _stop_with_items_in_the_pipeline(site, redis_url, namespace, start,
                                                         items, tmp_path, "kill")
        assert stopped.returncode == -signal.SIGKILL
        since = time.time()
        again = run_crawl(tmp_path, redis_url, namespace, start, _settings(items, 0.1, 10),
                          name="again", spider=SPIDER)
        hits = {path: [hit for hit in site.hits_for(path) if hit.started >= since]
                for path in BOOK_PATHS}
    _check_nothing_lost(site, again, items, lost, hits)

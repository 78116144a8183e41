"""A forced stop loses no item (issue 60): pages whose items were still in the item pipelines
when the crawl was stopped by force (Ctrl-C twice) are fetched again at once by the next run,
without validators, so their callbacks run and their items reach the pipelines."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scrapy_support.harness import finish_crawl, open_frontier, run_crawl, start_crawl  # noqa: E402
from scrapy_support.server import ChangingSite  # noqa: E402

pytestmark = pytest.mark.timeout(180)

BOOKS = 8
SPIDER = "pipeline_spider.BookSpider"


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


def test_a_double_ctrl_c_with_items_in_the_pipelines_loses_no_item(redis_url, namespace,
                                                                   tmp_path):
    items = tmp_path / "items.txt"
    with ChangingSite("127.0.0.1") as site:
        books = [f"/book/{i}" for i in range(BOOKS)]
        site.set("/", "".join(f'<a href="{path}">{path}</a>' for path in books))
        for path in books:
            site.set(path, f"<h1>Book {path}</h1><p>in stock</p>", etag=True, last_modified=True)
        start = [{"url": site.url("/")}]
        proc, output, log = start_crawl(tmp_path, "stopped", redis_url, namespace, start,
                                        _settings(items, 3.0, 60), spider=SPIDER)
        deadline = time.time() + 40
        while (not all(site.hits_for(path) for path in books) or len(site.hits) < BOOKS + 1) \
                and time.time() < deadline:
            time.sleep(0.05)
        assert all(site.hits_for(path) for path in books), site.paths()
        time.sleep(0.5)  # the answers reach the spider; its items wait 3 s in the pipeline
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)  # "forcing unclean shutdown"
        stopped = finish_crawl(proc, output, log, timeout=30)
        lost = set(books) - _written(items)
        assert lost, "every item left the pipeline before the stop: the test proves nothing"
        assert "pages whose answers had not gone through the item pipelines" in stopped.log
        frontier = open_frontier(redis_url, namespace)
        try:
            for path in lost:
                assert frontier.page(site.url(path))["next_due"] <= time.time(), path
        finally:
            frontier.close()
        # the next run: the books are due at once (else in 3 s, conditional: 304s, no callback)
        again = run_crawl(tmp_path, redis_url, namespace, start, _settings(items, 0.1, 10),
                          name="again", spider=SPIDER)
        assert again.returncode == 0, again.log[-3000:]
        hits = {path: site.hits_for(path) for path in books}
    assert _written(items) == set(books), f"lost: {sorted(set(books) - _written(items))}"
    for path in lost:
        redo = again.responses(site.url(path))
        assert redo and redo[0]["status"] == 200, path
        assert "If-None-Match" not in redo[0]["headers"], redo[0]["headers"]
        assert "If-Modified-Since" not in redo[0]["headers"]
        assert redo[0]["meta"]["frontier_rate"]["changed"] is True  # same content, redone
        # once its item is through, the page's revisits are conditional again (304s)
        first, redone, *revisits = hits[path]
        assert first.if_none_match is None and redone.if_none_match is None, path
        assert revisits and all(hit.if_none_match and hit.status == 304 for hit in revisits)

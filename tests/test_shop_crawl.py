"""The book-shop scenario (issue 60) with real crawls: a project written as users write one
(``tests/shop_support/project.py``: categories, paginated lists, books, an SQLite pipeline, a
feed, robots.txt obeyed) crawls a local shop (``tests/shop_support/site.py``) with Scrapy's
scheduler and with ours. The first pass gives the same items; a price, a stock line and a
title edited while our crawl runs are changes of every page that shows them, and no other
page changes though a "deal of the moment" box names another book on every answer."""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from shop_support.project import Project  # noqa: E402
from shop_support.site import ShopSite  # noqa: E402

from frontier_rate.testbed.shop import Shop, catalogue  # noqa: E402

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]


def frontier_settings(redis_url: str, namespace: str, **more: object) -> dict[str, object]:
    return {"SCHEDULER": "frontier_rate.scrapy.Scheduler", "FRONTIER_RATE_REDIS_URL": redis_url,
            "FRONTIER_RATE_NAMESPACE": namespace, "FRONTIER_RATE_MIN_HOST_DELAY": 0.02,
            "FRONTIER_RATE_BUDGET": 100.0, **more}


def book_items(items: list[dict]) -> set[tuple]:
    return {(item["url"], item["title"], item["price"], item["stock"]) for item in items}




def test_the_first_pass_gives_scrapys_items_and_edits_are_found_on_every_page_showing_them(
        redis_url, namespace, tmp_path):
    shop = Shop(catalogue(books=30))
    with ShopSite(shop) as site:
        plain = Project(tmp_path / "plain").crawl(site.url("/"), {})
        assert plain.returncode == 0, plain.log[-3000:]
        assert len(plain.items) == 30
        project = Project(tmp_path / "revisiting")
        first = project.crawl(site.url("/"), frontier_settings(
            redis_url, namespace, FRONTIER_RATE_CLOSE_AFTER="idle",
            FRONTIER_RATE_MIN_INTERVAL=600.0, FRONTIER_RATE_MAX_INTERVAL=900.0))
        assert first.returncode == 0, first.log[-3000:]
        assert book_items(first.items) == book_items(plain.items)  # item for item
        assert len(first.items) == 30 and "/private/" not in " ".join(site.paths())
    # a second namespace revisits in one long-running process, edited while it runs
    shop = Shop(catalogue(books=30))
    with ShopSite(shop) as site:
        project = Project(tmp_path / "edited")
        answers = project.folder / "answers-1.jsonl"  # the first run's
        before = shop.pages(deal=False)
        edited_at = []

        def edit_after_three_passes() -> None:
            while not answers.exists() or len(answers.read_text().splitlines()) < 3 * len(before):
                time.sleep(0.2)
            shop.book("book-3").price = "£12.34"
            shop.book("book-7").stock = 2
            shop.book("book-12").title = "A New Title 12"
            edited_at.append(time.time())

        editor = threading.Thread(target=edit_after_three_passes, daemon=True)
        editor.start()
        run = project.crawl(site.url("/"), frontier_settings(
            redis_url, namespace + ".edited", FRONTIER_RATE_CLOSE_AFTER=25,
            FRONTIER_RATE_MIN_INTERVAL=1.0, FRONTIER_RATE_MAX_INTERVAL=1.5,
            FRONTIER_RATE_ESTIMATOR="interval"))
        editor.join(timeout=1)
    assert run.returncode == 0, run.log[-3000:]
    assert edited_at, "the crawl never made three passes"
    after = shop.pages(deal=False)
    expected = {site.url(path) for path in before if before[path] != after[path]}
    assert expected == {site.url(p) for p in ("/", "/catalogue/travel/page-1.html",
                                               "/book/book-3.html", "/book/book-7.html",
                                               "/book/book-12.html")}
    revisits = run.answers[2 * len(before):]  # from the third pass on: the deal box learned
    quiet = [a["url"] for a in revisits if a["time"] < edited_at[0] and a["changed"]]
    called = {a["url"] for a in revisits if a["time"] > edited_at[0] and a["changed"]}
    assert quiet == []  # nothing changed before the edit
    assert called == expected
    newest = project.books()
    assert newest[site.url("/book/book-3.html")]["price"] == "£12.34"
    assert newest[site.url("/book/book-7.html")]["stock"].strip() == "In stock (2 available)"
    assert newest[site.url("/book/book-12.html")]["title"] == "A New Title 12"


def test_a_forced_stop_and_a_restart_lose_no_book_and_a_redirect_loop_costs_what_scrapys_does(
        redis_url, namespace, tmp_path):
    """Items still in the pipeline at a double Ctrl-C reach the database in the next run,
    which ends by itself ("idle"); a link into a redirect loop costs our crawl no more
    requests than Scrapy's scheduler's."""
    shop = Shop(catalogue(books=30))
    with ShopSite(shop) as site:
        starts = f"{site.url('/')},{site.url('/loop/a')}"
        plain = Project(tmp_path / "plain").crawl(starts, {})
        loop_with_scrapy = sum(path.startswith("/loop/") for path in site.paths())
        assert plain.returncode == 0 and len(plain.items) == 30, plain.log[-3000:]
        site.requests.clear()
        project = Project(tmp_path / "revisiting")
        settings = frontier_settings(redis_url, namespace, FRONTIER_RATE_CLOSE_AFTER="idle",
                                     FRONTIER_RATE_MIN_INTERVAL=600.0,
                                     FRONTIER_RATE_MAX_INTERVAL=900.0)
        running = project.start(starts, {**settings, "SHOP_ITEM_DELAY": 3})
        deadline = time.time() + 60
        while time.time() < deadline and (not project.answers.exists() or len(
                project.answers.read_text().splitlines()) < 20):
            time.sleep(0.1)
        running.send_signal(signal.SIGINT)
        time.sleep(0.5)
        running.send_signal(signal.SIGINT)
        stopped = project.finish(running)
        kept = set(project.books())
        assert len(kept) < 30, "the stop came after every item left the pipeline"
        again = project.crawl(starts, settings)
        loop_with_ours = sum(path.startswith("/loop/") for path in site.paths())
    assert again.returncode == 0, again.log[-3000:]
    assert "pages whose answers had not gone through the item pipelines" in stopped.log
    books = project.books()
    assert len(books) == 30 and book_items(books.values()) == book_items(plain.items)
    assert loop_with_ours <= max(3, loop_with_scrapy), (loop_with_ours, loop_with_scrapy)

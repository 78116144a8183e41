"""A Scrapy project as users write one for a book shop, written into a folder and run with
``scrapy crawl books`` in a subprocess: a spider that follows the categories, the pages of
each list and every book; an SQLite pipeline with a unique URL column that keeps each book's
newest item; a JSON-lines feed per run. The spider skips a page whose content did not
change, as the README shows (``meta["frontier_rate"]["changed"]``), and logs every answer it
gets with that flag to ``answers.jsonl``, so a test reads what the frontier said of it."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent

SPIDER = '''
import json
import time

import scrapy


class BooksSpider(scrapy.Spider):
    name = "books"

    def __init__(self, start="", answers="answers.jsonl", **kwargs):
        super().__init__(**kwargs)
        self.start_urls = start.split(",")
        self.answers = answers

    def note(self, response):
        frontier = response.meta.get("frontier_rate")  # absent with Scrapy's own scheduler
        changed = None if frontier is None else frontier.get("changed")
        with open(self.answers, "a", encoding="utf-8") as out:
            out.write(json.dumps({"url": response.url, "status": response.status,
                                  "changed": changed, "time": time.time()}) + "\\n")
        return changed is not False

    def parse(self, response):
        if not self.note(response):
            return
        for href in response.css("ul.categories a::attr(href)").getall():
            yield response.follow(href, self.parse)
        for href in response.css("article.product_pod h3 a::attr(href)").getall():
            yield response.follow(href, self.parse_book)
        following = response.css("li.next a::attr(href)").get()
        if following:
            yield response.follow(following, self.parse)

    def parse_book(self, response):
        if not self.note(response):
            return
        yield {
            "url": response.url,
            "title": response.css("div.product_main h1::text").get(),
            "price": response.css("div.product_main p.price_color::text").get(),
            "stock": response.css("div.product_main p.availability::text").get(),
        }
'''

PIPELINES = '''
import sqlite3

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import task


class SQLitePipeline:
    """Each book once (a unique URL column); a new copy of a book replaces the old. An item
    takes SHOP_ITEM_DELAY seconds first (without blocking the event loop), as an images
    pipeline's downloads would."""

    def __init__(self, path, delay):
        self.path, self.delay = path, delay

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.settings.get("SHOP_DB"), crawler.settings.getfloat("SHOP_ITEM_DELAY"))

    def open_spider(self, spider=None):
        self.db = sqlite3.connect(self.path)
        self.db.execute("CREATE TABLE IF NOT EXISTS books (url TEXT UNIQUE, title TEXT, "
                        "price TEXT, stock TEXT)")

    def close_spider(self, spider=None):
        self.db.commit()
        self.db.close()

    async def process_item(self, item, spider=None):
        if self.delay:
            from twisted.internet import reactor

            await maybe_deferred_to_future(task.deferLater(reactor, self.delay, lambda: None))
        self.db.execute("INSERT OR REPLACE INTO books VALUES (?, ?, ?, ?)",
                        (item["url"], item["title"], item["price"], item["stock"]))
        self.db.commit()
        return item
'''

SETTINGS = '''
BOT_NAME = "shop"
SPIDER_MODULES = ["shop.spiders"]
ROBOTSTXT_OBEY = True
TELNETCONSOLE_ENABLED = False
ITEM_PIPELINES = {"shop.pipelines.SQLitePipeline": 300}
LOG_LEVEL = "INFO"
SHOP_ITEM_DELAY = 0
'''


@dataclass
class Run:
    """What one ``scrapy crawl books`` left: its exit code, log, feed items and answers."""

    returncode: int
    log: str
    items: list[dict[str, Any]]
    answers: list[dict[str, Any]]

    def changed(self) -> set[str]:
        """The URLs the frontier called changed in this run."""
        return {answer["url"] for answer in self.answers if answer["changed"]}


class Project:
    """The project in ``folder`` (written on creation)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        package = folder / "shop"
        (package / "spiders").mkdir(parents=True, exist_ok=True)
        (folder / "scrapy.cfg").write_text("[settings]\ndefault = shop.settings\n")
        (package / "__init__.py").write_text("")
        (package / "spiders" / "__init__.py").write_text("")
        (package / "spiders" / "books.py").write_text(SPIDER)
        (package / "pipelines.py").write_text(PIPELINES)
        (package / "settings.py").write_text(SETTINGS)
        self.runs = 0

    @property
    def database(self) -> Path:
        return self.folder / "books.db"

    def crawl(self, start: str, settings: dict[str, Any], timeout: float = 90) -> Run:
        """``scrapy crawl books`` with ``settings`` (``-s``), to its end (``start``: the
        start URLs, comma-separated)."""
        return self.finish(self.start(start, settings), timeout)

    def start(self, start: str, settings: dict[str, Any]) -> subprocess.Popen:
        """Start ``scrapy crawl books`` (``finish`` waits for it and reads what it left)."""
        self.runs += 1
        feed, answers = self.feed, self.answers
        command = [sys.executable, "-m", "scrapy", "crawl", "books", "-a", f"start={start}",
                   "-a", f"answers={answers}", "-O", f"{feed}:jsonlines",
                   "-s", f"SHOP_DB={self.database}"]
        for name, value in settings.items():
            command += ["-s", f"{name}={value}"]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(self.folder)])}
        return subprocess.Popen(command, cwd=self.folder, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    def finish(self, process: subprocess.Popen, timeout: float = 90) -> Run:
        out, _ = process.communicate(timeout=timeout)
        return Run(process.returncode, out, _lines(self.feed), _lines(self.answers))

    @property
    def feed(self) -> Path:
        """The current run's feed."""
        return self.folder / f"items-{self.runs}.jsonl"

    @property
    def answers(self) -> Path:
        """The current run's answers (what the spider noted of each response)."""
        return self.folder / f"answers-{self.runs}.jsonl"

    def books(self) -> dict[str, dict[str, str]]:
        """The database's books by URL."""
        with sqlite3.connect(self.database) as db:
            rows = db.execute("SELECT url, title, price, stock FROM books").fetchall()
        return {url: {"url": url, "title": title, "price": price, "stock": stock}
                for url, title, price, stock in rows}


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]

"""A book shop's spider and a slow item pipeline (issue 60): the index links to books, each
book page yields one item, and the pipeline takes ``TEST_ITEM_DELAY`` seconds per item
(without blocking the event loop) before it appends the item's URL to ``TEST_ITEMS_FILE``,
as an images pipeline and a database write would."""

from __future__ import annotations

from typing import Any

import scrapy
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import task

from scrapy_support.spiders import RecordingSpider


class BookSpider(RecordingSpider):
    name = "books"

    def parse(self, response: scrapy.http.Response):
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, callback=self.parse_book)

    def parse_book(self, response: scrapy.http.Response):
        yield from self._handle("parse_book", response)  # records the answer
        yield {"url": response.url, "title": response.css("h1::text").get()}


class SlowPipeline:
    def __init__(self, path: str, delay: float) -> None:
        self.path, self.delay = path, delay

    @classmethod
    def from_crawler(cls, crawler: Any) -> SlowPipeline:
        return cls(crawler.settings["TEST_ITEMS_FILE"], crawler.settings.getfloat("TEST_ITEM_DELAY"))

    async def process_item(self, item: dict, spider: Any = None) -> dict:
        from twisted.internet import reactor  # the one Scrapy installed (not at import)

        await maybe_deferred_to_future(task.deferLater(reactor, self.delay, lambda: None))
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(item["url"] + "\n")
        return item

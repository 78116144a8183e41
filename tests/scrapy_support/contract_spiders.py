"""Spiders that use Scrapy the way its users do, for tests/test_scrapy_contract.py.

Each records its callbacks like ``RecordingSpider`` (a JSONL file), plus the
``request_dropped`` signal and, at close, every stat. ``base`` is the test site's root URL.
"""

from __future__ import annotations

from typing import Any

import scrapy
from scrapy import signals

from scrapy_support.spiders import RecordingSpider


class ContractSpider(RecordingSpider):
    """RecordingSpider that also records dropped requests and all stats at close."""

    def __init__(self, base: str = "", **kw: Any) -> None:
        super().__init__(**kw)
        self.base = base.rstrip("/")

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> ContractSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.on_dropped, signal=signals.request_dropped)
        return spider

    def url(self, path: str) -> str:
        return self.base + path

    def on_dropped(self, request: scrapy.Request, spider: scrapy.Spider) -> None:
        self.record("dropped", url=request.url)

    def closed(self, reason: str) -> None:
        self.record("closed", reason=reason, stats={
            k: v for k, v in self.crawler.stats.get_stats().items()
            if isinstance(v, (int, float, str))})


class CookieSpider(ContractSpider):
    """A per-request cookie, as a login-protected page needs it on every fetch."""

    name = "cookies"

    async def start(self):
        yield scrapy.Request(self.url("/account"), cookies={"session": "abc"},
                             headers={"X-Token": "t1"}, flags=["mine"])


class BadStartSpider(ContractSpider):
    """Requests the frontier cannot store, in ``start()`` and in a callback."""

    name = "badstart"

    async def start(self):
        yield scrapy.Request(self.url("/with-request-in-meta"),
                             meta={"next": scrapy.Request(self.url("/x"))})
        yield scrapy.Request(self.url("/lambda"), callback=lambda response: self.record(
            "response", callback="lambda", url=response.url, request_url=response.url))
        yield scrapy.Request(self.url("/plain"))

    def parse(self, response: scrapy.http.Response):
        yield from self._handle("parse", response)
        if response.url.endswith("/plain"):
            yield scrapy.Request(self.url("/from-callback"), meta={"tags": {"a set"}})


class DupeSpider(ContractSpider):
    """Same-URL requests: a plain duplicate, a dont_filter one with another callback, and
    URLs that differ only in their fragment."""

    name = "dupes"

    async def start(self):
        yield scrapy.Request(self.url("/a"))
        yield scrapy.Request(self.url("/a"))  # a duplicate: dropped
        yield scrapy.Request(self.url("/a"), callback=self.parse_other, dont_filter=True,
                             meta={"which": "second"})
        yield scrapy.Request(self.url("/b#one"))
        yield scrapy.Request(self.url("/b#two"))  # the same resource: dropped

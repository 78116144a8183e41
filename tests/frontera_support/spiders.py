"""Spiders the scrapy-frontera subprocess crawls run; they record to a JSONL file.

``RevisitSpider`` gives its seeds through ``start_requests()``, which is what
scrapy-frontera 0.3.0 calls when ``FRONTERA_SCHEDULER_START_REQUESTS_TO_FRONTIER``
is set. ``StartOnlySpider`` uses Scrapy 2.13+'s ``async def start()`` only, to
show what that combination does.
"""

from __future__ import annotations

import json
import time
from typing import Any

import scrapy


class _RecordingSpider(scrapy.Spider):
    """Records every response and the close reason; follows links with ``parse``."""

    def __init__(self, output: str = "", seeds: str = "[]", **kw: Any) -> None:
        super().__init__(**kw)
        self.output = output
        self.seeds = json.loads(seeds)

    def record(self, kind: str, **fields: Any) -> None:
        with open(self.output, "a", encoding="utf-8") as out:
            out.write(json.dumps({"kind": kind, "time": time.time(), **fields}) + "\n")

    def parse(self, response: scrapy.http.Response):
        self.record("response", url=response.url, status=response.status,
                    body=response.text[:200],
                    lease="frontier_rate_dispatch" in response.meta)
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, callback=self.parse)

    def closed(self, reason: str) -> None:
        stats = self.crawler.stats.get_stats()
        self.record("closed", reason=reason,
                    stats={k: v for k, v in stats.items()
                           if k.startswith(("frontier_rate/", "scrapyfrontera/"))})


class RevisitSpider(_RecordingSpider):
    name = "frontera_revisit"

    def start_requests(self):
        for url in self.seeds:
            yield scrapy.Request(url, callback=self.parse)


class StartOnlySpider(_RecordingSpider):
    """Seeds from ``start()`` only (no ``start_requests``), the Scrapy 2.13+ way."""

    name = "frontera_start_only"

    async def start(self):
        for url in self.seeds:
            yield scrapy.Request(url, callback=self.parse)


class ErrbackSpider(RevisitSpider):
    """Has an ``errback`` method, which scrapy-frontera attaches to every frontier request."""

    name = "frontera_errback"

    def errback(self, failure):
        response = getattr(failure.value, "response", None)
        self.record("error", url=failure.request.url, error=type(failure.value).__name__,
                    status=getattr(response, "status", None))

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


class FidelitySpider(_RecordingSpider):
    """A seed with cookies, a header, bytes and tuple meta and tuple cb_kwargs; POST forms
    that link to each other (a cycle); a ``dont_revisit`` GET and a ``dont_filter`` POST
    from every visit of the seed."""

    name = "frontera_fidelity"

    def start_requests(self):
        yield scrapy.Request(self.seeds[0], callback=self.parse_home, cookies={"session": "abc"},
                             headers={"X-Token": "t1"},
                             meta={"raw": b"\x00\xff", "pair": (1, "two"), "label": "home"},
                             cb_kwargs={"kind": ("home", 1)})

    def parse_home(self, response: scrapy.http.Response, kind: Any):
        meta = response.meta
        self.record("home", url=response.url, kwarg=repr(kind), raw=repr(meta.get("raw")),
                    pair=repr(meta.get("pair")), label=meta.get("label"),
                    lease="frontier_rate_dispatch" in meta)
        yield scrapy.FormRequest(response.urljoin("/form"), formdata={"q": "1"},
                                 callback=self.parse_form)
        yield scrapy.Request(response.urljoin("/once"), callback=self.parse_form,
                             meta={"dont_revisit": True})
        yield scrapy.FormRequest(response.urljoin("/again"), formdata={"q": "1"},
                                 callback=self.parse_form, dont_filter=True)

    def parse_form(self, response: scrapy.http.Response):
        self.record("form", url=response.url, method=response.request.method)
        for path in ("/form", "/form2"):
            yield scrapy.FormRequest(response.urljoin(path), formdata={"q": "1"},
                                     callback=self.parse_form)

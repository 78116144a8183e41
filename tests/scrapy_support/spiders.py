"""The spider the subprocess crawls run: it records every callback to a JSONL file.

Arguments (``-a`` or ``crawl.py`` config): ``output`` (JSONL path),
``start`` (JSON list of ``{"url", "meta", "callback", "weight"}``) and
``follow`` ("1" follows ``<a href>`` links with ``parse``; a link ending in
``/bad-meta`` gets a set in its meta, which JSON cannot carry), ``start_pause``
(seconds between the first start request and the others) and ``start_stall`` (seconds
the event loop is blocked before the first start request, as a slow start blocks it). At close the
spider records the finish reason and the ``frontier_rate/`` stats.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import scrapy


class RecordingSpider(scrapy.Spider):
    name = "recorder"

    def __init__(self, output: str = "", start: str = "[]", follow: str = "0",
                 start_pause: str = "0", start_stall: str = "0", **kw: Any):
        super().__init__(**kw)
        self.output = output
        self.start_specs = json.loads(start)
        self.follow = follow == "1"
        self.start_pause = float(start_pause)
        self.start_stall = float(start_stall)

    async def start(self):
        time.sleep(self.start_stall)  # blocks the loop: a slow start
        for index, spec in enumerate(self.start_specs):
            if index == 1 and self.start_pause:  # the others a moment after the first
                await asyncio.sleep(self.start_pause)
            yield scrapy.Request(
                spec["url"],
                callback=getattr(self, spec.get("callback", "parse")),
                errback=self.on_error,
                meta=spec.get("meta", {}),
                method=spec.get("method", "GET"),
                headers=spec.get("headers"),
                dont_filter=spec.get("dont_filter", False),
            )

    def record(self, kind: str, **fields: Any) -> None:
        with open(self.output, "a", encoding="utf-8") as out:
            out.write(json.dumps({"kind": kind, "time": time.time(), **fields}) + "\n")

    def _meta(self, meta: dict) -> dict:
        return {k: v for k, v in meta.items() if isinstance(v, (str, int, float, list, dict))}

    def parse(self, response: scrapy.http.Response):
        yield from self._handle("parse", response)

    def parse_other(self, response: scrapy.http.Response):
        yield from self._handle("parse_other", response)

    def _handle(self, callback: str, response: scrapy.http.Response):
        self.record(
            "response", callback=callback, url=response.url, status=response.status,
            request_url=response.request.url, method=response.request.method,
            meta=self._meta(response.meta), body=response.text[:200],
            headers={k.decode(): v[0].decode() for k, v in response.request.headers.items()},
        )
        if self.follow:
            for href in response.css("a::attr(href)").getall():
                meta = {}
                if href.endswith("/bad-meta"):
                    meta["tags"] = {"not", "json"}  # a set: JSON cannot carry it
                yield response.follow(href, callback=self.parse, errback=self.on_error, meta=meta)

    def parse_bytes(self, response: scrapy.http.Response):
        """Record any response, binary ones included (they have no ``.text``)."""
        self.record(
            "response", callback="parse_bytes", url=response.url, status=response.status,
            request_url=response.request.url, meta=self._meta(response.meta),
            body_length=len(response.body), flags=list(response.flags),
            headers={k.decode("latin-1"): v[0].decode("latin-1")
                     for k, v in response.request.headers.items()},
        )
        return []

    def closed(self, reason: str) -> None:
        stats = self.crawler.stats.get_stats()
        self.record(
            "closed", reason=reason,
            stats={k: v for k, v in stats.items() if k.startswith("frontier_rate/")},
        )

    def on_error(self, failure):
        response = getattr(failure.value, "response", None)
        self.record(
            "error", url=failure.request.url, error=type(failure.value).__name__,
            status=getattr(response, "status", None),
        )

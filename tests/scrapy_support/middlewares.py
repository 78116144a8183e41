"""A spider middleware that records what Scrapy's spider middlewares see of each response
(``meta["frontier_rate"]`` above all), through the spider's ``record`` (RecordingSpider)."""

from __future__ import annotations

from typing import Any


class SeenBySpiderMiddleware:
    """Records ``("middleware", url, status, meta["frontier_rate"] or None)`` per response
    that reaches ``process_spider_input``."""

    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Any) -> SeenBySpiderMiddleware:
        return cls(crawler)

    def process_spider_input(self, response: Any, spider: Any = None) -> None:
        self.crawler.spider.record(
            "middleware", url=response.url, request_url=response.request.url,
            method=response.request.method, status=response.status,
            frontier_rate=response.meta.get("frontier_rate"), body_length=len(response.body))

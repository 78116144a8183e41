"""A spider that keeps a set of sites fresh.

It reads each site's ``/manifest.json`` (page weights) when there is one,
starts from the home pages, parses every page it gets and follows links.
The scheduler (frontier-rate) decides when each page is fetched again.

A page the manifest does not list (a home page, a navigation page) gets the
smallest weight the manifest gives: it is still revisited, to find new links,
but the budget goes to the pages the site asks to be kept fresh. Without a
manifest every page weighs 1.

    scrapy crawl pages -a start_urls=http://127.0.0.2:8080/,http://127.0.0.3:8080/
"""

from __future__ import annotations

from urllib.parse import urljoin

import scrapy


class PagesSpider(scrapy.Spider):
    name = "pages"

    def __init__(self, start_urls: str = "", manifest: str = "1", **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [u for u in start_urls.split(",") if u]
        self.use_manifest = manifest not in ("0", "false", "no")
        self.weights: dict[str, float] = {}
        self.unlisted_weight = 1.0

    async def start(self):
        for url in self.start_urls:
            if self.use_manifest:
                yield scrapy.Request(urljoin(url, "/manifest.json"), callback=self.parse_manifest,
                                     errback=self.no_manifest, meta={"dont_revisit": True},
                                     cb_kwargs={"home": url}, dont_filter=True)
            else:
                yield scrapy.Request(url, callback=self.parse)

    def parse_manifest(self, response, home: str):
        data = response.json()
        for page in data.get("pages", []):
            self.weights[page["url"]] = float(page.get("weight", 1.0))
        if self.weights:
            self.unlisted_weight = min(self.weights.values())
        yield scrapy.Request(home, callback=self.parse,
                             meta={"frontier_rate_weight": self.weight(home)})
        for url, weight in self.weights.items():
            yield scrapy.Request(url, callback=self.parse, meta={"frontier_rate_weight": weight})

    def no_manifest(self, failure):
        yield scrapy.Request(failure.request.cb_kwargs["home"], callback=self.parse)

    def parse(self, response):
        result = response.meta.get("frontier_rate", {})
        yield {
            "url": response.url,
            "title": response.css("title::text").get(),
            "changed": result.get("changed"),
        }
        for href in response.css("a::attr(href)").getall():
            url = response.urljoin(href)
            yield scrapy.Request(url, callback=self.parse,
                                 meta={"frontier_rate_weight": self.weight(url)})

    def weight(self, url: str) -> float:
        """The manifest's weight of ``url``; its smallest one for a page it does not list."""
        return self.weights.get(url, self.unlisted_weight)

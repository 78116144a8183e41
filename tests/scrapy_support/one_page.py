"""The source of a one-page spider for ``scrapy runspider``: its ``url`` argument is its start
URL, and it yields one item per answer (the tests of a crawl's opening and settings)."""

SPIDER = """
import scrapy


class One(scrapy.Spider):
    name = "one"

    def __init__(self, url="", **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [url]

    def parse(self, response):
        yield {"url": response.url}
"""

"""The Scrapy adapter: ``SCHEDULER = "frontier_rate.scrapy.Scheduler"``. Translates Scrapy's requests and
responses; may import ``crawl`` and everything below it, never ``frontera``."""

from frontier_rate.scrapy.scheduler import *  # noqa: F403 (the public path frontier_rate.scrapy.Scheduler)
from frontier_rate.scrapy.scheduler import __all__  # noqa: F401

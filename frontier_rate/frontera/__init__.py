"""The Frontera adapter: ``BACKEND = "frontier_rate.frontera.RevisitBackend"``. Translates Frontera's requests
and responses; may import ``crawl`` and everything below it, never ``scrapy``."""

from frontier_rate.frontera.backend import *  # noqa: F403 (the public path frontier_rate.frontera.RevisitBackend)
from frontier_rate.frontera.backend import __all__  # noqa: F401

"""Run one scrapy-frontera crawl in this process: ``python crawl.py config.json``.

The config is JSON: ``{"spider": "RevisitSpider", "settings": {...}, "args": {...}}``;
settings go in as they are (lists stay lists).
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from scrapy.crawler import CrawlerProcess  # noqa: E402

from frontera_support import spiders  # noqa: E402

SETTINGS = {
    "SCHEDULER": "scrapy_frontera.scheduler.FronteraScheduler",
    "SPIDER_MIDDLEWARES": {"scrapy_frontera.middlewares.SchedulerSpiderMiddleware": 0},
    "DOWNLOADER_MIDDLEWARES": {"scrapy_frontera.middlewares.SchedulerDownloaderMiddleware": 0},
    "BACKEND": "frontier_rate.frontera.RevisitBackend",
    "FRONTERA_SCHEDULER_START_REQUESTS_TO_FRONTIER": True,
    "FRONTERA_SCHEDULER_REQUEST_CALLBACKS_TO_FRONTIER": ["parse"],
    "EXTENSIONS": {"frontier_rate.frontera.KeepAlive": 500},
    "LOG_LEVEL": "INFO",
    "TELNETCONSOLE_ENABLED": False,
    "ROBOTSTXT_OBEY": False,
}


def main(path: str) -> None:
    with open(path, encoding="utf-8") as handle:
        config = json.load(handle)
    process = CrawlerProcess({**SETTINGS, **config.get("settings", {})},
                             install_root_handler=True)
    process.crawl(getattr(spiders, config.get("spider", "RevisitSpider")),
                  **config.get("args", {}))
    process.start()


if __name__ == "__main__":
    main(sys.argv[1])

"""Run one crawl of RecordingSpider in this process: ``python crawl.py config.json``.

The config is JSON: ``{"settings": {...}, "args": {...}, "spider": "module.Class"}``
(``spider`` defaults to ``RecordingSpider``; a module is looked up beside this file).
Settings go in as they are (lists stay lists, so regexes with commas survive), which
``-s`` on the scrapy command line cannot do.
"""

from __future__ import annotations

import importlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from scrapy.crawler import CrawlerProcess  # noqa: E402

from scrapy_support.spiders import RecordingSpider  # noqa: E402


def main(path: str) -> None:
    with open(path, encoding="utf-8") as handle:
        config = json.load(handle)
    settings = {
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        **config.get("settings", {}),
    }
    spider = RecordingSpider
    if config.get("spider"):
        module, _, name = config["spider"].rpartition(".")
        spider = getattr(importlib.import_module(module), name)
    process = CrawlerProcess(settings)
    process.crawl(spider, **config.get("args", {}))
    process.start()


if __name__ == "__main__":
    main(sys.argv[1])

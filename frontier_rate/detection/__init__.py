"""Change detection, framework-free: a body normalised and fingerprinted, the ``"content"`` mode
(segments, learned host masks, each page's memory), content rules and the detection process's
loop. Imports no crawler framework and no Redis, nothing of the store, client, engine, crawl kit
or adapters (an import-linter contract in setup.cfg); the crawl kit keeps the Redis-backed
memory (``crawl/shared_pages.py``), the Scrapy adapter the child process's glue."""

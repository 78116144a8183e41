"""The crawl kit the adapters share: settings, a response as evidence, fingerprints, politeness, sitemaps and
feeds, Scrapy's guarded internals. May import ``client`` and everything below it, never an adapter."""

"""Support for the Scrapy scheduler tests: a changing local site and a test spider."""

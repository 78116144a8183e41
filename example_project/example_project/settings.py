"""An ordinary Scrapy project turned into a revisiting crawler by the
frontier-rate lines below; everything else is Scrapy's defaults."""

BOT_NAME = "example_project"
SPIDER_MODULES = ["example_project.spiders"]
NEWSPIDER_MODULE = "example_project.spiders"

ROBOTSTXT_OBEY = True
USER_AGENT = "frontier-rate-example (+https://github.com/frontier-rate)"
CONCURRENT_REQUESTS = 16
CONCURRENT_REQUESTS_PER_DOMAIN = 2
TELNETCONSOLE_ENABLED = False
LOG_LEVEL = "INFO"

# --- frontier-rate: these lines make the crawl revisit pages as they change ---
SCHEDULER = "frontier_rate.scrapy.Scheduler"
# FRONTIER_RATE_REDIS_URL = "redis://localhost:6379/0"   # leave out: embedded Redis
FRONTIER_RATE_ESTIMATOR = "interval"   # "sam", "sa", "lln" (the paper's) or "interval" (ours)
FRONTIER_RATE_POLICY = "whittle"       # or "lagrangian"
FRONTIER_RATE_BUDGET = 2.0             # fetches per second, all hosts
FRONTIER_RATE_FINGERPRINT = "text"     # markup-only churn is no change
FRONTIER_RATE_STRIP_PATTERNS = [r"Generated at [^<]*"]   # a volatile line of the test-bed's pages

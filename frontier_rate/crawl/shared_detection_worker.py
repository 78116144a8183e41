"""The detection process with the pages' memories in Redis: ``python -m
frontier_rate.crawl.shared_detection_worker CONFIG``, with the environment variable
``FRONTIER_RATE_SHARED_PAGE_MEMORY`` holding ``shared_pages.spec``.

``detection_worker`` with one difference: each page's memory is read from Redis before its
answer is detected and written there after (``crawl/shared_pages.py``), so that the
detection of a page fetched by another process, or before a restart, compares with its
last copy. A module of its own so that the plain worker, the default, imports no Redis
client (it starts in ~0.2 s; this one ~0.1 s later).
"""

from __future__ import annotations

import json
import os
import sys

from frontier_rate.crawl.shared_pages import ENVIRONMENT, SharedPages
from frontier_rate.detection.detection_worker import log_to_crawl, serve

if __name__ == "__main__":
    log_to_crawl()
    serve(json.loads(sys.argv[1]), sys.stdin.buffer, sys.stdout.buffer,
          SharedPages.from_spec(os.environ[ENVIRONMENT]))

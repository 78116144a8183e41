"""Start a RevisitBackend on the embedded Redis, leave work queued, exit without ``stop()``.

``python unstopped.py NAMESPACE PAGES``: adds PAGES pages, takes the first
leases, reports a response for each, adds PAGES more pages and exits at once,
while the background worker still holds most of it. Run with
``FRONTIER_RATE_DATA_DIR`` set so the embedded server is this process's own
(it shuts down at exit).
"""

from __future__ import annotations

import logging
import sys
import time

from frontera.core.manager import FrontierManager
from frontera.core.models import Request, Response
from frontera.settings import Settings


def main(namespace: str, pages: int) -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    manager = FrontierManager.from_settings(Settings(attributes={
        "BACKEND": "frontier_rate.frontera.RevisitBackend",
        "FRONTIER_RATE_NAMESPACE": namespace,
        "FRONTIER_RATE_MIN_HOST_DELAY": 0.0,
        "FRONTIER_RATE_BUDGET": 1e6,
    }))
    manager.add_seeds([Request(f"http://h{i % 50}.test/a{i}") for i in range(pages)])
    leased: list[Request] = []
    deadline = time.monotonic() + 30
    while len(leased) < 64 and time.monotonic() < deadline:
        leased += manager.get_next_requests(64 - len(leased), key_type="domain", overused_keys=[])
    for request in leased:
        manager.page_crawled(Response(request.url, request=request, body=b"<p>seen</p>"))
    manager.add_seeds([Request(f"http://h{i % 50}.test/b{i}") for i in range(pages)])
    print(f"leased {len(leased)}", flush=True)  # and exit: no manager.stop()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))

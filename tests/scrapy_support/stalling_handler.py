"""A download handler that holds the event loop between the moment a request is handed to it
and its write: Scrapy's own HTTP/1.1 handler, after a blocking ``time.sleep`` of
``STALL_AFTER_HANDOFF`` seconds for every request whose path ends in ``/stall``. The request
reaches the site that much after the send hook let it go, as when a spider callback yielding
a manifest's requests holds the loop before a request's connection is made (issue 63's soak)."""

from __future__ import annotations

import inspect
import time
from typing import Any

from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler

STALL_AFTER_HANDOFF = 0.4


def _stall_if_asked(request: Any) -> None:
    if request.url.endswith("/stall"):
        time.sleep(STALL_AFTER_HANDOFF)


if inspect.iscoroutinefunction(HTTP11DownloadHandler.download_request):  # Scrapy 2.14+
    class StallingHandler(HTTP11DownloadHandler):
        async def download_request(self, request: Any, *args: Any) -> Any:
            _stall_if_asked(request)
            return await super().download_request(request, *args)
else:
    class StallingHandler(HTTP11DownloadHandler):  # type: ignore[no-redef]
        def download_request(self, request: Any, *args: Any) -> Any:
            _stall_if_asked(request)
            return super().download_request(request, *args)

"""The host delay kept by every process of a frontier, at the moment Scrapy sends.

``ScrapyPoliteness`` paces each host's download slot, which keeps the delay among one
process's requests. Another process on the same frontier has its own slots: before
issue 33 two processes sent requests to one host 12-30 ms apart (a robots.txt fetch
of one next to a page of the other). ``SharedSend`` hooks the downloader right before
a request goes to its download handler (``scrapy_compat.before_download``; robots.txt
fetches pass there too) and takes the host's next send time from Redis
(``frontier_rate.store.send_slot``); the request waits for it without blocking the event
loop. Hosts with no delay (Scrapy's default) cost nothing: no Redis call.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy.utils.httpobj import urlparse_cached

from frontier_rate.crawl import scrapy_compat as compat
from frontier_rate.store.send_slot import SendSlots

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

SEND_MARGIN = 0.01
"""Seconds added to a host's delay in its shared slot: the arrival of a request at the
server drifts by a few ms from the moment its wait ends (scheduling, the connection)."""


class SharedSend:
    """Take the host's shared send slot before each request of a host with a delay.

    ``delay_of(host)``: the host's delay as this process knows it (``HostGate.delay``:
    the frontier's minimum or the host's robots.txt Crawl-delay).
    """

    def __init__(self, crawler: Crawler, slots: SendSlots,
                 delay_of: Callable[[str], float]) -> None:
        self.crawler, self.slots, self.delay_of = crawler, slots, delay_of
        self.installed = compat.before_download(crawler, self.before_send)
        self.waited = 0.0
        if not self.installed:
            logger.warning("frontier-rate: this Scrapy's downloader has no download "
                           "handlers to hook; host delays hold within each process only")

    @classmethod
    def of(cls, crawler: Crawler, frontier: Any, delay_of: Callable[[str], float]) -> SharedSend:
        """The shared send slots of ``frontier``'s namespace, hooked into ``crawler``."""
        return cls(crawler, SendSlots(frontier.client, frontier.namespace), delay_of)

    async def before_send(self, request: Request) -> None:
        """Wait (without blocking) until ``request``'s host may be sent to by this process."""
        host = urlparse_cached(request).hostname
        delay = self.delay_of(host) if host else 0.0
        if delay <= 0:
            return
        at = await compat.in_thread(self.slots.reserve, host, delay + SEND_MARGIN)
        wait = at - time.monotonic()
        if wait > 0:
            self.waited += wait
            if self.crawler.stats is not None:
                self.crawler.stats.inc_value("frontier_rate/send_waits")
            await compat.sleep(wait)

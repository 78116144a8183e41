"""A Scrapy extension that measures the crawl's event loop: longest stall and peak memory.

Enable with ``EXTENSIONS = {"reliability_support.stall.StallMeter": 0}`` and
``STALL_METER_OUTPUT = "<path>.json"``. From spider_opened to spider_closed a
looping call ticks every ``TICK`` seconds; the longest time between two
ticks is how long the reactor was kept from running timers (a tick that
comes ``TICK`` late means a stall of about that much). At close it writes
JSON: ``max_gap`` (s), ``max_gap_at`` (epoch), ``long_gaps`` (every gap over
0.2 s as ``[at, gap]``), ``rss_open_kib`` / ``rss_peak_kib`` (the process's
peak resident memory, ``VmHWM``, at spider_opened and at close).
"""

from __future__ import annotations

import json
import resource
import time
from typing import Any

from scrapy import signals

from frontier_rate.crawl.scrapy_compat import looping_call as create_looping_call

TICK = 0.05


def peak_rss_kib() -> int:
    """Peak resident set size of this process's memory so far, in KiB.

    ``VmHWM`` from /proc/self/status: the high-water mark of this program's
    own address space. ``ru_maxrss`` is no good here: Linux carries the
    parent's peak over fork and exec, so a crawl started from a big pytest
    process would report pytest's size from its first moment.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class StallMeter:
    def __init__(self, output: str) -> None:
        self.output = output
        self.max_gap = 0.0
        self.max_gap_at = 0.0
        self.long_gaps: list[list[float]] = []
        self.rss_open = 0
        self._last = 0.0
        self._loop: Any = None

    @classmethod
    def from_crawler(cls, crawler: Any) -> StallMeter:
        meter = cls(crawler.settings.get("STALL_METER_OUTPUT") or "stall.json")
        crawler.signals.connect(meter.opened, signal=signals.spider_opened)
        crawler.signals.connect(meter.closed, signal=signals.spider_closed)
        return meter

    def opened(self, spider: Any) -> None:
        self.rss_open = peak_rss_kib()
        self._last = time.monotonic()
        self._loop = create_looping_call(self._tick)
        self._loop.start(TICK, now=False)

    def _tick(self) -> None:
        now = time.monotonic()
        gap, self._last = now - self._last, now
        if gap > self.max_gap:
            self.max_gap, self.max_gap_at = gap, time.time()
        if gap > 0.2:
            self.long_gaps.append([time.time(), gap])

    def closed(self, spider: Any, reason: str) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._tick()
        with open(self.output, "w", encoding="utf-8") as out:
            json.dump({"max_gap": self.max_gap, "max_gap_at": self.max_gap_at,
                       "long_gaps": self.long_gaps, "rss_open_kib": self.rss_open,
                       "rss_peak_kib": peak_rss_kib()}, out)

"""How the client's and the adapters' timers are paced: the tolerance of a timer and the pause
between attempts to reach Redis while it is down."""

CLOCK_SLACK = 0.005
"""Timers may fire this early; a retry, poll or flush that early still counts (the client and
the Scrapy scheduler's host gate and page batching)."""
REDIS_RETRY_FIRST = 1.0
REDIS_RETRY_MAX = 30.0
"""Seconds between an adapter's attempts to reach Redis while it is down: 1, 2, 4 ... at most 30."""

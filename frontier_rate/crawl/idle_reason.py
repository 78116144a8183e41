"""Why a run fetched nothing, in one line (issue 33).

A second run within ``MIN_INTERVAL`` of the first, or one after a forced stop whose leases
still run, used to end with 0 items and not a word. ``why_nothing`` reads the frontier
(pages, the next due time, the leases and when the last of them ends) and says which of
these held the run back. Framework-neutral; the Scrapy scheduler logs it at INFO once,
when a run that sent no page of the frontier closes.
"""

from __future__ import annotations

import time
from typing import Any

LEASES_SAMPLED = 1
"""Leases read per shard: the latest deadline is all the line needs."""


def clock_text(t: float) -> str:
    """``t`` (epoch seconds) as local ``YYYY-MM-DD HH:MM:SS``."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def lease_end(frontier: Any) -> float | None:
    """When the last lease of the namespace expires (this process's clock), or None."""
    latest = None
    session = frontier.session
    for shard in range(frontier.shards):
        top = session.client.zrange(frontier.keys.prefix(shard) + "leases", -LEASES_SAMPLED, -1,
                                    withscores=True)
        for _, score in top:
            latest = score if latest is None else max(latest, score)
    return None if latest is None else session.local(latest / 1e6)


def why_nothing(frontier: Any, now: float) -> str:
    """One sentence: why nothing of ``frontier`` could be fetched at ``now``."""
    stats = frontier.stats(now=now)
    pages, leased, gone = stats["pages"], stats["leased"], stats["gone"]
    if pages == 0:
        return f"namespace {frontier.namespace!r} holds no pages"
    parts = [f"namespace {frontier.namespace!r} holds {pages} pages"]
    if leased:
        end = lease_end(frontier)
        until = f" until {clock_text(end)}" if end is not None else ""
        parts.append(f"{leased} leased by another process or a stopped run{until}")
    if gone:
        parts.append(f"{gone} gone")
    due = frontier.next_due_time()
    if due is not None and due > now:
        parts.append(f"nothing due before {clock_text(due)} (in {due - now:.0f} s: "
                     "FRONTIER_RATE_MIN_INTERVAL and the page's estimate decide)")
    elif due is not None:
        parts.append("pages due now but none leased to this run")
    return "; ".join(parts)


def log_why_nothing(frontier: Any, now: float, logger: Any) -> None:
    """Log at INFO why a run fetched no page of ``frontier`` (a Redis error: why not)."""
    if frontier is None:
        return
    try:
        reason = why_nothing(frontier, now)
    except Exception as exc:  # closing while Redis is down: say so, never fail the close
        reason = f"the frontier could not be read ({exc})"
    logger.info("frontier-rate: this run fetched no page of the frontier: %s", reason)

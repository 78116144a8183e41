"""Per-host politeness for an adapter: robots.txt Crawl-delay and a gate on each host.

The frontier spaces leases by ``min_host_delay``; a crawler may still hand a
burst of leased pages for one host to its downloader, and Scrapy never applies
a robots.txt Crawl-delay itself (the design brief, ../shared/DESIGN.md beside the
repository, section 5). ``HostGate`` is the check every leased page passes before it leaves
the adapter: the host has room
under its concurrency, its robots.txt is known when it must be, and its
Crawl-delay has passed since the previous send. Knows nothing of any crawler
framework; times come from the caller.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass

from frontier_rate.client.clock import CLOCK_SLACK

logger = logging.getLogger(__name__)

DEFAULT_MAX_CRAWL_DELAY = 60.0
"""Largest robots.txt Crawl-delay obeyed (FRONTIER_RATE_MAX_CRAWL_DELAY); larger ones are clamped."""
ROBOTS_MAX_BYTES = 500 * 1024
"""Bytes of a robots.txt that are parsed (Google's limit, RFC 9309 asks for at least 500 KiB)."""
_CRAWL_DELAY_LINE = re.compile(r"^[ \t]*crawl[-_ ]?delay[ \t]*:[ \t]*([^\r\n#]*)", re.I | re.M)


def robots_crawl_delay(body: bytes, agent: str, host: str, maximum: float) -> float | None:
    """The Crawl-delay robots.txt ``body`` sets for ``agent``, made safe.

    Parsed with Protego (as Scrapy does) from the first ``ROBOTS_MAX_BYTES``;
    a delay above ``maximum`` is clamped to it with a WARNING. Values Protego
    ignores (not a number, negative, nan, inf) are named in a WARNING too, so
    a site owner's typo is visible. Never raises.
    """
    from protego import Protego

    text = body[:ROBOTS_MAX_BYTES].decode("utf-8", errors="replace")
    for match in _CRAWL_DELAY_LINE.finditer(text):
        raw = match.group(1).strip()
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not 0 <= value < math.inf:
            logger.warning("robots.txt of %s: Crawl-delay %r is not a number of seconds >= 0; "
                           "ignored", host, raw[:50])
    try:
        delay = Protego.parse(text).crawl_delay(agent)
    except Exception as exc:  # a malformed robots.txt means no Crawl-delay
        logger.debug("robots.txt of %s not parsed: %r", host, exc)
        return None
    if delay is None:
        return None
    delay = float(delay)
    if not 0 <= delay < math.inf:
        return None
    if delay > maximum:
        logger.warning("robots.txt of %s: Crawl-delay %g s clamped to %g s "
                       "(FRONTIER_RATE_MAX_CRAWL_DELAY)", host, delay, maximum)
        return maximum
    return delay


@dataclass
class Robots:
    """What this process knows about one host's robots.txt."""

    fetched_at: float | None = None
    pending: bool = False
    crawl_delay: float | None = None


class HostGate:
    """Which leased page may leave now: per-host concurrency, robots.txt, Crawl-delay.

    ``obey_crawl_delay``: wait for a host's robots.txt before its first page
    and keep its Crawl-delay between sends. ``framework_reads_robots``: the
    crawler fetches robots.txt before a host's first request itself (Scrapy's
    ROBOTSTXT_OBEY), so the gate only asks for a refresh after ``robots_ttl``.
    """

    def __init__(self, *, per_host: int, min_delay: float, obey_crawl_delay: bool,
                 framework_reads_robots: bool, robots_ttl: float, max_crawl_delay: float,
                 agent: str) -> None:
        if not 0 <= max_crawl_delay < math.inf:
            raise ValueError(f"FRONTIER_RATE_MAX_CRAWL_DELAY={max_crawl_delay!r} must be "
                             "a finite number of seconds >= 0")
        self.per_host = max(1, per_host)
        self.min_delay = min_delay
        self.obey_crawl_delay = obey_crawl_delay
        self.framework_reads_robots = framework_reads_robots
        self.robots_ttl = robots_ttl
        self.max_crawl_delay = max_crawl_delay
        self.agent = agent
        self.robots: dict[str, Robots] = {}
        self.load: dict[str, int] = {}
        self.ready_at: dict[str, float] = {}

    def needs_robots(self, host: str, now: float) -> bool:
        """True when the caller should fetch ``host``'s robots.txt now (marks it pending)."""
        if not self.obey_crawl_delay:
            return False
        state = self.robots.setdefault(host, Robots())
        if state.fetched_at is None and self.framework_reads_robots:
            return False
        stale = state.fetched_at is None or now - state.fetched_at > self.robots_ttl
        if stale and not state.pending:
            state.pending = True
            return True
        return False

    def robots_done(self, host: str, now: float) -> None:
        """A robots.txt fetch ended (answered or not): the host may go on."""
        state = self.robots.setdefault(host, Robots())
        state.fetched_at, state.pending = state.fetched_at or now, False

    def learn(self, host: str, status: int, body: bytes, now: float) -> float | None:
        """Read a robots.txt answer; the host's new Crawl-delay if it changed, else None."""
        state = self.robots.setdefault(host, Robots())
        delay = None
        if 200 <= status < 300:
            delay = robots_crawl_delay(body, self.agent, host, self.max_crawl_delay)
        state.fetched_at = now
        changed = delay is not None and delay != state.crawl_delay
        state.crawl_delay = delay
        return delay if changed else None

    def open(self, host: str, now: float) -> bool:
        """Whether a page of ``host`` may be sent now (room, robots known, delay passed)."""
        if self.load.get(host, 0) >= self.per_host:
            return False
        if self.obey_crawl_delay:
            state = self.robots.get(host)
            known = state is not None and state.fetched_at is not None
            if not known and not self.framework_reads_robots:
                return False
        return self.ready_at.get(host, 0.0) <= now + CLOCK_SLACK

    def sent(self, host: str, now: float) -> None:
        self.load[host] = self.load.get(host, 0) + 1
        robots = self.robots.get(host)
        if robots is not None and robots.crawl_delay:
            self.ready_at[host] = now + robots.crawl_delay

    def done(self, host: str) -> None:
        load = self.load.get(host, 0) - 1
        if load > 0:
            self.load[host] = load
        else:
            self.load.pop(host, None)

    def delay(self, host: str) -> float:
        """The gap ``host`` needs between requests: the frontier's minimum or its Crawl-delay."""
        robots = self.robots.get(host)
        return max(self.min_delay, (robots.crawl_delay or 0.0) if robots else 0.0)

    def longest_delay(self) -> float:
        return max([self.min_delay, *(r.crawl_delay for r in self.robots.values() if r.crawl_delay)])

    def next_ready(self, host: str, now: float) -> float | None:
        """When ``host``'s Crawl-delay ends, if in the future."""
        at = self.ready_at.get(host, 0.0)
        return at if at > now else None

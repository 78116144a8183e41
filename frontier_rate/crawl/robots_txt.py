"""What a robots.txt answer says to the crawler's politeness: its Crawl-delay, made safe, and
whether a 2xx answer is a robots.txt at all (``crawl.politeness.HostGate.learn`` reads them).
Framework-free; Protego parses, as Scrapy does."""

from __future__ import annotations

import logging
import math
import re

logger = logging.getLogger(__name__)

DEFAULT_MAX_CRAWL_DELAY = 60.0
"""Largest robots.txt Crawl-delay obeyed (FRONTIER_RATE_MAX_CRAWL_DELAY); larger ones are clamped."""
ROBOTS_MAX_BYTES = 500 * 1024
"""Bytes of a robots.txt that are parsed (Google's limit, RFC 9309 asks for at least 500 KiB)."""
_CRAWL_DELAY_LINE = re.compile(r"^[ \t]*crawl[-_ ]?delay[ \t]*:[ \t]*([^\r\n#]*)", re.I | re.M)
REFUSALS = (401, 403, 429)
"""robots.txt answers that refuse the crawler rather than say it has no rules: the
Crawl-delay known before is kept (``HostGate.learn``)."""
_ROBOTS_LINE = re.compile(rb"^[ \t]*(?:user[-_ ]?agent|disallow|allow|crawl[-_ ]?delay|sitemap|"
                          rb"host|request[-_ ]?rate)[ \t]*:", re.I | re.M)


def is_robots_txt(body: bytes) -> bool:
    """Whether a 2xx answer to robots.txt reads as one: it holds a rule line, or no markup
    at all (an empty file: no rules). A page of markup without a rule line is not (a bot
    wall, a login or consent page, the site's frame around "not found"): the site did not
    say its rules changed."""
    head = body[:ROBOTS_MAX_BYTES]
    return b"<" not in head or _ROBOTS_LINE.search(head) is not None


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

"""What a server says about when a page last changed: HTTP dates as evidence.

A ``Last-Modified`` header (or a sitemap ``<lastmod>``) turns the censored
"changed since the last fetch?" bit into a change time (Cho and Garcia-Molina,
"Estimating Frequency of Change", 2003, §5). The server's clock is not the
crawler's, so the change is placed by its age on the server's own clock, the
``Date`` of the same answer minus its ``Last-Modified`` (RFC 9110 §6.6.1: Date
is the origin's clock at the time of the answer), counted back from the
crawler's fetch time. Whether a date can be believed is decided per host by
lua/observe.lua against the content fingerprint.
"""

from __future__ import annotations

import datetime
import email.utils
import logging

logger = logging.getLogger(__name__)


def http_date(value: str | bytes | None) -> float | None:
    """An HTTP date (RFC 9110 §5.6.7, with the obsolete forms it accepts) as a Unix time;
    None when absent or unreadable."""
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    if not value:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        logger.debug("%r is not an HTTP date; not used as a change time", value[:100])
        return None
    if parsed.tzinfo is None:  # asctime dates carry no zone: they are GMT
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    return parsed.timestamp()


def change_time(last_modified: str | bytes | None, served_at: str | bytes | None,
                fetched_at: float, clock_rate: float = 1.0) -> float | None:
    """When the page changed, on the crawler's clock: ``fetched_at`` minus the age the
    server gives it (``Date`` − ``Last-Modified``, divided by ``clock_rate``, server
    seconds per crawler second: 1 but on a test-bed with simulated time). A date equal
    to ``Date`` (age 0: a server that stamps answers with "now") or after it comes out
    at or after ``fetched_at``, which lua/observe.lua counts against the host. Without
    a ``Date`` the Last-Modified is taken as a Unix time (clocks assumed in step);
    None without a readable Last-Modified."""
    modified = http_date(last_modified)
    if modified is None:
        return None
    served = http_date(served_at)
    if served is None:
        return modified
    return fetched_at - (served - modified) / clock_rate

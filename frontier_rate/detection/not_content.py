"""Which HTML answers are no copy of the page (``ContentDetector``'s not-content answers):
an empty body, a bot wall or captcha, an error page or a truncated copy much shorter than
the page's last copy, and another page of the host served in this one's place (a redirect
to its home or login page). The adapter records such an answer as a failed fetch, never
stored, never a change (docs/CHANGE_DETECTION.md, "Not-content answers")."""

from __future__ import annotations

from frontier_rate.detection.host_mask import HostMask
from frontier_rate.detection.segments import _ERROR, _WALL

MIN_TEXT = 1
"""A copy with fewer visible characters than this (none) is empty: not content."""
WALL_SIZE = 4096
"""Visible text up to this many characters may be a bot wall or error page."""
SHRINK = 0.25
"""A short error-like copy, or any copy, with less than this share (0.25, error pages)
or a tenth (any page of at least ``WALL_SIZE`` characters before) of the page's
previous visible text is no copy of it."""
REJECT_LIMIT = 3
"""After this many answers in a row taken as no copy, the next one is taken (a page
that really became short is not refused forever)."""
MIN_OVERLAP = 0.2
"""A copy sharing fewer than this share of the previous copy's segments, whose new text the
host has mostly served before (``SERVED_ELSEWHERE``), is another of its pages served in
this one's place (a redirect to a home or login page) the first time; taken if it comes
again. One whose new text the host never showed is this page rewritten: a change."""
MIN_OVERLAP_SEGMENTS = 20
"""... checked only for pages of at least this many segments."""
SERVED_ELSEWHERE = 0.5
"""The share of a copy's new segments already seen on the host (on any of its pages) from
which a copy with little overlap is another page served in this one's place. Measured
(issue 59, 2026-12-03): without it, a weekly newsletter's new issue and a state's COVID-19
page rewritten in full were taken for a redirect target, 17 of the corpus' missed changes."""


def not_content(parts: list[str], length: int, previous: int | None) -> str | None:
    """Why this HTML answer (its visible segments ``parts``, ``length`` characters in all) is
    not a copy of the page, or None. ``previous``: the visible length of the page's last
    copy (None: not known)."""
    if length < MIN_TEXT:
        return "empty"
    if length <= WALL_SIZE:
        text = " ".join(parts[:60]).lower()  # _WALL and _ERROR are lower case
        if (previous is None or length < 0.5 * previous) and _WALL.search(text):
            return "bot wall"
        if previous is not None and length < SHRINK * previous and _ERROR.search(text):
            return "error page"
    if previous is not None and previous >= WALL_SIZE and length < 0.1 * previous:
        return "truncated"
    return None


def served_in_place(segments: set[int], before: set[int], host: HostMask) -> bool:
    """Whether a copy (its segment hashes) is another page of ``host`` served in place of the
    page whose last copy held ``before`` (at least ``MIN_OVERLAP_SEGMENTS`` of them): it
    shares under ``MIN_OVERLAP`` of them, and at least ``SERVED_ELSEWHERE`` of its new
    segments were already seen on the host."""
    if len(segments & before) >= MIN_OVERLAP * len(before):
        return False
    added = segments - before
    seen = host.seen
    return sum(h in seen for h in added) >= SERVED_ELSEWHERE * len(added)

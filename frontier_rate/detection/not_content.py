"""Which HTML answers are no copy of the page (``ContentDetector``'s not-content answers):
an empty body, a bot wall or captcha, an error page (alone, or inside the site's frame) or
a truncated copy much shorter than the page's last copy, and another page of the host
served in this one's place (a redirect to its home or login page). The adapter records
such an answer as a failed fetch, never stored, never a change (docs/CHANGE_DETECTION.md, "Not-content answers")."""

from __future__ import annotations

from frontier_rate.detection.host_mask import HostMask
from frontier_rate.detection.segments import _ERROR, _WALL, is_html, segments

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
that really became short is not refused forever), unless it is ``ALWAYS_REFUSED``."""
ALWAYS_REFUSED = frozenset({"bot wall"})
"""Reasons refused however long they last, and not counted towards ``REJECT_LIMIT``: a page
does not become a bot wall. Taken after ``REJECT_LIMIT``, a wall standing for four fetches
was stored as the page's copy, a false change, and another when the page came back (issue
59: 4 of html-corpus-v3's 52 news revisits, a Cloudflare "Just a moment..." page standing
on spiegeldaily.de's sections)."""
WALL_BODY_BYTES = 64 * 1024
"""A 2xx body up to this many bytes is read for a bot wall's words before its validators are
kept (``wall_like``); a wall or challenge page is smaller."""
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
        text = _head(parts)
        if (previous is None or length < 0.5 * previous) and _WALL.search(text):
            return "bot wall"
        if previous is not None and length < SHRINK * previous and _ERROR.search(text):
            return "error page"
    if previous is not None and previous >= WALL_SIZE and length < 0.1 * previous:
        return "truncated"
    return None


ERROR_TEXT = 512
"""At most this many visible characters of new text make an error message (``error_in_frame``)."""
KEPT = 0.5
"""... in a copy that kept less than this share of the page's last text."""


def error_in_frame(parts: list[str], lengths: list[int], hashes: list[int],
                   added: set[int], previous: int) -> bool:
    """Whether a copy is the site's error page in the site's frame: its text new since the
    page's last copy (``added``: its segments not in that copy of ``previous`` characters;
    none on most revisits, which return at once) is a short error message and it
    kept under ``KEPT`` of that copy's text, its menus, footer and cookie banner being what
    is left. ``not_content``'s "error page" needs the whole copy under a quarter of the last
    one, which a frame with a cookie banner passes (issue 59: a policy page answered "This
    page isn't available. An unexpected error has occurred" inside 1,500 characters of its
    site's frame, against 5,800 for the policy, on three fetches: six false changes)."""
    if not added:
        return False
    new = [i for i, h in enumerate(hashes) if h in added]
    new_length = sum(lengths[i] for i in new)
    kept = sum(lengths) - new_length
    if new_length > ERROR_TEXT or not 0 < kept < KEPT * previous:
        return False  # no frame kept: ``not_content`` judges the copy as a whole
    return _ERROR.search(" ".join(parts[i] for i in new).lower()) is not None


def served_in_place(segments: set[int], before: set[int], added: set[int],
                    host: HostMask) -> bool:
    """Whether a copy (its segment hashes; ``added``: those not in ``before``) is another page
    of ``host`` served in place of the page whose last copy held ``before`` (at least
    ``MIN_OVERLAP_SEGMENTS`` of them): it shares under ``MIN_OVERLAP`` of them, and at least
    ``SERVED_ELSEWHERE`` of its new segments were already seen on the host."""
    if len(segments) - len(added) >= MIN_OVERLAP * len(before):
        return False
    seen = host.seen
    return sum(h in seen for h in added) >= SERVED_ELSEWHERE * len(added)


def wall_like(body: bytes, content_type: str | None) -> bool:
    """Whether a 2xx answer reads like a bot wall or challenge page (short visible text with
    a wall's words), although change detection took it as the page's copy (a wall on a
    short page is not shorter than half of it, so it is no bot wall to ``not_content``).

    Its ``ETag`` and ``Last-Modified`` are then not kept as the page's validators
    (``crawl/responses.outcome``): sent back, they got a 304 against the wall, and the page
    looked unchanged for as long as the wall stood (issue 63's soak: 143 such 304s on one
    page in 12 minutes). Worked out where the answer is detected (the detection process,
    when there is one: it parses the body again, off the crawl's event loop)."""
    if len(body) > WALL_BODY_BYTES or not is_html(body, content_type):
        return False
    parts = segments(body)  # as UTF-8, invalid bytes replaced
    if sum(map(len, parts)) > WALL_SIZE:
        return False
    return bool(_WALL.search(_head(parts)))


def _head(parts: list[str]) -> str:
    """The first 60 segments of a short copy, lower-cased (``_WALL`` and ``_ERROR`` are)."""
    return " ".join(parts[:60]).lower()

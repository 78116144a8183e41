"""Runs of fresh segments in a copy (``ContentDetector``'s rules): the segments a copy has and
the other has not, in runs of consecutive positions, with their neighbours. A run inside the
host's boilerplate is a menu edit, one made of consent-banner text is a banner, one inside
the page's own text is content (docs/CHANGE_DETECTION.md)."""

from __future__ import annotations

from array import array
from itertools import compress, pairwise

from frontier_rate.detection.segment_hashes import _CONSENT_BIT, _SHORT_BIT


def _spans(items: list[int], fresh: set[int]) -> list[tuple[int, int]]:
    """The ``(start, end)`` positions of the runs of consecutive ``fresh`` segments in
    ``items``. The positions are found in C (``compress``); Python only walks the fresh
    ones, which on a revisit are a few of a page's hundreds of segments."""
    if not fresh:
        return []
    spans: list[tuple[int, int]] = []
    for position in compress(range(len(items)), map(fresh.__contains__, items)):
        if spans and spans[-1][1] == position:
            spans[-1] = (spans[-1][0], position + 1)
        else:
            spans.append((position, position + 1))
    return spans


def _runs(order: list[int] | array, fresh: set[int]) -> list[tuple[list[int], int | None,
                                                                     int | None]]:
    """The runs of consecutive ``fresh`` segments in ``order``, each with the segment
    before and after it (None at the document's ends)."""
    items = list(order)
    size = len(items)
    return [(items[start:end], items[start - 1] if start else None,
             items[end] if end < size else None) for start, end in _spans(items, fresh)]


def consent_runs(order: list[int] | array, fresh: set[int]) -> set[int]:
    """Fresh runs that are (part of) a consent banner: every long segment has consent
    words (the rest are buttons: "Accept", "Close"), and at least two segments have
    them, or one has and so does a short segment beside the run (a button)."""
    found: set[int] = set()
    button = _CONSENT_BIT | _SHORT_BIT
    for run, left, right in _runs(order, fresh):
        consent = sum(1 for h in run if h & _CONSENT_BIT)
        if consent == 1 and any(n is not None and (n & button) == button for n in (left, right)):
            consent = 2
        if consent >= 2 and all(h & (_CONSENT_BIT | _SHORT_BIT) for h in run):
            found.update(run)
    return found


INSIDE_REACH = 8
"""How many ignored segments ``inside_content`` looks past on each side of a run."""


def inside_content(order: list[int] | array, fresh: set[int], ignore: set[int]) -> set[int]:
    """The ignored segments of fresh runs that sit inside the page's own text: within
    ``INSIDE_REACH`` segments on both sides there is a content segment (not ignored, not
    fresh, not the title). Text shared with other pages of the host there (an address, a contact
    paragraph, a clause common to two documents) is content, so its change counts; a
    menu or footer has no content beyond it on one side."""
    found: set[int] = set()
    items = list(order)
    size = len(items)
    for start, end in _spans(items, fresh):
        run = items[start:end]
        if any(h in ignore for h in run) and \
                _content_near(items, range(start - 1, max(0, start - 1 - INSIDE_REACH), -1),
                              fresh, ignore) and \
                _content_near(items, range(end, min(size, end + INSIDE_REACH)), fresh, ignore):
            found.update(h for h in run if h in ignore)
    return found


def _content_near(items: list[int], positions: range, fresh: set[int],
                  ignore: set[int]) -> bool:
    """A content segment at one of ``positions``: not ignored, not fresh, no consent
    banner text (position 0, the title, is never searched)."""
    return any(items[i] not in ignore and items[i] not in fresh
               and not items[i] & _CONSENT_BIT for i in positions)


MENU_RUN = 4
"""The most fresh segments in a run ``boilerplate_runs`` takes as a menu edit. A menu or a
widget of the template gains, loses or renames an item or two at a time; a longer run of new
short texts inside the boilerplate is a list the page shows (a product table with its prices,
a listing's entries, teasers): content, whose change counts (issue 59)."""


def boilerplate_runs(order: list[int] | array, fresh: set[int], masked: set[int]) -> set[int]:
    """The ``fresh`` segments (in a copy but not in the other) that sit in runs of at most
    ``MENU_RUN`` short fresh segments between masked ones (or a masked one and the
    document's end): a menu or widget whose items were renamed, added or removed, inside the
    host's boilerplate. A segment of the page's own content has content on at least one side
    (a page whose only text is the run has none), is long, or is one of a longer run."""
    found: set[int] = set()
    for run, left, right in _runs(order, fresh):
        if left is None and right is None or len(run) > MENU_RUN:
            continue
        if all(n is None or n in masked for n in (left, right)) \
                and all(r & _SHORT_BIT for r in run):
            found.update(run)
    return found


def replaced_slots(order: list[int] | array, before: list[int] | array, added: set[int],
                   removed: set[int], masked: set[int]) -> list[tuple[int, int]]:
    """``(anchor, text)`` for each boilerplate segment (``masked``) after which one short
    segment of the last copy (``before``, ``removed``) was replaced by ``text`` (``added``)
    in this copy (``order``): the slots of ``HostMask.slot_replaced``."""
    if not added or not removed:
        return []
    items = list(order)
    starts = [i for i in compress(range(1, len(items)), map(added.__contains__, items[1:]))
              if items[i] & _SHORT_BIT and items[i - 1] in masked]
    if not starts:
        return []
    after = dict(pairwise(before))
    found = []
    for i in starts:
        old = after.get(items[i - 1])
        if old is not None and old in removed and old & _SHORT_BIT:
            found.append((items[i - 1], items[i]))
    return found

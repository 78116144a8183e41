"""Sitemaps, feeds and pushes: what sites publish about their changes, parsed safely.

Placeholder for the parsing module (filled below)."""

from __future__ import annotations

SITEMAP_WEIGHT = 0.3
"""Default importance of a sitemap per page it lists (``sitemap_weight``)."""
IGNORED_WEIGHT = 0.01
"""Importance of a sitemap whose source is ignored for its host: fetched rarely, to see
whether it becomes right."""


def sitemap_weight(pages: float, ignored: bool = False, per_page: float = SITEMAP_WEIGHT) -> float:
    """The weight a sitemap gets as a page of the frontier: ``per_page`` times the weight of
    the pages it lists (so that its planned interval shrinks as it covers more of the
    host), ``IGNORED_WEIGHT`` once its claims are ignored for the host."""
    if ignored:
        return IGNORED_WEIGHT
    return max(per_page * pages, IGNORED_WEIGHT)

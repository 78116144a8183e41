"""What crosses the engine's API: a ``NewPage`` (what ``add_many`` takes), a ``Lease`` (a lease
on a page) and an ``Observation`` (what a fetch taught). Plain types, importable without Redis."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from frontier_rate.renamed import resolve

NewPage = tuple[str, float, "dict[str, Any] | None", int, bool]
"""A page for ``Frontier.add_many``: (url, weight, meta, priority, source); a bare url or a
shorter tuple takes the defaults (weight 1, no meta, priority 0, not a source). ``source``: the
page is a sitemap or feed, read for claims about other pages (docs/SIGNALS.md). The one shape
every layer passes down."""


@dataclass(frozen=True)
class Lease:
    """A page handed to a crawler: a lease until ``observe`` or ``failed``.

    ``etag`` / ``last_modified`` are the validators stored from the previous
    fetch (for a conditional request), ``None`` when unknown. ``due`` is the
    time the page fell due (lateness = fetch time - due).
    """

    url: str
    token: str
    host: str
    meta: dict | None = None
    etag: str | None = None
    last_modified: str | None = None
    due: float | None = None
    first: bool = False
    """The page was never fetched before (its first successful fetch is still to come)."""


RENAMED = {"Dispatch": "Lease"}
"""Retired names still importable (issue 61): old -> new (``frontier_rate.renamed``)."""


def __getattr__(name: str) -> Any:
    return resolve(globals(), name, RENAMED)


@dataclass(frozen=True)
class Observation:
    """What one fetch taught: change seen, new estimate, next due time.

    ``accepted`` is False when the lease token was not the page's open lease
    (expired or unknown): then nothing changed and the other fields describe
    the page as it is.
    """

    changed: bool
    estimate: float
    next_due: float | None
    accepted: bool = True
    dated: bool = False
    """The change time (``changed_at`` / Last-Modified) passed its checks and was learned."""

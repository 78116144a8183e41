"""A call for Redis as the client keeps it until Redis has taken it (``Call``, ``claim_call``),
and what both adapters make of its result (``result_meta``, ``status_reason``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from frontier_rate.engine.records import Lease, NewPage, Observation
from frontier_rate.renamed import resolve

"""A page for ``add``: (url, weight, meta[, priority]), as ``Frontier.add_many`` takes it."""

Claim = tuple[str, float | None, str]
"""A claim for ``Frontier.signal_many``: (url, changed_at or None, source)."""

Stat = Callable[[str, float, bool], None]
"""``stat(name, value, replace)``: add ``value`` to ``frontier_rate/<name>`` (or set it)."""


def status_reason(status: int) -> str:
    """The reason recorded for an HTTP answer that is not a fetch result (both adapters)."""
    return f"HTTP {status}"


def result_meta(observation: Observation | None, *, not_modified: bool,
                first: bool = False) -> dict[str, Any]:
    """The response meta value both adapters fill: the observation, or ``held`` while
    Redis has not taken it (every key present in both cases).

    ``new``: the page's first fetch; its copy is new, so ``changed`` is True (the
    estimator does not count a first fetch as a change)."""
    if first:
        changed: bool | None = True
    else:
        changed = None if observation is None else bool(observation.changed)
    if observation is None:
        return {"held": True, "new": first, "changed": changed, "not_modified": not_modified,
                "estimate": None, "next_due": None}
    return {"held": False, "new": first, "changed": changed, "not_modified": not_modified,
            "estimate": observation.estimate, "next_due": observation.next_due}


@dataclass(eq=False)
class Call:
    """One call for Redis, kept in the outbox until Redis has taken it.

    ``kind``: "add" (``pages``: ``NewPage`` tuples), "observe" (``args``
    are ``Frontier.observe`` keywords, ``fetched_at`` included), "failed"
    (``reason``, ``status``, ``now``), "host_delay" (``host``, ``seconds``) or "hint"
    (``hints``: its claims, ``discover``, ``sitemap``: ``claim_call``).
    *Settled* once applied, or held by an outage; ``waiters`` run then, on the
    adapter's thread.
    """

    kind: str
    lease: Lease | None = None
    args: dict[str, Any] = field(default_factory=dict)
    pages: list[NewPage] = field(default_factory=list)
    observation: Observation | None = None
    applied: bool = False
    held: bool = False
    journaled: bool = False
    """Written to the outage journal (``spool.OutageJournal``) while Redis was away."""
    settled: bool = False
    waiters: list[Callable[[Call], None]] = field(default_factory=list)

    def settle(self) -> int:
        """Mark the call settled and run its waiters (on the adapter's thread); how many
        ran (none if it was settled already)."""
        if self.settled:
            return 0
        self.settled = True
        waiters, self.waiters = self.waiters, []
        for waiter in waiters:
            waiter(self)
        return len(waiters)

    def when_settled(self, waiter: Callable[[Call], None]) -> None:
        """Run ``waiter(self)`` once settled (at once if it already is)."""
        if self.settled:
            waiter(self)
        else:
            self.waiters.append(waiter)


def claim_call(claims: list[Claim], *, discover: bool,
               sitemap: tuple[str, float, str] | None = None) -> Call:
    """A "hint" call (``FrontierClient.submit`` it): claims of a sitemap, feed or push
    (``Frontier.signal_many``); ``sitemap``: the (URL, weight, source) of the document they
    came from, re-weighted after them (``signals.IGNORED_WEIGHT`` once its source is ignored
    for its host). Advisory: not spooled at close (the next fetch of the sitemap tells
    again)."""
    return Call("hint", None, {"hints": list(claims), "discover": discover, "sitemap": sitemap})


RENAMED = {"failure_reason": "status_reason", "Hint": "Claim", "hint_call": "claim_call"}
"""Retired names still importable (issue 61): old -> new (``frontier_rate.renamed``)."""


def __getattr__(name: str) -> Any:
    return resolve(globals(), name, RENAMED)

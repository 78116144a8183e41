"""Change evidence that does not come from fetching the page, and whether to believe it.

Sitemaps (``<lastmod>``), feeds (entry dates) and pushes (IndexNow, WebSub, a CLI line)
tell the frontier that a page changed, and often when. ``Frontier.signal_many`` hands each
such *claim* to lua/hint.lua; this module is the Python statement of the rules the Lua
applies (lua/signals.lua), so that tests can check the two agree, and of the constants
both use. No Redis, no I/O.

A claim is (page, claimed last change time ``c``, source, received at ``S``). Against
the page's last fetch ``L`` it says either "changed since the last fetch" (``c > L``) or
"unchanged since the last fetch, as of ``S``" (``c <= L``). Per host and per source the
claims are checked against what fetches find, as Last-Modified dates are
(lua/observe.lua, docs/ARCHITECTURE.md):

- at the page's next fetch, a pending "changed" claim is right exactly when the
  fingerprint changed (the fetch after ``c``);
- after a fetch that found a change somewhere in ``(L, F]``, the next claim about the
  page must date its last change after ``L`` (a constant or stale date fails);
- a claim dated after ``S + FUTURE_SLACK`` fails at once.

A (host, source) pair is *ignored* while more than 1 in ``TRUST_RATIO`` of its checks
failed, and *trusted* once it has ``PROBATION`` checks and is not ignored: a source is
believed only where it has been seen to match reality (Google's rule for lastmod), so a
lying sitemap never moves a schedule. A trusted "changed" claim makes the page due at
once (due = the claimed change time, so the stalest copies lead their host's queue); a
trusted "unchanged" claim moves the next fetch later, as if the page had been fetched at
``S``, but never past ``L + POSTPONE_MAX * planned`` (so that pages of a source that
stops telling the truth are still fetched and the lie is found). A checked, trusted
"changed" claim that the fetch confirmed gives the estimator a dated change
(``since = F - c``), as a believable Last-Modified does.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

TRUST_RATIO = 10
"""A (host, source) is ignored while more than 1 in this many checks failed (as dates:
DATE_TRUST in lua/observe.lua)."""
PROBATION = 3
"""Checks a (host, source) needs before its claims move any schedule."""
FUTURE_SLACK = 60.0
"""Seconds a claimed change may lie after the time the claim was received (clock skew)."""
POSTPONE_MAX = 16.0
"""An "unchanged" claim delays a page's next fetch to at most this many planned intervals
after its last fetch."""
SOURCE_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
"""What a source name may be (it is stored with the host in Redis)."""
IGNORED_WEIGHT = 0.01
"""Importance of a sitemap whose source is ignored for its host: fetched rarely, to see
whether it becomes right."""

# hint outcomes (lua/hint.lua reply, per claim)
UNKNOWN, IGNORED_PAGE, NEW, DUE, HELD, POSTPONED, UNCHANGED, FUTURE, PENDING = range(9)
OUTCOMES = ("unknown", "not_revisited", "new", "due", "held", "postponed", "unchanged",
            "future", "pending")
"""Names of the outcomes, as ``Frontier.signal_many`` counts them: the page is unknown; gone
or quarantined; never fetched yet (due anyway); made due at once; a "changed" claim kept
for checking but not acted on (source not trusted); next fetch postponed; an "unchanged"
claim not acted on; a future date (a failed check); a "changed" claim on a page being
fetched (checked when its result comes)."""
# trust transitions (lua/signals.lua)
BECAME_IGNORED, BECAME_TRUSTED = 1, 2


@dataclass(frozen=True)
class Tally:
    """Checks of one (host, source): how many, how many failed."""

    checked: float = 0.0
    bad: float = 0.0

    @property
    def ignored(self) -> bool:
        return self.bad * TRUST_RATIO > self.checked

    @property
    def trusted(self) -> bool:
        return self.checked >= PROBATION and not self.ignored

    def check(self, good: bool) -> tuple[Tally, int]:
        """The tally after one check, and the transition (BECAME_IGNORED, BECAME_TRUSTED
        or 0) of its ignored state."""
        after = Tally(self.checked + 1, self.bad + (0 if good else 1))
        if after.ignored and not self.ignored:
            return after, BECAME_IGNORED
        if self.ignored and not after.ignored:
            return after, BECAME_TRUSTED
        return after, 0


@dataclass(frozen=True)
class Record:
    """What the frontier keeps per page about claims (O(1): the latest claim only).

    ``claim``/``source``/``received``: the latest claim; ``pending``: it says "changed
    since the last fetch" and no fetch has checked it yet; ``win_lo``, ``win_hi``: the
    last fetch that found a change (the change lies in ``(win_lo, win_hi]``) and
    ``win_open``: no claim has been checked against that window yet."""

    claim: float = math.nan
    source: str = ""
    received: float = 0.0
    pending: bool = False
    win_lo: float = 0.0
    win_hi: float = 0.0
    win_open: bool = False


def on_hint(record: Record | None, tally_of, claim: float | None, source: str, now: float,
            fetches: int, last_fetch: float, leased: bool
            ) -> tuple[Record | None, int, list[tuple[str, bool]]]:
    """Apply one claim (lua/hint.lua): the page's new record, the outcome (without the
    schedule: DUE / POSTPONED say what the schedule should do) and the checks made, as
    (source, good) pairs for ``tally_of(source)``'s host. ``claim`` None: "changed now".
    """
    c = now if claim is None else claim
    if c > now + FUTURE_SLACK:  # nothing about the page is kept
        return record, FUTURE, [(source, False)]
    rec = record or Record(claim=c, source=source, received=now)
    checks: list[tuple[str, bool]] = []
    if rec.win_open and rec.win_hi <= now:
        checks.append((source, c > rec.win_lo))
        rec = replace(rec, win_open=False)
    trusted = _after(tally_of(source), checks).trusted
    if fetches == 0:
        return replace(rec, claim=c, source=source, received=now, pending=False), NEW, checks
    if c > last_fetch:
        rec = replace(rec, claim=c, source=source, received=now, pending=True)
        if leased:
            return rec, PENDING, checks
        return rec, DUE if trusted else HELD, checks
    # "unchanged since the last fetch": a pending claim of another fetch stays pending
    rec = replace(rec, received=now) if rec.pending else \
        replace(rec, claim=c, source=source, received=now)
    if leased or not trusted:
        return rec, UNCHANGED, checks
    return rec, POSTPONED, checks


def _after(tally: Tally, checks: list[tuple[str, bool]]) -> Tally:
    for _, good in checks:
        tally, _ = tally.check(good)
    return tally


def on_observe(record: Record | None, tally_of, changed: bool, last_fetch: float, now: float
               ) -> tuple[Record | None, float | None, list[tuple[str, bool]]]:
    """A fetch at ``now`` after one at ``last_fetch`` found ``changed`` (lua/signals.lua
    ``lib.signal_observe``): the page's new record, the age of a dated change the estimator
    may learn (a trusted claim the fetch confirmed) or None, and the checks made."""
    if record is None:
        return None, None, []
    rec, since, checks = record, None, []
    if rec.pending and rec.claim < now:
        good = changed
        checks.append((rec.source, good))
        rec = replace(rec, pending=False)
        if good and _after(tally_of(rec.source), checks).trusted:
            since = now - rec.claim
    if changed:
        rec = replace(rec, win_lo=last_fetch, win_hi=now, win_open=True)
    return rec, since, checks


def postponed_due(due: float, planned: float, last_fetch: float, received: float) -> float:
    """The next fetch after a trusted "unchanged as of ``received``" claim: as if the page
    had been fetched then, ``received + planned``, but never past ``last_fetch +
    POSTPONE_MAX * planned`` and never earlier than ``due``."""
    return max(due, min(received + planned, last_fetch + POSTPONE_MAX * planned))


def hinted_due(due: float, claim: float, now: float) -> float:
    """The due time of a page a trusted claim says changed at ``claim``: at once, ahead of
    pages that fell due after the change (the stalest copy first)."""
    return min(due, claim, now)


def check_source(source: object) -> str:
    """A source name as stored, or ValueError naming it."""
    if not isinstance(source, str) or not SOURCE_RE.match(source):
        raise ValueError(f"source must match {SOURCE_RE.pattern} (e.g. 'sitemap', 'feed', "
                         f"'push'), got {source!r}")
    return source

"""Co-change evidence: a change seen on one page of a URL group (or of a host, for pages of
small groups) as evidence that its other pages changed too (issue 62). No Redis:
lua/signals.lua ("Co-change") applies the same rules atomically in observe.lua,
candidates.lua and refresh.lua; tests check the two agree.

Why: below ~0.1 fetches/page/day a page is fetched a few times in its life and its own
history says little, but pages of one site often change together (terms and privacy policy
updated the same day, a redesign touching every page). What is kept, per host, O(1) per
observation and never a scan of the host's pages:

- the host's latest **change event**: the window (lo, hi] between the fetch before a change
  and the fetch that found it (any page of the host); a change found over a window that
  overlaps it is the same event, its window narrowed (so the pages that found it are not
  checked against it again);
- a decayed **tally** (checks, hits, expected): every later fetch of a page of the host whose
  copy predates the event (its last fetch < hi) checks whether the host's pages change
  together: checks += 1, hits += I (it changed too), expected += the chance it changed on its
  own over the same interval, 1 - exp(-lambda tau) at its own planned rate; each count is
  first multiplied by ``FORGET``, so a host whose pages stopped changing together loses trust
  within a few checks.

**Groups.** A commit to a documentation site touches one section or one language, not the
site: measured on ``benchmarks/docs_sites.py``'s sites, a host's share of checks that found a
change was 0.03-0.46, too low to trust, while a sample of a few pages per URL group found
changes its group's other copies shared (``benchmarks/sample_then_revisit.py``). So the record
(event and tally) is kept per **URL group**, the host and the path template of
``lookalike.url_template`` (``/zh/tutorial/*``), once the group holds ``GROUP_MIN`` pages
(``record_key``), and per host for the pages of smaller groups (a policy site's ``/terms`` and
``/privacy`` are groups of one: their host is their group). What follows says "host" for
either. A group's event brings forward the group's pages with the oldest copies (``GROUP_LOOK``
of them, from an index of the group's pages by last fetch), a host's its earliest due.

The host is **trusted** while ``checks >= PROBATION``, ``hits >= MIN_SHARE * checks`` and
``hits >= LIFT * expected``: coincidences well beyond chance, the "interest" (lift) of an
association P(A and B) / (P(A) P(B)) of Brin, Motwani, Ullman & Tsur (SIGMOD 1997), here
hits / expected, and confirmed by later fetches as the claims of sitemaps are
(``evidence``: probation, then kept only while checks agree). A trusted host's change event
makes its other queued pages fetched before it worth ``q * w_eff`` (``value``), where
``q = hits / checks`` is the learned chance that a page of the host changed with it and
``w_eff`` the page's effective weight (w / lambda under the freshness objective: what a fetch
of a copy known to be stale is worth in seed 001's index, scaled by the chance it is stale).
A page whose value reaches its host's threshold is due at once (``PULL_LOOK`` earliest-due
pages of the host per event, a bounded cost) and ranks by that value.

**Trust pooled over hosts.** At 0.01-0.03 fetches/page/day a host's pages are fetched too
rarely for the 4 checks it needs on its own. So every check also goes into one **population**
tally per shard (``POOL_FORGET``), and a host's tally is read as its own checks plus
``POOL_STRENGTH`` pseudo-checks at the population's rates (``pooled``): the posterior mean of a
binomial share under a Beta(m p0, m (1 - p0)) prior centred on the pooled share p0,
(hits + m p0) / (checks + m), the empirical Bayes estimate of many binomial shares (Robbins
1956; Efron & Morris, JASA 1975; Casella, Am. Stat. 1985), with the prior's strength m
fixed rather than fitted. The hits expected by chance are shrunk alike, and the three trust
conditions apply to the shrunk tally. A host with no checks of its own is then trusted exactly
when the population is (and it has ``POOL_MIN`` decayed checks); a host's own failed checks
outweigh the prior after a few (its pages that never change together lose trust), and its own
confirmed ones let it be trusted before its 4th check. The prior stands in for the number of
checks, not for the host's own pattern: trusted through it only once ``POOL_EVENTS`` of the
host's change events were each confirmed by a later fetch (``events``), since pages that
changed together once and never again confirm one event as well as pages that always do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from frontier_rate.math.lookalike import url_template

PROBATION = 3
"""Decayed checks before a host's co-change evidence moves anything (as ``evidence.PROBATION``;
with ``FORGET`` it takes 4 checks: 1 + 0.9 + 0.81 = 2.71 < 3)."""
MIN_SHARE = 0.5
"""Least share of checks that must have found a change."""
LIFT = 2.0
"""Least ratio of hits to the hits expected by chance (each page's own rate)."""
FORGET = 0.9
"""Each check first multiplies the tally by this: about the last 10 checks count."""
PULL_LOOK = 8
"""Queued pages of a host (earliest due first) a trusted change event may bring forward."""
POOL_STRENGTH = 3.0
"""m: how many checks the population's record counts for in a host's (the Beta prior's
strength; as many as ``PROBATION``, so a host with no checks takes the population's verdict)."""
POOL_MIN = 10.0
"""Decayed checks the population needs before it is anyone's prior."""
POOL_FORGET = 0.99
"""Each check first multiplies the population's tally by this: about the last 100 count."""
GROUP_MIN = 4
"""Pages a URL group (host and path template) must hold for its own record; a smaller group's
pages count with their host (a site's terms and privacy pages are groups of one each)."""
GROUP_LOOK = 32
"""Pages of a group (oldest copies first) a trusted change event of the group may bring
forward."""
POOL_EVENTS = 2
"""Change events of its own, each confirmed by a later fetch, before the prior counts for a
host (one coincidence is no pattern)."""


@dataclass
class Tally:
    """A host's co-change record: its latest change event (lo, hi], its decayed checks, and
    how many of its events a later fetch confirmed (``events``; ``confirmed``: the hi of the
    latest of them)."""

    lo: float = 0.0
    hi: float = 0.0
    checks: float = 0.0
    hits: float = 0.0
    expected: float = 0.0
    events: float = 0.0
    confirmed: float = 0.0

    def trusted(self) -> bool:
        """Do the host's pages change together beyond chance, as later fetches confirmed?"""
        return (self.checks >= PROBATION - 1e-9 and self.hits >= MIN_SHARE * self.checks
                and self.hits >= LIFT * self.expected)

    def share(self) -> float:
        """q: the learned chance that a page of the host changed with its host's event."""
        return self.hits / self.checks if self.checks > 0 else 0.0

    def news_for(self, last_fetch: float) -> bool:
        """Is the latest event newer than a copy fetched at ``last_fetch``?"""
        return self.hi > last_fetch

    def observe(self, changed: bool, last_fetch: float, now: float, rate: float) -> bool:
        """A fetch at ``now`` of a page of the host last fetched at ``last_fetch`` (planned
        rate ``rate``) that found ``changed``: a check when the event is news to that copy,
        then, when it changed, the event narrowed or a new one; whether it is a new one."""
        if self.news_for(last_fetch):
            self.checks = self.checks * FORGET + 1.0
            self.hits = self.hits * FORGET + (1.0 if changed else 0.0)
            self.expected = self.expected * FORGET + chance(rate, now - last_fetch)
            if changed and self.confirmed < self.hi:
                self.events, self.confirmed = self.events + 1.0, self.hi
        if changed:
            if last_fetch < self.hi:  # overlaps the event's window: the same event, narrowed
                self.lo = max(self.lo, last_fetch)
            else:
                self.lo, self.hi = last_fetch, now
                return True
        return False


def pooled(own: Tally, population: Tally | None) -> Tally:
    """``own`` shrunk toward ``population`` (module docstring): its checks, hits and expected
    plus ``POOL_STRENGTH`` checks at the population's share and chance rate; ``own`` itself
    while the population has fewer than ``POOL_MIN`` decayed checks (or none is given) or the
    host fewer than ``POOL_EVENTS`` confirmed events."""
    if (population is None or population.checks < POOL_MIN - 1e-9
            or own.events < POOL_EVENTS - 1e-9):
        return own
    m = POOL_STRENGTH / population.checks
    return Tally(own.lo, own.hi, own.checks + POOL_STRENGTH, own.hits + m * population.hits,
                 own.expected + m * population.expected, own.events, own.confirmed)


def observe_population(population: Tally, changed: bool, last_fetch: float, now: float,
                       rate: float) -> None:
    """The check a host's tally just took (``Tally.observe``, when its event was news to the
    copy), added to the shard's population tally with ``POOL_FORGET``."""
    population.checks = population.checks * POOL_FORGET + 1.0
    population.hits = population.hits * POOL_FORGET + (1.0 if changed else 0.0)
    population.expected = population.expected * POOL_FORGET + chance(rate, now - last_fetch)


def chance(rate: float, tau: float) -> float:
    """The chance that a Poisson page of ``rate`` changed within ``tau``: 1 - e^{-rate tau}."""
    return -math.expm1(-max(rate, 0.0) * max(tau, 0.0))


def record_key(host: str, url: str, group_pages: int) -> str:
    """Whose record a page's fetch checks and feeds: its URL group's (host + path template,
    ``lookalike.url_template``) once the group holds ``GROUP_MIN`` pages (``group_pages``), its
    host's otherwise (module docstring, "Groups")."""
    if group_pages >= GROUP_MIN:
        return host + url_template(url)
    return host


def value(tally: Tally, w_eff: float) -> float:
    """What a fetch of a page of a trusted host whose copy predates its event is worth:
    q * w_eff (0 for an untrusted host)."""
    if not tally.trusted():
        return 0.0
    return tally.share() * w_eff


def pulled(tally: Tally, w_eff: float, last_fetch: float, nu: float) -> bool:
    """Is a queued page (fetched at ``last_fetch``, effective weight ``w_eff``) due at once
    after its trusted host's change event, at host threshold ``nu``?"""
    return tally.news_for(last_fetch) and tally.trusted() and value(tally, w_eff) >= nu

"""``Frontier``: the revisit scheduler with its state in Redis.

One object per process; any number of processes (and machines) share a
frontier through its Redis namespace. Per page the engine keeps a change-rate
estimate (seed 004), plans the next fetch where the page's index reaches the
threshold ν (seeds 001/002, docs/MATH.md, seeds 001-002), and hands due pages out as leases
that respect each host's minimum delay and the shared fetch budget.

``Frontier`` is a facade: each of its jobs is one collaborator in a module of its own
(docs/ARCHITECTURE.md has the map):

- ``session.Session``: the open namespace (client, configuration, shared settings, clock
  offset to Redis, error translation); ``shards.ShardCalls``: shard script calls;
- ``intake.Intake``: new pages, host delays; ``leases.LeaseDesk``: leases;
  ``results.Results``: observations, failures, releases; ``signals.Signals``: claims of
  sitemaps, feeds and pushes (``evidence`` states their rules);
- ``threshold.Threshold``: the re-solve of ν and the host thresholds;
- ``inspection.Inspector``: records and counters (what the CLI reads);
- ``validation``: every argument checked before anything is sent; ``wire``: the
  Python-Lua wire format.

Choices worth knowing:

- Leases: ``observe``/``failed`` are accepted once per lease token, and only
  while that lease is the page's open lease (``results``).
- Corrupt data: a page whose state, URL or meta in Redis cannot be used is
  quarantined (out of its queue and the lease set, listed by ``quarantined()``
  with the reason) and the rest of the batch goes on; ``add`` of its URL gives
  it a fresh state.
- Politeness: the lease desk (``leases.LeaseDesk``) enforces every host's delay, and the solve
  knows it: from each host's own cell aggregates, a host that would want more
  than 1/delay at ν runs at its cap in the budget equation and plans its
  pages with its own threshold max(ν, τ_h) (published per shard).
- Spending: with ``fill_budget``, tokens no due page can use go to the best
  pages that are not due yet on hosts that may be fetched now.
- Pooled prior: a page's prior log-rate is the mean over its host's other
  observed pages, shrunk towards ``prior_rate`` (lua/lib.lua).
- Ordering: among due pages, the highest index first (``leases``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import redis

from frontier_rate.engine import validation
from frontier_rate.engine.inspection import Inspector
from frontier_rate.engine.intake import Intake
from frontier_rate.engine.leases import LeaseDesk
from frontier_rate.engine.options import FrontierOptions
from frontier_rate.engine.records import Lease, Observation
from frontier_rate.engine.results import Results
from frontier_rate.engine.session import DEFAULT_SHARDS, RedisErrors, Session, namespace_defaults
from frontier_rate.engine.shards import ShardCalls
from frontier_rate.engine.signals import Signals, TrustLog, neighbours
from frontier_rate.engine.threshold import Threshold
from frontier_rate.engine.validation import namespace_name, parse_url, real
from frontier_rate.renamed import resolve
from frontier_rate.store.connection import connect
from frontier_rate.store.errors import (
    FrontierError,
    NamespaceLost,
    RedisFault,
    RedisPermissionDenied,
    RedisRefused,
    RedisUnavailable,
    SettingsMismatch,
    UnknownNamespace,
    redact_url,
)
from frontier_rate.store.keys import Keys
from frontier_rate.store.namespace import refuse_half

__all__ = ["Lease", "Frontier", "FrontierError", "FrontierOptions", "NamespaceLost",
           "Observation", "RedisFault",
           "RedisPermissionDenied", "RedisRefused", "RedisUnavailable", "SettingsMismatch",
           "UnknownNamespace", "parse_url"]


class Frontier:
    """The revisit frontier of one namespace (see the module docstring and docs/ENGINE.md).

    Its options are one frozen ``FrontierOptions`` (``options``; what the adapters pass),
    with any keyword replacing that field: ``Frontier(url, budget=2.0)``.

    ``redis_url=None`` uses the embedded Redis (``frontier_rate.store.connection``);
    ``redis_client``: a Redis client to use instead (the frontier leaves it open at
    ``close``). ``budget``: fetches per second over all hosts; ``min_host_delay``: seconds
    between two fetches of one host; ``min_interval`` / ``max_interval``
    bound every planned (mean) interval; ``lease_timeout``: seconds before an
    unanswered lease is handed out again; ``clock``: the time source
    (every time-dependent method also takes ``now=``); ``seed``: seeds the
    random draws of the exponential intervals; ``redis_timeout``: seconds one
    Redis call may block before it raises ``RedisUnavailable``; ``fill_budget``:
    when the budget has tokens that no due page can use, lease the best pages
    that are not due yet on hosts that may be fetched now (the budget is a
    rate to spend, not only a cap; False: only due pages are ever leased).
    None (the default) fills with ``interval``, which learns from the realised
    intervals, and not with ``lln``/``sa``/``sam``, whose Poisson assumption
    early fetches would break. ``change_dates``: learn change times from the
    Last-Modified dates of answers (checked per host against the content,
    lua/observe.lua); ``server_clock_rate``: server seconds per second of
    ``clock`` (1; a test-bed with simulated time runs faster).
    ``budget_first_fetches``: False (the default) leases pages never fetched
    before without taking budget tokens, so a first crawl runs at the hosts'
    politeness limits (a crawler discovering a site is not held to the revisit
    rate); True counts every fetch against the budget (benchmarks that compare
    policies at equal budget) and values a source's first read like a revisit
    (docs/SIGNALS.md). ``setting_defaults``: the shared settings a new
    namespace gets where this process asks for none (``DEFAULT_SETTINGS`` else;
    the Scrapy scheduler gives ``min_host_delay`` Scrapy's own default, 0).
    ``cochange``: a change seen on a page brings its host's pages forward once later fetches
    showed that they change together (math/cochange.py, issue 62; False: off).
    ``group_prior``: a new page starts from the pooled estimate of its host's pages whose URLs
    have the same path template (math/lookalike.py, issue 62; False: off, the host's pool).
    ``min_change_chance``: a revisit waits until the chance that its page changed since its
    last fetch reaches this (default ``math.index.MIN_CHANGE_CHANCE``, 0.02), so a budget
    larger than the pages are worth is left unspent (issue 60); lower it to spend more of a
    set budget on slow pages (0: the whole budget; docs/MATH.md "A fetch worth its token").
    Set it alike in every process of a frontier.

    The shared settings (``budget``, ``min_host_delay``, ``min_interval``,
    ``max_interval``, ``lease_timeout``, ``prior_rate``) read as attributes: the
    namespace's values as of this process's last lease call.
    """

    def __init__(self, redis_url: str | None = None, options: FrontierOptions | None = None,
                 *, setting_defaults: Mapping[str, float] | None = None,
                 redis_client: redis.Redis | None = None, **changes: Any) -> None:
        self.options = opts = (options or FrontierOptions()).replace(**changes)
        checked, requested = opts.check()
        self.namespace, self.estimator, self.policy = opts.namespace, opts.estimator, opts.policy
        self.objective, self.clock = opts.objective, opts.clock
        self.fill_budget, self.change_dates = checked.fill_budget, checked.change_dates
        self.server_clock_rate = checked.server_clock_rate
        self.budget_first_fetches = checked.budget_first_fetches
        self.cochange = checked.cochange
        self.group_prior = checked.group_prior
        self.redis_url = redis_url
        defaults = namespace_defaults(setting_defaults)
        self.redis_timeout = float(opts.redis_timeout)
        self.session = session = Session(redis_url, checked, requested, defaults=defaults,
                                         override=bool(opts.override_settings),
                                         clock_sync=opts.clock_sync,
                                         timeout=self.redis_timeout, client=redis_client)
        self.client, self.scripts, self.keys = session.client, session.scripts, session.keys
        self.shards, self.buckets, self.facts = session.shards, session.buckets, session.facts
        self.calls = calls = ShardCalls(session)
        self.threshold = Threshold(session, calls)
        self.inspector = Inspector(session, calls)
        self.intake = Intake(session, calls)
        self.lease_desk = LeaseDesk(session, calls, self.threshold)
        trust_log = TrustLog()
        self.results = Results(session, calls, self.threshold, self.inspector.page, trust_log)
        self.signals = Signals(session, calls, self.intake, trust_log)
        # the shard plumbing under the names tests and tools use
        self._shard_of, self._shard_call, self._layouts = calls.of, calls.call, calls.layouts
        self._header = session.header.args

    # the shared settings: the namespace's values as of this process's last lease call
    @property
    def budget(self) -> float:
        """Fetches per second over all hosts and processes."""
        return self.session.settings["budget"]

    @property
    def min_host_delay(self) -> float:
        """Seconds between two leases of one host."""
        return self.session.settings["min_host_delay"]

    @property
    def min_interval(self) -> float:
        """Shortest planned (mean) revisit interval, seconds."""
        return self.session.settings["min_interval"]

    @property
    def max_interval(self) -> float:
        """Longest planned revisit interval, seconds."""
        return self.session.settings["max_interval"]

    @property
    def lease_timeout(self) -> float:
        """Seconds before an unanswered lease is handed out again."""
        return self.session.settings["lease_timeout"]

    @property
    def prior_rate(self) -> float:
        """The change rate a page starts from before its host's pages say more."""
        return self.session.settings["prior_rate"]

    @classmethod
    def check_options(cls, **options: Any) -> None:
        """Raise the ValueError ``Frontier(**options)`` would, without connecting to Redis
        (adapters check their settings at start-up with it)."""
        FrontierOptions().replace(**options).check()

    @classmethod
    def attach(cls, redis_url: str | None = None, namespace: str = "default", **kwargs: Any) -> Frontier:
        """The frontier of an existing namespace, with the estimator and objective it was
        created with and its stored settings (for tools that inspect a crawl, like the CLI).
        Opening it writes nothing, so a read-only replica serves it.

        Raises ``UnknownNamespace`` when nothing is stored under ``namespace``.
        """
        namespace_name(namespace)
        keys = Keys(namespace, 1)
        client = connect(redis_url, existing=True)  # creates no embedded database
        try:
            with RedisErrors(redis_url, namespace, "attach"):
                cfg = client.hgetall(keys.cfg)
                if not cfg:  # nothing stored, or the configuration lost beside its shards
                    refuse_half(client, Keys(namespace, DEFAULT_SHARDS), redis_url,
                                DEFAULT_SHARDS)
        finally:
            client.close()
        if not cfg:
            raise UnknownNamespace(f"no frontier named {namespace!r} at {redact_url(redis_url)}")
        kwargs.setdefault("estimator", cfg[b"estimator"].decode())
        kwargs.setdefault("objective", cfg[b"objective"].decode())
        return cls(redis_url, namespace=namespace, **kwargs)

    # ------------------------------------------------------------------ pages

    def add(self, url: str, weight: float = 1.0, meta: dict | None = None, *,
            now: float | None = None) -> bool:
        """Add a page (due at once); False if it was known (its weight and meta are updated)."""
        return self.add_many([(url, weight, meta)], now=now) == 1

    def add_many(self, pages: Iterable, *, now: float | None = None) -> int:
        """Add pages given as ``url`` or ``(url, weight[, meta[, priority[, source]]])``;
        returns how many were new.

        A new page is due at once. ``priority`` (a number, default 0) orders pages added
        together: each unit moves the first due time ``PRIORITY_STEP`` earlier (pages of
        equal priority and due time are leased in no set order). A known page keeps its schedule
        (its weight and meta are updated). ``source`` (default False): the page is a sitemap or
        feed, read for claims about other pages: it plans without the ``max_interval`` floor of
        a page (``index.source_max_interval``), is not counted where the floor is stretched to
        the budget, pools nothing into its host's prior, and its first fetch ranks by its
        weight rather than before every revisit (docs/SIGNALS.md). Once a source, a page stays
        one. Validates everything first, then writes in pipelined per-shard batches.
        """
        return self.intake.add_many(pages, self.session.now(now))

    def set_host_delay(self, host: str, seconds: float | None) -> None:
        """Minimum seconds between two fetches of ``host`` (None: back to min_host_delay)."""
        self.intake.set_host_delay(host, seconds)

    # ------------------------------------------------------------------ leases

    def next_requests(self, max_n: int, now: float | None = None) -> list[Lease]:
        """Lease up to ``max_n`` due pages, highest index first, within budget and host delays.

        Round trips: (1) the published ν, tokens from the shared bucket and the
        namespace's due summary (fr:{ns}:due: when each shard may next have work);
        nothing more when no shard has work now (an idle call is one cheap read);
        (2) a background refresh step and the candidates of the shards that have
        work; (3) the leases of the best candidates (each re-checked in Lua), with
        unneeded tokens given back. A page never fetched takes no token unless
        ``budget_first_fetches``. With ``fill_budget`` another, for pages not due
        yet, when no page is due or when the tokens left would overflow the bucket
        before the next call. Every ``FULL_SCAN_EVERY`` s (of both the frontier's clock and
        real time) every shard is asked.
        """
        return self.lease_desk.next_requests(max_n, now)

    def next_due_time(self) -> float | None:
        """Earliest time a page may be leased (host delay included) or a lease expires.

        Also reads the namespace's marker id from its configuration: a namespace that was
        emptied or created anew raises NamespaceLost here, not only at the next script."""
        return self.lease_desk.next_due_time()

    def next_call_time(self, now: float | None = None, retry: float = 1.0) -> float | None:
        """When a crawler whose last ``next_requests`` got fewer pages than it asked for
        should ask again (None: not before pages are added); may be earlier than ``now``.

        The next whole token of the shared budget, or the next due page (host delay
        included), whichever binds; with ``fill_budget`` a token is enough, and while
        tokens are left a call ``retry`` seconds later may find a host whose delay ended
        (its pages not due yet). Sleeping until this time loses no budget."""
        now = float(self.clock()) if now is None else real("now", now)
        return self.lease_desk.next_call_time(now, real("retry", retry, minimum=0.0))

    # ------------------------------------------------------------------ results

    def observe(self, lease: Lease, *, fingerprint: str | bytes | None = None,
                not_modified: bool = False, status: int = 200, fetched_at: float | None = None,
                etag: str | None = None, last_modified: str | None = None,
                served_at: str | None = None, changed_at: float | None = None,
                settle_later: bool = False) -> Observation:
        """Record a fetch: change indicator, estimator update, next due time (one Lua step).

        The page changed if ``fingerprint`` differs from the stored one; a
        ``not_modified`` (or status 304) answer is unchanged; the first fetch
        is never a change. A status >= 400 is passed on to ``failed``.

        ``changed_at``: when the page last changed, as the server says (a
        sitemap ``<lastmod>``), on the frontier's clock; by default it comes
        from ``last_modified`` and ``served_at`` (the answer's ``Date``), see
        ``dates.change_time``. With ``change_dates`` the ``interval`` estimator
        learns the change time, not only the change bit, from a date that
        agrees with the fingerprint; a host whose dates disagree with its
        content (always "now", constant, in the future) has its dates ignored
        (lua/observe.lua, docs/MATH.md "Inside the engine").

        ``settle_later``: the crawler has yet to process the new copy (its items are on
        their way through pipelines); until ``settle_many`` says so, the page's next fetch
        sends no validators and is reported changed, so a crawler that dies first loses
        nothing (docs/SCRAPY.md).
        """
        return self.observe_many([(lease, {"fingerprint": fingerprint,
                                              "not_modified": not_modified, "status": status,
                                              "fetched_at": fetched_at, "etag": etag,
                                              "last_modified": last_modified,
                                              "served_at": served_at,
                                              "changed_at": changed_at,
                                              "settle_later": settle_later})])[0]

    def observe_many(self, results: Iterable[tuple[Lease, Mapping[str, Any]]]
                     ) -> list[Observation]:
        """``observe`` for many (lease, keyword dict) pairs, streamed in per-shard batches.

        Each observation is still its own atomic step (in input order within
        a shard); batching only saves round trips and script start-up. Chunks
        of ``OBSERVE_CHUNK`` are checked and packed while the server runs the
        previous ones, so a ValueError for a bad item leaves the chunks before
        it applied (each item is applied at most once either way).
        """
        return self.results.observe_many(results)

    def failed(self, lease: Lease, reason: str, *, status: int | None = None,
               park: bool = False, now: float | None = None) -> None:
        """A fetch that gave no observation: retry with exponential backoff.

        ``status`` 404/410 three times in a row marks the page gone (kept,
        never revisited); anything else (5xx, timeouts, DNS errors) backs off
        60 s x 2^(n-1), capped by max_interval. ``park``: a refusal that no retry
        soon can pass (robots.txt forbids the page): the next try is max_interval
        away at once (robots.txt may change; the page is kept).
        """
        validation.lease(lease)
        if status is not None and (isinstance(status, bool) or not isinstance(status, int)):
            raise ValueError(f"status must be an int or None, got {status!r}")
        with self.session.errors("failed"):
            self.results.fail(lease, reason, status, self.session.now(now), park=bool(park))

    def release(self, lease: Lease, *, now: float | None = None) -> bool:
        """Hand back a lease that was never sent; True if its lease was still open."""
        return self.release_many([lease], now=now) == 1

    def release_many(self, leases: Iterable[Lease], *, now: float | None = None) -> int:
        """Hand back leases that were never sent (a crawler closing with a buffer).

        Each page goes back to its host queue at its old due time instead of
        waiting for the lease deadline; the host's next fetch time is not
        moved earlier. A lease already observed, failed, expired or handed out
        again is left alone. Returns how many leases were released.
        """
        return self.results.release_many(leases, self.session.now(now))

    def settle_many(self, leases: Iterable[Lease], *, now: float | None = None) -> int:
        """The crawler is done with the copies these leases' observations (``settle_later``)
        brought: the pages' next fetches are conditional again. A page observed again since
        is left alone. Returns how many pages were settled."""
        return self.results.settle_many(leases, self.session.now(now))

    def unsettle_many(self, leases: Iterable[Lease], *, now: float | None = None) -> int:
        """Redo fetches whose output the crawler lost (it stopped by force while their items
        were still in its pipelines): each page is due at once, its next fetch sends no
        ``If-None-Match`` / ``If-Modified-Since`` and is reported changed (the estimator
        still learns whether it changed). A lease still open is closed as ``release`` closes
        it; a page leased again, or observed with a later lease, is left alone. Returns how
        many pages were marked."""
        return self.results.unsettle_many(leases, self.session.now(now))

    # ------------------------------------------------------------------ signals

    def signal_many(self, claims: Iterable, *, now: float | None = None, discover: bool = False,
                  weight: float = 1.0) -> dict[str, int]:
        """Change evidence that does not come from fetching the page: a sitemap's
        ``<lastmod>``, a feed entry's date, a push (IndexNow, WebSub, the CLI).

        ``claims``: ``(url, changed_at, source)`` items; ``changed_at`` is when the source
        says the page last changed, on the frontier's clock, or None for "changed, time
        unknown" (taken as now); ``source`` names the source (``evidence.SOURCE_RE``:
        ``"sitemap"``, ``"feed"``, ``"push"``...). A claim that the page changed since its
        last fetch makes it due at once, and one that it did not moves its next fetch
        later, but only once that source has been checked against fetches of that host
        and found right (``evidence``: per host and source, as Last-Modified dates are;
        a lying source is ignored for its host, one WARNING). A confirmed claim of a
        trusted source gives the ``interval`` estimator a dated change at the page's
        next fetch (with ``change_dates``). ``discover``: URLs the frontier does not
        know are added (``weight``, due at once). State per page stays O(1): the latest
        claim only (lua/signals.lua); a namespace never told anything behaves as without.

        Every item is checked before anything is written; a bad one raises ValueError
        naming it. Returns how many claims had each outcome (``evidence.OUTCOMES``) and
        ``"added"`` (``signals.Signals``).
        """
        return self.signals.signal_many(claims, self.session.now(now), discover=discover,
                                    weight=weight)

    hint_many = signal_many
    """The name ``signal_many`` had before issue 32; kept for code that calls it."""

    def signal_trust(self, host: str, source: str) -> dict[str, Any]:
        """How the claims of ``source`` about ``host``'s pages fared: ``checked``, ``bad``,
        ``trusted`` (they move schedules) and ``ignored`` (more than 1 in
        ``evidence.TRUST_RATIO`` failed; lua/signals.lua)."""
        return self.signals.trust(host, source)

    def neighbours(self, host: str, url: str | None = None) -> dict[str, Any]:
        """Whether ``host``'s pages (with ``url``: that page's URL group's) change together
        (math/cochange.py, issue 62): the record's ``key``, latest change event, decayed checks
        and hits, hits expected by chance, share and ``trusted`` (engine/signals.py
        ``neighbours``)."""
        return neighbours(self.session, self.calls, host, url)

    # ------------------------------------------------------------------ threshold and settings

    def set_settings(self, **values: float) -> None:
        """Change shared settings (budget, min_host_delay, lease_timeout, min_interval,
        max_interval, prior_rate) for every process of the namespace: the others take
        them up with their next lease call (or within ``NU_CACHE`` s of observing)."""
        self.session.change_settings(values)

    def set_budget(self, budget: float, *, now: float | None = None) -> None:
        """Change the fetch budget (fetches/s, shared by the namespace) and re-solve ν."""
        self.set_settings(budget=budget)
        self.resolve(now=now)

    def resolve(self, *, now: float | None = None) -> float:
        """Re-solve ν from the cell and host aggregates (policy.solve_threshold) and
        publish it, with τ_h for every host whose delay caps it (lua ``host_nu``)."""
        return self.threshold.resolve(self.session.now(now))

    def cells(self) -> dict[int, tuple[float, float, float]]:
        """The policy cells summed over shards: id -> (pages, Σλ, Σw) (O(K) reads)."""
        return self.threshold.cells()

    def host_table(self) -> tuple[list[tuple[int, str]], np.ndarray, np.ndarray]:
        """Every host with pages as (shard, host), rows (pages, Σλ, Σw, host index) of each
        host's own policy cells, and each host's cap in fetches/s (inspection)."""
        return self.threshold.host_table()

    def host_candidates(self, cell_ids: Iterable[int]
                        ) -> tuple[list[tuple[int, str]], np.ndarray, np.ndarray]:
        """``host_table`` for the hosts whose pages could ever ask for more than their cap
        (what the re-solve reads)."""
        return self.threshold.host_candidates(cell_ids)

    # ------------------------------------------------------------------ inspection

    def due(self, limit: int = 20) -> list[dict]:
        """The ``limit`` queued pages that fall due soonest, earliest first.

        Reads each host queue's head (leased and gone pages are not queued);
        leases nothing. Costs O(hosts x limit): an inspection tool, not a hot path.
        """
        return self.inspector.due(limit)

    def page(self, url: str) -> dict | None:
        """One page's record, or None if unknown; ``pattern`` describes its change pattern
        (``pattern.describe``) once it has dated changes.

        A page with a corrupt state has status "corrupt" (it is quarantined as
        soon as a script reads it), a quarantined one "quarantined"; both name
        the reason in ``problem`` and have None for the numbers they lack.
        """
        return self.inspector.page(url)

    def iter_pages(self) -> Iterator[dict]:
        """Every page's record, bucket by bucket (SCAN over the state buckets, never KEYS).

        Quarantined pages are not included (see ``quarantined``); a corrupt
        state or a missing/invalid URL gives a record with status "corrupt".
        """
        return self.inspector.iter_pages()

    def quarantined(self) -> Iterator[dict]:
        """Every quarantined page: url (None when it was lost too), host, reason,
        id (hex) and the raw corrupt value (hex), shard by shard (HSCAN).

        Adding the URL again gives the page a fresh state and takes it out of here.
        """
        return self.inspector.quarantined()

    def stats(self, *, now: float | None = None) -> dict:
        """Counters: pages, due_now, leased, gone, sources (pages that are sitemaps or feeds,
        gone ones not counted), quarantined, fetches, changes, nu, budget, budget_use,
        dated_changes (changes whose time was learned from a date), date_hosts_ignored (hosts
        whose Last-Modified dates are ignored now), claims (of sitemaps, feeds and pushes,
        ``signal_many``), signal_sources_ignored ((host, source) pairs whose claims are ignored
        now). ``pages`` excludes quarantined pages; ``fetches`` and ``changes`` count every accepted
        observation, of quarantined pages too."""
        return self.inspector.stats(self.session.now(now))

    def health(self) -> dict[str, Any]:
        """What the Redis server promises the namespace: its eviction policy, persistence,
        role, memory and evicted keys (health.server_facts), whether the namespace is whole
        (every shard carries its marker), this process's clock offset to Redis's, the
        shared settings, and a sentence per way the server can lose the frontier's data."""
        return self.inspector.health()

    def close(self) -> None:
        """Drop the connections (the embedded server stops with its last client process)."""
        self.session.close()

    def __enter__(self) -> Frontier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


RENAMED = {"Dispatch": "Lease"}
"""Retired names still importable (issue 61): old -> new (``frontier_rate.renamed``)."""


def __getattr__(name: str) -> Any:
    return resolve(globals(), name, RENAMED)

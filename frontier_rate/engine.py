"""``Frontier``: the revisit scheduler with its state in Redis.

One object per process; any number of processes (and machines) share a
frontier through its Redis namespace. Per page the engine keeps a change-rate
estimate (seed 004), plans the next fetch where the page's index reaches the
threshold ν (seeds 001/002, DESIGN §3), and hands due pages out as leases
that respect each host's minimum delay and the shared fetch budget.

Every state change is one Lua script on one shard (lua/*.lua, key schema in
``frontier_rate.store``), so concurrent crawlers cannot corrupt each other.

Choices worth knowing (see the README section):

- Leases: ``observe``/``failed`` are accepted once per lease token, and only
  while that lease is the page's open lease. A replay of an applied token
  returns the same result and changes nothing; a token whose lease expired
  (whether or not the page was re-leased) is answered with
  ``Observation(accepted=False)`` and changes nothing.
- Corrupt data: a page whose state, URL or meta in Redis cannot be used is
  quarantined (out of its queue and the lease set, listed by ``quarantined()``
  with the reason) and the rest of the batch goes on; ``add`` of its URL gives
  it a fresh state.
- Politeness: the dispatcher enforces every host's delay, and the solve
  knows it: from each host's own cell aggregates, a host that would want more
  than 1/delay at ν runs at its cap in the budget equation and plans its
  pages with its own threshold max(ν, τ_h) (published per shard).
- Spending: with ``fill_budget``, tokens no due page can use go to the best
  pages that are not due yet on hosts that may be fetched now.
- Pooled prior: a page's prior log-rate is the mean over its host's other
  observed pages, shrunk towards ``prior_rate`` (lua/lib.lua).
- Ordering: among due pages, the highest index first: each shard offers the
  best of the ``CANDIDATE_LOOK`` earliest-due pages of each of its
  earliest-ready hosts (``CANDIDATE_WINDOW * max_n`` hosts over all shards,
  1.25 per lease past the first 1024 of a call, at least 16 per shard), and
  the offers are compared across shards by index. "whittle" uses seed 002's discrete index with period
  ``min_interval``, "lagrangian" the continuous one; both plan with the same
  threshold, so the two policies differ only in this backlog order.
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import numbers
import random
import re
import struct
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import redis

from . import evidence, health, pattern, policy
from .connection import SOCKET_TIMEOUT, connect
from .dates import change_time
from .errors import (
    FrontierError,
    NamespaceLost,
    RedisFault,
    RedisPermissionDenied,
    RedisRefused,
    RedisUnavailable,
    SettingsMismatch,
    lost_message,
    redact_url,
    translate,
)
from .namespace import (
    SETTINGS,
    Config,
    change_settings,
    check_markers,
    open_namespace,
    read_settings,
    refuse_half,
)
from .store import (
    F_GONE,
    F_LEASED,
    NAMESPACE_RE,
    Keys,
    Layout,
    PartlyApplied,
    Scripts,
    ScriptsReloaded,
    digest,
    float32,
    page_id,
    shard_of,
    unpack_extras,
    unpack_quarantine,
    unpack_state,
)

logger = logging.getLogger(__name__)

__all__ = ["Dispatch", "Frontier", "FrontierError", "NamespaceLost", "Observation", "RedisFault",
           "RedisPermissionDenied", "RedisRefused", "RedisUnavailable", "SettingsMismatch",
           "UnknownNamespace", "parse_url"]

ENGINE_ESTIMATORS = ("lln", "sa", "sam", "interval")
OFFLINE_ESTIMATORS = {"naive": "biased (it converges to pΔ/(Δ+p), seed 004 §3.4)",
                      "mle": "offline (O(k) per update)", "mm": "offline (O(k) per update)"}
POLICIES = ("whittle", "lagrangian")
MAX_URL_LENGTH = 2048
MAX_VALIDATOR_LENGTH = 1024
DEFAULT_SHARDS = 16
DEFAULT_BUCKETS = 16
"""Buckets per shard a new namespace starts with; they grow online (linear hashing,
``store.Layout``) at 48 pages per bucket. Namespaces created before kept 1024."""
RESOLVE_EVERY = 60.0
"""Seconds of clock time between re-solves of ν (at least)."""
RESOLVE_SOON = 5.0
"""Seconds between re-solves while the last one found too few pages to use the budget."""
RESOLVE_FETCHES = 10.0
"""...and at least the time the budget takes for this many fetches: ν moves only as
observations come in, so a small budget re-solves less often (10 / budget seconds)."""
NU_CACHE = 1.0
"""Seconds of clock time a process reuses ν before reading it again."""
BURST_SECONDS = 1.0
"""The token bucket holds budget * BURST_SECONDS + 1 fetches: one second of budget, plus one
token so that a crawler asking at any pace keeps the fraction of a token it could not use
(with max(1, budget) a crawler asking once per second at 3.47 fetches/s lost 0.47 a time)."""
BACKOFF_BASE = 60.0
GONE_AFTER = 3
CANDIDATE_LOOK = 4
"""Due pages per ready host whose index is compared (the best one is the host's candidate;
with min_host_delay 0, a host whose delay is 0 offers each of them, lua/candidates.lua)."""
CANDIDATE_WINDOW = 4
"""Candidates ranked per next_requests call: CANDIDATE_WINDOW * max_n over all shards
(up to WIDE_WINDOW leases; ``_window``); each shard looks at ready hosts in ready order
until it has its share."""
WIDE_WINDOW = 1024
WINDOW_SLACK = 1.25
"""Candidates ranked per lease past the first WIDE_WINDOW of one call."""
OBSERVE_BATCH = 512
"""Observations per script call in ``observe_many``: more share a call's and each host's
fixed work; 512 keeps one call near 10-15 ms of Redis time at 10^5 pages."""
OBSERVE_CHUNK = 2048
"""Observations packed at a time in ``observe_many`` (sent while the server works)."""
FULL_SCAN_EVERY = 1.0
"""Seconds after which next_requests asks every shard, whatever the due summary says
(fr:{ns}:due, lua/due.lua: it can only be too late after a writer died between its shard
script and its summary update). Both clocks must have moved that far: the frontier's (its
``clock`` or ``now``) and this process's monotonic one, so that a replay on a virtual clock
that jumps hours per call does not pay a 16-shard scan on every call for a safety net that
guards against dead processes, which live in real time."""
REFRESH_PAGES = 256
"""Pages re-planned per background refresh step (one shard per next_requests call)."""
MIN_BUDGET = 1e-6
"""Smallest budget (fetches per second over all hosts) a frontier accepts."""
PRIORITY_STEP = 1e-3
"""Seconds a new page's first due time moves earlier per unit of priority (``add_many``):
among pages added at the same time the higher priority is due first (a negative priority
waits at most MAX_PRIORITY * PRIORITY_STEP)."""
MAX_PRIORITY = 1000
"""Priorities beyond +-MAX_PRIORITY order as +-MAX_PRIORITY (a first due time moves at most
a second)."""
ADD_FIELDS = 6
"""Arguments per page of lua/add.lua: id, host, url, weight, meta, first due time."""
PRIOR_RATE = 1.0 / 86400
"""Change rate assumed for a page before its first observation (once a day)."""
DEFAULT_SETTINGS = {"budget": 1.0, "min_host_delay": 1.0, "min_interval": 60.0,
                    "max_interval": 30 * 86400.0, "lease_timeout": 300.0, "prior_rate": PRIOR_RATE}
"""The shared settings of a new namespace that no process asked for otherwise."""
HOUSEKEEPING_EVERY = 5.0
"""Seconds of real time between two checks of the clock offset and of evictions."""
CLOCK_TOLERANCE = 0.05
"""A clock offset to Redis below this (plus half the round trip it was measured over) is
taken as none, so the times of a process on Redis's own machine stay exactly the caller's."""
CLOCK_WARN = 1.0
"""A clock offset to Redis from which opening a frontier logs a WARNING."""
ETA, BETA, OMEGA = 0.75, 0.6, 1.0
INTERVAL_PRIOR_INFO, INTERVAL_MAX_STEP = 0.3, 1.0
"""The interval estimator's prior weight and step clip (estimators.Interval defaults)."""


@dataclass(frozen=True)
class Dispatch:
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


def _real(field: str, value: Any, *, minimum: float | None = None, strict: bool = False,
          allow_inf: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{field} must be a number, got {value!r}")
    value = float(value)
    if math.isnan(value) or (math.isinf(value) and not allow_inf):
        raise ValueError(f"{field} must be finite, got {value!r}")
    if minimum is not None and (value < minimum or (strict and value == minimum)):
        relation = ">" if strict else ">="
        raise ValueError(f"{field} must be {relation} {minimum:g}, got {value!r}")
    return value


_SIMPLE_URL = re.compile(r"https?://([A-Za-z0-9.-]+)(?::([0-9]{1,5}))?(?:[/?#][!-~]*)?")


def parse_url(url: Any) -> str:
    """The host (lower case) of a URL the frontier accepts; ValueError naming the URL."""
    if isinstance(url, str) and len(url) <= MAX_URL_LENGTH:
        simple = _SIMPLE_URL.fullmatch(url)  # the common case, without urlsplit
        if simple and simple.group(1).strip(".") and int(simple.group(2) or 0) <= 65535:
            return simple.group(1).lower()
    if not isinstance(url, str):
        raise ValueError(f"url must be a string, got {type(url).__name__}")
    shown = url if len(url) <= 100 else url[:100] + "..."
    if len(url) > MAX_URL_LENGTH:
        raise ValueError(f"url {shown!r} is too long ({len(url)} > {MAX_URL_LENGTH} characters)")
    if not url or any(ord(c) <= 32 or ord(c) == 127 for c in url):
        raise ValueError(f"url {shown!r} is empty or contains whitespace/control characters")
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 -- raises ValueError for a bad port
    except ValueError as exc:
        raise ValueError(f"url {shown!r} is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"url {shown!r} must use http or https, not {parts.scheme or 'no'!r} "
                         "scheme")
    if not host:
        raise ValueError(f"url {shown!r} has no host")
    return host


class Frontier:
    """The revisit frontier of one namespace (see the module docstring and README).

    ``redis_url=None`` uses the embedded Redis (``frontier_rate.connection``).
    ``budget``: fetches per second over all hosts; ``min_host_delay``: seconds
    between two dispatches to one host; ``min_interval`` / ``max_interval``
    bound every planned (mean) interval; ``lease_timeout``: seconds before an
    unanswered dispatch is handed out again; ``clock``: the time source
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
    policies at equal budget).
    """

    def __init__(self, redis_url: str | None = None, *, namespace: str = "default",
                 estimator: str = "interval", policy: str = "whittle",
                 objective: str = "freshness", budget: float | None = None,
                 min_host_delay: float | None = None, min_interval: float | None = None,
                 max_interval: float | None = None, lease_timeout: float | None = None,
                 clock: Callable[[], float] = time.time, seed: int | None = None,
                 prior_rate: float | None = None,
                 redis_timeout: float = SOCKET_TIMEOUT,
                 fill_budget: bool | None = None, change_dates: bool = True,
                 server_clock_rate: float = 1.0, budget_first_fetches: bool = False,
                 override_settings: bool = False, clock_sync: bool | None = None) -> None:
        requested = self._apply_options(
            namespace=namespace, estimator=estimator, policy=policy, objective=objective,
            budget=budget, min_host_delay=min_host_delay, min_interval=min_interval,
            max_interval=max_interval, lease_timeout=lease_timeout, clock=clock, seed=seed,
            prior_rate=prior_rate, fill_budget=fill_budget, change_dates=change_dates,
            server_clock_rate=server_clock_rate, budget_first_fetches=budget_first_fetches,
            override_settings=override_settings, clock_sync=clock_sync)
        self.redis_url = redis_url
        self._lost_logged = False
        self._offset = 0.0
        self._clock_sync = clock is time.time if clock_sync is None else bool(clock_sync)
        self._housekeeping_at = time.monotonic() + HOUSEKEEPING_EVERY  # open does its own
        self.redis_timeout = _real("redis_timeout", redis_timeout, minimum=0.0, strict=True)
        self.client = connect(redis_url, timeout=self.redis_timeout)
        try:
            self.scripts = Scripts(self.client)
            with self._errors("opening the namespace"):
                config = self._open(requested, bool(override_settings))
                self.facts = health.server_facts(self.client)
                health.warn_once(self.facts, redis_url)
                self._watch = health.EvictionWatch(self.client)
                self._watch.check()
                if self._clock_sync:
                    self._sync_clock(first=True)
        except BaseException:
            self.client.close()
            raise
        self.shards, self.buckets, self._cells = config.shards, config.buckets, config.cells
        self._namespace_id = config.namespace_id
        self._settings_version = config.version
        self._apply_settings(config.settings)
        self.keys = Keys(namespace, self.shards)
        self._nu = 0.0
        self._nu_read_at = -math.inf
        self._solved_at = -math.inf
        self._refresh_pending: list[int] = []
        self._shards_of: dict[str, int] = {}
        self._unused_tokens = 0
        self._last_call = -math.inf
        self._full_scan_at = -math.inf
        self._full_scan_wall = -math.inf
        self._due_sets: dict[int, tuple[bytes, bytes]] = {}

    @classmethod
    def check_options(cls, **options: Any) -> None:
        """Raise the ValueError ``Frontier(**options)`` would, without connecting to Redis
        (adapters check their settings at start-up with it)."""
        signature = inspect.signature(cls.__init__)
        bound = signature.bind(None, **options)
        bound.apply_defaults()
        values = dict(bound.arguments)
        for name in ("self", "redis_url", "redis_timeout"):
            values.pop(name, None)
        if "redis_timeout" in options:
            _real("redis_timeout", options["redis_timeout"], minimum=0.0, strict=True)
        cls._apply_options(cls.__new__(cls), **values)

    def _apply_options(self, *, namespace: str, estimator: str, policy: str, objective: str,
                       budget: float | None, min_host_delay: float | None,
                       min_interval: float | None, max_interval: float | None,
                       lease_timeout: float | None, clock: Callable[[], float],
                       seed: int | None, prior_rate: float | None, fill_budget: bool | None,
                       change_dates: bool, server_clock_rate: float,
                       budget_first_fetches: bool, override_settings: bool = False,
                       clock_sync: bool | None = None) -> dict[str, float | None]:
        """Check the constructor's options (ValueError naming the first bad one) and keep
        the process's own; return the shared settings asked for (None: the namespace's)."""
        if not isinstance(namespace, str) or not NAMESPACE_RE.match(namespace):
            raise ValueError(f"namespace must be 1-64 characters of A-Z a-z 0-9 _ . -, "
                             f"got {namespace!r}")
        if estimator in OFFLINE_ESTIMATORS:
            raise ValueError(f"estimator {estimator!r} is {OFFLINE_ESTIMATORS[estimator]}; the "
                             f"engine supports {', '.join(ENGINE_ESTIMATORS)}")
        if estimator not in ENGINE_ESTIMATORS:
            raise ValueError(f"unknown estimator {estimator!r}; choose one of "
                             f"{', '.join(ENGINE_ESTIMATORS)}")
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; choose one of {', '.join(POLICIES)}")
        if objective not in OBJECTIVES:
            raise ValueError(f"unknown objective {objective!r}; choose one of "
                             f"{', '.join(OBJECTIVES)}")
        requested = _checked_settings({"budget": budget, "min_host_delay": min_host_delay,
                                       "min_interval": min_interval, "max_interval": max_interval,
                                       "lease_timeout": lease_timeout, "prior_rate": prior_rate})
        if not callable(clock):
            raise ValueError(f"clock must be callable, got {clock!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"seed must be an int or None, got {seed!r}")
        self.namespace, self.estimator, self.policy = namespace, estimator, policy
        self.fill_budget = estimator == "interval" if fill_budget is None else bool(fill_budget)
        self.change_dates = bool(change_dates)
        self.budget_first_fetches = bool(budget_first_fetches)
        self.server_clock_rate = _real("server_clock_rate", server_clock_rate, minimum=0.0,
                                       strict=True)
        self.objective, self.clock = objective, clock
        self._rng = random.Random(seed)
        self._warned_sources: set[tuple[str, str]] = set()
        return requested

    # ------------------------------------------------------------------ setup

    def _errors(self, what: str = "a call") -> _RedisErrors:
        return _RedisErrors(self.redis_url, self.namespace, what, self._lost, self._housekeeping)

    def _lost(self, error: NamespaceLost) -> NamespaceLost:
        """Say once, as an ERROR, that the namespace is gone (every later call raises too);
        when Redis evicted keys meanwhile, the error says so and every shard is marked
        damaged. The error to raise."""
        evicted = self._watch.check(force=True) if hasattr(self, "_watch") else None
        if evicted:
            self._mark_damaged()
            error = NamespaceLost(lost_message(self.redis_url, self.namespace, evicted))
        if not self._lost_logged:
            self._lost_logged = True
            logger.error("frontier-rate: %s", error)
        return error

    def _open(self, requested: Mapping[str, float | None], override: bool) -> Config:
        """Open or create the namespace (frontier_rate/namespace.py): whole, same estimator
        and objective, same shared settings (or overridden, logged)."""
        cells = ",".join(repr(float(x)) for x in (
            policy.WEIGHT_LOG10_MIN, policy.WEIGHT_BINS_PER_DECADE, policy.N_WEIGHT_BINS,
            policy.RATE_LOG10_MIN, policy.RATE_BINS_PER_DECADE, policy.N_RATE_BINS))
        fixed = {"shards": str(DEFAULT_SHARDS), "buckets": str(DEFAULT_BUCKETS),
                 "estimator": self.estimator, "objective": self.objective, "cells": cells}
        config = open_namespace(
            self.client, self.scripts, Keys(self.namespace, DEFAULT_SHARDS), url=self.redis_url,
            fixed=fixed, requested=requested, defaults=DEFAULT_SETTINGS, override=override)
        settings = config.settings
        if settings["max_interval"] < settings["min_interval"]:
            raise SettingsMismatch(f"namespace {self.namespace!r}: max_interval "
                                   f"{settings['max_interval']!r} is below min_interval "
                                   f"{settings['min_interval']!r}")
        return config

    def _apply_settings(self, settings: Mapping[str, float]) -> None:
        """Use the namespace's shared settings (at open, and when another process changed them)."""
        for name, value in settings.items():
            old = getattr(self, name, None)
            if old is not None and old != value:
                logger.info("namespace %r: %s changed from %r to %r for every process of it",
                            self.namespace, name, old, value)
            setattr(self, name, value)

    def set_settings(self, **values: float) -> None:
        """Change shared settings (budget, min_host_delay, lease_timeout, min_interval,
        max_interval, prior_rate) for every process of the namespace: the others take
        them up with their next lease call (or within ``NU_CACHE`` s of observing)."""
        unknown = set(values) - set(SETTINGS)
        if unknown:
            raise ValueError(f"unknown setting(s) {', '.join(sorted(unknown))}; shared settings are "
                             f"{', '.join(SETTINGS)}")
        checked = {k: v for k, v in _checked_settings(values).items() if v is not None}
        merged = {name: getattr(self, name) for name in SETTINGS} | checked
        if merged["max_interval"] < merged["min_interval"]:
            raise ValueError(f"max_interval {merged['max_interval']!r} must be >= min_interval "
                             f"{merged['min_interval']!r}")
        with self._errors("changing the settings"):
            self._settings_version, stored = change_settings(self.scripts, self.keys, checked)
        self._apply_settings(stored)

    def _reload_settings(self, version: bytes | None) -> None:
        """Another process changed the shared settings (nu ``settings`` moved): read them."""
        if version == self._settings_version:
            return
        self._settings_version = version
        self._apply_settings(read_settings(self.client, self.keys))

    def _sync_clock(self, first: bool = False) -> None:
        """Measure this process's clock against Redis's TIME; times sent to Redis are on
        Redis's clock (``_now``), so every process of a namespace shares one clock for
        leases, host delays and due times. An offset within ``CLOCK_TOLERANCE`` is taken
        as none (the times stay exactly the caller's)."""
        try:
            offset, trip = health.clock_offset(self.client, self.clock)
        except redis.exceptions.NoPermissionError:
            logger.warning("frontier-rate: the Redis user at %s may not run TIME (its ACL rule "
                           "lacks +time): this process's clock is used as it is, and processes "
                           "whose clocks differ disagree on leases and host delays",
                           redact_url(self.redis_url))
            self._clock_sync = False
            return
        except redis.RedisError as exc:
            if first:
                raise
            logger.debug("could not measure the clock offset to Redis: %s", exc)
            return
        offset = offset if abs(offset) > CLOCK_TOLERANCE + trip / 2 else 0.0
        if first and abs(offset) >= CLOCK_WARN:
            logger.warning("frontier-rate: this process's clock is %.1f s %s Redis's at %s; the "
                           "frontier keeps its times on Redis's clock, so every process of a "
                           "namespace agrees on leases, host delays and due times",
                           abs(offset), "behind" if offset > 0 else "ahead of",
                           redact_url(self.redis_url))
        self._offset = offset

    def _housekeeping(self) -> None:
        """After a call Redis carried out, every ``HOUSEKEEPING_EVERY`` s of real time: the
        clock offset, and evictions. Never after a failed call, so a crawler's retries
        during an outage make no round trip besides their own; never raises. Keys evicted:
        the namespace is marked damaged (one ERROR), so the next call of every process
        raises NamespaceLost."""
        wall = time.monotonic()
        if wall < self._housekeeping_at:
            return
        self._housekeeping_at = wall + HOUSEKEEPING_EVERY
        try:
            if self._clock_sync:
                self._sync_clock()
            evicted = self._watch.check()
            if evicted:
                self._mark_damaged()
                self._lost(NamespaceLost(lost_message(self.redis_url, self.namespace, evicted)))
        except Exception as exc:  # a check, not the call: the call already succeeded
            logger.debug("frontier-rate housekeeping failed: %r", exc)

    def _mark_damaged(self) -> None:
        """Mark every shard damaged (its marker "x-evicted"), so that no process runs on
        with half a namespace (lua/lib.lua start) nor opens it (namespace.check_markers)."""
        try:
            pipe = self.client.pipeline(transaction=False)
            for shard in range(self.shards):
                pipe.hset(self.keys.shard_keys(shard)[4], "id", "x-evicted")
            pipe.execute()
        except redis.RedisError as exc:
            logger.debug("could not mark namespace %r damaged: %s", self.namespace, exc)

    def _header(self, now: float) -> list[str]:
        return [repr(float(now)), repr(self._nu), "1" if self.objective == "freshness" else "0",
                "1" if self.policy == "whittle" else "0", self.estimator,
                repr(self.min_interval), repr(self.max_interval), repr(ETA), repr(BETA),
                repr(OMEGA), repr(INTERVAL_PRIOR_INFO), repr(self.min_host_delay),
                repr(self.lease_timeout), str(self.buckets), repr(self.min_interval),
                repr(INTERVAL_MAX_STEP), repr(math.log(self.prior_rate)), self._cells,
                repr(self.server_clock_rate), self._namespace_id]

    def _initial_state(self) -> tuple[float, float]:
        """(est, aux) of a new page, as the Python estimators start (x0 = prior_rate)."""
        x0 = self.prior_rate
        if self.estimator == "sam":
            return x0, x0
        if self.estimator == "interval":
            return math.log(x0), 0.0
        return x0, 0.0

    def _shard_of(self, host: str) -> int:
        shard = self._shards_of.get(host)
        if shard is None:
            if len(self._shards_of) > 100_000:
                self._shards_of.clear()
            shard = self._shards_of[host] = shard_of(host, self.shards)
        return shard

    def _now(self, now: float | None) -> float:
        """``now`` (or the clock's time) on Redis's clock: what scripts and stored times use."""
        if now is None:
            return float(self.clock()) + self._offset
        return _real("now", now) + self._offset

    def _local(self, t: float | None) -> float | None:
        """A time read from Redis, on this process's clock (what every method returns)."""
        return t if t is None or not self._offset else t - self._offset

    def _shard_call(self, target: Any, name: str, shard: int, now: float, args: list) -> Any:
        """Queue a shard script on a pipeline (or run it on the client)."""
        return self.scripts.call(target, name, self.keys.shard_keys(shard),
                                 self._header(now) + args)

    def _run_one(self, name: str, shard: int, now: float, args: list,
                 lower: float | None = None) -> Any:
        """Run one shard script; ``lower``: then lower the shard's due summary to that time."""
        def build(pipe: Any) -> None:
            self._shard_call(pipe, name, shard, now, args)
            if lower is not None and not self.scripts.cluster:
                self._lower_due(pipe, {shard: lower})

        reply = self.scripts.run(build)[0]
        if lower is not None and self.scripts.cluster:
            self.scripts.run(lambda pipe: self._lower_due(pipe, {shard: lower}))
        return reply

    def _lower_due(self, target: Any, times: Mapping[int, float]) -> Any:
        """Queue (or run) lua/due.lua "lower": shards that may have work due at these times.

        Sent after the shard scripts that queued the work, on the same connection (a Redis
        Cluster pipeline is split by node, so there it is a call of its own after them)."""
        return self.scripts.call(target, *self._lower_args(times))

    def _lower_args(self, times: Mapping[int, float]) -> tuple[str, list[str], list[str]]:
        args = ["lower"]
        for shard, t in times.items():
            args += [str(shard), _us(t)]
        return "due", [self.keys.due], args

    def _layouts(self, shards: Iterable[int]) -> dict[int, Layout]:
        """The current bucket layout of each of ``shards`` (one pipelined read)."""
        shards = sorted(set(shards))
        pipe = self.client.pipeline(transaction=False)
        for shard in shards:
            pipe.hmget(self.keys.shard_keys(shard)[4], "bl", "bs")
        return {shard: Layout.read(self.buckets, raw)
                for shard, raw in zip(shards, pipe.execute(), strict=True)}

    # ------------------------------------------------------------------ pages

    def add(self, url: str, weight: float = 1.0, meta: dict | None = None, *,
            now: float | None = None) -> bool:
        """Add a page (due at once); False if it was known (its weight and meta are updated)."""
        return self.add_many([(url, weight, meta)], now=now) == 1

    def add_many(self, pages: Iterable, *, now: float | None = None) -> int:
        """Add pages given as ``url`` or ``(url, weight[, meta[, priority]])``; returns how
        many were new.

        A new page is due at once. ``priority`` (a number, default 0) orders pages added
        together: each unit moves the first due time ``PRIORITY_STEP`` earlier (pages of
        equal priority and due time are leased in no set order). A known page keeps its schedule
        (its weight and meta are updated). Validates everything first, then writes in
        pipelined per-shard batches.
        """
        now = self._now(now)
        checked: list[tuple[int, list[str], float]] = []
        for item in pages:
            if isinstance(item, str):
                item = (item,)
            elif isinstance(item, (bytes, bytearray)) or not isinstance(item, Iterable):
                raise ValueError(f"url must be a string, got {type(item).__name__}")
            item = tuple(item)
            if not 1 <= len(item) <= 4:
                raise ValueError(f"a page is url or (url, weight[, meta[, priority]]), "
                                 f"got {item!r}")
            url = item[0]
            weight = item[1] if len(item) > 1 else 1.0
            meta = item[2] if len(item) > 2 else None
            priority = item[3] if len(item) > 3 else 0
            host = parse_url(url)
            weight = _real(f"weight of {url!r}", weight, minimum=0.0)
            if weight > 1e30:
                raise ValueError(f"weight of {url!r} must be <= 1e30, got {weight!r}")
            weight = float32(weight)
            priority = max(-MAX_PRIORITY, min(MAX_PRIORITY,
                                              _real(f"priority of {url!r}", priority)))
            meta_text = ""
            if meta is not None:
                if not isinstance(meta, Mapping):
                    raise ValueError(f"meta of {url!r} must be a dict, got {type(meta).__name__}")
                try:
                    meta_text = json.dumps(meta, separators=(",", ":"), allow_nan=False)
                except (TypeError, ValueError) as exc:
                    raise ValueError(f"meta of {url!r} is not JSON-serialisable: {exc}") from None
            checked.append((self._shard_of(host), [page_id(url), host, url, repr(weight),
                                                    meta_text], priority))
        groups: dict[int, list[str]] = defaultdict(list)
        for shard, args, priority in checked:
            groups[shard] += [*args, repr(now - priority * PRIORITY_STEP)]
        if not groups:
            return 0
        est0, aux0 = self._initial_state()
        added = 0
        step = 500 * ADD_FIELDS
        calls = sum(-(-len(args) // step) for args in groups.values())

        def build(pipe: Any) -> None:
            for shard, args in groups.items():
                for i in range(0, len(args), step):
                    self._shard_call(pipe, "add", shard, now,
                                     [repr(est0), repr(aux0)] + args[i:i + step])
            if not self.scripts.cluster:
                self._lower_due(pipe, dict.fromkeys(groups, now))

        with self._errors("add_many"):
            for count, quarantined in self.scripts.run(build)[:calls]:
                added += int(count)
                _log_quarantined(quarantined, "add gave it a fresh state")
            if self.scripts.cluster:
                self.scripts.run(lambda pipe: self._lower_due(pipe, dict.fromkeys(groups, now)))
        return added

    # ------------------------------------------------------------------ dispatch

    def next_requests(self, max_n: int, now: float | None = None) -> list[Dispatch]:
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
        if isinstance(max_n, bool) or not isinstance(max_n, int) or max_n < 0:
            raise ValueError(f"max_n must be a non-negative int, got {max_n!r}")
        now = self._now(now)
        window = str(_window(max_n, self.shards))
        refresh = self._refresh_pending[0] if self._refresh_pending else None
        give_back, self._unused_tokens = self._unused_tokens, 0
        sets, self._due_sets = self._due_sets, {}

        def first(pipe: Any) -> None:
            pipe.hmget(self.keys.nu, *NU_FIELDS)
            self._take_tokens(pipe, now, max_n, give_back)
            if sets:
                self.scripts.call(pipe, "due", [self.keys.due],
                                  ["set"] + [x for shard, (t, v) in sets.items()
                                             for x in (str(shard), t, v)])
            pipe.hgetall(self.keys.due)

        with self._errors("next_requests"):
            replies = self.scripts.run(first)
            nu_raw, granted, summary = replies[0], int(replies[1]), replies[-1]
            versions = {shard: summary.get(b"v%d" % shard, b"0") for shard in range(self.shards)}
            wall = time.monotonic()
            full = (abs(now - self._full_scan_at) >= FULL_SCAN_EVERY
                    and wall - self._full_scan_wall >= FULL_SCAN_EVERY)
            if full:
                self._full_scan_at, self._full_scan_wall = now, wall
            now_us = math.floor(now * 1e6 + 0.5)
            scan = [shard for shard in range(self.shards)
                    if full or shard == refresh or _has_work(summary.get(b"%d" % shard), now_us)]
            earliest: dict[int, bytes] = {}

            def second(pipe: Any) -> None:
                if refresh is not None:
                    self._shard_call(pipe, "refresh", refresh, now, [str(REFRESH_PAGES)])
                for shard in scan:
                    self._shard_call(pipe, "candidates", shard, now,
                                     [window, str(CANDIDATE_LOOK), "0"])

            found = self.scripts.run(second) if scan else []
            if refresh is not None:
                self._refreshed(refresh, found[0])
                found = found[1:]
            self._use_published_nu(nu_raw, now)
            candidates = _candidates(found, scan, earliest)
            candidates.sort(key=lambda c: -c[0])
            # pages never fetched (index inf, first in the order) take no token unless
            # budget_first_fetches; the rest share the tokens granted
            free = [] if self.budget_first_fetches else \
                [c for c in candidates[:max_n] if c[0] == math.inf]
            due = candidates[len(free):]
            paid_room = min(granted, max_n - len(free))
            early = []
            spill = self._tokens_would_spill(granted - len(due), now)
            if self.fill_budget and paid_room > len(due) and (not due or spill):
                # nothing due at all (the crawl is idle: a second round trip costs nothing), or
                # the tokens left beside the due pages would overflow the bucket before the
                # next call (a busy crawl asks again long before, and its tokens wait)
                early = self._early_candidates(now, paid_room - len(due), earliest)
            paid = (due + early)[:paid_room]
            chosen: dict[int, list] = defaultdict(list)
            for _, shard, host, pid in free + paid:
                chosen[shard] += [host, pid]
            early_shards = {shard for _, shard, _, _ in early[:max(0, paid_room - len(due))]}
            wanted = len(paid)

            def lease(pipe: Any) -> None:
                if granted > wanted:
                    self._take_tokens(pipe, now, 0, granted - wanted)
                for shard, args in chosen.items():
                    self._shard_call(pipe, "lease", shard, now,
                                     ["1" if shard in early_shards else "0"] + args)

            dispatches: list[Dispatch] = []
            unreadable: list[tuple[bytes, str, str, str, str]] = []
            if granted > wanted or chosen:
                leased = self.scripts.run(lease)
                for shard, (packed, quarantined, first_work) in zip(
                        chosen, leased[1:] if granted > wanted else leased, strict=True):
                    earliest[shard] = first_work
                    _log_quarantined(quarantined)
                    for pid, fields in _leases(packed):
                        try:
                            dispatches.append(_dispatch(fields))
                        except ValueError as exc:
                            unreadable.append((pid, fields[0].decode("utf-8", "replace"),
                                               fields[2], str(exc),
                                               fields[1].decode("utf-8", "replace")))
            if unreadable:
                self._quarantine_leased(unreadable, now)
            spent = sum(1 for d in dispatches if not (free and d.first))
            self._unused_tokens = max(0, wanted - spent)
            # what the shards said after this call goes to the summary with the next call's
            # first round trip, if no writer lowered it meanwhile (lua/due.lua "set")
            self._due_sets = {shard: (t, versions[shard]) for shard, t in earliest.items()}
        if self._offset:  # due times on this process's clock
            dispatches = [replace(d, due=self._local(d.due)) for d in dispatches]
        return dispatches

    def _tokens_would_spill(self, left: int, now: float) -> bool:
        """Would ``left`` tokens given back overflow the bucket before the next call, if it
        comes as long after this one as this one came after the last?"""
        gap, self._last_call = now - self._last_call, now
        return left > 0 and left + self.budget * gap > self.budget * BURST_SECONDS + 1.0

    def _early_candidates(self, now: float, tokens: int, earliest: dict[int, bytes]
                          ) -> list[tuple[float, int, str, bytes]]:
        """Pages not due yet on hosts that may dispatch now, best index first, for ``tokens``
        the budget holds that no due page can use (``fill_budget``; lua/candidates.lua)."""
        window = str(_window(tokens, self.shards))

        def build(pipe: Any) -> None:
            for shard in range(self.shards):
                self._shard_call(pipe, "candidates", shard, now,
                                 [window, str(CANDIDATE_LOOK), "1"])

        early = _candidates(self.scripts.run(build), range(self.shards), earliest)
        early.sort(key=lambda c: -c[0])
        return early

    def _quarantine_leased(self, pages: list[tuple[bytes, str, str, str, str]], now: float) -> None:
        """Quarantine leased pages whose URL or meta could not be read (lua/quarantine.lua)."""
        def build(pipe: Any) -> None:
            for pid, host, token, reason, _ in pages:
                drop = "1" if reason.startswith("meta") else "0"
                self._shard_call(pipe, "quarantine", self._shard_of(host), now,
                                 [pid, host, token, reason, drop])

        self.scripts.run(build)
        for pid, host, _, reason, url in pages:
            logger.error("quarantined page %s (id %s on %s): %s (see Frontier.quarantined(); add "
                         "the URL again for a fresh state)", url, pid.hex(), host, reason)

    def _take_tokens(self, target: Any, now: float, want: int, give_back: int) -> Any:
        """Take up to ``want`` tokens from the shared bucket after returning ``give_back``."""
        burst = self.budget * BURST_SECONDS + 1.0
        return self.scripts.call(target, "take_tokens", [self.keys.tokens],
                                 [repr(now), repr(self.budget), repr(burst), str(want),
                                  str(give_back)])

    def next_due_time(self) -> float | None:
        """Earliest time a page may be dispatched (host delay included) or a lease expires.

        Also reads the namespace's marker id from its configuration: a namespace that was
        emptied or created anew raises NamespaceLost here, not only at the next script."""
        with self._errors("next_due_time"):
            pipe = self.client.pipeline(transaction=False)
            pipe.hget(self.keys.cfg, "id")
            for shard in range(self.shards):
                ready, _, leases = self.keys.shard_keys(shard)[:3]
                pipe.zrange(ready, 0, 0, withscores=True)
                pipe.zrange(leases, 0, 0, withscores=True)
            marker, *replies = pipe.execute()
            firsts = [r[0][1] for r in replies if r]
        if self._namespace_id and marker != self._namespace_id.encode():
            detail = ("its configuration is gone" if marker is None
                      else "it was created anew since this frontier opened")
            raise self._lost(NamespaceLost(lost_message(self.redis_url, self.namespace, detail)))
        return self._local(min(firsts) / 1e6) if firsts else None

    # ------------------------------------------------------------------ results

    def observe(self, dispatch: Dispatch, *, fingerprint: str | bytes | None = None,
                not_modified: bool = False, status: int = 200, fetched_at: float | None = None,
                etag: str | None = None, last_modified: str | None = None,
                served_at: str | None = None, changed_at: float | None = None) -> Observation:
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
        (lua/observe.lua, docs/ARCHITECTURE.md).
        """
        return self.observe_many([(dispatch, {"fingerprint": fingerprint,
                                              "not_modified": not_modified, "status": status,
                                              "fetched_at": fetched_at, "etag": etag,
                                              "last_modified": last_modified,
                                              "served_at": served_at,
                                              "changed_at": changed_at})])[0]

    def observe_many(self, results: Iterable[tuple[Dispatch, Mapping[str, Any]]]
                     ) -> list[Observation]:
        """``observe`` for many (dispatch, keyword dict) pairs, streamed in per-shard batches.

        Each observation is still its own atomic step (in input order within
        a shard); batching only saves round trips and script start-up. Chunks
        of ``OBSERVE_CHUNK`` are checked and packed while the server runs the
        previous ones, so a ValueError for a bad item leaves the chunks before
        it applied (each item is applied at most once either way).
        """
        results = list(results)
        checked: list = [None] * len(results)
        out: list[Observation | None] = [None] * len(results)
        if not results:
            return []
        sent: list[list[int]] = []
        lowest: dict[int, float] = {}

        groups: dict[int, list[int]] = defaultdict(list)
        packed: dict[int, bytes] = {}

        def batch(shard: int) -> tuple[str, list[str], list]:
            part = groups.pop(shard)
            sent.append(part)
            now = max(checked[i][2] for i in part)
            first = min(checked[i][2] for i in part)
            lowest[shard] = min(lowest.get(shard, first), first)
            return ("observe", self.keys.shard_keys(shard),
                    self._header(now) + [packed.pop(i) for i in part])

        def commands() -> Iterator[tuple[str, list[str], list]]:
            # a shard's observations wait until OBSERVE_BATCH of them are packed (full
            # script calls: per-call and per-host work is shared by more observations)
            for start in range(0, len(checked), OBSERVE_CHUNK):
                try:
                    for i in range(start, min(start + OBSERVE_CHUNK, len(checked))):
                        dispatch, kwargs = results[i]
                        checked[i] = self._check_observe(dispatch, **kwargs)
                except ValueError:
                    for shard in list(groups):  # the chunks before the bad item still apply
                        yield batch(shard)
                    raise
                for i in range(start, min(start + OBSERVE_CHUNK, len(checked))):
                    if checked[i][0] == "observe":
                        shard, packed[i] = self._pack_observation(checked[i])
                        groups[shard].append(i)
                        if len(groups[shard]) >= OBSERVE_BATCH:
                            yield batch(shard)
            for shard in list(groups):
                yield batch(shard)
            if lowest and not self.scripts.cluster:
                # the re-queued pages are due after their fetch: the summary may say so
                yield self._lower_args(lowest)

        def unpack(k: int, reply: Any) -> None:
            # reply k answers sent[k] (the summary update after them is not unpacked)
            if k < len(sent):
                packed, events = reply
                at = 0
                for i in sent[k]:
                    out[i], at = _observation(packed, at, results[i][0])
                self._log_trust_events(events)

        with self._errors("observe_many"):
            first = results[0][1].get("fetched_at")
            self._maybe_resolve(self._now(first if isinstance(first, (int, float)) else None))
            try:
                streamed = self.scripts.stream(commands(), unpack)
            except ScriptsReloaded:
                sent.clear()
                lowest.clear()
                groups.clear()
                packed.clear()
                streamed = self.scripts.stream(commands(), unpack)
            if lowest and self.scripts.cluster:
                self.scripts.run(lambda pipe: self._lower_due(pipe, lowest))
            if len(streamed) < len(sent):
                raise AssertionError("a streamed observe batch had no reply")
            for i, call in enumerate(checked):
                if call[0] == "fail":
                    out[i] = self._fail(call[1], call[3], call[4], call[2])
        if self._offset:
            out = [o if o.next_due is None else replace(o, next_due=self._local(o.next_due))
                   for o in out]
        return out  # type: ignore[return-value]

    def _check_observe(self, dispatch: Dispatch, *, fingerprint: str | bytes | None = None,
                       not_modified: bool = False, status: int = 200,
                       fetched_at: float | None = None, etag: str | None = None,
                       last_modified: str | None = None, served_at: str | None = None,
                       changed_at: float | None = None) -> tuple:
        """Validate one observe call: ("observe", dispatch, now, ...) or ("fail", ...)."""
        if not isinstance(dispatch, Dispatch):
            raise ValueError(f"dispatch must be a Dispatch, got {type(dispatch).__name__}")
        if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
            raise ValueError(f"status must be an HTTP status code, got {status!r}")
        now = self._now(fetched_at)
        host = parse_url(dispatch.url)
        token = int(_token(dispatch))
        if status >= 400:
            return ("fail", dispatch, now, f"HTTP {status}", status)
        not_modified = bool(not_modified) or status == 304
        if fingerprint is None and not not_modified:
            raise ValueError(f"observe of {dispatch.url!r} needs fingerprint= or "
                             "not_modified=True")
        if fingerprint is not None and not isinstance(fingerprint, (str, bytes)):
            raise ValueError(f"fingerprint must be str or bytes, got {type(fingerprint).__name__}")
        if changed_at is not None:
            changed_at = _real("changed_at", changed_at) + self._offset
        elif not not_modified:
            changed_at = change_time(last_modified, served_at, now, self.server_clock_rate)
        if not self.change_dates:
            changed_at = None
        return ("observe", dispatch, now, host, token, fingerprint, not_modified,
                _validator("etag", etag), _validator("last_modified", last_modified), changed_at)

    def _pack_observation(self, call: tuple) -> tuple[int, bytes]:
        """(shard, packed argument of lua/observe.lua) for a checked observe call."""
        _, dispatch, now, host, token, fingerprint, not_modified, etag, lm, changed_at = call
        fp = b"" if fingerprint is None else digest(fingerprint)
        host_b = host.encode("utf-8")
        bits = (1 if not_modified else 0) | (2 if fp else 0) | (4 if etag is not None else 0) \
            | (8 if lm is not None else 0) | (16 if changed_at is not None else 0) \
            | (32 if self.change_dates else 0)
        packed = OBSERVATION.pack(page_id(dispatch.url), token, now, bits,
                                  1.0 - self._rng.random(), fp or b"\0\0\0\0", len(host_b),
                                  len(etag or b""), len(lm or b""),
                                  math.nan if changed_at is None else changed_at) \
            + host_b + (etag or b"") + (lm or b"")
        return self._shard_of(host), packed

    def failed(self, dispatch: Dispatch, reason: str, *, status: int | None = None,
               now: float | None = None) -> None:
        """A fetch that gave no observation: retry with exponential backoff.

        ``status`` 404/410 three times in a row marks the page gone (kept,
        never revisited); anything else (5xx, timeouts, DNS errors) backs off
        60 s x 2^(n-1), capped by max_interval.
        """
        if not isinstance(dispatch, Dispatch):
            raise ValueError(f"dispatch must be a Dispatch, got {type(dispatch).__name__}")
        if status is not None and (isinstance(status, bool) or not isinstance(status, int)):
            raise ValueError(f"status must be an int or None, got {status!r}")
        with self._errors("failed"):
            self._fail(dispatch, reason, status, self._now(now))

    def _fail(self, dispatch: Dispatch, reason: str, status: int | None, now: float
              ) -> Observation:
        host = parse_url(dispatch.url)
        pid = page_id(dispatch.url)
        reply = self._run_one("fail", self._shard_of(host), now,
                              [pid, host, _token(dispatch), "1" if status in (404, 410) else "0",
                               repr(BACKOFF_BASE), str(GONE_AFTER)], lower=now)
        outcome = reply[0].decode()
        if outcome == "quarantined":
            logger.error("failed fetch of %s not recorded: the page is quarantined (%s)",
                         dispatch.url, reply[1].decode("utf-8", "replace"))
            return Observation(False, math.nan, None, accepted=False)
        logger.debug("fetch of %s failed (%s): %s", dispatch.url, reason, outcome)
        page = self.page(dispatch.url) or {}
        estimate = page.get("estimate")
        return Observation(False, math.nan if estimate is None else estimate,
                           float(reply[1]) if outcome == "retry" else None,
                           accepted=outcome in ("retry", "gone"))  # Redis's clock: observe_many converts

    def hint_many(self, hints: Iterable, *, now: float | None = None, discover: bool = False,
                  weight: float = 1.0) -> dict[str, int]:
        """Change evidence that does not come from fetching the page: a sitemap's
        ``<lastmod>``, a feed entry's date, a push (IndexNow, WebSub, the CLI).

        ``hints``: ``(url, changed_at, source)`` items; ``changed_at`` is when the source
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
        claim only (lua/signals.lua).

        Every item is checked before anything is written; a bad one raises ValueError
        naming it. Returns how many claims had each outcome (``evidence.OUTCOMES``) and
        ``"added"``.
        """
        now = self._now(now)
        groups: dict[int, list[str]] = defaultdict(list)
        urls: dict[int, list[str]] = defaultdict(list)
        for item in hints:
            if isinstance(item, (str, bytes)) or not isinstance(item, Iterable):
                raise ValueError(f"a hint is (url, changed_at or None, source), got {item!r}")
            item = tuple(item)
            if len(item) != 3:
                raise ValueError(f"a hint is (url, changed_at or None, source), got {item!r}")
            url, changed_at, source = item
            host = parse_url(url)
            evidence.check_source(source)
            claim = ""
            if changed_at is not None:
                claim = repr(_real(f"changed_at of {url!r}", changed_at) + self._offset)
            shard = self._shard_of(host)
            groups[shard] += [page_id(url), host, claim, source]
            urls[shard].append(url)
        counts = dict.fromkeys(evidence.OUTCOMES, 0)
        counts["added"] = 0
        if not groups:
            return counts
        step = 500 * 4
        calls: list[tuple[int, int]] = []

        def build(pipe: Any) -> None:
            for shard, args in groups.items():
                for i in range(0, len(args), step):
                    calls.append((shard, i // 4))
                    self._shard_call(pipe, "hint", shard, now, args[i:i + step])
            if not self.scripts.cluster:
                self._lower_due(pipe, dict.fromkeys(groups, now))

        unknown: list[str] = []
        with self._errors("hint_many"):
            replies = self.scripts.run(build)
            for (shard, first), (outcomes, events) in zip(calls, replies, strict=False):
                for j, outcome in enumerate(outcomes):
                    counts[evidence.OUTCOMES[outcome]] += 1
                    if outcome == evidence.UNKNOWN:
                        unknown.append(urls[shard][first + j])
                self._log_trust_events(events)
            if self.scripts.cluster:
                self.scripts.run(lambda pipe: self._lower_due(pipe, dict.fromkeys(groups, now)))
        if discover and unknown:
            counts["added"] = self.add_many([(u, weight) for u in dict.fromkeys(unknown)], now=now)
        return counts

    def signal_trust(self, host: str, source: str) -> dict[str, Any]:
        """How the claims of ``source`` about ``host``'s pages fared: ``checked``, ``bad``,
        ``trusted`` (they move schedules) and ``ignored`` (more than 1 in
        ``evidence.TRUST_RATIO`` failed; lua/signals.lua)."""
        evidence.check_source(source)
        host = host.lower()
        with self._errors("signal_trust"):
            raw = self.client.hget(self.keys.prefix(self._shard_of(host)) + "st",
                                   f"{host}|{source}")
        tally = evidence.Tally()
        if raw is not None and len(raw) == 16:
            checked, bad = struct.unpack("<dd", raw)
            if 0 <= bad <= checked:
                tally = evidence.Tally(checked, bad)
        return {"checked": int(tally.checked), "bad": int(tally.bad), "trusted": tally.trusted,
                "ignored": tally.ignored}

    def _log_trust_events(self, events: list) -> None:
        """One WARNING the first time this process sees a (host, source) become ignored,
        INFO after that and when one is believed again (lua/signals.lua SIG_EVENTS)."""
        for i in range(0, len(events) - 2, 3):
            host, source = events[i].decode("utf-8", "replace"), events[i + 1].decode()
            if int(events[i + 2]) == evidence.BECAME_IGNORED:
                level = logging.INFO if (host, source) in self._warned_sources else logging.WARNING
                self._warned_sources.add((host, source))
                logger.log(level, "ignoring the %s claims of host %s: more than 1 in %d "
                           "disagreed with what fetches found (dates of unchanged pages, "
                           "generation times, constant or future dates)", source, host,
                           evidence.TRUST_RATIO)
            else:
                logger.info("believing the %s claims of host %s again", source, host)

    def release(self, dispatch: Dispatch, *, now: float | None = None) -> bool:
        """Hand back a dispatch that was never sent; True if its lease was still open."""
        return self.release_many([dispatch], now=now) == 1

    def release_many(self, dispatches: Iterable[Dispatch], *, now: float | None = None) -> int:
        """Hand back dispatches that were never sent (a crawler closing with a buffer).

        Each page goes back to its host queue at its old due time instead of
        waiting for the lease deadline; the host's next dispatch time is not
        moved earlier. A lease already observed, failed, expired or handed out
        again is left alone. Returns how many leases were released.
        """
        now = self._now(now)
        groups: dict[int, list] = defaultdict(list)
        for dispatch in dispatches:
            if not isinstance(dispatch, Dispatch):
                raise ValueError(f"dispatch must be a Dispatch, got {type(dispatch).__name__}")
            host = parse_url(dispatch.url)
            due = now if dispatch.due is None else _real("dispatch.due", dispatch.due) + self._offset
            groups[self._shard_of(host)] += [page_id(dispatch.url), host, _token(dispatch),
                                             repr(due)]
        if not groups:
            return 0

        lowest = {shard: min(float(args[i]) for i in range(3, len(args), 4))
                  for shard, args in groups.items()}

        def build(pipe: Any) -> None:
            for shard, args in groups.items():
                self._shard_call(pipe, "release", shard, now, args)
            if not self.scripts.cluster:
                self._lower_due(pipe, lowest)

        with self._errors("release_many"):
            released = sum(int(n) for n in self.scripts.run(build)[:len(groups)])
            if self.scripts.cluster:
                self.scripts.run(lambda pipe: self._lower_due(pipe, lowest))
            return released

    def set_host_delay(self, host: str, seconds: float | None) -> None:
        """Minimum seconds between dispatches to ``host`` (None: back to min_host_delay)."""
        if not isinstance(host, str) or not host or len(host) > 253:
            raise ValueError(f"host must be a non-empty host name, got {host!r}")
        delay = -1.0 if seconds is None else _real("seconds", seconds, minimum=0.0)
        host = host.lower()
        with self._errors("set_host_delay"):
            now = self._now(None)
            self._run_one("host_delay", shard_of(host, self.shards), now, [host, repr(delay)],
                          lower=now)

    # ------------------------------------------------------------------ threshold

    def set_budget(self, budget: float, *, now: float | None = None) -> None:
        """Change the fetch budget (fetches/s, shared by the namespace) and re-solve ν."""
        self.set_settings(budget=budget)
        self.resolve(now=now)

    def cells(self) -> dict[int, tuple[float, float, float]]:
        """The policy cells summed over shards: id -> (pages, Σλ, Σw) (O(K) reads)."""
        pipe = self.client.pipeline(transaction=False)
        for shard in range(self.shards):
            pipe.hgetall(self.keys.shard_keys(shard)[3])
        cells: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
        column = {b"n": 0, b"l": 1, b"w": 2}
        with self._errors("cells"):
            aggs = pipe.execute()
        for agg in aggs:
            for field, value in agg.items():
                kind, cell = field.split(b":", 1)
                cells[int(cell)][column[kind]] += float(value)
        return {c: (v[0], max(v[1], 0.0), max(v[2], 0.0)) for c, v in cells.items()
                if v[0] > 0.5}

    def host_table(self) -> tuple[list[tuple[int, str]], np.ndarray, np.ndarray]:
        """Every host with pages as (shard, host); rows (pages, Σλ, Σw, host index) of each
        host's own policy cells; and each host's cap in fetches/s from its delay (a delay of
        0 is no cap). O(host cells) reads: for inspection; the re-solve reads
        ``host_candidates``."""
        pipe = self.client.pipeline(transaction=False)
        for shard in range(self.shards):
            pipe.hgetall(self.keys.host_agg(shard))
            pipe.hgetall(self.keys.shard_keys(shard)[1])
        with self._errors("host_table"):
            replies = pipe.execute()
        table = _HostTable()
        for shard in range(self.shards):
            table.add(shard, replies[2 * shard].items(), replies[2 * shard + 1], self._host_cap)
        return table.result()

    def host_candidates(self, cell_ids: Iterable[int]) -> tuple[list[tuple[int, str]], np.ndarray,
                                                                 np.ndarray]:
        """``host_table`` for the hosts whose pages could ever ask for more than their cap.

        A page plans at most one fetch per ``min_interval``, so a host with ``n`` pages
        and delay ``d`` can exceed its cap 1/d only when n·d > min_interval; the host page
        index (lua/lib.lua HOST_PAGES, HOST_SWEEP) lists those hosts, and only their cells
        are read: O(K + their cells), not O(hosts). ``cell_ids``: the policy cells that
        hold pages (``cells``)."""
        # a little below the bound, so that rounding never leaves out a host at it
        bound = self.min_interval * (1 - 1e-9)

        def read(pipe: Any) -> None:
            for shard in range(self.shards):
                pipe.hget(self.keys.shard_keys(shard)[4], "hi")
                if self.min_host_delay > 0:
                    pipe.zrangebyscore(self.keys.host_pages(shard),
                                       f"({bound / self.min_host_delay!r}", "+inf")
                pipe.zrangebyscore(self.keys.host_sweep(shard), f"({bound!r}", "+inf")
                pipe.hlen(self.keys.host_agg(shard))

        pipe = self.client.pipeline(transaction=False)
        read(pipe)
        replies = pipe.execute()
        per_shard = len(replies) // self.shards
        missing = [s for s in range(self.shards) if replies[s * per_shard] != b"1"]
        if missing:
            self._build_host_index(missing)
            pipe = self.client.pipeline(transaction=False)
            read(pipe)
            replies = pipe.execute()
        replies = iter(replies)
        wanted: dict[int, list[bytes]] = {}
        sizes: dict[int, int] = {}
        for shard in range(self.shards):
            next(replies)
            hosts = set(next(replies)) if self.min_host_delay > 0 else set()
            hosts.update(next(replies))
            sizes[shard] = next(replies)
            if hosts:
                wanted[shard] = sorted(hosts)
        fields = [str(c).encode() + b":" for c in sorted(set(cell_ids))]
        pipe = self.client.pipeline(transaction=False)
        for shard, hosts in wanted.items():
            if len(hosts) * len(fields) >= sizes[shard]:  # most of the shard: read it whole
                pipe.hgetall(self.keys.host_agg(shard))
            else:
                pipe.hmget(self.keys.host_agg(shard), [c + h for h in hosts for c in fields])
            pipe.hmget(self.keys.shard_keys(shard)[1], hosts)
        replies = iter(pipe.execute())
        table = _HostTable()
        for shard, hosts in wanted.items():
            cells, delays = next(replies), dict(zip(hosts, next(replies), strict=True))
            if isinstance(cells, dict):
                items = ((field, raw) for field, raw in cells.items()
                         if field.partition(b":")[2] in delays)
            else:
                items = zip((c + h for h in hosts for c in fields), cells, strict=True)
            table.add(shard, items, delays, self._host_cap)
        return table.result()

    def _build_host_index(self, shards: list[int]) -> None:
        """Build the host page index of ``shards`` (lua/host_index.lua): once per
        namespace, and again after its data was lost; later scripts keep it."""
        now = self._now(None)
        built = self.scripts.run(lambda pipe: [self._shard_call(pipe, "host_index", shard, now, [])
                                               for shard in shards])
        logger.info("built the host page index of %d shards", sum(map(bool, built)))

    def _host_cap(self, packed: bytes | None) -> float:
        """Fetches/s a host's delay allows (lua/lib.lua host_get: (next_allowed, delay))."""
        delay = self.min_host_delay
        if packed is not None and len(packed) == 16:
            stored = struct.unpack("<dd", packed)[1]
            if math.isfinite(stored) and stored >= 0:
                delay = stored
        return 1.0 / delay if delay > 0 else math.inf

    def resolve(self, *, now: float | None = None) -> float:
        """Re-solve ν from the cell and host aggregates (policy.solve_threshold) and
        publish it, with τ_h for every host whose delay caps it (lua ``host_nu``)."""
        now = self._now(now)
        with self._errors("resolve"):
            cells = self.cells()
            capped: dict[int, dict[str, str]] = defaultdict(dict)
            if cells:
                names, hosts, caps = self.host_candidates(cells)
                sol = policy.solve_threshold(cells, self.budget, self.min_interval,
                                             self.max_interval, self.objective,
                                             guess=self._nu or None, hosts=hosts, caps=caps)
                nu, rate, status = sol.nu, sol.rate, sol.status
                for (shard, host), nu_h in zip(names, sol.host_nu, strict=True):
                    if nu_h > nu:
                        capped[shard][host] = repr(min(float(nu_h), 1e300))
            else:
                nu, rate, status = 0.0, 0.0, "empty"
            # one transaction where Redis allows it (not across a cluster's slots): a write
            # Redis refuses (maxmemory, read-only) then aborts them all, and no host loses
            # its threshold while ν stays as it was
            pipe = self.client.pipeline(transaction=not self.scripts.cluster)
            pipe.hset(self.keys.nu, mapping={
                "nu": repr(nu), "solved_at": repr(now), "planned_rate": repr(rate),
                "status": status, "capped_hosts": str(sum(len(c) for c in capped.values()))})
            for shard in range(self.shards):
                pipe.delete(self.keys.host_nu(shard))
                if capped.get(shard):
                    pipe.hset(self.keys.host_nu(shard), mapping=capped[shard])
            pipe.execute()
        self._set_nu(nu, now)
        self._solved_at = now
        logger.debug("re-solved nu=%g (planned %g fetches/s, %s)", nu, rate, status)
        return nu

    def _set_nu(self, nu: float, now: float) -> None:
        if nu != self._nu:
            self._refresh_pending = list(range(self.shards))
        self._nu, self._nu_read_at = nu, now

    def _maybe_resolve(self, now: float) -> None:
        """Re-solve every ``_resolve_every()`` s of clock time; otherwise reuse the published ν."""
        if abs(now - self._nu_read_at) < NU_CACHE:
            return
        self._use_published_nu(self.client.hmget(self.keys.nu, *NU_FIELDS), now)

    def _use_published_nu(self, raw: list, now: float) -> None:
        if len(raw) > 4:  # NU_FIELDS: the count of shared settings changes
            self._reload_settings(raw[4])
        # stale after _resolve_every() (RESOLVE_SOON while the last solve found the pages short
        # of the budget: a crawl that is still discovering them); a clock far behind the solve
        # (another clock) re-solves too
        every = RESOLVE_SOON if raw[3] in (b"under_budget", b"empty") else self._resolve_every()
        if raw[0] is None or raw[1] is None or abs(now - float(raw[1])) >= every:
            self.resolve(now=now)
            return
        self._solved_at = float(raw[1])
        self._set_nu(float(raw[0]), now)

    def _resolve_every(self) -> float:
        return max(RESOLVE_EVERY, RESOLVE_FETCHES / self.budget)

    def _refreshed(self, shard: int, reply: list) -> None:
        """Book-keeping after a background refresh step (lua/refresh.lua) on ``shard``."""
        seen, moved, wrapped, quarantined = reply
        _log_quarantined(quarantined)
        if self._refresh_pending and self._refresh_pending[0] == shard:
            self._refresh_pending.pop(0)
            if not wrapped:
                self._refresh_pending.append(shard)
        if moved:
            logger.debug("refresh: shard %d, %d pages looked at, %d moved", shard, seen, moved)

    # ------------------------------------------------------------------ inspection

    @classmethod
    def attach(cls, redis_url: str | None = None, namespace: str = "default", **kwargs: Any) -> Frontier:
        """The frontier of an existing namespace, with the estimator and objective it was
        created with and its stored settings (for tools that inspect a crawl, like the CLI).
        Opening it writes nothing, so a read-only replica serves it.

        Raises ``UnknownNamespace`` when nothing is stored under ``namespace``.
        """
        if not isinstance(namespace, str) or not NAMESPACE_RE.match(namespace):
            raise ValueError(f"namespace must be 1-64 characters of A-Z a-z 0-9 _ . -, got {namespace!r}")
        keys = Keys(namespace, 1)
        client = connect(redis_url)
        try:
            with _RedisErrors(redis_url, namespace, "attach"):
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

    def due(self, limit: int = 20) -> list[dict]:
        """The ``limit`` queued pages that fall due soonest, earliest first.

        Reads each host queue's head (leased and gone pages are not queued);
        leases nothing. Costs O(hosts x limit): an inspection tool, not a hot path.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a positive integer, got {limit!r}")
        heads: list[tuple[float, int, str, bytes]] = []
        with self._errors("due"):
            for shard in range(self.shards):
                hosts = [h.decode() for h in self.client.zrange(self.keys.shard_keys(shard)[0], 0, -1)]
                pipe = self.client.pipeline(transaction=False)
                for host in hosts:
                    pipe.zrange(self.keys.queue(shard, host), 0, limit - 1, withscores=True)
                for host, entries in zip(hosts, pipe.execute(), strict=True):
                    heads += [(score, shard, host, pid) for pid, score in entries]
            heads = sorted(heads)[:limit]
            layouts = self._layouts(shard for _, shard, _, _ in heads)
            pipe = self.client.pipeline(transaction=False)
            for _, shard, _, pid in heads:
                b = layouts[shard].bucket(pid)
                pipe.hget(self.keys.url(shard, b), pid)
                pipe.hget(self.keys.state(shard, b), pid)
                pipe.hget(self.keys.extras(shard, b), pid)
            replies = pipe.execute()
        pages = []
        for i, (score, _, host, _) in enumerate(heads):
            url, raw, extras = replies[3 * i: 3 * i + 3]
            if url is not None and raw is not None:
                pages.append(self._record(url.decode("utf-8", "replace"), host, raw, extras,
                                          score / 1e6))
        return pages

    def page(self, url: str) -> dict | None:
        """One page's record, or None if unknown; ``pattern`` describes its change pattern
        (``pattern.describe``) once it has dated changes.

        A page with a corrupt state has status "corrupt" (it is quarantined as
        soon as a script reads it), a quarantined one "quarantined"; both name
        the reason in ``problem`` and have None for the numbers they lack.
        """
        host = parse_url(url)
        pid = page_id(url)
        shard = shard_of(host, self.shards)
        with self._errors("page"):
            layout = self._layouts([shard])[shard]
            while True:  # read again if a bucket split moved the page in between
                b = layout.bucket(pid)
                pipe = self.client.pipeline(transaction=False)
                pipe.hget(self.keys.state(shard, b), pid)
                pipe.hget(self.keys.extras(shard, b), pid)
                pipe.zscore(self.keys.queue(shard, host), pid)
                pipe.hget(self.keys.bad(shard), pid)
                pipe.hget(self.keys.pattern(shard, b), pid)
                pipe.hmget(self.keys.shard_keys(shard)[4], "bl", "bs")
                raw, extras, due, bad, kept, now_layout = pipe.execute()
                now_layout = Layout.read(self.buckets, now_layout)
                if now_layout == layout:
                    break
                layout = now_layout
        if raw is None:
            if bad is None:
                return None
            return _broken_record(url, host, "quarantined", _quarantine_reason(bad))
        record = self._record(url, host, raw, extras, None if due is None else due / 1e6)
        state = pattern.unpack(kept)
        record["pattern"] = None if state is None else pattern.describe(state,
                                                                        self.server_clock_rate)
        return record

    def _record(self, url: str, host: str, raw: bytes, extras: bytes | None,
                due: float | None) -> dict:
        """A page's record; ``due`` and the stored times are on Redis's clock, the record's
        on this process's."""
        due = self._local(due)
        try:
            s = unpack_state(raw, self.estimator)
            etag, lm, meta = unpack_extras(extras)
            meta = json.loads(meta) if meta else None
        except (ValueError, RecursionError) as exc:
            return _broken_record(url, host, "corrupt", str(exc), due)
        if s["flags"] & F_GONE:
            status = "gone"
        elif s["flags"] & F_LEASED:
            status = "leased"
        elif s["fails"]:
            status = "retrying"
        elif s["fetches"] == 0:
            status = "new"
        else:
            status = "active"
        return {"url": url, "host": host, "weight": s["weight"],
                "estimate": self._reported(s["est"]), "fetches": s["fetches"],
                "changes": s["changes"],
                "last_fetch": self._local(s["last_fetch"]) if s["fetches"] else None,
                "next_due": due, "status": status, "p": s["p"], "fails": s["fails"],
                "meta": meta, "etag": etag, "last_modified": lm, "problem": None}

    def _reported(self, est: float) -> float:
        if self.estimator == "interval":
            return math.exp(est)
        if self.estimator == "sam":
            return max(est, 0.0)
        return est

    def iter_pages(self) -> Iterator[dict]:
        """Every page's record, bucket by bucket (SCAN over the state buckets, never KEYS).

        Quarantined pages are not included (see ``quarantined``); a corrupt
        state or a missing/invalid URL gives a record with status "corrupt".
        """
        for shard in range(self.shards):
            pattern = self.keys.prefix(shard).replace("{", "\\{").replace("}", "\\}") + "s:*"
            with self._errors("iter_pages"):
                state_keys = list(self.client.scan_iter(match=pattern, count=1000))
            for key in state_keys:
                b = int(key.rsplit(b":", 1)[1])
                with self._errors("iter_pages"):
                    pipe = self.client.pipeline(transaction=False)
                    pipe.hgetall(key)
                    pipe.hgetall(self.keys.url(shard, b))
                    pipe.hgetall(self.keys.extras(shard, b))
                    states, urls, extras = pipe.execute()
                    items = []
                    pipe = self.client.pipeline(transaction=False)
                    broken = []
                    for pid, raw in states.items():
                        try:
                            url, host = _stored_url(urls.get(pid))
                        except ValueError as exc:
                            broken.append(_broken_record(None, None, "corrupt",
                                                         f"{exc} (page id {pid.hex()})"))
                            continue
                        items.append((url, host, raw, extras.get(pid)))
                        pipe.zscore(self.keys.queue(shard, host), pid)
                    dues = pipe.execute()
                for (url, host, raw, extra), due in zip(items, dues, strict=True):
                    yield self._record(url, host, raw, extra, None if due is None else due / 1e6)
                yield from broken

    def quarantined(self) -> Iterator[dict]:
        """Every quarantined page: url (None when it was lost too), host, reason,
        id (hex) and the raw corrupt value (hex), shard by shard (HSCAN).

        Adding the URL again gives the page a fresh state and takes it out of here.
        """
        for shard in range(self.shards):
            with self._errors("quarantined"):
                entries = list(self.client.hscan_iter(self.keys.bad(shard), count=1000))
                layout = self._layouts([shard])[shard]
                pipe = self.client.pipeline(transaction=False)
                for pid, _ in entries:
                    pipe.hget(self.keys.url(shard, layout.bucket(pid)), pid)
                urls = pipe.execute() if entries else []
            for (pid, record), url in zip(entries, urls, strict=True):
                try:
                    host, reason, raw = unpack_quarantine(record)
                except ValueError as exc:
                    host, reason, raw = None, str(exc), record
                yield {"url": None if url is None else url.decode("utf-8", "replace"),
                       "host": host, "reason": reason, "id": pid.hex(), "raw": raw.hex()}

    def stats(self, *, now: float | None = None) -> dict:
        """Counters: pages, due_now, leased, gone, quarantined, fetches, changes, nu, budget,
        budget_use, dated_changes (changes whose time was learned from a date),
        date_hosts_ignored (hosts whose Last-Modified dates are ignored now). ``pages``
        excludes quarantined pages; ``fetches`` and ``changes`` count every accepted
        observation, of quarantined pages too."""
        now = self._now(now)
        totals: dict[str, float] = defaultdict(float)
        with self._errors("stats"):
            def build(pipe: Any) -> None:
                for shard in range(self.shards):
                    self._shard_call(pipe, "stats", shard, now, ["100000"])

            for flat in self.scripts.run(build):
                for i in range(0, len(flat), 2):
                    if flat[i] != b"id":  # the namespace marker (lua/lib.lua start)
                        totals[flat[i].decode()] += float(flat[i + 1])
            nu = self.client.hgetall(self.keys.nu)
        planned = float(nu.get(b"planned_rate", 0.0))
        return {"pages": int(totals["pages"]), "due_now": int(totals["due_now"]),
                "leased": int(totals["leased"]), "gone": int(totals["gone"]),
                "quarantined": int(totals["quarantined"]),
                "fetches": int(totals["fetches"]), "changes": int(totals["changes"]),
                "dated_changes": int(totals["dated_changes"]),
                "date_hosts_ignored": int(totals["date_hosts_ignored"]),
                "claims": int(totals["claims"]),
                "signal_sources_ignored": int(totals["signal_sources_ignored"]),
                "hosts_queued": int(totals["hosts_queued"]),
                "nu": float(nu.get(b"nu", 0.0)), "budget": self.budget,
                "planned_rate": planned, "budget_use": planned / self.budget,
                "solved_at": self._local(float(nu[b"solved_at"])) if b"solved_at" in nu else None}

    def health(self) -> dict[str, Any]:
        """What the Redis server promises the namespace: its eviction policy, persistence,
        role, memory and evicted keys (health.server_facts), whether the namespace is whole
        (every shard carries its marker), this process's clock offset to Redis's, the
        shared settings, and a sentence per way the server can lose the frontier's data."""
        with self._errors("health"):
            facts = health.server_facts(self.client)
            state = "whole" if self._namespace_id else "unchecked (no marker: opened read-only)"
            if self._namespace_id:
                try:
                    check_markers(self.client, self.scripts, self.keys, self.shards,
                                  self._namespace_id, self.redis_url)
                except NamespaceLost as exc:
                    state = f"lost: {exc}"
        return {**{f"redis_{k}": v for k, v in facts.items()}, "namespace": state,
                "clock_offset": self._offset,
                **{name: getattr(self, name) for name in SETTINGS},
                "warnings": health.warnings(facts, self.redis_url)}

    def close(self) -> None:
        """Drop the connections (the embedded server stops with its last client process)."""
        self.client.close()

    def __enter__(self) -> Frontier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


OBJECTIVES = policy.OBJECTIVES
NU_FIELDS = ("nu", "solved_at", "budget", "status", "settings")
"""What every lease call reads of fr:{ns}:nu: the threshold, when it was solved, the budget
(namespaces from before shared settings), the solve's status, the count of settings changes."""


class UnknownNamespace(FrontierError, LookupError):
    """``Frontier.attach`` found nothing stored under the namespace."""


class _HostTable:
    """Accumulates ``host_table`` rows from (field "<cell>:<host>", packed cells) items."""

    def __init__(self) -> None:
        self.names: list[tuple[int, str]] = []
        self.caps: list[float] = []
        self.rows: list[tuple[float, float, float, int]] = []

    def add(self, shard: int, items: Iterable[tuple[bytes, bytes | None]],
            delays: Mapping[bytes, bytes | None], cap: Callable[[bytes | None], float]) -> None:
        index: dict[bytes, int] = {}
        for field, raw in items:
            _, _, host = field.partition(b":")
            if raw is None or len(raw) != HOST_AGG.size or not host:
                continue
            n, lam, w = HOST_AGG.unpack(raw)
            if not (n > 0.5 and math.isfinite(lam) and math.isfinite(w)):
                continue
            if host not in index:
                index[host] = len(self.names)
                self.names.append((shard, host.decode("utf-8", "replace")))
                self.caps.append(cap(delays.get(host)))
            self.rows.append((n, max(lam, 0.0), max(w, 0.0), index[host]))

    def result(self) -> tuple[list[tuple[int, str]], np.ndarray, np.ndarray]:
        return (self.names, np.array(self.rows, dtype=float).reshape(-1, 4),
                np.array(self.caps, dtype=float))


class _RedisErrors:
    """Turns any error Redis answers during ``what`` into the frontier's error naming the
    condition and the URL (errors.translate), an ACL refusal into RedisPermissionDenied
    naming the namespace; ``on_lost`` hears of a namespace found gone (and returns the
    error to raise), ``on_ok`` runs after a block Redis carried out."""

    def __init__(self, url: str | None, namespace: str, what: str = "a call",
                 on_lost: Callable[[NamespaceLost], NamespaceLost] | None = None,
                 on_ok: Callable[[], None] | None = None) -> None:
        self.url, self.namespace, self.what, self.on_lost = url, namespace, what, on_lost
        self.on_ok = on_ok

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> bool:
        if exc is None:
            if self.on_ok is not None:
                self.on_ok()
            return False
        if isinstance(exc, FrontierError):
            if isinstance(exc, NamespaceLost) and self.on_lost is not None:
                replaced = self.on_lost(exc)
                if replaced is not exc:
                    raise replaced from None
            return False
        applied = "nothing of it was applied"
        if isinstance(exc, PartlyApplied):
            applied = (f"{exc.applied} of its {exc.total} script calls were applied, each whole: "
                       "repeating the call is safe")
            exc = exc.error
        if isinstance(exc, redis.exceptions.NoPermissionError):
            raise RedisPermissionDenied(
                f"Redis at {redact_url(self.url)} refused access to namespace "
                f"{self.namespace!r} ({exc}): the Redis user's ACL rules do "
                f"not cover its keys fr:{{{self.namespace}}}:* and fr:{{{self.namespace}:*"
            ) from None
        fault = translate(exc, self.url, f"{self.what} on namespace {self.namespace!r}",
                          namespace=self.namespace, applied=applied)
        if fault is None:
            return False
        if isinstance(fault, NamespaceLost) and self.on_lost is not None:
            fault = self.on_lost(fault)
        raise fault from None


def _checked_settings(values: Mapping[str, Any]) -> dict[str, float | None]:
    """The shared settings given (None: not given), each checked on its own."""
    out: dict[str, float | None] = {}
    for name, value in values.items():
        if value is None:
            out[name] = None
        elif name == "min_host_delay":
            out[name] = _real(name, value, minimum=0.0)
        else:
            out[name] = _real(name, value, minimum=0.0, strict=True)
        if name == "budget" and out[name] is not None and out[name] < MIN_BUDGET:
            raise ValueError(f"budget is fetches per second over all hosts, at least "
                             f"{MIN_BUDGET:g} (one fetch in {1 / MIN_BUDGET / 86400:.1f} days); "
                             f"got {value!r}")
    if out.get("min_interval") is not None and out.get("max_interval") is not None \
            and out["max_interval"] < out["min_interval"]:
        raise ValueError(f"max_interval must be >= {out['min_interval']:g}, got "
                         f"{out['max_interval']!r}")
    return out


def _window(max_n: int, shards: int) -> int:
    """Candidates each shard offers for ``max_n`` leases: CANDIDATE_WINDOW per lease over
    all shards for the first WIDE_WINDOW leases, WINDOW_SLACK per lease beyond (a bulk call
    need not rank 4x its size to keep the index order; the cost of a lease stays flat), at
    least 16 per shard."""
    hosts = CANDIDATE_WINDOW * min(max_n, WIDE_WINDOW) \
        + math.ceil(WINDOW_SLACK * max(0, max_n - WIDE_WINDOW))
    return max(16, -(-hosts // shards))


def _us(t: float) -> str:
    """A time as whole microseconds, rounded as lua/lib.lua ``us`` does."""
    return str(math.floor(t * 1e6 + 0.5))


def _has_work(summary: bytes | None, now_us: int) -> bool:
    """Whether a shard whose due summary field is ``summary`` may have work at ``now_us``
    (an absent or unreadable field: it may)."""
    if summary is None:
        return True
    try:
        return float(summary) <= now_us
    except ValueError:
        return True


def _candidates(found: list, shards: Iterable[int], earliest: dict[int, bytes]
                ) -> list[tuple[float, int, str, bytes]]:
    """(index, shard, host, page id) of every candidate in the candidates.lua replies of
    ``shards``; records each shard's earliest time with work in ``earliest``."""
    out = []
    size = _CANDIDATE.size
    for shard, (packed, quarantined, first_work) in zip(shards, found, strict=True):
        earliest[shard] = first_work
        _log_quarantined(quarantined)
        at = 0
        while at < len(packed):
            index, host_length = _CANDIDATE.unpack_from(packed, at)
            at += size + 8 + host_length
            out.append((index, shard, packed[at - host_length:at], packed[at - 8 - host_length:
                                                                             at - host_length]))
    return out


_CANDIDATE = struct.Struct("<dH")
"""A packed candidate of lua/candidates.lua: index, length of the host (id and host follow)."""
_LEASE = struct.Struct("<dHBHHHHI")
"""A packed lease of lua/lease.lua: due, token, first fetch (0/1), lengths of host, url,
etag, last_modified, meta (the 8-byte id and those strings follow)."""


def _leases(packed: bytes) -> Iterator[tuple[bytes, tuple]]:
    """(page id, (host, url, token, etag, last_modified, meta, due, first)) of each packed
    lease."""
    at, size = 0, _LEASE.size
    while at < len(packed):
        due, token, first, *lengths = _LEASE.unpack_from(packed, at)
        at += size
        pid = packed[at:at + 8]
        at += 8
        parts = []
        for length in lengths:
            parts.append(packed[at:at + length])
            at += length
        host, url, etag, lm, meta = parts
        yield pid, (host, url, str(token), etag, lm, meta, due, first == 1)


def _token(dispatch: Dispatch) -> str:
    token = dispatch.token
    if not isinstance(token, str) or not token.isdigit() or len(token) > 10:
        raise ValueError(f"dispatch token must be the lease number from next_requests, "
                         f"got {token!r}")
    return token


_HEADER_SAFE = re.compile(r"[ -~]*")
"""Printable ASCII: what a validator may hold to be sent back in a request header."""


def _validator(field: str, value: str | None) -> bytes | None:
    """An ETag / Last-Modified to store, or None to store nothing (over-long, or holding
    control characters (CR, LF, NUL, ...) or non-ASCII: it could never be sent back
    safely in a conditional request header)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a string or None, got {type(value).__name__}")
    if not _HEADER_SAFE.fullmatch(value):
        logger.debug("ignoring a %s with control or non-ASCII characters: %r", field, value[:100])
        return None
    data = value.encode("ascii")
    if len(data) > MAX_VALIDATOR_LENGTH:
        logger.debug("ignoring an over-long %s (%d bytes)", field, len(data))
        return None
    return data


def _stored_url(raw: bytes | None) -> tuple[str, str]:
    """(url, host) of a URL read from Redis; ValueError naming what is wrong with it."""
    if raw is None:
        raise ValueError("URL missing")
    try:
        url = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("URL is not UTF-8") from None
    try:
        return url, parse_url(url)
    except ValueError as exc:
        raise ValueError(f"URL is invalid: {exc}") from None


def _stored_validator(field: str, raw: bytes) -> str | None:
    text = raw.decode("utf-8", "replace")
    if not text:
        return None
    if not _HEADER_SAFE.fullmatch(text):
        logger.debug("not sending a stored %s with control or non-ASCII characters", field)
        return None
    return text


def _dispatch(fields: list) -> Dispatch:
    """A Dispatch from a lease reply; ValueError (the reason to quarantine) for an
    unreadable URL or meta."""
    host, url, token, etag, lm, meta, due, first = fields
    url, _ = _stored_url(url)
    try:
        meta = json.loads(meta.decode("utf-8")) if meta else None
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"meta is not valid JSON ({type(exc).__name__})") from None
    if meta is not None and not isinstance(meta, dict):
        raise ValueError(f"meta is not a JSON object ({type(meta).__name__})")
    return Dispatch(url=url, token=token, host=host.decode("utf-8"), meta=meta,
                    etag=_stored_validator("etag", etag),
                    last_modified=_stored_validator("last_modified", lm), due=due, first=first)


def _broken_record(url: str | None, host: str | None, status: str, problem: str,
                   due: float | None = None) -> dict:
    """The record of a page whose state cannot be read: the usual fields, None where unknown."""
    return {"url": url, "host": host, "weight": None, "estimate": None, "fetches": None,
            "changes": None, "last_fetch": None, "next_due": due, "status": status, "p": None,
            "fails": None, "meta": None, "etag": None, "last_modified": None, "problem": problem}


def _quarantine_reason(record: bytes) -> str:
    try:
        return unpack_quarantine(record)[1]
    except ValueError as exc:
        return str(exc)


def _log_quarantined(flat: list, what_next: str = "see Frontier.quarantined(); add the URL "
                     "again for a fresh state") -> None:
    """One ERROR per page a script quarantined (flat url, reason pairs)."""
    for i in range(0, len(flat), 2):
        url = flat[i].decode("utf-8", "replace") or "(URL missing)"
        logger.error("quarantined page %s: %s (%s)", url, flat[i + 1].decode("utf-8", "replace"),
                     what_next)


HOST_AGG = struct.Struct("<ddd")
"""One cell of one host in fr:{ns:s}:ha (lua/lib.lua HOST_AGG): pages, Σλ, Σw."""
OBSERVATION = struct.Struct("<8sHdBd4sHHHd")
"""One packed fetch result for lua/observe.lua (host, etag, last_modified follow)."""
_REPLY = struct.Struct("<BBddBH")
OK, REPLAY, STALE, MISSING, QUARANTINED = range(5)
"""Observation statuses of lua/observe.lua."""
DATE_USED, DATES_IGNORED, DATES_TRUSTED = 1, 2, 4
"""Date bits of an observe reply (lua/observe.lua)."""
DATE_TRUST = 10
"""A host's change dates are ignored while more than 1 in this many disagreed with the
content (DATE_TRUST in lua/observe.lua)."""


def _observation(packed: bytes, at: int, dispatch: Dispatch) -> tuple[Observation, int]:
    """The Observation of the reply at ``at`` in an observe.lua reply, and where the next starts."""
    status, changed, estimate, due, date_bits, length = _REPLY.unpack_from(packed, at)
    at += _REPLY.size + length
    return _observation_of(status, changed, estimate, due, date_bits,
                           packed[at - length:at], dispatch), at


def _observation_of(status: int, changed: int, estimate: float, due: float, date_bits: int,
                    reason: bytes, dispatch: Dispatch) -> Observation:
    url = dispatch.url
    if date_bits & DATES_IGNORED:
        logger.warning("ignoring the change dates (Last-Modified) of host %s: more than 1 in %d "
                       "disagreed with the content (now, constant or future dates)",
                       dispatch.host, DATE_TRUST)
    elif date_bits & DATES_TRUSTED:
        logger.info("trusting the change dates (Last-Modified) of host %s again", dispatch.host)
    if status == QUARANTINED:
        reason = reason.decode("utf-8", "replace")
        logger.error("observation of %s dropped: the page is quarantined (%s); add the URL again "
                     "for a fresh state", url, reason)
        return Observation(changed=False, estimate=math.nan, next_due=None, accepted=False)
    if status == MISSING:
        logger.warning("observe of a page the frontier does not know: %s", url)
    return Observation(changed=bool(changed), estimate=estimate,
                       next_due=due if due > 0 else None, accepted=status in (OK, REPLAY),
                       dated=bool(date_bits & DATE_USED))

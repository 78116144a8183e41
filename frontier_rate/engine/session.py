"""One process's open namespace: its Redis client, its configuration, the shared settings,
the clock it shares with Redis, and how a Redis error becomes the frontier's error.

``Session`` opens (or creates) the namespace (``namespace.open_namespace``), keeps the
shared settings and the script header (``wire.Header``) current, measures the clock
offset to Redis and watches for evictions (``health``), and wraps every call in
``errors(what)``, which turns what Redis answered into a ``FrontierError`` naming the
condition and the URL. The engine's other parts (``frontier_rate.engine.shards``, ``leases``,
``results``, ``threshold``, ``inspection``) all work through one ``Session``.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import redis

from frontier_rate.engine.validation import Options, checked_settings, real
from frontier_rate.math import index as policy  # the cell bins, defined in math/index.py
from frontier_rate.store import health
from frontier_rate.store.connection import connect
from frontier_rate.store.errors import (
    FrontierError,
    NamespaceLost,
    RedisPermissionDenied,
    SettingsMismatch,
    lost_message,
    redact_url,
    translate,
)
from frontier_rate.store.keys import Keys
from frontier_rate.store.namespace import (
    SETTINGS,
    Config,
    change_settings,
    check_markers,
    open_namespace,
    read_settings,
)
from frontier_rate.store.scripts import PartlyApplied, Scripts
from frontier_rate.store.wire import BETA, ETA, INTERVAL_MAX_STEP, INTERVAL_PRIOR_INFO, OMEGA, Header

logger = logging.getLogger(__name__)

DEFAULT_SHARDS = 16
DEFAULT_BUCKETS = 16
"""Buckets per shard a new namespace starts with; they grow online (linear hashing,
``store.Layout``) at 48 pages per bucket. Namespaces created before kept 1024."""
PRIOR_RATE = 1.0 / 86400
"""Change rate assumed for a page before its first observation (once a day)."""
DEFAULT_SETTINGS = {"budget": 1.0, "min_host_delay": 1.0, "min_interval": 60.0,
                    "max_interval": 30 * 86400.0, "lease_timeout": 300.0, "prior_rate": PRIOR_RATE}
"""The shared settings of a new namespace that no process asked for otherwise."""
UNGUARDED_CALLS = frozenset({"opening the namespace", "health"})
"""Calls that run while the namespace is found lost: ``health`` reports the loss itself."""
HOUSEKEEPING_EVERY = 5.0
"""Seconds of real time between two checks of the clock offset and of evictions."""
CLOCK_TOLERANCE = 0.05
"""A clock offset to Redis below this (plus half the round trip it was measured over) is
taken as none, so the times of a process on Redis's own machine stay exactly the caller's."""
CLOCK_WARN = 1.0
"""A clock offset to Redis from which opening a frontier logs a WARNING."""


def namespace_defaults(setting_defaults: Mapping[str, Any] | None) -> dict[str, float]:
    """The shared settings a namespace this process creates gets where it asks for none:
    ``DEFAULT_SETTINGS`` updated with ``setting_defaults`` (each checked)."""
    unknown = set(setting_defaults or ()) - set(DEFAULT_SETTINGS)
    if unknown:
        raise ValueError(f"setting_defaults: unknown settings {sorted(unknown)}")
    return {**DEFAULT_SETTINGS,
            **checked_settings(dict(setting_defaults or {}))}  # type: ignore[dict-item]


def starting_rate(pages: float, budget: float, prior_rate: float) -> float:
    """The change rate (1/s) a page starts from before its pools know anything: ``prior_rate``,
    or the budget's rate per page, ``budget / pages``, when that is lower.

    A page whose own evidence cannot correct its prior (a page fetched a few times, or
    whose every fetch saw a change) plans with it, so a prior above what the budget pays
    asks for fetches no page can get: at a fetch per page per month the default of one
    change a day made such pages 7-15x "faster" than they were and drew the budget from
    pages that had shown their rate (issue 35, benchmarks/first_fetch_order.py at 0.05
    fetches/page/day, median of 10 draws: 0.966 of uniform with the default prior, 0.999 with
    this start; at 0.2 and 0.5, 1.013 and 1.007 before, 1.013 and 1.006 after). At
    the budget's rate, a page the engine knows nothing about is worth what uniform
    revisiting would give it. An empty namespace (no pages) starts from ``prior_rate``.
    """
    if pages <= 0 or budget <= 0:
        return prior_rate
    return min(prior_rate, budget / pages)


class Session:
    """The namespace ``options.namespace`` at ``redis_url`` as this process opened it.

    ``client``: a Redis client to use instead of connecting to ``redis_url`` (the
    session then leaves it open at ``close``). ``settings``: the shared settings
    (``namespace.SETTINGS``), current as of this process's last lease call.
    """

    def __init__(self, redis_url: str | None, options: Options,
                 requested: Mapping[str, float | None], *, override: bool,
                 clock_sync: bool | None, timeout: float,
                 defaults: Mapping[str, float] = DEFAULT_SETTINGS,
                 client: redis.Redis | None = None) -> None:
        self.redis_url = redis_url
        self.options = options
        self.namespace = options.namespace
        self.clock = options.clock
        self.settings: dict[str, float] = {}
        self.pages = 0.0  # pages of the namespace at the last re-solve (threshold.resolve)
        self.starting_rate = math.inf  # 1/s; _use_starting_rate
        self._defaults = defaults
        self.offset = 0.0
        self._lost_logged = False
        self._lost = False  # found lost: every call checks the markers first (errors())
        self._clock_sync = options.clock is time.time if clock_sync is None else bool(clock_sync)
        self._housekeeping_at = time.monotonic() + HOUSEKEEPING_EVERY  # open does its own
        self._owns_client = client is None
        self.client = connect(redis_url, timeout=timeout) if client is None else client
        try:
            with self.errors("opening the namespace"):
                self.scripts = Scripts(self.client)  # reads every primary: a dead one is said
                config = self._open(requested, override)
                self.facts = health.server_facts(self.client)
                health.warn_once(self.facts, redis_url)
                self._watch = health.EvictionWatch(self.client)
                self._watch.check()
                if self._clock_sync:
                    self._sync_clock(first=True)
        except BaseException:
            if self._owns_client:
                self.client.close()
            raise
        self.shards, self.buckets = config.shards, config.buckets
        self.namespace_id = config.namespace_id
        self.keys = Keys(self.namespace, self.shards)
        self.header = Header()
        self.header.update(
            nu=0.0, objective=options.objective, policy=options.policy,
            estimator=options.estimator, eta=ETA, beta=BETA, omega=OMEGA,
            interval_prior_info=INTERVAL_PRIOR_INFO, interval_max_step=INTERVAL_MAX_STEP,
            buckets=self.buckets, cells=config.cells,
            server_clock_rate=options.server_clock_rate, cochange=int(options.cochange),
            group_prior=int(options.group_prior),
            worth_y=policy.worth_y(options.min_change_chance), namespace_id=self.namespace_id)
        self._settings_version = config.version
        self.apply_settings(config.settings)

    # -- opening ---------------------------------------------------------------------

    def _open(self, requested: Mapping[str, float | None], override: bool) -> Config:
        """Open or create the namespace (frontier_rate/store/namespace.py): whole, same estimator
        and objective, same shared settings (or overridden, logged)."""
        cells = ",".join(repr(float(x)) for x in (
            policy.WEIGHT_LOG10_MIN, policy.WEIGHT_BINS_PER_DECADE, policy.N_WEIGHT_BINS,
            policy.RATE_LOG10_MIN, policy.RATE_BINS_PER_DECADE, policy.N_RATE_BINS))
        fixed = {"shards": str(DEFAULT_SHARDS), "buckets": str(DEFAULT_BUCKETS),
                 "estimator": self.options.estimator, "objective": self.options.objective,
                 "cells": cells}
        config = open_namespace(
            self.client, self.scripts, Keys(self.namespace, DEFAULT_SHARDS), url=self.redis_url,
            fixed=fixed, requested=requested, defaults=self._defaults, override=override)
        settings = config.settings
        if settings["max_interval"] < settings["min_interval"]:
            raise SettingsMismatch(f"namespace {self.namespace!r}: max_interval "
                                   f"{settings['max_interval']!r} is below min_interval "
                                   f"{settings['min_interval']!r}")
        return config

    def close(self) -> None:
        """Drop the connections (not those of a client the caller gave)."""
        if self._owns_client:
            self.client.close()

    # -- shared settings ---------------------------------------------------------------

    def apply_settings(self, settings: Mapping[str, float]) -> None:
        """Use the namespace's shared settings (at open, and when another process changed
        them): logged when they change, and sent with every script call from here on."""
        for name, value in settings.items():
            old = self.settings.get(name)
            if old is not None and old != value:
                logger.info("namespace %r: %s changed from %r to %r for every process of it",
                            self.namespace, name, old, value)
            self.settings[name] = value
        s = self.settings
        self.header.update(min_interval=s["min_interval"], max_interval=s["max_interval"],
                           min_host_delay=s["min_host_delay"], lease_timeout=s["lease_timeout"])
        self._use_starting_rate()

    def count_pages(self, pages: float) -> None:
        """The namespace's page count as the last re-solve read it (the starting rate's
        budget per page)."""
        self.pages = pages
        self._use_starting_rate()

    def _use_starting_rate(self) -> None:
        """Start new pages, and shrink the pools, towards ``starting_rate`` (the header's
        ``log_prior_rate``); logged when it moves below ``prior_rate`` or back."""
        s = self.settings
        rate = starting_rate(self.pages, s["budget"], s["prior_rate"])
        if rate == self.starting_rate:
            return  # read with ν about once a second: the header stays as it is
        below = rate < s["prior_rate"]
        if below != (self.starting_rate < s["prior_rate"]):
            logger.info("namespace %r: new pages start from %.3g changes/day (%s)", self.namespace,
                        rate * 86400, f"the budget's rate per page, below prior_rate "
                        f"{s['prior_rate'] * 86400:.3g}/day" if below else "prior_rate")
        self.starting_rate = rate
        self.header.update(log_prior_rate=math.log(rate))

    def change_settings(self, values: Mapping[str, Any]) -> None:
        """Change shared settings for every process of the namespace (``Frontier.set_settings``)."""
        unknown = set(values) - set(SETTINGS)
        if unknown:
            raise ValueError(f"unknown setting(s) {', '.join(sorted(unknown))}; shared settings are "
                             f"{', '.join(SETTINGS)}")
        checked = {k: v for k, v in checked_settings(values).items() if v is not None}
        merged = {name: self.settings[name] for name in SETTINGS} | checked
        if merged["max_interval"] < merged["min_interval"]:
            raise ValueError(f"max_interval {merged['max_interval']!r} must be >= min_interval "
                             f"{merged['min_interval']!r}")
        with self.errors("changing the settings"):
            self._settings_version, stored = change_settings(self.scripts, self.keys, checked)
        self.apply_settings(stored)

    def reload_settings(self, version: bytes | None) -> None:
        """Another process changed the shared settings (nu ``settings`` moved): read them."""
        if version == self._settings_version:
            return
        self._settings_version = version
        self.apply_settings(read_settings(self.client, self.keys))

    # -- the clock shared with Redis ------------------------------------------------------

    def now(self, now: float | None) -> float:
        """``now`` (or the clock's time) on Redis's clock: what scripts and stored times use."""
        if now is None:
            return float(self.clock()) + self.offset
        return real("now", now) + self.offset

    def local(self, t: float | None) -> float | None:
        """A time read from Redis, on this process's clock (what every method returns)."""
        return t if t is None or not self.offset else t - self.offset

    def _sync_clock(self, first: bool = False) -> None:
        """Measure this process's clock against Redis's TIME; times sent to Redis are on
        Redis's clock (``now``), so every process of a namespace shares one clock for
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
        self.offset = offset

    # -- errors and housekeeping ------------------------------------------------------------

    def errors(self, what: str = "a call") -> RedisErrors:
        """A context that turns a Redis error during ``what`` into the frontier's error,
        and runs the housekeeping after a block Redis carried out."""
        if self._lost and what not in UNGUARDED_CALLS:
            self._refuse_while_lost(what)
        return RedisErrors(self.redis_url, self.namespace, what, self.lost, self._housekeeping)

    def _refuse_while_lost(self, what: str) -> None:
        """Raise NamespaceLost, having written nothing, while the namespace found lost still
        lacks its markers (reads only: the configuration's id and each shard's); a restore
        that brought them back lets calls through again. Before, each retry of a crawler's
        client wrote the due summary (lua/due.lua, sent after the shard scripts that Redis
        refused) and the token bucket into the emptied Redis (issue 63's soak)."""
        with RedisErrors(self.redis_url, self.namespace, what):
            marker = self.client.hget(self.keys.cfg, "id")
            if marker == self.namespace_id.encode():
                check_markers(self.client, self.scripts, self.keys, self.shards,
                              self.namespace_id, self.redis_url)
        if marker != self.namespace_id.encode():
            detail = ("its configuration is gone" if marker is None
                      else "it was created anew since this frontier opened")
            raise NamespaceLost(lost_message(self.redis_url, self.namespace, detail))
        self._lost = False

    def lost(self, error: NamespaceLost) -> NamespaceLost:
        """Say once, as an ERROR, that the namespace is gone (every later call raises too);
        when Redis evicted keys meanwhile, the error says so and every shard is marked
        damaged. The error to raise."""
        evicted = self._watch.check(force=True) if hasattr(self, "_watch") else None
        if evicted:
            self._mark_damaged()
            error = NamespaceLost(lost_message(self.redis_url, self.namespace, evicted))
        self._lost = bool(getattr(self, "namespace_id", ""))  # not while opening
        if not self._lost_logged:
            self._lost_logged = True
            logger.error("frontier-rate: %s", error)
        return error

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
                self.lost(NamespaceLost(lost_message(self.redis_url, self.namespace, evicted)))
        except Exception as exc:  # a check, not the call: the call already succeeded
            logger.debug("frontier-rate housekeeping failed: %r", exc)

    def _mark_damaged(self) -> None:
        """Mark every shard damaged (its marker "x-evicted"), so that no process runs on
        with half a namespace (lua/lib_pages.lua start) nor opens it (namespace.check_markers)."""
        try:
            pipe = self.client.pipeline(transaction=False)
            for shard in range(self.shards):
                pipe.hset(self.keys.cnt(shard), "id", "x-evicted")
            pipe.execute()
        except redis.RedisError as exc:
            logger.debug("could not mark namespace %r damaged: %s", self.namespace, exc)


class RedisErrors:
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
                "not cover its keys {} and {}".format(*Keys(self.namespace, 1).patterns)
            ) from None
        fault = translate(exc, self.url, f"{self.what} on namespace {self.namespace!r}",
                          namespace=self.namespace, applied=applied)
        if fault is None:
            return False
        if isinstance(fault, NamespaceLost) and self.on_lost is not None:
            fault = self.on_lost(fault)
        raise fault from None

"""A namespace's stored configuration: its creation, its marker, its shared settings.

``fr:{ns}:cfg`` holds what every process of a namespace must agree on:

- fixed when the namespace is created: ``shards``, ``buckets``, ``estimator``,
  ``objective``, ``cells`` (the policy cell layout) and ``id``, the namespace's
  *marker*: a random id also written into every shard's ``cnt`` hash. Each shard
  script compares its shard's marker with the id the process opened
  (lua/lib_pages.lua ``start``), so a namespace that was emptied (FLUSHDB, a restart
  without persistence), lost keys, or was created anew by another process is
  noticed by the next call of every process, before anything is written;
- the shared settings (``SETTINGS``): stored once. ``explicit`` lists those a
  process or the CLI asked for; the others hold the defaults of the process that
  created the namespace (an inspecting tool, ``frontier-rate import``), and the
  first process that asks for another value sets it, logged, for every process.
  A process asking for a value other than an explicit one gets
  ``SettingsMismatch`` unless it asks to override it (logged);
  ``change_settings`` (``frontier-rate settings``) changes them for every
  process. ``fr:{ns}:nu`` field ``settings`` counts the changes, and processes
  reload the settings when it moves;
- ``whole``: "1" once every shard carries the marker.

A namespace stored before markers and shared settings existed gets them on its
first open, from the values that process passes (no migration step); opened
read-only (a replica), it is used without the marker check.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass

import redis

from frontier_rate.store.errors import NamespaceLost, RedisRefused, SettingsMismatch, lost_message, translate
from frontier_rate.store.keys import Keys
from frontier_rate.store.scripts import Scripts

logger = logging.getLogger(__name__)

SETTINGS = ("budget", "min_host_delay", "lease_timeout", "min_interval", "max_interval",
            "prior_rate")
"""The settings every process of a namespace shares (stored in cfg)."""
FIXED = ("shards", "buckets", "estimator", "objective", "cells")
"""Fixed when the namespace is created."""
SETTING_NAMES = {"budget": "FRONTIER_RATE_BUDGET", "min_host_delay": "FRONTIER_RATE_MIN_HOST_DELAY",
                 "lease_timeout": "FRONTIER_RATE_LEASE_TIMEOUT",
                 "min_interval": "FRONTIER_RATE_MIN_INTERVAL",
                 "max_interval": "FRONTIER_RATE_MAX_INTERVAL",
                 "prior_rate": "FRONTIER_RATE_PRIOR_RATE"}
"""The adapters' setting of each shared setting (for messages)."""


@dataclass(frozen=True)
class Config:
    """What a process opened: the fixed fields, the marker id ("" when unchecked), the
    shared settings and the count of their changes (``version``)."""

    namespace_id: str
    shards: int
    buckets: int
    cells: str
    settings: dict[str, float]
    version: bytes | None


def new_id() -> str:
    """A fresh marker id: 16 decimal digits ("x..." marks a damaged namespace). A number,
    so that a process of an older version, which sums every field of ``cnt`` as a counter
    in ``stats()``, still reads a namespace this version marked."""
    return str(10**15 + secrets.randbelow(9 * 10**15))


def open_namespace(client: redis.Redis, scripts: Scripts, keys: Keys, *, url: str | None,
                   fixed: Mapping[str, str], requested: Mapping[str, float | None],
                   defaults: Mapping[str, float], override: bool = False) -> Config:
    """Open (or create) the namespace of ``keys``: check it is whole and that ``fixed``
    (estimator, objective) and the ``requested`` settings (None: the stored value)
    agree with what it stores. Raises ``NamespaceLost`` for a namespace that lost its
    data, ``SettingsMismatch`` for other values (unless ``override``: then they are
    stored for every process, with a WARNING)."""
    cfg = _read(client, keys)
    if not cfg:
        cfg = _create(client, scripts, keys, url, fixed, requested, defaults)
    cfg = _complete(client, keys, cfg, fixed, requested, defaults)
    namespace_id = cfg["id"]
    if namespace_id and cfg.get("whole") != "1":
        namespace_id = _mark_shards(client, scripts, keys, int(cfg["shards"]), namespace_id)
    if namespace_id:
        check_markers(client, scripts, keys, int(cfg["shards"]), namespace_id, url)
    for field in ("estimator", "objective"):
        if cfg[field] != fixed[field]:
            raise SettingsMismatch(f"namespace {keys.namespace!r} uses {field} {cfg[field]!r}, "
                                   f"not {fixed[field]!r} (a namespace keeps its {field})")
    settings, version = _agree(client, scripts, keys, cfg, requested, override)
    return Config(namespace_id, int(cfg["shards"]), int(cfg["buckets"]), cfg["cells"], settings,
                  version)


def _create(client: redis.Redis, scripts: Scripts, keys: Keys, url: str | None,
            fixed: Mapping[str, str], requested: Mapping[str, float | None],
            defaults: Mapping[str, float]) -> dict[str, str]:
    """Create the namespace's configuration (lua/config.lua "create": a process creating it
    at the same time keeps the first); the configuration stored."""
    refuse_half(client, keys, url, int(fixed["shards"]))
    values = dict(fixed)
    values["id"] = new_id()
    for setting in SETTINGS:
        values[setting] = repr(_value(requested, defaults, setting))
    values["explicit"] = ",".join(["", *(k for k in SETTINGS if requested.get(k) is not None),
                                   ""])
    flat = [x for pair in values.items() for x in pair]
    reply = scripts.run(lambda pipe: scripts.call(pipe, "config", [keys.cfg, keys.nu],
                                                  ["create", *flat]))[0]
    return {reply[i].decode(): reply[i + 1].decode() for i in range(0, len(reply), 2)}


def _complete(client: redis.Redis, keys: Keys, cfg: dict[str, str], fixed: Mapping[str, str],
              requested: Mapping[str, float | None], defaults: Mapping[str, float]
              ) -> dict[str, str]:
    """The configuration with the fields a namespace from before them lacks (this process's
    values; stored where Redis takes writes, else used unchecked: id "")."""
    missing = {field: value for field, value in fixed.items() if field not in cfg}
    legacy = None
    if "budget" not in cfg and requested.get("budget") is None:  # stored in nu before
        legacy = client.hget(keys.nu, "budget")
    for setting in SETTINGS:  # a namespace from before shared settings: this process's values
        if setting not in cfg:
            missing[setting] = repr(_value(requested, defaults, setting))
    if legacy is not None:
        missing["budget"] = repr(float(legacy))
    if "id" not in cfg:
        missing["id"] = new_id()
    if missing:
        cfg = _store_missing(client, keys, missing) or {**cfg, **missing, "id": ""}
    return cfg


def _agree(client: redis.Redis, scripts: Scripts, keys: Keys, cfg: dict[str, str],
           requested: Mapping[str, float | None], override: bool
           ) -> tuple[dict[str, float], bytes | None]:
    """The shared settings this process runs with, and their change count: the stored ones,
    where a process asks for another value of one that holds a default, its value for
    every process (logged); SettingsMismatch for another value of an explicit one unless
    ``override`` (then stored, with a WARNING)."""
    name = keys.namespace
    settings = _settings(cfg)
    version = client.hget(keys.nu, "settings")
    differ = _differ(requested, settings)
    if not differ:
        return settings, version
    explicit = cfg.get("explicit", ",")
    mode = "set" if override else "adopt"
    conflicts = {k: v for k, v in differ.items() if f",{k}," in explicit}
    if conflicts and not override:  # before writing anything
        raise mismatch(name, settings, conflicts)
    # override, or defaults another process stored: this one's, for everyone
    version, cfg = _write_settings(scripts, keys, mode, differ)
    changed = ", ".join(f"{k} {settings[k]!r} -> {cfg_value!r}" for k in differ
                        if (cfg_value := float(cfg[k])) != settings[k])
    if changed:
        logger.log(logging.WARNING if override else logging.INFO,
                   "namespace %r: %s its stored settings for every process of it: %s",
                   name, "overriding" if override else "setting", changed)
    settings = _settings(cfg)
    left = _differ(requested, settings)
    if left:
        raise mismatch(name, settings, left)
    return settings, version


def _settings(cfg: Mapping[str, str]) -> dict[str, float]:
    return {setting: float(cfg[setting]) for setting in SETTINGS}


def _differ(requested: Mapping[str, float | None], settings: Mapping[str, float]
            ) -> dict[str, float]:
    """The requested settings whose value is not the stored one."""
    return {setting: value for setting in SETTINGS
            if (value := requested.get(setting)) is not None and value != settings[setting]}


def _write_settings(scripts: Scripts, keys: Keys, mode: str, values: Mapping[str, float]
                    ) -> tuple[bytes, dict[str, str]]:
    """config.lua "set" or "adopt": (the change count, the configuration after)."""
    flat = [x for k, v in values.items() for x in (k, repr(float(v)))]
    count, reply = scripts.run(lambda pipe: scripts.call(pipe, "config", [keys.cfg, keys.nu],
                                                         [mode, *flat]))[0]
    cfg = {reply[i].decode(): reply[i + 1].decode() for i in range(0, len(reply), 2)}
    return (count if isinstance(count, bytes) else str(count).encode()), cfg


def mismatch(namespace: str, stored: Mapping[str, float], differ: Mapping[str, float]
             ) -> SettingsMismatch:
    """The error for ``differ``; ``stored`` and ``differ`` kept on it for adapters, which
    name their own settings."""
    error = SettingsMismatch(mismatch_message(namespace, stored, differ))
    error.namespace, error.stored, error.differ = namespace, dict(stored), dict(differ)  # type: ignore[attr-defined]
    return error


def mismatch_message(namespace: str, stored: Mapping[str, float], differ: Mapping[str, float]
                     ) -> str:
    """Which settings differ from the stored ones, and the ways out."""
    listed = "; ".join(f"{k}: stored {stored[k]!r}, asked {v!r} ({SETTING_NAMES[k]})"
                       for k, v in differ.items())
    options = " ".join(f"--{k.replace('_', '-')} {v!r}" for k, v in differ.items())
    return (f"namespace {namespace!r} stores other settings than this process asks for: {listed}. "
            "Every process of a namespace shares them: leave them out to use the stored ones, "
            f"change them for every process with 'frontier-rate settings -n {namespace} {options}', "
            "or open with override_settings=True")


def change_settings(scripts: Scripts, keys: Keys, values: Mapping[str, float]
                    ) -> tuple[bytes, dict[str, float]]:
    """Store shared settings for every process of the namespace: (the change count, the
    settings after)."""
    version, cfg = _write_settings(scripts, keys, "set", values)
    return version, _settings(cfg)


def read_settings(client: redis.Redis, keys: Keys) -> dict[str, float]:
    """The stored shared settings (those present)."""
    raw = client.hmget(keys.cfg, *SETTINGS)
    return {k: float(v) for k, v in zip(SETTINGS, raw, strict=True) if v is not None}


def check_markers(client: redis.Redis, scripts: Scripts, keys: Keys, shards: int,
                  namespace_id: str, url: str | None) -> None:
    """NamespaceLost unless every shard carries the marker ``namespace_id``."""
    found = scripts.run(lambda pipe: [pipe.hget(keys.cnt(s), "id")
                                      for s in range(shards)])
    for shard, marker in enumerate(found):
        if marker != namespace_id.encode():
            if marker is None:
                detail = f"its shard {shard} has lost its marker"
            elif marker.startswith(b"x"):
                detail = (f"its shard {shard} is marked damaged "
                          f"({marker[1:].decode().lstrip('-') or 'evicted'})")
            else:
                detail = f"its shard {shard} carries another marker than its configuration"
            raise NamespaceLost(lost_message(url, keys.namespace, detail))


def drop(client: redis.Redis, namespace: str) -> int:
    """Delete every key of ``namespace`` (SCAN for its two key patterns, never KEYS);
    the number of keys deleted. For a namespace that lost keys and cannot be opened."""
    deleted = 0
    for pattern in Keys(namespace, 1).patterns:
        batch: list[bytes] = []
        for key in client.scan_iter(match=pattern, count=1000):
            batch.append(key)
            if len(batch) >= 500:
                deleted += _unlink(client, batch)
                batch = []
        deleted += _unlink(client, batch)
    return deleted


def _unlink(client: redis.Redis, keys: list[bytes]) -> int:
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.delete(key)
    return sum(pipe.execute()) if keys else 0


def _value(requested: Mapping[str, float | None], defaults: Mapping[str, float],
           setting: str) -> float:
    value = requested.get(setting)
    return defaults[setting] if value is None else value


def _read(client: redis.Redis, keys: Keys) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in client.hgetall(keys.cfg).items()}


def refuse_half(client: redis.Redis, keys: Keys, url: str | None, shards: int) -> None:
    """NamespaceLost when shards of a namespace without configuration hold data: its
    cfg was evicted or deleted, and creating it anew would mix two namespaces.

    The configuration is read again after the shards: a creator writes it before it
    marks any shard, so shard data beside a configuration means another process
    created the namespace since this one looked (two crawlers starting at once), not
    a loss; the create script then returns what that process stored."""
    pipe = client.pipeline(transaction=False)
    for shard in range(shards):
        pipe.exists(keys.cnt(shard))
    if any(pipe.execute()) and not client.exists(keys.cfg):
        raise NamespaceLost(lost_message(url, keys.namespace,
                                         "its configuration (fr:{ns}:cfg) is gone but its shards "
                                         "hold data"))


def _store_missing(client: redis.Redis, keys: Keys, missing: Mapping[str, str]
                   ) -> dict[str, str] | None:
    """Store the fields a namespace from before them lacks (HSETNX: a process doing the
    same at once keeps the first values); None when Redis refuses the writes (a
    read-only replica, maxmemory): then the namespace is used as it is, unchecked."""
    try:
        pipe = client.pipeline(transaction=False)
        for field, value in missing.items():
            pipe.hsetnx(keys.cfg, field, value)
        pipe.execute()
    except redis.ResponseError as exc:
        fault = translate(exc, None, "completing the configuration")
        if isinstance(fault, RedisRefused):
            logger.debug("namespace %r used without its marker: %s", keys.namespace, fault)
            return None
        raise
    return _read(client, keys)


def _mark_shards(client: redis.Redis, scripts: Scripts, keys: Keys, shards: int,
                 namespace_id: str) -> str:
    """Write the marker into every shard (HSETNX: a shard marked already keeps its marker,
    and is checked), then record the namespace whole; the id to check ("" when Redis
    refuses the writes: read-only)."""
    try:
        scripts.run(lambda pipe: [pipe.hsetnx(keys.cnt(s), "id", namespace_id)
                                  for s in range(shards)])
        client.hset(keys.cfg, "whole", "1")
    except redis.ResponseError as exc:
        fault = translate(exc, None, "marking the shards")
        if isinstance(fault, RedisRefused):
            logger.debug("namespace %r used without its marker: %s", keys.namespace, fault)
            return ""
        raise
    return namespace_id


def origin_key(namespace: str) -> str:
    """The hash that says which project and spider created ``namespace`` (``Keys.origin``)."""
    return Keys(namespace, 1).origin


@dataclass(frozen=True)
class Origin:
    """Who created a namespace: ``project``, and ``folder`` for a crawl whose project is a
    script's stem (None where not recorded); ``created``: by this call."""

    created: bool
    project: str
    folder: str | None


def claim_origin(client: redis.Redis, namespace: str, project: str, spider: str,
                 folder: str | None) -> Origin:
    """Record (once) who created ``namespace`` in ``Keys.origin`` (plain strings), the
    ``folder`` also into a namespace recorded without one; what is recorded. Raises what
    Redis raises."""
    key = Keys(namespace, 1).origin
    created = bool(client.hsetnx(key, "project", project))
    if created:
        client.hset(key, mapping={"spider": spider, "created": f"{time.time():.0f}"})
    if folder is not None:
        client.hsetnx(key, "folder", folder)
    owner, where = client.hmget(key, "project", "folder")
    return Origin(created, _text(owner) or "", _text(where))


def namespace_exists(client: redis.Redis, namespace: str) -> bool:
    """Whether ``namespace`` has a stored configuration."""
    return bool(client.exists(Keys(namespace, 1).cfg))


def _text(value: bytes | str | None) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)

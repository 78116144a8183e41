"""Input validation: every value a caller hands the engine is checked here first.

Each check raises ``ValueError`` naming the argument and the value, before anything is
sent to Redis, so a bad call changes nothing. Values read back from Redis that a
crawler would send on (a stored URL, validators) are checked here too.
"""

from __future__ import annotations

import json
import logging
import math
import numbers
import random
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from frontier_rate.engine.records import Lease
from frontier_rate.math.evidence import check_source
from frontier_rate.math.index import MIN_CHANGE_CHANCE, OBJECTIVES
from frontier_rate.store.keys import NAMESPACE_RE, float32

logger = logging.getLogger(__name__)

ENGINE_ESTIMATORS = ("lln", "sa", "sam", "interval")
OFFLINE_ESTIMATORS = {"naive": "biased (it converges to pΔ/(Δ+p), seed 004 §3.4)",
                      "mle": "offline (O(k) per update)", "mm": "offline (O(k) per update)"}
POLICIES = ("whittle", "lagrangian")
MAX_URL_LENGTH = 2048
MAX_VALIDATOR_LENGTH = 1024
MIN_BUDGET = 1e-6
"""Smallest budget (fetches per second over all hosts) a frontier accepts."""
MAX_PRIORITY = 1000
"""Priorities beyond +-MAX_PRIORITY order as +-MAX_PRIORITY (a first due time moves at most
a second: intake.PRIORITY_STEP)."""
MAX_WEIGHT = 1e30
_META_JSON = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
"""One encoder for every page's meta: ``json.dumps`` with options builds a new one per call
(~3x the cost of encoding a small dict)."""


def real(field: str, value: Any, *, minimum: float | None = None, strict: bool = False,
         allow_inf: bool = False) -> float:
    """``value`` as a float: a real number (not a bool), finite unless ``allow_inf``, and at
    least (``strict``: above) ``minimum``; ValueError naming ``field`` otherwise."""
    if type(value) is not float and (isinstance(value, bool)
                                     or not isinstance(value, numbers.Real)):
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


def checked_settings(values: Mapping[str, Any]) -> dict[str, float | None]:
    """The shared settings given (None: not given), each checked on its own."""
    out: dict[str, float | None] = {}
    for name, value in values.items():
        if value is None:
            out[name] = None
        elif name == "min_host_delay":
            out[name] = real(name, value, minimum=0.0)
        else:
            out[name] = real(name, value, minimum=0.0, strict=True)
        if name == "budget" and out[name] is not None and out[name] < MIN_BUDGET:
            raise ValueError(f"budget is fetches per second over all hosts, at least "
                             f"{MIN_BUDGET:g} (one fetch in {1 / MIN_BUDGET / 86400:.1f} days); "
                             f"got {value!r}")
    if out.get("min_interval") is not None and out.get("max_interval") is not None \
            and out["max_interval"] < out["min_interval"]:
        raise ValueError(f"max_interval must be >= {out['min_interval']:g}, got "
                         f"{out['max_interval']!r}")
    return out


@dataclass(frozen=True)
class Options:
    """A process's own options (the shared settings are the namespace's: ``checked_settings``)."""

    namespace: str
    estimator: str
    policy: str
    objective: str
    clock: Callable[[], float]
    rng: random.Random
    fill_budget: bool
    change_dates: bool
    server_clock_rate: float
    budget_first_fetches: bool
    cochange: bool = False
    group_prior: bool = False
    min_change_chance: float = MIN_CHANGE_CHANCE


def check_options(*, namespace: str, estimator: str, policy: str, objective: str,
                  budget: float | None, min_host_delay: float | None,
                  min_interval: float | None, max_interval: float | None,
                  lease_timeout: float | None, clock: Callable[[], float],
                  seed: int | None, prior_rate: float | None, fill_budget: bool | None,
                  change_dates: bool, server_clock_rate: float,
                  budget_first_fetches: bool, override_settings: bool = False,
                  clock_sync: bool | None = None, cochange: bool = False,
                  group_prior: bool = False, min_change_chance: float = MIN_CHANGE_CHANCE
                  ) -> tuple[Options, dict[str, float | None]]:
    """Check ``Frontier``'s options (ValueError naming the first bad one): the process's own
    ``Options`` and the shared settings asked for (None: the namespace's)."""
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
    requested = checked_settings({"budget": budget, "min_host_delay": min_host_delay,
                                  "min_interval": min_interval, "max_interval": max_interval,
                                  "lease_timeout": lease_timeout, "prior_rate": prior_rate})
    if not callable(clock):
        raise ValueError(f"clock must be callable, got {clock!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"seed must be an int or None, got {seed!r}")
    options = Options(
        namespace=namespace, estimator=estimator, policy=policy, objective=objective,
        clock=clock, rng=random.Random(seed),
        fill_budget=estimator == "interval" if fill_budget is None else bool(fill_budget),
        change_dates=bool(change_dates),
        server_clock_rate=real("server_clock_rate", server_clock_rate, minimum=0.0, strict=True),
        budget_first_fetches=bool(budget_first_fetches), cochange=bool(cochange),
        group_prior=bool(group_prior), min_change_chance=change_chance(min_change_chance))
    return options, requested


def change_chance(value: Any) -> float:
    """``min_change_chance``: a probability in [0, 1) (0: a budget is spent whatever the pages
    are worth, issue 60); ValueError naming the value otherwise."""
    chance = real("min_change_chance", value, minimum=0.0)
    if chance >= 1.0:
        raise ValueError(f"min_change_chance must be below 1 (a chance), got {value!r}")
    return chance


def namespace_name(namespace: Any) -> str:
    """A namespace name (1-64 characters of A-Z a-z 0-9 _ . -); ValueError otherwise."""
    if not isinstance(namespace, str) or not NAMESPACE_RE.match(namespace):
        raise ValueError(f"namespace must be 1-64 characters of A-Z a-z 0-9 _ . -, got {namespace!r}")
    return namespace


def count(field: str, value: Any, *, minimum: int) -> int:
    """An int (not a bool) of at least ``minimum``; ValueError naming ``field`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        kind = "non-negative int" if minimum == 0 else "positive integer"
        raise ValueError(f"{field} must be a {kind}, got {value!r}")
    return value


def lease(value: Any) -> Lease:
    """``value`` if it is a ``Lease``; ValueError otherwise."""
    if not isinstance(value, Lease):
        raise ValueError(f"lease must be a Lease, got {type(value).__name__}")
    return value


def token(value: Lease) -> str:
    """A lease's token (the lease number next_requests gave); ValueError otherwise."""
    token = value.token
    if not isinstance(token, str) or not token.isdigit() or len(token) > 10:
        raise ValueError(f"lease token must be the lease number from next_requests, "
                         f"got {token!r}")
    return token


def host_name(host: Any) -> str:
    """A host name as ``set_host_delay`` takes it (lower case); ValueError otherwise."""
    if not isinstance(host, str) or not host or len(host) > 253:
        raise ValueError(f"host must be a non-empty host name, got {host!r}")
    return host.lower()


CheckedPage = tuple[str, str, float, str, float, bool]
"""A ``NewPage`` after its checks: (host, url, weight as float32, meta JSON or "", priority,
source)."""


def new_page(item: Any) -> CheckedPage:
    """A page given to ``add_many`` as ``url`` or ``(url, weight[, meta[, priority[, source]]])``,
    checked; the weight rounded to the float32 the page state stores."""
    if isinstance(item, str):
        item = (item,)
    elif type(item) is not tuple:  # a tuple, the adapters' form, skips the ABC check
        if isinstance(item, (bytes, bytearray)) or not isinstance(item, Iterable):
            raise ValueError(f"url must be a string, got {type(item).__name__}")
        item = tuple(item)
    if not 1 <= len(item) <= 5:
        raise ValueError(f"a page is url or (url, weight[, meta[, priority[, source]]]), got {item!r}")
    url = item[0]
    weight = item[1] if len(item) > 1 else 1.0
    meta = item[2] if len(item) > 2 else None
    priority = item[3] if len(item) > 3 else 0
    source = item[4] if len(item) > 4 else False
    if not isinstance(source, bool):
        raise ValueError(f"source of {url!r} must be True or False, got {source!r}")
    host = parse_url(url)
    # The common values pass without building the field names (the URL's repr) for errors.
    if type(weight) is not float or not 0.0 <= weight <= MAX_WEIGHT:
        weight = real(f"weight of {url!r}", weight, minimum=0.0)
        if weight > MAX_WEIGHT:
            raise ValueError(f"weight of {url!r} must be <= 1e30, got {weight!r}")
    if type(priority) is int and -MAX_PRIORITY <= priority <= MAX_PRIORITY:
        priority = float(priority)
    else:
        priority = max(-MAX_PRIORITY, min(MAX_PRIORITY, real(f"priority of {url!r}", priority)))
    return host, url, float32(weight), meta_json(url, meta), priority, source


def hint(item: Any) -> tuple[str, str, float | None, str]:
    """A claim given to ``signal_many`` as ``(url, changed_at or None, source)``, checked:
    (url, host, changed_at, source); ValueError naming what is wrong."""
    if isinstance(item, (str, bytes)) or not isinstance(item, Iterable):
        raise ValueError(f"a hint is (url, changed_at or None, source), got {item!r}")
    item = tuple(item)
    if len(item) != 3:
        raise ValueError(f"a hint is (url, changed_at or None, source), got {item!r}")
    url, changed_at, source = item
    host = parse_url(url)
    check_source(source)
    if changed_at is not None:
        changed_at = real(f"changed_at of {url!r}", changed_at)
    return url, host, changed_at, source


def meta_json(url: str, meta: Any) -> str:
    """A page's meta as compact JSON ("" for None); ValueError unless a JSON-serialisable dict."""
    if meta is None:
        return ""
    if type(meta) is not dict and not isinstance(meta, Mapping):
        raise ValueError(f"meta of {url!r} must be a dict, got {type(meta).__name__}")
    try:
        return _META_JSON.encode(meta)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"meta of {url!r} is not JSON-serialisable: {exc}") from None


def observe_status(status: Any) -> int:
    """An HTTP status code (100-599); ValueError otherwise."""
    if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
        raise ValueError(f"status must be an HTTP status code, got {status!r}")
    return status


def fingerprint(url: str, fingerprint: Any, not_modified: bool) -> str | bytes | None:
    """An observation's fingerprint: str or bytes, and required unless ``not_modified``."""
    if fingerprint is None and not not_modified:
        raise ValueError(f"observe of {url!r} needs fingerprint= or not_modified=True")
    if fingerprint is not None and not isinstance(fingerprint, (str, bytes)):
        raise ValueError(f"fingerprint must be str or bytes, got {type(fingerprint).__name__}")
    return fingerprint


HEADER_SAFE = re.compile(r"[ -~]*")
"""Printable ASCII: what a validator may hold to be sent back in a request header."""


def validator(field: str, value: str | None) -> bytes | None:
    """An ETag / Last-Modified to store, or None to store nothing (over-long, or holding
    control characters (CR, LF, NUL, ...) or non-ASCII: it could never be sent back
    safely in a conditional request header)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a string or None, got {type(value).__name__}")
    if not HEADER_SAFE.fullmatch(value):
        logger.debug("ignoring a %s with control or non-ASCII characters: %r", field, value[:100])
        return None
    data = value.encode("ascii")
    if len(data) > MAX_VALIDATOR_LENGTH:
        logger.debug("ignoring an over-long %s (%d bytes)", field, len(data))
        return None
    return data


def stored_url(raw: bytes | None) -> tuple[str, str]:
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


def stored_validator(field: str, raw: bytes) -> str | None:
    """A validator read from Redis, to send back: None when empty or not printable ASCII."""
    text = raw.decode("utf-8", "replace")
    if not text:
        return None
    if not HEADER_SAFE.fullmatch(text):
        logger.debug("not sending a stored %s with control or non-ASCII characters", field)
        return None
    return text


def stored_meta(raw: bytes) -> dict | None:
    """A page's meta read from Redis; ValueError (the reason to quarantine it) unless a
    JSON object."""
    try:
        meta = json.loads(raw.decode("utf-8")) if raw else None
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"meta is not valid JSON ({type(exc).__name__})") from None
    if meta is not None and not isinstance(meta, dict):
        raise ValueError(f"meta is not a JSON object ({type(meta).__name__})")
    return meta

"""The wire format between Python and the Lua scripts: everything that crosses, in one place.

A shard script (lua/lib.lua, lua/signals.lua for ``store.scripting.SIGNAL_SCRIPTS``, then
lua/<name>.lua: ``store.Scripts``) gets the five shard keys in KEYS
(``store.Keys.shard_keys``) and everything else in ARGV, never code:

- ARGV[1 .. len(HEADER)]: the *header*, the same fields for every shard script, built by
  ``Header`` from named values whose names are the ones lib.lua's ``header()`` reads;
- then the script's own arguments, packed by the function named after it here
  (``add_args``, ``candidates_args``, ``lease_args``, ``observation``, ``fail_args``,
  ``hint_args``, ...).

Replies come back as Lua tables of strings and numbers or, where they are many, as one
binary string of ``struct`` records, decoded here (``candidates``, ``leases``,
``observe_replies``, ``hint_outcomes``, ``signal_events``). The stored values scripts and
Python both read (the page state, its extras, quarantine records, host records and host
cells, the trust tallies of claims' sources) are packed and unpacked here with the same
layouts as lib.lua's and signals.lua's. Nothing crosses as pickles or code.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from frontier_rate.store import contract

# --------------------------------------------------------------------------- the header

HEADER = contract.HEADER
"""The header's fields, in the order lua/lib.lua reads them from ARGV into its table ``C``
(same names on both sides; tests/test_store.py checks the two lists agree)."""
SET_FIELDS = HEADER[1:-1]
"""The fields a process sets (``Header.update``): all but ``now`` (given per call) and
``digest`` (made from these by ``header_digest``)."""

ETA, BETA, OMEGA = 0.75, 0.6, 1.0
"""The SA / SAM step exponents and momentum weight (seed 004 eq. 2, 3, 10; estimators)."""
INTERVAL_PRIOR_INFO, INTERVAL_MAX_STEP = 0.3, 1.0
"""The interval estimator's prior weight and step clip (estimators.Interval defaults)."""


def _text(value: Any) -> str:
    """A header value as ARGV text: floats by repr (exact), ints and strings as they are."""
    if isinstance(value, float):
        return repr(value)
    return str(value)


class Header:
    """The header of this process's shard script calls, rebuilt only when a field changes.

    ``update(**fields)`` sets fields by name (every field of ``HEADER`` but ``now`` and
    ``digest`` must be set before the first ``args``); ``args(now)`` is ARGV[1 .. len(HEADER)]
    of one call, its ``digest`` computed from the others (``header_digest``).
    """

    def __init__(self) -> None:
        self._fields: dict[str, str] = {}
        self._rest: list[str] | None = None

    def update(self, **fields: Any) -> None:
        """Set header fields by their names (ValueError for a name lib.lua does not read)."""
        unknown = set(fields) - set(SET_FIELDS)
        if unknown:
            raise ValueError(f"not header fields: {sorted(unknown)}")
        self._fields.update((name, _text(value)) for name, value in fields.items())
        self._rest = None

    def args(self, now: float) -> list[str]:
        """The header of one script call at ``now`` (Redis's clock)."""
        if self._rest is None:
            missing = [name for name in SET_FIELDS if name not in self._fields]
            if missing:
                raise ValueError(f"header fields not set: {missing}")
            rest = [self._fields[name] for name in SET_FIELDS]
            self._rest = [*rest, header_digest(rest)]
        return [repr(float(now)), *self._rest]


def header_digest(rest: list[str]) -> str:
    """The header's last field: a digest of the values of fields 2 .. H-1, each with its
    length, so that two different headers never share a digest (short of a SHA-1
    collision). lua/lib.lua compares only this field to reuse the last parsed header."""
    text = "".join(f"{len(value)}:{value}" for value in rest)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- times

def us(t: float) -> str:
    """A time as whole microseconds, rounded as lua/lib.lua ``us`` does."""
    return str(math.floor(t * 1e6 + 0.5))


# --------------------------------------------------------------------------- page state

STATE = struct.Struct(contract.STRUCTS["STATE"])
"""Packed page state (48 bytes); the same layout as ``STATE`` in lua/lib.lua."""
STATE_INTERVAL = struct.Struct(contract.STRUCTS["STATE_INTERVAL"])
"""The state of ``interval`` namespaces: two more doubles (64 bytes)."""
F_LEASED, F_GONE, F_CHANGED, F_APPLIED, F_SOURCE, F_UNSETTLED = (
    contract.FLAGS[name] for name in ("F_LEASED", "F_GONE", "F_CHANGED", "F_APPLIED", "F_SOURCE",
                                      "F_UNSETTLED"))
"""State flags (lua/lib.lua)."""


def _number_problem(name: str, x: float, non_negative: bool) -> str | None:
    if not math.isfinite(x):
        return f"{name} is not a finite number"
    if non_negative and x < 0:
        return f"{name} is negative"
    return None


def unpack_state(raw: bytes, estimator: str | None = None) -> dict[str, Any]:
    """A packed page state as a dict (field names as in lua/lib.lua).

    Raises ValueError naming the problem for a value no engine would write,
    with the same checks, in the same order and the same words as ``validate``
    in lua/lib.lua (so both sides quarantine the same states): the length
    (48 bytes, 64 for ``interval``; either when ``estimator`` is None), a
    non-finite or negative weight, p, estimate or sum, ``p`` of 0 after a
    fetch, more changes than fetches, flags outside the five defined bits.
    ``estimate`` must be >= 0 where it is a rate (lln, sa; sam's iterate may
    dip below 0 and interval stores a log-rate); ``aux`` where it is a sum
    (lln, interval).
    """
    if not isinstance(raw, (bytes, bytearray)):
        raise ValueError(f"state must be bytes, got {type(raw).__name__}")
    if estimator is None:
        sizes = (STATE.size, STATE_INTERVAL.size)
    else:
        sizes = (STATE_INTERVAL.size,) if estimator == "interval" else (STATE.size,)
    if len(raw) not in sizes:
        raise ValueError(f"state is {len(raw)} bytes, expected {' or '.join(map(str, sizes))}")
    interval = len(raw) == STATE_INTERVAL.size
    if interval:
        *fields, x1, x2 = STATE_INTERVAL.unpack(raw)
    else:
        fields, x1, x2 = STATE.unpack(raw), 0.0, 0.0
    weight, est, aux, p, last_fetch, fetches, changes, leases, fp, flags, fails = fields
    rate_est = estimator in ("lln", "sa")
    sum_aux = estimator == "lln" or interval
    problem = (_number_problem("weight", weight, True)
               or _number_problem("estimate", est, rate_est)
               or _number_problem("aux", aux, sum_aux)
               or _number_problem("p", p, True)
               or _number_problem("last_fetch", last_fetch, False))
    if not problem and interval:
        problem = _number_problem("x1", x1, True) or _number_problem("x2", x2, True)
    if problem:
        raise ValueError(problem)
    if fetches > 0 and p <= 0:
        raise ValueError("p is not positive after a fetch")
    if changes > fetches:
        raise ValueError("changes exceed fetches")
    if flags >= contract.FLAGS_END:
        raise ValueError(f"flags {flags} out of range")
    return {"weight": weight, "est": est, "aux": aux, "p": p, "last_fetch": last_fetch,
            "fetches": fetches, "changes": changes, "leases": leases, "fp": fp,
            "flags": flags, "fails": fails % 16, "notfound": fails // 16, "x1": x1, "x2": x2}


def pack_state(state: dict[str, Any], interval: bool = False) -> bytes:
    """The packed form of an ``unpack_state`` dict (for tests and repair tools)."""
    fails = min(state["fails"], 15) + 16 * min(state["notfound"], 15)
    fields = (state["weight"], state["est"], state["aux"], state["p"], state["last_fetch"],
              state["fetches"], state["changes"], state["leases"], state["fp"], state["flags"],
              fails)
    if interval:
        return STATE_INTERVAL.pack(*fields, state["x1"], state["x2"])
    return STATE.pack(*fields)


def initial_state(estimator: str, prior_rate: float) -> tuple[float, float]:
    """(est, aux) of a new page, as the Python estimators start (x0 = prior_rate)."""
    if estimator == "sam":
        return prior_rate, prior_rate
    if estimator == "interval":
        return math.log(prior_rate), 0.0
    return prior_rate, 0.0


def reported_rate(estimator: str, est: float) -> float:
    """The change rate a state's ``est`` stands for (lua/lib_policy.lua ``reported``)."""
    if estimator == "interval":
        return math.exp(est)
    if estimator == "sam":
        return max(est, 0.0)
    return est


# --------------------------------------------------------------------------- other stored values

def unpack_extras(raw: bytes | None) -> tuple[str | None, str | None, str | None]:
    """(etag, last_modified, meta JSON) from an extras value; None for absent parts.

    ValueError for a malformed value (too short, lengths past its end, meta
    not UTF-8); lua/lib.lua's xget checks the same.
    """
    if not raw:
        return None, None, None
    if len(raw) < 4:
        raise ValueError(f"extras are malformed ({len(raw)} bytes)")
    le, ll = struct.unpack_from(contract.STRUCTS["LENGTHS"], raw)
    if 4 + le + ll > len(raw):
        raise ValueError("extras are malformed (lengths past the end)")
    etag = raw[4:4 + le].decode("utf-8", "replace") or None
    lm = raw[4 + le:4 + le + ll].decode("utf-8", "replace") or None
    try:
        meta = raw[4 + le + ll:].decode("utf-8") or None
    except UnicodeDecodeError:
        raise ValueError("meta is not UTF-8") from None
    return etag, lm, meta


def unpack_quarantine(record: bytes) -> tuple[str, str, bytes]:
    """(host, reason, raw corrupt value) of a quarantine record (lua/lib_pages.lua, quarantine)."""
    if len(record) < 4:
        raise ValueError(f"quarantine record is malformed ({len(record)} bytes)")
    lh, lr = struct.unpack_from(contract.STRUCTS["LENGTHS"], record)
    if 4 + lh + lr > len(record):
        raise ValueError("quarantine record is malformed (lengths past the end)")
    host = record[4:4 + lh].decode("utf-8", "replace")
    reason = record[4 + lh:4 + lh + lr].decode("utf-8", "replace")
    return host, reason, bytes(record[4 + lh + lr:])


def quarantine_reason(record: bytes) -> str:
    """The reason of a quarantine record (or what is wrong with the record)."""
    try:
        return unpack_quarantine(record)[1]
    except ValueError as exc:
        return str(exc)


HOST_RECORD = struct.Struct(contract.STRUCTS["HOST_RECORD"])
"""A host's record in fr:{ns:s}:hosts (lua/lib_hosts.lua host_get): next dispatch, own delay
(negative: the namespace's ``min_host_delay``)."""
HOST_AGG = struct.Struct(contract.STRUCTS["HOST_AGG"])
"""One cell of one host in fr:{ns:s}:ha (lua/lib.lua HOST_AGG): pages, Σλ, Σw."""


def host_delay(packed: bytes | None, default: float) -> float:
    """A host's delay from its record; ``default`` for none, a malformed one or its own
    delay unset."""
    if packed is not None and len(packed) == HOST_RECORD.size:
        stored = HOST_RECORD.unpack(packed)[1]
        if math.isfinite(stored) and stored >= 0:
            return stored
    return default


# --------------------------------------------------------------------------- script arguments

ADD_FIELDS = 7
"""Arguments per page of lua/add.lua: id, host, url, weight, meta, first due time, source."""


def add_args(est0: float, aux0: float, pages: list[str]) -> list[str]:
    """lua/add.lua: a new page's (est, aux), then ``ADD_FIELDS`` per page (``add_page``)."""
    return [repr(est0), repr(aux0), *pages]


def add_page(pid: bytes, host: str, url: str, weight: float, meta: str, due: float,
             source: bool = False) -> list:
    """One page's arguments of lua/add.lua (``source``: a sitemap or feed, ``F_SOURCE``)."""
    return [pid, host, url, repr(weight), meta, repr(due), "1" if source else "0"]


def candidates_args(window: int, look: int, early: bool, value_first_reads: bool
                    ) -> list[str]:
    """lua/candidates.lua: candidates to offer at most, pages looked at per host, whether
    they are pages not due yet (``fill_budget``), and whether a source's first read is
    valued against the threshold (``budget_first_fetches``)."""
    return [str(window), str(look), "1" if early else "0", "1" if value_first_reads else "0"]


def lease_args(early: bool, chosen: list) -> list:
    """lua/lease.lua: may pages not due yet be leased, then pairs host, page id."""
    return ["1" if early else "0", *chosen]


def fail_args(pid: bytes, host: str, token: str, not_found: bool, backoff_base: float,
              gone_after: int) -> list:
    """lua/fail.lua: the page, its lease token, a 404/410, the backoff and 'gone' rules."""
    return [pid, host, token, "1" if not_found else "0", repr(backoff_base), str(gone_after)]


def release_args(pid: bytes, host: str, token: str, due: float) -> list:
    """One lease's arguments of lua/release.lua: the page, its token, its old due time."""
    return [pid, host, token, repr(due)]


def unsettle_args(pid: bytes, host: str, token: str) -> list:
    """One lease's arguments of lua/unsettle.lua or lua/settle.lua: the page and its token."""
    return [pid, host, token]


def quarantine_args(pid: bytes, host: str, token: str, reason: str, drop_extras: bool) -> list:
    """lua/quarantine.lua: a leased page the crawler could not read, and why."""
    return [pid, host, token, reason, "1" if drop_extras else "0"]


def host_delay_args(host: str, delay: float | None) -> list[str]:
    """lua/host_delay.lua: a host and its delay (None: back to ``min_host_delay``)."""
    return [host, repr(-1.0 if delay is None else delay)]


def take_tokens_args(now: float, rate: float, burst: float, want: int, give_back: int
                     ) -> list[str]:
    """lua/take_tokens.lua (no header): the shared token bucket."""
    return [repr(now), repr(rate), repr(burst), str(want), str(give_back)]


def due_lower_args(times: Mapping[int, float]) -> list[str]:
    """lua/due.lua "lower" (no header): shards that may have work due at these times."""
    args = ["lower"]
    for shard, t in times.items():
        args += [str(shard), us(t)]
    return args


def due_set_args(found: Mapping[int, tuple[bytes, bytes]]) -> list:
    """lua/due.lua "set": what shard scripts found (earliest time, summary version read)."""
    return ["set"] + [x for shard, (t, v) in found.items() for x in (str(shard), t, v)]


def has_work(summary: bytes | None, now_us: int) -> bool:
    """Whether a shard whose due summary field is ``summary`` may have work at ``now_us``
    (an absent or unreadable field: it may)."""
    if summary is None:
        return True
    try:
        return float(summary) <= now_us
    except ValueError:
        return True


# --------------------------------------------------------------------------- observations

OBSERVATION = struct.Struct(contract.STRUCTS["OBSERVATION"])
"""One packed fetch result for lua/observe.lua (host, etag, last_modified follow)."""
NOT_MODIFIED, FINGERPRINT, ETAG, LAST_MODIFIED, CHANGED_AT = 1, 2, 4, 8, 16
"""The bits of an observation: which of its parts are given."""
CLAIM_DATES = 32
"""Observation bit: a claim of a trusted source (a sitemap's lastmod, lua/signals.lua) that
this fetch confirmed may date the change (``change_dates``)."""
SETTLE_LATER = 64
"""Observation bit: the new copy counts as processed only once ``settle_many`` says so (until
then the page is ``F_UNSETTLED``: lua/observe.lua, lua/settle.lua)."""


def observation(pid: bytes, token: int, now: float, host: bytes, not_modified: bool,
                fp: bytes, etag: bytes | None, lm: bytes | None, changed_at: float | None,
                u: float, claim_dates: bool = False, settle_later: bool = False) -> bytes:
    """One argument of lua/observe.lua: a fetch result packed (``OBSERVATION``)."""
    bits = (NOT_MODIFIED if not_modified else 0) | (FINGERPRINT if fp else 0) \
        | (ETAG if etag is not None else 0) | (LAST_MODIFIED if lm is not None else 0) \
        | (CHANGED_AT if changed_at is not None else 0) | (CLAIM_DATES if claim_dates else 0) \
        | (SETTLE_LATER if settle_later else 0)
    return OBSERVATION.pack(pid, token, now, bits, u, fp or b"\0\0\0\0", len(host),
                            len(etag or b""), len(lm or b""),
                            math.nan if changed_at is None else changed_at) \
        + host + (etag or b"") + (lm or b"")


OBSERVE_REPLY = struct.Struct(contract.STRUCTS["OBSERVE_REPLY"])
"""One observation's reply of lua/observe.lua: status, changed, estimate, next due, date bits,
length of the reason (which follows)."""
OK, REPLAY, STALE, MISSING, QUARANTINED = range(5)
"""Observation statuses of lua/observe.lua."""
DATE_USED, DATES_IGNORED, DATES_TRUSTED, DATE_CLAIMED = 1, 2, 4, 8
"""Date bits of an observe reply (lua/observe.lua); DATE_CLAIMED: the change time came from a
claim (sitemap, feed, push), not from the answer's Last-Modified."""
DATE_TRUST = contract.DATE_TRUST
"""A host's change dates are ignored while more than 1 in this many disagreed with the
content (DATE_TRUST in lua/observe.lua)."""


def observe_replies(reply: list) -> tuple[bytes, list]:
    """(the packed observation replies, the flat trust changes for ``signal_events``) of one
    observe.lua call."""
    packed, events = reply
    return packed, events


def observe_reply(packed: bytes, at: int) -> tuple[tuple[int, int, float, float, int, bytes], int]:
    """(status, changed, estimate, next due, date bits, reason) of the reply at ``at`` in an
    observe.lua reply, and where the next starts."""
    status, changed, estimate, due, date_bits, length = OBSERVE_REPLY.unpack_from(packed, at)
    at += OBSERVE_REPLY.size + length
    return (status, changed, estimate, due, date_bits, packed[at - length:at]), at


# --------------------------------------------------------------------------- candidates and leases

CANDIDATE = struct.Struct(contract.STRUCTS["CANDIDATE"])
"""A packed candidate of lua/candidates.lua: index, length of the host (id and host follow)."""
LEASE = struct.Struct(contract.STRUCTS["LEASE"])
"""A packed lease of lua/lease.lua: due, token, first fetch (0/1), lengths of host, url,
etag, last_modified, meta (the 8-byte id and those strings follow)."""


def candidates(packed: bytes) -> Iterator[tuple[float, bytes, bytes]]:
    """(index, host, page id) of each candidate in a candidates.lua reply."""
    size = CANDIDATE.size
    at = 0
    while at < len(packed):
        index, host_length = CANDIDATE.unpack_from(packed, at)
        at += size + 8 + host_length
        yield index, packed[at - host_length:at], packed[at - 8 - host_length:at - host_length]


def leases(packed: bytes) -> Iterator[tuple[bytes, tuple]]:
    """(page id, (host, url, token, etag, last_modified, meta, due, first)) of each packed
    lease."""
    at, size = 0, LEASE.size
    while at < len(packed):
        due, token, first, *lengths = LEASE.unpack_from(packed, at)
        at += size
        pid = packed[at:at + 8]
        at += 8
        parts = []
        for length in lengths:
            parts.append(packed[at:at + length])
            at += length
        host, url, etag, lm, meta = parts
        yield pid, (host, url, str(token), etag, lm, meta, due, first == 1)


def quarantined(flat: list) -> Iterable[tuple[str, str]]:
    """(url, reason) of each page a script quarantined (its QUARANTINED reply: flat pairs)."""
    for i in range(0, len(flat), 2):
        yield (flat[i].decode("utf-8", "replace") or "(URL missing)",
               flat[i + 1].decode("utf-8", "replace"))


# --------------------------------------------------------------------------- claims (hints)

HINT_FIELDS = 4
"""Arguments per claim of lua/hint.lua: page id, host, claimed last change time, source."""
SIGNAL_TALLY = struct.Struct(contract.STRUCTS["SIGNAL_TALLY"])
"""A (host, source) pair's record in fr:{ns:s}:st (lua/signals.lua): claims checked, claims
that fetches contradicted."""


def hint_args(pid: bytes, host: str, changed_at: float | None, source: str) -> list:
    """One claim's arguments of lua/hint.lua; ``changed_at`` on Redis's clock, None for
    "changed, time unknown" (the script takes its own now)."""
    return [pid, host, "" if changed_at is None else repr(changed_at), source]


def hint_outcomes(reply: list) -> tuple[list[int], list]:
    """(the outcome of each claim, ``evidence.OUTCOMES`` indices; the flat trust changes for
    ``signal_events``) of one hint.lua call."""
    packed, events = reply
    return list(packed), events


def signal_events(flat: list) -> Iterator[tuple[str, str, int]]:
    """(host, source, transition: ``evidence.BECAME_IGNORED`` or ``BECAME_TRUSTED``) of each
    trust change a script reported (lua/signals.lua SIGNAL_EVENTS: flat triples)."""
    for i in range(0, len(flat) - 2, 3):
        yield (flat[i].decode("utf-8", "replace"), flat[i + 1].decode("utf-8", "replace"),
               int(flat[i + 2]))


def signal_trust_field(host: str, source: str) -> str:
    """The field of (host, source) in fr:{ns:s}:st."""
    return f"{host}|{source}"


def signal_tally(raw: bytes | None) -> tuple[float, float]:
    """(checked, bad) of a stored ``SIGNAL_TALLY``; (0, 0) for none or a malformed one (as
    lua/signals.lua reads it)."""
    if raw is None or len(raw) != SIGNAL_TALLY.size:
        return 0.0, 0.0
    checked, bad = SIGNAL_TALLY.unpack(raw)
    if not 0 <= bad <= checked:  # also NaN
        return 0.0, 0.0
    return checked, bad


HOST_POOL = struct.Struct(contract.STRUCTS["HOST_POOL"])


def host_pool(raw: bytes | None) -> tuple[float, float] | None:
    """(pages, sum of their log planned rates) of a stored ``HOST_POOL`` (a host's, a URL
    group's or the population's, lua/lib_hosts.lua); None for none or a malformed one."""
    if raw is None or len(raw) != HOST_POOL.size:
        return None
    pages, total = HOST_POOL.unpack(raw)
    return (pages, total) if pages > 0 and math.isfinite(total) else None

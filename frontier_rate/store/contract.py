"""The Python-Lua contract, declared once: key names, struct layouts, flags, shared constants.

Python reads this module; the Lua scripts get it as a generated prelude
(``lua_prelude``) that the script runner (``frontier_rate/store/scripting.py``) puts in front
of ``lua/lib.lua``, so a layout or constant changed here changes on both sides at once.
Two parts of the contract stay written in Lua and are checked against this module by
tests that fail on any drift (tests/test_scripting.py): the header that lib.lua reads
into ``C`` (``HEADER``, also checked by tests/test_store.py) and the key names lib.lua
derives from ``KEYS[1]`` (``SHARD_KEYS``, ``DERIVED_KEYS``, ``BUCKET_KINDS``,
``QUEUE_KIND``, ``GROUP_KIND``), which a security test (tests/test_reliability_engine.py) wants as
literal lines there.

Struct layouts are written in Python's ``struct`` dialect; ``lua_format`` turns one into
the dialect of Redis's Lua ``struct`` library (``H`` -> ``I2``, ``8s`` -> ``c8``, counts
spelt out), which reads the same bytes.
"""

from __future__ import annotations

import re
import struct

from frontier_rate.math import cochange, evidence, index, lookalike, pattern

# --------------------------------------------------------------------------- keys

NAMESPACE_KEYS = ("cfg", "tokens", "nu", "due")
"""Keys of a namespace, ``fr:{ns}:<name>`` (store.Keys)."""
SHARD_KEYS = ("ready", "hosts", "leases", "agg", "cnt")
"""KEYS[1..5] of every shard script, in this order: ``fr:{ns:s}:<name>`` (store.Keys.shard_keys;
lua/lib.lua strips "ready" from KEYS[1] to get the shard's prefix)."""
DERIVED_KEYS = {
    "bad": "BAD", "hr": "HOST_PRIOR", "ha": "HOST_AGG", "hnu": "HOST_NU", "lm": "DATES",
    "hp": "HOST_PAGES", "hs": "HOST_SWEEP", "sg": "SIGNAL_PAGES", "st": "SIGNAL_TRUST",
    "cc": "COCHANGE", "probe": "PROBE", "cursor": "cursor_key",
}
"""Shard keys the scripts build from the prefix themselves, ``fr:{ns:s}:<name>``, with the
Lua name of each (lib.lua, signals.lua; ``cursor_key`` in refresh.lua). ``probe`` is never
created: the write probe of lib.start is a SETRANGE of ""."""
BUCKET_KINDS = ("s:", "u:", "x:", "m:")
"""Per-bucket hashes ``fr:{ns:s}:<kind><b>``: page state, URL, extras, change pattern."""
QUEUE_KIND = "q:"
"""A host's queue, ``fr:{ns:s}:q:<host>``."""
GROUP_KIND = "cg:"
"""A URL group's pages by last fetch, ``fr:{ns:s}:cg:<host><template>`` (co-change only)."""

# --------------------------------------------------------------------------- the header

HEADER = ("now", "nu", "objective", "policy", "estimator", "min_interval", "max_interval",
          "eta", "beta", "omega", "interval_prior_info", "interval_max_step", "min_host_delay",
          "lease_timeout", "buckets", "log_prior_rate", "cells", "server_clock_rate",
          "cochange", "group_prior", "worth_y", "namespace_id", "digest")
"""ARGV[1 .. len(HEADER)] of every shard script, in the order lua/lib.lua reads them into its
table ``C`` (same names on both sides). ``digest``, the last, names the values of the fields
between ``now`` and it (``wire.Header``): a Functions library that saw the same digest on its
last call takes its parsed header again after one comparison (lua/lib.lua ``header_again``)."""

# --------------------------------------------------------------------------- struct layouts

STRUCTS = {
    "STATE": "<fddfdIIH4sBB",
    "STATE_INTERVAL": "<fddfdIIH4sBBdd",
    "PATTERN": pattern.PACKED.format,
    "HOST_RECORD": "<dd",
    "HOST_AGG": "<ddd",
    "HOST_POOL": "<dd",
    "DATE_TALLY": "<dd",
    "SIGNAL_TALLY": "<dd",
    "SIGNAL_RECORD": "<ddddB",
    "COCHANGE": "<ddddddd",
    "LENGTHS": "<HH",
    "OBSERVATION": "<8sHdBd4sHHHd",
    "OBSERVE_REPLY": "<BBddBH",
    "CANDIDATE": "<dH",
    "LEASE": "<dHBHHHHI",
}
"""Every packed record that crosses the boundary, by name (Lua: the same name + ``_FORMAT``):
STATE (48 bytes; STATE_INTERVAL 64 for the interval estimator) a page's state in ``s:<b>``;
PATTERN its change pattern in ``m:<b>``; HOST_RECORD a host in ``hosts`` (next dispatch,
own delay); HOST_AGG one cell of a host in ``ha`` (pages, Σλ, Σw); HOST_POOL a host's pooled
prior in ``hr`` (pages, Σ log rate); DATE_TALLY a host's Last-Modified checks in ``lm``;
SIGNAL_TALLY a (host, source) pair in ``st``; SIGNAL_RECORD a page's claim in ``sg`` (the
source follows); COCHANGE a host's co-change record in ``cc`` (event lo, hi, checks, hits,
expected, events, confirmed: ``math.cochange.Tally``; the field "" the shard's population
tally, its lo and hi 0); LENGTHS the two lengths in front of extras (etag, last_modified) and of a
quarantine record (host, reason); OBSERVATION one argument of observe.lua; OBSERVE_REPLY one
of its replies; CANDIDATE one reply of candidates.lua; LEASE one reply of lease.lua."""

# --------------------------------------------------------------------------- flags and constants

FLAGS = {"F_LEASED": 1, "F_GONE": 2, "F_CHANGED": 4, "F_APPLIED": 8, "F_SOURCE": 16,
         "F_UNSETTLED": 32}
"""Bits of a page state's ``flags``. ``F_UNSETTLED``: the crawler stopped before the last
fetch's output was through its pipelines (lua/unsettle.lua); the next fetch sends no
validators and is reported changed (lua/lease.lua, lua/observe.lua)."""
FLAGS_END = 2 * max(FLAGS.values())
"""A state's ``flags`` are below this; a larger value is corrupt (lua/lib.lua, wire.py)."""
DATE_TRUST = 10
"""A host's change dates are ignored while more than 1 in this many disagreed with the
content (lua/observe.lua)."""

CONSTANTS = {
    **FLAGS,
    "FLAGS_END": FLAGS_END,
    "DATE_TRUST": DATE_TRUST,
    "TRUST_RATIO": evidence.TRUST_RATIO,
    "PROBATION": evidence.PROBATION,
    "FUTURE_SLACK": evidence.FUTURE_SLACK,
    "POSTPONE_MAX": evidence.POSTPONE_MAX,
    "DECAY": pattern.DECAY,
    "MIN_WEIGHT": pattern.MIN_WEIGHT,
    "MIN_R": pattern.MIN_R,
    "BURST_RECENT": pattern.BURST_RECENT,
    "BURST_WAIT": pattern.BURST_WAIT,
    "BURST_TRIALS": pattern.BURST_TRIALS,
    "BURST_LIFT": pattern.BURST_LIFT,
    "INTERVAL_FLOOR_SPAN": index.INTERVAL_FLOOR_SPAN,
    "EXPLORE_C": index.EXPLORE_C,
    "EXPLORE_CHANGES": index.EXPLORE_CHANGES,
    "COCHANGE_PROBATION": cochange.PROBATION,
    "COCHANGE_MIN_SHARE": cochange.MIN_SHARE,
    "COCHANGE_LIFT": cochange.LIFT,
    "COCHANGE_FORGET": cochange.FORGET,
    "COCHANGE_PULL_LOOK": cochange.PULL_LOOK,
    "COCHANGE_GROUP_MIN": cochange.GROUP_MIN,
    "COCHANGE_GROUP_LOOK": cochange.GROUP_LOOK,
    "COCHANGE_POOL_STRENGTH": cochange.POOL_STRENGTH,
    "COCHANGE_POOL_MIN": cochange.POOL_MIN,
    "COCHANGE_POOL_FORGET": cochange.POOL_FORGET,
    "COCHANGE_POOL_EVENTS": cochange.POOL_EVENTS,
    "GROUP_PAGES": lookalike.GROUP_PAGES,
    "GROUP_MIN": lookalike.GROUP_MIN,
    "TEMPLATE_MAX": lookalike.TEMPLATE_MAX,
}
"""Numbers both sides use, by their Lua name; each value has one Python home (this module,
evidence.py for the claims of sitemaps/feeds/pushes, pattern.py for the change pattern,
index.py for the rate floor and the exploration of always-changed pages). The least chance
of a change a revisit is worth is a process option (``min_change_chance``): the header's
``worth_y`` carries it."""

_LUA_CODES = {"B": "B", "b": "b", "H": "I2", "h": "i2", "I": "I4", "i": "i4", "Q": "I8",
              "q": "i8", "f": "f", "d": "d"}


def lua_format(fmt: str) -> str:
    """A Python ``struct`` format in the dialect of Redis's Lua ``struct`` library.

    >>> lua_format("<8sHdBd4sHHHd")
    '<c8I2dBdc4I2I2I2d'
    """
    out = fmt[0] if fmt[:1] in "<>=!" else ""
    for count, code in re.findall(r"(\d*)([a-zA-Z?])", fmt[len(out):]):
        if code == "s":
            out += f"c{count or 1}"
        elif code in _LUA_CODES:
            out += _LUA_CODES[code] * int(count or 1)
        else:
            raise ValueError(f"struct code {code!r} of {fmt!r} has no Lua twin")
    return out


def _lua_value(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"not a number for the Lua prelude: {value!r}")
    return repr(value)


def lua_prelude() -> str:
    """The Lua text of the contract: two locals per struct layout (``<NAME>_FORMAT`` and its
    size, ``<NAME>_SIZE``) and one per constant, put in front of lua/lib.lua by the script
    runner (sizes are computed here: a Functions library may not call struct.size while it
    loads)."""
    lines = ["-- generated from frontier_rate/store/contract.py at load time: do not edit"]
    for name, fmt in STRUCTS.items():
        lines.append(f'local {name}_FORMAT, {name}_SIZE = "{lua_format(fmt)}", '
                     f'{struct.calcsize(fmt)}')
    for name, value in CONSTANTS.items():
        lines.append(f"local {name} = {_lua_value(value)}")
    return "\n".join(lines) + "\n"

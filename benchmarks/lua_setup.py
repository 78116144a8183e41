"""What a shard script call costs Redis before it does any work: the library's set-up.

EVALSHA (the embedded Redis 6.2): Redis runs a script's whole text on every call, so
everything the library (the contract's prelude and lua/lib*.lua) defines is built anew per
call. Redis Functions (Redis >= 7, ``frontier_rate/store/scripting.py``): the library is loaded
once and a call runs only its per-call set-up. This measures, on each server in one run,
the server's own time per call (``INFO commandstats``, so no client or network time) of

- a bare call: EVALSHA of ``return 1``; FCALL of a function of its own library that
  returns 1,
- the library's set-up followed by ``return 1``, with a real namespace's KEYS and header,
- the same with ``lib.start`` as every shard script starts with it (the namespace marker check,
  and for EVAL the write probe: a function without ``no-writes`` is refused by Redis >= 7
  before it runs when a write would be, see ``scripting.start_line``),

and the ratio to the bare call (issue 25's and 36's target: at most 2x, for Functions). For
Functions it also times, inside one call, ``LOOP`` runs of lib.lua's per-call block
(``setup_lib``) and of its one Redis command (the layout's HMGET): the set-up's own cost,
without the call's and with less noise than the difference of two calls.
Each is the median of ``--repeats`` interleaved rounds of ``--calls`` pipelined calls. Redis
7 is Debian's /usr/bin/redis-server (skipped when missing).

    python benchmarks/lua_setup.py            # prints, writes docs/ (BENCHMARKS.md, benchmarks/lua_setup.json)
    python benchmarks/lua_setup.py --no-write
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

import _report  # noqa: E402
from redis_servers import DEBIAN_REDIS, RedisServer  # noqa: E402

from frontier_rate import Frontier  # noqa: E402
from frontier_rate.store import scripting  # noqa: E402
from frontier_rate.store import scripts as store  # noqa: E402
from frontier_rate.store.namespace import drop  # noqa: E402

BARE_LIBRARY = ("#!lua name=frontier_rate_bench_bare\n"
                "redis.register_function('frontier_rate_bench_bare', function(KEYS, ARGV) "
                "return 1 end)\n")


def usec_per_call(client, command: str, name: str, keys: list[str], args: list[str],
                  calls: int) -> float:
    """Server microseconds per ``command`` (EVALSHA or FCALL) of ``name`` over ``calls``
    pipelined calls."""
    client.config_resetstat()
    pipe = client.pipeline(transaction=False)
    for i in range(calls):
        pipe.execute_command(command, name, len(keys), *keys, *args)
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()
    return float(client.info("commandstats")[f"cmdstat_{command.lower()}"]["usec_per_call"])


LOOP = 200
"""Set-ups timed inside one call (Functions): the per-call block without a call's own cost."""


def measure(url: str | None, calls: int, repeats: int, functions: bool = False) -> dict:
    f = Frontier(url, namespace="bench-lua-setup", budget=1.0, min_host_delay=0.0)
    try:
        keys = f.keys.shard_keys(0)
        args = [str(a) for a in f._header(0.0)]
        start = scripting.start_line("bench", probe=not functions)  # as the shard scripts'
        if functions:
            library = scripting.FunctionLibrary({
                "bench_lib": "return 1", "bench_lib_start": start + "return 1",
                # the set-up alone, and its one Redis command, each LOOP times in one call
                "bench_setup_loop": f"for i = 1, {LOOP} do setup_lib(KEYS, ARGV) end return 1",
                "bench_layout_loop": f"for i = 1, {LOOP} do "
                                     f"redis.call('HMGET', CNT, 'bl', 'bs', 'hi', 'id') end return 1"})
            f.client.function_load(BARE_LIBRARY, replace=True)
            f.client.function_load(library.code, replace=True)
            command = "FCALL"
            names = {"bare": "frontier_rate_bench_bare",
                     "lib": library.function["bench_lib"],
                     "lib_start": library.function["bench_lib_start"]}
        else:
            lib = store._read("lib.lua")
            command = "EVALSHA"
            names = {name: f.client.script_load(text) for name, text in (
                ("bare", "return 1"), ("lib", lib + "\nreturn 1"),
                ("lib_start", lib + "\n" + start + "return 1"))}
        loops = {"setup_lib": library.function["bench_setup_loop"],
                 "layout_read": library.function["bench_layout_loop"]} if functions else {}
        rounds: dict[str, list[float]] = {name: [] for name in [*names, *loops]}
        for _ in range(repeats):  # interleaved, so a load change hits every variant alike
            for name, sha in names.items():
                rounds[name].append(usec_per_call(f.client, command, sha, keys, args, calls))
            for name, function in loops.items():
                rounds[name].append(usec_per_call(f.client, command, function, keys, args,
                                                  max(calls // LOOP, 10)) / LOOP)
        server = f.client.info("server")
        out = {"redis_version": server["redis_version"], "calls": calls, "repeats": repeats,
               "command": command, "load_average": os.getloadavg()[0],
               "usec_per_call": {name: {"median": statistics.median(v), "min": min(v),
                                        "max": max(v)} for name, v in rounds.items()}}
        bare = out["usec_per_call"]["bare"]["median"]
        out["ratio_to_bare"] = {name: v["median"] / bare
                                for name, v in out["usec_per_call"].items()
                                if name not in loops}
        out["inside_one_call"] = {name: out["usec_per_call"].pop(name) for name in loops}
        return out
    finally:
        drop(f.client, f.namespace)
        f.close()


def section(results: dict) -> str:
    text = "## Lua set-up per script call (`benchmarks/lua_setup.py`)\n\n"
    for where, result in results.items():
        rows = [[name, v["median"], f"{v['min']:.3g}-{v['max']:.3g}",
                 result["ratio_to_bare"][name]] for name, v in result["usec_per_call"].items()]
        text += (f"**{where}**: server time per {result['command']} (`INFO commandstats`), "
                 f"Redis {result['redis_version']}, {result['calls']} pipelined calls, median of "
                 f"{result['repeats']} interleaved rounds, load average "
                 f"{result['load_average']:.1f} (2 cores shared with other work).\n\n"
                 + _report.table(["call", "µs per call (median)", "range", "x bare"], rows)
                 + "\n\n")
        inside = result.get("inside_one_call")
        if inside:
            text += ("Inside one call (the set-up's own cost, without a call's: "
                     f"{LOOP} in a loop, µs each, median [range]): lib.lua's per-call block "
                     f"(`setup_lib`) {inside['setup_lib']['median']:.3g} "
                     f"[{inside['setup_lib']['min']:.3g}-{inside['setup_lib']['max']:.3g}], of "
                     "which its one Redis command (the HMGET of the bucket layout and the "
                     "namespace marker) "
                     f"{inside['layout_read']['median']:.3g} "
                     f"[{inside['layout_read']['min']:.3g}-{inside['layout_read']['max']:.3g}]."
                     "\n\n")
    return text + (
        "`bare`: `return 1` (EVALSHA) or a function of its own library returning 1 (FCALL); "
        "`lib`: the library's set-up and `return 1`; `lib_start`: with `lib.start` as every "
        "shard script starts with it (the namespace marker check; for EVALSHA also the write "
        "probe, which Functions do without: Redis >= 7 refuses a function without `no-writes` "
        "before it runs when it would refuse a write). Target (issues 25 and 36): at most 2x "
        "bare. Redis up to 6.2 runs a script's whole text on every EVALSHA, so every function "
        "of the library is a new closure on every call; a Functions library (Redis >= 7, "
        "`frontier_rate/store/scripting.py`) makes them once when it loads, and a call pays only "
        "the per-call block of lua/lib.lua (keys, header, layout, the per-call tables).")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2000 calls, one round; write nothing")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--url", default=os.environ.get("FRONTIER_RATE_REDIS_URL"))
    args = parser.parse_args(argv)
    if args.url is None:
        os.environ["FRONTIER_RATE_DATA_DIR"] = tempfile.mkdtemp(prefix="frontier-rate-lua-")
    if args.quick:
        args.calls, args.repeats, args.no_write = 2000, 1, True
    results = {"EVALSHA": measure(args.url, args.calls, args.repeats)}
    if Path(DEBIAN_REDIS).exists():
        server = RedisServer(Path(tempfile.mkdtemp(prefix="frontier-rate-lua7-")),
                             binary=DEBIAN_REDIS).start()
        try:
            results["Redis Functions"] = measure(server.url, args.calls, args.repeats,
                                                 functions=True)
        finally:
            server.stop()
    else:
        print(f"{DEBIAN_REDIS} is missing: Functions not measured")
    for where, result in results.items():
        for name, v in result["usec_per_call"].items():
            print(f"{where:16s} {name:10s} {v['median']:7.2f} us per call (min {v['min']:.2f}, "
                  f"max {v['max']:.2f})  {result['ratio_to_bare'][name]:5.1f}x bare")
        for name, v in result.get("inside_one_call", {}).items():
            print(f"{where:16s} {name:10s} {v['median']:7.2f} us each, inside one call "
                  f"(min {v['min']:.2f}, max {v['max']:.2f})")
    if not args.no_write:
        _report.write_json("lua_setup", results)
        _report.write_section("lua_setup", section(results))
        print("wrote docs/BENCHMARKS.md and docs/benchmarks/lua_setup.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())

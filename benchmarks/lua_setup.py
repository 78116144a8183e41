"""What a shard script call costs Redis before it does any work: lib.lua's set-up.

Redis runs a script's whole text on every EVALSHA, so everything lua/lib.lua defines is
built anew per call. This measures, on one server in one run, the server's own time per
call (``INFO commandstats``, so no client or network time) of

- a bare ``return 1``,
- lib.lua followed by ``return 1``, with a real namespace's KEYS and header,
- the same with ``lib.start`` (the marker check and the write probe every shard script runs),

and the ratio to the bare call (issue 25's target: at most 2x). Each is the median of
``--repeats`` rounds of ``--calls`` pipelined calls.

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

import _report  # noqa: E402

from frontier_rate import Frontier  # noqa: E402
from frontier_rate.store.namespace import drop  # noqa: E402

LIB = ROOT / "frontier_rate" / "lua" / "lib.lua"


def usec_per_call(client, text: str, keys: list[str], args: list[str], calls: int) -> float:
    """Server microseconds per EVALSHA of ``text`` over ``calls`` pipelined calls."""
    sha = client.script_load(text)
    client.config_resetstat()
    pipe = client.pipeline(transaction=False)
    for i in range(calls):
        pipe.evalsha(sha, len(keys), *keys, *args)
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()
    return float(client.info("commandstats")["cmdstat_evalsha"]["usec_per_call"])


def measure(url: str | None, calls: int, repeats: int) -> dict:
    f = Frontier(url, namespace="bench-lua-setup", budget=1.0, min_host_delay=0.0)
    try:
        keys = f.keys.shard_keys(0)
        args = [str(a) for a in f._header(0.0)]
        lib = LIB.read_text("utf-8")
        texts = {"bare": "return 1",
                 "lib": lib + "\nreturn 1",
                 "lib_start": lib + "\ndo local refused = lib.start(true) "
                                    "if refused then return refused end end\nreturn 1"}
        if "lib.start" not in lib and "local function start" in lib:
            texts["lib_start"] = lib + "\nlocal refused = start(true)\nreturn 1"  # before issue 25
        rounds: dict[str, list[float]] = {name: [] for name in texts}
        for _ in range(repeats):  # interleaved, so a load change hits every variant alike
            for name, text in texts.items():
                rounds[name].append(usec_per_call(f.client, text, keys, args, calls))
        server = f.client.info("server")
        out = {"redis_version": server["redis_version"], "calls": calls, "repeats": repeats,
               "usec_per_call": {name: {"median": statistics.median(v), "min": min(v),
                                        "max": max(v)} for name, v in rounds.items()}}
        bare = out["usec_per_call"]["bare"]["median"]
        out["ratio_to_bare"] = {name: v["median"] / bare
                                for name, v in out["usec_per_call"].items()}
        return out
    finally:
        drop(f.client, f.namespace)
        f.close()


def section(result: dict) -> str:
    rows = [[name, v["median"], f"{v['min']:.3g}-{v['max']:.3g}", result["ratio_to_bare"][name]]
            for name, v in result["usec_per_call"].items()]
    return (f"## Lua set-up per script call (`benchmarks/lua_setup.py`)\n\n"
            f"Server time per EVALSHA (`INFO commandstats`), embedded Redis "
            f"{result['redis_version']}, {result['calls']} pipelined calls, median of "
            f"{result['repeats']} interleaved rounds. `lib` is lua/lib.lua followed by "
            f"`return 1`; `lib_start` adds the marker check and write probe every shard "
            f"script starts with. Target (issue 25): at most 2x bare.\n\n"
            + _report.table(["script", "µs per call (median)", "range", "x bare"], rows)
            + "\n\nRedis up to 6.2 runs a script's whole text on every EVALSHA, so every "
            "function lib.lua defines is a new closure on every call; only a library loaded "
            "once (Redis 7 Functions) would take that cost away.")


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
    result = measure(args.url, args.calls, args.repeats)
    for name, v in result["usec_per_call"].items():
        print(f"{name:10s} {v['median']:7.2f} us per call (min {v['min']:.2f}, max {v['max']:.2f})"
              f"  {result['ratio_to_bare'][name]:5.1f}x bare")
    if not args.no_write:
        _report.write_json("lua_setup", result)
        _report.write_section("lua_setup", section(result))
        print("wrote docs/BENCHMARKS.md and docs/benchmarks/lua_setup.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())

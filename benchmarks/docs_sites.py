"""Revisit policies on a second real population: documentation sites and a blog (issue 62 item 4).

    python benchmarks/docs_sites.py --jobs 2     # every 4th page, 4 budgets, seeds 0-2; writes docs/
    python benchmarks/docs_sites.py --quick      # every 16th page, 0.3 fetches/page/day, seed 0; prints only

The pages are the sources of seven real sites as their public git histories record them
(``benchmarks/data/docs_sites.json.gz``, ``benchmarks/make_docs_sites.py``): Python's PEPs,
FastAPI's documentation in its many languages, react.dev, vuejs.org, Pydantic's and Scrapy's
documentation, and the Rust blog; a page changes when a commit that lands touches its source.
Unlike ``web_like.py``'s documents (a service's terms, mostly alone on their host) these are
hosts of hundreds of pages whose changes come together (a translation sync touches a hundred
pages in one commit), at URLs with the sites' own paths (``/zh/tutorial/first-steps/``), so
the evidence issue 62 built, co-change (``cochange=True``) and the URL-group prior
(``group_prior=True``), has something to find. Politeness binds on the largest host:
a host may take ``HOST_SHARE`` of the share of the budget its largest peer's pages would get
(FastAPI is slowed by its host delay; the others are not).

Each page's source window is its repository's last ``make_docs_sites.WINDOW_DAYS`` days,
replayed on one clock; freshness (weight 1 a page) is scored over the last
``WINDOW_DAYS - WARMUP_DAYS``, every fetch counted against the budget, first fetches
included, as in ``web_like.py`` (its dispatcher, baselines, bound and engine run). Compared at
each budget and seed: ``uniform``, ``oracle`` (hindsight Poisson rates, every page counted as
changing at least once), the ``clairvoyant`` bound (knows every change; keeps the host
delays), and ours three ways: the engine's defaults, with co-change evidence, with the
URL-group prior. Gap closed = (ours - uniform) / (clairvoyant - uniform).

Writes docs/benchmarks/docs_sites.json and the docs_sites section of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _run import embedded_redis, pool_map  # noqa: E402
from policy import run_baseline  # noqa: E402
from real_traces import clairvoyant, every_page_changes, masked_freshness  # noqa: E402
from web_like import (  # noqa: E402
    DAY,
    TICK,
    WARMUP_DAYS,
    WINDOW_DAYS,
    Page,
    World,
    compare_chance,
    run_ours,
    score,
)
from web_like_groups import _gap, _spread  # noqa: E402 (the same gap and spread)

DATA = Path(__file__).resolve().parent / "data" / "docs_sites.json.gz"
BUDGETS = (0.01, 0.03, 0.1, 0.3)
SEEDS = (0, 1, 2)
EVERY = 4
"""The full run replays every EVERY-th page of each site (3,320 pages in all; ``--every 1``)."""
QUICK_EVERY = 16
QUICK_BUDGETS = (0.3,)
HOST_SHARE = 0.6
"""A host may take this share of what its largest peer's pages would get at the budget: the
largest host (FastAPI, 1,433 of the 3,320 pages) is held by its host delay at every budget,
the others are not (the PEPs, 716 pages, have 1.2 times the room their share needs)."""
VARIANTS = (("ours", {}), ("cochange", {"cochange": True}), ("group_prior", {"group_prior": True}))
"""Our engine's runs: its defaults, and with each of issue 62's kinds of evidence."""
_PREFIX = re.compile(r"^(?:docs/([a-z-]+)/docs/|src/content/|src/|docs/|content/|peps/)")


def site_path(name: str) -> str:
    """A page's path on its site from its source file: FastAPI's Chinese ``a/b`` page, source
    ``docs/zh/docs/a/b`` plus ``.md``, is at ``zh/a/b/``."""
    path = name.split(":", 1)[1]
    match = _PREFIX.match(path)
    rest = re.sub(r"\.(md|rst)$", "", path[match.end() if match else 0:])
    parts = [match.group(1) if match else None, *rest.split("/")]
    if parts[-1] == "index":
        parts.pop()
    return "/".join(p for p in parts if p) + "/"


def _read() -> tuple[dict, dict[str, float]]:
    """The data file, and each site's window start (its head time less ``WINDOW_DAYS``)."""
    with gzip.open(DATA, "rt") as fh:
        data = json.load(fh)
    return data, {s["host"]: s["head_time"] - WINDOW_DAYS * DAY for s in data["sources"]}


def _page(row: dict, start: float) -> Page:
    """A data-file row as a page, its changes within its window, from 0."""
    c = np.cumsum(np.asarray(row["changes"], dtype=float)) - start
    return Page(row["page"], row["host"], row["kind"], np.unique(c[(c >= 0) & (c < WINDOW_DAYS * DAY)]))


def population(every: int = 1) -> list[Page]:
    """Every ``every``-th page of each site, its changes within its source's window, from 0."""
    data, starts = _read()
    return [_page(p, start) for host, start in starts.items()
            for p in [p for p in data["pages"] if p["host"] == host][::every]]


def found_during(every: int = 1) -> tuple[list[Page], np.ndarray]:
    """``population(every)`` and, after it, every ``every``-th page of each site added within
    its window (the data file's ``added``); with when each page is found (seconds from the
    window's start: 0 for the first, the adding commit's time for the others)."""
    data, starts = _read()
    pages = population(every)
    found = [0.0] * len(pages)
    for host, start in starts.items():
        for p in [p for p in data["added"] if p["host"] == host][::every]:
            pages.append(_page(p, start))
            found.append(float(p["first"] - start))
    return pages, np.asarray(found)


def run_found(task: tuple) -> tuple[float, int, dict]:
    """``--found``: ours with and without the URL-group prior when the pages added within the
    window arrive when they were added (``found_during``)."""
    pages, found, per_page_day, seed, url = task
    world = World(pages, per_page_day, seed=seed, host_share=HOST_SHARE)
    urls, tick, late = urls_of(world, seed), unit(world), found > 0
    out = {}
    for name, on in (("without", False), ("with", True)):
        fetches, _ = run_ours(world, url, seed, tick=tick, urls=urls, group_prior=on, arrivals=found)
        out[name] = {"all": score(world, fetches, tick)["freshness"],
                     "found": masked_freshness(world, fetches, late),
                     "first_fetch_delay_days": float(np.median([f[0] - a for f, a in zip(fetches, found, strict=True)
                                                                if a > 0 and f.size]) / DAY)}
    print(f"  B={per_page_day:<5g} seed {seed}: {int(late.sum())} pages found later; all pages without "
          f"{out['without']['all']:.4f} with {out['with']['all']:.4f}; the pages found later without "
          f"{out['without']['found']:.4f} with {out['with']['found']:.4f} (first fetch "
          f"{out['without']['first_fetch_delay_days']:.1f} / {out['with']['first_fetch_delay_days']:.1f} "
          "days after found, median)", flush=True)
    return per_page_day, seed, out


def run_chance(task: tuple) -> tuple[float, int, dict]:
    """``--min-change-chance``: ``web_like.compare_chance`` on this population (its host share,
    clock unit and URLs)."""
    pages, per_page_day, seed, url, chance = task
    world = World(pages, per_page_day, seed=seed, host_share=HOST_SHARE)
    return per_page_day, seed, compare_chance(world, url, seed, chance, tick=unit(world),
                                              urls=urls_of(world, seed))


def urls_of(world: World, seed: int) -> list[str]:
    """The pages' URLs: the site's own paths on host ``h<index>`` (the seed's salt in the host
    name and a query reorders first fetches, as ``policy.page_urls`` does, paths untouched)."""
    tag, query = ("", "") if seed == 0 else (f"o{seed}", f"?o={seed}")
    out = [f"https://h{world.host[i]}{tag}.example/{site_path(p.name)}{query}"
           for i, p in enumerate(world.pages)]
    if len(set(out)) != len(out):
        raise ValueError("two pages of one host got the same URL")
    return out


def together(pages: list[Page], within: float = DAY) -> tuple[float, float]:
    """Issue 62's co-change figure: the share of the changes of pages with 1-20 changes that
    come within ``within`` of a change of another page of the same host, and the same share
    for as many changes at uniformly random times (seed 0), each page's own kept apart."""
    rng = np.random.default_rng(0)
    span = WINDOW_DAYS * DAY
    hits = chance = total = 0
    by_host: dict[str, list[int]] = {}
    for i, p in enumerate(pages):
        by_host.setdefault(p.host, []).append(i)
    for members in by_host.values():
        for i in members:
            own = pages[i].changes
            if not 1 <= own.size <= 20:
                continue
            others = np.sort(np.concatenate([pages[j].changes for j in members if j != i] or [np.empty(0)]))
            if others.size == 0:
                continue
            for times, counter in ((own, "real"), (rng.uniform(0, span, own.size), "random")):
                at = np.searchsorted(others, times)
                lo = np.abs(times - others[np.clip(at - 1, 0, others.size - 1)])
                hi = np.abs(others[np.clip(at, 0, others.size - 1)] - times)
                near = int((np.minimum(lo, hi) <= within).sum())
                if counter == "real":
                    hits += near
                    total += own.size
                else:
                    chance += near
    return hits / max(total, 1), chance / max(total, 1)


def describe(pages: list[Page]) -> dict:
    counts = np.array([len(p.changes) for p in pages])
    sizes = {h: sum(p.host == h for p in pages) for h in dict.fromkeys(p.host for p in pages)}
    changed_together, at_random = together(pages)
    return {"pages": len(pages), "hosts": len(sizes), "pages_per_host": sizes,
            "unchanged_share": float((counts == 0).mean()), "median_changes": float(np.median(counts)),
            "p90_changes": float(np.percentile(counts, 90)), "p99_changes": float(np.percentile(counts, 99)),
            "changes": int(counts.sum()), "within_a_day_of_a_neighbour": changed_together,
            "within_a_day_at_random": at_random}


def unit(world: World) -> float:
    """The engine's clock unit: ``web_like.TICK`` (an hour), or half the host delay where that
    is shorter (FastAPI's at 0.1 and 0.3 fetches/page/day). ``web_like.run_ours`` calls the
    engine once per unit after a batch, and a call hands a host only the pages its delay lets
    go at that instant: with a unit longer than the delay a host would get one fetch per unit
    whatever its delay allows (a limit of the driver, not of the engine: a crawler asks again
    as soon as ``next_call_time`` says)."""
    return min(TICK, world.host_delay / 2)


def run_task(task: tuple) -> tuple[float, int, dict]:
    """One budget and seed: the baselines, the bound and our three runs."""
    pages, per_page_day, seed, url = task
    world = World(pages, per_page_day, seed=seed, host_share=HOST_SHARE)
    urls = urls_of(world, seed)
    tick = unit(world)
    results: dict[str, dict] = {"uniform": score(world, run_baseline(world, "uniform")),
                                "oracle": score(world, run_baseline(every_page_changes(world), "oracle")),
                                "clairvoyant": {"freshness": clairvoyant(world)}}
    for name, options in VARIANTS:
        fetches, info = run_ours(world, url, seed, tick=tick, urls=urls, **options)
        info.pop("estimated_pages", None)
        results[name] = {**score(world, fetches, tick), **info, "tick_s": tick}
    line = " ".join(f"{name} {results[name]['freshness']:.4f}" for name, _ in VARIANTS)
    print(f"  B={per_page_day:<5g} seed {seed}: uniform {results['uniform']['freshness']:.4f} {line} "
          f"clairvoyant {results['clairvoyant']['freshness']:.4f}", flush=True)
    return per_page_day, seed, results


def markdown(done: list[tuple[float, int, dict]], pop: dict, every: int, written_on: str | None = None) -> str:
    from _report import machine

    rows = ["| B | uniform | oracle | clairvoyant | ours | gap closed | ours / uniform | spend "
            "| with co-change: gap closed | ours / uniform | pulls | with the URL-group prior: gap closed "
            "| ours / uniform |", "|" + "---|" * 13]
    worst: dict[str, float] = {}
    for b in sorted({d[0] for d in done}):
        runs = [d[2] for d in sorted(done, key=lambda d: d[1]) if d[0] == b]
        fresh = {k: [r[k]["freshness"] for r in runs] for k in ("uniform", "oracle", "clairvoyant")}
        cells = [f"{b:g}", *(_spread(fresh[k], ".3f") for k in fresh)]
        for name, _ in VARIANTS:
            ratios = [r[name]["freshness"] / r["uniform"]["freshness"] for r in runs]
            worst[name] = min(worst.get(name, 2.0), *ratios)
            if name == "ours":
                cells += [f"{statistics.median([r['ours']['freshness'] for r in runs]):.3f}",
                          _spread([_gap(r, name) for r in runs], ".2f"), _spread(ratios, ".3f"),
                          _spread([r[name]["spent_all_of_budget"] for r in runs], ".2f")]
            else:
                cells += [_spread([_gap(r, name) for r in runs], ".2f"), _spread(ratios, ".3f")]
            if name == "cochange":
                cells.append(str(sum(int(r[name]["stats"].get("cochange_pulls", 0) or 0) for r in runs)))
        rows.append("| " + " | ".join(cells) + " |")
    violations = {name: sum(d[2][name]["violations"] for d in done) for name, _ in VARIANTS}
    seeds = sorted({d[1] for d in done})
    sizes = ", ".join(f"{h} {n}" for h, n in pop["pages_per_host"].items())
    return "\n".join([
        "## Documentation sites and a blog: a second real population (`benchmarks/docs_sites.py`)",
        "",
        f"`python benchmarks/docs_sites.py` -- {pop['pages']} real pages of {pop['hosts']} sites "
        f"(every {every}th page of each: {sizes}), built from their sources' public git histories "
        "(`benchmarks/make_docs_sites.py`: a page changes when a commit that lands touches its source "
        f"file); over the {WINDOW_DAYS:g}-day window {pop['unchanged_share']:.0%} of the pages never change, "
        f"the median page {pop['median_changes']:g} times, the 90th percentile {pop['p90_changes']:g}, the "
        f"99th {pop['p99_changes']:g}. Changes come together: {pop['within_a_day_of_a_neighbour']:.0%} of "
        "the changes of pages with 1-20 changes fall within a day of a change of another page of the same "
        f"site, {pop['within_a_day_at_random']:.0%} for as many at random times. Politeness binds on the "
        f"largest site (a host may take {HOST_SHARE:g} of the share its largest peer's pages would get). "
        "Every fetch counts, first fetches included; freshness scored over the last "
        f"{WINDOW_DAYS - WARMUP_DAYS:g} days; median [min-max] over seeds "
        + ", ".join(str(s) for s in seeds) + " (the baselines' phases, our first-fetch order, our random "
        "stream); `spend`: our fetches / (budget x run); gap closed = (ours - uniform) / (clairvoyant - "
        "uniform); `pulls`: pages the co-change evidence brought forward, summed over the seeds. The "
        "engine's three runs use the same URLs (the sites' own paths), clock and seed; its clock unit is "
        "an hour, or half the host delay where that is shorter (`unit`: a driver that asks once per unit "
        "would otherwise hold the capped host to one fetch per unit).",
        "",
        *rows,
        "",
        "Worst run / uniform: " + ", ".join(f"{name} {worst[name]:.4f}" for name, _ in VARIANTS)
        + "; politeness and budget violations: " + ", ".join(f"{n} {v}" for n, v in violations.items())
        + f". Simulated on a virtual clock; machine: {written_on or machine()}.",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"every {QUICK_EVERY}th page, budgets {QUICK_BUDGETS}, seed 0; write nothing")
    parser.add_argument("--write", action="store_true", help="write docs/ even with --quick")
    parser.add_argument("--budgets", type=float, nargs="*")
    parser.add_argument("--seeds", type=int, nargs="*")
    parser.add_argument("--every", type=int, help=f"every n-th page of each site (default {EVERY})")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--from-json", action="store_true",
                        help="re-write the docs section from docs/benchmarks/docs_sites.json, no simulation")
    parser.add_argument("--found", action="store_true",
                        help="the pages added within the window arrive when added: ours with and "
                             "without the URL-group prior (prints only)")
    parser.add_argument("--min-change-chance", type=float,
                        help="ours at the engine's default min_change_chance (0.02) and at this "
                             "one, against uniform and the bound; prints only")
    parser.add_argument("--url", default=os.environ.get("FRONTIER_RATE_REDIS_URL"))
    args = parser.parse_args(argv)
    from _report import read_json, write_json, write_section

    if args.from_json:
        saved = read_json("docs_sites")
        done = [(r["per_page_day"], r["seed"], r["results"]) for r in saved["runs"]]
        write_section("docs_sites", markdown(done, saved["population"], saved["every"],
                                             written_on=saved["machine"] + " (re-rendered from the JSON)"))
        return 0
    every = args.every or (QUICK_EVERY if args.quick else EVERY)
    budgets = args.budgets or (QUICK_BUDGETS if args.quick else BUDGETS)
    seeds = args.seeds if args.seeds is not None else ((0,) if args.quick else SEEDS)
    if args.found:
        pages, found = found_during(every)
        with embedded_redis(args.url, "docs-sites"):
            pool_map(run_found, [(pages, found, b, s, args.url) for b in budgets for s in seeds], args.jobs)
        return 0
    pages = population(every)
    if args.min_change_chance is not None:
        with embedded_redis(args.url, "docs-sites"):
            pool_map(run_chance, [(pages, b, s, args.url, args.min_change_chance)
                                  for b in budgets for s in seeds], args.jobs)
        return 0
    pop = describe(pages)
    print(f"{pop['pages']} pages of {pop['hosts']} sites, {pop['unchanged_share']:.0%} unchanged; "
          f"{pop['within_a_day_of_a_neighbour']:.0%} of changes within a day of a neighbour's "
          f"({pop['within_a_day_at_random']:.0%} at random)", flush=True)
    tasks = sorted(((pages, b, s, args.url) for b in budgets for s in seeds), key=lambda t: -t[1])
    with embedded_redis(args.url, "docs-sites"):
        done = pool_map(run_task, tasks, args.jobs)
    text = markdown(done, pop, every)
    print(text)
    if args.quick and not args.write:
        return 0
    write_json("docs_sites", {"population": pop, "every": every, "runs": [
        {"per_page_day": b, "seed": s, "results": r} for b, s, r in done]})
    write_section("docs_sites", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

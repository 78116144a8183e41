"""The URL-group prior (issue 62 item 2) on web_like.py's real histories, with and without.

    python benchmarks/web_like_groups.py --jobs 2   # budgets 0.01-0.3, seeds 0-2; writes docs/
    python benchmarks/web_like_groups.py --quick    # one budget, seed 0; prints only

A new page starts from the pool of its host's pages with the same URL path template
(``frontier_rate/math/lookalike.py``, ``Frontier(group_prior=True)``). ``web_like.py``'s URLs
(``policy.page_urls``: ``/p/<i>``) have no structure to learn from, so each page gets a URL made
from what it really is, on two populations of the same change histories
(``web_like.population``):

* ``web_like``: the hosts as web_like.py has them (a service of Open Terms Archive, a
  repository), a page at ``/<document>`` (a privacy policy: ``/Privacy-Policy`` plus the
  document's extension) or at its path in its repository (``/library/alpine``). Most hosts hold 1-3 documents of
  different kinds, so most groups hold one page: little for the prior to learn from.
* ``mixed``: the same histories on ``SITES`` sites, each holding some of the documents at
  ``/terms/<service>-<document>`` and some of the busy histories at ``/repo/<repository>-<file>``
  (dealt round-robin in name order): pages of a site differ by kind as a news site's legal
  pages and its live data do, and the path says which. The site composition is made up; the
  change histories are real.

Both runs of ours use the same URLs, clock, seed and the engine's defaults (co-change off); the
only difference is ``group_prior``. Every fetch counts against the budget, first fetches
included (``budget_first_fetches=True``), as in web_like.py. Writes
docs/benchmarks/web_like_groups.json and the web_like_groups section of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _run import embedded_redis, pool_map  # noqa: E402
from policy import run_baseline  # noqa: E402
from real_traces import clairvoyant  # noqa: E402
from web_like import FULL_EVERY, TICK, Page, World, population, run_ours, score  # noqa: E402

from frontier_rate.math.lookalike import url_template  # noqa: E402

BUDGETS = (0.01, 0.03, 0.1, 0.3)
"""Fetches per page per day: the budgets of issue 62's targets."""
SEEDS = (0, 1, 2)
SITES = 12
"""Sites of the ``mixed`` population."""
POPULATIONS = ("web_like", "mixed")


def _slug(text: str) -> str:
    return "-".join(text.replace("/", " ").split())


def _own_path(p: Page) -> str:
    """A page's path from its real name: a service's document, or a file of a repository."""
    rest = p.name.split(":", 1)[1]
    if p.host.split(":", 1)[0].endswith("-versions"):  # "<collection>:<service>" hosts
        rest = rest.split("/", 1)[1]
    return "/".join(_slug(part) for part in rest.split("/"))


def mixed(pages: list[Page], sites: int = SITES) -> list[Page]:
    """``pages`` dealt round-robin in name order onto ``sites`` sites, documents of services and
    busy histories each in turn; a page's name becomes its path on its site."""
    docs = sorted((p for p in pages if p.host.split(":", 1)[0].endswith("-versions")),
                  key=lambda p: p.name)
    busy = sorted((p for p in pages if not p.host.split(":", 1)[0].endswith("-versions")),
                  key=lambda p: p.name)
    out = []
    for i, p in enumerate(docs):
        out.append(Page(f"terms/{_slug(p.name.replace(':', ' '))}", f"site{i % sites}", p.kind,
                        p.changes))
    for i, p in enumerate(busy):
        out.append(Page(f"repo/{_slug(p.name.replace(':', ' '))}", f"site{i % sites}", p.kind,
                        p.changes))
    return out


def urls_of(world: World, kind: str, seed: int) -> list[str]:
    """The URLs of ``world``'s pages: host h{index} (the seed's salt in the host name and in a
    query, which reorders first fetches as ``policy.page_urls`` does without touching the
    path template)."""
    tag, query = ("", "") if seed == 0 else (f"o{seed}", f"?o={seed}")
    out = []
    for i, p in enumerate(world.pages):
        path = p.name if kind == "mixed" else _own_path(p)
        out.append(f"https://h{world.host[i]}{tag}.example/{path}{query}")
    if len(set(out)) != len(out):
        raise ValueError("two pages of one host got the same URL")
    return out


LATE_DAYS = (1.0, 50.0)
"""With ``--late``: the days between which a page found later is found (before the scored
window starts at web_like.WARMUP_DAYS)."""


def arrivals_of(n: int, share: float, seed: int) -> np.ndarray | None:
    """When each page is found (seconds): ``share`` of them, drawn with ``seed``, uniformly in
    ``LATE_DAYS``; the rest at 0 (None when ``share`` is 0)."""
    if share <= 0:
        return None
    rng = np.random.default_rng(1000 + seed)
    late = rng.random(n) < share
    return np.where(late, rng.uniform(LATE_DAYS[0], LATE_DAYS[1], n) * 86400.0, 0.0)


def run_task(task: tuple) -> tuple[str, float, int, dict]:
    kind, pages, per_page_day, seed, url, late = task
    world = World(pages, per_page_day, seed=seed)
    urls = urls_of(world, kind, seed)
    arrivals = arrivals_of(world.n, late, seed)
    results: dict[str, dict] = {"uniform": score(world, run_baseline(world, "uniform")),
                                "clairvoyant": {"freshness": clairvoyant(world)}}
    for name, on in (("without", False), ("with", True)):
        fetches, info = run_ours(world, url, seed, tick=TICK, cochange=False, group_prior=on,
                                 urls=urls, arrivals=arrivals)
        info.pop("estimated_pages", None)
        results[name] = {**score(world, fetches, TICK), **info}
    groups = len({(int(world.host[i]), url_template(u)) for i, u in enumerate(urls)})
    results["groups"] = groups
    r = results
    print(f"  {kind} B={per_page_day:<5g} seed {seed}: uniform {r['uniform']['freshness']:.4f} "
          f"without {r['without']['freshness']:.4f} with {r['with']['freshness']:.4f} "
          f"({groups} groups of {world.n} pages on {world.hosts} hosts)", flush=True)
    if late > 0:
        kind = f"{kind}, {late:.0%} found later"
    return kind, per_page_day, seed, results


def _gap(r: dict, key: str) -> float:
    return ((r[key]["freshness"] - r["uniform"]["freshness"])
            / max(r["clairvoyant"]["freshness"] - r["uniform"]["freshness"], 1e-12))


def _spread(xs: list[float], fmt: str) -> str:
    return f"{statistics.median(xs):{fmt}} [{min(xs):{fmt}}-{max(xs):{fmt}}]"


def markdown(done: list[tuple[str, float, int, dict]], every: int) -> str:
    from _report import machine

    out = ["## The URL-group prior (`benchmarks/web_like_groups.py`, issue 62 item 2)", "",
           f"`python benchmarks/web_like_groups.py` -- web_like.py's real histories (every {every}th "
           "page), each page at a URL made from what it is, ours with and without `group_prior` "
           "(same URLs, clock and seed; co-change off; every fetch counted, first fetches "
           "included). `web_like`: web_like.py's hosts, a page at its own path (most hosts hold "
           f"1-3 documents of different kinds); `mixed`: the same histories dealt onto {SITES} "
           "sites, documents under `/terms/`, busy histories under `/repo/` (a made-up site "
           "composition). Gap closed = (ours - uniform) / (clairvoyant - uniform), median "
           "[min-max] over seeds " + ", ".join(str(s) for s in sorted({d[2] for d in done}))
           + "; extra bytes: the URL groups' fields in the pooled-prior hashes, per page.", "",
           "| population | B | gap closed without | with | ours / uniform without | with "
           "| worst seed with / without | extra bytes / page |",
           "|---|---|---|---|---|---|---|---|"]
    for kind in sorted({d[0] for d in done}):
        for b in sorted({d[1] for d in done if d[0] == kind}):
            runs = [d[3] for d in done if d[0] == kind and d[1] == b]
            if not runs:
                continue
            gaps = [[_gap(r, k) for r in runs] for k in ("without", "with")]
            ratios = [[r[k]["freshness"] / r["uniform"]["freshness"] for r in runs]
                      for k in ("without", "with")]
            paired = [r["with"]["freshness"] / r["without"]["freshness"] for r in runs]
            pages = runs[0]["with"]["stats"].get("pages") or 1
            extra = statistics.median([(r["with"]["prior_bytes"] - r["without"]["prior_bytes"]) / pages
                                       for r in runs])
            out.append(f"| {kind} | {b:g} | {_spread(gaps[0], '.3f')} | {_spread(gaps[1], '.3f')} | "
                       f"{_spread(ratios[0], '.4f')} | {_spread(ratios[1], '.4f')} | "
                       f"{min(paired):.4f} | {extra:.1f} |")
    worst = min(d[3]["with"]["freshness"] / d[3]["uniform"]["freshness"] for d in done)
    out += ["", f"Worst run with the group prior: {worst:.4f} x uniform. Violations with: "
            f"{sum(d[3]['with']['violations'] for d in done)}. Machine: {machine()} (shared)."]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="B=0.03, seed 0, every 16th page; prints only")
    parser.add_argument("--budgets", type=float, nargs="*")
    parser.add_argument("--seeds", type=int, nargs="*")
    parser.add_argument("--populations", nargs="*", choices=POPULATIONS)
    parser.add_argument("--every", type=int, help=f"every n-th page (default {FULL_EVERY})")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--late", type=float, default=0.0,
                        help="this share of the pages is found during the crawl (days "
                             f"{LATE_DAYS[0]:g}-{LATE_DAYS[1]:g}), not at the start; prints only")
    parser.add_argument("--write", action="store_true", help="write docs/ even with --quick")
    parser.add_argument("--url", default=os.environ.get("FRONTIER_RATE_REDIS_URL"))
    args = parser.parse_args(argv)
    every = args.every or (16 if args.quick else FULL_EVERY)
    budgets = args.budgets or ((0.03,) if args.quick else BUDGETS)
    seeds = args.seeds if args.seeds is not None else ((0,) if args.quick else SEEDS)
    base = population(every)
    pops = {"web_like": base, "mixed": mixed(base)}
    tasks = sorted(((k, pops[k], b, s, args.url, args.late) for k in (args.populations or POPULATIONS)
                    for b in budgets for s in seeds), key=lambda t: -t[2])
    with embedded_redis(args.url, "weblike-groups"):
        done = pool_map(run_task, tasks, args.jobs)
    text = markdown(done, every)
    print(text)
    if (args.quick or args.late) and not args.write:
        return 0
    from _report import write_json, write_section

    write_json("web_like_groups", {"every": every, "sites": SITES, "runs": [
        {"population": k, "per_page_day": b, "seed": s,
         "results": {name: {key: v for key, v in r[name].items() if key != "stats"}
                     if isinstance(r[name], dict) else r[name] for name in r}}
        for k, b, s, r in sorted(done, key=lambda d: (d[0], d[1], d[2]))]})
    write_section("web_like_groups", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

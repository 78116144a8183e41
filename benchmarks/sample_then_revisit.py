"""Sample, then revisit (issue 62 item 3), tried outside the engine: a group's revisits led by
a few sampled pages, against uniform revisits at equal spend.

    python benchmarks/sample_then_revisit.py --write     # both populations, 4 budgets, seeds 0-2
    python benchmarks/sample_then_revisit.py --quick     # docs_sites, every 8th page, 0.03, seed 0

Writes docs/benchmarks/sample_then_revisit.json and its section of docs/BENCHMARKS.md with
``--write`` (prints only without).

The old result for small budgets (Cho & Ntoulas, VLDB 2002; Tan & Mitra, TOIS 2010): fetch a
few pages of a group often, and the rest of the group when they show a change. Here a page's
group is its host and URL template (``frontier_rate.math.lookalike.url_template``): on
``docs_sites.py``'s population the sites' own paths (``/zh/tutorial/*``, ``/learn/*``), on
``web_like.py``'s one group per host (its documents sit at paths that say nothing).

The policy, for ``U`` = 1 / B days (uniform revisiting's period at B fetches/page/day): in every
group of at least ``MIN_GROUP`` pages, ``samples`` pages drawn with the seed are revisited
every ``lead`` x U and the others every ``rest`` x U; when a sample's fetch finds a change,
every other page of its group whose copy is older than the sample's previous fetch is
fetched at once and its period starts again. Pages of smaller groups are revisited every U.
Each page starts at a seeded phase. What it spends depends on the changes the samples find, so
each run is compared with uniform revisits that spend the same fetches (every page at the
period that spends them) and with the clairvoyant bound at that spend (``web_like.World``'s
scoring, the last 120 days; host delays not modelled, as the question is what the samples
tell). Gap closed = (sampled - uniform) / (clairvoyant - uniform) at equal spend. The
control runs the same periods and phases without the group fetches: what the samples' news
adds beyond moving fetches from some pages to others.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import docs_sites  # noqa: E402
import web_like  # noqa: E402
from real_traces import clairvoyant  # noqa: E402
from web_like import DAY, World, score  # noqa: E402

from frontier_rate.math.lookalike import url_template  # noqa: E402

MIN_GROUP = 4
"""Groups smaller than this are revisited uniformly (nothing to lead)."""
GRID = (("samples", (1, 2)), ("lead", (0.25, 0.5)), ("rest", (1.5, 3.0)))
"""Every combination is run and printed: the numbers are not tuned to a best one."""
UNLIMITED = 100.0
"""``World.host_share`` here: host delays never bind (not modelled)."""


def groups_of(pages: list[web_like.Page], kind: str) -> list[str]:
    """Each page's group: host and URL template (docs_sites), or the host (web_like)."""
    if kind == "web_like":
        return [p.host for p in pages]
    return [f"{p.host} {url_template('https://h.example/' + docs_sites.site_path(p.name))}" for p in pages]


def sampled(world: World, group: list[str], samples: int, lead: float, rest: float,
            seed: int, follow: bool = True) -> list[np.ndarray]:
    """Fetch times per page under the sample-led policy (the module docstring); ``follow``
    False: the same periods and phases, no group fetched when a sample changed (the control:
    what the samples' news adds beyond moving fetches between pages)."""
    rng = np.random.default_rng(seed)
    span, uniform = world.t_end, DAY / world.per_page_day
    members: dict[str, list[int]] = {}
    for i, g in enumerate(group):
        members.setdefault(g, []).append(i)
    period = np.full(world.n, uniform)
    leader = np.zeros(world.n, dtype=bool)
    for ids in members.values():
        if len(ids) < MIN_GROUP:
            continue
        chosen = rng.choice(ids, size=samples, replace=False)
        period[ids] = rest * uniform
        period[chosen] = lead * uniform
        leader[chosen] = True
    heap = [(float(rng.uniform(0, period[i])), i, 0) for i in range(world.n)]
    heapq.heapify(heap)
    generation = np.zeros(world.n, dtype=np.int64)
    last = np.full(world.n, -np.inf)
    version = np.full(world.n, -1)
    out: list[list[float]] = [[] for _ in range(world.n)]
    while heap:
        t, i, gen = heapq.heappop(heap)
        if t >= span:
            break
        if gen != generation[i]:
            continue  # replaced by a fetch a sample brought forward
        seen = int(np.searchsorted(world.changes[i], t, side="right"))
        changed = version[i] >= 0 and seen != version[i]
        before, last[i], version[i] = last[i], t, seen
        out[i].append(t)
        heapq.heappush(heap, (t + period[i], i, gen))
        if follow and changed and leader[i]:
            for j in members[group[i]]:
                if not leader[j] and last[j] < before:
                    generation[j] += 1
                    heapq.heappush(heap, (t, j, int(generation[j])))
    return [np.array(x) for x in out]


def uniform_spending(world: World, fetches: int, seed: int) -> list[np.ndarray]:
    """Every page at the one period that spends ``fetches`` in the run, seeded phases."""
    rng = np.random.default_rng(seed + 10_000)
    period = world.n * world.t_end / fetches
    return [np.arange(rng.uniform(0, period), world.t_end, period) for _ in range(world.n)]


def run(pages: list[web_like.Page], kind: str, per_page_day: float, seed: int) -> list[dict]:
    world = World(pages, per_page_day, seed=seed, host_share=UNLIMITED)
    group = groups_of(pages, kind)
    rows = []
    for samples, lead, rest in itertools.product(*(values for _, values in GRID)):
        row = {"kind": kind, "per_page_day": per_page_day, "seed": seed, "samples": samples,
               "lead": lead, "rest": rest}
        for name, follow in (("", True), ("control_", False)):
            mine = sampled(world, group, samples, lead, rest, seed, follow=follow)
            spent = sum(len(f) for f in mine)
            at_spend = World(pages, spent / world.n / (world.t_end / DAY), seed=seed, host_share=UNLIMITED)
            uni = score(at_spend, uniform_spending(at_spend, spent, seed))["freshness"]
            fresh, bound = score(at_spend, mine)["freshness"], clairvoyant(at_spend)
            row.update({f"{name}spend_of_budget": spent / (world.budget * world.t_end),
                        f"{name}ratio": fresh / uni, f"{name}gap": (fresh - uni) / max(bound - uni, 1e-12)})
        rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    out = ["| population | B | samples | lead | rest | spend / budget | sampled / uniform at equal spend "
           "| gap closed | control: spend | control / uniform | control gap closed |", "|" + "---|" * 11]
    keys = sorted({(r["kind"], r["per_page_day"], r["samples"], r["lead"], r["rest"]) for r in rows})
    for key in keys:
        mine = [r for r in rows if (r["kind"], r["per_page_day"], r["samples"], r["lead"], r["rest"]) == key]
        cells = []
        for name in ("", "control_"):
            ratio, gap = [r[f"{name}ratio"] for r in mine], [r[f"{name}gap"] for r in mine]
            cells += [f"{statistics.median([r[f'{name}spend_of_budget'] for r in mine]):.2f}",
                      f"{statistics.median(ratio):.4f} [{min(ratio):.4f}-{max(ratio):.4f}]",
                      f"{statistics.median(gap):.3f} [{min(gap):.3f}-{max(gap):.3f}]"]
        out.append(f"| {key[0]} | {key[1]:g} | {key[2]} | {key[3]:g} | {key[4]:g} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def markdown(rows: list[dict], described: list[str]) -> str:
    from _report import machine

    return "\n".join([
        "## Sample, then revisit, outside the engine (`benchmarks/sample_then_revisit.py`, issue 62 item 3)",
        "",
        "`python benchmarks/sample_then_revisit.py --write` -- in every URL group of at least "
        f"{MIN_GROUP} pages (host and URL template on `docs_sites.py`'s population, the host on "
        "`web_like.py`'s), `samples` pages drawn per seed are revisited every `lead` x U and the rest "
        "every `rest` x U (U = 1/B days, uniform's period); a sample's fetch that finds a change "
        "fetches at once every other page of its group whose copy is older than the sample's previous "
        "fetch. Smaller groups: every U. Each run is compared with uniform revisits spending the same "
        "fetches and with the clairvoyant bound at that spend (every fetch counted, first ones "
        "included; freshness over the last 120 of 180 days; host delays not modelled); gap closed = "
        "(sampled - uniform) / (clairvoyant - uniform). The control runs the same periods and phases "
        "without the group fetches: what the samples' news adds beyond moving fetches between pages. "
        "Median [min-max] over seeds " + ", ".join(str(s) for s in sorted({r["seed"] for r in rows}))
        + "; every combination of the grid is shown. " + "; ".join(described) + ".",
        "",
        table(rows),
        "",
        f"Machine: {machine()}.",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--write", action="store_true", help="write docs/ (not with --quick)")
    parser.add_argument("--budgets", type=float, nargs="*", default=[0.01, 0.03, 0.1, 0.3])
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    args = parser.parse_args(argv)
    populations = {"docs_sites": docs_sites.population(8 if args.quick else 1)}
    if not args.quick:
        populations["web_like"] = web_like.population(1)
    budgets, seeds = ((0.03,), (0,)) if args.quick else (args.budgets, args.seeds)
    rows, described = [], []
    for kind, pages in populations.items():
        group = groups_of(pages, kind)
        sizes = np.bincount(np.unique(group, return_inverse=True)[1])
        led = int(sizes[sizes >= MIN_GROUP].sum())
        described.append(f"{kind}: {len(pages)} pages in {len(sizes)} groups, {led} of them in groups "
                         f"of >= {MIN_GROUP}")
        print(described[-1], flush=True)
        for b, s in itertools.product(budgets, seeds):
            rows += run(pages, kind, b, s)
            print(f"  {kind} B={b:g} seed {s} done", flush=True)
    text = markdown(rows, described)
    print(text)
    if args.write and not args.quick:
        from _report import write_json, write_section

        write_json("sample_then_revisit", {"rows": rows, "populations": described})
        write_section("sample_then_revisit", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Estimator accuracy and cost: seed 004's experiments (Section 4), repeated
under strictly periodic fetching and non-Poisson change processes.

    python benchmarks/estimators.py            # full run (100 runs each), writes docs/
    python benchmarks/estimators.py --quick    # small sizes, prints only (CI)

Writes docs/benchmarks/estimators.json (keys: rmse_k1000, rmse_ratio_to_mle_k1000,
periodic_bias, us_per_update), a section of docs/BENCHMARKS.md and plots
docs/img/estimators_*.png in the style of the paper's Figures 2-5.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _report  # noqa: E402

from frontier_rate.math.estimators import make_estimator, trajectory  # noqa: E402
from frontier_rate.math.updates import mle_solve, mm_solve  # noqa: E402

ONLINE = ["naive", "lln", "sa", "sam", "interval"]
OFFLINE = ["mle", "mm"]
ALL = ONLINE + OFFLINE
# The paper's step sizes (seed 004, Section 4): α_k ≡ 1, η = 0.75, β = 0.6, ω = 1.
PAPER = {"alpha": "one", "eta": 0.75, "beta": 0.6, "omega": 1.0}
SETTINGS = {  # name: (Δ, p)
    "D5_p3": (5.0, 3.0),
    "D500_p3": (500.0, 3.0),
    "D500_p50": (500.0, 50.0),
    "D500_p10": (500.0, 10.0),
}
WIKI = {"wiki_p0.5": (1.1098, 0.5), "wiki_p0.1": (1.1098, 0.1)}
WIKI_CHANGES = 4043


# ----------------------------------------------------------------------------
# Simulation: change indicators and intervals.
# ----------------------------------------------------------------------------

def change_times(model: str, rate: float, horizon: float, rng: np.random.Generator) -> np.ndarray:
    """Change times in [0, horizon] with long-run mean ``rate``.

    poisson: a Poisson process. bursty: Poisson burst starts at rate/5, each
    burst 5 edits on average (geometric) within ~1% of a mean gap. periodic:
    period 1/rate with ±10% uniform jitter.
    """
    if model == "poisson":
        n = rng.poisson(rate * horizon)
        return np.sort(rng.uniform(0.0, horizon, n))
    if model == "bursty":
        mean_burst = 5.0
        starts = np.sort(rng.uniform(0.0, horizon, rng.poisson(rate / mean_burst * horizon)))
        sizes = rng.geometric(1.0 / mean_burst, starts.size)
        offsets = rng.exponential(0.01 / rate, sizes.sum())
        return np.sort(np.repeat(starts, sizes) + offsets)
    if model == "periodic":
        n = int(rate * horizon) + 2
        base = (np.arange(n) + rng.uniform()) / rate
        return np.sort(base + rng.uniform(-0.1, 0.1, n) / rate)
    raise ValueError(f"unknown change model {model!r}")


def observations(delta: float, p: float, k: int, runs: int, rng: np.random.Generator, *,
                 fetch: str = "poisson", changes: str = "poisson") -> tuple[np.ndarray, np.ndarray]:
    """(changed, intervals), each shape (runs, k)."""
    if fetch == "poisson":
        tau = rng.exponential(1.0 / p, (runs, k))
    elif fetch == "periodic":
        tau = np.full((runs, k), 1.0 / p)
    else:
        raise ValueError(f"unknown fetch model {fetch!r}")
    if changes == "poisson":
        # For Poisson changes, I_k given τ_k is Bernoulli(1 − e^{−Δτ_k}) independently: exact and cheap.
        changed = rng.random((runs, k)) < -np.expm1(-delta * tau)
        return changed.astype(np.int8), tau
    changed = np.empty((runs, k), dtype=np.int8)
    for r in range(runs):
        t = np.cumsum(tau[r])
        events = change_times(changes, delta, t[-1], rng)
        counts = np.diff(np.searchsorted(events, np.concatenate(([0.0], t)), side="right"))
        changed[r] = counts > 0
    return changed, tau


def offline_at(name: str, changed: np.ndarray, tau: np.ndarray, ks: np.ndarray) -> np.ndarray:
    """MLE / MM estimates after the first k observations, for each k in ks (shape runs x len(ks))."""
    out = np.empty((changed.shape[0], ks.size))
    for r in range(changed.shape[0]):
        for j, k in enumerate(ks):
            c, t = changed[r, :k].astype(bool), tau[r, :k]
            if name == "mle":
                out[r, j] = mle_solve(t[c], float(t[~c].sum()))
            else:
                out[r, j] = mm_solve(t, float((~c).sum()))
    return out


def estimates_at(changed, tau, p, ks, names, params) -> dict[str, np.ndarray]:
    """Estimates of each estimator at observation counts ks (1-based): runs x len(ks)."""
    result = {}
    for name in names:
        if name in OFFLINE:
            result[name] = offline_at(name, changed, tau, ks)
        else:
            traj = trajectory(name, changed, intervals=tau, p=p, **params)
            result[name] = traj[:, ks - 1]
    return result


def fisher_per_fetch(delta: float, p: float, fetch: str) -> tuple[float, float]:
    """Fisher information about Δ in one fetch: (indicator only, indicator + interval)."""
    indicator_only = p / (delta * (delta + p) ** 2)
    if fetch == "periodic":
        t = 1.0 / p
        return indicator_only, t * t / np.expm1(delta * t)
    tau = np.linspace(1e-9, 60.0 / p, 400001)
    with np.errstate(over="ignore"):
        dens = p * np.exp(-p * tau) * tau * tau / np.expm1(delta * tau)
    return indicator_only, float(np.trapezoid(dens, tau))


# ----------------------------------------------------------------------------
# Experiments.
# ----------------------------------------------------------------------------

def accuracy(delta, p, k, runs, rng, *, fetch="poisson", changes="poisson", names=ALL, params=PAPER):
    ks = np.unique(np.round(np.logspace(0, np.log10(k), 25)).astype(int))
    changed, tau = observations(delta, p, k, runs, rng, fetch=fetch, changes=changes)
    est = estimates_at(changed, tau, p, ks, names, params)
    fi_ind, fi_int = fisher_per_fetch(delta, p, fetch)
    return {
        "ks": ks,
        "est": est,
        "rmse": {n: np.sqrt(((e - delta) ** 2).mean(axis=0)) for n, e in est.items()},
        "band": {n: np.percentile(e, [2.5, 97.5], axis=0) for n, e in est.items()},
        "bias": {n: e.mean(axis=0) / delta - 1.0 for n, e in est.items()},
        "crb_indicator": np.sqrt(1.0 / (fi_ind * ks)),
        "crb_interval": np.sqrt(1.0 / (fi_int * ks)),
        "single": {n: e[0] for n, e in est.items()},
    }


def wiki_trace(delta, p, runs, rng):
    """The paper's Expt. 1 stand-in: a Poisson trace of 4043 changes at Δ = 1.1098, crawled at p."""
    horizon = rng.gamma(WIKI_CHANGES, 1.0 / delta)
    k = max(10, int(p * horizon))
    return accuracy(delta, p, k, runs, rng)


def cost(names, n_updates: int, rng) -> dict[str, dict[str, float]]:
    """µs per update: scalar ``update`` calls and vectorised ``trajectory`` (per observation)."""
    changed, tau = observations(5.0, 3.0, n_updates, 1, rng)
    out = {}
    for name in names:
        est = make_estimator(name, p=3.0, **PAPER)
        n_scalar = n_updates if name not in OFFLINE else min(n_updates, 300)
        t0 = time.perf_counter()
        for c, t in zip(changed[0, :n_scalar], tau[0, :n_scalar], strict=True):
            est.update(bool(c), float(t))
        scalar = (time.perf_counter() - t0) / n_scalar * 1e6
        vector = float("nan")
        if name not in OFFLINE:
            many_c, many_t = observations(5.0, 3.0, n_updates, 100, rng)
            t0 = time.perf_counter()
            trajectory(name, many_c, intervals=many_t, p=3.0, **PAPER)
            vector = (time.perf_counter() - t0) / many_c.size * 1e6
        out[name] = {"scalar": scalar, "vectorised": vector}
    return out


def mle_growth(rng, ks=(10, 100, 1000, 10000)) -> dict[int, float]:
    """µs for one offline MLE re-solve after k observations: grows with k."""
    changed, tau = observations(5.0, 3.0, max(ks), 1, rng)
    out = {}
    for k in ks:
        c, t = changed[0, :k].astype(bool), tau[0, :k]
        reps = max(3, 2000 // k)
        t0 = time.perf_counter()
        for _ in range(reps):
            mle_solve(t[c], float(t[~c].sum()))
        out[k] = (time.perf_counter() - t0) / reps * 1e6
    return out


def step_size_study(runs, rng, k):
    """RMSE at k under (Δ, p) = (500, 10) for several α, η, β (seed 004, Expt. 3)."""
    delta, p = SETTINGS["D500_p10"]
    changed, tau = observations(delta, p, k, runs, rng)
    rows = []
    variants = [("lln", {"alpha": a}) for a in ("one", "log", "sqrt")]
    variants += [("sa", {"eta": e}) for e in (0.6, 0.75, 0.8, 1.0)]
    sam_steps = ((0.75, 0.6), (0.8, 0.6), (0.75, 0.5), (0.8, 0.5))
    variants += [("sam", {"eta": e, "beta": b, "omega": 1.0}) for e, b in sam_steps]
    for name, params in variants:
        traj = trajectory(name, changed, intervals=tau, p=p, **params)
        rmse = float(np.sqrt(((traj[:, -1] - delta) ** 2).mean()))
        rows.append([name, ", ".join(f"{a}={v}" for a, v in params.items()), rmse])
    return rows


# ----------------------------------------------------------------------------
# Plots (paper's Figures 2-5: one trajectory, 95% band, RMSE).
# ----------------------------------------------------------------------------

def plot(name: str, delta: float, res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = res["ks"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for est, values in res["single"].items():
        axes[0].plot(ks, values, label=est)
    axes[0].axhline(delta, color="k", lw=0.8, ls="--")
    axes[0].set(title=f"{name}: single run", xscale="log", xlabel="k")
    for est in ("lln", "sam", "interval", "mle"):
        if est in res["band"]:
            lo, hi = res["band"][est]
            axes[1].fill_between(ks, lo, hi, alpha=0.25, label=est)
    axes[1].axhline(delta, color="k", lw=0.8, ls="--")
    axes[1].set(title="95% band over runs", xscale="log", xlabel="k")
    for est, values in res["rmse"].items():
        axes[2].plot(ks, values, label=est)
    axes[2].plot(ks, res["crb_indicator"], "k:", label="CRB (indicator)")
    axes[2].plot(ks, res["crb_interval"], "k--", label="CRB (interval)")
    axes[2].set(title="RMSE", xscale="log", yscale="log", xlabel="k")
    for ax in axes:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def at_k(res, k):
    """Index into res['ks'] of the largest checkpoint <= k."""
    return int(np.searchsorted(res["ks"], k, side="right") - 1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes (CI); writes nothing unless --write")
    ap.add_argument("--write", action="store_true", help="write docs/ even with --quick")
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--seed", type=int, default=2026)
    args = ap.parse_args(argv)
    runs = args.runs or (8 if args.quick else 100)
    k_main = 200 if args.quick else 1000
    k_bias = 500 if args.quick else 10_000
    write = args.write or not args.quick
    rng = np.random.default_rng(args.seed)

    results, rmse_k, ratio = {}, {}, {}
    for name, (delta, p) in {**SETTINGS, **WIKI}.items():
        t0 = time.perf_counter()
        res = wiki_trace(delta, p, runs, rng) if name in WIKI else accuracy(delta, p, k_main, runs, rng)
        results[name] = res
        j = at_k(res, k_main)
        rmse_k[name] = {e: float(res["rmse"][e][j]) for e in ALL}
        best_online = min(rmse_k[name][e] for e in ONLINE if e != "naive")
        ratio[name] = best_online / rmse_k[name]["mle"]
        print(f"{name:10s} k={res['ks'][j]:5d}  " + "  ".join(f"{e}={rmse_k[name][e]:.4g}" for e in ALL)
              + f"  best/MLE={ratio[name]:.3f}  ({time.perf_counter() - t0:.1f}s)", flush=True)

    periodic = {}
    for dt in (0.1, 1.0, 3.0):
        res = accuracy(dt, 1.0, k_bias, max(runs // 2, 4), rng, fetch="periodic", names=ONLINE)
        periodic[dt] = {e: float(res["bias"][e][-1]) for e in ONLINE}
        print(f"periodic Δτ={dt}: " + "  ".join(f"{e}={v:+.3f}" for e, v in periodic[dt].items()), flush=True)
    periodic_bias = {e: max(abs(periodic[dt][e]) for dt in periodic) for e in ONLINE}

    nonpoisson = {}
    for model in ("bursty", "periodic"):
        res = accuracy(5.0, 3.0, k_main, max(runs // 4, 4), rng, changes=model)
        nonpoisson[model] = {e: float(res["bias"][e][-1]) for e in ALL}
        print(f"{model} changes (Δ=5, p=3): " + "  ".join(f"{e}={v:+.3f}" for e, v in nonpoisson[model].items()))

    costs = cost(ALL, 2000 if args.quick else 10_000, rng)
    growth = mle_growth(rng, (10, 100, 1000) if args.quick else (10, 100, 1000, 10_000))
    steps = step_size_study(runs, rng, k_main)
    for e, c in costs.items():
        print(f"cost {e}: {c['scalar']:.2f} µs/update scalar, {c['vectorised']:.3f} µs vectorised")

    if not write:
        return 0
    for name, res in results.items():
        plot(name, {**SETTINGS, **WIKI}[name][0], res, _report.IMG / f"estimators_{name}.png")
    _report.write_json("estimators", {
        "rmse_k1000": rmse_k,
        "rmse_ratio_to_mle_k1000": ratio,
        "periodic_bias": periodic_bias,
        "us_per_update": {e: c["scalar"] for e, c in costs.items()},
        "us_per_update_vectorised": {e: c["vectorised"] for e, c in costs.items() if e in ONLINE},
        "mle_us_per_resolve": {str(k): v for k, v in growth.items()},
        "nonpoisson_bias": nonpoisson,
        "runs": runs,
    })
    md = [f"## Estimators (`benchmarks/estimators.py`, {runs} runs per setting, seed {args.seed})", ""]
    md.append("RMSE of the estimate at k = 1000 fetches (the Wikipedia stand-ins: at the last fetch of the "
              "trace if fewer), Poisson fetching, the paper's step sizes. CRB: Cramér–Rao bound with the "
              "change indicator only, and with the intervals too (what MLE and `interval` can use).")
    md.append("")
    rows = []
    for name, res in results.items():
        j = at_k(res, k_main)
        rows.append([name, int(res["ks"][j])] + [rmse_k[name][e] for e in ALL]
                    + [float(res["crb_indicator"][j]), float(res["crb_interval"][j]), ratio[name]])
    md.append(_report.table(["setting", "k"] + ALL + ["CRB ind.", "CRB int.", "best online / MLE"], rows))
    md += ["", "RMSE at k = 10 and 100:", ""]
    rows = []
    for name, res in results.items():
        for k in (10, 100):
            j = at_k(res, k)
            rows.append([name, int(res["ks"][j])] + [float(res["rmse"][e][j]) for e in ALL])
    md.append(_report.table(["setting", "k"] + ALL, rows))
    md += ["", f"Relative bias (mean estimate / Δ − 1) at k = {k_bias} under strictly periodic fetching "
           "(interval 1/p, the paper's estimators fed that p):", ""]
    md.append(_report.table(["Δτ"] + ONLINE, [[dt] + [periodic[dt][e] for e in ONLINE] for dt in periodic]))
    md += ["", "Relative bias at k = 1000 under non-Poisson change processes (Δ = long-run mean edit rate = 5, "
           "Poisson fetching at p = 3). Bursts hide edits from every estimator: a fetch sees at most one change.", ""]
    md.append(_report.table(["changes"] + ALL, [[m] + [nonpoisson[m][e] for e in ALL] for m in nonpoisson]))
    md += ["", "Step-size study at (Δ, p) = (500, 10), RMSE at k = 1000:", ""]
    md.append(_report.table(["estimator", "parameters", "RMSE"], steps))
    md += ["", "Cost per update (µs): scalar `update()` and vectorised `trajectory()` over 100 runs; the offline "
           "MLE re-solves from all k observations each time:", ""]
    md.append(_report.table(["estimator", "scalar µs", "vectorised µs"],
                            [[e, c["scalar"], c["vectorised"]] for e, c in costs.items()]))
    md += ["", _report.table(["k", "MLE re-solve µs"], [[k, v] for k, v in growth.items()]), ""]
    md.append("Plots: " + ", ".join(f"![{n}](img/estimators_{n}.png)" for n in results))
    _report.write_section("estimators", "\n".join(md))
    print("wrote docs/benchmarks/estimators.json and docs/BENCHMARKS.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

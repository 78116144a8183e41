"""Offline simulator: change models that are not Poisson, learned from the change bit alone.

Work in progress (issue 26, phase 1).
"""

from __future__ import annotations

import heapq
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from policy import capped_frequencies  # noqa: E402
from real_traces import World  # noqa: E402


class Static:
    """A fixed periodic plan (intervals per page), first due at a random phase, then every interval
    after the previous due time (``policy.run_baseline``'s periodic rule)."""

    def __init__(self, world: World, interval: np.ndarray, seed_offset: int = 1) -> None:
        self.interval = np.asarray(interval, dtype=float)
        rng = np.random.default_rng(world.seed + seed_offset)
        finite = np.isfinite(self.interval)
        self.first = np.where(finite, rng.random(world.n) * np.where(finite, self.interval, 1.0), np.inf)

    def start(self, sim: Sim) -> np.ndarray:
        return self.first.copy()

    def fetched(self, sim: Sim, i: int, t: float, due: float, changed: bool) -> float:
        return due + self.interval[i]


class Sim:
    """Event-driven dispatch under a token bucket (rate R, burst ``world.burst``) and one fetch per
    host per ``host_delay``, due pages in due order; with ``fill``, a token that no due page can use
    goes to the earliest-due page of a host that may fetch (the engine's ``fill_budget``)."""

    def __init__(self, world: World, policy, fill: bool = False) -> None:
        self.w, self.policy, self.fill = world, policy, fill
        n, hosts = world.n, world.hosts
        self.due = np.full(n, np.inf)
        self.stamp = np.zeros(n, dtype=np.int64)
        self.queues: list[list] = [[] for _ in range(hosts)]
        self.free = np.zeros(hosts)
        self.last_fetch = np.full(n, np.nan)
        self.version = np.zeros(n, dtype=np.int64)
        self.out: list[list[float]] = [[] for _ in range(n)]

    def set_due(self, i: int, t: float) -> None:
        self.stamp[i] += 1
        self.due[i] = t
        if np.isfinite(t):
            heapq.heappush(self.queues[self.w.host[i]], (t, int(self.stamp[i]), i))

    def _head(self, h: int):
        q = self.queues[h]
        while q and q[0][1] != self.stamp[q[0][2]]:
            heapq.heappop(q)
        return q[0] if q else None

    def run(self) -> list[np.ndarray]:
        w = self.w
        for i, d in enumerate(self.policy.start(self)):
            self.set_due(i, float(d))
        tokens, last = w.burst, 0.0
        hosts = range(w.hosts)
        while True:
            heads = [self._head(h) for h in hosts]
            live = [h for h in hosts if heads[h] is not None]
            if not live:
                break
            t_token = last if tokens >= 1.0 else last + (1.0 - tokens) / w.budget
            h_due = min(live, key=lambda h: (max(heads[h][0], self.free[h]), h))
            key = max(heads[h_due][0], self.free[h_due])
            if self.fill:
                t_free = max(t_token, min(self.free[h] for h in live))
                if key > t_free:
                    ready = [h for h in live if self.free[h] <= t_free]
                    h_due = min(ready, key=lambda h: (heads[h][0], h))
                    key = t_free
            t = max(t_token, key)
            if t >= w.t_end:
                break
            due, _, i = heads[h_due]
            heapq.heappop(self.queues[h_due])
            self.stamp[i] += 1
            self.due[i] = np.inf
            self.out[i].append(t)
            tokens, last = min(w.burst, tokens + (t - last) * w.budget) - 1.0, t
            self.free[h_due] = t + w.host_delay
            v = int(np.searchsorted(w.changes[i], t, side="right"))
            changed = v != self.version[i] and not np.isnan(self.last_fetch[i])
            self.version[i] = v
            nxt = self.policy.fetched(self, i, t, due, bool(changed))
            self.last_fetch[i] = t
            self.set_due(i, nxt)
        return [np.array(f) for f in self.out]


def uniform_intervals(world: World) -> np.ndarray:
    return 1.0 / capped_frequencies(world, np.ones(world.n))

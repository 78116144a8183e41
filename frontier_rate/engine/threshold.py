"""The threshold ν and the host thresholds: re-solved from the aggregates Redis keeps,
published for every process, and read back by each.

ν comes from the policy cells (``agg``, O(K)); host caps enter the solve through each
capped host's own cells (``ha``), read only for the hosts that could pass their cap (the
host page index, ``host_candidates``). ``math.budget.solve_threshold`` does the math; this
object reads its inputs, publishes ν and τ_h (``fr:{ns}:nu``, ``fr:{ns:s}:hnu``) and
decides when to solve again.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping

import numpy as np

from frontier_rate.engine.session import Session
from frontier_rate.engine.shards import ShardCalls, log_quarantined
from frontier_rate.math.budget import solve_threshold
from frontier_rate.store import wire

logger = logging.getLogger(__name__)

RESOLVE_EVERY = 60.0
"""Seconds of clock time between re-solves of ν (at least)."""
RESOLVE_SOON = 5.0
"""Seconds between re-solves while the last one found too few pages to use the budget."""
RESOLVE_FETCHES = 10.0
"""...and at least the time the budget takes for this many fetches: ν moves only as
observations come in, so a small budget re-solves less often (10 / budget seconds)."""
NU_CACHE = 1.0
"""Seconds of clock time a process reuses ν before reading it again."""
NU_FIELDS = ("nu", "solved_at", "budget", "status", "settings", "max_interval_effective", "pages")
"""What every lease call reads of fr:{ns}:nu: the threshold, when it was solved, the budget
(namespaces from before shared settings), the solve's status, the count of settings changes,
the longest interval pages plan with now (``effective_max_interval``), the pages the solve
counted (``session.starting_rate``)."""
FLOOR_SHARE = 0.9
"""The most of the budget the ``max_interval`` floor (every page at least once per
max_interval, so that its estimate keeps learning) may take; past it the floor is
stretched (``effective_max_interval``) to what this share of the budget pays, and the rest
goes by value (issue 35). Measured on benchmarks/web_like.py, seeds 0-4, ours / uniform
at 0.03 and 0.01 fetches/page/day (median [min-max]): 1.0 gave 0.999 [0.991-1.008] and
1.024 [1.002-1.039]; 0.95 1.009 [1.003-1.013] and 1.023 [0.999-1.044]; 0.9 1.010
[1.008-1.019] and 1.020 [0.995-1.044]; 0.8 1.015 [1.011-1.025] and 1.018 [0.991-1.045]
(2026-11-28, once never-changed pages planned with their own rates: index.INTERVAL_FLOOR_SPAN).
Earlier, with every page floored at one change per max_interval, 0.5 and 0.8 measured worse
at 0.03 (0.967 and 0.982 of uniform against 0.993, one draw each)."""


def effective_max_interval(pages: float, budget: float, max_interval: float) -> float:
    """The longest planned interval: ``max_interval``, unless fetching every one of
    ``pages`` once per ``max_interval`` would take more than ``FLOOR_SHARE`` of ``budget``
    (fetches/s); then the interval at which that floor takes exactly ``FLOOR_SHARE`` of it,
    ``pages / (FLOOR_SHARE · budget)`` (1.11 times the uniform interval at 0.9: no page
    waits much longer than uniform revisiting would make it wait); ν orders the pages and gives
    the budget the floor leaves (and the pages worth more than ν) by value (issue 35: at a fetch per page
    per month or less, a 30-day floor asked for more fetches than the budget paid, and the
    bound and the budget fought over which pages were fetched)."""
    if pages <= 0 or budget <= 0:
        return max_interval
    return max(max_interval, pages / (FLOOR_SHARE * budget))


HostTable = tuple[list[tuple[int, str]], np.ndarray, np.ndarray]
"""(shard, host) of each host; rows (pages, Σλ, Σw, host index) of their cells; their caps."""


class Threshold:
    """ν as this process plans with it, and the re-solve that publishes it."""

    def __init__(self, session: Session, calls: ShardCalls) -> None:
        self.session = session
        self.calls = calls
        self.nu = 0.0
        self._nu_read_at = -math.inf
        self.solved_at = -math.inf
        self.refresh_pending: list[int] = []
        """Shards whose queued pages are still to be re-planned under the current ν."""
        self.max_interval_effective: float | None = None
        """The longest planned interval now (``effective_max_interval``); None before a solve."""
        self._unspent = False
        """Did the last solve here leave budget unspent (status "under_budget")?"""

    # -- reading ν ------------------------------------------------------------------------

    def maybe_resolve(self, now: float) -> None:
        """Re-solve every ``resolve_every()`` s of clock time; otherwise reuse the published ν."""
        if abs(now - self._nu_read_at) < NU_CACHE:
            return
        self.use_published(self.session.client.hmget(self.session.keys.nu, *NU_FIELDS), now)

    def use_published(self, raw: list, now: float) -> None:
        """Take up the published ν (``NU_FIELDS`` as read), or re-solve when it is stale."""
        if len(raw) > 4:  # NU_FIELDS: the count of shared settings changes
            self.session.reload_settings(raw[4])
        if len(raw) > 5:  # the stretched max_interval floor, as the last solve decided it
            self._use_max_interval(None if raw[5] is None else float(raw[5]))
        if len(raw) > 6 and raw[6] is not None:  # where new pages start, as the last solve counted
            self.session.count_pages(float(raw[6]))
        # stale after resolve_every() (RESOLVE_SOON while the last solve found the pages short
        # of the budget: a crawl that is still discovering them); a clock far behind the solve
        # (another clock) re-solves too
        every = RESOLVE_SOON if raw[3] in (b"under_budget", b"empty") else self.resolve_every()
        if raw[0] is None or raw[1] is None or abs(now - float(raw[1])) >= every:
            self.resolve(now)
            return
        self.solved_at = float(raw[1])
        self._set_nu(float(raw[0]), now)

    def resolve_every(self) -> float:
        return max(RESOLVE_EVERY, RESOLVE_FETCHES / self.session.settings["budget"])

    def _set_nu(self, nu: float, now: float) -> None:
        if nu != self.nu:
            self.refresh_pending = list(range(self.session.shards))
            self.session.header.update(nu=nu)
        self.nu, self._nu_read_at = nu, now

    def refreshed(self, shard: int, reply: list) -> None:
        """Book-keeping after a background refresh step (lua/refresh.lua) on ``shard``."""
        seen, moved, wrapped, quarantined = reply
        log_quarantined(quarantined)
        if self.refresh_pending and self.refresh_pending[0] == shard:
            self.refresh_pending.pop(0)
            if not wrapped:
                self.refresh_pending.append(shard)
        if moved:
            logger.debug("refresh: shard %d, %d pages looked at, %d moved", shard, seen, moved)

    # -- solving ---------------------------------------------------------------------------

    def resolve(self, now: float) -> float:
        """Re-solve ν from the cell and host aggregates (math.budget.solve_threshold) and
        publish it, with τ_h for every host whose delay caps it (lua ``host_nu``)."""
        settings = self.session.settings
        with self.session.errors("resolve"):
            cells = self.cells()
            capped: dict[int, dict[str, str]] = defaultdict(dict)
            pages = sum(c[0] for c in cells.values())  # sources are not in the cells
            longest = effective_max_interval(pages, settings["budget"], settings["max_interval"])
            self._use_max_interval(longest, log=True)
            self.session.count_pages(pages)
            if cells:
                names, hosts, caps = self.host_candidates(cells)
                sol = solve_threshold(cells, settings["budget"], settings["min_interval"],
                                      longest, self.session.options.objective,
                                      guess=self.nu or None, hosts=hosts, caps=caps,
                                      chance=self.session.options.min_change_chance)
                nu, rate, status = sol.nu, sol.rate, sol.status
                for (shard, host), nu_h in zip(names, sol.host_nu, strict=True):
                    if nu_h > nu:
                        capped[shard][host] = repr(min(float(nu_h), 1e300))
            else:
                nu, rate, status = 0.0, 0.0, "empty"
            self._publish(nu, rate, status, capped, now, longest, pages)
        self._say_unspent(status, rate)
        self._set_nu(nu, now)
        self.solved_at = now
        logger.debug("re-solved nu=%g (planned %g fetches/s, %s)", nu, rate, status)
        return nu

    def _say_unspent(self, status: str, rate: float) -> None:
        """One INFO line when the pages stop being worth the whole budget, and one when they
        are again (issue 60): ν = 0 and every page planned at its shortest worthwhile
        interval (``math.index.worth_interval``) still asks for less than the budget."""
        unspent = status == "under_budget"
        budget = self.session.settings["budget"]
        if unspent and not self._unspent:
            logger.info("namespace %r: the pages are worth %.3g revisits/s, %.1f%% of the budget "
                        "(%g/s): no page is revisited before min_interval (%g s) nor before the "
                        "chance that it changed reaches %g (min_change_chance); the rest of the "
                        "budget is left unspent (a lower min_change_chance spends more of it)",
                        self.session.namespace, rate, 100.0 * rate / budget, budget,
                        self.session.settings["min_interval"],
                        self.session.options.min_change_chance)
        elif self._unspent and not unspent:
            logger.info("namespace %r: the pages are worth the whole budget again (%g/s)",
                        self.session.namespace, budget)
        self._unspent = unspent

    def _use_max_interval(self, longest: float | None, log: bool = False) -> None:
        """Plan with ``longest`` as the max_interval of every script call (the header), or
        the shared setting when None; ``log``: say so when it starts or stops differing
        from the setting (issue 35)."""
        setting = self.session.settings["max_interval"]
        longest = setting if longest is None else max(longest, setting)
        before = self.max_interval_effective
        if log and longest > setting and (before is None or before <= setting):
            logger.warning("namespace %r: the budget cannot fetch every page once per max_interval "
                           "(%g s) within %g of it; pages worth less than the threshold are fetched "
                           "once per %g s and the rest of the budget goes by value",
                           self.session.namespace, setting, FLOOR_SHARE, longest)
        elif log and longest == setting and before is not None and before > setting:
            logger.warning("namespace %r: the budget pays max_interval (%g s) again",
                           self.session.namespace, setting)
        self.max_interval_effective = longest
        self.session.header.update(max_interval=longest)

    def _publish(self, nu: float, rate: float, status: str,
                 capped: Mapping[int, Mapping[str, str]], now: float,
                 longest: float | None = None, pages: float = 0.0) -> None:
        """Write ν and every host's τ_h, in one transaction where Redis allows it (not across
        a cluster's slots): a write Redis refuses (maxmemory, read-only) then aborts them all,
        and no host loses its threshold while ν stays as it was."""
        keys = self.session.keys
        pipe = self.session.client.pipeline(transaction=not self.session.scripts.cluster)
        pipe.hset(keys.nu, mapping={
            "nu": repr(nu), "solved_at": repr(now), "planned_rate": repr(rate),
            "status": status, "capped_hosts": str(sum(len(c) for c in capped.values())),
            "max_interval_effective": repr(longest if longest is not None
                                           else self.session.settings["max_interval"]),
            "pages": repr(float(pages))})
        for shard in range(self.session.shards):
            pipe.delete(keys.host_nu(shard))
            if capped.get(shard):
                pipe.hset(keys.host_nu(shard), mapping=capped[shard])
        pipe.execute()

    def cells(self) -> dict[int, tuple[float, float, float]]:
        """The policy cells summed over shards: id -> (pages, Σλ, Σw) (O(K) reads)."""
        keys = self.session.keys
        pipe = self.session.client.pipeline(transaction=False)
        for shard in range(self.session.shards):
            pipe.hgetall(keys.agg(shard))
        cells: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
        column = {b"n": 0, b"l": 1, b"w": 2}
        with self.session.errors("cells"):
            aggs = pipe.execute()
        for agg in aggs:
            for field, value in agg.items():
                kind, cell = field.split(b":", 1)
                cells[int(cell)][column[kind]] += float(value)
        return {c: (v[0], max(v[1], 0.0), max(v[2], 0.0)) for c, v in cells.items()
                if v[0] > 0.5}

    def host_table(self) -> HostTable:
        """Every host with pages as (shard, host); rows (pages, Σλ, Σw, host index) of each
        host's own policy cells; and each host's cap in fetches/s from its delay (a delay of
        0 is no cap). O(host cells) reads: for inspection; the re-solve reads
        ``host_candidates``."""
        keys = self.session.keys
        pipe = self.session.client.pipeline(transaction=False)
        for shard in range(self.session.shards):
            pipe.hgetall(keys.host_agg(shard))
            pipe.hgetall(keys.hosts(shard))
        with self.session.errors("host_table"):
            replies = pipe.execute()
        table = _HostTable()
        for shard in range(self.session.shards):
            table.add(shard, replies[2 * shard].items(), replies[2 * shard + 1], self._host_cap)
        return table.result()

    def host_candidates(self, cell_ids: Iterable[int]) -> HostTable:
        """``host_table`` for the hosts whose pages could ever ask for more than their cap.

        A page plans at most one fetch per ``min_interval``, so a host with ``n`` pages
        and delay ``d`` can exceed its cap 1/d only when n·d > min_interval; the host page
        index (lua/lib.lua HOST_PAGES, HOST_SWEEP) lists those hosts, and only their cells
        are read: O(K + their cells), not O(hosts). ``cell_ids``: the policy cells that
        hold pages (``cells``)."""
        wanted, sizes = self._hosts_over_bound()
        fields = [str(c).encode() + b":" for c in sorted(set(cell_ids))]
        keys = self.session.keys
        pipe = self.session.client.pipeline(transaction=False)
        for shard, hosts in wanted.items():
            if len(hosts) * len(fields) >= sizes[shard]:  # most of the shard: read it whole
                pipe.hgetall(keys.host_agg(shard))
            else:
                pipe.hmget(keys.host_agg(shard), [c + h for h in hosts for c in fields])
            pipe.hmget(keys.hosts(shard), hosts)
        replies = iter(pipe.execute())
        table = _HostTable()
        for shard, hosts in wanted.items():
            cells, delays = next(replies), dict(zip(hosts, next(replies), strict=True))
            if isinstance(cells, dict):
                items = ((field, raw) for field, raw in cells.items()
                         if field.partition(b":")[2] in delays)
            else:
                items = zip((c + h for h in hosts for c in fields), cells, strict=True)
            table.add(shard, items, delays, self._host_cap)
        return table.result()

    def _hosts_over_bound(self) -> tuple[dict[int, list[bytes]], dict[int, int]]:
        """Per shard the hosts the host page index lists above the cap bound, and how many
        host cells the shard holds (the index is built first where a shard lacks it)."""
        min_interval = self.session.settings["min_interval"]
        default_delay = self.session.settings["min_host_delay"]
        # a little below the bound, so that rounding never leaves out a host at it
        bound = min_interval * (1 - 1e-9)
        keys = self.session.keys

        def read() -> list:
            pipe = self.session.client.pipeline(transaction=False)
            for shard in range(self.session.shards):
                pipe.hget(keys.cnt(shard), "hi")
                if default_delay > 0:
                    pipe.zrangebyscore(keys.host_pages(shard), f"({bound / default_delay!r}",
                                       "+inf")
                pipe.zrangebyscore(keys.host_sweep(shard), f"({bound!r}", "+inf")
                pipe.hlen(keys.host_agg(shard))
            return pipe.execute()

        replies = read()
        per_shard = len(replies) // self.session.shards
        missing = [s for s in range(self.session.shards) if replies[s * per_shard] != b"1"]
        if missing:
            self._build_host_index(missing)
            replies = read()
        replies = iter(replies)
        wanted: dict[int, list[bytes]] = {}
        sizes: dict[int, int] = {}
        for shard in range(self.session.shards):
            next(replies)
            hosts = set(next(replies)) if default_delay > 0 else set()
            hosts.update(next(replies))
            sizes[shard] = next(replies)
            if hosts:
                wanted[shard] = sorted(hosts)
        return wanted, sizes

    def _build_host_index(self, shards: list[int]) -> None:
        """Build the host page index of ``shards`` (lua/host_index.lua): once per
        namespace, and again after its data was lost; later scripts keep it."""
        now = self.session.now(None)
        built = self.session.scripts.run(
            lambda pipe: [self.calls.call(pipe, "host_index", shard, now, [])
                          for shard in shards])
        logger.info("built the host page index of %d shards", sum(map(bool, built)))

    def _host_cap(self, packed: bytes | None) -> float:
        """Fetches/s a host's delay allows (lua/lib_hosts.lua host_get: (next_allowed, delay))."""
        delay = wire.host_delay(packed, self.session.settings["min_host_delay"])
        return 1.0 / delay if delay > 0 else math.inf


class _HostTable:
    """Accumulates ``host_table`` rows from (field "<cell>:<host>", packed cells) items."""

    def __init__(self) -> None:
        self.names: list[tuple[int, str]] = []
        self.caps: list[float] = []
        self.rows: list[tuple[float, float, float, int]] = []

    def add(self, shard: int, items: Iterable[tuple[bytes, bytes | None]],
            delays: Mapping[bytes, bytes | None], cap: Callable[[bytes | None], float]) -> None:
        index: dict[bytes, int] = {}
        for field, raw in items:
            _, _, host = field.partition(b":")
            if raw is None or len(raw) != wire.HOST_AGG.size or not host:
                continue
            n, lam, w = wire.HOST_AGG.unpack(raw)
            if not (n > 0.5 and math.isfinite(lam) and math.isfinite(w)):
                continue
            if host not in index:
                index[host] = len(self.names)
                self.names.append((shard, host.decode("utf-8", "replace")))
                self.caps.append(cap(delays.get(host)))
            self.rows.append((n, max(lam, 0.0), max(w, 0.0), index[host]))

    def result(self) -> HostTable:
        return (self.names, np.array(self.rows, dtype=float).reshape(-1, 4),
                np.array(self.caps, dtype=float))

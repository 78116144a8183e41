"""The host page index (lua/lib.lua HOST_PAGES, HOST_SWEEP) and the re-solve that reads it.

The re-solve reads only the cells of hosts whose pages could ever ask for more than
their politeness cap (pages x delay > min_interval), so its cost does not grow with the
number of small hosts. The index must always equal what the host cells say, and the
solve over the candidates must equal the solve over every host.
"""

from __future__ import annotations

from collections import Counter

import pytest
from redis_servers import both_servers  # noqa: F401, I001  (every test on both script paths)

from frontier_rate import Frontier
from frontier_rate.math.budget import solve_threshold


def _frontier(redis_url, namespace, **kw):
    args = {"estimator": "sam", "objective": "freshness", "budget": 0.2,
            "min_host_delay": 1.0, "min_interval": 60.0, "max_interval": 1e6,
            "lease_timeout": 1e6, "seed": 3, "prior_rate": 1e-3, "fill_budget": False}
    args.update(kw)
    return Frontier(redis_url, namespace=namespace, **args)


# host -> pages: big hosts pass min_interval / delay = 60 pages at the default delay of
# 1 s, small ones do not
SIZES = {"big0.example": 90, "big1.example": 70, "mid.example": 40,
         **{f"small{i}.example": 1 + i % 5 for i in range(30)}}


def _fill(f, now=0.0):
    f.add_many([f"http://{h}/p{i}" for h, n in SIZES.items() for i in range(n)], now=now)


def _index(f):
    pages, sweep = {}, {}
    for shard in range(f.shards):
        for host, score in f.client.zrange(f.keys.host_pages(shard), 0, -1, withscores=True):
            pages[host.decode()] = score
        for host, score in f.client.zrange(f.keys.host_sweep(shard), 0, -1, withscores=True):
            sweep[host.decode()] = score
    return pages, sweep


def _pages_from_cells(f):
    names, rows, _ = f.host_table()
    count = Counter()
    for n, _, _, i in rows:
        count[names[int(i)][1]] += n
    return dict(count)


def test_the_index_follows_adds_fetches_404s_and_delays(redis_url, namespace):
    f = _frontier(redis_url, namespace)
    f.resolve(now=0.0)  # builds the (empty) index; later scripts keep it
    _fill(f)
    f.set_host_delay("mid.example", 2.0)  # 40 x 2 s = 80 s of sweep
    f.set_host_delay("small0.example", 0.0)  # no cap: never a candidate
    t = 0.0
    for _ in range(3):
        got = f.next_requests(500, now=t)
        for i, d in enumerate(got):
            if d.host == "small3.example":
                f.failed(d, "not found", status=404, now=t)
            else:
                f.observe(d, fingerprint=f"v{i % 2}", fetched_at=t)
        t += 2e5
    pages, sweep = _index(f)
    assert pages == _pages_from_cells(f)
    assert pages["big0.example"] == 90
    assert sweep == {"mid.example": 80.0}
    f.set_host_delay("mid.example", None)
    f.set_host_delay("big1.example", 3.0)
    assert _index(f)[1] == {"big1.example": 210.0}


def test_a_namespace_without_the_index_gets_it_built_on_its_next_solve(redis_url, namespace):
    f = _frontier(redis_url, namespace)
    _fill(f)  # before any solve: the adds keep no index yet
    f.set_host_delay("mid.example", 2.0)
    assert _index(f) == ({}, {})
    f.resolve(now=0.0)
    built = _index(f)
    assert built[0] == _pages_from_cells(f) and built[1] == {"mid.example": 80.0}
    # lost (a namespace from before the index, or keys deleted): rebuilt the same
    for shard in range(f.shards):
        f.client.delete(f.keys.host_pages(shard), f.keys.host_sweep(shard))
        f.client.hdel(f.keys.shard_keys(shard)[4], "hi")
    f.resolve(now=1.0)
    assert _index(f) == built


@pytest.mark.parametrize("budget", [0.2, 2.0, 3.5, 3.8, 50.0])
def test_the_solve_over_the_candidates_equals_the_solve_over_every_host(redis_url, namespace,
                                                                       budget):
    f = _frontier(redis_url, f"{namespace}-{budget:g}", budget=budget)
    _fill(f)
    f.set_host_delay("mid.example", 2.0)
    t = 0.0
    for _ in range(4):  # estimates spread over cells
        for i, d in enumerate(f.next_requests(500, now=t)):
            f.observe(d, fingerprint=f"v{(i * 7) % 3 if t else 0}", fetched_at=t)
        t += 5e4
    nu = f.resolve(now=t)
    cells = f.cells()
    names, hosts, caps = f.host_table()
    full = solve_threshold(cells, budget, f.min_interval, f.max_interval, f.objective,
                                  hosts=hosts, caps=caps)
    assert nu == pytest.approx(full.nu, rel=1e-8)
    want = {host: tau for (_, host), tau in zip(names, full.host_nu, strict=True) if tau > full.nu}
    got = {}
    for shard in range(f.shards):
        for host, tau in f.client.hgetall(f.keys.host_nu(shard)).items():
            got[host.decode()] = float(tau)
    assert got.keys() == want.keys()
    for host, tau in want.items():
        assert got[host] == pytest.approx(tau, rel=1e-6)
    # only the hosts that can pass their cap are read: big0, big1 (> 60 pages) and mid
    cand, _, _ = f.host_candidates(cells)
    assert sorted(h for _, h in cand) == ["big0.example", "big1.example", "mid.example"]
    if budget > 3:
        assert want, "hosts are capped at this budget (else this case shows nothing)"


def test_without_host_delays_the_solve_reads_no_host(redis_url, namespace):
    f = _frontier(redis_url, namespace, min_host_delay=0.0)
    _fill(f)
    f.resolve(now=0.0)
    cand, rows, caps = f.host_candidates(f.cells())
    assert cand == [] and rows.shape == (0, 4) and caps.shape == (0,)


@pytest.mark.parametrize("small_hosts", [0, 400])
def test_the_candidates_rows_are_the_host_tables_rows_of_those_hosts(redis_url, namespace,
                                                                     small_hosts):
    """Read whole (a shard of mostly candidates) or field by field (a few among many)."""
    f = _frontier(redis_url, namespace)
    sizes = {"big0.example": 90, "big1.example": 70, **{f"s{i}.example": 2 for i in range(small_hosts)}}
    f.add_many([(f"http://{h}/p{i}", 1.0 + i % 3) for h, n in sizes.items() for i in range(n)],
               now=0.0)
    f.observe_many([(d, {"fingerprint": "v0", "fetched_at": 0.0})
                    for d in f.next_requests(2000, now=0.0)])
    cells = f.cells()
    names, rows, caps = f.host_table()
    cand, crows, ccaps = f.host_candidates(cells)
    assert sorted(h for _, h in cand) == ["big0.example", "big1.example"]

    def by_host(names, rows, caps):
        return {host: (sorted(map(tuple, rows[rows[:, 3] == i][:, :3])), caps[i])
                for i, (_, host) in enumerate(names)}

    full = by_host(names, rows, caps)
    assert by_host(cand, crows, ccaps) == {h: full[h] for h in ("big0.example", "big1.example")}

"""The soak (``benchmarks/soak.py``): its checks find what they look for, and a 2-minute
form, four crawlers on one frontier through a subset of the faults beside a fault-free
control run, passes them.

The short form asserts the checks, not timings: every page in the frontier with a due
time, no lease past its timeout, every answer of the site observed once (but those a
kill -9 had in flight), no request gap under the host's delay, nothing robots.txt
forbids fetched. Memory growth and freshness need a long run (``FRESHNESS_MIN_DURATION``)
and are judged by the hour's run only (docs/RELIABILITY.md).
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from _soak_capture import read_capture  # noqa: E402
from _soak_checks import (  # noqa: E402
    freshness_check,
    freshness_series,
    gap_violations,
    memory_check,
    observed_check,
    politeness_check,
)

PAGE = "http://127.0.3.2:80/page/0"


def _run(answers: list[tuple[float, str]], fetches: int, kills: list[tuple[str, float]]
         ) -> dict:
    return {"truth": {"pages": [{"url": PAGE}]}, "pages": {PAGE: {"fetches": fetches}},
            "port": 80, "epoch": 0.0,
            "events": [{"kind": "kill -9", "detail": a, "t": t} for a, t in kills],
            "requests": [{"method": "GET", "status": 200, "url": PAGE, "host": "127.0.3.2",
                          "path": "/page/0", "real_time": t, "agent": agent}
                         for t, agent in answers]}


def test_observed_once_allows_only_what_a_kill_had_in_flight() -> None:
    answers = [(1.0, "a"), (10.0, "a"), (20.0, "b")]
    assert observed_check(_run(answers, 3, []))["ok"]
    lost = observed_check(_run(answers, 2, []))
    assert not lost["ok"] and lost["unobserved"] == 1
    assert observed_check(_run(answers, 2, [("a", 12.0)]))["ok"]  # answered 2 s before
    assert not observed_check(_run(answers, 2, [("a", 30.0)]))["ok"]  # long before the kill
    twice = observed_check(_run(answers, 4, []))
    assert not twice["ok"] and twice["counted_more_than_served"] == {PAGE: 1}


def test_a_bot_wall_s_body_may_count_as_a_fetch_or_not() -> None:
    """Detection may take a wall as the page's copy (a fetch: a wall on a short page, or
    the fourth wall in a row before 2026-12-04) or as a not-content failure: a wall's body
    is allowed either way, but counts beyond every answer including the walls are still
    counted twice (the hour's soak failed on 36 walls taken as copies of one page)."""
    answers = [(1.0, "a"), (10.0, "a")]
    run = _run(answers, 2, [])
    run["requests"] += [{**run["requests"][0], "real_time": 11.0 + i, "fault": "wall"}
                        for i in range(4)]
    for fetches in (2, 3, 6):
        assert observed_check({**run, "pages": {PAGE: {"fetches": fetches}}})["ok"], fetches
    twice = observed_check({**run, "pages": {PAGE: {"fetches": 7}}})
    assert not twice["ok"] and twice["counted_more_than_served"] == {PAGE: 1}
    lost = observed_check({**run, "pages": {PAGE: {"fetches": 1}}})
    assert not lost["ok"] and lost["unobserved"] == 1


def test_freshness_ends_when_the_site_s_truth_was_taken() -> None:
    """The site's clock starts with the site, seconds after the run's on a loaded machine, so
    its truth ends before ``duration`` (a 30-minute run's by 7.9 s): freshness is measured up
    to the truth, not past it (which raised and lost the run's record)."""
    def run(fetched: list[float]) -> dict:
        truth = {"acceleration": 10.0, "now": 950.0,  # 95 real s into a run of 100
                 "pages": [{"url": PAGE, "weight": 1.0, "change_times": [100.0, 600.0]}]}
        answers = [(t / 10.0, "a") for t in fetched]
        return {**_run(answers, len(fetched), []), "truth": truth, "duration": 100.0}

    fresh, stale = run([150.0, 650.0]), run([150.0])
    for r, times in ((fresh, [150.0, 650.0]), (stale, [150.0])):
        for entry, t in zip(r["requests"], times, strict=True):
            entry["sim_time"] = t
    check = freshness_check(fresh, stale)
    # last half: sim 500 to 950; fresh is stale 600-650 only; stale from 600 to the end
    assert check["last_half"] == pytest.approx((450 - 50) / 450)
    assert check["control_last_half"] == pytest.approx(100 / 450)
    series = freshness_series(fresh, 40.0)
    assert series[-1][0] == pytest.approx(95.0)


def test_a_gap_under_the_delay_is_a_violation_once_robots_txt_was_read() -> None:
    def entry(t: float, path: str) -> dict:
        return {"host": "h", "real_time": t, "path": path, "agent": "x"}

    entries = [entry(0.0, "/robots.txt"), entry(0.5, "/a"), entry(0.9, "/b"), entry(1.4, "/c")]
    violations, hosts = gap_violations(entries, ["h"], [0.5], 0.3)
    assert [v["paths"] for v in violations] == [["/a", "/b"]]
    assert hosts["h"]["min_gap_s"] == pytest.approx(0.4)
    before = [entry(0.0, "/a"), entry(0.35, "/robots.txt"), entry(0.9, "/b")]
    assert gap_violations(before, ["h"], [0.5], 0.3)[0] == []  # 0.3 until robots.txt is read
    run = {"requests": [{**e, "method": "GET"} for e in entries] + [entry(3.0, "/private/x")],
           "addresses": ["h"], "delays": [0.5], "min_host_delay": 0.3}
    found = politeness_check(run)
    assert not found["ok"] and found["violations"] == 1 and found["disallowed_fetched"] == 1


def test_a_gap_the_machine_was_frozen_in_is_listed_apart_and_a_short_step_is_not() -> None:
    """The Cluster hour of 2026-12-05: two requests 0.401 s apart by the site's monotonic
    clock, 9.6 s by its wall clock, which stepped 9.2 s ahead between them (the VM frozen:
    a site elsewhere would have seen 9.6 s). A step under ``CLOCK_STEP`` (time sync) and
    one too small to make up the delay leave the gap a violation."""
    def entry(t: float, path: str, offset: float) -> dict:
        return {"host": "h", "real_time": t, "wall_time": 1e9 + t + offset, "path": path,
                "agent": "x", "method": "GET"}

    def check(step: float) -> dict:
        entries = [entry(0.0, "/robots.txt", 0.0), entry(1.0, "/a", 0.0),
                   entry(1.401, "/b", step), entry(2.0, "/c", step)]
        return politeness_check({"requests": entries, "addresses": ["h"], "delays": [0.5],
                                 "min_host_delay": 0.3})

    frozen = check(9.2)
    assert frozen["ok"] and frozen["violations"] == 0 and frozen["gaps_across_freeze"] == 1
    assert frozen["freeze_details"][0]["frozen_s"] == pytest.approx(9.2)
    assert frozen["freeze_details"][0]["gap_s"] == pytest.approx(0.401)
    for step in (0.0, 0.05, -9.2):  # none, a slew, a step back: no real time was lost
        found = check(step)
        assert not found["ok"] and found["violations"] == 1, (step, found)
        assert found["gaps_across_freeze"] == 0
    short = politeness_check({"requests": [entry(0.0, "/robots.txt", 0.0),
                                           entry(2.0, "/a", 0.0), entry(2.1, "/b", 1.0)],
                              "addresses": ["h"], "delays": [2.0], "min_host_delay": 0.3})
    assert short["violations"] == 1 and short["gaps_across_freeze"] == 0  # 0.1 + 1 s < 2 s


def test_memory_growth_is_judged_after_warm_up_and_only_on_a_long_enough_life() -> None:
    flat = [{"t": t, "rss": {"c": 100e6, "short": 100e6 + t * 1e5}} for t in range(0, 3601, 60)]
    growing = [{"t": t, "rss": {"c": 100e6 * (1 + 0.1 * t / 3600)}} for t in range(0, 3601, 60)]
    processes = {1: {"label": "c", "start": 0.0, "kind": "crawler"},
                 2: {"label": "short", "start": 3400.0, "kind": "crawler"}}
    result = memory_check({"samples": flat, "processes": processes}, 900.0, 600.0)
    assert result["ok"] and not result["processes"]["short"]["judged"]
    assert abs(result["processes"]["c"]["growth_pct_per_hour"]) < 0.01
    grown = memory_check({"samples": growing, "processes": processes}, 900.0, 600.0)
    assert not grown["ok"] and grown["worst_pct_per_hour"] > 5


def test_a_step_is_reported_beside_the_fit_that_judges_it() -> None:
    """A flat series with one 1.4 MB step at 3,240 s (a crawler at its first topology
    refresh) is judged by the linear fit alone, and its largest rise within a minute and
    when it was reached are reported beside it; the worst series is named."""
    samples = [{"t": t, "rss": {"c3-r2": 113e6 + (1.4 * 2**20 if t >= 3240 else 0),
                                "c0": 113e6 + t * 10.0}} for t in range(1860, 3601, 4)]
    processes = {1: {"label": "c3-r2", "start": 1860.0, "kind": "crawler"},
                 2: {"label": "c0", "start": 0.0, "kind": "crawler"}}
    result = memory_check({"samples": samples, "processes": processes}, 900.0, 600.0)
    step = result["processes"]["c3-r2"]
    assert step["largest_rise_mb"] == pytest.approx(1.4) and step["rise_at_s"] == 3240
    assert result["processes"]["c0"]["largest_rise_mb"] < 0.01
    assert result["worst_process"] == "c3-r2" and not result["ok"]


def test_a_restarted_process_gets_the_same_warm_up_as_one_that_started_with_the_run() -> None:
    """A crawler restarted at 1,500 s grows 15 %/h over its first 900 s, as every crawler of
    the hours did, then stays flat: judged after the same warm-up as the others it is flat;
    judged 120 s into its life (the earlier rule) it failed on its warm-up."""
    def rss(t: float) -> float:
        return 115e6 * (1 + 0.15 * min(t - 1500, 900) / 3600) if t >= 1500 else 0.0

    samples = [{"t": t, "rss": {"c3-r2": rss(t)}} for t in range(1500, 3601, 20)]
    processes = {1: {"label": "c3-r2", "start": 1500.0, "kind": "crawler"}}
    result = memory_check({"samples": samples, "processes": processes}, 900.0, 600.0)
    judged = result["processes"]["c3-r2"]
    assert result["ok"] and judged["judged"] and abs(judged["growth_pct_per_hour"]) < 0.01
    assert judged["span_s"] == pytest.approx(1200.0)


def test_a_capture_is_read_back_with_its_kernel_times(tmp_path: Path) -> None:
    payload = b"GET /page/7 HTTP/1.1\r\nHost: 127.0.3.4\r\nUser-Agent: soak-c1-r2\r\n\r\n"
    tcp = struct.pack("!HHIIBBHHH", 40000, 8080, 1, 1, 5 << 4, 0x18, 1000, 0, 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 0, 0, 64, 6, 0,
                     bytes([127, 0, 0, 1]), bytes([127, 0, 3, 4]))
    frame = b"\0" * 12 + b"\x08\x00" + ip + tcp + payload
    header = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 512, 1)
    record = struct.pack("<IIII", 1700000000, 250000, len(frame), len(frame))
    (tmp_path / "c.pcap").write_bytes(header + record + frame)
    assert read_capture(tmp_path / "c.pcap") == [{"wall_time": 1700000000.25,
                                                 "host": "127.0.3.4", "port": 8080,
                                                 "path": "/page/7",
                                                 "agent": "soak-c1-r2"}]


def test_each_cluster_node_s_used_memory_is_judged_by_its_own_process() -> None:
    """A cluster's nodes (``node_used_memory``) are judged one by one, each from its own
    process's start: a node restarted late in the run is not judged, a growing one fails."""
    samples = [{"t": t, "rss": {"node-7001-1": 10e6, "node-7002-2": 10e6},
                "node_used_memory": {"node-7001-1": 2e6 * (1 + 0.2 * t / 3600),
                                     "node-7002-2": 2e6}} for t in range(0, 3601, 60)]
    processes = {1: {"label": "node-7001-1", "start": 0.0, "kind": "redis"},
                 2: {"label": "node-7002-2", "start": 3300.0, "kind": "redis"}}
    result = memory_check({"samples": samples, "processes": processes}, 900.0, 600.0)
    assert not result["ok"]
    assert result["processes"]["node-7001-1 used_memory"]["growth_pct_per_hour"] > 5
    assert not result["processes"]["node-7002-2 used_memory"]["judged"]
    assert abs(result["processes"]["node-7001-1"]["growth_pct_per_hour"]) < 0.01


def test_a_promoted_replica_is_judged_from_its_promotion() -> None:
    """A replica promoted at 1,500 s grows 3.7 to 4.45 MB within 30 s (as the 20-minute cluster
    soak's: its dataset and clients' buffers as a primary), then stays flat: judged from
    its promotion plus the warm-up it is flat; judged over the whole run (the role change
    ignored) it grows."""
    def used(t: float) -> float:
        return 3.7e6 if t < 1500 else min(4.45e6, 3.7e6 + 0.75e6 * (t - 1500) / 30)

    samples = [{"t": t, "rss": {"node-7003-1": 10e6},
                "node_role": {"node-7003-1": "slave" if t < 1500 else "master"},
                "node_used_memory": {"node-7003-1": used(t)}} for t in range(0, 3601, 20)]
    processes = {1: {"label": "node-7003-1", "start": 0.0, "kind": "redis"}}
    result = memory_check({"samples": samples, "processes": processes}, 900.0, 600.0)
    judged = result["processes"]["node-7003-1 used_memory"]
    assert result["ok"] and judged["judged"] and abs(judged["growth_pct_per_hour"]) < 0.01
    for sample in samples:
        del sample["node_role"]
    assert not memory_check({"samples": samples, "processes": processes}, 900.0, 600.0)["ok"]


def test_key_censuses_of_the_primaries_are_summed_per_shape() -> None:
    from _soak_cluster import merge_censuses

    total = merge_censuses([{"fr:{ns:N}:leases": [1, 100], "fr:{ns}:cfg": [1, 50]},
                            {"fr:{ns:N}:leases": [2, 300]}, {}])
    assert total == {"fr:{ns:N}:leases": [3, 400], "fr:{ns}:cfg": [1, 50]}


def test_a_lease_s_age_is_its_deadline_less_the_timeout() -> None:
    from _soak_cluster import lease_ages

    now_us = 1_000_000_000.0
    ages = lease_ages(now_us, [now_us + 120e6, now_us + 20e6, now_us - 5e6], 120.0)
    assert ages == pytest.approx([0.0, 100.0, 125.0])


def test_a_takeover_is_timed_from_the_polls_after_the_primary_went_down() -> None:
    """cluster_state stays ok until the nodes agree the primary failed; ok again only counts
    once the replica is primary."""
    from _soak_cluster import cluster_fault_rows, takeover_times

    ok = {"a": "ok", "b": "ok"}
    polls = [(0.1, ok, "slave"), (5.5, {"a": "fail", "b": "ok"}, "slave"),
             (6.0, {"a": "fail", "b": "fail"}, "no answer"), (6.8, {"a": "fail", "b": "ok"}, "master"),
             (7.2, ok, "master")]
    found = takeover_times(polls, "node-7004-1")
    assert found == {"state_fail_after_s": 5.5, "promoted_after_s": 6.8,
                     "state_ok_after_s": 7.2, "replica": "node-7004-1"}
    assert takeover_times(polls[:1], "r")["promoted_after_s"] is None
    rows = cluster_fault_rows([{"kind": "failover", "at": 90.0, "node": "node-7001-1",
                                "outcome": "replica promoted", **found}])
    assert rows == [["1.5", "failover", "node-7001-1", "replica promoted",
                     "state_fail 5.5 s, promoted 6.8 s, state_ok 7.2 s"]]


@pytest.mark.slow
@pytest.mark.reliability
def test_a_short_soak_through_faults_loses_nothing(tmp_path: Path) -> None:
    from soak import SHORT, soak

    record = soak(120.0, tmp_path, SHORT, 2.0)
    run = record["soak"]
    kinds = {event["kind"] for event in run["events"]}
    assert {"kill -9", "redis restart", "client pause", "detection child killed",
            "graceful stop", "host 503"} <= kinds, run["events"]
    checks = run["checks"]
    for name in ("pages", "leases", "observed_once"):
        assert checks[name]["ok"], (name, checks[name])
    # leases a kill -9 left (at 18 s) end with their 120 s timeout, after this 2-minute form
    # ends (the hour's run ends with 0): the control, whose crawlers all stop gracefully,
    # must end with none
    assert record["control"]["checks"]["leases"]["outstanding_at_end"] == 0
    assert record["soak"]["checks"]["leases"]["spool_files_at_end"] == 0
    short = {}
    for world in ("soak", "control"):
        gaps = record[world]["checks"]["politeness"]
        captured = record[world]["checks"]["politeness_capture"]
        if captured["ok"] is not None:  # tcpdump installed: the gaps the crawlers made
            if not captured["ok"]:
                short[world] = captured["details"][:3]
        elif gaps["violations"] != gaps["violations_site_late"]:  # the site's own stamps
            short[world] = [v for v in gaps["details"] if v["site_late_s"] < v["delay_s"]
                            - v["gap_s"]][:3]
    private = {w: record[w]["checks"]["politeness"]["disallowed_fetched"]
               for w in ("soak", "control")}
    # a robots.txt answering 503 holds its host's pages (Scrapy read it as "allow all")
    assert not any(private.values()), private
    if short:  # left (issue 63): a crawler's process that stalls between the send slot and
        # Twisted's write of the request (the crawlers' write times, logged: up to 1.03 s while
        # eight crawlers started on the 2-core VM, the fault-free control world included)
        pytest.xfail(f"request gaps under the host delay on this loaded machine: {short}")


@pytest.mark.slow
@pytest.mark.reliability
def test_a_short_cluster_soak_through_a_failover_loses_nothing(tmp_path: Path) -> None:
    """The 2-minute form on a Redis Cluster of three primaries with replicas
    (``soak.SHORT_CLUSTER``: a kill -9, a primary's failover, a pause and a restart of a
    primary, the detection child killed, a graceful stop). The crawlers' URL names every
    node. Nothing lost, nothing counted twice, no lease past its timeout; the request gaps
    are reported (``politeness``), judged by the hour's run (docs/RELIABILITY.md)."""
    from redis_servers import REDIS7_MISSING, debian_redis
    from soak import SHORT_CLUSTER, soak

    if debian_redis() is None:
        pytest.skip(REDIS7_MISSING)
    record = soak(120.0, tmp_path, SHORT_CLUSTER, 2.0, control=False, cluster=True)
    run = record["soak"]
    kinds = {event["kind"] for event in run["events"]}
    assert {"kill -9", "failover", "client pause", "redis restart", "detection child killed",
            "graceful stop"} <= kinds, run["events"]
    failover = next(f for f in run["cluster"]["faults"] if f["kind"] == "failover")
    assert failover["outcome"] == "replica promoted", failover
    checks = run["checks"]
    for name in ("pages", "leases", "observed_once"):
        assert checks[name]["ok"], (name, checks[name])
    fetches = [s["fetches"] for s in run["samples"]
               if s["t"] > failover["at"] + 20.0 and s.get("fetches") is not None]
    assert fetches and fetches[-1] - fetches[0] > 50, fetches  # it went on after the failover

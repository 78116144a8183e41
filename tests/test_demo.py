"""The demo: its scoring functions on hand-made inputs, and one short real run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest

from frontier_rate.engine.frontier import Frontier
from frontier_rate.testbed import Testbed, demo


def test_politeness_counts_gaps_shorter_than_the_host_delay() -> None:
    bed = Testbed(n_pages=4, n_hosts=2, seed=1)
    a, b = bed.addresses
    log = [{"host": a, "real_time": t} for t in (0.0, 0.5, 0.9, 2.0)]   # gaps 0.5, 0.4, 1.1
    log += [{"host": b, "real_time": t} for t in (0.0, 0.3)]
    result = demo.politeness(log, bed, delays=[0.45, 0.2])
    assert result["hosts"][a]["violations"] == 1          # only the 0.4 s gap is below 0.45 s
    assert result["hosts"][a]["min_gap_s"] == pytest.approx(0.4)
    assert result["hosts"][b]["violations"] == 0
    assert result["violations"] == 1
    assert result["hosts"][a]["max_rps"] == 3             # 0.0, 0.5, 0.9 fall in one second


def test_oracle_spends_the_budget_within_host_caps() -> None:
    bed = Testbed(n_pages=40, n_hosts=4, seed=3, acceleration=86400.0, port=18080)
    truth = bed.truth(until=0.0)
    caps = {address: 5e-5 for address in bed.addresses}
    intervals = demo.oracle_intervals(truth, budget_sim=1e-4, caps_sim=caps)
    rate = sum(1.0 / t for t in intervals.values() if t)
    assert rate == pytest.approx(1e-4, rel=1e-6)
    for address in bed.addresses:
        host_rate = sum(1.0 / intervals[p["url"]] for p in truth["pages"]
                        if p["host"] == address and intervals[p["url"]])
        assert host_rate <= caps[address] * (1 + 1e-9)


def test_estimate_accuracy_uses_pages_with_enough_fetches() -> None:
    truth = {"pages": [{"url": "u1", "rate": 1.0}, {"url": "u2", "rate": 2.0}, {"url": "u3", "rate": 1.0}]}
    pages = [{"url": "u1", "estimate": 1.5, "fetches": 10}, {"url": "u2", "estimate": 1.0, "fetches": 50},
             {"url": "u3", "estimate": 100.0, "fetches": 9}]
    result = demo.estimate_accuracy(pages, truth, acceleration=1.0)
    assert result["pages"] == 2
    assert result["median_abs_rel_error"] == pytest.approx(0.5)   # errors 0.5 and 0.5


@pytest.mark.slow
def test_short_demo_run_reports_and_stays_polite(redis_url: str, tmp_path: Path) -> None:
    out = tmp_path / "report"
    result = subprocess.run(
        [sys.executable, "-m", "frontier_rate", "demo", "--duration", "25", "--pages", "24", "--hosts", "3",
         "--budget", "15", "--redis", redis_url, "--out", str(out), "--json",
         "--lying-hosts", "0.34", "--lie", "now"],
        capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert set(report) >= {"freshness", "estimates", "politeness", "fetches", "duration_s"}
    assert set(report["freshness"]) >= {"ours", "uniform", "oracle"}
    assert set(report["estimates"]) >= {"median_abs_rel_error", "p90_abs_rel_error", "pages"}
    assert set(report["politeness"]) >= {"violations", "max_host_rps"}
    for value in report["freshness"].values():
        assert 0.0 <= value <= 1.5
    assert report["fetches"] > 24, "every page is fetched at least once, and some again"
    assert report["politeness"]["violations"] == 0, report["politeness"]["short_gaps"]
    assert json.loads((out / "report.json").read_text())["fetches"] == report["fetches"]
    for name in ("estimates.png", "freshness.png", "hosts.png"):
        assert (out / name).stat().st_size > 1000
    fetched = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    assert not any(r["path"].startswith("/private/") for r in fetched), "robots.txt Disallow was ignored"
    assert np.isfinite(report["freshness"]["ours"])
    # one of the three hosts stamps every answer "now": its dates are ignored, the others' used
    assert report["dates"]["lying_hosts"] == 1
    assert report["dates"]["date_hosts_ignored"] == 1
    assert report["dates"]["dated_changes"] > 0
    # the spider weighs each page as the test-bed's manifest does, and a page the manifest
    # does not list (each host's home page) as its lightest page: scored pages get the budget
    truth = json.loads((out / "truth.json").read_text())
    listed = {p["url"]: p["weight"] for p in truth["pages"]}
    with Frontier(redis_url, namespace=report["namespace"]) as frontier:
        weights = {p["url"]: p["weight"] for p in frontier.iter_pages()}
    assert {url: weights.get(url) for url in listed} == pytest.approx(listed)
    homes = [url for url in weights if urlsplit(url).path == "/"]
    assert len(homes) == 3, sorted(weights)
    assert [weights[url] for url in homes] == pytest.approx([min(listed.values())] * 3)


@pytest.mark.slow
def test_short_signals_demo_reports_both_crawls_side_by_side(redis_url: str, tmp_path: Path) -> None:
    """--signals: the same world crawled without and with its sitemaps and feed (1 host with a
    true sitemap, 1 with a lying one, 1 without and the feed); both rows in the report."""
    out = tmp_path / "report"
    result = subprocess.run(
        [sys.executable, "-m", "frontier_rate", "demo", "--signals", "--duration", "20", "--pages", "24",
         "--hosts", "3", "--budget", "15", "--sitemap-true", "0.34", "--sitemap-lying", "0.34",
         "--redis", redis_url, "--out", str(out), "--no-plots"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "crawl without sitemaps/feed" in result.stdout and "crawl with sitemaps/feed" in result.stdout
    report = json.loads((out / "report.json").read_text())
    rows = report["rows"]
    assert set(rows) == {"without-signals", "with-signals", "uniform", "oracle"}
    for row in rows.values():
        assert 0.0 <= row["freshness"] <= 1.0 and row["page_fetches_per_s"] > 0
    assert report["published"]["sitemap_true"] == report["published"]["sitemap_lying"] == 1
    assert report["published"]["feed"].endswith("/feed.xml")
    # only the second crawl reads the sitemaps and the feed; both worlds change alike
    assert rows["without-signals"]["document_fetches_per_s"] == 0.0
    assert rows["with-signals"]["document_fetches_per_s"] > 0.0
    assert report["with-signals"]["signals"]["claims"] > 0
    for row in ("without-signals", "with-signals"):
        assert report[row]["politeness"]["violations"] == 0, report[row]["politeness"]["short_gaps"]
    paths = {json.loads(line)["path"] for line in (out / "with-signals" / "requests.jsonl").open()}
    assert {"/sitemap.xml", "/feed.xml"} <= paths
    paths = {json.loads(line)["path"] for line in (out / "without-signals" / "requests.jsonl").open()}
    assert not paths & {"/sitemap.xml", "/feed.xml"}
    for name in ("without-signals", "with-signals"):
        assert json.loads((out / name / "report.json").read_text())["fetches"] > 24
        # sitemaps and feeds are planned as pages: both crawls keep one simulated day between
        # revisits of any document, or the documents take much of the budget
        assert report[name]["config"]["min_interval"] == demo.SIGNALS_MIN_INTERVAL


def test_summary_reports_results_not_targets() -> None:
    """The printed summary is for users: results and comparisons, the requests that are not
    scored, no project targets."""
    result = {
        "fetches": 5900, "duration_s": 151.0, "budget_fetches_per_s": 39.0, "window_sim_s": [0.0, 86400.0 * 105],
        "freshness": {"ours": 0.75, "oracle": 0.77, "uniform": 0.59, "ratio_to_oracle": 0.974},
        "spend": {"fetches_per_s": 39.0, "other_per_s": 0.6, "allowed_per_s": 40.0, "budget_per_s": 40.0,
                  "spent_of_allowed": 0.976},
        "estimates": {"pages": 120, "median_abs_rel_error": 0.2, "p90_abs_rel_error": 0.45},
        "politeness": {"violations": 0, "max_host_rps": 9},
    }
    text = demo.summary(result, Path("demo-report"))
    assert "target" not in text.lower()
    assert "ours / oracle = 0.974" in text
    assert "39.0 of 40.0 fetches/s allowed (0.98" in text
    assert "other requests       0.6/s" in text

"""``frontier-rate demo --signals``: the same world crawled without and with the sitemaps and
the feed its hosts publish, side by side (docs/TESTBED.md, docs/SIGNALS.md).

The crawl that reads them sets ``FRONTIER_RATE_SITEMAPS_FROM_ROBOTS`` (the hosts' robots.txt
``Sitemap:`` lines) and ``FRONTIER_RATE_SITEMAPS`` (the feed's URL); the other reads neither.
Both run on a fresh test-bed of the same seed, so the pages change at the same simulated
times. Scoring is the demo's own (``demo.score``), plus the fetches of the sitemaps and the
feed, which count against the same budget.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from frontier_rate.testbed import DAY, Testbed
from frontier_rate.testbed.freshness import FETCH_STATUSES
from frontier_rate.testbed.published import FEED_PATH, SITEMAP_PATH

WITHOUT, WITH = "without-signals", "with-signals"
"""The two crawls: their keys in the report and their folders under the report folder."""


def signal_settings(bed: Testbed) -> dict[str, Any]:
    """The Scrapy settings that make a crawl read the test-bed's sitemaps and feed."""
    settings: dict[str, Any] = {"FRONTIER_RATE_SITEMAPS_FROM_ROBOTS": True}
    if bed.feed_host is not None:
        settings["FRONTIER_RATE_SITEMAPS"] = bed.feed_url()
    return settings


def document_fetches(log: list[dict], t_start: float, t_end: float) -> int:
    """GETs of a sitemap or the feed answered 200 or 304 in [t_start, t_end] (simulated)."""
    return sum(1 for r in log if r["method"] == "GET" and r["status"] in FETCH_STATUSES
               and urlsplit(r["path"]).path in (SITEMAP_PATH, FEED_PATH)
               and t_start <= r["sim_time"] <= t_end)


def add_document_spend(result: dict, log: list[dict], acceleration: float) -> None:
    """``result["spend"]["documents_per_s"]``: sitemap and feed fetches per real second."""
    t_start, t_end = result["window_sim_s"]
    count = document_fetches(log, t_start, t_end)
    result["spend"]["documents_per_s"] = count / ((t_end - t_start) / acceleration)


def signal_trust(frontier: Any, bed: Testbed, pages: list[dict]) -> dict[str, dict[str, list]]:
    """Per source ("sitemap", "feed"): the hosts whose claims the frontier came to trust,
    the hosts it ignores, and those still on probation, by address."""
    keys = {urlsplit(p["url"]).hostname: p["host"] for p in pages if p.get("host")}
    sources = {"sitemap": [h for h, m in enumerate(bed.sitemap_modes) if m in ("true", "lying")],
               "feed": [] if bed.feed_host is None else [bed.feed_host]}
    out: dict[str, dict[str, list]] = {}
    for source, hosts in sources.items():
        tally: dict[str, list] = {"trusted": [], "ignored": [], "probation": []}
        for h in hosts:
            address = bed.addresses[h]
            state = frontier.signal_trust(keys.get(address, address), source)
            verdict = "ignored" if state["ignored"] else "trusted" if state["trusted"] else "probation"
            tally[verdict].append(address)
        out[source] = tally
    return out


def comparison(without: dict, with_: dict) -> dict[str, dict[str, float]]:
    """The rows of the side-by-side table: both crawls, then uniform and the oracle (replayed
    from the ground truth of the first crawl's world at the allowed budget)."""
    allowed = without["spend"]["allowed_per_s"]
    rows = {}
    for name, r in ((WITHOUT, without), (WITH, with_)):
        rows[name] = {"freshness": r["freshness"]["ours"],
                      "ratio_to_oracle": r["freshness"]["ratio_to_oracle"],
                      "page_fetches_per_s": r["spend"]["fetches_per_s"],
                      "document_fetches_per_s": r["spend"].get("documents_per_s", 0.0),
                      "allowed_per_s": r["spend"]["allowed_per_s"]}
    for name in ("uniform", "oracle"):
        rows[name] = {"freshness": without["freshness"][name], "page_fetches_per_s": allowed,
                      "document_fetches_per_s": 0.0, "allowed_per_s": allowed}
    return rows


def published(bed: Testbed) -> dict[str, Any]:
    """What the world's hosts publish (counts per sitemap mode, the feed's URL)."""
    modes, feed = bed.sitemap_modes, None if bed.feed_host is None else bed.feed_url()
    return {"sitemap_true": modes.count("true"), "sitemap_lying": modes.count("lying"),
            "no_sitemap": modes.count("none"), "feed": feed}


def _trust_line(trust: dict[str, dict[str, list]]) -> str:
    parts = []
    for source, tally in trust.items():
        counts = ", ".join(f"{verdict} on {len(hosts)}" for verdict, hosts in tally.items() if hosts)
        parts.append(f"{source}: {counts or 'no host'}")
    return "; ".join(parts)


def summary(report: dict, out: Path) -> str:
    """The text the demo prints with ``--signals``."""
    rows, pub = report["rows"], report["published"]
    t0, t1 = report[WITHOUT]["window_sim_s"]
    label = {WITHOUT: "crawl without sitemaps/feed", WITH: "crawl with sitemaps/feed",
             "uniform": "uniform revisiting", "oracle": "oracle (true rates)"}
    lines = [
        f"frontier-rate demo --signals: the same world crawled twice, {report[WITHOUT]['duration_s']:.0f} s "
        f"and {report[WITH]['duration_s']:.0f} s; scored over the last {(t1 - t0) / DAY:.0f} simulated days",
        f"  the hosts publish: sitemaps with true lastmod on {pub['sitemap_true']}, with lying lastmod "
        f"on {pub['sitemap_lying']}, none on {pub['no_sitemap']}; an Atom feed at {pub['feed']}",
        "",
        f"  {'':30s} {'weighted freshness':>18s}   fetches/s: pages + sitemaps/feed, of allowed",
    ]
    for name, row in rows.items():
        lines.append(f"  {label[name]:30s} {row['freshness']:18.3f}   {row['page_fetches_per_s']:.1f} + "
                     f"{row['document_fetches_per_s']:.1f} of {row['allowed_per_s']:.1f}")
    gain = rows[WITH]["freshness"] - rows[WITHOUT]["freshness"]
    lines += [
        "",
        f"  reading them changed weighted freshness by {gain:+.3f}",
        f"  sources: {_trust_line(report[WITH].get('signals', {}).get('trust', {}))}",
        f"  politeness: {report[WITHOUT]['politeness']['violations']} violations without, "
        f"{report[WITH]['politeness']['violations']} with",
        "",
        f"  report: {out}/report.json; each crawl's files in {out}/{WITHOUT}/ and {out}/{WITH}/",
    ]
    return "\n".join(lines)

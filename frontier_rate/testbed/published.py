"""What the test-bed's hosts publish about their own changes: sitemaps with ``<lastmod>``
and an Atom feed of recent changes.

Which host does what is drawn from the seed (``sitemap_modes``):

- ``"plain"``: every host, when no fraction is set (the default): ``/sitemap.xml``
  lists the pages with their weights as ``<priority>`` and no dates;
- ``"true"``: ``<lastmod>`` is the page's latest real change, in simulated time as
  ``Last-Modified`` gives it (``SIM_EPOCH`` + simulated seconds, whole seconds);
- ``"lying"``: every ``<lastmod>`` is the time of the sitemap fetch;
- ``"none"``: no sitemap (404) and no ``Sitemap:`` line in robots.txt.

The feed (``/feed.xml``, Atom) lives on one host (``feed_host``) and lists that host's
``feed_items`` most recently changed pages, each with its latest change as ``<updated>``.
"""

from __future__ import annotations

import html
import random
import time
from collections.abc import Sequence

from frontier_rate.testbed.site import Site

SITEMAP_MODES = ("plain", "true", "lying", "none")
FEED_PATH = "/feed.xml"
SITEMAP_PATH = "/sitemap.xml"


def sitemap_modes(n_hosts: int, seed: int, true_fraction: float, lying_fraction: float
                  ) -> list[str]:
    """Per host its sitemap mode: all "plain" when both fractions are 0, else
    round(fraction x n_hosts) hosts "true", as many "lying", the rest "none", in an
    order drawn from ``seed``."""
    for name, value in (("sitemap_true", true_fraction), ("sitemap_lying", lying_fraction)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name}={value!r}: must be a fraction in [0, 1]")
    if true_fraction + lying_fraction > 1.0:
        raise ValueError(f"sitemap_true + sitemap_lying = {true_fraction + lying_fraction}: "
                         "must be <= 1")
    if true_fraction == 0.0 and lying_fraction == 0.0:
        return ["plain"] * n_hosts
    n_true = round(true_fraction * n_hosts)
    n_lying = min(round(lying_fraction * n_hosts), n_hosts - n_true)
    order = list(range(n_hosts))
    random.Random(f"frontier-rate-testbed/{seed}/sitemaps").shuffle(order)
    modes = ["none"] * n_hosts
    for rank, h in enumerate(order):
        if rank < n_true + n_lying:
            modes[h] = "true" if rank < n_true else "lying"
    return modes


def choose_feed_host(modes: Sequence[str], seed: int) -> int:
    """The host that serves the feed: one drawn from ``seed`` among the hosts without a
    dated sitemap (so the feed tells something new), any host when all have one."""
    candidates = [h for h, m in enumerate(modes) if m in ("none", "plain")] or list(range(len(modes)))
    return random.Random(f"frontier-rate-testbed/{seed}/feed").choice(candidates)


def w3c(unix_time: float) -> str:
    """A W3C datetime in UTC, whole seconds (floored, as HTTP dates are)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(unix_time))


def last_changes(site: Site, host: int, sim: float) -> list[tuple[int, float]]:
    """(page index, latest change in simulated seconds or 0.0) of every page of ``host``."""
    return [(i, site.processes[i].last_change_before(sim) or 0.0) for i in site.by_host[host]]


def render_dated_sitemap(site: Site, host: int, base: str, sim: float, mode: str,
                         sim_epoch: float) -> tuple[bytes, float]:
    """(``/sitemap.xml`` of a "true" or "lying" host, its own last modification)."""
    rows, newest = [], sim_epoch
    for i, changed in last_changes(site, host, sim):
        told = sim_epoch + (changed if mode == "true" else sim)
        newest = max(newest, told)
        rows.append(f"<url><loc>{html.escape(base + site.pages[i].path)}</loc>"
                    f"<lastmod>{w3c(told)}</lastmod>"
                    f"<priority>{site.pages[i].weight:.6g}</priority></url>\n")
    body = ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
            f"{''.join(rows)}</urlset>\n")
    return body.encode(), newest


def render_feed(site: Site, host: int, base: str, sim: float, items: int,
                sim_epoch: float) -> tuple[bytes, float]:
    """(the Atom feed of ``host``: its ``items`` most recently changed pages, newest first,
    each dated by its latest change; the feed's own last modification)."""
    changed = sorted(((c, i) for i, c in last_changes(site, host, sim) if c > 0.0),
                     reverse=True)[:items]
    newest = sim_epoch + (changed[0][0] if changed else 0.0)
    entries = "".join(
        f"<entry><title>Page {i}</title><id>{html.escape(base + site.pages[i].path)}</id>"
        f'<link href="{html.escape(base + site.pages[i].path)}"/>'
        f"<updated>{w3c(sim_epoch + c)}</updated></entry>\n"
        for c, i in changed)
    body = ('<?xml version="1.0" encoding="utf-8"?>\n'
            '<feed xmlns="http://www.w3.org/2005/Atom">\n'
            f"<title>Recent changes on {html.escape(base)}</title>"
            f"<id>{html.escape(base + FEED_PATH)}</id><updated>{w3c(newest)}</updated>\n"
            f"{entries}</feed>\n")
    return body.encode(), newest

"""What the test-bed serves: the page layout and every document's bytes.

The layout (which page lives on which host, its weight, change rate and
model, its links, whether it carries markup churn or a volatile token) is
drawn once from the seed. Documents are pure functions of the layout, the
simulated time and a request serial number, so the server holds no content.
"""

from __future__ import annotations

import hashlib
import html
import random
from dataclasses import dataclass
from email.utils import formatdate

from frontier_rate.testbed.changes import CHANGE_MODELS, ChangeProcess, draw_rates

PRIVATE_PATH = "/private/secret"
"""The page every host lists but disallows in robots.txt: it must never be fetched."""

_WORDS = (
    "river stone lantern copper meadow harbor signal winter orchard canvas "
    "ember falcon granite hollow island juniper kettle lumen marble north "
    "ocean pepper quarry raven saddle timber umber violet willow xenon yarrow "
    "zephyr anchor basil cedar delta echo fjord garnet harvest indigo jasper "
    "kelp linen mosaic nectar opal prairie quill rustic sienna tundra "
    "uplands vessel walnut yonder zinc amber bramble cobalt dune fable"
).split()


@dataclass(frozen=True)
class Page:
    """One scored page: where it lives and how it behaves (the ground truth)."""

    index: int
    host: int
    path: str
    weight: float
    rate: float
    model: str
    churn: bool
    volatile: bool
    links: tuple[int, ...]


class Site:
    """The page layout of a test-bed, drawn deterministically from ``seed``."""

    def __init__(
        self,
        *,
        n_pages: int,
        n_hosts: int,
        seed: int,
        rate_distribution: str,
        rate_min: float,
        rate_max: float,
        change_model: str,
        churn_fraction: float,
        volatile_fraction: float,
        zipf_exponent: float,
        links_per_page: int,
    ) -> None:
        if change_model not in (*CHANGE_MODELS, "mixed"):
            raise ValueError(
                f"change_model={change_model!r}: expected one of {(*CHANGE_MODELS, 'mixed')}"
            )
        for name, value in (("churn_fraction", churn_fraction),
                            ("volatile_fraction", volatile_fraction)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name}={value!r}: must be in [0, 1]")
        if churn_fraction + volatile_fraction > 1.0:
            raise ValueError(
                f"churn_fraction + volatile_fraction = {churn_fraction + volatile_fraction}: "
                "must be <= 1 (the two sets are disjoint)"
            )
        if not zipf_exponent >= 0:
            raise ValueError(f"zipf_exponent={zipf_exponent!r}: must be >= 0")
        if links_per_page < 0:
            raise ValueError(f"links_per_page={links_per_page!r}: must be >= 0")
        self.seed = seed
        self.n_hosts = n_hosts
        rng = random.Random(f"frontier-rate-testbed/{seed}/layout")
        rates = draw_rates(n_pages, rate_distribution, rate_min, rate_max, rng)
        ranks = list(range(1, n_pages + 1))
        rng.shuffle(ranks)
        order = list(range(n_pages))
        rng.shuffle(order)
        n_churn = round(churn_fraction * n_pages)
        n_volatile = round(volatile_fraction * n_pages)
        churn = set(order[:n_churn])
        volatile = set(order[n_churn:n_churn + n_volatile])
        by_host = [list(range(h, n_pages, n_hosts)) for h in range(n_hosts)]
        self.pages: list[Page] = []
        for i in range(n_pages):
            model = rng.choice(CHANGE_MODELS) if change_model == "mixed" else change_model
            self.pages.append(Page(
                index=i,
                host=i % n_hosts,
                path=f"/page/{i}",
                weight=float(f"{ranks[i] ** -zipf_exponent:.6g}"),
                rate=rates[i],
                model=model,
                churn=i in churn,
                volatile=i in volatile,
                links=self._draw_links(i, n_hosts, by_host, links_per_page, rng),
            ))
        self.processes = [
            ChangeProcess(p.model, p.rate, f"{seed}/{p.index}") for p in self.pages
        ]
        self.by_host = by_host
        self._by_path = {(p.host, p.path): p for p in self.pages}

    @staticmethod
    def _draw_links(
        i: int, n_hosts: int, by_host: list[list[int]], k: int, rng: random.Random
    ) -> tuple[int, ...]:
        """Half of the links to the page's own host, the rest to other hosts."""
        own = [j for j in by_host[i % n_hosts] if j != i]
        other = [j for h, pages in enumerate(by_host) if h != i % n_hosts for j in pages]
        n_own = min(len(own), (k + 1) // 2 if other else k)
        n_other = min(len(other), k - n_own)
        return tuple(rng.sample(own, n_own) + rng.sample(other, n_other))

    def page_at(self, host: int, path: str) -> Page | None:
        return self._by_path.get((host, path))

    def render_page(self, page: Page, sim_time: float, version: int, serial: int,
                    bases: list[str], sim_epoch: float) -> bytes:
        """The HTML of ``page`` at content ``version``, as served for request ``serial``.

        The article text depends only on the version. Churn pages add markup
        that changes on every request (a class attribute and an HTML comment)
        and no visible text; volatile pages add a CSRF-like hidden token and a
        "Generated at" line that change without the page really changing.
        """
        digest = hashlib.sha256(f"{self.seed}/{page.index}/{version}".encode()).digest()
        article = " ".join(_WORDS[b % len(_WORDS)] for b in digest[:16])
        links = []
        for j in page.links:
            target = self.pages[j]
            href = target.path if target.host == page.host else bases[target.host] + target.path
            links.append(f'<a href="{html.escape(href)}">Page {j}</a>')
        parts = [
            "<!DOCTYPE html>",
            '<html lang="en">',
            f'<head><meta charset="utf-8"><title>Page {page.index}</title></head>',
            "<body>",
            f"<h1>Page {page.index}</h1>",
            f'<p class="article">{article.capitalize()}.</p>',
            f'<p class="related">Related: {" ".join(links)}</p>',
            '<p><a href="/">Home</a></p>',
        ]
        if page.churn:
            parts.append(
                f'<div class="promo promo-{serial % 97}" data-render="{serial}"></div>'
                f"<!-- rendered by node {serial % 13}, request {serial} -->"
            )
        if page.volatile:
            token = hashlib.sha256(f"{self.seed}/token/{page.index}/{serial}".encode()).hexdigest()
            stamp = formatdate(sim_epoch + sim_time, usegmt=True)
            parts.append(
                '<form method="post"><input type="hidden" name="csrf_token" '
                f'value="{token[:32]}"></form>'
                f'<p class="generated">Generated at {stamp}</p>'
            )
        parts.append("</body></html>\n")
        return "\n".join(parts).encode("utf-8")

    def render_index(self, host: int, bases: list[str]) -> bytes:
        """``/``: links to every page of the host and to the disallowed private page."""
        items = "".join(
            f'<li><a href="{self.pages[i].path}">Page {i}</a></li>' for i in self.by_host[host]
        )
        host_name = html.escape(bases[host])
        return (
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
            f"<title>{host_name}</title></head>\n<body><h1>Pages on {host_name}</h1>\n"
            f"<ul>{items}<li><a href=\"{PRIVATE_PATH}\">Members only</a></li></ul>\n"
            "</body></html>\n"
        ).encode()

    def render_sitemap(self, host: int, bases: list[str]) -> bytes:
        """``/sitemap.xml``: the host's pages with their weights as ``<priority>``."""
        urls = "".join(
            f"<url><loc>{bases[host]}{self.pages[i].path}</loc>"
            f"<priority>{self.pages[i].weight:.6g}</priority></url>\n"
            for i in self.by_host[host]
        )
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
            f"{urls}</urlset>\n"
        ).encode()

    @staticmethod
    def render_robots(base: str, crawl_delay: float | None, sitemap: bool = True) -> bytes:
        """``/robots.txt``: disallow ``/private/``, optional ``Crawl-delay`` (real seconds),
        a ``Sitemap:`` line unless ``sitemap`` is false."""
        lines = ["User-agent: *", "Disallow: /private/"]
        if crawl_delay is not None:
            lines.append(f"Crawl-delay: {crawl_delay:g}")
        if sitemap:
            lines.append(f"Sitemap: {base}/sitemap.xml")
        return ("\n".join(lines) + "\n").encode("utf-8")

    @staticmethod
    def render_private() -> bytes:
        return b"<!DOCTYPE html>\n<html><body><h1>Members only</h1></body></html>\n"

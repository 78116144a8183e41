"""Issue 62 item 2, a prior from what a page looks like: URL path templates
(math/lookalike.py ``url_template``, lua/lib_hosts.lua ``lib.url_template``), the shrinkage of a
group's pool towards its host (``shrunk_log_prior``) and, on a real Redis, a new page starting
from the pool of its host's pages with the same template (``group_prior``)."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from frontier_rate import Frontier
from frontier_rate.math import lookalike

PAGES = 2  # lua/lib.lua PRIOR_PAGES / POPULATION_PAGES: pseudo-pages of the level above
POPULATION_MIN = 4  # lua/lib_hosts.lua: observed pages before a shard's population pool counts


TEMPLATES = [
    ("https://a.example/news/2024/05/big-storm-hits", "/news/*/*/*"),
    ("https://a.example/news", "/news"),
    ("https://a.example/news/", "/news"),
    ("https://a.example", "/"),
    ("https://a.example/?page=2", "/?"),
    ("https://a.example?x=1", "/?"),
    ("https://a.example/products/python.md", "/products/*.md"),
    ("https://a.example/item?id=5#top", "/item?"),
    ("https://a.example/p/a1b2c3d4e5/comments", "/p/*/*"),
    ("https://a.example/tag/rust", "/tag/*"),
    ("https://a.example/about-us-and-more", "/*"),
    ("https://a.example/v2", "/*"),
    ("https://a.example/" + "x" * 100, "/*"),
    ("https://a.example/" + "/".join(["sec"] * 40), ("/" + "/".join(["sec"] * 39) + "/*")[:64]),
]


@pytest.mark.parametrize(("url", "template"), TEMPLATES)
def test_url_template(url, template):
    assert lookalike.url_template(url) == template


def test_url_template_rejects_what_is_not_a_url():
    with pytest.raises(TypeError, match="url must be a str, got b'x'"):
        lookalike.url_template(b"x")  # type: ignore[arg-type]


def test_shrinkage_against_an_independent_posterior():
    """(Σx + k·m) / (n + k) is the posterior mean of a normal mean μ with prior N(m, τ²) after n
    observations N(μ, σ²), k = σ²/τ²: checked against the posterior computed on a grid of μ
    from the prior and the likelihood (numerical integration, no formula shared)."""
    rng = np.random.default_rng(7)
    sigma, tau, m = 1.3, 0.65, -9.0
    for n in (0, 1, 3, 10):
        x = rng.normal(-7.0, sigma, n)
        mu = np.linspace(-20.0, 5.0, 200001)
        log_post = -0.5 * ((mu - m) / tau) ** 2 - 0.5 * (((x[:, None] - mu[None, :]) / sigma) ** 2).sum(0)
        w = np.exp(log_post - log_post.max())
        grid_mean = float((w * mu).sum() / w.sum())
        got = lookalike.shrunk_log_prior(float(x.sum()), n, m, pseudo=(sigma / tau) ** 2)
        assert got == pytest.approx(grid_mean, abs=1e-6)
    with pytest.raises(ValueError, match="pseudo must be > 0"):
        lookalike.shrunk_log_prior(0.0, 1, 0.0, pseudo=0.0)


def test_group_log_prior_by_hand():
    assert lookalike.group_log_prior(None, -5.0) == -5.0
    assert lookalike.group_log_prior((0, 0.0), -5.0) == -5.0  # an empty group: the host's
    assert lookalike.group_log_prior((1, -3.0), -5.0, own=-3.0) == -5.0  # only the page itself
    assert lookalike.group_log_prior((2, -4.0), -5.0) == pytest.approx((-4.0 + 2 * -5.0) / 4)
    assert lookalike.group_log_prior((3, -5.0), -5.0, own=-1.0) == pytest.approx((-4.0 + 2 * -5.0) / 4)


def _crawl(redis_url, namespace, group_prior):
    """One host whose /live/<n> pages change at every fetch and whose /archive/<n> pages never
    change, crawled for a while; then a new page of each kind. Returns the frontier and the
    two new pages' estimates."""
    f = Frontier(redis_url, namespace=namespace, estimator="interval", objective="freshness",
                 budget=1.0, min_host_delay=0.0, min_interval=1.0, max_interval=1e4,
                 lease_timeout=1e6, seed=1, prior_rate=0.01, fill_budget=False,
                 group_prior=group_prior)
    urls = [f"http://site.example/{kind}/{i}" for kind in ("live", "archive") for i in range(6)]
    f.add_many(urls, now=0.0)
    t = 0.0
    while t < 20000.0:
        got = f.next_requests(50, now=t)
        f.observe_many([(d, {"fingerprint": f"v{t}" if "/live/" in d.url else "v0",
                             "fetched_at": t}) for d in got])
        t += 25.0
    assert all(f.page(u)["fetches"] >= 3 for u in urls)
    f.add_many(["http://site.example/live/999", "http://site.example/archive/999"], now=t)
    return f, f.page("http://site.example/live/999")["estimate"], \
        f.page("http://site.example/archive/999")["estimate"]


def test_a_new_page_starts_from_its_url_groups_pool(redis_url, namespace):
    """A new page of a host's fast group starts several times higher than one of its quiet
    group, with exactly the chained shrinkage of the pools Redis holds (group -> host ->
    population -> prior_rate); with group_prior off both start from the host's prior."""
    f, live, archive = _crawl(redis_url, namespace, group_prior=True)
    assert live > 5 * archive
    shard = f.inspector.calls.of("site.example")
    raw = f.session.client.hgetall(f.session.keys.host_prior(shard))
    pools = {k.decode(): struct.unpack("<dd", v) for k, v in raw.items()}
    assert set(pools) == {"", "site.example", "site.example/live/*", "site.example/archive/*"}
    assert pools["site.example/live/*"][0] == pools["site.example/archive/*"][0] == 6
    n, total = pools[""]
    assert n >= POPULATION_MIN
    population = (total + PAGES * math.log(f.prior_rate)) / (n + PAGES)
    n, total = pools["site.example"]
    host = (total + PAGES * population) / (n + PAGES)
    for estimate, group in ((live, "site.example/live/*"), (archive, "site.example/archive/*")):
        assert math.log(estimate) == pytest.approx(lookalike.group_log_prior(pools[group], host),
                                                   abs=1e-9)
    said = f.page("http://site.example/live/999")["url_group"]  # frontier-rate inspect names it
    mean = math.exp(pools["site.example/live/*"][1] / 6) * 86400
    assert said == (f"site.example/live/*: 6 pages pooled, their planned rates' geometric mean "
                    f"{mean:.3g}/day: a new page of the group starts from it"), said
    f.close()
    g, live_off, archive_off = _crawl(redis_url, namespace + "off", group_prior=False)
    assert live_off == pytest.approx(archive_off, rel=1e-12)
    assert g.page("http://site.example/live/999")["url_group"].startswith(
        "site.example/live/*: no page pooled")
    assert archive < archive_off and live_off < live  # the host's prior lies between the groups'
    g.close()


def test_the_engines_lua_templates_are_pythons(redis_url, namespace):
    """The group fields the engine's Lua writes (lib.url_template) are host + url_template of
    each page's URL, for every URL of the table above (each on a host of its own)."""
    f = Frontier(redis_url, namespace=namespace, budget=100.0, min_host_delay=0.0,
                 min_interval=1.0, max_interval=100.0, lease_timeout=1e6, seed=1,
                 group_prior=True)
    urls = [u.replace("a.example", f"g{i}.example") for i, (u, _) in enumerate(TEMPLATES)]
    f.add_many(urls, now=0.0)
    t = 0.0
    while min(f.page(u)["fetches"] for u in urls) < 2:
        got = f.next_requests(100, now=t)
        f.observe_many([(d, {"fingerprint": "v0", "fetched_at": t}) for d in got])
        t += 10.0
        assert t < 10000.0
    fields = set()
    for shard in range(f.session.shards):
        fields |= {k.decode() for k in f.session.client.hkeys(f.session.keys.host_prior(shard))}
    expected = {f"g{i}.example" + template for i, (_, template) in enumerate(TEMPLATES)}
    assert {k for k in fields if "/" in k} == expected
    f.close()

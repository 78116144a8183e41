"""A page's URL group and the shrunk prior of its group (issue 62 item 2, "a prior from what a
page looks like").

Pages of one host whose URLs have the same shape tend to change alike: the articles under
``/news/<slug>`` rarely change after a day, the section front ``/news`` changes hourly. A page's
group is its host and its URL's path template (``url_template``); the engine pools the log
planned rates of each group's observed pages as it pools a host's (lua/lib_hosts.lua
``lib.url_template`` mirrors ``url_template``, ``lib.group_log_prior`` mirrors
``group_log_prior``), and a new page starts from its group's pool shrunk towards its host's
prior, itself shrunk towards the population's (docs/MATH.md, "The population prior").
"""

from __future__ import annotations

import re

TEMPLATE_MAX = 64
"""Bytes of a template kept (a longer path is cut: its group field stays small in Redis)."""
GROUP_PAGES = 2.0
"""Pseudo-pages of the host's prior in a group's pool (as PRIOR_PAGES in lua/lib.lua)."""
GROUP_MIN = 1
"""Observed pages (other than the page itself) a group needs before its pool counts."""
ANY = "*"
"""What stands for a variable path segment."""

_SLUG_SEPARATORS = re.compile(r"[-_ ]")
_EXTENSION = re.compile(r"\.[A-Za-z]{1,5}$")
_DIGIT = re.compile(r"[0-9]")


def _segment(seg: str, leaf: bool) -> str:
    """``seg`` as it appears in a template: ``ANY`` (plus its extension, e.g. ``.html``) when it
    varies from page to page of a kind: it holds a digit (an id, a date, a hash), it is a slug
    (two or more of ``-``, ``_``, space), it is longer than 24 bytes, or it is the leaf of a
    path at depth 2 or more (an item of a listing); else itself. ASCII rules, bytes counted, as
    Lua's patterns see them."""
    ext = _EXTENSION.search(seg)
    suffix = ext.group(0) if ext else ""
    stem = seg[: len(seg) - len(suffix)]
    if (leaf or _DIGIT.search(stem) or len(_SLUG_SEPARATORS.findall(stem)) >= 2
            or len(stem.encode()) > 24):
        return ANY + suffix
    return seg


def url_template(url: str) -> str:
    """The path template of ``url``: its path's segments (between "://host" and "?" or "#")
    with the variable ones replaced (``_segment``), "/" for the root, "?" appended when it has
    a query; the depth (number of segments) is in the template. Cut to ``TEMPLATE_MAX`` bytes.
    ``https://a.example/news/2024/05/big-storm`` -> ``/news/*/*/*``; ``https://a.example/news``
    -> ``/news``; ``https://a.example/products/python.md`` -> ``/products/*.md``."""
    if not isinstance(url, str):
        raise TypeError(f"url must be a str, got {url!r}")
    rest = url.split("#", 1)[0]
    scheme = rest.find("://")
    if scheme >= 0:
        rest = rest[scheme + 3:]
        cut = re.search(r"[/?]", rest)
        rest = rest[cut.start():] if cut else ""
    path, has_query, _ = rest.partition("?")
    segs = [s for s in path.split("/") if s]
    out = [_segment(s, leaf=i == len(segs) - 1 and len(segs) >= 2) for i, s in enumerate(segs)]
    template = "/" + "/".join(out) + ("?" if has_query else "")
    return template.encode()[:TEMPLATE_MAX].decode(errors="ignore")


def shrunk_log_prior(pooled_sum: float, pooled_n: float, base: float,
                     pseudo: float = GROUP_PAGES) -> float:
    """The mean of ``pooled_n`` log rates summing to ``pooled_sum`` shrunk towards ``base`` by
    ``pseudo`` pseudo-observations: (Σ + k·base) / (n + k). It is the posterior mean of a
    normal group mean with prior N(base, τ²) after n observations of variance σ², k = σ²/τ²
    (Gelman et al., *Bayesian Data Analysis*, 3rd ed., §2.5, eq. 2.12 with equal-variance
    observations; the empirical Bayes reading is Efron & Morris 1975, JASA 70:311): a group
    with few pages stays near its host, a large one speaks for itself."""
    if pseudo <= 0 or pooled_n < 0:
        raise ValueError(f"pseudo must be > 0 and pooled_n >= 0, got {pseudo!r}, {pooled_n!r}")
    return (pooled_sum + pseudo * base) / (pooled_n + pseudo)


def group_log_prior(group: tuple[float, float] | None, host_prior: float,
                    own: float | None = None) -> float:
    """A page's prior log rate from its group's pool ``(n, Σ log rate)`` (None: no group):
    without the page's own contribution ``own``, the pool shrunk towards ``host_prior`` when it
    holds at least ``GROUP_MIN`` other pages, else ``host_prior`` (lib.group_log_prior)."""
    if group is None:
        return host_prior
    n, total = group
    if own is not None:
        n, total = n - 1, total - own
    if n < GROUP_MIN - 0.5:
        return host_prior
    return shrunk_log_prior(total, n, host_prior)

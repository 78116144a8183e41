"""A link graph that frontera's ``FrontierTester`` can crawl, held in memory.

frontera 0.7.2 ships ``frontera.utils.tester.FrontierTester`` (it crawls a
graph through a ``FrontierManager``: every request a POST with a header, a
cookie and ``meta[b"this_param"]``, asserted on every dispatch) but its graph
store needs SQLAlchemy < 1.4. This stand-in offers what the tester reads:
``seeds``, ``pages``, ``get_page(url)`` and, per page, ``url``, ``status``,
``has_errors``, ``links`` and ``is_seed``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(eq=False)
class GraphPage:
    url: str
    status: int | None = 200
    is_seed: bool = False
    links: list[GraphPage] = field(default_factory=list)

    @property
    def has_errors(self) -> bool:
        """No response at all (the tester calls ``request_error``), as frontera's graph pages."""
        return self.status is None


class Graph:
    """Pages and links from ``{url: [linked urls]}``; the first ``n_seeds`` keys are seeds."""

    def __init__(self, links: dict[str, list[str]], seeds: list[str] | None = None) -> None:
        self._pages: dict[str, GraphPage] = {}
        for url, targets in links.items():
            page = self._page(url)
            page.links = [self._page(target) for target in targets]
        for url in seeds if seeds is not None else list(links)[:1]:
            self._page(url).is_seed = True

    def _page(self, url: str) -> GraphPage:
        return self._pages.setdefault(url, GraphPage(url))

    @property
    def pages(self) -> list[GraphPage]:
        return list(self._pages.values())

    @property
    def seeds(self) -> list[GraphPage]:
        return [page for page in self._pages.values() if page.is_seed]

    def get_page(self, url: str) -> GraphPage | None:
        return self._pages.get(url)

"""frontera's backend test harness API (``tests.backends``) over ``RevisitBackend``.

``contract/frontera_suite.py`` copies this file into the extracted frontera
sdist as ``tests/backends.py``: the sdist's backend tests
(``test_revisiting_backend.py``, ``test_overused_buffer.py``) import
``TEST_SITES`` and ``BackendSequenceTest`` from there, but the sdist does not
ship that module. This is frontier-rate's own implementation of the names
those tests use, with the sdist's test sites (``frontera/utils/graphs/data.py`` of the extracted sdist
in ``FRONTERA_SUITE_SDIST``, loaded by path: ``frontera.utils.graphs`` itself
needs SQLAlchemy < 1.4) and frontera's ``FrontierTester``. Every backend is
``frontier_rate.frontera.RevisitBackend`` on the suite's Redis
(``FRONTIER_RATE_SUITE_REDIS_URL``), one namespace per frontier, with one-shot
settings so that a finite crawl ends: pages are not revisited within the run
(``MIN_INTERVAL`` one hour, no budget filling) and ``finished`` turns True as
soon as nothing is due (``CLOSE_AFTER = "idle"``).
"""

from __future__ import annotations

import importlib.util
import os
import uuid
from pathlib import Path
from typing import Any

from frontera.core.manager import FrontierManager
from frontera.settings import Settings
from frontera.utils.tester import BaseDownloaderSimulator, FrontierTester

_DATA = Path(os.environ["FRONTERA_SUITE_SDIST"]) / "frontera" / "utils" / "graphs" / "data.py"


def _load_graph_data() -> Any:
    """The sdist's graph data module, imported by path (no SQLAlchemy needed)."""
    spec = importlib.util.spec_from_file_location("frontera_sdist_graph_data", _DATA)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load frontera's test sites from {_DATA}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


graph_data = _load_graph_data()
TEST_SITES: dict[str, Any] = {
    f"SITE_{name.rsplit('_', 1)[1]}": value
    for name, value in sorted(vars(graph_data).items())
    if name.startswith("SITE_LIST_") and isinstance(value, graph_data.CrawlSiteListData)
}
"""``SITE_01`` ... ``SITE_09``: every site list of frontera's graph data."""

ONE_SHOT = {
    "FRONTIER_RATE_MIN_INTERVAL": 3600.0,
    "FRONTIER_RATE_MAX_INTERVAL": 7200.0,
    "FRONTIER_RATE_FILL_BUDGET": False,
    "FRONTIER_RATE_CLOSE_AFTER": "idle",
    "FRONTIER_RATE_MIN_HOST_DELAY": 0.0,
    "FRONTIER_RATE_BUDGET": 1e6,
}
"""Settings that make a crawl of a finite graph end: nothing is due again within the run."""


class GraphPage:
    """A page of a link graph as ``FrontierTester`` reads it."""

    def __init__(self, url: str, status: int | None = 200) -> None:
        self.url = url
        self.status = status
        self.is_seed = False
        self.links: list[GraphPage] = []

    @property
    def has_errors(self) -> bool:
        return self.status is None

    def __repr__(self) -> str:
        return f"<GraphPage {self.url}{'*' if self.is_seed else ''}>"


class GraphManager:
    """An in-memory stand-in for frontera's SQLite ``CrawlGraphManager``.

    Same reading of the graph data: a site is a list of ``(page, links)``;
    its first page is a seed; ``page`` may be ``(status, url)`` or
    ``(status, url, redirects)``; a link not listed as a page is a page with
    the default status.
    """

    def __init__(self) -> None:
        self._pages: dict[str, GraphPage] = {}

    def _page(self, url: str, status: int | None) -> GraphPage:
        page = self._pages.get(url)
        if page is None:
            page = self._pages[url] = GraphPage(url, status)
        return page

    def add_site(self, site: Any, default_status: int = 200) -> None:
        pages = site.pages if isinstance(site, graph_data.CrawlSiteData) else site
        for i, (info, links) in enumerate(pages):
            status, url = (info[0], info[1]) if isinstance(info, tuple) else (default_status, info)
            page = self._page(url, status)
            page.status = status
            page.is_seed = page.is_seed or i == 0
            for link in links:
                target = self._page(link, default_status)
                if target not in page.links:
                    page.links.append(target)

    def add_site_list(self, graph: Any, default_status: int = 200) -> None:
        sites = graph.sites if isinstance(graph, graph_data.CrawlSiteListData) else graph
        for site in sites:
            self.add_site(site, default_status)

    @property
    def pages(self) -> list[GraphPage]:
        return list(self._pages.values())

    @property
    def seeds(self) -> list[GraphPage]:
        return [page for page in self._pages.values() if page.is_seed]

    def get_page(self, url: str) -> GraphPage | None:
        return self._pages.get(url)

    def reachable(self) -> set[str]:
        """URLs a crawl from the seeds reaches (error pages included, not their links)."""
        seen: set[str] = set()
        todo = [page for page in self.seeds]
        while todo:
            page = todo.pop()
            if page.url in seen:
                continue
            seen.add(page.url)
            if not page.has_errors:
                todo.extend(page.links)
        return seen


class BackendTest:
    """Base of frontera's backend tests: builds frontiers over ``backend_class``.

    Frontiers built here and still running after a test are stopped in
    ``teardown_method`` (a failed assertion inside a tester leaves one open).
    """

    backend_class = "frontier_rate.frontera.RevisitBackend"

    def setup_method(self, method: Any) -> None:
        self._frontiers: list[FrontierManager] = []

    def teardown_method(self, method: Any) -> None:
        for frontier in getattr(self, "_frontiers", []):
            if frontier._started and not frontier._stopped:
                frontier.stop()

    def get_settings(self) -> Settings:
        return Settings(attributes={
            "BACKEND": self.backend_class,
            "FRONTIER_RATE_REDIS_URL": os.environ["FRONTIER_RATE_SUITE_REDIS_URL"],
            **ONE_SHOT,
        })

    def get_frontier(self) -> FrontierManager:
        settings = self.get_settings()
        settings.set("FRONTIER_RATE_NAMESPACE", f"frontera-suite-{uuid.uuid4().hex[:12]}")
        frontier = FrontierManager.from_settings(settings)
        self._frontiers.append(frontier)
        return frontier


class BackendSequenceTest(BackendTest):
    """Crawls frontera's test sites with ``FrontierTester`` and returns what was handed out."""

    def get_settings(self) -> Settings:
        settings = super().get_settings()
        settings.TEST_MODE = True
        settings.LOGGING_MANAGER_ENABLED = False
        settings.LOGGING_BACKEND_ENABLED = False
        settings.LOGGING_DEBUGGING_ENABLED = False
        return settings

    def get_sequence(self, site_list: Any, max_next_requests: int,
                     downloader_simulator: Any = None,
                     frontier_tester: type = FrontierTester) -> list[Any]:
        """``FrontierTester.sequence``: (requests, iteration, downloader info) per poll."""
        graph = GraphManager()
        graph.add_site_list(site_list)
        tester = frontier_tester(frontier=self.get_frontier(), graph_manager=graph,
                                 max_next_requests=max_next_requests,
                                 downloader_simulator=downloader_simulator
                                 or BaseDownloaderSimulator())
        tester.run()
        return tester.sequence

    def get_url_sequence(self, site_list: Any, max_next_requests: int,
                         downloader_simulator: Any = None,
                         frontier_tester: type = FrontierTester) -> list[str]:
        """The URLs handed out, in order, over the whole crawl."""
        return [request.url
                for requests, _, _ in self.get_sequence(site_list, max_next_requests,
                                                        downloader_simulator, frontier_tester)
                for request in requests]

    def assert_sequence(self, site_list: Any, expected_sequence: list[str],
                        max_next_requests: int) -> None:
        sequence = self.get_url_sequence(site_list, max_next_requests)
        assert sequence == expected_sequence

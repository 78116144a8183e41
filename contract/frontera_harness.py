"""frontier-rate's own checks in frontera's backend test harness.

``contract/frontera_suite.py`` copies this file into the run directory as
``tests/test_frontier_rate_harness.py``, beside frontera's own test files and
``tests/backends.py`` (``contract/frontera_backends.py``). It crawls every test
site of frontera's graph data (``TEST_SITES``: ``SITE_01`` ... ``SITE_09``)
with frontera's ``FrontierTester`` and downloader simulators and checks what
holds for any frontera backend that crawls each page once, whatever its order
(frontera's FIFO/LIFO/DFS/BFS sequence expectations are not in its sdist, and
a revisit frontier orders by due time anyway):

- ``TestFrontierTester``: frontera's tester as is (every request a POST with a
  header, a cookie and ``meta[b"this_param"]``, asserted on every dispatch):
  each reachable page is handed out exactly once, the crawl ends, no poll
  returns more than ``max_next_requests`` and, with frontera's
  ``DownloaderSimulator``, nothing of an overused download slot.
- ``TestPagesAsGiven``: the same graphs with GET requests, so every page is a
  revisitable page stored in Redis: each page is handed out once (one-shot
  settings) and comes back as given (meta with bytes, tuples, nested and
  non-text keys, headers, cookies, body), on the inline and the background
  driver.
- ``TestRevisits``: frontera's revisiting test with GET pages and a 1 s
  interval: every page is revisited, never early, and each revisit is as given.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlparse

import pytest
from frontera.utils.tester import BaseDownloaderSimulator, DownloaderSimulator, FrontierTester
from tests.backends import TEST_SITES, BackendSequenceTest, GraphManager

from frontier_rate.crawl.politeness import SEND_BY_KEY
from frontier_rate.frontera import LEASE_KEY

SITES = sorted(TEST_SITES)


def _simulator(name: str) -> Any:
    return BaseDownloaderSimulator() if name == "base" else DownloaderSimulator(rate=1)


class BoundedTester(FrontierTester):
    """``FrontierTester.run`` (poll, download, report, until a poll is empty and the
    downloader idle) with bounds: a backend that keeps handing out requests (more
    non-empty polls than ten per page) or never ends (60 s) fails the test instead of
    hanging it."""

    WALL = 60.0

    def run(self, add_all_pages: bool = False) -> None:
        if not self.frontier.auto_start:
            self.frontier.start()
        self._add_seeds()
        cap, deadline, busy = 10 * len(self.graph_manager.pages) + 20, time.monotonic() + self.WALL, 0
        while busy < cap and time.monotonic() < deadline:
            result = self._run_iteration()
            self.sequence.append(result)
            if result[0]:
                busy += 1
            elif self.downloader_simulator.idle() and self.done():
                self.frontier.stop()
                return
            else:
                time.sleep(0.01)
        sent = [request.url for requests, _, _ in self.sequence for request in requests]
        raise AssertionError(f"no end after {busy} polls: {len(sent)} requests handed out for "
                             f"{len(self.graph_manager.pages)} pages")

    def done(self) -> bool:
        """frontera's tester: an empty poll ends the crawl."""
        return True


class GetTester(BoundedTester):
    """Requests are GETs (pages), with more than frontera's tester gives; every dispatch is
    checked against the request the frontier was given for that URL."""

    until_finished = False
    """True: end only when the frontier says ``finished`` (the background driver hands out
    what its worker has leased so far, so an empty poll does not mean the crawl is over)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.given: dict[str, Any] = {}
        self.handed: list[tuple[float, Any]] = []

    def done(self) -> bool:
        return not self.until_finished or self.frontier.finished

    def _make_request(self, url: str) -> Any:
        request = self.frontier.request_model(
            url=url, method=b"GET", body=b"\x00body",
            headers={b"X-Important-Header": b"Frontera", "Accept": [b"text/html", b"*/*"]},
            cookies={b"currency": b"USD", "session": "abc"})
        request.meta[b"this_param"] = b"should be passed over"
        request.meta[b"nested"] = {b"k": (1, 2.5, None, [b"x"]), 3: "int key", "$s": True}
        request.meta[b"scrapy_meta"] = {"depth": 1, "raw": b"\xff", "pair": ("a", 1)}
        self.given[url] = request  # the manager's middlewares add their keys to this object
        return request

    def _run_iteration(self) -> tuple[list[Any], int, dict[str, Any]]:
        kwargs = self.downloader_simulator.downloader_info()
        if self.max_next_requests:
            kwargs["max_next_requests"] = self.max_next_requests
        requests = self.frontier.get_next_requests(**kwargs)
        self.downloader_simulator.update(requests)
        for request in self.downloader_simulator.download():
            self.handed.append((time.monotonic(), request))
            assert_as_given(request, self.given[request.url])
            page = self.graph_manager.get_page(request.url)
            if page.has_errors:
                self.frontier.request_error(request=request, error=page.status)
                continue
            self.frontier.page_crawled(response=self._make_response(
                url=request.url, status_code=page.status, request=request))
            self.frontier.links_extracted(
                request=request, links=[self._make_request(link.url) for link in page.links])
        return requests, self.frontier.iteration, kwargs


class FinishedGetTester(GetTester):
    until_finished = True


def assert_as_given(got: Any, given: Any) -> None:
    """``got`` is ``given`` plus the lease (top-level and in the Scrapy meta) and, in the
    Scrapy meta, the moment its request must leave by (``SEND_BY_KEY``), nothing less."""
    assert got.method == b"GET"
    meta = dict(got.meta)
    lease = meta.pop(LEASE_KEY.encode())
    scrapy_meta = dict(meta[b"scrapy_meta"])
    assert scrapy_meta.pop(LEASE_KEY) == lease
    assert isinstance(scrapy_meta.pop(SEND_BY_KEY), float)
    meta[b"scrapy_meta"] = scrapy_meta
    assert meta == given.meta
    assert type(meta[b"nested"][b"k"]) is tuple and type(scrapy_meta["pair"]) is tuple
    assert (got.headers, got.cookies, got.body) == (given.headers, given.cookies, given.body)


def as_urls(site_list: Any) -> list[list[tuple[str, list[str]]]]:
    """The site list with page names (``A1``, ``B``) made http URLs (``http://a.test/A1``):
    a GET is a page only if its URL is one the frontier can fetch."""
    def url(name: str) -> str:
        return name if "://" in name else f"http://{name[0].lower()}.test/{name}"

    sites = []
    for site in site_list.sites:
        pages = site.pages if hasattr(site, "pages") else site
        sites.append([(url(page), [url(link) for link in links]) for page, links in pages])
    return sites


def handed_out(sequence: list[Any]) -> list[str]:
    return [request.url for requests, _, _ in sequence for request in requests]


def check_polls(sequence: list[Any], max_next: int) -> None:
    """No poll returned more than asked, nor a request of a slot reported overused."""
    for requests, _, info in sequence:
        assert len(requests) <= max_next
        overused = set(info["overused_keys"])
        hosts = {urlparse(request.url).hostname or "" for request in requests}
        assert not hosts & overused, (hosts, overused)


class TestFrontierTester(BackendSequenceTest):
    @pytest.mark.parametrize("simulator", ["base", "rate1"])
    @pytest.mark.parametrize("max_next", [1, 5, 100])
    @pytest.mark.parametrize("site", SITES)
    def test_each_request_once(self, site: str, max_next: int, simulator: str) -> None:
        graph = GraphManager()
        graph.add_site_list(TEST_SITES[site])
        sequence = self.get_sequence(TEST_SITES[site], max_next, _simulator(simulator),
                                     BoundedTester)
        assert sorted(handed_out(sequence)) == sorted(graph.reachable())
        check_polls(sequence, max_next)


class TestPagesAsGiven(BackendSequenceTest):
    extra: dict[str, Any] = {}

    def get_settings(self) -> Any:
        settings = super().get_settings()
        for name, value in self.extra.items():
            settings.set(name, value)
        return settings

    def crawl(self, site: str, max_next: int, simulator: str, tester: type) -> GetTester:
        graph = GraphManager()
        graph.add_site_list(as_urls(TEST_SITES[site]))
        run = tester(frontier=self.get_frontier(), graph_manager=graph,
                     max_next_requests=max_next, downloader_simulator=_simulator(simulator))
        run.run()
        assert sorted(handed_out(run.sequence)) == sorted(graph.reachable())  # each once
        check_polls(run.sequence, max_next)
        return run

    @pytest.mark.parametrize(("max_next", "simulator"), [(1, "base"), (5, "base"),
                                                         (100, "base"), (5, "rate1")])
    @pytest.mark.parametrize("site", SITES)
    def test_inline(self, site: str, max_next: int, simulator: str) -> None:
        self.extra = {"FRONTIER_RATE_FRONTERA_DRIVER": "inline"}
        self.crawl(site, max_next, simulator, GetTester)

    @pytest.mark.parametrize("site", SITES)
    def test_background(self, site: str) -> None:
        self.extra = {"FRONTIER_RATE_FRONTERA_DRIVER": "background"}
        self.crawl(site, 5, "base", FinishedGetTester)


class TestRevisits(BackendSequenceTest):
    INTERVAL = 1.0
    RUN = 4.0

    def get_settings(self) -> Any:
        settings = super().get_settings()
        settings.set("FRONTIER_RATE_ESTIMATOR", "interval")  # periodic: exact due times
        settings.set("FRONTIER_RATE_MIN_INTERVAL", self.INTERVAL)
        settings.set("FRONTIER_RATE_MAX_INTERVAL", 1.5 * self.INTERVAL)
        settings.set("FRONTIER_RATE_CLOSE_AFTER", self.RUN)
        return settings

    @pytest.mark.parametrize("site", ["SITE_01", "SITE_09"])
    def test_every_page_revisited_as_given(self, site: str) -> None:
        graph = GraphManager()
        graph.add_site_list(as_urls(TEST_SITES[site]))
        run = FinishedGetTester(frontier=self.get_frontier(), graph_manager=graph,
                                max_next_requests=10,
                                downloader_simulator=BaseDownloaderSimulator())
        run.run()
        times: dict[str, list[float]] = {}
        for at, request in run.handed:
            times.setdefault(request.url, []).append(at)
        assert set(times) == graph.reachable()
        for url, seen in times.items():
            assert len(seen) >= 2, (url, seen)
            gaps = [b - a for a, b in zip(seen, seen[1:], strict=False)]
            assert min(gaps) >= self.INTERVAL - 0.05, (url, gaps)

"""The default namespace of a Scrapy crawl is per project (issue 33), with real crawls.

Before, the default was the spider's name: a second project's spider of the same name
fetched the first project's pages (3-24 of them) and yielded them as its own items.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scrapy_support.harness import finish_crawl, run_crawl, start_crawl  # noqa: E402
from scrapy_support.server import ChangingSite  # noqa: E402

from frontier_rate.scrapy.namespace import default_namespace  # noqa: E402

pytestmark = pytest.mark.timeout(120)

DEFAULT = {"FRONTIER_RATE_NAMESPACE": None, "FRONTIER_RATE_CLOSE_AFTER": 4, "LOG_LEVEL": "INFO"}


def _site(host: str, name: str) -> ChangingSite:
    site = ChangingSite(host)
    for i in range(6):
        site.set(f"/{name}{i}", f"<p>{name} {i}</p>")
    return site


def test_two_projects_with_one_spider_name_never_share_pages(redis_url, tmp_path):
    tag = tmp_path.name[-12:].replace("_", "")
    projects = [f"alpha{tag}", f"beta{tag}"]
    with _site("127.0.0.1", "a") as site_a, _site("127.0.0.2", "b") as site_b:
        starts = [[{"url": site_a.url(f"/a{i}")} for i in range(6)],
                  [{"url": site_b.url(f"/b{i}")} for i in range(6)]]
        runs = [start_crawl(tmp_path, project, redis_url, "unused", start,
                            {**DEFAULT, "BOT_NAME": project})
                for project, start in zip(projects, starts, strict=True)]
        crawls = [finish_crawl(*run) for run in runs]
        hosts_a = {hit.path for hit in site_a.hits}
        hosts_b = {hit.path for hit in site_b.hits}
    for crawl in crawls:
        assert crawl.returncode == 0, crawl.log[-3000:]
    alpha, beta = crawls
    assert alpha.responses() and beta.responses()
    assert all(r["request_url"].startswith(site_a.url("/")) for r in alpha.responses())
    assert all(r["request_url"].startswith(site_b.url("/")) for r in beta.responses())
    assert hosts_a == {f"/a{i}" for i in range(6)} and hosts_b == {f"/b{i}" for i in range(6)}
    for project, crawl in zip(projects, crawls, strict=True):
        namespace = default_namespace(project, "recorder")
        assert namespace == f"{project}.recorder"
        assert re.search(rf"scheduler opened: namespace='{re.escape(namespace)}' \(created, "
                         rf"default; project '{project}'\)", crawl.log), crawl.log[-3000:]


def test_opening_another_projects_namespace_says_so(redis_url, namespace, tmp_path):
    with _site("127.0.0.1", "a") as site:
        start = [{"url": site.url("/a0")}]
        first = run_crawl(tmp_path, redis_url, namespace, start,
                          {"BOT_NAME": "owner", "FRONTIER_RATE_CLOSE_AFTER": 2}, name="owner")
        again = run_crawl(tmp_path, redis_url, namespace, start,
                          {"BOT_NAME": "owner", "FRONTIER_RATE_CLOSE_AFTER": 2}, name="again")
        other = run_crawl(tmp_path, redis_url, namespace, start,
                          {"BOT_NAME": "intruder", "FRONTIER_RATE_CLOSE_AFTER": 2},
                          name="intruder")
    assert f"namespace={namespace!r} (created, FRONTIER_RATE_NAMESPACE" in first.log
    assert f"namespace={namespace!r} (opened, FRONTIER_RATE_NAMESPACE" in again.log
    assert "was created by project" not in again.log
    assert (f"WARNING: frontier-rate: namespace {namespace!r} was created by project 'owner'; "
            "this crawl is project 'intruder'") in other.log, other.log[-3000:]


SCRIPT = '''
import scrapy


class Pages(scrapy.Spider):
    name = "pages{tag}"

    def __init__(self, url="", **kw):
        super().__init__(**kw)
        self.start_urls = [url]

    def parse(self, response):
        yield {{"url": response.url}}
'''


def _runspider(folder: Path, url: str, redis_url: str) -> str:
    """``scrapy runspider pages.py`` in ``folder`` with the default namespace; its log."""
    options = {"SCHEDULER": "frontier_rate.scrapy.Scheduler", "FRONTIER_RATE_REDIS_URL": redis_url,
               "FRONTIER_RATE_CLOSE_AFTER": "3", "FRONTIER_RATE_MIN_INTERVAL": "0.5",
               "FRONTIER_RATE_MAX_INTERVAL": "1", "TELNETCONSOLE_ENABLED": "0",
               "LOG_LEVEL": "DEBUG"}
    command = [sys.executable, "-m", "scrapy", "runspider", "pages.py", "-a", f"url={url}"]
    for name, value in options.items():
        command += ["-s", f"{name}={value}"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True,
                          timeout=90)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done.stdout + done.stderr


def test_two_scripts_of_one_name_in_two_folders_are_told_before_sharing(redis_url, tmp_path):
    """Issue 61: two ``pages.py`` with a spider ``pages`` in two folders both default to
    namespace ``pages.pages``; the second fetched 11 of the first one's URLs, silently."""
    tag = tmp_path.name[-12:].replace("_", "")
    folders = [tmp_path / "one", tmp_path / "two"]
    for folder in folders:
        folder.mkdir()
        (folder / "pages.py").write_text(SCRIPT.format(tag=tag))
    with _site("127.0.0.1", "a") as site_a, _site("127.0.0.2", "b") as site_b:
        first = _runspider(folders[0], site_a.url("/a0"), redis_url)
        second = _runspider(folders[1], site_b.url("/b0"), redis_url)
    namespace = f"pages.pages{tag}"
    assert f"namespace='{namespace}' (created, default; project 'pages')" in first, first[-3000:]
    assert "WARNING: frontier-rate: namespace" not in first
    warning = (f"WARNING: frontier-rate: namespace {namespace!r} was created by a script in "
               f"{folders[0]}; this script is in {folders[1]}, and both now share its pages. "
               "Set FRONTIER_RATE_NAMESPACE")
    assert second.count(warning) == 1, second[-3000:]
    requests = [m.start() for m in re.finditer(r"Crawled \(\d+\)", second)]
    # said before any request, at start-up, with how to name a frontier of its own
    assert requests and second.index(warning) < requests[0], second[-3000:]
    assert f"FRONTIER_RATE_NAMESPACE=two.pages.pages{tag}" in second

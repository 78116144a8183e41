"""The Scrapy scheduler keeps Scrapy's contract: real crawls in subprocesses, loopback sites.

What Scrapy users rely on (docs/SCRAPY.md; Scrapy's own suite runs in contract/): a
request comes back with everything the spider gave it, cookies included; a request the
frontier cannot store is fetched once, not lost, and the crawl goes on; duplicates are
dropped exactly as Scrapy's dupefilter drops them (``request_dropped`` fires) and
``dont_filter`` fetches again; a first fetch is reported as new and changed; a page is
never fetched twice within ``FRONTIER_RATE_MIN_INTERVAL``; a bad setting stops the crawl
with one line naming it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scrapy_support.harness import ROOT, open_frontier, run_crawl  # noqa: E402
from scrapy_support.server import ChangingSite  # noqa: E402

pytestmark = pytest.mark.timeout(120)

FAST_REVISITS = {"FRONTIER_RATE_CLOSE_AFTER": 3}
"""The harness's defaults revisit every ~1 s; the crawl ends after 3 s."""


@pytest.fixture
def site():
    with ChangingSite("127.0.0.1") as running:
        yield running


def _contract_crawl(tmp_path, redis_url, namespace, site, spider, settings=None):
    return run_crawl(tmp_path, redis_url, namespace, [], settings or FAST_REVISITS,
                     spider=f"scrapy_support.contract_spiders.{spider}",
                     args={"base": site.url("/")})


def test_per_request_cookies_headers_and_flags_are_sent_on_every_fetch(
        site, redis_url, namespace, tmp_path):
    site.set("/account", "<p>account {n}</p>", template=True)
    crawl = _contract_crawl(tmp_path, redis_url, namespace, site, "CookieSpider")
    hits = site.hits_for("/account")
    assert len(hits) >= 2, crawl.log[-3000:]  # the first fetch and revisits
    assert all(hit.cookie == "session=abc" for hit in hits), [h.cookie for h in hits]
    responses = crawl.responses(site.url("/account"))
    assert responses and all(r["headers"].get("X-Token") == "t1" for r in responses)


def test_requests_the_frontier_cannot_store_are_fetched_once_and_the_crawl_goes_on(
        site, redis_url, namespace, tmp_path):
    """A Request object in meta, a lambda callback (in start()) and a set in meta (in a
    callback): each fetched once, with a WARNING naming it; the plain page is revisited."""
    for path in ("/with-request-in-meta", "/lambda", "/plain", "/from-callback"):
        site.set(path, f"<p>{path}</p>")
    crawl = _contract_crawl(tmp_path, redis_url, namespace, site, "BadStartSpider")
    assert crawl.returncode == 0, crawl.log[-3000:]
    assert crawl.closed["reason"] == "frontier_rate_close_after"
    for path in ("/with-request-in-meta", "/lambda", "/from-callback"):
        assert len(site.hits_for(path)) == 1, (path, crawl.log[-3000:])
        assert re.search(rf"WARNING: frontier-rate: <GET {re.escape(site.url(path))}> is "
                         r"fetched once, not revisited: ", crawl.log), path
    assert len(site.hits_for("/plain")) >= 2  # a page: revisited
    assert [r["callback"] for r in crawl.responses(site.url("/lambda"))] == ["lambda"]
    assert crawl.stats["frontier_rate/not_revisitable"] == 3
    assert "Task exception was never retrieved" not in crawl.log
    assert "Traceback" not in crawl.log


def test_duplicates_are_dropped_as_scrapy_drops_them_and_dont_filter_fetches_again(
        site, redis_url, namespace, tmp_path):
    site.set("/a", "<p>a</p>")
    site.set("/b", "<p>b</p>")
    crawl = _contract_crawl(tmp_path, redis_url, namespace, site, "DupeSpider",
                            {"FRONTIER_RATE_CLOSE_AFTER": "idle"})
    assert crawl.returncode == 0, crawl.log[-3000:]
    callbacks = sorted(r["callback"] for r in crawl.responses(site.url("/a")))
    assert callbacks == ["parse", "parse_other"]  # the dont_filter one has its own callback
    other = [r for r in crawl.responses(site.url("/a")) if r["callback"] == "parse_other"]
    assert other[0]["meta"]["which"] == "second"
    assert len(site.hits_for("/a")) == 2
    assert len(site.hits_for("/b")) == 1  # "#one" and "#two": one resource, one page
    dropped = sorted(r["url"] for r in crawl.records if r["kind"] == "dropped")
    assert dropped == [site.url("/a"), site.url("/b#two")]
    stats = crawl.stats
    # scheduled = dropped + downloaded, as Scrapy's own tests state it
    assert stats["scheduler/enqueued"] == 3 and stats["downloader/response_count"] == 3
    frontier = open_frontier(redis_url, namespace)
    try:
        assert frontier.page(site.url("/b")) is not None
        assert frontier.page(site.url("/b#one")) is None
    finally:
        frontier.close()


def test_a_static_page_is_not_fetched_twice_within_min_interval(
        site, redis_url, namespace, tmp_path):
    """A one-page site, the default budget (1 fetch/s, filled) and MIN_INTERVAL of 60 s:
    one fetch in a 5 s crawl, not one per host delay."""
    site.set("/", "<p>never changes</p>", etag=True)
    crawl = run_crawl(tmp_path, redis_url, namespace, [{"url": site.url("/")}], {
        "FRONTIER_RATE_MIN_INTERVAL": 60.0, "FRONTIER_RATE_MAX_INTERVAL": 3600.0,
        "FRONTIER_RATE_MIN_HOST_DELAY": 0.2, "FRONTIER_RATE_BUDGET": 1.0,
        "FRONTIER_RATE_CLOSE_AFTER": 5})
    assert crawl.returncode == 0, crawl.log[-3000:]
    assert len(site.hits_for("/")) == 1, site.hits_for("/")


def test_a_first_crawl_is_not_held_to_the_revisit_budget(site, redis_url, namespace, tmp_path):
    """40 linked pages with a budget of 0.05 fetches/s: every page's first fetch happens in
    the 4 s crawl (the budget would allow one); no page is revisited."""
    links = "".join(f'<a href="/p{i}">p{i}</a>' for i in range(40))
    site.set("/", links)
    for i in range(40):
        site.set(f"/p{i}", f"<p>{i}</p>")
    crawl = run_crawl(tmp_path, redis_url, namespace, [{"url": site.url("/")}], {
        "FRONTIER_RATE_BUDGET": 0.05, "FRONTIER_RATE_MIN_INTERVAL": 60.0,
        "FRONTIER_RATE_MAX_INTERVAL": 3600.0, "FRONTIER_RATE_MIN_HOST_DELAY": 0.0,
        "FRONTIER_RATE_CLOSE_AFTER": 4}, follow=True)
    assert crawl.returncode == 0, crawl.log[-3000:]
    assert all(len(site.hits_for(f"/p{i}")) == 1 for i in range(40)), crawl.log[-3000:]
    new = [r for r in crawl.records if r["kind"] == "response"
           and r["meta"]["frontier_rate"]["new"]]
    assert len(new) == 41 and all(r["meta"]["frontier_rate"]["changed"] for r in new)


@pytest.mark.parametrize(("setting", "value", "shown"), [
    ("FRONTIER_RATE_BUDGET", "abc", "FRONTIER_RATE_BUDGET='abc'"),
    ("FRONTIER_RATE_BUDGET", 1e-9, "FRONTIER_RATE_BUDGET=1e-09"),
    ("FRONTIER_RATE_CLOSE_AFTER", -3, "FRONTIER_RATE_CLOSE_AFTER=-3"),
    ("FRONTIER_RATE_STRIP_PATTERNS", "(", "FRONTIER_RATE_STRIP_PATTERNS=['(']"),
    ("FRONTIER_RATE_MAX_BODY", -1, "FRONTIER_RATE_MAX_BODY=-1"),
    ("FRONTIER_RATE_CONDITIONAL", "maybe", "FRONTIER_RATE_CONDITIONAL='maybe'"),
    ("FRONTIER_RATE_FINGERPRINT", "no.such.function", "FRONTIER_RATE_FINGERPRINT="),
    ("FRONTIER_RATE_BATCH", -1, "FRONTIER_RATE_BATCH=-1"),
    ("DOWNLOAD_DELAY", -2, "DOWNLOAD_DELAY=-2"),
])
def test_a_bad_setting_stops_the_crawl_with_one_line_naming_it(
        site, redis_url, namespace, tmp_path, setting, value, shown):
    site.set("/", "<p>home</p>")
    crawl = run_crawl(tmp_path, redis_url, namespace, [{"url": site.url("/")}],
                      {setting: value, "LOG_FILE": None, "FRONTIER_RATE_MIN_HOST_DELAY": None})
    last = [line for line in crawl.log.splitlines() if line.strip()][-1]
    assert shown in last, crawl.log[-3000:]
    assert site.hits == []


README_SPIDER = re.compile(r"```python\n(# a spider[^\n]*\n.*?class News\(scrapy\.Spider\).*?)```",
                           re.S)


def test_the_readme_spider_runs_verbatim_and_yields_items(site, redis_url, namespace, tmp_path):
    """The README's example spider, taken from README.md as it is, crawls a site: its first
    fetches are changed (new), so it follows the links and yields an item per article."""
    code = README_SPIDER.search((ROOT / "README.md").read_text(encoding="utf-8"))
    assert code, "README.md has no example spider block"
    (tmp_path / "readme_spider.py").write_text("import scrapy\n" + code.group(1))
    site.set("/", '<a href="/one">one</a> <a href="/two">two</a>')
    site.set("/one", "<title>One</title>")
    site.set("/two", "<title>Two</title>")
    runner = tmp_path / "run.py"
    runner.write_text(
        "import sys\nfrom scrapy.crawler import CrawlerProcess\nimport readme_spider\n"
        "process = CrawlerProcess({'SCHEDULER': 'frontier_rate.scrapy.Scheduler',\n"
        f"    'FRONTIER_RATE_REDIS_URL': {redis_url!r}, 'FRONTIER_RATE_NAMESPACE': "
        f"{namespace!r},\n"
        "    'FRONTIER_RATE_CLOSE_AFTER': 4, 'TELNETCONSOLE_ENABLED': False,\n"
        f"    'FEEDS': {{{str(tmp_path / 'items.jsonl')!r}: {{'format': 'jsonlines'}}}}}})\n"
        f"process.crawl(readme_spider.News, start_urls=[{site.url('/')!r}])\n"
        "process.start()\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    done = subprocess.run([sys.executable, str(runner)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-3000:]
    items = [json.loads(line) for line in (tmp_path / "items.jsonl").read_text().splitlines()]
    assert sorted(item["title"] for item in items) == ["One", "Two"], done.stderr[-3000:]


def test_host_delay_defaults_to_scrapys_own_and_never_conflicts_with_a_stored_one(
        site, redis_url, namespace, tmp_path):
    """Without DOWNLOAD_DELAY or FRONTIER_RATE_MIN_HOST_DELAY a crawl creates its namespace
    with Scrapy's own default politeness (no delay); a namespace that stores an explicit
    delay (set by another process or the CLI) keeps it, with no settings conflict."""
    from frontier_rate.engine.frontier import Frontier

    site.set("/", "<p>home</p>")
    unset = {"FRONTIER_RATE_MIN_HOST_DELAY": None, "FRONTIER_RATE_CLOSE_AFTER": "idle"}
    crawl = run_crawl(tmp_path, redis_url, namespace, [{"url": site.url("/")}], unset)
    assert crawl.returncode == 0 and len(site.hits_for("/")) == 1, crawl.log[-3000:]
    with Frontier(redis_url, namespace=namespace, estimator="interval") as frontier:
        assert frontier.min_host_delay == 0.0
    stored = f"{namespace}-stored"
    Frontier(redis_url, namespace=stored, estimator="interval", min_host_delay=2.5).close()
    crawl = run_crawl(tmp_path, redis_url, stored, [{"url": site.url("/")}], unset,
                      name="again")
    assert crawl.returncode == 0, crawl.log[-3000:]
    assert "SettingsMismatch" not in crawl.log and "Traceback" not in crawl.log
    with Frontier(redis_url, namespace=stored, estimator="interval") as frontier:
        assert frontier.min_host_delay == 2.5

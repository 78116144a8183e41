"""What the spider gets of each answer (frontier_rate/scrapy/delivery.py), with real crawls.

Every response that reaches a spider middleware, a callback or an errback carries
``meta["frontier_rate"]``: answers that are no copy of the page (a bot wall) and one-off
fetches included, and the spider middlewares see it before the callback runs. Observed 304s
never reach a spider middleware. ``FRONTIER_RATE_UNCHANGED_TO_CALLBACK = False`` keeps
unchanged revisits out of the callbacks (and so out of the pipelines and feeds).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scrapy_support.harness import ROOT, run_crawl  # noqa: E402
from scrapy_support.server import ChangingSite  # noqa: E402

pytestmark = pytest.mark.timeout(120)

WALL = ("<html><head><title>Just a moment...</title></head><body>"
        "<p>Checking your browser before accessing the site.</p>"
        "<p>Please complete the captcha.</p></body></html>")
"""A 200 bot wall ``content`` detection takes for no copy of the page."""
MIDDLEWARE = {"SPIDER_MIDDLEWARES": {"scrapy_support.middlewares.SeenBySpiderMiddleware": 10}}
HINT = "unchanged revisits reach the spider's callbacks"


@pytest.fixture
def site():
    with ChangingSite("127.0.0.1") as running:
        yield running


def test_spider_middlewares_and_callbacks_see_frontier_rate_meta_and_never_a_304(
        site, redis_url, namespace, tmp_path):
    """A page answering 304s, a page that is a bot wall, a plain page, a missing page and a
    one-off POST: every response a spider middleware or callback sees carries
    meta["frontier_rate"]."""
    site.set("/etag", "<p>never changes</p>", etag=True)
    site.set("/wall", WALL)
    site.set("/plain", "<p>plain page</p>")
    site.set("/form", "<p>posted</p>")
    crawl = run_crawl(tmp_path, redis_url, namespace, [
        {"url": site.url("/etag")}, {"url": site.url("/wall")}, {"url": site.url("/plain")},
        {"url": site.url("/missing")}, {"url": site.url("/form"), "method": "POST"}], MIDDLEWARE)
    assert crawl.returncode == 0 and "Traceback" not in crawl.log, crawl.log[-3000:]
    seen = [r for r in crawl.records if r["kind"] == "middleware"]
    assert seen and all(r["frontier_rate"] is not None for r in seen), seen
    assert all(r["meta"].get("frontier_rate") is not None for r in crawl.responses())
    # 304s are observed, and never reach a spider middleware as empty bodies
    assert any(hit.status == 304 for hit in site.hits_for("/etag")), site.hits_for("/etag")
    assert [r["status"] for r in seen if r["url"] == site.url("/etag")] == [200]
    wall = [r["frontier_rate"] for r in seen if r["url"] == site.url("/wall")]
    assert wall and all(m["failed"] == "not content: bot wall" and m["changed"] is False
                        for m in wall), wall
    assert [r["meta"]["frontier_rate"]["failed"] for r in crawl.responses(site.url("/wall"))] \
        == ["not content: bot wall"] * len(wall)
    plain = [r["frontier_rate"] for r in seen if r["url"] == site.url("/plain")]
    assert len(plain) >= 2, crawl.log[-3000:]  # the first fetch, then revisits
    assert plain[0]["new"] is True and plain[0]["changed"] is True and plain[0]["failed"] is None
    assert all(m["changed"] is False and m["one_off"] is False for m in plain[1:]), plain
    missing = [r["frontier_rate"] for r in seen if r["url"] == site.url("/missing")]
    assert missing and all(m["failed"] == "HTTP 404" for m in missing), missing
    form = [r["frontier_rate"] for r in seen if r["method"] == "POST"]
    assert len(form) == 1 and form[0]["one_off"] is True and form[0]["changed"] is True


def _readme_spider_crawl(tmp_path: Path, redis_url: str, namespace: str,
                         start: str) -> subprocess.Popen:
    code = re.search(r"```python\n(# a spider[^\n]*\n.*?class News\(scrapy\.Spider\).*?)```",
                     (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    assert code, "README.md has no example spider block"
    (tmp_path / "readme_spider.py").write_text("import scrapy\n" + code.group(1))
    runner = tmp_path / "run.py"
    settings = {
        "SCHEDULER": "frontier_rate.scrapy.Scheduler", "FRONTIER_RATE_REDIS_URL": redis_url,
        "FRONTIER_RATE_NAMESPACE": namespace, "FRONTIER_RATE_ESTIMATOR": "interval",
        "FRONTIER_RATE_MIN_INTERVAL": 1.0, "FRONTIER_RATE_MAX_INTERVAL": 1.2,
        "FRONTIER_RATE_MIN_HOST_DELAY": 0.05, "FRONTIER_RATE_BUDGET": 100.0,
        "FRONTIER_RATE_CLOSE_AFTER": 5, "TELNETCONSOLE_ENABLED": False,
        "FEEDS": {str(tmp_path / "items.jsonl"): {"format": "jsonlines"}}}
    runner.write_text(
        "from scrapy.crawler import CrawlerProcess\nimport readme_spider\n"
        f"process = CrawlerProcess({settings!r})\n"
        f"process.crawl(readme_spider.News, start_urls=[{start!r}])\nprocess.start()\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    return subprocess.Popen([sys.executable, str(runner)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_the_readme_spider_runs_when_its_start_page_turns_into_a_bot_wall(
        site, redis_url, namespace, tmp_path):
    """The README's spider reads meta["frontier_rate"]["changed"] in every callback: a start
    page that answers a 200 bot wall on its revisit reaches it as not changed (no KeyError)."""
    story = " ".join(f"Chapter {i} of a long page about books and their prices." for i in range(40))
    site.set("/", f'<p>{story}</p><a href="/one">one</a> <a href="/two">two</a>')
    site.set("/one", "<title>One</title><p>first book</p>")
    site.set("/two", "<title>Two</title><p>second book</p>")
    proc = _readme_spider_crawl(tmp_path, redis_url, namespace, site.url("/"))
    deadline = time.time() + 30
    while not site.hits_for("/") and time.time() < deadline:
        time.sleep(0.02)
    site.change("/", WALL)
    _, log = proc.communicate(timeout=90)
    assert proc.returncode == 0, log[-3000:]
    hits = site.hits_for("/")
    assert len(hits) >= 2 and hits[1].status == 200, (hits, log[-3000:])  # the wall, a 200
    assert "not content: bot wall" in log
    assert "KeyError" not in log and "Spider error" not in log and "Traceback" not in log, \
        log[-3000:]
    items = [json.loads(line) for line in (tmp_path / "items.jsonl").read_text().splitlines()]
    assert {item["title"] for item in items} == {"One", "Two"}  # and again on revisits


@pytest.mark.parametrize("to_callback", [False, None])
def test_unchanged_revisits_reach_the_callback_unless_the_setting_is_off(
        site, redis_url, namespace, tmp_path, to_callback):
    """A static page (no validators: 200 revisits) and one whose bytes change each fetch.
    Off: the static page reaches the callback once (its first fetch), the changing one at
    every fetch. Not set (the default, on): both at every fetch, and one INFO line says so."""
    site.set("/static", "<p>same as ever</p>")
    site.set("/ticking", "<p>fetch {n}</p>", template=True)
    settings = {"FRONTIER_RATE_FINGERPRINT": "raw", **MIDDLEWARE}
    if to_callback is not None:
        settings["FRONTIER_RATE_UNCHANGED_TO_CALLBACK"] = to_callback
    crawl = run_crawl(tmp_path, redis_url, namespace,
                      [{"url": site.url("/static")}, {"url": site.url("/ticking")}], settings)
    assert crawl.returncode == 0, crawl.log[-3000:]
    static, ticking = crawl.responses(site.url("/static")), crawl.responses(site.url("/ticking"))
    assert len(site.hits_for("/static")) >= 3, crawl.log[-3000:]
    assert len(ticking) >= 3 and all(r["meta"]["frontier_rate"]["changed"] for r in ticking)
    middleware = [r for r in crawl.records if r["kind"] == "middleware"
                  and r["url"] == site.url("/static")]
    assert len(middleware) == len(static)  # the spider middlewares see what callbacks see
    if to_callback is False:
        assert [r["meta"]["frontier_rate"]["new"] for r in static] == [True]
        assert crawl.stats["frontier_rate/unchanged_skipped"] >= 2
        assert HINT not in crawl.log
    else:
        assert len(static) >= 3
        assert [r["meta"]["frontier_rate"]["changed"] for r in static[1:]] == \
            [False] * (len(static) - 1)
        assert "frontier_rate/unchanged_skipped" not in crawl.stats
        assert crawl.log.count(HINT) == 1, crawl.log[-3000:]


def test_an_unchanged_sitemap_is_read_again_when_unchanged_revisits_stay_out(
        site, redis_url, namespace, tmp_path):
    """The setting is about the spider's callbacks: the frontier's own sitemap reader reads
    every answer of a sitemap, unchanged ones included."""
    for path in ("/a", "/b", "/c"):
        site.set(path, f"<p>{path}</p>")
    rows = "".join(f"<url><loc>{site.url(p)}</loc></url>" for p in ("/a", "/b", "/c"))
    site.set("/sitemap.xml", '<?xml version="1.0" encoding="UTF-8"?><urlset xmlns='
             f'"http://www.sitemaps.org/schemas/sitemap/0.9">{rows}</urlset>',
             content_type="application/xml")
    crawl = run_crawl(tmp_path, redis_url, namespace, [{"url": site.url("/a")}], {
        "FRONTIER_RATE_SITEMAPS": [site.url("/sitemap.xml")],
        "FRONTIER_RATE_UNCHANGED_TO_CALLBACK": False, "FRONTIER_RATE_CLOSE_AFTER": 5})
    assert crawl.returncode == 0, crawl.log[-3000:]
    assert len(site.hits_for("/sitemap.xml")) >= 3, crawl.log[-3000:]
    assert crawl.stats["frontier_rate/sitemap_entries"] >= 3 * 2  # read at each of 2+ answers
    assert crawl.stats["frontier_rate/unchanged_skipped"] >= 1  # the pages' revisits: kept out

"""What counts on a page, said by the spider or the settings (issue 59), with real crawls:
``meta["frontier_rate_content"]`` and ``FRONTIER_RATE_CONTENT`` select the page's content,
``FRONTIER_RATE_IGNORE_TEXT`` removes text, a selector that matches nothing is a failed
fetch named in one WARNING, and a bad setting is refused by name."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scrapy_support.harness import revisits, run_crawl  # noqa: E402
from scrapy_support.server import ChangingSite  # noqa: E402

from frontier_rate.crawl.settings import adapter_settings  # noqa: E402

pytestmark = pytest.mark.timeout(120)

PAGE = ("<html><body><aside><p>Visitors of NAME this hour {n}</p></aside>"
        "<div class='product'><h1>Blue hat</h1><p>Price 10 pounds</p></div>"
        "<footer><p>{n} people looked at this hat today</p></footer></body></html>")


@pytest.mark.parametrize("detection_process", [True, False])
def test_only_what_the_spider_or_the_settings_say_counts(redis_url, namespace, tmp_path,
                                                         detection_process):
    with ChangingSite("127.0.0.1") as site, ChangingSite("127.0.0.2") as other:
        for path in ("/said", "/by-site", "/gone"):
            # {n}: the hit count, a new number each time; the aside is each page's own text
            site.set(path, PAGE.replace("NAME", path), template=True)
        other.set("/plain", PAGE.replace("NAME", "/plain"), template=True)
        start = [{"url": site.url("/said"), "meta": {"frontier_rate_content": "div.product"}},
                 {"url": site.url("/by-site")}, {"url": other.url("/plain")},
                 {"url": site.url("/gone"), "meta": {"frontier_rate_content": "div.sold-out"}}]
        crawl = run_crawl(tmp_path, redis_url, namespace, start, {
            "FRONTIER_RATE_FINGERPRINT": "content",
            "FRONTIER_RATE_DETECTION_PROCESS": detection_process,
            "FRONTIER_RATE_CONTENT": {"no-such-host.test": "main",
                                      f"{site.host}": "//div[@class='product'] | //footer"},
            "FRONTIER_RATE_IGNORE_TEXT": [r"\d+ people looked at this hat today"]})
    assert crawl.returncode == 0, crawl.log[-3000:]
    said, by_site = revisits(crawl, site.url("/said")), revisits(crawl, site.url("/by-site"))
    plain, gone = revisits(crawl, other.url("/plain")), crawl.responses(site.url("/gone"))
    assert len(said) >= 2 and len(by_site) >= 2 and len(plain) >= 2, crawl.log[-3000:]
    assert {r["meta"]["frontier_rate"]["changed"] for r in said + by_site} == {False}
    # the same page without a rule: the visitors line is its content, and it changes
    assert {r["meta"]["frontier_rate"]["changed"] for r in plain} == {True}
    assert gone and {r["meta"]["frontier_rate"]["failed"] for r in gone} == {
        "not content: content selector 'div.sold-out' matched nothing"}
    warnings = [line for line in crawl.log.splitlines()
                if "WARNING" in line and "div.sold-out" in line]
    assert len(warnings) == 1, warnings  # once for the page, however many answers
    assert "counts as a failed fetch, not a change" in warnings[0]


def test_bad_content_settings_are_refused_by_name():
    def settings(**values):
        return adapter_settings(lambda name: values.get(name))

    with pytest.raises(ValueError, match=r"FRONTIER_RATE_CONTENT\['shop.test'\]: content "
                                         r"selector 'div\[' is not valid CSS"):
        settings(FRONTIER_RATE_CONTENT={"shop.test": "div["})
    with pytest.raises(ValueError, match="FRONTIER_RATE_IGNORE_TEXT: ignore-text pattern"):
        settings(FRONTIER_RATE_IGNORE_TEXT=["("])
    with pytest.raises(ValueError, match="need FRONTIER_RATE_FINGERPRINT 'content' or 'text'"):
        settings(FRONTIER_RATE_CONTENT={"shop.test": "main"}, FRONTIER_RATE_FINGERPRINT="raw")
    parsed = settings(FRONTIER_RATE_CONTENT='{"shop.test": "main"}',
                      FRONTIER_RATE_IGNORE_TEXT=r"\d+ views")  # as -s gives them: strings
    rule = parsed.content_rules.rule("http://www.shop.test/a", {})
    assert rule is not None and rule.select == "main" and rule.ignore_text == (r"\d+ views",)

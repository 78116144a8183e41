"""Fast in-process checks of the Scrapy adapter's pure parts (no crawl, no Redis)."""

from __future__ import annotations

import json

import pytest
import scrapy
from scrapy.settings import Settings

from frontier_rate.crawl.settings import close_after as _close_after
from frontier_rate.crawl.settings import frontier_kwargs as _frontier_kwargs
from frontier_rate.crawl.settings import strip_patterns as _pattern_list
from frontier_rate.scrapy.requests import TOKEN_KEY, request_to_page_meta
from frontier_rate.scrapy.requests import page_weight_of as _weight


class Spider(scrapy.Spider):
    name = "units"

    def parse(self, response):
        pass

    def parse_item(self, response):
        pass

    def on_error(self, failure):
        pass


@pytest.fixture
def spider() -> Spider:
    return Spider()


def test_page_meta_keeps_only_non_defaults(spider) -> None:
    request = scrapy.Request("http://127.0.0.1/a", callback=spider.parse)
    assert request_to_page_meta(request, spider) == {}


def test_page_meta_round_trips_through_json(spider) -> None:
    request = scrapy.Request(
        "http://127.0.0.1/a", callback=spider.parse_item, errback=spider.on_error,
        meta={"k": [1, {"x": None}], TOKEN_KEY: "7", "redirect_urls": ["http://x"]},
        headers={"X-A": "1"}, cb_kwargs={"page": 2}, priority=5,
    )
    stored = request_to_page_meta(request, spider)
    assert json.loads(json.dumps(stored)) == stored
    assert stored == {
        "cb": "parse_item", "eb": "on_error", "m": {"k": [1, {"x": None}]},
        "kw": {"page": 2}, "h": {"X-A": ["1"]}, "p": 5,
    }


def test_scalar_meta_is_kept_exactly(spider) -> None:
    """Plain str/int/bool/None values skip the JSON round trip and are stored as given."""
    meta = {"depth": 3, "big": 2**70, "flag": True, "none": None, "text": "\u00e9\ud800"}
    stored = request_to_page_meta(scrapy.Request("http://127.0.0.1/a", meta=meta), spider)
    assert stored == {"m": meta} and json.loads(json.dumps(stored)) == stored


@pytest.mark.parametrize("bad", [{1, 2}, (1, 2), object(), float("nan"), float("inf"), b"raw",
                                 {"a": b"bytes"}])
def test_unserialisable_meta_names_the_key(spider, bad) -> None:
    request = scrapy.Request("http://127.0.0.1/a", meta={"fine": 1, "culprit": bad})
    with pytest.raises(ValueError, match=r"meta\['culprit'\] of http://127.0.0.1/a"):
        request_to_page_meta(request, spider)


def test_unserialisable_cb_kwargs_and_foreign_callbacks(spider) -> None:
    with pytest.raises(ValueError, match=r"cb_kwargs\['when'\]"):
        request_to_page_meta(
            scrapy.Request("http://127.0.0.1/a", cb_kwargs={"when": {1}}), spider)
    with pytest.raises(ValueError, match="not a method of spider 'units'"):
        request_to_page_meta(
            scrapy.Request("http://127.0.0.1/a", callback=lambda r: None), spider)


def test_weight_from_meta() -> None:
    assert _weight(scrapy.Request("http://h/", meta={"frontier_rate_weight": "2.5"})) == 2.5
    assert _weight(scrapy.Request("http://h/")) == 1.0
    for bad in (0, -1, "x", None, float("inf")):
        with pytest.raises(ValueError, match="frontier_rate_weight"):
            _weight(scrapy.Request("http://h/", meta={"frontier_rate_weight": bad}))


def test_settings_parsing() -> None:
    assert _pattern_list(None) == []
    assert _pattern_list(r"a,\d") == [r"a,\d"]  # one regex, commas kept
    assert _pattern_list('["x", "y"]') == ["x", "y"]
    with pytest.raises(ValueError, match="FRONTIER_RATE_STRIP_PATTERNS"):
        _pattern_list(5)
    assert _close_after(None) == (None, False)
    assert _close_after("idle") == (None, True)
    assert _close_after("2.5") == (2.5, False)
    with pytest.raises(ValueError, match="FRONTIER_RATE_CLOSE_AFTER='soon'"):
        _close_after("soon")
    settings = Settings({"FRONTIER_RATE_BUDGET": "3", "FRONTIER_RATE_POLICY": "lagrangian",
                         "DOWNLOAD_DELAY": 0.5})
    assert _frontier_kwargs(settings.get) == {
        "budget": 3.0, "policy": "lagrangian", "min_host_delay": 0.5}
    with pytest.raises(ValueError, match="FRONTIER_RATE_BUDGET='lots'"):
        _frontier_kwargs(Settings({"FRONTIER_RATE_BUDGET": "lots"}).get)

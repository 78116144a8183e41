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


def _answer_of(flight: str) -> scrapy.http.HtmlResponse:
    request = scrapy.Request("http://a.example/", meta={TOKEN_KEY: flight})
    return scrapy.http.HtmlResponse(request.url, request=request, body=b"")


def test_an_answer_settles_once_its_output_is_exhausted_and_its_items_left_the_pipelines():
    """settling.Settling (issue 60): counted per answer, whatever shape the callback's
    output has; one of item_scraped / item_dropped / item_error per item."""
    import asyncio

    from scrapy.signalmanager import SignalManager

    from frontier_rate.engine.records import Lease
    from frontier_rate.scrapy.settling import Settling

    signal_manager, done = SignalManager(), []
    settling = Settling(signal_manager, 3, done.append)
    leases = {flight: Lease(f"http://a.example/{flight}", flight, "a.example")
              for flight in "123456"}

    def left(signal, flight: str, **kwargs) -> None:
        signal_manager.send_catch_log(signal, item={}, response=_answer_of(flight), spider=None,
                                      **kwargs)

    settling.answered("1", leases["1"], 200)
    output = settling.track("1", [{"n": 1}, scrapy.Request("http://a.example/b"), {"n": 2}])
    assert len(list(output)) == 3 and done == []  # two items in the pipelines
    left(scrapy.signals.item_scraped, "1")
    left(scrapy.signals.item_dropped, "2")  # another answer's item: not this one's
    assert done == [] and settling.unsettled() == [leases["1"]]
    left(scrapy.signals.item_error, "1", failure=None)
    assert done == [leases["1"]] and settling.unsettled() == []

    settling.answered("2", leases["2"], 200)
    assert settling.track("2", {"n": 1}) == {"n": 1}  # one item, returned as it is
    left(scrapy.signals.item_scraped, "2")
    settling.answered("3", leases["3"], 200)
    assert settling.track("3", None) is None  # nothing for the pipelines
    settling.answered("4", leases["4"], 304)  # a 304: no new copy, nothing to settle
    assert done == [leases["1"], leases["2"], leases["3"]] and settling.unsettled() == []

    async def items():
        yield {"n": 1}

    async def returns_items():
        return [{"n": 1}]

    async def drain():
        settling.answered("5", leases["5"], 200)
        settling.answered("6", leases["6"], 200)
        first = [value async for value in settling.track("5", items())]
        second = list(await settling.track("6", returns_items()))
        return first + second

    assert asyncio.run(drain()) == [{"n": 1}, {"n": 1}]
    assert settling.unsettled() == [leases["5"], leases["6"]]  # their items are not out
    settling.answered("7", Lease("http://a.example/7", "7", "a.example"), 200)
    settling.answered("8", Lease("http://a.example/8", "8", "a.example"), 200)
    assert [lease.token for lease in settling.unsettled()] == ["6", "7", "8"]  # at most 3

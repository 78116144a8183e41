"""What counts on a page when the user says so (issue 59): a CSS or XPath selector for the
page's content and ignore-text patterns (frontier_rate/detection/content_rules.py), in the
``content`` and ``text`` modes, through the detection process's frame too. Synthetic pages."""

from __future__ import annotations

import io

import pytest

from frontier_rate.detection.content_rules import ContentRule, check_settings, rule_for, select
from frontier_rate.detection.detection_worker import FRAME, frame, read_line, serve
from frontier_rate.detection.fingerprint import Fingerprinter

HTML = {"Content-Type": "text/html; charset=utf-8"}


def product(price: str, sidebar: str, viewers: int = 3) -> bytes:
    return (f"<html><body><nav><a href='/'>Home</a></nav><aside><p>{sidebar}</p></aside>"
            f"<div class='product'><h1>Blue hat</h1><p class='price'>{price}</p>"
            f"<p>{viewers} people are viewing this hat right now</p></div>"
            "<footer>Shop Ltd</footer></body></html>").encode()


@pytest.mark.parametrize("mode", ["content", "text"])
@pytest.mark.parametrize("selector", ["div.product", "//div[@class='product']"])
def test_only_the_selected_part_counts(mode, selector):
    rule = ContentRule(selector, (r"\d+ people are viewing this hat right now",))
    detect = Fingerprinter(mode).detect
    url = "http://shop.test/hat"
    first = detect(product("£10", "Trending: scarves", 3), url, HTML, rule=rule).fingerprint
    # the sidebar and the viewer count changed: nothing that counts
    same = detect(product("£10", "Trending: gloves", 17), url, HTML, rule=rule).fingerprint
    changed = detect(product("£12", "Trending: gloves", 17), url, HTML, rule=rule).fingerprint
    assert first is not None and same == first and changed not in (None, first)
    # without the rule the sidebar is a change of the text
    plain = Fingerprinter(mode).detect
    assert plain(product("£10", "Trending: scarves"), url, HTML).fingerprint != \
        plain(product("£10", "Trending: gloves"), url, HTML).fingerprint


@pytest.mark.parametrize("mode", ["content", "text"])
def test_a_selector_that_matches_nothing_is_no_copy_and_names_the_selector(mode):
    found = Fingerprinter(mode).detect(product("£10", "x"), "http://shop.test/hat", HTML,
                                       rule=ContentRule("div.gone"))
    assert found.fingerprint is None
    assert found.reason == "content selector 'div.gone' matched nothing"


def test_bad_selectors_and_patterns_are_refused_by_name():
    with pytest.raises(ValueError, match=r"content selector 'div\[' is not valid CSS"):
        ContentRule("div[")
    with pytest.raises(ValueError, match=r"content selector '//div\[' is not valid XPath"):
        ContentRule("//div[")
    with pytest.raises(ValueError, match=r"ignore-text pattern '\(' is not a valid regex"):
        ContentRule(None, ("(",))
    with pytest.raises(ValueError, match=r"FRONTIER_RATE_CONTENT\['shop.test'\]: content selector"):
        check_settings({"shop.test": "p["}, [])
    with pytest.raises(ValueError, match="FRONTIER_RATE_IGNORE_TEXT must be a list"):
        check_settings({}, 5)
    with pytest.raises(ValueError, match=r"meta\['frontier_rate_ignore_text'\] must be a list"):
        rule_for("http://a.test/", {"frontier_rate_ignore_text": "x"}, {}, [])


def test_the_rule_of_a_page_is_its_meta_then_its_site_then_the_default():
    sites, ignore = check_settings({"shop.test": "div.product", "*": "main",
                                    "eu.shop.test": "article"}, [r"\d+ views"])
    assert rule_for("http://www.shop.test/a", None, sites, ignore) == \
        ContentRule("div.product", (r"\d+ views",))
    assert rule_for("http://eu.shop.test:8080/a", {}, sites, ignore).select == "article"
    assert rule_for("http://other.test/a", {}, sites, ignore).select == "main"
    assert rule_for("http://notshop.test/a", {}, {"shop.test": "p"}, []) is None
    meta = {"frontier_rate_content": "#price", "frontier_rate_ignore_text": ["sold"]}
    assert rule_for("http://shop.test/a", meta, sites, ignore) == \
        ContentRule("#price", (r"\d+ views", "sold"))


def test_select_keeps_the_matched_elements_in_document_order():
    markup = "<div><p class='a'>one</p><p>skip</p><p class='a'>two</p></div>"
    assert select(markup, "p.a") == '<p class="a">one</p>\n<p class="a">two</p>'
    assert select(markup, "//p[@class='a']/text()") == "one\ntwo"
    assert select(markup, "table") is None


def test_the_detection_process_applies_the_rule_it_is_sent():
    rule = ContentRule("div.product", (r"\d+ people are viewing this hat right now",))
    url = "http://shop.test/hat"
    frames = b"".join(frame(body, url, "text/html", False, None, rule) for body in (
        product("£10", "a", 1), product("£10", "b", 2), product("£12", "b", 2)))
    frames += frame(product("£12", "b"), url, "text/html", False, None, ContentRule("div.x"))
    out = io.BytesIO()
    serve({"mode": "content", "strip_patterns": [], "max_body": 10**6}, io.BytesIO(frames), out)
    lines = out.getvalue().splitlines()[1:]  # after "ready"
    found = [read_line(line)[0] for line in lines]
    assert found[0].fingerprint == found[1].fingerprint != found[2].fingerprint
    assert found[3].fingerprint is None and "div.x" in found[3].reason
    assert FRAME.size == 8

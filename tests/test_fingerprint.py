"""Unit tests for frontier_rate.detection.fingerprint (change detection)."""

from __future__ import annotations

import hashlib

import pytest

from frontier_rate.detection.fingerprint import (
    Fingerprinter,
    content_charset,
    fingerprint,
    header_value,
    visible_text,
)

PAGE = b"""<!DOCTYPE html>
<html><head><title>News</title>
<style>.a { color: red }</style>
<script>var t = "1700000000";</script>
</head>
<body class="%s">
<!-- rendered in 12 ms -->
<div id="main"><p>Hello &amp; welcome</p><p>second   paragraph</p></div>
<form><input type="hidden" name="csrf" value="%s"></form>
<p>Updated 2024-01-0%d 10:00:00</p>
</body></html>"""


def page(body_class: str = "x", csrf: str = "tok1", day: int = 1) -> bytes:
    return PAGE % (body_class.encode(), csrf.encode(), day)


def upper_first_line(body: bytes, url: str, headers) -> str:
    """A custom fingerprint for the dotted-path test: only the first line counts."""
    return body.split(b"\n", 1)[0].decode("latin-1")


def test_raw_is_blake2b_of_the_bytes() -> None:
    body = b"hello world"
    expected = hashlib.blake2b(body, digest_size=8).hexdigest()
    assert fingerprint(body) == expected
    assert len(expected) == 16


def test_raw_sees_any_byte_change() -> None:
    assert fingerprint(page()) == fingerprint(page())
    assert fingerprint(page()) != fingerprint(page(body_class="y"))


def test_text_ignores_markup_scripts_styles_and_comments() -> None:
    text = visible_text(page().decode())
    assert text == "News Hello & welcome second paragraph Updated 2024-01-01 10:00:00"
    churned = page().replace(b"<!-- rendered in 12 ms -->", b"<!-- rendered in 99 ms -->")
    churned = churned.replace(b'var t = "1700000000"', b'var t = "1700000042"')
    churned = churned.replace(b'<div id="main">', b'<div id="main" class="v2"><section>')
    fp = Fingerprinter("text")
    assert fp(page()) == fp(churned)
    assert fp(page(body_class="other", csrf="tok2")) == fp(page())


def test_text_sees_a_change_of_visible_text() -> None:
    fp = Fingerprinter("text")
    assert fp(page(day=1)) != fp(page(day=2))
    assert fp(b"<p>a</p>") != fp(b"<p>b</p>")


def test_text_tags_do_not_join_words() -> None:
    assert visible_text("<p>one</p><p>two</p>") == "one two"
    assert visible_text('<a title="x > y" href="/">link</a>') == "link"
    assert visible_text("a <SCRIPT type='x'>if (a > b) {}</SCRIPT> b") == "a b"
    assert visible_text("x <!-- unterminated") == "x"


def test_strip_patterns_remove_volatile_fragments() -> None:
    pattern = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}"
    text = Fingerprinter("text", strip_patterns=[pattern])
    assert text(page(day=1)) == text(page(day=2))
    raw = Fingerprinter("raw", strip_patterns=[pattern, r'value="[^"]*"'])
    assert raw(page(day=1, csrf="a")) == raw(page(day=2, csrf="b"))
    assert raw(page(body_class="c1")) != raw(page(body_class="c2"))
    # A single string is one pattern, not a list of characters.
    assert Fingerprinter("raw", strip_patterns="tok[0-9]")(b"tok1") == fingerprint(b"")


def test_custom_callable_and_dotted_path() -> None:
    by_path = Fingerprinter(f"{__name__}.upper_first_line")
    by_object = Fingerprinter(upper_first_line)
    a, b = b"same\nfirst", b"same\nsecond"
    assert by_path(a) == by_path(b) == by_object(a)
    assert by_path(a) == hashlib.blake2b(b"same", digest_size=8).hexdigest()


def test_bad_configuration_names_the_value() -> None:
    with pytest.raises(ValueError, match="nomodule_xyz.fn"):
        Fingerprinter("nomodule_xyz.fn")
    with pytest.raises(ValueError, match="'bogus'"):
        Fingerprinter("bogus")
    with pytest.raises(ValueError, match=r"\[unclosed"):
        Fingerprinter("raw", strip_patterns=["[unclosed"])
    with pytest.raises(ValueError, match="max_body"):
        Fingerprinter("raw", max_body=0)
    with pytest.raises(ValueError, match="custom fingerprint"):
        Fingerprinter(lambda body, url, headers: 42)(b"x")
    with pytest.raises(ValueError, match="body must be bytes"):
        Fingerprinter("raw")("text")  # type: ignore[arg-type]


def test_bounded_body_hashes_prefix_and_length() -> None:
    fp = Fingerprinter("raw", max_body=10)
    base = b"0123456789"
    # Change beyond the cap with equal length is invisible by design ...
    assert fp(base + b"aaaa") == fp(base + b"bbbb")
    # ... but a different length or a change inside the cap is seen.
    assert fp(base + b"aaaa") != fp(base + b"aaaaa")
    assert fp(b"X" + base[1:] + b"aaaa") != fp(base + b"aaaa")
    # Bodies at or below the cap hash exactly like the uncapped raw mode.
    assert fp(base) == fingerprint(base)


def test_binary_and_non_utf8_bodies() -> None:
    binary = bytes(range(256)) * 4
    assert Fingerprinter("text")(binary) == Fingerprinter("text")(binary)
    latin = "<p>caf\u00e9</p>".encode("latin-1")
    headers = {"Content-Type": "text/html; charset=ISO-8859-1"}
    assert Fingerprinter("text").normalise(latin, headers=headers) == "caf\u00e9".encode()
    utf16 = "<p>x</p>".encode("utf-16")
    h16 = {b"content-type": [b"text/html; charset=utf-16"]}
    assert Fingerprinter("text").normalise(utf16, headers=h16) == b"x"
    # Unknown charset falls back instead of raising.
    bogus = {"Content-Type": "text/html; charset=no-such-charset"}
    assert Fingerprinter("text").normalise(b"<p>ok</p>", headers=bogus) == b"ok"


def test_header_helpers() -> None:
    assert header_value({"content-type": "text/html"}, "Content-Type") == "text/html"
    assert header_value({b"ETag": [b'"v1"']}, "ETag") == '"v1"'
    assert header_value(None, "ETag") is None
    assert content_charset({}, b'<meta charset="windows-1252">') == "windows-1252"
    assert content_charset({"Content-Type": "text/html"}, b"<p>") is None


def test_scrapy_headers_are_understood() -> None:
    from scrapy.http import Headers

    headers = Headers({"Content-Type": "text/html; charset=latin-1", "ETag": '"abc"'})
    assert header_value(headers, "etag") == '"abc"'
    assert content_charset(headers, b"") == "latin-1"


def test_a_detection_record_is_bounded_whatever_the_selector() -> None:
    """The record ``inspect`` shows (kept in Redis per page) stays small: a long selector,
    and the reason naming it, are cut."""
    from frontier_rate.detection.content_rules import ContentRule
    from frontier_rate.detection.detection_record import MAX_SELECTOR, decode, encode, explain

    fingerprinter = Fingerprinter("content")
    rule = ContentRule("div.x" + " > div.y" * 200)
    body = b"<html><body><p>Some text of the page, long enough to be content.</p></body></html>"
    found = fingerprinter.detect(body, "http://a.example/", {"Content-Type": "text/html"},
                                 rule=rule)
    assert found.fingerprint is None and "matched nothing" in found.reason
    data = encode(explain(found, fingerprinter._detector, "http://a.example/", rule))
    assert len(data) < 400
    record = decode(data)
    assert record["content_selector"].startswith("div.x > div.y")
    assert len(record["content_selector"]) == MAX_SELECTOR
    assert len(record["not_content"]) == MAX_SELECTOR
    assert decode(b"not json") is None and decode(b"[1]") is None and decode(None) is None

"""A copy whose visible markup is the page's last copy's (``VisibleMarkup.key``): taken for it
without being cut into segments, and detected exactly as the full comparison detects it."""

from __future__ import annotations

import random

import pytest

from frontier_rate.detection.change_detection import ContentDetector
from frontier_rate.detection.segments import VisibleMarkup, segments

MENU = ["Home", "News", "Contact", "Imprint"]
AS_IT_WAS = ContentDetector._as_it_was


def _copy(page: int, draw: random.Random, version: int, menu: list[str]) -> str:
    """One copy of a page of a small site: a script and a comment that change on every
    fetch, a menu shared by the pages, the page's own paragraphs (``version`` of them
    edited)."""
    paragraphs = [f"Paragraph {k} of page {page}, as written in version "
                  f"{version if k == 0 else 0}." for k in range(4)]
    items = "".join(f"<li>{item}</li>" for item in menu)
    texts = "".join(f"<p>{text}</p>" for text in paragraphs)
    return (f"<html><head><title>Page {page}</title><script>var nonce = "
            f"'{draw.getrandbits(64):x}';</script></head><body><!-- served by "
            f"{draw.randrange(100)} --><nav><ul>{items}</ul></nav><main>{texts}</main>"
            "<footer><p>Imprint of the site</p></footer></body></html>")


def _detections(monkeypatch: pytest.MonkeyPatch, fetches: list[tuple[int, str]],
                shortcut: bool) -> list[tuple]:
    monkeypatch.setattr(ContentDetector, "_as_it_was",
                        staticmethod(AS_IT_WAS if shortcut else lambda memory, host: False))
    detector = ContentDetector()
    found = []
    for page, markup in fetches:
        d = detector.detect(markup, markup.encode(), f"http://site.example/p{page}", "text/html")
        found.append((d.fingerprint, d.reason, d.ignored, d.changed_segments, d.segments))
    return found


def test_a_copy_with_the_same_visible_markup_is_detected_as_the_full_comparison_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Seeded fetches of six pages of one site, each with a new script nonce and comment
    (the bytes always differ), now and then a paragraph edited, the menu renamed, or one
    page's copy repeated after the host's masks changed: every detection (fingerprint,
    reason, ignored and changed segments, content segments) is the one the full comparison
    gives, and most repeated copies take the short way."""
    draw = random.Random(59)
    fetches: list[tuple[int, str]] = []
    versions = [0] * 6
    menu = list(MENU)
    for _ in range(400):
        page = draw.randrange(6)
        if draw.random() < 0.1:
            versions[page] += 1
        if draw.random() < 0.03:
            menu[draw.randrange(len(menu))] = f"Item {draw.randrange(1000)}"
        fetches.append((page, _copy(page, draw, versions[page], menu)))
    cut: list[int] = []
    real = VisibleMarkup.segments
    monkeypatch.setattr(VisibleMarkup, "segments", lambda self: cut.append(1) or real(self))
    full = _detections(monkeypatch, fetches, shortcut=False)
    assert len(cut) == len(fetches)
    cut.clear()
    assert _detections(monkeypatch, fetches, shortcut=True) == full
    assert len(cut) < 0.6 * len(fetches)  # most copies showed the last one's markup again


def test_the_short_way_is_not_taken_once_the_hosts_mask_changed() -> None:
    """The same visible markup again, but another page of the host made one of its
    segments boilerplate in between: the copy is cut into segments again (what it ignores
    may differ), and the page's memory then takes the short way again."""
    detector = ContentDetector()
    first = ("<html><body><p>Shared notice</p><p>Text of page one.</p>"
             "<script>var n = 1;</script></body></html>")
    detector.detect(first, first.encode(), "http://site.example/one", "text/html")
    memory = detector._pages["http://site.example/one"]
    host = detector._host_mask("site.example")
    assert memory.mask_version == host.version
    other = "<html><body><p>Shared notice</p><p>Text of page two.</p></body></html>"
    detector.detect(other, other.encode(), "http://site.example/two", "text/html")
    assert memory.mask_version != host.version  # "Shared notice" is now boilerplate
    again = first.replace("var n = 1", "var n = 2")
    assert VisibleMarkup(again).key == VisibleMarkup(first).key
    detector.detect(again, again.encode(), "http://site.example/one", "text/html")
    assert memory.mask_version == host.version
    assert detector.ignored_changes == 1


def test_the_key_tells_visible_markup_apart_and_not_scripts_or_comments() -> None:
    """Two copies differing only in a script, a style, a comment or the head share a key;
    a change of the text, the title, an attribute of a shown tag or a block cut does not."""
    base = ("<html><head><title>T</title><meta name=x content=1><style>p{}</style></head>"
            "<body><div><p class=a>One</p></div><!-- c --><script>s()</script><p>Two</p>"
            "</body></html>")
    same = [base.replace("content=1", "content=2"), base.replace("p{}", "p{color:red}"),
            base.replace("<!-- c -->", "<!-- d -->"), base.replace("s()", "t()")]
    other = [base.replace(">One<", ">Uno<"), base.replace("<title>T", "<title>U"),
             base.replace("class=a", "class=b"), base.replace("</div><!--", "<!--")]
    key = VisibleMarkup(base).key
    assert all(VisibleMarkup(markup).key == key for markup in same)
    assert all(VisibleMarkup(markup).key != key for markup in other)
    assert all(segments(markup) == segments(base) for markup in same)

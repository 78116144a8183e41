"""The spool of frontier calls written when a crawl closes while Redis is down."""

from __future__ import annotations

import logging

import pytest

from frontier_rate.client.spool import Spool

pytestmark = pytest.mark.reliability

ENTRIES = [
    {"kind": "page", "url": "http://a.example/1", "weight": 2.0, "meta": {"cb": "parse"}},
    {"kind": "observe", "dispatch": {"url": "http://a.example/2", "token": "7"},
     "args": {"fingerprint": "ab12", "fetched_at": 1.5, "status": 200}},
]


def test_saved_entries_are_claimed_once_in_order(tmp_path):
    spool = Spool(tmp_path, "news")
    first = spool.save(ENTRIES[:1])
    second = spool.save(ENTRIES[1:])
    assert first != second and first.exists() and second.exists()
    assert spool.claim() == ENTRIES
    assert list(tmp_path.iterdir()) == []  # claimed files are gone
    assert spool.claim() == []


def test_namespaces_sharing_a_prefix_do_not_see_each_other(tmp_path):
    Spool(tmp_path, "news").save(ENTRIES[:1])
    Spool(tmp_path, "news.eu").save(ENTRIES[1:])
    assert Spool(tmp_path, "news").claim() == ENTRIES[:1]
    assert Spool(tmp_path, "news.eu").claim() == ENTRIES[1:]


def test_unreadable_lines_are_named_and_the_file_kept(tmp_path, caplog):
    path = Spool(tmp_path, "news").save(ENTRIES)
    path.write_text(path.read_text() + "not json\n[1, 2]\n")
    with caplog.at_level(logging.WARNING, logger="frontier_rate.client.spool"):
        assert Spool(tmp_path, "news").claim() == ENTRIES
    assert "line 3" in caplog.text and "line 4" in caplog.text and path.name in caplog.text
    assert (tmp_path / (path.name + ".bad")).exists()


def test_values_json_cannot_carry_are_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError):
        Spool(tmp_path, "news").save([{"kind": "observe", "args": {"fetched_at": float("nan")}}])
    assert Spool(tmp_path, "news").claim() == []
    assert list(tmp_path.iterdir()) == []


def test_new_pages_keep_their_fields_through_the_spool(tmp_path):
    """A source (a sitemap, ``NewPage``'s fifth field) and a page's priority come back from
    the spool as they went in; an entry written before sources existed reads as a page."""
    from frontier_rate.client.calls import Call
    from frontier_rate.client.spool import calls_of, entries_of

    pages = [("http://a.example/sitemap.xml", 0.9, None, 0, True),
             ("http://a.example/1", 2.0, {"cb": "parse"}, 3.0, False)]
    spool = Spool(tmp_path, "news")
    spool.save(entries_of([Call("add", pages=pages)]))
    calls, results = calls_of(spool.claim(), "news")
    assert results == 0 and len(calls) == 1
    assert calls[0].pages == [("http://a.example/sitemap.xml", 0.9, {}, 0.0, True),
                              ("http://a.example/1", 2.0, {"cb": "parse"}, 3.0, False)]
    old, _ = calls_of(ENTRIES[:1], "news")
    assert old[0].pages == [("http://a.example/1", 2.0, {"cb": "parse"}, 0.0, False)]

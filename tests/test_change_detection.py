"""The "content" fingerprint mode (frontier_rate.detection.change_detection): each class of volatile
fragment is no change, a change of the content always is, not-content answers are
failed fetches. Every page here is synthetic, written for these tests."""

from __future__ import annotations

import hashlib
import json
import random
import re
from array import array

import pytest

from frontier_rate.crawl.responses import outcome
from frontier_rate.detection import change_detection, fresh_runs
from frontier_rate.detection import segment_hashes as segment_hashes_module
from frontier_rate.detection import segments as segments_module
from frontier_rate.detection.change_detection import ContentDetector, segments, stable_segments
from frontier_rate.detection.fingerprint import Fingerprinter
from frontier_rate.engine import Lease

HTML = {"Content-Type": "text/html; charset=utf-8"}

LEGAL = [
    "These terms govern your use of the service. By creating an account you accept them "
    "and agree to be bound by every provision set out below.",
    "We may suspend an account that breaches these terms. You may close your account at "
    "any time; we delete your data within 30 days of the closure.",
    "Any dispute arising from these terms is subject to the courts of the place where the "
    "company has its registered office, unless the law provides otherwise.",
    "We may change these terms. We will tell you by e-mail before a change takes effect, "
    "and you may close your account if you do not agree with it.",
]


def page(paragraphs: list[str] = LEGAL, *, nonce: str = "a1b2c3d4e5f6", asset: str = "3f9a8c",
         clock: str = "12:00:01", comments: int = 12, ago: str = "5 min ago",
         widget: str = "Most read: the weather", trace: str = "8f3a9c2e1b7d4f60a1c2",
         nav: tuple[str, ...] = ("Home", "Help", "Blog"), title: str = "Terms of use",
         banner: str = "") -> bytes:
    """A synthetic page: navigation, the paragraphs, a widget, a footer and volatile parts."""
    items = "".join(f'<li><a href="/{n.lower()}">{n}</a></li>' for n in nav)
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    return f"""<!doctype html><html><head><title>{title}</title>
<script nonce="{nonce}">window.__state = {{"token": "{nonce}"}};</script>
<link rel="stylesheet" href="/static/app.{asset}.css?v={asset}">
<style>.x-{asset} {{ color: red }}</style></head>
<body><header><nav><ul>{items}</ul></nav></header>
<form><input type="hidden" name="csrf" value="{nonce}"><input name="q"></form>
<main><h1>{title}</h1>{body}</main>
<aside><div>{widget}</div><div>{comments} comments</div><div>Updated {ago}</div></aside>
<footer><p>Page generated at {clock}</p><p>Request id {trace}</p>
<p>&copy; Example company, all rights reserved.</p></footer>
{banner}<!-- built {nonce} --></body></html>""".encode()


def changed(fingerprinter: Fingerprinter, url: str, bodies: list[bytes]) -> list[bool | None]:
    """Per body after the first: True/False (changed against the stored copy) or None
    (not content: a failed fetch, nothing stored), as responses.outcome uses it."""
    stored = fingerprinter.detect(bodies[0], url, HTML).fingerprint
    assert stored is not None
    out: list[bool | None] = []
    for body in bodies[1:]:
        found = fingerprinter.detect(body, url, HTML).fingerprint
        if found is None:
            out.append(None)
            continue
        out.append(found != stored)
        stored = found
    return out


def test_segments_drop_scripts_styles_comments_and_attributes():
    parts = segments(page().decode())
    text = " | ".join(parts)
    assert "Terms of use" in parts and LEGAL[0] in parts
    for hidden in ("window.__state", "color: red", "built", "csrf", "a1b2c3d4e5f6", "3f9a8c"):
        assert hidden not in text


@pytest.mark.parametrize("volatile", [
    {"nonce": "zz99yy88xx77ww66"},                     # tokens: nonces, csrf, comment
    {"asset": "77aa01"},                               # hashed asset names, cache busting
    {"trace": "0c1d2e3f4a5b6c7d8e9f"},                 # visible trace id
    {"clock": "23:59:58"},                             # timestamp
    {"comments": 13},                                  # counter
    {"ago": "7 min ago"},                              # relative time
    {"ago": "vor 18 Min"},                             # relative time (German)
    {"ago": "il y a 3 heures"},                        # relative time (French)
])
def test_each_volatile_fragment_is_no_change(volatile):
    fingerprinter = Fingerprinter("content")
    assert changed(fingerprinter, "http://a.test/terms", [page(), page(**volatile)]) == [False]
    # the same pair is a change for raw bytes: the fixture really differs
    assert changed(Fingerprinter("raw"), "http://a.test/terms", [page(), page(**volatile)]) \
        == [True]


def test_stable_segments_keep_numbers_of_long_segments():
    long = "You may close your account; we delete your data within 30 days of the closure."
    assert stable_segments([long]) != stable_segments([long.replace("30", "60")])
    assert stable_segments(["12 comments"]) == stable_segments(["13 comments"])
    assert stable_segments(["1.2k views", "42"]) == stable_segments(["1.3k views", "43"])
    assert stable_segments(["Story number 5"]) != stable_segments(["Story number 6"])
    # a count after its word (issue 59: comment counts standing beside their word)
    assert stable_segments(["Comments (72)", "views: 1.2k", "Reviews 4"]) == \
        stable_segments(["Comments (73)", "views: 1.3k", "Reviews 5"]) == ["<n>", "<n>", "<n>"]
    assert stable_segments(["Overview 5"]) != stable_segments(["Overview 6"])  # a word of its own


def test_relative_times_without_a_digit_are_volatile():
    """Issue 59: a help centre's "Updated yesterday" read "Updated this week" on the next
    fetch, then "Updated today", "Updated in the last hour": the same page. "An hour ago",
    "a few minutes ago", "gestern", "heute", "aujourd'hui" too; other words stay content."""
    same = [["Updated yesterday"], ["Updated this week"], ["Updated today"],
            ["Updated in the last hour"]]
    assert len({tuple(stable_segments(parts)) for parts in same}) == 1
    assert stable_segments(["Posted an hour ago"]) == stable_segments(["Posted a few minutes ago"])
    assert stable_segments(["Stand: gestern"]) == stable_segments(["Stand: heute"])
    assert stable_segments(["Mis à jour aujourd'hui"]) == ["Mis à jour <v>"]
    assert stable_segments(["Updated yesterday"]) != stable_segments(["Revised yesterday"])
    assert stable_segments(["Chicago office"]) == ["Chicago office"]


def test_one_word_edit_of_a_legal_paragraph_counts():
    fingerprinter = Fingerprinter("content")
    edited = list(LEGAL)
    edited[2] = edited[2].replace("courts", "tribunals")
    assert changed(fingerprinter, "http://a.test/terms",
                   [page(), page(nonce="q1w2e3r4t5y6"), page(edited)]) == [False, True]


@pytest.mark.parametrize("repeated", [
    [*LEGAL, LEGAL[1]],                               # a paragraph copied to the end
    [LEGAL[0], LEGAL[0], *LEGAL[1:]],                 # ... next to itself
    [*LEGAL, "Size M", "Size L", "Size M"],           # a short list entry repeated
])
def test_another_copy_of_text_already_on_the_page_is_a_change(repeated):
    """Issue 59 item 2: the copies of a page are compared as multisets of segments, so text
    that gains a second copy (or loses one) is a change, while the page's own text is
    otherwise the same."""
    once = [p for i, p in enumerate(repeated) if p not in repeated[:i]]
    said = changed(Fingerprinter("content"), "http://a.test/terms",
                   [page(once), page(once, nonce="q1w2e3r4t5y6"), page(repeated),
                    page(repeated, nonce="z9x8c7v6b5n4"), page(once)])
    assert said == [False, True, False, True]


def test_a_further_copy_that_comes_and_goes_inside_the_text_is_learned():
    """A heading shown once on some answers and twice on others, inside the document's own
    text: its first repeat is a change; once the second copy went and came back it is
    learned as volatile, and masked text inside the content no longer makes it count (the
    text itself is still on the page)."""
    once = [LEGAL[0], "Section A", LEGAL[1], LEGAL[2], LEGAL[3]]
    twice = [LEGAL[0], "Section A", LEGAL[1], "Section A", LEGAL[2], LEGAL[3]]
    fingerprinter = Fingerprinter("content")
    found = [fingerprinter.detect(page(twice if i % 2 else once, nonce=f"{i:012x}"),
                                  "http://d.test/terms", HTML) for i in range(10)]
    assert found[1].fingerprint != found[0].fingerprint and found[1].changed_segments == 1
    assert {d.fingerprint for d in found[3:]} == {found[0].fingerprint}
    assert [d.changed_segments for d in found[3:]] == [0] * 7  # ignored, not content
    assert all(d.ignored == 1 for d in found[3:])


def test_long_segments_in_another_order_are_a_change_short_ones_moving_are_not():
    """Issue 59: the same paragraphs in another order (a front page's stories re-sorted, a
    paragraph moved) is a change of the page; short segments that move (menu items) are
    not. Before, any move was no change: 15 of the corpus' missed changes."""
    moved = [LEGAL[2], LEGAL[0], LEGAL[3], LEGAL[1]]
    assert changed(Fingerprinter("content"), "http://a.test/terms",
                   [page(), page(nonce="q1w2e3r4t5y6"), page(moved, nonce="z9x8c7v6b5n4"),
                    page(moved, nonce="m1n2b3v4c5x6")]) == [False, True, False]
    menu = ("Home", "Help", "Blog", "Shop")
    assert changed(Fingerprinter("content"), "http://a.test/terms",
                   [page(nav=menu), page(nav=menu[::-1], nonce="q1w2e3r4t5y6")]) == [False]


def test_a_long_segment_masked_or_not_keeps_the_order_of_the_page():
    """The order kept with a page's memory holds every long segment, masked or not: a mask
    the host learns between two copies does not make the same page "move"."""
    order = change_detection.long_order
    long_text = [segment_hashes_module.segment_hash(p) for p in LEGAL]
    short = segment_hashes_module.segment_hash("Home")
    assert short & segment_hashes_module.SHORT_BIT and not long_text[0] & segment_hashes_module.SHORT_BIT
    assert order([short, *long_text]) == order([*long_text, short]) == order(long_text)
    assert order(long_text) != order(long_text[::-1])


def test_a_change_of_letter_case_in_the_text_is_a_change():
    """Issue 59: "Estimation of properties" re-cased "Estimation of Properties", "GSoft"
    written "GSOFT": an edit of the page's text. Before, segments were hashed lower-cased;
    then (until version 5 of the page memory) those with a volatile fragment still were, so
    a library's thesis entry re-cased, whose DOI is a volatile token, was no change."""
    edited = list(LEGAL)
    edited[1] = edited[1].replace("We may suspend", "We May Suspend")
    assert changed(Fingerprinter("content"), "http://a.test/terms",
                   [page(), page(nonce="q1w2e3r4t5y6"), page(edited)]) == [False, True]
    assert stable_segments(["Sponsored by GSoft"]) != stable_segments(["Sponsored by GSOFT"])
    entry = "Shah, Piyush (1977) Estimation of {}. Dissertation, doi:10.7907/a1b2c3d4e5"
    assert stable_segments([entry.format("properties")]) != \
        stable_segments([entry.format("Properties")])
    assert stable_segments(["Updated 5 min ago"]) == stable_segments(["Updated 6 min ago"]) \
        == ["Updated <v>"]
    assert stable_segments(["UPDATED 6 min ago"]) == ["UPDATED <v>"]
    theses = [f"<p>{entry.format(title)} (added {minutes} min ago)</p>"
              "<p>Every thesis of the institute, listed by year and department.</p>"
              for title, minutes in (("properties", 5), ("properties", 9), ("Properties", 12))]
    assert changed(Fingerprinter("content"), "http://library.test/theses",
                   [f"<html><body>{body}</body></html>".encode() for body in theses]) \
        == [False, True]


def test_a_copyright_line_turning_the_year_is_no_change_a_clause_naming_a_year_is():
    """January 1st: "© 2025 Hily" reads "© 2026 Hily" on every page of the site, which is
    no change of any page; nor is a release's version in it (three false changes on
    html-corpus-v3). A list's item "(c)" and a long clause keep their years: their change is
    an edit."""
    years = [LEGAL + [f"© {year} Hily. All rights reserved. Download App"]
             for year in (2025, 2026)]
    assert changed(Fingerprinter("content"), "http://a.test/terms",
                   [page(years[0]), page(years[1])]) == [False]
    assert stable_segments(["Copyright 2019-2024 ACME Corp."]) == \
        stable_segments(["Copyright 2019-2025 ACME Corp."]) == ["Copyright <v>-<v> ACME Corp."]
    assert stable_segments(["©mektoube.fr - 2023 - 2.0.32"]) == \
        stable_segments(["©mektoube.fr - 2023 - 2.1.5"])  # a release's version
    assert stable_segments(["(c) the rules of 2024 apply"]) != \
        stable_segments(["(c) the rules of 2025 apply"])
    clause = ("The copyright of every contribution made from {} on stays with its author, "
              "who grants us a licence to publish it on the service.")
    assert stable_segments([clause.format(2024)]) != stable_segments([clause.format(2025)])


def test_a_part_whose_lower_case_is_longer_keeps_its_fragments_masked_the_same_way():
    """A letter that lower-cases to two characters (the dotted capital I) cannot be put back
    in place: such a part comes back lower-cased as before, every time the same."""
    part = "İstanbul office, updated 5 min ago"
    assert stable_segments([part]) == stable_segments([part.replace("5", "7")]) \
        == [part.lower().replace("5 min ago", "<v>")]


def _rewritten(i: int, topic: str) -> list[str]:
    return [f"Issue {i} of the {topic} newsletter: this week's seminar is on the {topic} of "
            f"materials, and the talk on thursday starts at noon in the main hall ({j})."
            for j in range(60)]


def test_a_page_rewritten_in_full_is_a_change_another_page_served_in_its_place_is_not():
    """Issue 59: a copy sharing under ``MIN_OVERLAP`` of its segments with the last one was
    always taken for another page served in its place (a redirect target). A weekly
    newsletter's next issue is this page rewritten: its new text was never on the host, so
    it is a change. The host's home page served at the page's address is not: its text is
    the host's (``SERVED_ELSEWHERE``), a failed fetch, and the page is compared with its
    last copy when it comes back."""
    fingerprinter = Fingerprinter("content")
    url, home = "http://news.test/letter", "http://news.test/"
    home_page = page(_rewritten(0, "home"), title="Home")
    fingerprinter.detect(home_page, home, HTML)
    said = changed(fingerprinter, url, [page(_rewritten(1, "physics")),
                                        page(_rewritten(2, "chemistry")),
                                        home_page,
                                        page(_rewritten(2, "chemistry"), nonce="q1w2e3r4t5y6")])
    assert said == [True, None, False]
    assert fingerprinter.detect(home_page, url, HTML).reason == "replaced"


def test_content_changes_count_after_the_host_learned_its_boilerplate():
    """Two pages of one host, rotating widget and renamed menu learned; then each kind
    of edit of the page's own text still counts."""
    fingerprinter = Fingerprinter("content")
    other = ["Our privacy policy explains which personal data we process and why we do it."]
    widgets = ["Most read: the weather", "Most read: the election", "Most read: the match"]
    for round_ in range(6):
        widget = widgets[round_ % 3]
        fingerprinter.detect(page(widget=widget, ago=f"{round_} min ago"),
                             "http://a.test/terms", HTML)
        fingerprinter.detect(page(other, widget=widget, title="Privacy"),
                             "http://a.test/privacy", HTML)
    edits = [
        [LEGAL[0], LEGAL[1].replace("30 days", "60 days"), *LEGAL[2:]],   # a number
        [*LEGAL[:3], LEGAL[3].replace("e-mail", "post")],                 # one word
        LEGAL[:3],                                                        # a paragraph gone
        [*LEGAL, "A new paragraph about arbitration in a chosen place."],  # one added
    ]
    for edit in edits:
        assert changed(fingerprinter, "http://a.test/terms",
                       [page(widget="Most read: the match"),
                        page(edit, widget="Most read: the weather")]) == [True]


def test_rotating_widget_is_learned_and_then_ignored():
    fingerprinter = Fingerprinter("content")
    widgets = ["Most read: the weather", "Most read: the election"]
    bodies = [page(widget=widgets[i % 2]) for i in range(12)]
    said = changed(fingerprinter, "http://b.test/terms", bodies)
    assert said.count(True) <= 2          # learning costs at most the first two flips
    assert not any(said[4:])              # then the alternation is no change


def test_menu_renamed_inside_boilerplate_is_no_change_on_a_host_with_two_pages():
    fingerprinter = Fingerprinter("content")
    other = ["Our privacy policy explains which personal data we process and why we do it."]
    fingerprinter.detect(page(), "http://c.test/terms", HTML)
    fingerprinter.detect(page(other, title="Privacy"), "http://c.test/privacy", HTML)
    renamed = ("Home", "Help centre", "Blog")
    assert changed(fingerprinter, "http://c.test/terms", [page(), page(nav=renamed)]) == [False]
    detector = fingerprinter._detector
    assert isinstance(detector, ContentDetector) and detector.stats()["ignored_changes"] >= 1


def test_a_dated_entry_of_a_list_the_host_shows_everywhere_counts():
    """Issue 59: a short entry with a digit (a dated teaser, a price) that replaces one of a
    list the host shows on every page sits between boilerplate like a renamed menu item,
    but is a listing's entry: its change counts, while the renamed menu item above does
    not."""
    fingerprinter = Fingerprinter("content")
    other = ["Our privacy policy explains which personal data we process and why we do it."]
    latest = ("Home", "Dec 15, 2023 Our new office", "Nov 23, 2023 Spring release", "Blog")
    fingerprinter.detect(page(nav=latest), "http://c.test/terms", HTML)
    fingerprinter.detect(page(other, title="Privacy", nav=latest), "http://c.test/privacy", HTML)
    newer = ("Home", "Jan 8, 2024 Winter release", "Nov 23, 2023 Spring release", "Blog")
    assert changed(fingerprinter, "http://c.test/terms",
                   [page(nav=latest), page(nav=newer)]) == [True]


def test_bot_wall_is_a_failed_fetch_and_never_a_change():
    fingerprinter = Fingerprinter("content")
    wall = (b"<html><head><title>Just a moment...</title>"
            b'<meta http-equiv="refresh" content="5;url=/terms?t=1717171717"></head>'
            b"<body><p>Checking your browser before accessing the site.</p>"
            b"<p>Please complete the captcha.</p></body></html>")
    url = "http://d.test/terms"
    assert changed(fingerprinter, url, [page(), wall, page()]) == [None, False]
    detection = fingerprinter.detect(wall, url, HTML)
    assert detection.fingerprint is None and detection.reason == "bot wall"
    lease = Lease(url=url, token="1", host="d.test", etag=None, last_modified=None)
    result = outcome(lease, 200, HTML, wall, url, fingerprinter, 1000.0)
    assert result.kind == "failed" and result.args == {
        "reason": "not content: bot wall", "status": 200}
    good = outcome(lease, 200, HTML, page(), url, fingerprinter, 1000.0)
    assert good.kind == "observe" and good.args["fingerprint"]


def test_markup_inside_a_quoted_attribute_value_is_no_text():
    """Issue 59: a tag whose quoted value holds "<" or ">" (a tooltip's ``title="...<br>..."``,
    Alpine.js's ``@click="() => ..."``) ended at the value's first ">", or was no tag at its
    "<": the value's tail was read as text, and a shop's tooltip gaining a location was a
    change (2 of html-corpus-v3's 75 shop revisits). Such a tag is read whole, as a browser
    reads it; a quote left open is read as before; so is a quoted value in plain text."""
    assert segments('<p>x <span title="Wien<br>USA">y</span> z</p>') == ["x y z"]
    assert segments('<div @click="() => open = !open">Menu</div><p>x</p>') == ["Menu", "x"]
    assert segments("<p>a <i data-j='{\"b\": \"<img src=c>\"}'>d</i></p>") == ["a d"]
    assert segments('<p title="<b>" data-x="<i>">two values</p>') == ["two values"]
    assert segments('<p title="open>text</p><p>more "said" here</p>') == \
        ["text", 'more "said" here']
    assert segments('<pre>x = "a > b" and y</pre>') == ['x = "a > b" and y']

    def shop(places: str) -> bytes:
        return page(banner=f'<p>Servers in three countries <span class="tip" title="'
                           f'<b>Locations</b><br>{places}">(where?)</span></p>')

    assert changed(Fingerprinter("content"), "http://s.test/vps",
                   [shop("Germany<br>Austria"), shop("Germany<br>Austria<br>USA")]) == [False]


def test_a_bot_wall_standing_for_many_fetches_is_never_the_page_s_copy():
    """Issue 59: a bot wall is refused however long it stands. Taken as the copy after three
    refusals (as a page that really became short is), a Cloudflare wall standing on a news
    site's sections was a false change, and another when the sections came back."""
    wall = (b"<html><head><title>Just a moment...</title></head>"
            b"<body><p>Checking your browser before accessing the site.</p></body></html>")
    url = "http://d.test/news"
    said = changed(Fingerprinter("content"), url, [page()] + [wall] * 6 + [page()])
    assert said == [None] * 6 + [False]
    error = b"<html><body><h1>503 Service Unavailable</h1></body></html>"  # walls spend
    said = changed(Fingerprinter("content"), url,  # none of the other refusals
                   [page()] + [wall] * 6 + [error] + [page()])
    assert said == [None] * 7 + [False]


@pytest.mark.parametrize("body,reason", [
    (b"", "empty"),
    (b"<html><body>   </body></html>", "empty"),
    (b"<html><body><h1>404 Not Found</h1><p>The page does not exist.</p></body></html>",
     "error page"),
])
def test_empty_and_error_answers_are_no_copy(body, reason):
    fingerprinter = Fingerprinter("content")
    url = "http://e.test/terms"
    fingerprinter.detect(page(), url, HTML)
    assert fingerprinter.detect(body, url, HTML).reason == reason
    assert changed(fingerprinter, url, [page(), body, page()]) == [None, False]


def test_an_error_message_inside_the_site_frame_is_no_copy():
    """Issue 59: "This page isn't available. An unexpected error has occurred" inside the
    site's menus, footer and a long cookie banner, over a quarter of the policy's text, was
    stored as the page's copy (a false change, and another when the policy came back). A
    copy that kept under half of the last one's text and whose new text is a short error
    message is an error page; an edit that writes "error" into a paragraph is a change."""
    banner = "".join(f"<p>Cookie notice part {n}: we and our partners store and read "
                     f"information on your device for the purposes listed below.</p>"
                     for n in "abcdefgh")
    policy = page(LEGAL * 3, banner=banner)
    error = page(["This page isn't available",
                  "An unexpected error has occurred. Try reloading the page."],
                 nonce="q1w2e3r4t5y6", banner=banner)
    fingerprinter = Fingerprinter("content")
    url = "http://g.test/policy"
    fingerprinter.detect(policy, url, HTML)
    assert fingerprinter.detect(error, url, HTML).reason == "error page"
    assert changed(Fingerprinter("content"), url, [policy, error, policy]) == [None, False]
    edited = list(LEGAL * 3)
    edited[2] = edited[2].replace("courts", "courts, save in error,")
    assert changed(Fingerprinter("content"), url, [policy, page(edited, banner=banner)]) == [True]


def test_a_page_that_really_became_short_is_taken_after_some_refusals():
    fingerprinter = Fingerprinter("content")
    url = "http://f.test/terms"
    short = b"<html><body><p>This service has closed. Thank you.</p></body></html>"
    long_page = page([p * 20 for p in LEGAL])
    said = changed(fingerprinter, url, [long_page] + [short] * 6)
    assert said[:3] == [None, None, None] and said[3] is True and said[4:] == [False, False]


def test_non_html_bodies_keep_a_byte_or_canonical_hash():
    fingerprinter = Fingerprinter("content")
    json_type = {"Content-Type": "application/json"}
    one = fingerprinter.detect(b'{"a": 1, "b": [1, 2]}', "http://g.test/x", json_type)
    same = fingerprinter.detect(b'{"b":[1,2],"a":1}', "http://g.test/x", json_type)
    other = fingerprinter.detect(b'{"b":[1,2],"a":2}', "http://g.test/x", json_type)
    assert one.fingerprint == same.fingerprint != other.fingerprint
    pdf = {"Content-Type": "application/pdf"}
    first = fingerprinter.detect(b"%PDF-1.7 12:00:01", "http://g.test/p.pdf", pdf)
    second = fingerprinter.detect(b"%PDF-1.7 12:00:02", "http://g.test/p.pdf", pdf)
    assert first.fingerprint != second.fingerprint


def test_raw_text_strip_patterns_and_custom_stay_available():
    assert Fingerprinter("raw")(b"a") != Fingerprinter("raw")(b"b")
    assert Fingerprinter("text")(b"<b>a</b>") == Fingerprinter("text")(b"<i>a</i>")
    strip = Fingerprinter("raw", strip_patterns=[r"t=\d+"])
    assert strip(b"x t=1") == strip(b"x t=2")
    assert Fingerprinter(lambda body, url, headers: b"same")(b"a") == \
        Fingerprinter(lambda body, url, headers: b"same")(b"b")
    with pytest.raises(ValueError, match="max_hosts"):
        ContentDetector(max_hosts=0)


def test_synthetic_revisits_meet_the_targets():
    """A seeded synthetic crawl: 3 hosts x 4 pages x 30 fetches with every volatile class
    changing on each fetch (the widget shows one of five texts) and a real one-word or
    one-number edit on 1 fetch in 10."""
    rng = random.Random(34)
    fingerprinter = Fingerprinter("content")
    widgets = [f"Most read: story number {i}" for i in range(5)]
    documents = {}
    for host in range(3):
        for number in range(4):
            documents[f"http://h{host}.test/doc{number}"] = [
                f"{p} (document {number} of host {host})" for p in LEGAL]
    stored: dict[str, str] = {}
    false = missed = unchanged = real = late_false = late_unchanged = 0
    for fetch in range(30):
        for url, paragraphs in documents.items():
            edit = fetch > 0 and rng.random() < 0.1
            if edit:
                index = rng.randrange(len(paragraphs))
                word = rng.choice(["promptly", "in writing", "within 14 days", "reasonably"])
                paragraphs[index] = paragraphs[index].replace(" the ", f" {word} the ", 1) \
                    if " the " in paragraphs[index] else paragraphs[index] + f" {word}."
            body = page(paragraphs, nonce=f"{rng.getrandbits(64):016x}",
                        asset=f"{rng.getrandbits(24):06x}",
                        clock=f"{rng.randrange(24):02d}:{rng.randrange(60):02d}:00",
                        comments=rng.randrange(500), ago=f"{rng.randrange(1, 59)} min ago",
                        widget=rng.choice(widgets),
                        trace=f"{rng.getrandbits(80):020x}")
            found = fingerprinter.detect(body, url, HTML).fingerprint
            assert found is not None
            if url in stored:
                said = found != stored[url]
                if edit:
                    real += 1
                    missed += not said
                else:
                    unchanged += 1
                    false += said
                    if fetch >= 10:
                        late_unchanged += 1
                        late_false += said
            stored[url] = found
    assert real > 20 and unchanged > 200
    assert missed == 0
    # each widget text first seen on a host costs a false change until it is learned
    # (it comes back, or shows on a second page); after ten rounds none is left
    assert false / unchanged <= 0.05, (false, unchanged)
    assert late_false / late_unchanged <= 0.01, (late_false, late_unchanged)


def test_state_is_bounded():
    detector_fp = Fingerprinter("content")
    detector = detector_fp._detector
    assert isinstance(detector, ContentDetector)
    small = ContentDetector(max_hosts=2, max_pages=3)
    for i in range(10):
        small.detect(page().decode(), page(), f"http://h{i}.test/p", "text/html")
    stats = small.stats()
    assert stats["hosts"] == 2 and stats["pages"] == 3
    assert json.dumps(stats)


BANNER = ("<div class='consent'><p>We and our {n} partners use cookies and similar tracking "
          "technologies to personalise ads and measure audiences. You can accept or reject "
          "them, or manage your choices.</p><p>Manage your cookie settings</p>"
          "<button>Accept all</button><button>Reject all</button></div>")


@pytest.mark.parametrize("before,after", [("", BANNER.format(n=96)),
                                          (BANNER.format(n=96), ""),
                                          (BANNER.format(n=96), BANNER.format(n=99))])
def test_consent_banner_coming_going_or_changing_is_no_change(before, after):
    fingerprinter = Fingerprinter("content")
    assert changed(fingerprinter, "http://i.test/terms",
                   [page(banner=before), page(banner=after)]) == [False]


def test_a_cookie_policy_paragraph_edit_counts():
    fingerprinter = Fingerprinter("content")
    policy = ["We use cookies to keep you signed in. You can accept or reject the optional "
              "cookies in your settings at any time.", *LEGAL]
    edited = [policy[0].replace("optional", "advertising"), *LEGAL]
    assert changed(fingerprinter, "http://i.test/cookies",
                   [page(policy), page(edited)]) == [True]


def test_text_shared_with_other_pages_counts_inside_the_content():
    """An address on every legal page of a host is boilerplate by the cross-page rule,
    but between two paragraphs of the page's own text its change counts."""
    fingerprinter = Fingerprinter("content")
    address = "Example Ltd, 3 Harbour Street, Dublin"
    moved = "Example Ltd, 12 Quay Road, Cork"
    for url in ("http://j.test/terms", "http://j.test/privacy"):
        fingerprinter.detect(page([LEGAL[0], address, LEGAL[1]] if url.endswith("terms") else
                                  ["Privacy text of this host, its own words.", address,
                                   "More privacy text."]), url, HTML)
    assert changed(fingerprinter, "http://j.test/terms",
                   [page([LEGAL[0], address, LEGAL[1]]),
                    page([LEGAL[0], moved, LEGAL[1]])]) == [True]


def test_the_date_line_of_a_legal_document_counts():
    fingerprinter = Fingerprinter("content")
    assert changed(fingerprinter, "http://k.test/terms",
                   [page(["Last updated: 1 February 2026", *LEGAL]),
                    page(["Last updated: 2 February 2026", *LEGAL])]) == [True]


def test_a_page_of_one_short_line_still_changes():
    """A tiny page (its only text one short line) on a host with other pages."""
    fingerprinter = Fingerprinter("content")
    fingerprinter.detect(page(), "http://l.test/terms", HTML)
    tiny = [b"<div><p>Story number %d</p></div>" % n for n in range(1, 6)]
    assert changed(fingerprinter, "http://l.test/news", tiny) == [True] * 4


# The volatile and counter patterns as plain alternations, each "\b" where it stands: the
# way to read them. detection/segments writes them so that sre can skip positions (a first
# character set, lookbehinds); both must mask exactly the same text.
PLAIN_VOLATILE = re.compile("|".join((
    r"\b\d+\s*(?:s|sec|secs|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?|w|wks?|"
    r"weeks?|months?|y|yrs?|years?)\s+ago\b",
    r"\b(?:vor|il\s+y\s+a|hace|fa|há)\s+\d+\s*\w{1,9}\b",
    r"\b(?:just\s+now|gerade\s+eben|[àa]\s+l'instant)\b",
    r"\b\d+\s+(?:partners|vendors|partenaires|partner)\b",
    r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b",
    r"\b\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:\s*[ap]\.?m\.?)?\b",
    r"\b\d{10,}\b")))
PLAIN_COUNTER = re.compile(
    r"(?<![\d.,])\d[\d.,]*\s?[km]?\+?\s*(?:comments?|views?|likes?|shares?|followers?|reactions?|"
    r"replies|repl(?:y|ies)|votes?|points?|reviews?|ratings?|reads?|kommentare?|aufrufe|"
    r"commentaires?|vues|comentarios?|visitas|commenti|visualizzazioni)\b|"
    r"(?:^|(?<=\x00))[\s(]*\d[\d.,]*\s?[km]?\+?[\s)]*(?=\x00|$)")


PLAIN_COUNTER_AFTER = re.compile(
    r"\b(?:comments?|views?|likes?|shares?|followers?|reactions?|replies|votes?|points?|reviews?|"
    r"ratings?|reads?|kommentare?|aufrufe|commentaires?|vues|comentarios?|visitas|commenti|"
    r"visualizzazioni)\s*[:(\[]?\s*\d[\d.,]*\s?[km]?\+?[)\]]?")


PLAIN_RELATIVE_DAY = re.compile(
    r"\b(?:an?|one|a few)\s+(?:seconds?|minutes?|mins?|hours?|days?|weeks?|months?|years?)"
    r"\s+ago\b|\b(?:in\s+the\s+)?(?:last|past)\s+hour\b|"
    r"\b(?:yesterday|today|(?:this|last)\s+week|gestern|heute|aujourd'hui)\b")


PLAIN_WORD = re.compile(r"[a-z0-9_\-+/=.]{10,}")


def plain_stable_segments(parts: list[str]) -> list[str]:
    """stable_segments with the plain patterns (dates are not masked: MASK_DATES)."""
    text = "\x00".join(parts).lower()
    text = PLAIN_WORD.sub(segments_module._token, text)
    text = PLAIN_VOLATILE.sub("<v>", text)
    text = PLAIN_RELATIVE_DAY.sub("<v>", text)  # on every text, not only where a word is
    text = PLAIN_COUNTER.sub("<n>", text)
    return PLAIN_COUNTER_AFTER.sub("<n>", text).split("\x00")


def test_fast_volatile_patterns_mask_what_the_plain_alternations_mask():
    """Seeded strings built from every fragment class glued in every way (no space, one
    or two spaces, other white space, a NUL between segments, word characters before and
    after): the same text. Single-spaced texts without ``LETTER_WORDS`` take the digits-only
    pattern, the others the full one: both are compared."""
    assert not segments_module.MASK_DATES
    atoms = ["vor", "il y a", "hace", "fa", "há", "just now", "gerade eben", "à l'instant",
             "a l'instant", "5", "12", "2026-01-02", "2026-01-02t10:20:30z", "10:30",
             "10:30 a.m.", "1234567890", "12345678901", "min", "ago", "days", "partners",
             "comments", "1.2k", "(3)", "x", "ab", "\x00", "-", ":", ".", ",", "tagen", "_",
             "é", "٣", "views", "+", " ", "\t", "\xa0", "\u200b", "favor", "will", "a",
             "an", "a few", "hour", "hours", "minute", "yesterday", "today", "this week",
             "last", "past", "week", "in the", "heute", "aujourd'hui", "todays",
             # counts after their words, long ids and words of id characters
             "likes", "votes:", "replies", "reads", "points", "kommentare", "aufrufe", "vues",
             "commenti", "ratings", "(", "[", "]", ")", "k", "m", "ab12cd34ef", "0123456789a",
             "x.y/z=1+2_3", "abcdefghij", "a-b-c-d-e-"]
    rng = random.Random(35)
    compared = 0
    for _ in range(20000):
        text = "".join(rng.choice(atoms) + rng.choice(["", " "]) for _ in range(rng.randint(1, 10)))
        parts = text.split("\x00")
        assert stable_segments(parts) == plain_stable_segments(parts), parts
        compared += 1
    assert compared == 20000
    # letter-first fragments spaced otherwise than by single spaces take the full pattern
    for text in ("il  y a 3 heures", "vor\t5 min", "just\xa0now", "gerade  eben",
                 "à  l'instant", "fa  2 ore", "hace\u20032 días", "há\n5 dias"):
        parts = ["12 x", text, "plain"]
        assert stable_segments(parts) == plain_stable_segments(parts) == ["12 x", "<v>", "plain"]


# The tag patterns as the plain alternations they were: detection/segments writes the names
# as a trie (``alternation``) so that sre tries a few branches at each "<"; both must
# find the same tags.
PLAIN_DROP_START = re.compile((r"<!--|<(" + "|".join(segments_module._DROPPED) + r")\b"
                               + segments_module._ATTRIBUTES + ">").encode(), re.I)
PLAIN_BLOCK = re.compile(r"</?(?:" + "|".join(segments_module._BLOCK_TAGS) + "|"
                         + "|".join(segments_module._BLOCK_TAGS).upper() + r")\b"
                         + segments_module._ATTRIBUTES + ">")


def test_trie_alternation_matches_exactly_its_names():
    names = ["p", "pre", "h1", "h2", "header", "html", "th", "thead", "td"]
    pattern = re.compile(segments_module.alternation(names) + r"\Z")
    for word in names + ["", "pr", "h", "h3", "head", "thea", "theads", "preh", "p1", "tdd"]:
        assert bool(pattern.match(word)) == (word in names), word
    assert segments_module.alternation(["script", "style"]) == "s(?:cript|tyle)"


def test_tag_patterns_find_what_the_plain_alternations_find():
    """Seeded markup glued from tag names, near misses and case variants: the same spans
    (and the same dropped element's name) as the plain alternations."""
    names = list(segments_module._BLOCK_TAGS) + list(segments_module._DROPPED) + [
        "b", "pr", "prex", "h7", "thea", "spa", "span", "scripts", "Script", "sTyLe", "DIV",
        "Div", "H1", "a", "!--", "svgx", "heads"]
    rng = random.Random(36)
    for _ in range(3000):
        markup = "".join(
            rng.choice(["<", "</"]) + rng.choice(names) + rng.choice(["", " ", "x", "-", " a=1"])
            + rng.choice([">", "", "<"]) + rng.choice(["", "text ", "\x00"])
            for _ in range(rng.randint(1, 8)))
        assert [m.span() for m in segments_module._BLOCK.finditer(markup)] == \
            [m.span() for m in PLAIN_BLOCK.finditer(markup)], markup
        data = markup.encode()
        assert [(m.span(), m.group(1)) for m in segments_module._DROP_START.finditer(data)] == \
            [(m.span(), m.group(1)) for m in PLAIN_DROP_START.finditer(data)], markup


def plain_runs(order: list[int], fresh: set[int]) -> list[tuple[list[int], int | None, int | None]]:
    """The runs of fresh segments, one segment at a time: what ``_runs`` finds in C."""
    found, run, left = [], [], None
    for h in order:
        if h in fresh:
            run.append(h)
            continue
        if run:
            found.append((run, left, h))
            run = []
        left = h
    if run:
        found.append((run, left, None))
    return found


def test_runs_of_fresh_segments_match_a_plain_walk():
    rng = random.Random(37)
    for _ in range(2000):
        order = [rng.randrange(12) for _ in range(rng.randint(0, 30))]
        fresh = {h for h in range(12) if rng.random() < 0.3}
        assert fresh_runs._runs(order, fresh) == plain_runs(order, fresh), (order, fresh)
        assert fresh_runs._runs(array("Q", order), fresh) == plain_runs(order, fresh)


def test_whole_text_hash_ignores_every_kind_of_white_space():
    """Segments keep single spaces only, so removing " " is removing all white space: the
    hash equals that of the text with every Unicode white space character removed."""
    rng = random.Random(38)
    spaces = [" ", "  ", "\t", "\n", "\r\n", "\xa0", "\u2003", "\u3000", "\x1c", "\x85"]
    words = ["terms", "of", "use", "é", "<b>", "</p>", "<p>", "<div>", "&nbsp;", "x"]
    for _ in range(500):
        markup = "".join(rng.choice(words) + rng.choice(spaces) for _ in range(rng.randint(1, 20)))
        parts = segments(markup)
        hashes = list(range(len(parts)))
        expected = hashlib.blake2b("".join("".join(parts).split()).encode("utf-8", "surrogatepass"),
                                   digest_size=8).digest()[:4]
        assert change_detection._whole_text_hash(parts, hashes, set()) == expected, markup


def test_a_full_segment_cache_starts_afresh_without_losing_the_page():
    """When the cache of stable hashes fills, it is emptied; the page being read still gets
    the hashes of the segments it had in the cache (before, a KeyError: the answer was
    never observed), and the fingerprints are those of a detector whose cache never fills."""
    small, large = ContentDetector(cache_segments=50), ContentDetector()
    for fetch in range(3):
        for n in range(20):
            markup = ("<html><body><nav>Home</nav>"
                      + "".join(f"<p>Paragraph {i} of page {n}, fetch {fetch // 2}</p>"
                                for i in range(10)) + "<footer>Imprint</footer></body></html>")
            url = f"http://a.example/{n}"
            assert small.detect(markup, markup.encode(), url, "text/html") == \
                large.detect(markup, markup.encode(), url, "text/html")
    assert len(small._stable_cache) <= 50 + 12


PLAIN_CONSENT = re.compile(
    r"cookie|consent|partners can use|privacy (?:choices|preference)|accept all|reject all|"
    r"tracking technolog|personali[sz]ed (?:ads|advertising)|your choices|gdpr|rgpd|"
    r"traceurs|datenschutz-einstellungen|einwilligung")
"""The consent words as the alternation they were written as: ``CONSENT_WORDS`` must
flag exactly the segments this finds."""


def test_consent_words_flag_what_the_alternation_flags():
    atoms = ["cookie", "cookies", "cooki", "consent", "consen", "partners can use",
             "partners can", "privacy choices", "privacy preferences", "privacy choice",
             "accept all", "accept al", "reject all", "reject a", "tracking technologies",
             "tracking technolo", "personalised ads", "personalized ads",
             "personalised advertising", "personalized advertising", "personalised adverts",
             "personalized ad", "personalides ads", "your choices", "your choice", "gdpr",
             "gdp r", "rgpd", "rgp", "traceurs", "traceur", "datenschutz-einstellungen",
             "datenschutz-einstellung", "einwilligung", "einwilligun", "x", "é", " ", "-"]
    rng = random.Random(39)
    for _ in range(500):
        texts = ["".join(rng.choice(atoms) for _ in range(rng.randint(0, 6)))
                 for _ in range(rng.randint(1, 8))]
        expected = [segment_hashes_module.segment_hash(t) & ~segment_hashes_module._CONSENT_BIT
                    | (segment_hashes_module._CONSENT_BIT if PLAIN_CONSENT.search(t) else 0)
                    for t in texts]
        assert [segment_hashes_module.segment_hash(t) for t in texts] == expected, texts
        assert segment_hashes_module.segment_hashes(texts) == expected, texts
    assert segment_hashes_module.segment_hashes(["a cookie", "none"])[0] & segment_hashes_module._CONSENT_BIT
    assert not segment_hashes_module.segment_hashes(["none", "at all"])[1] & segment_hashes_module._CONSENT_BIT


def test_only_segments_with_a_digit_or_an_undated_word_are_masked():
    """``stable_segments`` masks the segments that hold a digit or one of
    ``UNDATED_WORDS``; the others come back as they were, letter case and all (a masked one
    its fragments replaced by tokens, its other letters as they were)."""
    parts = ["Just now", "Token ABCDEFGHIJ0123 here", "Plain Words abcdefghijklmnop",
             "A l'instant", "Vor 18 Min", "42", "Chapter 2 of The Terms"]
    assert stable_segments(parts) == ["<v>", "Token <t> here", "Plain Words abcdefghijklmnop",
                                      "<v>", "<v>", "<n>", "Chapter 2 of The Terms"]


@pytest.fixture
def stable_hashes(monkeypatch) -> None:
    """The segment caches keyed by a hash that is the same in every run (``str``'s and
    ``bytes``' are salted per process: chunks are bytes, pieces text), so that which keys
    share a slot of the table of keys seen once (``segments._again``) is the same in every
    run: a test of what the caches keep cannot pass in one run and fail in the next."""
    monkeypatch.setattr(segments_module, "hash", lambda text: int.from_bytes(
        hashlib.blake2b(segments_module.utf8(text), digest_size=8).digest(),
        "little", signed=True), raising=False)


def test_segments_work_out_only_the_pieces_not_seen_before(monkeypatch,
                                                            stable_hashes) -> None:
    """A revisit's pieces of markup between block tags come from the cache: once a changed
    chunk's pieces were worked out twice (a piece is kept the second time), only the piece
    that changed is worked out (inline tags, references, white space), and the segments
    are those of a fresh process, the cache full or not."""
    worked: list[str] = []
    pieces_text = segments_module._pieces_text

    def counted(pieces: list[str]) -> list[str]:
        worked.extend(pieces)
        return pieces_text(pieces)

    monkeypatch.setattr(segments_module, "_pieces_text", counted)
    for name in ("_normal", "_chunks"):
        monkeypatch.setattr(segments_module, name, {})
        monkeypatch.setattr(segments_module, name + "_once", array("q", bytes(8 << 16)))
    rows = "".join(f"<tr><td>Row <b>{i}</b> &amp; its   text</td></tr>" for i in range(40))
    page = "<html><head><title>T</title></head><body><table>{}</table><p>{}</p></body></html>"
    first = segments(page.format(rows, "Old <i>text</i> here"))
    assert len(worked) > 40
    for text in ("Old <i>text</i> here", "Mid <i>text</i> here", "Later <i>text</i> here"):
        segments(page.format(rows, text))  # the table's pieces: worked twice, then kept
    assert segments_module._normal != {}
    worked.clear()
    again = segments(page.format(rows, "New <i>text</i> here"))
    assert worked == ["New <i>text</i> here"], worked
    assert again == first[:-1] + ["New text here"]
    assert again[1:3] == ["Row 0 & its text", "Row 1 & its text"]
    monkeypatch.setattr(segments_module, "NORMAL_CACHE", 10)  # full: starts afresh
    assert segments(page.format(rows, "New <i>text</i> here")) == again
    assert len(segments_module._normal) <= len(again) + 10


def test_a_revisit_cuts_only_the_chunks_that_changed(monkeypatch, stable_hashes) -> None:
    """A document is first cut at ``CHUNK_CUT`` ("</div>"); a chunk seen before gives its
    texts from the chunk cache, so the block-tag pattern runs only over the chunk that
    changed, and the segments are those of a fresh process."""
    cut: list[str] = []
    block = segments_module._BLOCK

    class Counted:
        @staticmethod
        def split(markup: str) -> list[str]:
            cut.append(markup)
            return block.split(markup)

    monkeypatch.setattr(segments_module, "_BLOCK", Counted)
    monkeypatch.setattr(segments_module, "_chunks", {})
    monkeypatch.setattr(segments_module, "_chunks_once", array("q", bytes(8 << 16)))
    blocks = "".join(f"<div class='row'><p>Entry {i}</p><p>Its text</p></div>" for i in range(30))
    page = "<html><body>{}<div><p>{}</p></div></body></html>"
    first = segments(page.format(blocks, "Old news"))
    assert len(cut) == 32  # every chunk: 31 closed by "</div>", the rest of the page
    assert segments(page.format(blocks, "Old news")) == first  # the second time: kept
    assert len(cut) == 64
    cut.clear()
    again = segments(page.format(blocks, "New news"))
    assert cut == ["<div><p>New news</p>"], cut
    assert again == first[:-1] + ["New news"]
    monkeypatch.setattr(segments_module, "_chunks", {})
    assert segments(page.format(blocks, "New news")) == again  # a fresh process's segments
    monkeypatch.setattr(segments_module, "CHUNK_CACHE", 5)  # full: starts afresh
    assert segments(page.format(blocks, "New news")) == again
    assert segments(page.format(blocks, "Old news")) == first  # known chunks and a new one
    assert len(segments_module._chunks) == 32


def test_pieces_that_never_come_again_are_not_kept(monkeypatch, stable_hashes) -> None:
    """A chunk or a piece is cached the second time it is worked out: a page whose markup
    holds a new request id on every answer (a counter, a time) leaves the caches as they
    were after its second answer, answer after answer (the Cluster hour of 2026-12-06: the
    detection processes grew 1.5-2 MB an hour with such pages), and its segments are
    those of a fresh process. The table of keys seen once is fixed in size."""
    for name, value in (("_chunks", {}), ("_normal", {}), ("_plains", {}),
                        ("_chunks_once", array("q", bytes(8 << 16))),
                        ("_normal_once", array("q", bytes(8 << 16)))):
        monkeypatch.setattr(segments_module, name, value)
    rows = "".join(f"<div><p>Entry <b>{i}</b></p></div>" for i in range(20))
    page = ("<html><body>{}<div class='promo-{}' data-render='{}'><p>Served {}</p></div>"
            "</body></html>")
    for serial in range(4):  # the rows and the promotion's constant pieces: seen twice
        segments(page.format(rows, serial, serial, serial))
    sizes = len(segments_module._chunks), len(segments_module._normal)
    assert sizes[0] == 21  # the rows' chunks and the end's
    for serial in range(4, 200):
        found = segments(page.format(rows, serial, serial, serial))
        assert found[-1] == f"Served {serial}"
    assert (len(segments_module._chunks), len(segments_module._normal)) == sizes
    assert len(segments_module._chunks_once) == 1 << 16
    for name in ("_chunks", "_normal", "_chunks_once", "_normal_once"):
        monkeypatch.setattr(segments_module, name, {} if not name.endswith("once")
                            else array("q", bytes(8 << 16)))
    assert segments(page.format(rows, 7, 7, 7)) == found[:-1] + ["Served 7"]


CHUNK_PIECES = ["</div>", "</DIV>", "</div >", "<div>", "<div title='</div>'>", "<p>", "</p>",
                "<!-- </div> -->", "<script>s = '</div>'</script>", "<style>p{}</style>",
                "<b>", "</b>", "text ", "&amp; ", "&quot;>", "<br>", "<td>", "\x00", " ", "<",
                ">", "</di", "v>", "<a title=\"a<b\">link</a>", "<title>T</title>"]


def test_chunks_give_the_segments_of_one_cut_of_the_whole_document(monkeypatch) -> None:
    """Seeded documents glued from tags, "</div>" in comments, scripts and quoted values,
    near misses and case variants: the segments with the chunk cut are those of one cut of
    each part by the block-tag pattern (``CHUNK_CUT`` made a string no document holds), and
    with the parts that hold markup in a quoted value cut again from the cache of such parts,
    those of every part of the document cut again; first copies and revisits alike."""
    rng = random.Random(59)
    documents = ["".join(rng.choice(CHUNK_PIECES) for _ in range(rng.randint(0, 40)))
                 for _ in range(1500)]
    documents += documents[:300]  # again: from the caches
    plain = segments_module._plain_values
    monkeypatch.setattr(segments_module, "CHUNK_CUT", b"\x00")  # markup holds no NUL
    mark = segments_module._LEFT_MARK
    monkeypatch.setattr(segments_module, "_plain_where_left", lambda shown, *_: [
        text.lstrip(mark) for text in segments_module._texts(list(map(plain, shown)))])
    # every part of the document cut again, no cache of it
    monkeypatch.setattr(segments_module, "_normal", {})
    expected = [segments(document) for document in documents]
    monkeypatch.undo()
    for cache in ("_normal", "_chunks", "_plains"):
        monkeypatch.setattr(segments_module, cache, {})
    assert [segments(document) for document in documents] == expected
    assert segments_module._plains  # the documents hold tags with markup in a value


def test_only_the_part_holding_markup_in_a_quoted_value_is_cut_again(monkeypatch) -> None:
    """A page of parts between scripts, one of which has a tooltip whose value holds markup:
    that part alone is cut again with its values made plain (a 2 MiB front page with one
    such tag is not cut twice whole), and its text reads as the tooltip's tag made whole."""
    calls: list[str] = []
    plain = segments_module._plain_values
    monkeypatch.setattr(segments_module, "_plain_values",
                        lambda part: calls.append(part) or plain(part))
    for cache in ("_normal", "_chunks", "_plains"):
        monkeypatch.setattr(segments_module, cache, {})
    parts = [f"<p>Paragraph {i} of the page.</p>" for i in range(6)]
    parts[3] = '<p><span title="<b>Wien</b><br>USA">Locations</span></p>'
    page = "<script>var x = 1;</script>".join(parts)
    found = segments(page)
    assert found == [f"Paragraph {i} of the page." for i in range(6) if i != 3][:3] + \
        ["Locations"] + [f"Paragraph {i} of the page." for i in (4, 5)]
    assert calls == [parts[3].encode()]


PRICE_PIECES = ("$", "€", "£", "¥", "$ ", "4", "24.99", " ", "eur", "EUR", "Eur", "usd", "chf",
                "CHF ", "euro", "chfx", "5eur", "ab ", "x", "Add to cart", "\x00", "\t", "-",
                "é", "_", "1 ", "¥\n")


def _random_part(draw: random.Random) -> str:
    return "".join(draw.choice(PRICE_PIECES) for _ in range(draw.randrange(0, 7)))


def test_priced_positions_are_those_a_search_per_part_finds():
    """``priced_positions`` (one search over the parts joined) finds exactly the parts that
    ``PRICE.search`` on each part finds: signs and codes beside digits at every place in a
    part, at its ends, across its neighbours' ends, empty parts and parts holding a NUL."""
    draw = random.Random(59)
    search = change_detection.PRICE.search
    for _ in range(3000):
        parts = [_random_part(draw) for _ in range(draw.randrange(0, 12))]
        expected = [i for i, part in enumerate(parts) if search(part)]
        assert change_detection.priced_positions(parts) == expected, parts
    assert change_detection.priced_positions(["5", "eur", "$", "9 chf", "4eur"]) == [3, 4]


def test_the_price_pattern_matches_as_the_plain_alternation():
    """``PRICE`` starts with a character set (so sre skips other positions in C); it finds the
    same matches, place for place, as the alternation it replaces, written out here."""
    plain = re.compile(r"[$€£¥]\s?\d|\d\s?(?:[€$£]|(?i:eur|usd|chf)\b)")
    draw = random.Random(591)
    for _ in range(5000):
        text = "".join(_random_part(draw) for _ in range(draw.randrange(1, 5)))
        assert [m.span() for m in change_detection.PRICE.finditer(text)] == \
            [m.span() for m in plain.finditer(text)], text


def test_priced_segments_through_the_cache_are_those_of_a_search_per_segment(monkeypatch):
    """The segments the detector keeps from being masked (``HostMask.value_shown``) are,
    on every copy, those of a ``PRICE`` search on each of its segments: found once for a
    segment not in the cache, read from ``_priced_keys`` after, also across the cache
    emptying itself (``cache_segments``) and for further copies of a priced text."""
    shown: list[list[int]] = []
    real = change_detection.HostMask.value_shown

    def record(self, values):
        values = list(values)
        shown.append(values)
        real(self, values)

    monkeypatch.setattr(change_detection.HostMask, "value_shown", record)
    draw = random.Random(34)
    products = ["Kettle", "Teapot", "Mug", "Tray"]
    for cache_segments in (30, 200_000):
        detector = ContentDetector(cache_segments=cache_segments)
        for fetch in range(6):
            for n, product in enumerate(products):
                rows = [f"{product} {draw.choice(['$ 4', '4 EUR', '4', '€4.50', 'chf 9'])}"
                        for _ in range(draw.randrange(1, 6))]
                markup = ("<html><body><nav>Home</nav><h1>" + product + "</h1>"
                          + "".join(f"<p>{row}</p><p>{row}</p>" for row in rows)
                          + f"<p>Delivery in {fetch} days, from 9 CHF</p>"
                          + "<footer>Imprint</footer></body></html>")
                shown.clear()
                detector.detect(markup, markup.encode(), f"http://shop.example/{n}", "text/html")
                parts = segments(markup)
                hashes = segment_hashes_module.copies_apart(
                    segment_hashes_module.segment_hashes(stable_segments(parts)))
                expected = [h for part, h in zip(parts, hashes, strict=True)
                            if change_detection.PRICE.search(part)]
                assert shown == [expected], (cache_segments, fetch, markup)
        assert len(detector._priced_keys) <= len(detector._stable_cache)


def test_a_price_shown_once_is_not_kept(monkeypatch):
    """A priced segment that never comes again (an order number beside a price) is
    worked out and shown to the host's mask on its fetch, and not kept after: the priced
    keys are bounded by the segment cache's rule (``bounded_cache.cached``), not by the count
    of fetches."""
    shown: list[int] = []
    detector = ContentDetector()
    real = change_detection.HostMask.value_shown
    for fetch in range(200):
        markup = ("<html><body><h1>Basket</h1>"
                  f"<p>Order {1000 + fetch} costs $ {fetch % 7 + 1}</p>"
                  "<footer>Imprint</footer></body></html>")
        detector.detect(markup, markup.encode(), "http://shop.example/basket", "text/html")
        assert len(detector._priced_keys) == 0, fetch

    def record(self, values):
        shown.extend(values)
        real(self, values)

    monkeypatch.setattr(change_detection.HostMask, "value_shown", record)
    markup = "<html><body><h1>Basket</h1><p>Order 1 costs $ 9</p></body></html>"
    detector.detect(markup, markup.encode(), "http://shop.example/basket", "text/html")
    assert len(shown) == 1  # the price of this fetch is still seen


def _copies_apart_one_by_one(hashes: list[int]) -> list[int]:
    """``copies_apart`` as a walk over every segment: the k-th copy of a text, k >= 2, is
    ``copy_hash(h, k)``."""
    copies: dict[int, int] = {}
    out = []
    for h in hashes:
        copies[h] = copies.get(h, 0) + 1
        out.append(h if copies[h] == 1 else segment_hashes_module.copy_hash(h, copies[h]))
    return out


def test_copies_apart_hashes_the_copies_a_walk_over_every_segment_hashes():
    """``copies_apart`` (its further copies found in C) gives each segment the hash a walk
    over every segment gives it: no repeat, a few, many of one text, arrays and lists."""
    draw = random.Random(2)
    flags = (0, segment_hashes_module.SHORT_BIT, segment_hashes_module.SHORT_BIT | (1 << 62))
    for _ in range(2000):
        texts = [draw.getrandbits(40) | draw.choice(flags) for _ in range(draw.randrange(1, 9))]
        hashes = [draw.choice(texts) for _ in range(draw.randrange(0, 40))]
        expected = _copies_apart_one_by_one(hashes)
        assert segment_hashes_module.copies_apart(hashes) == expected, hashes
        assert segment_hashes_module.copies_apart(array("Q", hashes)) == expected, hashes
    distinct = list(range(1, 300))
    assert segment_hashes_module.copies_apart(distinct) == distinct


def test_a_tag_name_with_a_unicode_letter_that_folds_to_ascii_is_text_not_a_crash():
    """"<ſcript>" (U+017F, which Python's Unicode case folding matches as "s") is no tag in
    HTML (a tag name starts with an ASCII letter): before, it was taken for a script tag and
    the lookup of its end tag raised KeyError, failing the page's detection."""
    parts = segments_module.segments(
        "<p>a</p><ſcript>x</ſcript><p>b</p><SCRIPT>y</script><p>c</p><\u212aEY>k</p>")
    assert parts[0] == "a" and "b" in parts and "c" in parts
    assert "y" not in " ".join(parts)  # a real script, in capitals, is still dropped
    assert any("x" in part for part in parts)  # the text of the non-tag stays content

"""A host's learned boilerplate (``detection/host_mask.py``): the masks a process learns become
events for the shared log, the log's bytes read back as written, and what is folded in from
other processes is learned without being written again."""

from __future__ import annotations

import math
import random
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frontier_rate.detection.host_mask import (
    BOILERPLATE_PAGES,
    BOILERPLATE_SHARE,
    COUNTED_PAGES,
    HEADER,
    PENDING_LIMIT,
    SPREAD_FLAG,
    WORD_BITS,
    HostMask,
    host_of,
    log_generation,
    narrow,
    page_bit,
    read_log,
    spread_threshold,
    tag,
    words_of,
    write_log,
)
from frontier_rate.detection.segment_hashes import SHORT_BIT

log_words = st.lists(st.integers(0, 2**WORD_BITS - 1), max_size=200)


@settings(max_examples=200, deadline=None)
@given(values=log_words, more=log_words, generation=st.integers(0, 2**64 - 1))
def test_a_log_reads_back_as_it_was_written(values, more, generation):
    first = write_log(values, generation)
    whole = first + write_log(more)  # a header, then two writes one after the other
    assert log_generation(whole[:HEADER.size]) == generation
    assert read_log(whole, whole=True) == sorted(values) + sorted(more)
    tail = whole[len(first):]  # what a reader past the first write gets
    assert read_log(tail, whole=False) == sorted(more)
    assert log_generation(write_log(values)) is None  # an append has no header


def test_a_log_costs_under_2_5_bytes_a_mask_for_a_host_of_160_masks():
    """Sorted and Rice-coded (``write_log``), the ~160 masks of a host of the corpus cost
    ~2 bytes each, not the 4 of one uncoded word a mask (issue 59: <= 300 B a page); the
    coded size is checked against the entropy bound computed apart: log2 C(2^WORD_BITS, n) bits."""
    draw = random.Random(59)
    words = draw.sample(range(2**WORD_BITS), 160)
    data = write_log(words, generation=1)
    body = len(data) - HEADER.size
    bound = (math.lgamma(2**WORD_BITS + 1) - math.lgamma(161) - math.lgamma(2**WORD_BITS - 159)) \
        / math.log(2) / 8
    assert read_log(data, whole=True) == sorted(words)
    assert bound < body < 2.5 * 160 and body < 1.15 * bound + 3


def test_a_damaged_log_is_refused_by_name():
    with pytest.raises(ValueError, match="13 bytes has a chunk of 30840 words with a Rice"):
        read_log(b"x" * 13, whole=False)
    with pytest.raises(ValueError, match="ends inside a word"):
        read_log(write_log(range(1, 200))[:-20], whole=False)


def split(log_words: list[int]) -> tuple[list[int], list[int]]:
    """The tags of log words: (masked for their spread, masked by another rule), sorted."""
    spread = sorted(w & ~SPREAD_FLAG for w in log_words if w & SPREAD_FLAG)
    other = sorted(w for w in log_words if not w & SPREAD_FLAG)
    return spread, other


def tags(*hashes: int) -> list[int]:
    return sorted(map(tag, hashes))


def test_a_tag_is_31_bits_of_the_top_32_never_0_and_spreads_near_hashes_apart():
    found = {tag(h << 32) for h in range(1, 100_000)}
    assert len(found) == 99_999 and 0 not in found and max(found) < 2**31
    assert tag(5 << 32 | 0xABCDEF) == tag(5 << 32)  # a hash known by its top 32 bits
    assert 0 < tag(0) < 2**31


def h(n: int) -> int:
    """A segment's hash for these tests: ``n`` in its top 32 bits, low bits not all zero."""
    return n << 32 | 1


def hs(*ns: int) -> set[int]:
    return {h(n) for n in ns}


def test_only_what_this_process_masks_becomes_an_event_and_each_once():
    mask = HostMask(limit=100, shared=True)
    mask.see(hs(1, 2, 3), page=10)
    assert mask.events == [] and not mask.masked  # seen on one page: content so far
    mask.see(hs(2, 3, 4), page=11)
    assert split(words_of(mask.events)) == (tags(h(2), h(3)), []) and mask.masked == hs(2, 3)
    mask.see(hs(2, 3), page=12)
    mask.mask(h(3))
    mask.mask(h(7))
    assert split(words_of(mask.events)) == (tags(h(2), h(3)), tags(h(7)))
    mask.see(hs(8, 9), page=13)
    mask.fold([tag(h(8)), tag(h(9)), tag(h(2))])  # masked by other processes: not written
    assert mask.masked == hs(2, 3, 7, 8, 9)
    assert split(words_of(mask.events)) == (tags(h(2), h(3)), tags(h(7)))
    assert split(mask.state()) == ([], tags(*hs(2, 3, 7, 8, 9)))  # 2 folded as a rule's
    alone = HostMask(limit=100)
    alone.see(hs(1, 2), page=10)
    alone.see(hs(1, 2), page=11)
    assert alone.events is None and alone.masked == hs(1, 2)


def test_a_mask_of_a_segment_not_seen_here_waits_until_a_copy_shows_it():
    """Another process masked 70 and 80; this one has not seen them: they wait by their tag
    and are masked once a copy shows them, before that copy is compared (``resolve``); a
    segment of the page's last copy known only by its top 32 bits is masked by its tag."""
    mask = HostMask(limit=100, shared=True)
    mask.fold([tag(h(70)), tag(h(80)) | SPREAD_FLAG, tag(h(90))])
    assert not mask.masked and set(mask.pending) == {tag(h(70)), tag(h(80)), tag(h(90))}
    assert split(mask.state()) == (tags(h(80)), tags(h(70), h(90)))  # a compaction keeps them
    mask.resolve([h(5), h(70), h(80)], last=[90 << 32])
    assert mask.masked == {h(70), h(80), 90 << 32} and mask.events == []
    unresolved = HostMask(limit=100, shared=True)
    unresolved.fold([tag(h(70))])
    unresolved.see(hs(5, 70), page=1)  # seen without resolve: not masked
    assert h(70) not in unresolved.masked


def test_a_spread_mask_from_another_process_holds_only_while_few_of_the_hosts_pages_are_known():
    learned = HostMask(limit=1000, shared=True)
    learned.see(hs(1, 50), page=0)
    learned.see(hs(1, 50), page=1)  # two pages known: both masked for their spread
    log = write_log(words_of(learned.events), generation=5)
    small = HostMask(limit=1000)
    small.see(hs(1, 50), page=7)
    small.fold(read_log(log, whole=True))
    assert small.masked == hs(1, 50)  # a host as small here: taken
    for page in range(2, 40):
        small.see(hs(1), page=page)
    assert small.masked == hs(1)  # 40 pages known here: 50 is on too few of them
    large = HostMask(limit=1000)
    for page in range(40):
        large.see(hs(1, 50, 60, 1000 + page) if page == 0 else hs(1, 1000 + page), page=page)
    large.fold(read_log(log, whole=True))
    assert large.masked == hs(1)
    large.fold([tag(h(50)) | SPREAD_FLAG, tag(h(60))])  # without the flag: masked by a rule
    assert large.masked == hs(1, 60)


def test_folding_keeps_the_mask_within_its_bound_and_too_many_unwritten_events_compact():
    mask = HostMask(limit=10, shared=True)
    mask.see(hs(*range(5)), page=1)
    mask.see([h(n) for n in range(100, 120)], page=1)
    mask.fold([tag(h(n)) for n in range(100, 120)])
    assert len(mask.seen) == 10 and mask.masked == hs(*range(110, 120))
    mask.fold(range(1000, 1100))  # tags of segments never seen here: bounded too
    assert len(mask.pending) == 10
    mask.events.extend(range(PENDING_LIMIT))  # Redis did not answer for a long time
    mask.mask(h(10**6))
    assert mask.events == [] and mask.compact  # its whole set is written next time


def test_a_mask_is_kept_per_authority():
    assert host_of("https://Docs.Example.org:8443/a/b?c=1") == "docs.example.org:8443"
    assert host_of("http://example.org?q") == "example.org"


def test_the_spread_threshold_is_a_share_of_the_hosts_pages_between_two_and_its_cap():
    # independent computation: max(2, min(32, ceil(0.2 * pages)))
    for pages, needed in ((0, 2), (1, 2), (10, 2), (11, 3), (20, 4), (36, 8), (40, 8), (100, 20),
                          (156, 32), (160, 32), (5000, 32)):
        assert spread_threshold(pages) == needed, pages
    assert COUNTED_PAGES == 160 and BOILERPLATE_SHARE == 0.2 and BOILERPLATE_PAGES == 32


def test_a_value_on_a_few_pages_of_a_large_host_is_content_and_template_text_is_boilerplate():
    mask = HostMask(limit=10_000)
    for page in range(40):  # a shop: every page has the menu, each price is on three pages
        price = 1000 + page // 3
        mask.see({1, 2, price}, page=page)
    assert {1, 2} <= mask.masked and mask.threshold == 8
    assert not mask.masked & set(range(1000, 1014))


def test_what_was_masked_while_the_host_was_small_is_content_again_once_it_grows():
    mask = HostMask(limit=10_000)
    mask.see({1, 50}, page=0)  # the home page lists a book (50) ...
    mask.see({1, 50}, page=1)  # ... and so does its category page: two pages known
    assert mask.masked == {1, 50}
    for page in range(2, 40):
        mask.see({1}, page=page)
    assert mask.masked == {1}  # 50 is on 2 of 40 pages: content
    mask.mask(50)  # masked by another rule: stays masked whatever the spread
    mask.see({1}, page=40)
    assert 50 in mask.masked


def test_the_same_page_seen_again_never_adds_to_a_segments_spread():
    mask = HostMask(limit=100)
    for _ in range(10):
        mask.see({7}, page=3)
    assert not mask.masked
    assert page_bit(3) == page_bit(3) and page_bit(3).bit_count() == 1


def test_a_slot_is_volatile_when_many_texts_rotate_there_on_most_revisits_of_several_pages():
    deal = HostMask(limit=100)
    for revisit, text in enumerate((11, 12, 13, 14)):
        deal.revisited([9, 100])  # anchor 9 (the menu's last item), then the slot's text
        deal.slot_replaced(9, text, page=revisit % 2)
    assert deal.volatile_slots == {9}
    assert deal.in_volatile_slots([9, 77 | SHORT_BIT, 5]) == {77 | SHORT_BIT}
    assert deal.in_volatile_slots([9, 77, 5]) == set()  # a long segment is never a slot's



def test_the_segments_in_volatile_slots_and_the_revisits_counted_are_those_of_a_walk_over_the_copy():
    """``in_volatile_slots`` and ``revisited`` (their anchors found in C) give what a walk over
    every pair of neighbours and every segment gives: anchors at either end, anchors after
    anchors, a segment repeated, short and long segments after an anchor."""
    rng = random.Random(9)
    for _ in range(2000):
        anchors = set(rng.sample(range(8), rng.randrange(0, 4)))
        mask = HostMask(limit=100)
        mask.volatile_slots = set(anchors)
        mask.slots = {a: [0, 0, 0, 0] for a in anchors}
        order = [rng.randrange(8) | rng.choice((0, SHORT_BIT)) for _ in range(rng.randrange(0, 12))]
        expected = {h for anchor, h in pairwise(order) if anchor in anchors and h & SHORT_BIT}
        assert mask.in_volatile_slots(order) == expected, (anchors, order)
        mask.revisited(order)
        assert {a: slot[3] for a, slot in mask.slots.items()} == \
            {a: order.count(a) for a in anchors}, (anchors, order)


def test_one_template_edit_or_rare_edits_of_each_pages_line_make_no_slot():
    template = HostMask(limit=100)
    for page in range(10):  # a menu item renamed on every page: one text
        template.revisited([9])
        template.slot_replaced(9, 42, page=page)
    assert not template.volatile_slots
    dated = HostMask(limit=100)
    for page in range(6):  # each page's own "updated" line after a shared heading
        for _ in range(5):
            dated.revisited([9])
        dated.slot_replaced(9, 100 + page, page=page)  # changed once in five revisits
    assert not dated.volatile_slots


@settings(max_examples=300, deadline=None)
@given(h=st.integers(0, 2**64 - 1), spread=st.booleans())
def test_a_version_3_word_narrows_to_this_versions_word_of_the_same_segment(h, spread):
    """Version 3's tag, computed here from its definition (the top 23 bits of the top 32
    bits' product with the golden-ratio constant, never 0), narrows to ``tag``'s."""
    wide = (((h >> 32) * 0x9E3779B97F4A7C15) % 2**64) >> 41 or 1
    word = wide | (1 << 23 if spread else 0)
    assert narrow(word) == tag(h) | (SPREAD_FLAG if spread else 0)
    assert read_log(HEADER.pack(b"frhmask3", 5) + write_log([]), whole=True, wide=True) == []


def test_a_segment_of_the_copy_being_read_is_never_the_one_dropped_for_room():
    """A host's record is full and its oldest segment, boilerplate on two pages, is on the
    copy being read after a new one: the new segment takes the room of another, and the
    boilerplate keeps its pages and stays masked (dropped first, it came back counted on one
    page: content again until another page showed it)."""
    boilerplate, other, new = (h | SHORT_BIT for h in (11, 22, 33))
    pages = (1, 2, 3)
    assert len({page_bit(page) for page in pages}) == 3
    mask = HostMask(limit=2)
    mask.see([boilerplate], pages[0])
    mask.see([boilerplate], pages[1])
    assert boilerplate in mask.masked
    mask.see([other], pages[2])  # the record is full: the boilerplate is its oldest
    mask.see([new, boilerplate], pages[0])
    assert boilerplate in mask.masked
    assert list(mask.seen) == [boilerplate, new]  # the other segment made room

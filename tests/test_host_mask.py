"""A host's learned boilerplate (``crawl/host_mask.py``): the masks a process learns become
events for the shared log, the log's bytes read back as written, and what is folded in from
other processes is learned without being written again."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frontier_rate.crawl.host_mask import (
    HEADER,
    PENDING_LIMIT,
    HostMask,
    host_of,
    log_generation,
    read_log,
    write_log,
)

hashes = st.lists(st.integers(0, 2**64 - 1), max_size=200)


@settings(max_examples=200, deadline=None)
@given(values=hashes, more=hashes, generation=st.integers(0, 2**64 - 1))
def test_a_log_reads_back_as_it_was_written(values, more, generation):
    whole = write_log(values, generation) + write_log(more)  # a header, then two appends
    assert len(whole) == HEADER.size + 8 * (len(values) + len(more))
    assert log_generation(whole[:HEADER.size]) == generation
    assert read_log(whole, whole=True) == values + more
    tail = whole[HEADER.size + 8 * len(values):]  # what a reader past the first write gets
    assert read_log(tail, whole=False) == more
    assert log_generation(write_log(values)) is None  # an append has no header


def test_a_damaged_log_is_refused_by_name():
    with pytest.raises(ValueError, match="13 bytes is not a whole number of 8-byte hashes"):
        read_log(b"x" * 13, whole=False)


def test_only_what_this_process_masks_becomes_an_event_and_each_once():
    mask = HostMask(limit=100, shared=True)
    mask.see({1, 2, 3}, page=10)
    assert mask.events == [] and not mask.masked  # seen on one page: content so far
    mask.see({2, 3, 4}, page=11)
    assert sorted(mask.events) == [2, 3] and mask.masked == {2, 3}
    mask.see({2, 3}, page=12)
    mask.mask(3)
    mask.mask(7)
    assert sorted(mask.events) == [2, 3, 7]
    mask.fold([8, 9, 2])  # masked by other processes: learned, not written again
    assert mask.masked == {2, 3, 7, 8, 9} and sorted(mask.events) == [2, 3, 7]
    assert sorted(mask.state()) == [2, 3, 7, 8, 9]
    alone = HostMask(limit=100)
    alone.see({1, 2}, page=10)
    alone.see({1, 2}, page=11)
    assert alone.events is None and alone.masked == {1, 2}


def test_folding_keeps_the_mask_within_its_bound_and_too_many_unwritten_events_compact():
    mask = HostMask(limit=10, shared=True)
    mask.see(range(5), page=1)
    mask.fold(range(100, 120))
    assert len(mask.first_page) == 10 and mask.masked == set(range(110, 120))
    mask.events.extend(range(PENDING_LIMIT))  # Redis did not answer for a long time
    mask.mask(10**6)
    assert mask.events == [] and mask.compact  # its whole set is written next time


def test_a_mask_is_kept_per_authority():
    assert host_of("https://Docs.Example.org:8443/a/b?c=1") == "docs.example.org:8443"
    assert host_of("http://example.org?q") == "example.org"

"""Each page's detection memory shared in Redis (``detection/page_memory.py``,
``crawl/shared_pages.py``): its bytes, and what sharing it changes for a process that did
not fetch the page's last copy (another process of the frontier, or the crawl after a
restart). A real redis-server throughout; the worker runs as the real child process."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import struct
import subprocess
import sys
import time
import zlib
from array import array
from pathlib import Path

import pytest
import redis
from hypothesis import example, given, settings
from hypothesis import strategies as st

from frontier_rate.client.heap import release_freed_heap
from frontier_rate.crawl.shared_pages import (
    ENVIRONMENT,
    MIN_TTL,
    TIMEOUT,
    TRIM_EVERY,
    TTL_INTERVALS,
    SharedPages,
)
from frontier_rate.detection.change_detection import long_order
from frontier_rate.detection.detection_worker import READY, frame, read_line
from frontier_rate.detection.fingerprint import Fingerprinter
from frontier_rate.detection.host_mask import (
    COMPACT_AFTER,
    log_generation,
    log_hashes,
    read_log,
    tag,
    write_log,
)
from frontier_rate.detection.host_mask import HEADER as LOG_HEADER
from frontier_rate.detection.page_memory import (
    GONE,
    HEADER,
    SHORT,
    THIRTEEN_CELLS,
    VERSION,
    PageMemory,
    pack,
    sketch_of,
    unpack,
)
from frontier_rate.detection.page_memory import tag as gone_tag
from frontier_rate.detection.segment_hashes import copies_apart, segment_hashes
from frontier_rate.detection.segments import segments, stable_segments
from frontier_rate.store.keys import Keys, page_id, shard_of
from frontier_rate.store.namespace import drop

ROOT = Path(__file__).resolve().parents[1]
HTML = {"Content-Type": "text/html; charset=utf-8"}


def _pages(client: redis.Redis, namespace: str, ttl: float = 3600.0) -> SharedPages:
    return SharedPages(client, namespace, 4, ttl)


hashes = st.lists(st.integers(1 << 32, 2**64 - 1), max_size=300).map(lambda v: array("Q", v))


def _key(namespace: str, url: str, shards: int = 4) -> tuple[str, bytes]:
    """Where the page's memory is: its shard's hash and its field (``store.Keys``)."""
    host = url.split("://")[1].split("/")[0].split(":")[0].lower()
    return Keys(namespace, shards).page_memories(shard_of(host, shards)), page_id(url)


@settings(max_examples=200, deadline=None)
@given(fingerprint=st.text("0123456789abcdef", min_size=16, max_size=16), kept=hashes,
       gone=hashes, length=st.integers(0, 2**32 - 1), rejected=st.integers(0, 255),
       whole=st.binary(min_size=4, max_size=4),
       raw=st.one_of(st.just(-1), st.integers(0, 2**32 - 2)), order=st.integers(0, 2**16 - 1))
@example(fingerprint="0" * 16, kept=array("Q"), gone=array("Q"), length=2**32 - 1, rejected=0,
         whole=b"\0" * 4, raw=-1, order=0)  # the longest length: its code must not be clamped
def test_a_memory_reads_back_as_it_was_packed_in_bounded_bytes(fingerprint, kept, gone, length,
                                                                rejected, whole, raw, order):
    """Whatever the page's size, at most 75 bytes (an 80-byte allocation in Redis);
    compared with the same copy the sketch gives back the copy's segments, and the gone
    short ones by their tags; the visible length within 0.02%."""
    memory = PageMemory(fingerprint, kept, length, gone, whole)
    memory.rejected, memory.raw, memory.order = rejected, raw, order
    data = pack(memory)
    shorts = [g for g in gone if g & SHORT][-GONE:]
    assert len(data) == HEADER.size + 5 * 9 + 2 * len(shorts) <= 75
    back = unpack(data)
    assert (back.fingerprint, back.rejected, back.whole, back.raw, back.order) == \
        (fingerprint, rejected, whole, raw, order)
    assert abs(back.length - length) <= 0.0002 * length + 0.5
    assert back.restore(kept)
    assert back.hashes.tolist() == kept.tolist()
    assert len(back.gone) == len(shorts)


def _v3_memory(memory: PageMemory, raw64: int, order32: int, whole8: bytes) -> bytes:
    """A page's memory as version 3 wrote it (a 35-byte head, up to five gone tags), by
    hand from its layout: raw the bytes' CRC-32 with their length above it, the 8-byte
    whole-text hash and the 32-bit order."""
    gone = [gone_tag(g) if g >= 0x10000 else g for g in memory.gone][-5:]
    head = struct.pack("<BqIB8s8sIB", 3, raw64, memory.length, memory.rejected, whole8,
                       bytes.fromhex(memory.fingerprint), order32, len(gone))
    sketch = memory.sketch if memory.sketch is not None else \
        sketch_of(memory.hashes, THIRTEEN_CELLS)
    return head + sketch + struct.pack(f"<{len(gone)}H", *gone)


def test_a_version_3_memory_is_migrated_to_what_this_version_computes_of_the_same_copy():
    """An upgrade keeps the namespace's memories: a version 3 value reads as the memory
    version 4 would have written of the same copy (the bytes' CRC-32 without the length,
    the whole-text hash's first 4 bytes, the order's low 16 bits, the last ``GONE`` tags),
    and packs again in at most 108 bytes (version 4, its cells as they stand) until a copy is
    compared with it, then in version 6's 75."""
    rng = random.Random(593)
    copy = array("Q", [rng.getrandbits(64) | 1 << 40 for _ in range(120)])
    gone = array("Q", [rng.getrandbits(64) | SHORT for _ in range(5)])
    memory = PageMemory("0123456789abcdef", copy, 54_321, gone, b"")
    memory.rejected = 2
    body = b"<p>the copy's bytes</p>"
    crc = zlib.crc32(body)
    whole8 = hashlib.blake2b(b"thecopy'stext", digest_size=8).digest()
    order32 = 0xDEADBEEF
    back = unpack(_v3_memory(memory, crc ^ len(body) << 32, order32, whole8))
    assert (back.fingerprint, back.rejected, back.raw, back.whole, back.order) == \
        ("0123456789abcdef", 2, crc, whole8[:4], 0xBEEF)
    assert abs(back.length - 54_321) <= 11
    assert back.gone.tolist() == [gone_tag(g) for g in gone][-GONE:]
    again = pack(back)
    assert again[0] == 4 and len(again) <= 108
    assert back.restore(copy) and back.hashes.tolist() == copy.tolist()
    assert pack(back)[0] == VERSION and len(pack(back)) <= 75
    unknown = unpack(_v3_memory(memory, -1, order32, whole8))
    assert unknown.raw == -1


def test_a_namespace_of_version_3_memories_detects_on_after_the_upgrade(redis_client, namespace,
                                                                       caplog):
    """A page whose shared memory version 3 wrote: its bytes again are the same bytes, its
    content again (other bytes) is no change, nothing said of an earlier layout."""
    url = "http://terms.test/tos"
    pages = _pages(redis_client, namespace)
    writer = Fingerprinter("content")
    writer.share(pages)
    body = _document(False, "aa" * 8)
    kept = writer.detect(body, url, HTML).fingerprint
    key, field = _key(namespace, url)
    now = unpack(redis_client.hget(key, field))
    copy = copies_apart(segment_hashes(stable_segments(segments(body.decode()))))
    assert now.restore(copy) and now.hashes.tolist() == copy
    redis_client.hset(key, field, _v3_memory(now, now.raw ^ len(body) << 32,
                                             now.order | 0x5A5A << 16, now.whole + b"8765"))
    reader = Fingerprinter("content")
    reader.share(pages)
    with caplog.at_level(logging.INFO, logger="frontier_rate.crawl.shared_pages"):
        same_bytes = reader.detect(body, url, HTML)
        other_bytes = reader.detect(_document(True, "bb" * 8), url, HTML)
    assert same_bytes.fingerprint == kept and same_bytes.segments == -1
    assert other_bytes.fingerprint == kept and other_bytes.changed_segments == 0
    assert "earlier frontier-rate" not in caplog.text and pages.unreadable == 0
    assert redis_client.hget(key, field)[0] == VERSION


def test_the_sketch_gives_back_what_a_small_difference_removed_and_where():
    """A copy of 300 segments, then one with a paragraph edited, a short block gone and one
    added: the last copy is rebuilt whole, the removed ones where the added ones are; a
    rewrite of half the page
    does not peel and reads as a last copy of no segments (then anything is a change)."""
    rng = random.Random(59)
    last = [rng.getrandbits(64) | 1 << 30 for _ in range(300)]
    gone_short = last[40] | SHORT
    last[40] = gone_short
    memory = PageMemory("ab" * 8, array("Q", last), 1000, array("Q", [gone_short]), b"w" * 4)
    data = pack(memory)
    following = list(last)
    following[10] = rng.getrandbits(64)  # an edit
    del following[40]  # gone
    following.insert(100, rng.getrandbits(64))  # added
    back = unpack(data)
    assert back.restore(following, known=last)  # the host showed the removed ones before
    assert back.hashes.tolist()[:10] == last[:10] and sorted(back.hashes) == sorted(last)
    assert set(back.hashes[10:101:90]) == {last[10], last[40]}  # where the added ones are
    unknown = unpack(data)
    assert unknown.restore(following)  # never shown elsewhere: 32 bits, flags kept
    assert sorted(h >> 32 for h in unknown.hashes) == sorted(h >> 32 for h in last)
    assert any(h == last[40] >> 32 << 32 and h & SHORT for h in unknown.hashes)
    rewritten = following[:150] + [rng.getrandbits(64) for _ in range(150)]
    again = unpack(data)
    assert not again.restore(rewritten) and len(again.hashes) == 0
    came_back = unpack(data)
    came_back.restore(following + [gone_short])
    assert gone_short in came_back.gone  # its tag matched: the detector sees it came back


def test_the_sketch_holds_each_copy_of_a_repeated_segment():
    """Each further copy of a segment's text is a segment of its own
    (``segment_hashes.copies_apart``), so the sketch of a copy with repeats (a paragraph twice, a
    list entry three times) rebuilds whole against a next copy with one copy fewer, or one
    more: the difference is a segment, not nothing."""
    rng = random.Random(592)
    base = [rng.getrandbits(64) | 1 << 30 for _ in range(60)]
    base[20], base[30], base[31] = base[5], base[7], base[7]
    last = copies_apart(base)
    assert len(set(last)) == 60 and last[5] == base[5] and last[20] != base[5]
    assert last[20] >> 62 == base[5] >> 62  # the flags stay
    assert copies_apart(base[::-1]) != last[::-1] and sorted(copies_apart(base[::-1])) == sorted(last)
    data = pack(PageMemory("ab" * 8, array("Q", last), 1000, array("Q"), b"w" * 4))
    for following in (base[:30] + base[31:], base[:20] + base[21:], [*base, base[5]]):
        back = unpack(data)
        assert back.restore(copies_apart(following), known=last)
        assert sorted(back.hashes) == sorted(last)


def test_a_fresh_process_sees_a_repeated_paragraph_the_last_process_did_not_have(
        redis_client, namespace):
    """Process A fetches the page; process B (another crawler, or A restarted) gets a copy
    with one paragraph twice: a change, found through the shared memory; a copy with the
    same paragraphs in another order is none."""
    url = "http://terms.test/tos"
    paragraphs = ["<p>These terms apply to every user of the service.</p>",
                  "<p>Read them well before you sign up.</p>",
                  "<p>Governing law: the courts of Paris.</p>"]

    def document(parts: list[str], token: str) -> bytes:
        return (f'<html><head><title>Terms</title></head><body><div class="c{token}">'
                f'<h1>Terms of service</h1>{"".join(parts)}</div></body></html>').encode()

    first = Fingerprinter("content")
    first.share(_pages(redis_client, namespace))
    kept = first.detect(document(paragraphs, "1a2b3c4d5e6f7a8b"), url, HTML).fingerprint
    moved = Fingerprinter("content")
    moved.share(_pages(redis_client, namespace))
    assert moved.detect(document(paragraphs[::-1], "9f8e7d6c5b4a3f2e"), url,
                        HTML).fingerprint == kept
    repeated = Fingerprinter("content")
    repeated.share(_pages(redis_client, namespace))
    assert repeated.detect(document([*paragraphs, paragraphs[1]], "0011223344556677"), url,
                           HTML).fingerprint != kept


def test_a_damaged_or_foreign_memory_is_refused_by_name():
    memory = PageMemory("ab" * 8, array("Q", [1 << 40, 2 << 40]), 10, array("Q"), b"w" * 4)
    data = pack(memory)
    with pytest.raises(ValueError, match="shorter than its header"):
        unpack(data[:5])
    with pytest.raises(ValueError, match="expected"):
        unpack(data[:-1])
    with pytest.raises(ValueError, match="version 9"):
        unpack(b"\x09" + data[1:])
    with pytest.raises(ValueError, match="not 16 hex digits"):
        pack(PageMemory("xyz", array("Q"), 1, array("Q"), b"w" * 4))


def _document(boundary_moved: bool, token: str) -> bytes:
    """One legal page; ``boundary_moved``: the same words, one paragraph cut in two (the
    content text is the same, its segments are not)."""
    body = ("<p>These terms apply to every user of the service.</p><p>Read them well.</p>"
            if boundary_moved else
            "<p>These terms apply to every user of the service. Read them well.</p>")
    return (f'<html><head><title>Terms</title></head><body><div class="c{token}">'
            f'<h1>Terms of service</h1>{body}<p>Governing law: the courts of Paris.</p>'
            f'</div><footer><p>Footer of the site</p></footer></body></html>').encode()


def test_a_fresh_process_compares_with_the_copy_another_process_fetched(redis_client,
                                                                        namespace):
    """Process A fetches the page twice; process B (another crawler, or A restarted) gets the
    next copy: the same words with a paragraph cut in two, which compared with the last
    copy is no change. With the memory shared B says so (A's fingerprint again); with its
    own memory only, B has nothing to compare with and calls it a new fingerprint."""
    url = "http://terms.test/tos"
    first = Fingerprinter("content")
    first.share(_pages(redis_client, namespace))
    kept = {first.detect(_document(False, token), url, HTML).fingerprint
            for token in ("1a2b3c4d5e6f7a8b", "9f8e7d6c5b4a3f2e")}
    assert len(kept) == 1
    moved = _document(True, "0011223344556677")
    shared = Fingerprinter("content")
    shared.share(_pages(redis_client, namespace))
    assert shared.detect(moved, url, HTML).fingerprint in kept
    assert Fingerprinter("content").detect(moved, url, HTML).fingerprint not in kept


def test_a_fresh_process_sees_paragraphs_moved_since_the_copy_another_process_fetched(
        redis_client, namespace):
    """The sketch gives back the last copy's segments, not their order; the order of its
    long segments is kept beside it (``PageMemory.order``), so a process that did not fetch
    the last copy still tells paragraphs moved (a change) from the same page (none)."""
    url = "http://terms.test/tos"
    paragraphs = [f"<p>Paragraph {word} of the terms, long enough to be more than a menu "
                  f"item or a heading of the page.</p>" for word in ("one", "two", "three")]

    def document(order: list[int], token: str) -> bytes:
        body = "".join(paragraphs[i] for i in order)
        return f'<html><body><div class="c{token}">{body}</div></body></html>'.encode()

    first = Fingerprinter("content")
    first.share(_pages(redis_client, namespace))
    kept = first.detect(document([0, 1, 2], "1a2b"), url, HTML).fingerprint
    same, moved = Fingerprinter("content"), Fingerprinter("content")
    same.share(_pages(redis_client, namespace))
    assert same.detect(document([0, 1, 2], "3c4d"), url, HTML).fingerprint == kept
    moved.share(_pages(redis_client, namespace))
    assert moved.detect(document([2, 0, 1], "5e6f"), url, HTML).fingerprint != kept


def _site(rng: random.Random, fetches: int = 16) -> list[tuple[str, bytes]]:
    """Seeded copies of one page on each of four hosts: a story that changes now and
    then, tokens and relative times that change every time, a rotating widget."""
    copies = []
    story = dict.fromkeys("abcd", 0)
    widgets = ("Deal of the day: garden chairs", "Deal of the day: kitchen knives",
               "Deal of the day: winter boots")
    for fetch in range(fetches):
        for host in story:
            story[host] += rng.random() < 0.15
            copies.append((f"http://{host}.test/doc", (
                f'<html><body><nav><p>Home</p><p>Products</p><p>Contact {host}</p></nav>'
                f'<div class="x{rng.getrandbits(64):016x}"><h1>Doc of {host}</h1>'
                f'<p>Story {story[host]} of {host}, told at some length, enough to be '
                f'content.</p><p>A second paragraph that stays the same for ever.</p></div>'
                f'<aside><p>{rng.choice(widgets)}</p></aside><p>Updated {fetch} minutes ago'
                f'</p><footer><p>Footer of {host}</p></footer></body></html>').encode()))
    return copies


def _changes(copies: list[tuple[str, bytes]], processes: list[Fingerprinter]) -> int:
    """Revisits whose fingerprint differs from the page's last one (the frontier's change
    bit), each copy detected by a process drawn with a fixed seed."""
    draw, last, changed = random.Random(34), {}, 0
    for url, body in copies:
        found = processes[draw.randrange(len(processes))].detect(body, url, HTML).fingerprint
        changed += url in last and last[url] != found
        last[url] = found
    return changed


def test_processes_sharing_the_memory_call_unchanged_pages_unchanged_as_one_does(
        redis_client, namespace):
    """Three processes on one frontier, each revisit detected by one of them: with the
    pages' memory shared they find about the changes one process finds; each with its own,
    more than twice as many (the widget and the story compared with an older copy, or with
    none). Over five seeds of 64 copies (measured: one process 101 in all, three sharing
    116, three apart 213; with every segment's 8-byte hash stored, before the sketch,
    three sharing found 101: the sketch's guessed order of the last copy and its 32-bit
    keys of removed segments cost 15 here)."""
    alone = shared = separate = 0
    for seed in range(5):
        copies = _site(random.Random(seed))
        alone += _changes(copies, [Fingerprinter("content")])
        separate += _changes(copies, [Fingerprinter("content") for _ in range(3)])
        pages = _pages(redis_client, f"{namespace}-{seed}")
        sharing = [Fingerprinter("content") for _ in range(3)]
        for fingerprinter in sharing:
            fingerprinter.share(pages)
        shared += _changes(copies, sharing)
    assert shared <= 1.2 * alone, (alone, shared)
    assert separate >= 2 * alone, (alone, separate)


def _shop_page(path: str, menu: str) -> bytes:
    """A page of a shop whose menu (three short blocks) is on every page."""
    return (f'<html><head><title>{path}</title></head><body><nav><p>Home</p><p>{menu}</p>'
            f'<p>Contact us</p></nav><div><h1>Page {path}</h1><p>The story of page {path}, '
            f'long enough to be its content.</p></div></body></html>').encode()


class _PagesOnly(SharedPages):
    """The pages' memories shared, the hosts' masks not (the control)."""

    def load(self, url, host=None):  # type: ignore[no-untyped-def]
        return super().load(url)

    def save(self, url, memory, host=None):  # type: ignore[no-untyped-def]
        super().save(url, memory)

    def touch(self, url, host=None):  # type: ignore[no-untyped-def]
        super().touch(url)


@pytest.mark.parametrize("store", [SharedPages, _PagesOnly])
def test_a_fresh_process_masks_what_another_process_learned_of_the_host(redis_client,
                                                                        namespace, store):
    """Process A fetches two pages of a shop: the menu is on both, so A masks it. Process B
    (another crawler, or A restarted) fetches the first page again with one menu item
    renamed: with the host's masks shared the renamed item is menu (a new short block
    between masked ones) and the copy is unchanged; with only the page's memory shared, B
    knows no menu and calls it a change."""
    pages = store(redis_client, namespace, 4, 3600.0)
    first = Fingerprinter("content")
    first.share(pages)
    before = first.detect(_shop_page("a", "Spring sale"), "http://shop.test/a", HTML)
    first.detect(_shop_page("b", "Spring sale"), "http://shop.test/b", HTML)
    again = Fingerprinter("content")
    again.share(pages)
    after = again.detect(_shop_page("a", "Summer sale"), "http://shop.test/a", HTML)
    mask_key = Keys(namespace, 4).host_mask(shard_of("shop.test", 4), "shop.test")
    assert pages.mask_key("http://shop.test/b") == mask_key  # the host's, in its pages' shard
    if store is SharedPages:
        assert after.fingerprint == before.fingerprint
        logged = log_hashes(read_log(redis_client.get(mask_key), whole=True))
        # Home, Spring sale, Contact us (A), Summer sale (B, as menu): each once
        assert len(logged) == len(set(logged)) == 4
        assert MIN_TTL * 1000 - 10_000 < redis_client.pttl(mask_key) <= MIN_TTL * 1000
    else:
        assert after.fingerprint != before.fingerprint
        assert not redis_client.exists(mask_key)


def test_a_log_past_its_bound_is_written_afresh_and_read_again_by_every_process(
        redis_client, namespace):
    """A host's log longer than ``COMPACT_AFTER`` words and 1.5x the masks it holds (the same
    masks appended by several processes) is replaced, by the next process that writes, with
    that process's masks under a new generation, each once; a process that had read the old
    log reads the new one from its start and keeps every mask in it."""
    url = "http://shop.test/a"
    pages = _pages(redis_client, namespace)
    key = pages.mask_key(url)
    redis_client.set(key, write_log(range(1, 11), generation=7))
    reader = Fingerprinter("content")
    reader.share(pages)
    reader.detect(_shop_page("a", "Spring sale"), url, HTML)  # reads the 10 hashes
    for _ in range(3):  # other processes', each appending what it learned
        redis_client.append(key, write_log(range(11, COMPACT_AFTER + 20)))
    writer = Fingerprinter("content")
    writer.share(pages)
    writer.detect(_shop_page("b", "Spring sale"), "http://shop.test/b", HTML)
    log = redis_client.get(key)
    generation = log_generation(log[:LOG_HEADER.size])
    assert generation not in (None, 7)
    kept = log_hashes(read_log(log, whole=True))
    written = writer._detector._hosts["shop.test"]
    assert sorted(kept) == sorted({tag(h) for h in written.masked} | set(written.pending))
    assert set(range(1, COMPACT_AFTER + 20)) <= set(kept)
    assert len(kept) == len(set(kept)) < COMPACT_AFTER + 40  # each mask once
    reader.detect(_shop_page("a", "Summer sale"), url, HTML)
    mask = reader._detector._hosts["shop.test"]
    assert mask.generation == generation
    assert set(kept) <= {tag(h) for h in mask.masked} | set(mask.pending)


def test_a_damaged_mask_log_costs_its_masks_not_the_answer_and_is_written_again(
        redis_client, namespace, caplog):
    url = "http://shop.test/a"
    pages = _pages(redis_client, namespace)
    key = pages.mask_key(url)
    redis_client.set(key, b"x" * 13)
    fingerprinter = Fingerprinter("content")
    fingerprinter.share(pages)
    with caplog.at_level(logging.WARNING):
        found = fingerprinter.detect(_shop_page("a", "Spring sale"), url, HTML)
        fingerprinter.detect(_shop_page("b", "Spring sale"), "http://shop.test/b", HTML)
    assert found.fingerprint and pages.unreadable == 1
    assert "shared mask of the host of http://shop.test/a is unreadable" in caplog.text
    log = redis_client.get(key)
    assert log_generation(log[:LOG_HEADER.size]) is not None
    assert len(log_hashes(read_log(log, whole=True))) == 3


def test_the_memory_lives_in_its_pages_shard_expires_and_goes_with_the_namespace(
        redis_client, namespace):
    url = "http://Terms.Test:8080/tos?lang=en"
    pages = SharedPages(redis_client, namespace, 8, ttl=2 * MIN_TTL)
    fingerprinter = Fingerprinter("content")
    fingerprinter.share(pages)
    fingerprinter.detect(_document(False, "aa" * 8), url, HTML)
    key, field = _key(namespace, url, 8)
    assert 2 * MIN_TTL * 1000 - 10_000 < redis_client.pttl(key) <= 2 * MIN_TTL * 1000
    assert unpack(redis_client.hget(key, field)).fingerprint == \
        fingerprinter.detect(_document(False, "bb" * 8), url, HTML).fingerprint

    # the same bytes again: the stored copy stands, only its expiry moves (no write of it),
    # and its host's mask log's (none was written: one page masks nothing here)
    stored = redis_client.hget(key, field)
    redis_client.pexpire(key, 5000)
    before = _calls(redis_client)
    again = Fingerprinter("content")  # another process, which reads the copy from Redis
    again.share(pages)
    assert again.detect(_document(False, "bb" * 8), url, HTML).segments == -1
    after = _calls(redis_client)
    assert (after["hset"] - before["hset"], after["pexpire"] - before["pexpire"]) == (0, 2)
    assert redis_client.hget(key, field) == stored
    assert redis_client.pttl(key) > 2 * MIN_TTL * 1000 - 10_000
    assert drop(redis_client, namespace) >= 1
    assert redis_client.exists(key) == 0


def test_no_key_of_the_memory_is_built_in_the_crawl_kit():
    """Its keys come from ``store.Keys`` and its calls from ``store/detection_memory.py``."""
    for module in ("crawl/shared_pages", "detection/page_memory", "detection/host_mask",
                   "crawl/shared_detection_worker", "detection/change_detection",
                   "scrapy/detection_process"):
        text = (ROOT / "frontier_rate" / f"{module}.py").read_text()
        assert "fr:{" not in text and ".pipeline(" not in text, module


def _old_memory(fingerprint: str, hashes: list[int]) -> bytes:
    """A page's memory as the earlier frontier-rate wrote it (version 1: every 8-byte hash),
    written here by hand from its layout."""
    head = struct.pack("<BqqB8sBII", 1, -1, 100, 0, b"w" * 8, 16, len(hashes), 0)
    return head + fingerprint.encode() + struct.pack(f"<{len(hashes)}Q", *hashes)


def test_a_namespace_of_the_earlier_layout_is_relearned_said_once_and_still_detects(
        redis_client, namespace, caplog):
    """Memories and a host log written by the earlier layout (a string a page, 8-byte log
    words): the new code reads none of them, says so once at INFO, deletes the page's old
    string when it meets it, writes the host's log afresh, and detects as a fresh process
    would: a first copy, then an unchanged revisit called unchanged."""
    url = "http://terms.test/tos"
    shard = shard_of("terms.test", 4)
    keys = Keys(namespace, 4)
    old_page = keys.page_memory(shard, page_id(url))
    redis_client.set(old_page, _old_memory("cd" * 8, [1 << 40, 2 << 40]), px=10**8)
    old_log = keys.host_mask(shard, "terms.test")
    redis_client.set(old_log, b"frhmask1" + struct.pack("<3Q", 7, 0, 5 << 40), px=10**8)
    pages = _pages(redis_client, namespace)
    fingerprinter = Fingerprinter("content")
    fingerprinter.share(pages)
    with caplog.at_level(logging.INFO, logger="frontier_rate.crawl.shared_pages"):
        first = fingerprinter.detect(_document(False, "aa" * 8), url, HTML)
        again = fingerprinter.detect(_document(False, "bb" * 8), url, HTML)
    said = [r for r in caplog.records if "written by an earlier frontier-rate" in r.message]
    assert len(said) == 1 and said[0].levelno == logging.INFO
    assert first.fingerprint != "cd" * 8 and again.fingerprint == first.fingerprint
    assert pages.unreadable == 0
    assert not redis_client.exists(old_page)
    assert log_generation(redis_client.get(old_log)[:LOG_HEADER.size]) is not None
    fresh = Fingerprinter("content")  # another process reads what the new code wrote
    fresh.share(pages)
    assert fresh.detect(_document(True, "cc" * 8), url, HTML).fingerprint == first.fingerprint


def test_a_memory_of_the_lower_cased_layout_is_relearned_said_once(redis_client, namespace,
                                                                   caplog):
    """Version 2 memories (segments hashed lower-cased, no order) hold hashes the code no
    longer makes: read as none, said once at INFO, the page's next copy a first copy (no
    change said), not a change of every page at the upgrade."""
    url = "http://terms.test/tos"
    pages = _pages(redis_client, namespace)
    writer = Fingerprinter("content")
    writer.share(pages)
    kept = writer.detect(_document(False, "aa" * 8), url, HTML).fingerprint
    key, field = _key(namespace, url)
    data = redis_client.hget(key, field)
    assert data[0] == VERSION
    redis_client.hset(key, field, bytes([2]) + data[1:])
    reader = Fingerprinter("content")
    reader.share(pages)
    with caplog.at_level(logging.INFO, logger="frontier_rate.crawl.shared_pages"):
        first = reader.detect(_document(False, "bb" * 8), url, HTML)
        reader.detect(_document(False, "cc" * 8), url, HTML)
    said = [r for r in caplog.records if "written by an earlier frontier-rate" in r.message]
    assert len(said) == 1 and pages.unreadable == 0
    assert first.fingerprint == kept and first.changed_segments == 0


def _calls(client: redis.Redis) -> dict[str, int]:
    """Calls of HSET and PEXPIRE the server has answered (``INFO commandstats``)."""
    stats = client.info("commandstats")
    return {name: stats.get(f"cmdstat_{name}", {}).get("calls", 0)
            for name in ("hset", "pexpire")}


def test_an_unreadable_memory_or_a_redis_that_fails_costs_the_memory_not_the_answer(
        redis_client, namespace, caplog):
    url = "http://terms.test/tos"
    pages = _pages(redis_client, namespace)
    key, field = _key(namespace, url)
    redis_client.hset(key, field, b"\x07garbage")
    fingerprinter = Fingerprinter("content")
    fingerprinter.share(pages)
    with caplog.at_level(logging.WARNING):
        first = fingerprinter.detect(_document(False, "aa" * 8), url, HTML)
    assert first.fingerprint and pages.unreadable == 1
    assert "unreadable" in caplog.text and url in caplog.text
    assert unpack(redis_client.hget(key, field)).fingerprint == first.fingerprint

    secret_url = "redis://:s3cret-pw@127.0.0.1:1/0"
    gone = redis.Redis.from_url(secret_url, socket_connect_timeout=0.2)
    failing = SharedPages(gone, namespace, 4, 3600.0, secret_url)
    alone = Fingerprinter("content")
    alone.share(failing)
    with caplog.at_level(logging.WARNING):
        found = [alone.detect(_document(False, t * 8), url, HTML) for t in ("aa", "bb", "cc")]
    assert len({f.fingerprint for f in found}) == 1  # its own memory took over
    assert failing.failures == 1  # then no call until the breaker's next attempt
    assert alone.stats()["page_memory_failures"] == 1
    assert caplog.text.count("cannot be read or written") == 1
    assert "holding" not in caplog.text  # the crawler's client's words, not this process's
    assert "s3cret-pw" not in caplog.text


def test_a_paused_redis_costs_one_timeout_then_the_process_detects_alone(redis_url,
                                                                          redis_client,
                                                                          namespace, caplog):
    """Redis paused for 1.5 s (``CLIENT PAUSE``): the first read gives up after ``TIMEOUT``
    and the next answers use the process's own memory without trying Redis (``BACKOFF``),
    so no answer waits for the pause; the breaker's next attempt after it takes the memory
    again, and the two WARNINGs say what this process did, in its own words."""
    url = "http://terms.test/tos"
    pages = SharedPages.from_spec(json.dumps({"url": redis_url, "namespace": namespace,
                                              "shards": 4, "ttl": 3600.0}))
    fingerprinter = Fingerprinter("content")
    fingerprinter.share(pages)
    caplog.set_level(logging.WARNING, logger="frontier_rate")
    kept = fingerprinter.detect(_document(False, "aa" * 8), url, HTML).fingerprint
    redis_client.execute_command("CLIENT", "PAUSE", 1500, "ALL")
    try:
        started = time.monotonic()
        found = [fingerprinter.detect(_document(moved, t * 8), url, HTML).fingerprint
                 for moved, t in ((False, "bb"), (True, "cc"), (True, "dd"))]
        waited = time.monotonic() - started
    finally:
        redis_client.execute_command("CLIENT", "UNPAUSE")
    assert found == [kept] * 3
    assert pages.failures == 1
    assert TIMEOUT <= waited < 1.0, waited  # one timeout, not the pause
    time.sleep(max(0.0, pages.breaker.retry_at - time.monotonic()) + 0.05)
    fingerprinter.detect(_document(False, "ee" * 8), url, HTML)
    assert pages.breaker.outage_since is None and pages.failures == 1
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("shared detection memory cannot be read or written" in m for m in said), said
    assert any("back after" in m and "shared detection memory is read and written again" in m
               for m in said), said
    assert not any("results" in m for m in said), said  # the crawler's client's words


def test_the_shared_worker_process_reads_and_writes_the_memory(redis_url, redis_client,
                                                               namespace):
    """Two runs of the real detection process (``shared_detection_worker``), one after the
    other as after a restart: the second compares its first answer with the first run's
    last copy; the Redis URL reaches it through its environment, not its argv."""
    url = "http://terms.test/tos"
    config = json.dumps({"mode": "content", "strip_patterns": [], "max_body": 1 << 20})
    spec = json.dumps({"url": redis_url, "namespace": namespace, "shards": 4,
                       "ttl": TTL_INTERVALS * 86400.0})

    def run(*copies: bytes) -> list[str]:
        data = b"".join(frame(body, url, "text/html", False, None) for body in copies)
        done = subprocess.run(
            [sys.executable, "-m", "frontier_rate.crawl.shared_detection_worker", config],
            input=data, capture_output=True, timeout=120, check=True, cwd=ROOT,
            env={**os.environ, ENVIRONMENT: spec})
        ready, *lines = done.stdout.splitlines(keepends=True)
        assert ready == READY
        return [read_line(line)[0].fingerprint for line in lines]

    before = run(_document(False, "aa" * 8), _document(False, "bb" * 8))
    after = run(_document(True, "cc" * 8))
    assert after == before[-1:]
    assert redis_client.hexists(*_key(namespace, url))


def test_a_host_log_of_4_byte_words_is_relearned_said_once_and_written_coded(
        redis_client, namespace, caplog):
    """A host's log as the previous layout wrote it (``frhmask2``: a header, then one uncoded
    4-byte word a mask, 31-bit tags), written here by hand from that layout: it is not read
    as masks (its words would read as garbage chunks), said once at INFO, and replaced at the
    process's next write by a coded log of the masks it learned, which another process reads
    back."""
    url = "http://shop.test/a"
    pages = _pages(redis_client, namespace)
    key = pages.mask_key(url)
    redis_client.set(key, b"frhmask2" + struct.pack("<Q3I", 7, 5, 6, 7 | 1 << 31), px=10**8)
    fingerprinter = Fingerprinter("content")
    fingerprinter.share(pages)
    with caplog.at_level(logging.INFO, logger="frontier_rate.crawl.shared_pages"):
        fingerprinter.detect(_shop_page("a", "Spring sale"), url, HTML)
        fingerprinter.detect(_shop_page("b", "Spring sale"), "http://shop.test/b", HTML)
    said = [r for r in caplog.records if "written by an earlier frontier-rate" in r.message]
    assert len(said) == 1 and pages.unreadable == 0
    log = redis_client.get(key)
    assert log[:8] == b"frhmask4" and log_generation(log[:LOG_HEADER.size]) is not None
    logged = log_hashes(read_log(log, whole=True))
    learned = fingerprinter._detector._hosts["shop.test"]
    assert sorted(logged) == sorted(tag(h) for h in learned.masked) and not {5, 6, 7} & set(logged)
    other = Fingerprinter("content")
    other.share(pages)
    other.detect(_shop_page("a", "Summer sale"), url, HTML)
    assert set(logged) <= {tag(h) for h in other._detector._hosts["shop.test"].masked} \
        | set(other._detector._hosts["shop.test"].pending)


def _dated_document(title: str, minutes: int) -> bytes:
    """A page whose entries hold a volatile fragment (a relative time, a DOI), and a
    copyright line: the segments version 4 hashed otherwise (lower-cased; the year kept)."""
    return (f"<html><body><h1>Theses</h1><p>Shah, Piyush (1977) {title}. Dissertation, "
            f"doi:10.7907/a1b2c3d4e5. Added {minutes} minutes ago</p>"
            "<p>Wojcik, Gregory (1977) Self-Similar Elastodynamic Solutions. Added 3 hours "
            "ago</p><p>Every thesis of the institute, listed by year.</p>"
            "<footer><p>© 2025 Caltech Library</p></footer></body></html>"
            ).encode()


def test_a_version_4_memory_compares_its_lower_cased_segments_and_the_upgrade_is_no_change(
        redis_client, namespace, caplog):
    """Version 4 hashed a segment with a volatile fragment lower-cased; version 5 keeps its
    letters' case. A page whose memory version 4 wrote, fetched again after the upgrade with
    only its relative times moved, is no change (the memory restored against the copy hashed
    as version 4 did); then a re-cased title in such a segment is a change. Without the
    restore the case-kept segments read as two added and two removed: a change of every such
    page at the upgrade."""
    url = "http://library.test/theses"
    pages = _pages(redis_client, namespace)
    writer = Fingerprinter("content")
    writer.share(pages)
    kept = writer.detect(_dated_document("Estimation of properties", 5), url, HTML)
    key, field = _key(namespace, url)
    now = unpack(redis_client.hget(key, field))
    assert kept.fingerprint is not None and now.hashes is not None
    # what version 4 wrote of the same copy: its segments as version 4's code made them
    # (written out here, from a run of that code), in their order
    written = ["Theses",
               "shah, piyush (1977) estimation of properties. dissertation, doi:<t> added <v>",
               "wojcik, gregory (1977) self-similar elastodynamic solutions. added <v>",
               "Every thesis of the institute, listed by year.", "© 2025 Caltech Library"]
    old = segments(_dated_document("Estimation of properties", 5).decode())
    assert stable_segments(old, earlier=True) == written
    earlier = copies_apart(segment_hashes(written))
    assert earlier != copies_apart(segment_hashes(stable_segments(old)))
    # and the fingerprint it gave (the engine keeps it): of those hashes, none ignored
    old_fingerprint = hashlib.blake2b(array("Q", earlier).tobytes(), digest_size=8).hexdigest()
    assert old_fingerprint != kept.fingerprint
    version4 = PageMemory(old_fingerprint, array("Q"), now.length, array("Q"), now.whole)
    version4.raw, version4.order = -1, long_order(earlier)
    version4.sketch, version4.layout = sketch_of(earlier, THIRTEEN_CELLS), THIRTEEN_CELLS
    version4.earlier = True
    assert pack(version4)[0] == 4
    redis_client.hset(key, field, pack(version4))
    reader = Fingerprinter("content")
    reader.share(pages)
    with caplog.at_level(logging.INFO, logger="frontier_rate.crawl.shared_pages"):
        upgraded = reader.detect(_dated_document("Estimation of properties", 9), url, HTML)
    assert upgraded.fingerprint == old_fingerprint and upgraded.changed_segments == 0
    assert "earlier frontier-rate" not in caplog.text and pages.unreadable == 0
    assert redis_client.hget(key, field)[0] == VERSION
    recased = Fingerprinter("content")
    recased.share(pages)
    edit = recased.detect(_dated_document("Estimation of Properties", 12), url, HTML)
    assert edit.fingerprint != old_fingerprint and edit.changed_segments == 2


VERSION_5 = bytes.fromhex(
    "05dd06cb00a538008c1ba53834f16287a9b477a6000000000000000000000000000001751063894203b5"
    "0dabb8b4016d8d7694fb016d8d7694fb01eca5ee9ce802c9175f26c001e5af798bde00000000000002c9"
    "175f26c0016d8d7694fb02090a971736")
"""What version 5 (thirteen cells of 6 bytes) wrote of ``_document(False, "aa" * 8)`` at
``http://terms.test/tos``: a run of that code (`4914b51`), written out here."""


def test_a_version_5_memory_is_read_in_its_thirteen_cells_and_the_upgrade_is_no_change(
        redis_client, namespace, caplog):
    """A namespace version 5 wrote keeps working: its page's next copy (the same words, a
    paragraph cut in two) is no change, the same fingerprint; the memory is then written as
    version 6 (at most 75 bytes), and an edit after it is a change. Read with version 6's
    nine cells, the value would be refused (a WARNING, a new fingerprint)."""
    url = "http://terms.test/tos"
    key, field = _key(namespace, url)
    redis_client.hset(key, field, VERSION_5)
    pages = _pages(redis_client, namespace)
    reader = Fingerprinter("content")
    reader.share(pages)
    with caplog.at_level(logging.INFO, logger="frontier_rate.crawl.shared_pages"):
        same = reader.detect(_document(True, "bb" * 8), url, HTML)
    assert same.fingerprint == "34f16287a9b477a6" and same.changed_segments == 0
    assert pages.unreadable == 0 and "earlier frontier-rate" not in caplog.text
    written = redis_client.hget(key, field)
    assert written[0] == VERSION == 6 and len(written) <= 75
    edited = Fingerprinter("content")
    edited.share(pages)
    body = _document(True, "cc" * 8).replace(b"courts of Paris", b"courts of Lyon")
    assert edited.detect(body, url, HTML).fingerprint != "34f16287a9b477a6"


VERSION_3_LOG = bytes.fromhex("6672686d61736b33c6d6bc4348220c05000315f82dfdfa182f632eef00")
"""The log version 3 (23-bit tags) wrote of ``shop.test`` after one process detected
``_shop_page`` a, b and c with the menu "Spring sale": a run of that code (`4914b51`),
written out here. It masked the three menu segments, whose hashes are ``VERSION_3_MASKED``."""
VERSION_3_MASKED = {0x91E4A3EE03B0018A, 0x92F5D16D14ED03D5, 0xA6D5E7D5197E0439}


def test_a_host_log_of_23_bit_tags_is_read_as_it_was_and_written_again_narrow(
        redis_client, namespace, caplog):
    """A namespace whose host logs version 3 wrote keeps its masks across the upgrade: a
    fresh process masks the host's menu on the first page it fetches (read as this version's 21-bit words,
    the log would be refused as damaged and nothing masked), says nothing of an earlier
    layout, and writes the log again in this version's words, which another process reads
    back."""
    url = "http://shop.test/a"
    pages = _pages(redis_client, namespace)
    key = pages.mask_key(url)
    redis_client.set(key, VERSION_3_LOG, px=10**8)
    reader = Fingerprinter("content")
    reader.share(pages)
    with caplog.at_level(logging.INFO, logger="frontier_rate.crawl.shared_pages"):
        reader.detect(_shop_page("a", "Spring sale"), url, HTML)
    host = reader._detector._hosts["shop.test"]
    assert host.masked == VERSION_3_MASKED
    assert pages.unreadable == 0 and "earlier frontier-rate" not in caplog.text
    log = redis_client.get(key)
    assert log[:8] == b"frhmask4"
    assert sorted(log_hashes(read_log(log, whole=True))) == sorted(tag(h) for h in VERSION_3_MASKED)
    other = Fingerprinter("content")
    other.share(pages)
    other.detect(_shop_page("b", "Spring sale"), "http://shop.test/b", HTML)
    assert other._detector._hosts["shop.test"].masked == VERSION_3_MASKED


def test_the_heap_is_given_back_once_a_trim_period_after_calls_that_succeed(redis_client,
                                                                              namespace):
    """A cluster client re-reads the slot map through a failover without a failed call, so
    no outage's end marks when to give the freed tables back: the process does it after
    the first call that succeeds ``TRIM_EVERY`` seconds after the last, never per call, and
    its detection counters say how often (``page_memory_heap_trims``)."""
    now = [1000.0]
    pages = _pages(redis_client, namespace)
    pages.clock = lambda: now[0]
    pages._trim_at = now[0] + TRIM_EVERY
    fingerprinter = Fingerprinter("content")
    fingerprinter.share(pages)
    url = "http://terms.test/tos"
    for step in range(5):  # calls within the period: none
        fingerprinter.detect(_document(False, f"{step:02d}" * 8), url, HTML)
        now[0] += TRIM_EVERY / 10
    assert pages.trims == 0
    now[0] += TRIM_EVERY
    fingerprinter.detect(_document(False, "ff" * 8), url, HTML)
    fingerprinter.detect(_document(False, "fe" * 8), url, HTML)
    expected = int(release_freed_heap())  # 0 where the C library has no malloc_trim
    assert pages.trims == expected
    assert fingerprinter.stats()["page_memory_heap_trims"] == expected

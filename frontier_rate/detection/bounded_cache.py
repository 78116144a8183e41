"""The bounded caches of the detection (``segments``' texts of pieces and chunks,
``ContentDetector``'s stable hashes): a value is kept the second time its key is worked out,
and a cache starts afresh when full, so what a detection process holds is bounded however
long it runs."""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable
from itertools import compress, repeat
from operator import is_
from typing import Any


def once_table(slots: int) -> array:
    """An empty table of the keys seen once (``seen_again``): ``slots`` 8-byte slots."""
    return array("q", bytes(8 * slots))


def cached(cache: dict[int, Any], limit: int, keys: list[int],
           work: Callable[[list[int]], list[Any]], once: array,
           on_clear: Callable[[], None] | None = None) -> list[Any]:
    """The value of each of ``keys`` in ``cache``; ``work(missing)`` gives those of the
    positions ``missing`` (in their order). A value is cached the second time its key is
    worked out (``seen_again``): a piece that never comes again (a counter, a request id, a time
    in the markup) is never kept. Before, such pieces filled the caches a few hundred bytes
    a fetch: the detection process's steady growth in the Cluster hour of 2026-12-06 (1.5-2
    MB an hour, ~4 % of it, without any fault). The cache starts afresh, this call's known
    keys included, when it would hold more than ``limit`` (``on_clear`` then empties what
    the caller keeps beside it). Lookups in C (``map``), Python only for the keys not seen
    before."""
    known = list(map(cache.get, keys))
    if None in known:
        missing = list(compress(range(len(known)), map(is_, known, repeat(None))))
        if len(cache) + len(missing) > limit:
            cache.clear()
            if on_clear is not None:
                on_clear()
            missing = list(range(len(keys)))
        fresh = dict(zip(map(keys.__getitem__, missing), work(missing), strict=True))
        cache.update({key: fresh[key] for key in seen_again(once, fresh)})
        known = list(map(fresh.get, keys, known))  # not read back: another thread may clear
    return known


def seen_again(once: array, keys: Iterable[int]) -> list[int]:
    """Those of ``keys`` worked out once before: ``once`` is a table of the last key seen
    at each slot (a key's slot: its value modulo the table's size), fixed in size, so
    what it remembers costs no memory as pieces come and go; a key that another has
    replaced since waits for its next time."""
    size, again = len(once), []
    for key in keys:
        slot = key % size
        if once[slot] == key:
            again.append(key)
        else:
            once[slot] = key
    return again

"""Give the C heap's freed pages back to the system after a Redis outage.

Through a Redis Cluster failover redis-py reads the cluster's slot map again (a 16,384-entry
table per reading, several readings a failover); the old tables are freed, but glibc keeps
the freed pages inside its heap, so a crawler's RSS stepped up 3-6 MB at its first failover
and never came down while Python's own heap stayed flat (issue 63's soak on a Cluster;
``benchmarks/failover_memory.py``). ``malloc_trim(0)`` hands those pages back; it takes a
few milliseconds, so it runs once an outage has ended, never per call. On Linux without
glibc (musl), and on other systems, it does nothing.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none (looked up at the
    first call, not at import)."""
    if not sys.platform.startswith("linux"):
        return None
    try:  # glibc's soname on every Linux architecture; musl has no such file
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def release_freed_heap() -> bool:
    """Return the C heap's free pages to the system; whether the C library could."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True

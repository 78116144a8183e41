"""Run, on the test's thread, what a background FrontierClient posts to its adapter's thread."""

from __future__ import annotations

import queue
import time
from collections.abc import Callable


def pump(posted: queue.Queue, until: Callable[[], bool], what: str, timeout: float = 20) -> None:
    """Run what the client posts to this thread until ``until()`` holds; fail after ``timeout`` s
    naming ``what`` was awaited."""
    deadline = time.monotonic() + timeout
    while not until():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        try:
            posted.get(timeout=0.02)()
        except queue.Empty:
            pass

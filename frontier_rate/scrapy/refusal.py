"""A crawl the Scrapy scheduler refuses for its settings: ``SettingError`` (the message names
the setting and its value), the ``Refusing`` stand-in scheduler that says it last and fails
the crawl, and the ``open`` wrapper that turns a refusal at open into that stand-in."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy import signals as scrapy_signals

from frontier_rate.crawl import scrapy_compat as compat

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.spiders import Spider

logger = logging.getLogger("frontier_rate.scrapy")


class SettingError(ValueError):
    """A ``FRONTIER_RATE_*`` (or Scrapy) setting the scheduler cannot use; the message names
    the setting and its value."""


SettingError.__module__ = "frontier_rate.scrapy"  # where users import it from; printed so


REFUSED_REASON = "frontier_rate_setting_error"
"""The close reason of a crawl the scheduler refused for its settings."""


class Refusing:
    """The scheduler of a crawl whose settings it cannot use: what ``Scheduler.from_crawler``
    returns for a bad setting, and what a ``Scheduler`` turns into when the frontier refuses
    its settings (``stand_in``). It takes no request; once the engine runs it closes
    the spider, and once the engine has stopped it logs the error, one line naming the
    setting, last, and fails the crawl (exit code 1). Raising the error from ``open`` made
    Scrapy print it inside two unrelated tracebacks (issue 60). Building it must not fail,
    or Scrapy's own clean-up masks the error."""

    def __init__(self, crawler: Crawler, error: SettingError | str,
                 reason: str = REFUSED_REASON) -> None:
        self.crawler, self.error, self.reason = crawler, error, reason
        self._closing = False

    @classmethod
    def stand_in(cls, scheduler: Any, error: SettingError | str,
                 reason: str = REFUSED_REASON) -> Refusing:
        """A ``Refusing`` whose methods ``scheduler`` (which the engine holds) answers with
        from now on; the spider closes with ``reason``."""
        refusing = cls(scheduler.crawler, error, reason)
        for name in ("close", "has_pending_requests", "enqueue_request", "next_request"):
            setattr(scheduler, name, getattr(refusing, name))
        return refusing

    def open(self, spider: Spider) -> None:
        # weak=False: the engine drops its scheduler when the spider closes
        self.crawler.signals.connect(self._engine_stopped, signal=scrapy_signals.engine_stopped,
                                     weak=False)

    def _engine_stopped(self) -> None:
        logger.error("frontier-rate: %s", self.error)
        compat.fail_crawl(self.crawler)

    def close(self, reason: str) -> None:
        pass

    def has_pending_requests(self) -> bool:
        return False

    def enqueue_request(self, request: Request) -> bool:
        return False

    def next_request(self) -> None:
        """The engine asks once it runs: then the spider is closed (earlier, the engine's
        stop would not run, nor the error be said)."""
        if not self._closing:
            self._closing = True
            compat.call_later(0.0, compat.close_spider, self.crawler, self.reason)
        return None

    def __len__(self) -> int:
        return 0


def refuses_stored_settings(open_: Callable[[Any, Spider], None]) -> Callable[[Any, Spider], None]:
    """``Scheduler.open`` that, when the frontier refuses the crawl's settings (a
    ``SettingError``: an earlier run stored other shared settings), turns the scheduler into
    a ``Refusing`` stand-in instead of raising into Scrapy's engine (issue 60)."""

    @functools.wraps(open_)
    def open(scheduler: Any, spider: Spider) -> None:
        try:
            open_(scheduler, spider)
        except SettingError as exc:
            Refusing.stand_in(scheduler, exc).open(spider)

    return open

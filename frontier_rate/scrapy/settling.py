"""Which answers the spider is done with. An answer of a page (a fetch the frontier
observed) is *settled* once its callback's output is exhausted and every item the callback
yielded has left the item pipelines (Scrapy's ``item_scraped``, ``item_dropped`` or
``item_error`` signal names the response the item came from). A crawl stopped by force
(Ctrl-C twice) has the pages of the unsettled answers fetched again at once, without
validators (``Frontier.unsettle_many``): their items may never have reached the database or
the feed, and a conditional revisit would get a 304, which never reaches the callback
(issue 60). The scheduler observes every 2xx with ``settle_later``, and each settled answer
is sent to Redis (``Frontier.settle_many``), so that a crawl killed outright (SIGKILL: no
exit hook runs) loses nothing either: the pages it never settled are fetched without
validators at their next revisit."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scrapy import Item, Request, signals

from frontier_rate.scrapy.requests import TOKEN_KEY

if TYPE_CHECKING:
    from scrapy.signalmanager import SignalManager

    from frontier_rate.engine.records import Lease

ITEM_SIGNALS = (signals.item_scraped, signals.item_dropped, signals.item_error)
"""One of them fires for every item that leaves the item pipelines."""
SINGLE_VALUES = (dict, Item, str, bytes)
"""Outputs Scrapy takes as one item although they are iterable (``arg_to_iter``)."""


@dataclass
class _Answer:
    """One answer on its way through the spider: its lease, the items its callback yielded
    so far and those that left the pipelines, and whether the callback is done."""

    lease: Lease
    yielded: int = 0
    left: int = 0
    exhausted: bool = False


class Settling:
    """The answers not settled yet, by flight token (``requests.TOKEN_KEY``); at most
    ``limit`` (the oldest is forgotten: a middleware that swallows items leaves its
    answers here)."""

    def __init__(self, signal_manager: SignalManager, limit: int,
                 on_settled: Callable[[Lease], object]) -> None:
        self.limit = limit
        self._on_settled = on_settled  # the lease's copy is processed: tell Redis
        self._answers: dict[str, _Answer] = {}
        for signal in ITEM_SIGNALS:
            signal_manager.connect(self._item_left, signal=signal)

    def answered(self, flight: str, lease: Lease, status: int) -> None:
        """An answer of ``lease`` was observed; it goes to the spider next (a 304 brings no
        new copy: nothing to settle)."""
        if status == 304:
            return
        if len(self._answers) >= self.limit:
            self._answers.pop(next(iter(self._answers)))
        self._answers[flight] = _Answer(lease)

    def settled(self, flight: str | None) -> None:
        """The spider is done with this answer (its items left the pipelines, or the
        request failed: nothing goes to them); Redis is told (``on_settled``)."""
        answer = self._answers.pop(flight, None) if flight is not None else None
        if answer is not None:
            self._on_settled(answer.lease)

    def unsettled(self) -> list[Lease]:
        """The leases of the answers whose output may not have left the pipelines."""
        return [answer.lease for answer in self._answers.values()]

    def track(self, flight: str | None, output: Any) -> Any:
        """The callback's ``output``, counted as Scrapy takes it (the same kind of value:
        a sync iterable stays sync)."""
        answer = self._answers.get(flight) if flight is not None else None
        if answer is None:
            return output
        if output is None or isinstance(output, Request):
            self._done(flight, answer)
            return output
        if inspect.isasyncgen(output):
            return self._async(flight, answer, output)
        if inspect.iscoroutine(output):  # an ``async def`` callback: track what it returns
            return self._awaited(flight, output)
        if isinstance(output, SINGLE_VALUES) or not isinstance(output, Iterable):
            answer.yielded += 1  # one item
            self._done(flight, answer)
            return output
        return self._sync(flight, answer, output)

    def _sync(self, flight: str, answer: _Answer, output: Iterable[Any]) -> Iterator[Any]:
        try:
            for value in output:
                if value is not None and not isinstance(value, Request):
                    answer.yielded += 1
                yield value
        finally:
            self._done(flight, answer)

    async def _async(self, flight: str, answer: _Answer, output: Any) -> AsyncIterator[Any]:
        try:
            async for value in output:
                if value is not None and not isinstance(value, Request):
                    answer.yielded += 1
                yield value
        finally:
            self._done(flight, answer)

    async def _awaited(self, flight: str, output: Any) -> Any:
        return self.track(flight, await output)

    def _done(self, flight: str, answer: _Answer) -> None:
        answer.exhausted = True
        self._check(flight, answer)

    def _check(self, flight: str, answer: _Answer) -> None:
        if answer.exhausted and answer.left >= answer.yielded:
            self.settled(flight)

    def _item_left(self, item: Any = None, response: Any = None, **kwargs: Any) -> None:
        """``item_scraped`` / ``item_dropped`` / ``item_error``: one item of ``response``'s
        callback left the pipelines."""
        try:
            flight = response.meta.get(TOKEN_KEY)  # a Failure or None has no meta
        except AttributeError:
            return
        answer = self._answers.get(flight) if flight is not None else None
        if answer is not None:
            answer.left += 1
            self._check(flight, answer)

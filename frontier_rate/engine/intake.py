"""What a crawler tells the frontier besides fetch results: new pages (lua/add.lua) and
host delays (lua/host_delay.lua).

A new page is due at once, starting from its host's pooled prior (lua/lib.lua); a known
page keeps its schedule (its weight and meta are updated). A page whose stored state is
corrupt is quarantined, and adding its URL again gives it a fresh state.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from frontier_rate.engine.session import Session
from frontier_rate.engine.shards import ShardCalls, log_quarantined
from frontier_rate.engine.validation import host_name, new_page, real
from frontier_rate.store import wire
from frontier_rate.store.keys import page_id

PRIORITY_STEP = 1e-3
"""Seconds a new page's first due time moves earlier per unit of priority (``add_many``):
among pages added at the same time the higher priority is due first (a negative priority
waits at most MAX_PRIORITY * PRIORITY_STEP)."""
ADD_CALL_PAGES = 500
"""Pages per lua/add.lua call."""


class Intake:
    """Adds pages (``add_many``) and sets host delays (``set_host_delay``)."""

    def __init__(self, session: Session, calls: ShardCalls) -> None:
        self.session = session
        self.calls = calls

    def add_many(self, pages: Iterable, now: float) -> int:
        """``Frontier.add_many``: validate every page first, then write in pipelined
        per-shard calls; how many pages were new."""
        groups = self._arguments(pages, now)
        if not groups:
            return 0
        est0, aux0 = wire.initial_state(self.session.options.estimator,
                                        self.session.starting_rate)
        step = ADD_CALL_PAGES * wire.ADD_FIELDS
        calls = sum(-(-len(args) // step) for args in groups.values())

        def build(pipe: Any) -> None:
            for shard, args in groups.items():
                for i in range(0, len(args), step):
                    self.calls.call(pipe, "add", shard, now,
                                     wire.add_args(est0, aux0, args[i:i + step]))

        added = 0
        with self.session.errors("add_many"):
            for count, quarantined in self.calls.run_writes(build, dict.fromkeys(groups, now),
                                                             calls):
                added += int(count)
                log_quarantined(quarantined, "add gave it a fresh state")
        return added

    def _arguments(self, pages: Iterable, now: float) -> dict[int, list]:
        """lua/add.lua's arguments per shard, every page checked before any is sent; the
        priority moves a page's first due time (``PRIORITY_STEP``)."""
        checked = []
        for item in pages:
            host, url, weight, meta, priority, source = new_page(item)
            checked.append((self.calls.of(host), page_id(url), host, url, weight, meta,
                            priority, source))
        groups: dict[int, list] = defaultdict(list)
        for shard, pid, host, url, weight, meta, priority, source in checked:
            groups[shard] += wire.add_page(pid, host, url, weight, meta,
                                           now - priority * PRIORITY_STEP, source)
        return groups

    def set_host_delay(self, host: str, seconds: float | None) -> None:
        """``Frontier.set_host_delay``: the host's own delay (None: the namespace's)."""
        host = host_name(host)
        delay = None if seconds is None else real("seconds", seconds, minimum=0.0)
        with self.session.errors("set_host_delay"):
            now = self.session.now(None)
            self.calls.run_one("host_delay", self.calls.of(host), now,
                                wire.host_delay_args(host, delay), lower=now)

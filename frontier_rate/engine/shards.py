"""The namespace's shards as one process calls them: which shard a host is on, a shard
script call (its KEYS and its header), the due summary writers lower, the shared token
bucket, and the shards' bucket layouts.

Every state change is one Lua script on one shard (lua/*.lua, key schema in
``frontier_rate.store.scripts``, arguments in ``frontier_rate.store.wire``), so concurrent crawlers
cannot corrupt each other.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from frontier_rate.engine.session import Session
from frontier_rate.store import wire
from frontier_rate.store.keys import Layout, shard_of

logger = logging.getLogger(__name__)

BURST_SECONDS = 1.0
"""The token bucket holds budget * BURST_SECONDS + 1 fetches: one second of budget, plus one
token so that a crawler asking at any pace keeps the fraction of a token it could not use
(with max(1, budget) a crawler asking once per second at 3.47 fetches/s lost 0.47 a time)."""


class ShardCalls:
    """Shard script calls of one ``Session``: ``call`` queues one on a pipeline (or runs it
    on the client), with the shard's KEYS and the session's header before its arguments."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.scripts = session.scripts
        self.keys = session.keys
        self.count = session.shards
        self._shard_of: dict[str, int] = {}

    def of(self, host: str) -> int:
        """The shard of ``host`` (cached: every call names hosts)."""
        shard = self._shard_of.get(host)
        if shard is None:
            if len(self._shard_of) > 100_000:
                self._shard_of.clear()
            shard = self._shard_of[host] = shard_of(host, self.count)
        return shard

    def call(self, target: Any, name: str, shard: int, now: float, args: list) -> Any:
        """Queue a shard script on a pipeline (or run it on the client)."""
        return self.scripts.call(target, name, self.keys.shard_keys(shard),
                                 self.session.header.args(now) + args)

    def command(self, name: str, shard: int, now: float, args: list) -> tuple[str, list, list]:
        """A shard script call as (name, keys, args), for ``Scripts.stream``."""
        return name, self.keys.shard_keys(shard), self.session.header.args(now) + args

    def run_one(self, name: str, shard: int, now: float, args: list,
                lower: float | None = None) -> Any:
        """Run one shard script; ``lower``: then lower the shard's due summary to that time."""
        def build(pipe: Any) -> None:
            self.call(pipe, name, shard, now, args)
            if lower is not None and not self.scripts.cluster:
                self.lower_due(pipe, {shard: lower})

        reply = self.scripts.run(build)[0]
        if lower is not None and self.scripts.cluster:
            self.scripts.run(lambda pipe: self.lower_due(pipe, {shard: lower}))
        return reply

    def run_writes(self, build: Any, lowest: Mapping[int, float], calls: int) -> list:
        """Run ``build``'s ``calls`` shard script calls, then lower the due summary of the
        shards they wrote to (``lowest``: shard -> earliest due time queued); their replies."""
        def with_summary(pipe: Any) -> None:
            build(pipe)
            if not self.scripts.cluster:
                self.lower_due(pipe, lowest)

        replies = self.scripts.run(with_summary)[:calls]
        if self.scripts.cluster:
            self.scripts.run(lambda pipe: self.lower_due(pipe, lowest))
        return replies

    def lower_due(self, target: Any, times: Mapping[int, float]) -> Any:
        """Queue (or run) lua/due.lua "lower": shards that may have work due at these times.

        Sent after the shard scripts that queued the work, on the same connection (a Redis
        Cluster pipeline is split by node, so there it is a call of its own after them)."""
        return self.scripts.call(target, *self.lower_command(times))

    def lower_command(self, times: Mapping[int, float]) -> tuple[str, list[str], list[str]]:
        """lua/due.lua "lower" as (name, keys, args)."""
        return "due", [self.keys.due], wire.due_lower_args(times)

    def take_tokens(self, target: Any, now: float, want: int, give_back: int) -> Any:
        """Take up to ``want`` tokens from the shared bucket after returning ``give_back``."""
        budget = self.session.settings["budget"]
        burst = budget * BURST_SECONDS + 1.0
        return self.scripts.call(target, "take_tokens", [self.keys.tokens],
                                 wire.take_tokens_args(now, budget, burst, want, give_back))

    def layouts(self, shards: Iterable[int]) -> dict[int, Layout]:
        """The current bucket layout of each of ``shards`` (one pipelined read)."""
        shards = sorted(set(shards))
        pipe = self.session.client.pipeline(transaction=False)
        for shard in shards:
            pipe.hmget(self.keys.cnt(shard), "bl", "bs")
        return {shard: Layout.read(self.session.buckets, raw)
                for shard, raw in zip(shards, pipe.execute(), strict=True)}


def log_quarantined(flat: list, what_next: str = "see Frontier.quarantined(); add the URL "
                    "again for a fresh state") -> None:
    """One ERROR per page a script quarantined (its QUARANTINED reply: url, reason pairs)."""
    for url, reason in wire.quarantined(flat):
        logger.error("quarantined page %s: %s (%s)", url, reason, what_next)

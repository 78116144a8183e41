"""Sends one batch of the client's calls to the ``Frontier`` and counts what Redis took.

Consecutive adds go as one ``add_many``, consecutive observations as one
``observe_many``; a failure, a host delay or the claims of one sitemap (``signal_many``) go
alone. Data the frontier refuses
(``ValueError``) is dropped with a WARNING so that it cannot block the calls behind it;
a ``RedisFault`` leaves the batch queued (the caller's breaker handles it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from frontier_rate.client.calls import Call
from frontier_rate.engine.frontier import Frontier
from frontier_rate.engine.validation import parse_url
from frontier_rate.math.evidence import IGNORED_WEIGHT
from frontier_rate.store.errors import RedisFault

logger = logging.getLogger("frontier_rate.client.frontier_client")

Emit = Callable[..., None]
"""``emit(name, value, replace=False)``: a stat for the adapter (``Handoff.emit``)."""


class Sender:
    """Applies batches of same-kind calls; ``observed`` and ``added`` count what Redis took."""

    def __init__(self, emit: Emit) -> None:
        self._emit = emit
        self.observed = 0
        self.added = 0

    def apply(self, frontier: Frontier, batch: list[Call]) -> int:
        """Send one batch of same-kind calls (raises RedisFault: the batch stays queued);
        how many new pages an add batch added (0 for other kinds)."""
        kind = batch[0].kind
        if kind == "add":
            return self._add(frontier, batch)
        if kind == "observe":
            self._observe(frontier, batch)
            return 0
        call = batch[0]
        try:
            if kind == "failed":
                assert call.lease is not None
                frontier.failed(call.lease, call.args["reason"],
                                status=call.args["status"], park=call.args.get("park", False),
                                now=call.args["now"])
            elif kind == "hint":
                self._claims(frontier, call)
            else:
                frontier.set_host_delay(call.args["host"], call.args["seconds"])
        except ValueError as exc:
            logger.warning("frontier-rate: dropping a %s call the frontier refused: %s",
                           kind, exc)
            return 0
        call.applied = True
        if kind == "failed":
            self._count_failed(frontier, call)
        return 0

    def _add(self, frontier: Frontier, batch: list[Call]) -> int:
        pages = [page for call in batch for page in call.pages]
        try:
            added = frontier.add_many(pages)
        except ValueError:  # one bad page refuses the batch: add one at a time
            added = 0
            for page in pages:
                try:
                    added += frontier.add_many([page])
                except ValueError as exc:
                    self._emit("rejected", 1)
                    logger.warning("frontier-rate: page refused: %s", exc)
        for call in batch:
            call.applied = True
        self.added += added
        self._emit("new_pages", added)
        return added

    def _claims(self, frontier: Frontier, call: Call) -> None:
        """Claims of one sitemap, feed or push (``calls.claim_call``), counted by outcome;
        then the document's page re-weighted (less once its source is ignored for its
        host)."""
        claims, discover = call.args["hints"], call.args["discover"]
        try:
            counts = frontier.signal_many(claims, discover=discover)
        except ValueError:  # one bad claim refuses the batch: the others one at a time
            counts = {}
            for item in claims:
                try:
                    for name, n in frontier.signal_many([item], discover=discover).items():
                        counts[name] = counts.get(name, 0) + n
                except ValueError as exc:
                    logger.warning("frontier-rate: claim refused: %s", exc)
        for name in ("due", "postponed", "held", "future", "added"):
            if counts.get(name):
                self._emit(f"signal_{name}", counts[name])
        self._emit("signal_claims", len(claims))
        if call.args["sitemap"] is not None:
            url, weight, source = call.args["sitemap"]
            if frontier.signal_trust(parse_url(url), source)["ignored"]:
                weight = IGNORED_WEIGHT
            frontier.add_many([(url, weight, None, 0, True)])

    def _observe(self, frontier: Frontier, batch: list[Call]) -> None:
        while True:
            try:
                observations = frontier.observe_many(
                    [(call.lease, call.args) for call in batch])
                break
            except ValueError as exc:  # bad data cannot block the queue
                if len(batch) > 1:
                    del batch[1:]  # the chunks before the bad one may have applied
                    continue
                url = batch[0].lease.url if batch[0].lease else "?"
                logger.warning("frontier-rate: dropping an observation of %s the frontier "
                               "refused: %s", url, exc)
                return
        for call, observation in zip(batch, observations, strict=True):
            call.observation, call.applied = observation, True
            self._count_observation(call)

    def _count_observation(self, call: Call) -> None:
        observation = call.observation
        assert observation is not None
        if not observation.accepted:
            self._emit("stale_lease", 1)  # expired while in flight or held
            return
        if call.args.get("not_modified"):
            self._emit("not_modified", 1)
        self.observed += 1
        # a page's first fetch, whichever run added it, is no revisit (issue 33: after a
        # resume, "observed minus added in this run" counted earlier runs' pages), and
        # neither changed nor unchanged: there was no copy to compare with
        first = call.lease is not None and call.lease.first
        if first:
            self._emit("first_fetches", 1)
            return
        self._emit("revisits", 1)
        self._emit("changed" if observation.changed else "unchanged", 1)

    def _count_failed(self, frontier: Frontier, call: Call) -> None:
        self._emit("failed", 1)
        status = call.args.get("status")
        if status in (404, 410):
            self._emit(f"http_{status}", 1)
            assert call.lease is not None
            try:  # the failure is recorded: reading the page back is only for the stat
                page = frontier.page(call.lease.url)
            except RedisFault:
                page = None
            if page is not None and page.get("status") == "gone":
                self._emit("gone", 1)

"""An answer on its way from Scrapy's downloader to the frontier: the body cap while it
downloads (``BodyCap``), then, with ``FRONTIER_RATE_DETECTION_PROCESS``, its change
detection in the detection process (``ChildDetection``, ``scrapy/detection_process.py``).

``ChildDetection``: a 2xx answer's body goes to the child, and its evidence is sent when the
child answers, on the event loop. The spider's callback waits on a stand-in ``Call`` that
settles as the call it becomes: an observe call, or a failed one for a "not content"
answer, as inline. Whatever the child does (answers, raises, dies), the stand-in settles:
without the child's answer the body is detected in this process.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import StopDownload

from frontier_rate.client import Call, FrontierClient
from frontier_rate.crawl.responses import Outcome, content_length, outcome
from frontier_rate.crawl.signal_reader import SITEMAP_KEY
from frontier_rate.detection.content_rules import ContentRule, ContentRules
from frontier_rate.detection.detection_worker import Found
from frontier_rate.detection.fingerprint import Fingerprinter, header_value
from frontier_rate.engine.validation import MAX_VALIDATOR_LENGTH
from frontier_rate.scrapy.detection_process import DetectionProcess
from frontier_rate.scrapy.requests import TOKEN_KEY

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector
    from twisted.internet.defer import Deferred

    from frontier_rate.engine.records import Lease

logger = logging.getLogger(__name__)

MAX_CUT_WARNINGS = 100
"""Pages whose cut body is logged at WARNING level per crawl (once each); later ones at DEBUG."""

Send = Callable[[Outcome, "Lease", str, float], "Call"]
"""The scheduler's ``_send``: hand an outcome to the client; the observe or failed call."""


def send_outcome(client: FrontierClient, stats: StatsCollector, result: Outcome,
                 lease: Lease, url: str, now: float, rules: ContentRules | None = None) -> Call:
    """Hand one answer's evidence to the client: the observe call, or the failed call for
    a failure (its ``reason`` says why: ``RESULT_KEY``'s ``failed``)."""
    for name, value in result.bad_validators:
        stats.inc_value("frontier_rate/bad_validator")
        logger.debug("not keeping %s %r of %s: not printable ASCII of at most %d characters",
                     name, value[:100], url, MAX_VALIDATOR_LENGTH)
    if result.kind == "failed":
        if rules is not None:
            rules.unmatched(lease.url, result.args["reason"])  # a WARNING, once a page
        return client.failed(lease, result.args["reason"], result.args["status"], now)
    # the copy counts once the spider's items left the pipelines (settling.py, issue 60)
    return client.observe(lease, {**result.args, "settle_later": True})


def set_counters(stats: StatsCollector, fingerprinter: Fingerprinter,
                 child: ChildDetection | None) -> None:
    """Set the detectors' counters (``volatile_ignored``, ``not_content``): this process's,
    plus the detection process's last when there is one (which leaves out the answers
    detected here while a child started: ``DetectionProcess.counts``)."""
    here = fingerprinter.stats()
    there = child.counts if child is not None else {}
    for name in here.keys() | there.keys():
        stats.set_value(f"frontier_rate/{name}", here.get(name, 0) + there.get(name, 0))


class BodyCap:
    """Stops a download of this scheduler's past ``max_body`` bytes (a sitemap's past
    ``sitemap_max_bytes`` if larger): the response keeps what arrived and is fingerprinted
    by it plus its Content-Length."""

    def __init__(self, max_body: int, sitemap_max_bytes: int, stats: StatsCollector) -> None:
        self.max_body, self.sitemap_max_bytes, self.stats = max_body, sitemap_max_bytes, stats
        self._received: weakref.WeakKeyDictionary[Request, int] = weakref.WeakKeyDictionary()
        self._warned: set[str] = set()  # pages whose cut was said at WARNING level

    def on_bytes(self, data: bytes, request: Request, spider: Any) -> None:
        """Scrapy's ``bytes_received`` signal."""
        if TOKEN_KEY not in request.meta:
            return
        received = self._received.get(request, 0) + len(data)
        limit = self.max_body
        if request.meta.get(SITEMAP_KEY):
            limit = max(limit, self.sitemap_max_bytes)
        if received <= limit:
            self._received[request] = received
            return
        self._received.pop(request, None)
        self.stats.inc_value("frontier_rate/body_cut")
        self._say_cut(request.url, received, limit)
        raise StopDownload(fail=False)

    def _say_cut(self, url: str, received: int, limit: int) -> None:
        """A WARNING the first time a page's body is cut (its revisits are cut too, at DEBUG),
        for at most ``MAX_CUT_WARNINGS`` pages; the stat ``frontier_rate/body_cut`` counts all."""
        first = url not in self._warned
        if first and len(self._warned) < MAX_CUT_WARNINGS:
            self._warned.add(url)
            logger.warning("frontier-rate: download of %s stopped after %d bytes, past the "
                           "limit of %d (FRONTIER_RATE_MAX_BODY); its changes are detected in "
                           "the first %d bytes and the declared length only", url, received,
                           limit, limit)
            if len(self._warned) == MAX_CUT_WARNINGS:
                logger.warning("frontier-rate: %d pages cut at FRONTIER_RATE_MAX_BODY; further "
                               "ones are logged at DEBUG level (stat frontier_rate/body_cut "
                               "counts every cut)", MAX_CUT_WARNINGS)
            return
        logger.debug("frontier-rate: download of %s stopped after %d bytes (limit %d)",
                     url, received, limit)


class ChildDetection:
    """Answers sent to the detection process and not yet recorded (at most the requests
    in flight), and the detectors' counters of both processes."""

    def __init__(self, process: DetectionProcess, fingerprinter: Fingerprinter,
                 send: Send, stats: StatsCollector) -> None:
        self.process = process
        self.fingerprinter = fingerprinter  # this process's: detects when the child cannot
        self._send = send
        self.stats = stats
        self._pending: dict[str, tuple[Any, ...]] = {}
        self.counts: dict[str, int] = {}
        """The detection process's counters, as of its last answer taken."""

    def submit(self, response: Response, lease: Lease, flight: str, now: float,
               truncated: bool, rule: ContentRule | None = None) -> Call | None:
        """Send a 2xx answer to the child (``rule``: what counts on the page); the stand-in
        call its callback waits on, or None when the child has stopped (the scheduler then
        detects it inline)."""
        headers, body, url = response.headers, response.body, response.url
        pending = Call("observe", lease)
        self._pending[flight] = (pending, lease, response.status, headers, body, url, now,
                                 truncated, rule)
        taken = self.process.submit(
            body, url, header_value(headers, "Content-Type"), truncated=truncated,
            full_length=content_length(headers) if truncated else None,
            done=lambda found: self.record(flight, found), rule=rule)
        if not taken:
            del self._pending[flight]
            return None
        return pending

    def record(self, flight: str, found: Found | None) -> None:
        """Send the evidence of one answer, once: with the child's detection, or detected
        here when ``found`` is None."""
        answer = self._pending.pop(flight, None)
        if answer is None:
            return
        pending, lease, status, headers, body, url, now, truncated, rule = answer
        detection = wall = None
        if found is not None:
            detection, self.counts, wall = found
            self.stats.inc_value("frontier_rate/detected_in_process")
        call = None
        try:
            result = outcome(lease, status, headers, body, url, self.fingerprinter, now,
                             truncated=truncated, detection=detection, rule=rule, wall=wall)
            set_counters(self.stats, self.fingerprinter, self)
            call = self._send(result, lease, url, now)
        finally:  # the spider's callback waits on pending: it must settle, whatever raised
            if call is None:
                pending.kind, pending.args = "failed", {"reason": "not recorded: an error"}
                pending.settle()
            else:
                call.when_settled(lambda settled: _settle_as(pending, settled))

    def close(self) -> Deferred[None] | None:
        """Record here what the child has not answered yet (rare: the engine closes the
        scheduler once every callback has its result), then stop the child; a Deferred
        that fires when it has exited, or None."""
        for flight in list(self._pending):
            self.record(flight, None)
        return self.process.close()


def _settle_as(pending: Call, call: Call) -> None:
    """Settle the stand-in as the call it became, observe or failed (the spider's answer
    reads the observation, or the failure's reason, from it)."""
    pending.kind, pending.args, pending.observation = call.kind, call.args, call.observation
    pending.applied, pending.held = call.applied, call.held
    pending.settle()

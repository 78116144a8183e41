"""Host politeness in a Scrapy crawl, for the Scrapy scheduler and the Frontera backend alike.

Where politeness lives: the frontier spaces *leases* of each host by its delay
(``FRONTIER_RATE_MIN_HOST_DELAY``, ``DOWNLOAD_DELAY``, a robots.txt Crawl-delay);
``crawl.politeness`` holds the framework-free parts (``HostGate``: each host's delay and
gate; ``SendGate``: the shared send slot and its outage rule); this module is the one path
both adapters call (``ScrapyPoliteness.install``) to apply them to Scrapy's downloader:

- read the Crawl-delay of every robots.txt answer that reaches the engine (Scrapy never
  applies it) and tell the frontier; fetch robots.txt first where Scrapy's middleware does
  not (the Scrapy scheduler);
- pace the host's download slot, so the gap holds between the moments requests are
  *started* within this process (Scrapy's ``DOWNLOAD_DELAY`` semantics; its downloader may
  otherwise send leased requests in a burst);
- right before a request goes to its download handler (robots.txt fetches too), take the
  host's shared send slot, so every process of the frontier keeps the delay together: the
  request waits for it without blocking the event loop. Hosts without a delay cost nothing.
  The gap after this process's send is widened by its recent event-loop stalls
  (``StallWatch``, ``loop_stalls.LoopStalls``): a request leaves some loop iterations after
  its slot, late by whatever callback holds the loop meanwhile.

Private Scrapy internals used here are guarded in ``scrapy_compat`` (docs/ARCHITECTURE.md).
The Scrapy scheduler tells this module when a lease leaves and when robots.txt answers; the
Frontera backend, which never sees Scrapy's requests, has it follow the downloader's
signals (``follow_downloader``). Before issue 61 the Frontera path took no send slot and
sent a host's due pages 0.000 s apart.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import DeferredLock

from frontier_rate.crawl import scrapy_compat as compat
from frontier_rate.crawl.loop_stalls import HeldWrites, LoopStalls, StartStalls
from frontier_rate.crawl.politeness import (
    LAST_SENDS_KEPT,
    SEND_BY_KEY,
    SEND_RETRY_MAX,
    HostGate,
    SendGate,
    SendHeld,
)
from frontier_rate.store.send_slot import SendSlots

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.spiders import Spider

    from frontier_rate.client.outage import Breaker
    from frontier_rate.crawl.settings import AdapterSettings
    from frontier_rate.engine.frontier import Frontier, Lease

logger = logging.getLogger(__name__)

PACE_MARGIN = 0.05
"""Seconds added to a host's delay on its download slot (see ``ScrapyPoliteness.pace``). The
slot spaces request *starts*; at the site two requests may arrive closer than they started
(the first one's connection set-up, a busy event loop writing one request late): on this
2-core VM under load the test-bed saw arrival gaps up to ~32 ms shorter than the start gaps
(the demo's politeness check failed with 10 and 25 ms). It costs 5% of a 1 s delay's rate."""
ROBOTS_GAP = 1.0
"""Seconds kept at least around a robots.txt fetch to a host whose Crawl-delay this process
does not know yet (its first one): two processes starting together fetched it 0.026 s apart
under a ``Crawl-delay: 1`` neither had read (benchmarks/frontera_politeness.py). Costs each
such host one wait of up to this long before its first page, once per process."""
RETAKES = 4
"""Slots a request takes at most before it leaves: a request that finds its slot missed by
more than ``SEND_MARGIN`` takes the next free one (``SendGate.retake``); the last one it
takes, it keeps, late or not (a loop busy that long is not going to wait better)."""
SEND_MARGIN = PACE_MARGIN
"""Seconds added to a host's delay in its shared slot: the arrival of a request at the
server drifts from the moment its wait ends (scheduling, the connection), as it does from
a slot's start (``PACE_MARGIN``, the same margin). With 0.01 s two Frontera processes on the
loaded 2-core VM had requests arrive 0.950 s apart under a 1 s Crawl-delay."""
STALL_TICK = 0.02
"""Seconds between the timers that measure this process's event-loop stalls (``StallWatch``).
A stall is measured up to one tick short, which ``SEND_MARGIN`` covers; 50 timers a second
cost the loop well under 1% of a core."""


LAPSED_STAT = "frontier_rate/leases_lapsed"
"""Leased pages not sent because they waited past half the lease timeout (``LeaseLapsed``)."""
ROBOTS_HELD = "robots.txt unavailable"
"""The start of ``RobotsHeld``'s message."""


class RobotsHeld(IgnoreRequest):
    """A request not sent because its host's robots.txt answered a server error or could not
    be fetched (RFC 9309 2.3.1.4: then nothing of the host may be crawled). The Scrapy
    scheduler keeps such a page's lease and sends it once robots.txt answers again; a one-off
    request fails with it (its errback sees it)."""


class LeaseLapsed(IgnoreRequest):
    """A leased page's request not sent because it waited past ``politeness.send_by`` (half
    the lease timeout) in the downloader: its lease may have expired, and another process
    may send the page too. The adapter drops the request without reporting a failure; the
    page is due again once its lease expires in Redis."""


class StallWatch:
    """Measure how late a timer fires, every ``STALL_TICK``, into ``stalls``
    (``loop_stalls.LoopStalls``): the event loop's stalls, which the shared send slot widens
    a host's gap by."""

    def __init__(self, stalls: LoopStalls, tick: float = STALL_TICK, scheduler: Any = None,
                 clock: Callable[[], float] = time.monotonic,
                 writes: HeldWrites | None = None) -> None:
        if scheduler is None:
            from twisted.internet import reactor as scheduler
        self.stalls, self.tick, self.scheduler, self.clock = stalls, tick, scheduler, clock
        self.writes = writes
        """Told of every stall too (``HeldWrites``), when given."""
        self._due = 0.0
        self._call: Any = None
        self._stopped = False

    def start(self) -> None:
        """Measure from now on, unless already measuring or stopped for good."""
        if self._call is None and not self._stopped:
            self._schedule()

    def _schedule(self) -> None:
        self._due = self.clock() + self.tick
        self._call = self.scheduler.callLater(self.tick, self._fire)

    def _fire(self) -> None:
        now = self.clock()
        if now - self._due > 0:
            self.stalls.record(now - self._due, now)
            if self.writes is not None:
                self.writes.record(now - self._due, now)
        self._schedule()

    def stop(self) -> None:
        """Measure no more (the crawl ends): no timer is left pending in the reactor."""
        self._stopped = True
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None


class ScrapyPoliteness:
    """robots.txt reading, download-slot pacing and the shared send slot of one crawl.

    ``set_host_delay(host, seconds)`` tells the frontier a learned Crawl-delay (the adapter's
    client); ``clock`` is the adapter's; ``send``: the shared send slots (None: each process
    keeps the delay alone, ``FRONTIER_RATE_SHARED_SEND = False``).
    """

    def __init__(self, crawler: Crawler, gate: HostGate, clock: Callable[[], float],
                 set_host_delay: Callable[[str, float], Any],
                 send: SendGate | None = None) -> None:
        self.crawler, self.gate, self.clock = crawler, gate, clock
        self._set_host_delay = set_host_delay
        self._paced: dict[str, float] = {}
        self._sending: dict[str, DeferredLock] = {}
        """host -> the lock its requests take a send slot under, one at a time."""
        self.closing = False
        self.send = send
        self.waited = 0.0
        self.stalls = LoopStalls()
        """This process's event-loop stalls, measured while it shares send slots."""
        self.start_stalls = StartStalls()
        """The stalls expected at the crawler's start, before ``stalls`` knows any."""
        self.writes = HeldWrites()
        """The same stalls, read for when a request handed over was written (``_held``)."""
        self._handed: OrderedDict[str, float] = OrderedDict()
        """host -> when this process last handed a request of it to the download handler
        (``time.monotonic``), the most recent ``LAST_SENDS_KEPT`` hosts."""
        self.watch: StallWatch | None = None
        """What measures ``stalls``: started when the spider opens (``on_spider_opened``),
        stopped at the end."""
        hooked = compat.before_download(crawler, self.before_send, self.on_send_failed)
        if send is not None and not hooked:
            logger.warning("frontier-rate: this Scrapy's downloader has no download "
                           "handlers to hook; host delays hold within each process only")
            self.send = None

    @classmethod
    def install(cls, crawler: Crawler, frontier: Frontier, config: AdapterSettings,
                clock: Callable[[], float], set_host_delay: Callable[[str, float], Any], *,
                follow_downloader: bool = False, outages: Breaker | None = None,
                unreachable_at: float | None = None) -> ScrapyPoliteness:
        """The politeness of ``crawler`` on ``frontier``: its gate, its slot pacing and (unless
        ``FRONTIER_RATE_SHARED_SEND`` is off) its shared send slot. ``follow_downloader``: pace
        each request's slot when it reaches the downloader and read every robots.txt answer
        here (an adapter that does neither itself: the Frontera backend). ``outages``: the
        frontier client's breaker, whose outages the send slots keep to the turns for too
        (``SendGate.outage_seen``). ``unreachable_at``: when (``time.monotonic``) the crawl
        last found Redis unreachable while it opened (``SendGate.hold_after_outage``)."""
        gate = HostGate(
            per_host=config.per_host, min_delay=frontier.min_host_delay,
            obey_crawl_delay=config.obey_crawl_delay,
            framework_reads_robots=config.framework_reads_robots or follow_downloader,
            robots_ttl=config.robots_ttl, max_crawl_delay=config.max_crawl_delay,
            agent=config.robots_agent)
        send = None
        if config.shared_send:
            send = SendGate(SendSlots(frontier.scripts, frontier.keys), config.redis_url)
            if unreachable_at is not None:
                send.hold_after_outage(unreachable_at)
        politeness = cls(crawler, gate, clock, set_host_delay, send)
        crawler.signals.connect(politeness.on_downloaded, signal=signals.response_downloaded)
        if politeness.send is not None:
            if outages is not None:
                outages.listeners.append(politeness.send.outage_seen)
            politeness.watch = StallWatch(politeness.stalls, writes=politeness.writes)
            crawler.signals.connect(politeness.on_spider_opened, signal=signals.spider_opened)
            for ended in (signals.spider_closed, signals.engine_stopped):
                crawler.signals.connect(politeness.watch.stop, signal=ended)
        if follow_downloader:
            crawler.signals.connect(politeness.on_reached_downloader,
                                    signal=signals.request_reached_downloader)
            if config.obey_crawl_delay:
                crawler.signals.connect(politeness.on_response, signal=signals.response_received)
        return politeness

    def on_spider_opened(self) -> None:
        """Measure the event loop's stalls from now on (shared send slots only), so that a
        crawler's first sends are widened by the stalls of its start (the hour's soak: a
        restarted crawler's first request, 0.4775 s under 0.5 s), and begin the span of the
        stalls expected at the start (``StartStalls``). Never before the spider
        opens: a crawl whose spider never opened leaves no timer in the reactor (Scrapy
        2.13's test_open_spider_error_on_faulty_pipeline). ``install`` connects it to
        ``spider_opened``; an adapter that installs from that signal calls it itself."""
        if self.watch is not None:
            self.watch.start()
            self.start_stalls.start(time.monotonic())

    def fetch_robots(self, lease: Lease) -> None:
        """Fetch the robots.txt of ``lease``'s host before its first page (the answer is
        read by ``learn``, as every robots.txt answer is)."""
        self.pace(lease.host)
        parts = urlsplit(lease.url)
        deferred_from_coro(self._download_robots(lease.host,
                                                 f"{parts.scheme}://{parts.netloc}/robots.txt"))

    async def _download_robots(self, host: str, url: str) -> None:
        try:
            request = Request(url, meta={"dont_obey_robotstxt": True}, priority=1000,
                              dont_filter=True)
            await compat.download(self.crawler, request)
            if self.crawler.stats is not None:
                self.crawler.stats.inc_value("frontier_rate/robots_fetched")
        except Exception as exc:  # a missing robots.txt must never stop the crawl
            logger.debug("robots.txt of %s not fetched: %r", host, exc)
            self.gate.unreachable(host, "unreachable", self.clock())
        self.gate.robots_done(host, self.clock())
        compat.wake_engine(self.crawler)

    def learn(self, response: Response) -> None:
        """Apply the Crawl-delay of a robots.txt answer that reached the engine.

        Scrapy's ``robots_parsed`` signal (2.19) hands over a parser whose public
        interface has no Crawl-delay, so the answer itself is read.
        """
        parts = urlsplit(response.url)
        host = parts.hostname
        if not host:
            return
        held = self.gate.held(host)
        delay = self.gate.learn(host, response.status, response.body, self.clock())
        if held and not self.gate.held(host):
            logger.info("robots.txt of %s answers again (%d); its pages go on", host,
                        response.status)
            compat.forget_robots(self.crawler, parts.netloc)  # Scrapy's parse of the error
        if delay is not None and not self.closing:
            logger.info("robots.txt Crawl-delay %.3gs for %s", delay, host)
            self._set_host_delay(host, delay)
        self.pace(host)

    def pace(self, host: str) -> None:
        """Have Scrapy's downloader keep ``host``'s delay between request starts.

        The host's download slot gets the delay plus ``PACE_MARGIN`` and no jitter; its
        concurrency stays Scrapy's, so a slow host has several requests in flight, one
        started every delay, as with Scrapy's own scheduler (issue 60). Under AutoThrottle
        the delay is a floor under AutoThrottle's own. A host with no delay at all (no
        frontier delay, no Crawl-delay) keeps Scrapy's own slot settings
        (``DOWNLOAD_DELAY``, AutoThrottle).
        """
        delay = self.gate.delay(host)
        if delay <= 0 and host not in self._paced:
            return
        delay += PACE_MARGIN
        if compat.pace_slot(self.crawler, host, delay):
            self._paced[host] = delay

    def on_downloaded(self, response: Response, request: Request, spider: Spider) -> None:
        """``response_downloaded`` signal: put a paced slot's delay back to its floor if
        AutoThrottle just lowered it below (it may, down to ``DOWNLOAD_DELAY``); the first
        page answer extends the stalls expected at the start (``StartStalls.answered``)."""
        if urlparse_cached(request).path != "/robots.txt":
            self.start_stalls.answered(time.monotonic())
        key = request.meta.get("download_slot")
        if key in self._paced:
            self.pace(key)

    def on_reached_downloader(self, request: Request, spider: Spider) -> None:
        """``request_reached_downloader`` signal (``follow_downloader``): pace the request's
        host before its slot lets it through."""
        host = urlparse_cached(request).hostname
        if host:
            self.pace(host)

    def on_response(self, response: Response, request: Request, spider: Spider) -> None:
        """``response_received`` signal (``follow_downloader``): read robots.txt answers."""
        if urlsplit(response.url).path == "/robots.txt":
            self.learn(response)

    def on_send_failed(self, request: Request, exc: Exception) -> None:
        """A download got no answer: a robots.txt that could not be fetched holds its host's
        pages as a server error does (Scrapy's middleware reads it as "allow all")."""
        url = urlparse_cached(request)
        if url.path == "/robots.txt" and url.hostname and not isinstance(exc, IgnoreRequest):
            self.gate.unreachable(url.hostname, "unreachable", self.clock())

    async def before_send(self, request: Request) -> None:
        """Wait (without blocking) until ``request``'s host may be sent to by this process;
        raise ``RobotsHeld`` for a page of a host whose robots.txt answers a server error,
        ``LeaseLapsed`` for a leased page that waited past its ``SEND_BY_KEY`` (checked
        before and after each wait)."""
        url = urlparse_cached(request)
        held = self.gate.held(url.hostname) if url.hostname else None
        if held is not None and url.path != "/robots.txt":
            if self.crawler.stats is not None:
                self.crawler.stats.inc_value("frontier_rate/robots_held")
            raise RobotsHeld(f"{ROBOTS_HELD} ({held}): {request.url} held back")
        self._check_lease(request)
        if self.send is None:
            return
        host = url.hostname
        delay = self.gate.delay(host) if host else 0.0
        if delay <= 0:
            return
        # a robots.txt fetch before the host's Crawl-delay is known keeps ROBOTS_GAP; that gap
        # is this process's alone, so no outage turn of it lines up with the others' windows
        unknown = self.gate.obey_crawl_delay and url.path == "/robots.txt" \
            and not self.gate.robots_read(host)
        if unknown:
            delay = max(delay, ROBOTS_GAP)
        gap = delay + SEND_MARGIN
        # one request of a host at a time takes a slot: this process holds at most one of
        # the host's slots ahead, which bounds where the others' turns may start in an
        # outage (``SendGate``); the others wait here, not in Redis
        turn = self._sending.setdefault(host, DeferredLock())
        await maybe_deferred_to_future(turn.acquire())
        try:
            self._check_lease(request)  # the wait for the lock may be long: keep no slot
            expected = self.start_stalls.expected(delay, time.monotonic())
            await self._take_slot(host, gap, may_turn=not unknown, expected=expected)
            self._check_lease(request)
            self._handed[host] = time.monotonic()  # before the next request takes a slot
            self._handed.move_to_end(host)
            if len(self._handed) > LAST_SENDS_KEPT:
                self._handed.popitem(last=False)
        finally:
            turn.release()
            if not turn.locked:  # no request of the host waits: forget its lock
                self._sending.pop(host, None)

    def _check_lease(self, request: Request) -> None:
        """Raise ``LeaseLapsed`` when ``request`` is a leased page past its ``SEND_BY_KEY``."""
        until = request.meta.get(SEND_BY_KEY)
        if until is None or self.clock() <= until:
            return
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(LAPSED_STAT)
        logger.debug("not sent: %s waited past half its lease timeout", request.url)
        raise LeaseLapsed(f"{request.url}: its lease may have expired while it waited to be "
                          "sent; the page is due again once it does")

    async def _take_slot(self, host: str, gap: float, may_turn: bool = True,
                         expected: float = 0.0) -> None:
        """Wait for ``host``'s next shared send slot (``gap`` after the last send of any
        process); one missed by more than ``SEND_MARGIN`` is taken again. A process new to
        the frontier, or a send whose gap the others do not share (``may_turn``, as for
        ``SendGate.reserve``), is held through an outage (``SendHeld``), asking every
        ``SEND_RETRY_MAX``. ``expected``: seconds the gap is widened by at least
        (``StartStalls``)."""
        while True:
            try:
                return await self._wait_for_slot(host, gap, may_turn, expected)
            except SendHeld:
                if self.crawler.stats is not None:
                    self.crawler.stats.inc_value("frontier_rate/sends_held")
                await compat.sleep(SEND_RETRY_MAX)

    def _stalled(self, expected: float = 0.0) -> float:
        """This process's recent event-loop stalls, read when a slot is taken, to widen the
        gap after it (``SendGate.reserve``): a stall between the slot and the request's
        write sends it late, and the gap recorded with the slot keeps the next send of any
        process away (``LoopStalls``). Read before a long wait for the host's lock, it
        missed the stalls of the wait: 0.003 s apart under 0.3 s in the short soak.
        ``expected``: the least it gives (``StartStalls``)."""
        return max(expected, self.stalls.allowance(time.monotonic()))

    async def _held(self, host: str, gap: float) -> None:
        """Wait until ``gap`` after the end of a stall that held the write of this process's
        last request to ``host`` (``HeldWrites``): that request left when the stall ended,
        not at its slot, and this one, at its own slot, would follow it closer than the
        delay. The request then goes through the late path (``_late``)."""
        handed = self._handed.get(host)
        written = None if handed is None else self.writes.written_by(handed)
        if written is not None and written + gap > time.monotonic():
            if self.crawler.stats is not None:
                self.crawler.stats.inc_value("frontier_rate/sends_after_held_write")
            await compat.sleep(written + gap - time.monotonic())

    def _late(self, at: float, widened: float) -> bool:
        """Whether a request whose slot (``at``, monotonic) was taken with a gap widened by
        ``widened`` seconds must not simply leave now: it missed the slot by more than
        ``SEND_MARGIN``, or its lateness and the stall its write may still meet exceed what
        the gap allows (``SEND_MARGIN + widened``). That stall is the longest this process's
        loop has had lately or the one it has just woken from, its lateness: a loop that
        stalled since the slot was taken (a slot taken seconds ahead at a crawler's start,
        before the spider's first long callbacks: the short soak's fault-free world,
        0.16-0.18 s under 0.3 s), or one that wakes late in a new spell of stalls and then
        writes the request later still (the Cluster hours: 0.286 s under 0.3 s, a request
        that left at least 0.064 s after its slot)."""
        late = time.monotonic() - at
        return late > SEND_MARGIN or late + max(late, self._stalled()) > widened + SEND_MARGIN

    async def _wait_for_slot(self, host: str, gap: float, may_turn: bool = True,
                             expected: float = 0.0) -> None:
        assert self.send is not None
        widened = self._stalled(expected)
        at = await compat.in_thread(self.send.reserve, host, gap, widened, may_turn)
        for _ in range(RETAKES):
            wait = at - time.monotonic()
            if wait > 0:
                self.waited += wait
                if self.crawler.stats is not None:
                    self.crawler.stats.inc_value("frontier_rate/send_waits")
                await compat.sleep(wait)
            await self._held(host, gap)
            if not self._late(at, widened):
                return
            # late (a busy event loop, a slow reservation), or the loop has stalled longer
            # since the slot was taken than the gap recorded with it allows for: leave now
            # only if no other send was reserved after the slot, else wait for the next free
            # one, with the gap widened by the stalls seen now
            if self.crawler.stats is not None:
                self.crawler.stats.inc_value("frontier_rate/late_sends")
            widened = self._stalled(expected)
            again = await compat.in_thread(self.send.retake, host, gap, at, widened, may_turn)
            if again is None:
                return
            at = again
        await compat.sleep(at - time.monotonic())  # the last slot taken: kept, late or not

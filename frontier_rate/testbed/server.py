"""The living-web test-bed: H loopback HTTP hosts serving pages that change.

``Testbed`` binds one ``ThreadingHTTPServer`` per host on distinct loopback
addresses (127.0.0.2, 127.0.0.3, ... by default), all on the same port, so a
crawler sees separate hosts and download slots. Simulated time runs
``acceleration`` times faster than the real clock; page content, validators
and dates follow simulated time, and every request is logged with both.
"""

from __future__ import annotations

import calendar
import email.utils
import hashlib
import io
import ipaddress
import itertools
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from frontier_rate.testbed import published
from frontier_rate.testbed.arrival import ArrivalReader, stamp_arrivals
from frontier_rate.testbed.changes import DAY
from frontier_rate.testbed.site import PRIVATE_PATH, Site

logger = logging.getLogger(__name__)

SIM_EPOCH = 946684800.0
"""Simulated time 0 as a Unix time (2000-01-01T00:00:00Z), for HTTP dates."""

_SPECIAL_STATUSES = {404: "Not Found", 410: "Gone", 503: "Service Unavailable"}


def loopback_addresses(base_address: str, n_hosts: int) -> list[str]:
    """``n_hosts`` consecutive addresses from ``base_address``, all inside 127.0.0.0/8."""
    loopback = ipaddress.ip_network("127.0.0.0/8")
    try:
        first = ipaddress.IPv4Address(base_address)
    except ValueError:
        raise ValueError(
            f"base_address={base_address!r}: not an IPv4 address (use 127.x.y.z)"
        ) from None
    last_int = int(first) + n_hosts - 1
    usable = (int(loopback.network_address) + 1, int(loopback.broadcast_address) - 1)
    if not (usable[0] <= int(first) and last_int <= usable[1]):
        raise ValueError(
            f"base_address={base_address!r} with n_hosts={n_hosts}: every host address "
            "must lie inside 127.0.0.1-127.255.255.254 (loopback only)"
        )
    return [str(ipaddress.IPv4Address(int(first) + h)) for h in range(n_hosts)]


def http_date(unix_time: float) -> str:
    return email.utils.formatdate(unix_time, usegmt=True)


def parse_http_date(value: str) -> float | None:
    """Unix time of an HTTP date, or None when it does not parse."""
    parsed = email.utils.parsedate(value)
    return None if parsed is None else float(calendar.timegm(parsed))


def _etag_matches(header: str, etag: str) -> bool:
    """``If-None-Match`` weak comparison (RFC 9110 13.1.2): ``*`` or any listed tag."""
    opaque = etag.removeprefix("W/")
    for candidate in header.split(","):
        candidate = candidate.strip()
        if candidate == "*" or candidate.removeprefix("W/") == opaque:
            return True
    return False


class Testbed:
    """A reproducible stand-in for the web on loopback addresses.

    Page ``i`` lives at ``/page/<i>`` on host ``i % n_hosts``; host ``h`` binds
    ``base_address + h``. ``churn_fraction`` of the pages carry markup-only
    churn and a disjoint ``volatile_fraction`` a per-request token; neither
    counts as a change. ``change_model`` is one of ``CHANGE_MODELS`` or
    ``"mixed"`` (a model drawn per page).

    Rates are changes per simulated second (``rate_min=0.5 / DAY``);
    ``sim_time = (clock() - clock_at_start) * acceleration``. ``clock`` returns
    real seconds (``time.monotonic`` by default); tests pass a controllable one.
    ``crawl_delays`` gives each host's robots.txt ``Crawl-delay`` in REAL
    seconds (None = no line); by default odd-numbered hosts get 1 s.
    ``lying_hosts`` (a fraction) of the hosts, the last ones, send a
    ``Last-Modified`` that is not the page's last change, as ``lie`` says:
    ``"now"`` (the time of the answer), ``"constant"`` (the epoch, whatever
    changes), ``"future"`` (a day ahead) or ``"none"`` (no header at all).
    ``sitemap_true`` and ``sitemap_lying`` (fractions of the hosts, drawn from the seed)
    serve a sitemap whose ``<lastmod>`` is the page's latest change, or the time of the
    sitemap fetch; with either set, the other hosts serve none. ``feed`` adds an Atom feed
    (``/feed.xml``) of the ``feed_items`` latest changed pages on one host
    (``published``).
    """

    __test__ = False  # not a pytest test class, despite its name

    def __init__(
        self,
        n_pages: int = 200,
        n_hosts: int = 4,
        seed: int = 0,
        acceleration: float = 3600.0,
        rate_distribution: str = "loguniform",
        rate_min: float = 0.5 / DAY,
        rate_max: float = 50.0 / DAY,
        change_model: str = "poisson",
        port: int = 0,
        base_address: str = "127.0.0.2",
        crawl_delays: Sequence[float | None] | None = None,
        churn_fraction: float = 0.1,
        volatile_fraction: float = 0.1,
        log_path: str | Path | None = None,
        truth_path: str | Path | None = None,
        *,
        zipf_exponent: float = 1.0,
        links_per_page: int = 4,
        clock: Callable[[], float] = time.monotonic,
        lying_hosts: float = 0.0,
        lie: str = "now",
        sitemap_true: float = 0.0,
        sitemap_lying: float = 0.0,
        feed: bool = False,
        feed_items: int = 10,
    ) -> None:
        if not isinstance(n_pages, int) or not 1 <= n_pages <= 100_000:
            raise ValueError(f"n_pages={n_pages!r}: must be an integer in [1, 100000]")
        if not isinstance(n_hosts, int) or not 1 <= n_hosts <= n_pages:
            raise ValueError(f"n_hosts={n_hosts!r}: must be an integer in [1, n_pages]")
        if not (acceleration > 0 and acceleration < float("inf")):
            raise ValueError(f"acceleration={acceleration!r}: must be a positive finite number")
        if not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port={port!r}: must be an integer in [0, 65535]")
        if crawl_delays is None:
            crawl_delays = [1.0 if h % 2 else None for h in range(n_hosts)]
        crawl_delays = list(crawl_delays)
        if len(crawl_delays) != n_hosts:
            raise ValueError(
                f"crawl_delays has {len(crawl_delays)} entries: need one per host ({n_hosts})"
            )
        for h, delay in enumerate(crawl_delays):
            if delay is not None and not 0 <= delay < float("inf"):
                raise ValueError(f"crawl_delays[{h}]={delay!r}: must be None or >= 0 seconds")
        if not 0.0 <= lying_hosts <= 1.0:
            raise ValueError(f"lying_hosts={lying_hosts!r}: must be a fraction in [0, 1]")
        if lie not in DATE_LIES:
            raise ValueError(f"lie={lie!r}: must be one of {', '.join(DATE_LIES)}")
        liars = round(lying_hosts * n_hosts)
        self.date_modes = ["true"] * (n_hosts - liars) + [lie] * liars
        """Per host: "true" (Last-Modified is the last change) or the lie it tells."""
        self.sitemap_modes = published.sitemap_modes(n_hosts, seed, sitemap_true, sitemap_lying)
        """Per host: "plain" (no dates), "true" or "lying" lastmod, or "none" (no sitemap)."""
        self.feed_host = published.choose_feed_host(self.sitemap_modes, seed) if feed else None
        if not isinstance(feed_items, int) or feed_items < 1:
            raise ValueError(f"feed_items={feed_items!r}: must be a positive integer")
        self.feed_items = feed_items
        self.addresses = loopback_addresses(base_address, n_hosts)
        self.site = Site(
            n_pages=n_pages, n_hosts=n_hosts, seed=seed,
            rate_distribution=rate_distribution, rate_min=rate_min, rate_max=rate_max,
            change_model=change_model, churn_fraction=churn_fraction,
            volatile_fraction=volatile_fraction, zipf_exponent=zipf_exponent,
            links_per_page=links_per_page,
        )
        self.seed = seed
        self.acceleration = float(acceleration)
        self.crawl_delays = crawl_delays
        self.change_model = change_model
        self.rate_distribution = rate_distribution
        self.port = port
        self.log_path = Path(log_path) if log_path is not None else None
        self.truth_path = Path(truth_path) if truth_path is not None else None
        self.clock = clock
        self.servers: list[ThreadingHTTPServer] = []
        self._threads: list[threading.Thread] = []
        self._started_at: float | None = None
        self.started_at_wall: float | None = None
        self._stopped_sim: float | None = None
        self._log: list[dict[str, Any]] = []
        self._log_file = None
        self._log_lock = threading.Lock()
        self._serial = itertools.count()

    # ----- lifecycle -------------------------------------------------------

    def start(self) -> Testbed:
        """Bind every host, start serving, and start the simulated clock."""
        if self.servers:
            raise RuntimeError("Testbed already started")
        if self._started_at is not None:
            raise RuntimeError("a Testbed cannot be restarted: create a new one")
        self.servers = self._bind_all()
        self.port = self.servers[0].server_address[1]
        if self.log_path is not None:
            self._log_file = self.log_path.open("a", encoding="utf-8")
        self._started_at = self.clock()
        self.started_at_wall = time.time()
        for server in self.servers:
            thread = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.1},
                name=f"testbed-{server.server_address[0]}", daemon=True,
            )
            thread.start()
            self._threads.append(thread)
        logger.info("testbed serving %d pages on %s", len(self.site.pages), ", ".join(self.hosts))
        return self

    def stop(self) -> None:
        """Stop serving, close the request log and write the truth file if asked."""
        if not self.servers:
            return
        self._stopped_sim = self.sim_time()
        for server in self.servers:
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        self.servers, self._threads = [], []
        with self._log_lock:
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None
        if self.truth_path is not None:
            self.write_truth(self.truth_path)

    def __enter__(self) -> Testbed:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _bind_all(self) -> list[ThreadingHTTPServer]:
        """Bind all hosts on one port; with port 0, retry until one port fits every address."""
        for _attempt in range(50):
            servers: list[ThreadingHTTPServer] = []
            try:
                port = self.port
                for h, address in enumerate(self.addresses):
                    server = ThreadingHTTPServer((address, port), _Handler)
                    server.daemon_threads = True
                    stamp_arrivals(server.socket)
                    server.testbed = self  # type: ignore[attr-defined]
                    server.host_index = h  # type: ignore[attr-defined]
                    servers.append(server)
                    port = server.server_address[1]
                return servers
            except OSError:
                for server in servers:
                    server.server_close()
                if self.port != 0:
                    raise
        raise OSError(f"no free port common to {self.addresses} after 50 attempts")

    # ----- time, pages, truth ----------------------------------------------

    def sim_time(self) -> float:
        """Simulated seconds since start (frozen after stop; 0 before start)."""
        if self._stopped_sim is not None:
            return self._stopped_sim
        if self._started_at is None:
            return 0.0
        return (self.clock() - self._started_at) * self.acceleration

    @property
    def hosts(self) -> list[str]:
        """Base URL of each host, e.g. ``http://127.0.0.2:8123``."""
        if not self.servers and self.port == 0:
            raise RuntimeError("port not known yet: call start() first")
        return [f"http://{address}:{self.port}" for address in self.addresses]

    def seed_urls(self) -> list[str]:
        """The home page of each host: enough for a crawler to discover every page."""
        return [base + "/" for base in self.hosts]

    def page_url(self, index: int) -> str:
        page = self.site.pages[index]
        return self.hosts[page.host] + page.path

    def feed_url(self) -> str:
        """The URL of the feed (``feed=True``)."""
        if self.feed_host is None:
            raise RuntimeError("this test-bed serves no feed (Testbed(feed=True))")
        return self.hosts[self.feed_host] + published.FEED_PATH

    def sitemap_urls(self) -> list[str]:
        """The sitemaps served (every host but those whose mode is "none")."""
        return [base + published.SITEMAP_PATH
                for base, mode in zip(self.hosts, self.sitemap_modes, strict=True)
                if mode != "none"]

    def manifest(self) -> dict[str, Any]:
        """Page weights for the crawler (served as ``/manifest.json`` on every host).

        Also says how to read simulated time from another process:
        ``sim = (time.time() - started_at) * acceleration``.
        """
        return {
            "acceleration": self.acceleration,
            "sim_epoch": SIM_EPOCH,
            "started_at": self.started_at_wall,
            "hosts": self.hosts,
            "date_modes": self.date_modes,
            "sitemap_modes": self.sitemap_modes,
            "feed": None if self.feed_host is None else self.feed_url(),
            "pages": [
                {"url": self.page_url(p.index), "host": self.addresses[p.host], "weight": p.weight}
                for p in self.site.pages
            ],
        }

    def truth(self, until: float | None = None) -> dict[str, Any]:
        """The ground truth: every page's real change times up to ``until`` (default now)."""
        now = self.sim_time() if until is None else float(until)
        pages = []
        for p, process in zip(self.site.pages, self.site.processes, strict=True):
            pages.append({
                "url": self.page_url(p.index),
                "host": self.addresses[p.host],
                "weight": p.weight,
                "rate": p.rate,
                "model": p.model,
                "churn": p.churn,
                "volatile": p.volatile,
                "change_times": process.times_until(now),
            })
        return {
            "now": now,
            "seed": self.seed,
            "acceleration": self.acceleration,
            "sim_epoch": SIM_EPOCH,
            "sitemap_modes": self.sitemap_modes,
            "feed_host": self.feed_host,
            "pages": pages,
        }

    def write_truth(self, path: str | Path, until: float | None = None) -> None:
        Path(path).write_text(json.dumps(self.truth(until)), encoding="utf-8")

    def requests(self) -> list[dict[str, Any]]:
        """A copy of the request log, oldest first."""
        with self._log_lock:
            return list(self._log)

    def _record(self, entry: dict[str, Any]) -> None:
        with self._log_lock:
            self._log.append(entry)
            if self._log_file is not None:
                self._log_file.write(json.dumps(entry) + "\n")
                self._log_file.flush()

    def _next_serial(self) -> int:
        return next(self._serial)


class _Handler(BaseHTTPRequestHandler):
    """Serves one request for the host its server stands for."""

    server_version = "frontier-rate-testbed/0.1"

    def version_string(self) -> str:
        return self.server_version

    def setup(self) -> None:
        super().setup()
        self._arrival = ArrivalReader(self.connection)
        self.rfile = io.BufferedReader(self._arrival)

    def handle_one_request(self) -> None:
        self._arrival.first_arrival = None  # the next chunk read is this request's first
        super().handle_one_request()

    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        self._serve(head=False)

    def do_HEAD(self) -> None:  # noqa: N802
        self._serve(head=True)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        logger.debug("%s %s", self.address_string(), format % args)

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The ``Date`` header in simulated time, consistent with ``Last-Modified``."""
        if timestamp is not None:
            return http_date(timestamp)
        sim = getattr(self, "_sim", None)
        return http_date(SIM_EPOCH + (self.server.testbed.sim_time() if sim is None else sim))

    def _arrived(self, testbed: Testbed) -> float:
        """When this request reached the host, on the test-bed's clock: the kernel's receive
        stamp where there is one (``testbed/arrival.py``), else now, before any rendering."""
        now, stamped = testbed.clock(), self._arrival.first_arrival
        if stamped is None or testbed.clock is not time.monotonic:
            return now
        return now - max(0.0, time.time() - stamped)

    def _serve(self, head: bool) -> None:
        testbed: Testbed = self.server.testbed  # type: ignore[attr-defined]
        host: int = self.server.host_index  # type: ignore[attr-defined]
        arrived = self._arrived(testbed)
        self._sim = testbed.sim_time()
        reply = self._route(testbed, host, urlsplit(self.path).path)
        inm = self.headers.get("If-None-Match")
        ims = self.headers.get("If-Modified-Since")
        if reply.status == 200:
            etag = '"' + hashlib.sha256(reply.body).hexdigest()[:32] + '"'
            reply.headers["ETag"] = etag
            told = _told_last_modified(testbed.date_modes[host], reply.last_modified,
                                       SIM_EPOCH + self._sim)
            if told is not None:
                reply.headers["Last-Modified"] = http_date(told)
            if _not_modified(inm, ims, etag, reply.last_modified):
                reply.status, reply.body = 304, b""
        self.send_response(reply.status)
        if reply.status != 304:
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        sent = 0 if head else len(reply.body)
        testbed._record({
            "real_time": arrived - (testbed._started_at or 0.0),
            "wall_time": time.time(),
            "sim_time": self._sim,
            "host": testbed.addresses[host],
            "method": self.command,
            "path": self.path,
            "url": reply.url,
            "page": reply.page,
            "version": reply.version,
            "status": reply.status,
            "bytes": sent,
            "if_none_match": inm is not None,
            "if_modified_since": ims is not None,
        })
        if sent:
            self.wfile.write(reply.body)

    def _route(self, testbed: Testbed, host: int, path: str) -> _Reply:
        """The full (unconditional) reply for ``path`` on ``host`` at the current sim time."""
        site, bases = testbed.site, testbed.hosts
        if path == "/":
            return _Reply(body=site.render_index(host, bases))
        if path == "/robots.txt":
            return _Reply(body=site.render_robots(bases[host], testbed.crawl_delays[host],
                                                  testbed.sitemap_modes[host] != "none"),
                          content_type=_TEXT)
        if path in (published.SITEMAP_PATH, published.FEED_PATH):
            return self._published(testbed, host, path)
        if path == "/manifest.json":
            return _Reply(body=json.dumps(testbed.manifest(), indent=1).encode(),
                          content_type="application/json")
        if path == PRIVATE_PATH:
            return _Reply(body=site.render_private())
        kind, _, arg = path[1:].partition("/")
        if kind == "status" and arg.isdigit() and int(arg) in _SPECIAL_STATUSES:
            code = int(arg)
            return _Reply(status=code, body=f"{code} {_SPECIAL_STATUSES[code]}\n".encode(),
                          content_type=_TEXT)
        if kind == "redirect" and arg.isdigit() and int(arg) < len(site.pages):
            return _Reply(status=301, content_type=_TEXT,
                          headers={"Location": testbed.page_url(int(arg))})
        page = site.page_at(host, path)
        if page is None:
            return _Reply(status=404, body=b"404 Not Found\n", content_type=_TEXT)
        process = site.processes[page.index]
        version = process.version_at(self._sim)
        body = site.render_page(page, self._sim, version, testbed._next_serial(), bases,
                                SIM_EPOCH)
        return _Reply(body=body, url=bases[host] + path, page=page.index, version=version,
                      last_modified=SIM_EPOCH + (process.last_change_before(self._sim) or 0.0))

    def _published(self, testbed: Testbed, host: int, path: str) -> _Reply:
        """A sitemap or the feed, as the host's mode says (404 where it has none)."""
        site, base, mode = testbed.site, testbed.hosts[host], testbed.sitemap_modes[host]
        if path == published.FEED_PATH:
            if testbed.feed_host != host:
                return _Reply(status=404, body=b"404 Not Found\n", content_type=_TEXT)
            body, modified = published.render_feed(site, host, base, self._sim,
                                                   testbed.feed_items, SIM_EPOCH)
            return _Reply(body=body, content_type="application/atom+xml",
                          last_modified=modified)
        if mode == "none":
            return _Reply(status=404, body=b"404 Not Found\n", content_type=_TEXT)
        if mode == "plain":
            return _Reply(body=site.render_sitemap(host, testbed.hosts),
                          content_type="application/xml")
        body, modified = published.render_dated_sitemap(site, host, base, self._sim, mode,
                                                        SIM_EPOCH)
        return _Reply(body=body, content_type="application/xml", last_modified=modified)


_TEXT = "text/plain; charset=utf-8"


@dataclass
class _Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    url: str | None = None
    page: int | None = None
    version: int | None = None
    last_modified: float = SIM_EPOCH


DATE_LIES = ("now", "constant", "future", "none")
"""What a lying host sends as Last-Modified (``Testbed(lie=...)``)."""


def _told_last_modified(mode: str, last_change: float, now: float) -> float | None:
    """The Last-Modified a host in ``mode`` sends for a page last changed at ``last_change``."""
    return {"true": last_change, "now": now, "constant": SIM_EPOCH, "future": now + DAY,
            "none": None}[mode]


def _not_modified(inm: str | None, ims: str | None, etag: str, last_modified: float) -> bool:
    """RFC 9110 13.2.2: If-None-Match decides when present, else If-Modified-Since."""
    if inm is not None:
        return _etag_matches(inm, etag)
    if ims is not None:
        since = parse_http_date(ims)
        return since is not None and int(last_modified) <= since
    return False

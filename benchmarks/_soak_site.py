"""The soak's web: the test-bed with hosts that fail as real ones do, and a request log
that names the crawler of every request.

A host can go down (its listening socket closed: connections are refused), answer 503
with ``Retry-After``, or turn into a bot wall (a 200 "checking your browser" page in
place of every page but robots.txt). Each logged request also carries the
``User-Agent``, which the soak sets per crawler process, so the requests a killed
process had in flight can be told apart.
"""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer
from typing import Any

from frontier_rate.testbed import Testbed
from frontier_rate.testbed.server import _Handler, _Reply

RETRY_AFTER = 30
"""Seconds a 503 host asks crawlers to wait (``Retry-After``)."""

WALL = (b"<html><head><title>Just a moment...</title></head><body><h1>Checking your browser"
        b"</h1><p>Are you a robot? Please complete the captcha to continue.</p></body></html>")

_local = threading.local()

MODES = ("down", "503", "wall")


class _FaultyHandler(_Handler):
    """Serves one request, or the fault its host is in."""

    def _serve(self, head: bool) -> None:
        _local.agent = self.headers.get("User-Agent", "")
        super()._serve(head)

    def _route(self, testbed: Testbed, host: int, path: str) -> _Reply:
        mode = getattr(testbed, "faults", {}).get(host)
        if mode == "503":
            return _Reply(status=503, body=b"503 Service Unavailable\n",
                          content_type="text/plain; charset=utf-8",
                          headers={"Retry-After": str(RETRY_AFTER)})
        if mode == "wall" and path != "/robots.txt":
            return _Reply(body=WALL)  # 200, but no page: never counts as a fetch of one
        return super()._route(testbed, host, path)


class FaultySite(Testbed):
    """A ``Testbed`` whose hosts can be put into a fault (``set_fault``) and back."""

    __test__ = False

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.faults: dict[int, str] = {}
        self._down: set[int] = set()

    def _bind_all(self) -> list[ThreadingHTTPServer]:
        servers = super()._bind_all()
        for server in servers:
            server.RequestHandlerClass = _FaultyHandler
        return servers

    def _record(self, entry: dict[str, Any]) -> None:
        entry["agent"] = getattr(_local, "agent", "")
        host = self.addresses.index(entry["host"])
        if host in self.faults:
            entry["fault"] = self.faults[host]
        super()._record(entry)

    def set_fault(self, host: int, mode: str | None) -> None:
        """Put ``host`` into ``mode`` (one of ``MODES``), or back to normal with None."""
        if mode is not None and mode not in MODES:
            raise ValueError(f"mode={mode!r}: must be one of {', '.join(MODES)} or None")
        if not 0 <= host < len(self.addresses):
            raise ValueError(f"host={host!r}: the site has {len(self.addresses)} hosts")
        if mode == "down" and host not in self._down:
            server = self.servers[host]
            server.shutdown()
            server.server_close()
            self._down.add(host)
        elif mode != "down" and host in self._down:
            self._rebind(host)
            self._down.discard(host)
        if mode is None:
            self.faults.pop(host, None)
        else:
            self.faults[host] = mode

    def _rebind(self, host: int) -> None:
        """Listen again on the host's address and port (SO_REUSEADDR)."""
        server = ThreadingHTTPServer((self.addresses[host], self.port), _FaultyHandler)
        server.daemon_threads = True
        server.testbed = self  # type: ignore[attr-defined]
        server.host_index = host  # type: ignore[attr-defined]
        self.servers[host] = server
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                                  name=f"testbed-{self.addresses[host]}", daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self) -> None:
        for host in list(self._down):
            self._rebind(host)  # so that stop() closes a live server for every host
            self._down.discard(host)
        super().stop()


LAG_REPORTED = 0.02
"""A wake-up this many seconds late in the site's own process is logged: the site's arrival
times are as good as its process is on time."""


def _watch_lag(path: str, site: FaultySite) -> None:
    """Log (``path``, JSONL) each time a 10 ms sleep of the site's process overran."""
    import json
    import time

    with open(path, "a", encoding="utf-8") as out:
        while True:
            before = time.monotonic()
            time.sleep(0.01)
            late = time.monotonic() - before - 0.01
            if late > LAG_REPORTED:
                out.write(json.dumps({"real_time": before - (site._started_at or 0.0),
                                      "late_s": round(late, 4)}) + "\n")
                out.flush()


def serve(argv: list[str] | None = None) -> None:
    """Serve a ``FaultySite`` in this process (so that the crawlers' and the soak's own
    load never delays its clock): prints one JSON line (hosts, port, start), then reads
    commands from stdin, ``fault HOST MODE|none`` and ``stop`` (writes the truth file)."""
    import argparse
    import json
    import sys

    from frontier_rate.testbed import DAY

    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--truth", required=True)
    parser.add_argument("--pages", type=int, required=True)
    parser.add_argument("--hosts", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--acceleration", type=float, required=True)
    parser.add_argument("--rate-min", type=float, required=True, help="per simulated day")
    parser.add_argument("--rate-max", type=float, required=True, help="per simulated day")
    parser.add_argument("--crawl-delay", type=float, required=True, help="odd hosts, real s")
    options = parser.parse_args(argv)
    site = FaultySite(n_pages=options.pages, n_hosts=options.hosts, seed=options.seed,
                      acceleration=options.acceleration, rate_min=options.rate_min / DAY,
                      rate_max=options.rate_max / DAY, base_address=options.base,
                      crawl_delays=[options.crawl_delay if h % 2 else None
                                    for h in range(options.hosts)],
                      log_path=options.log, truth_path=options.truth)
    site.start()
    threading.Thread(target=_watch_lag, args=(options.log + ".lag", site), daemon=True).start()
    print(json.dumps({"hosts": site.hosts, "addresses": site.addresses, "port": site.port,
                      "started_at_wall": site.started_at_wall,
                      "pages": [site.page_url(i) for i in range(options.pages)]}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["fault"] and len(words) == 3:
            site.set_fault(int(words[1]), None if words[2] == "none" else words[2])
            print("ok", flush=True)
        elif words[:1] == ["stop"]:
            break
    site.stop()


if __name__ == "__main__":
    import sys as _sys

    _sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))
    serve()

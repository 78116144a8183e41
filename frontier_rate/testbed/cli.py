"""``python -m frontier_rate.testbed``: serve a test-bed until interrupted."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from collections.abc import Sequence

from frontier_rate.testbed.changes import CHANGE_MODELS, DAY, RATE_DISTRIBUTIONS
from frontier_rate.testbed.server import DATE_LIES, Testbed


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m frontier_rate.testbed",
        description="Serve a living-web test-bed on loopback addresses.",
    )
    p.add_argument("--pages", type=int, default=200, help="number of scored pages")
    p.add_argument("--hosts", type=int, default=4, help="number of hosts (loopback addresses)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--acceleration", type=float, default=3600.0,
                   help="simulated seconds per real second")
    p.add_argument("--model", default="poisson", choices=(*CHANGE_MODELS, "mixed"),
                   help="change model")
    p.add_argument("--rates", default="loguniform", choices=RATE_DISTRIBUTIONS,
                   help="distribution of the pages' change rates")
    p.add_argument("--rate-min-per-day", type=float, default=0.5)
    p.add_argument("--rate-max-per-day", type=float, default=50.0)
    p.add_argument("--churn-fraction", type=float, default=0.1)
    p.add_argument("--volatile-fraction", type=float, default=0.1)
    p.add_argument("--lying-hosts", type=float, default=0.0,
                   help="fraction of hosts whose Last-Modified lies (see --lie)")
    p.add_argument("--lie", default="now", choices=DATE_LIES,
                   help="what a lying host sends as Last-Modified")
    p.add_argument("--sitemap-true", type=float, default=0.0,
                   help="fraction of hosts whose sitemap gives each page's true last change")
    p.add_argument("--sitemap-lying", type=float, default=0.0,
                   help="fraction of hosts whose sitemap dates every page at the fetch time")
    p.add_argument("--feed", action="store_true",
                   help="serve an Atom feed of recent changes (/feed.xml) on one host")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port")
    p.add_argument("--base-address", default="127.0.0.2", help="first host address (127/8)")
    p.add_argument("--log", dest="log_path", help="append the request log here (JSONL)")
    p.add_argument("--truth", dest="truth_path", help="write the ground truth here on exit")
    p.add_argument("--duration", type=float, default=None,
                   help="stop after this many real seconds (default: until Ctrl-C)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Start a test-bed, print its host URLs, and serve until Ctrl-C, SIGTERM or ``--duration``.

    On the way out it writes the truth file (``--truth``) and closes the log.
    """
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    try:
        testbed = Testbed(
            n_pages=args.pages, n_hosts=args.hosts, seed=args.seed,
            acceleration=args.acceleration, rate_distribution=args.rates,
            rate_min=args.rate_min_per_day / DAY, rate_max=args.rate_max_per_day / DAY,
            change_model=args.model, port=args.port, base_address=args.base_address,
            churn_fraction=args.churn_fraction, volatile_fraction=args.volatile_fraction,
            log_path=args.log_path, truth_path=args.truth_path,
            lying_hosts=args.lying_hosts, lie=args.lie,
            sitemap_true=args.sitemap_true, sitemap_lying=args.sitemap_lying, feed=args.feed,
        )
    except ValueError as exc:
        print(f"error: {exc}")
        return 2
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
    with testbed:
        for url in testbed.seed_urls():
            print(url, flush=True)
        if testbed.feed_host is not None:
            print(f"feed: {testbed.feed_url()}", flush=True)
        stop.wait(args.duration)
        print(f"stopped at simulated t={testbed.sim_time():.0f} s after "
              f"{len(testbed.requests())} requests", flush=True)
    return 0

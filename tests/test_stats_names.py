"""Stats count what their names say (issue 33): a page's first fetch is no revisit, even
when an earlier run added the page (a resumed crawl)."""

from __future__ import annotations

import time

from frontier_rate.client.calls import Call
from frontier_rate.client.sending import Sender
from frontier_rate.engine import Frontier


def test_first_fetches_of_pages_an_earlier_run_added_are_not_revisits(redis_url, namespace):
    # pages believed to change 100 times a second: a revisit after 50 ms is worth it (issue 60)
    frontier = Frontier(redis_url, namespace=namespace, estimator="interval",
                        min_interval=0.01, min_host_delay=0.0, budget=1000.0, prior_rate=100.0)
    try:
        urls = [f"http://h{i}.test/p" for i in range(3)]
        frontier.add_many([(url, 1.0) for url in urls])  # "the earlier run"
        stats: dict[str, float] = {}

        def emit(name: str, value: float, replace: bool = False) -> None:
            stats[name] = value if replace else stats.get(name, 0) + value

        sender = Sender(emit)  # this run added nothing
        for round_ in range(2):
            time.sleep(0.05)
            leases = frontier.next_requests(10)
            assert len(leases) == 3, (round_, leases)
            sender.apply(frontier, [Call("observe", d, {"fingerprint": "x",
                                                        "fetched_at": time.time()})
                                    for d in leases])
            expected = {"first_fetches": 3} if round_ == 0 else {"first_fetches": 3,
                                                                  "revisits": 3}
            assert {k: stats.get(k, 0) for k in expected} == expected, stats
            assert stats.get("revisits", 0) == expected.get("revisits", 0), stats
    finally:
        frontier.close()

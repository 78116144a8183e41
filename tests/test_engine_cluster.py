"""The frontier on a real three-node Redis Cluster (redis+cluster:// URL).

Every script touches keys of one hash tag only, so Redis Cluster runs them;
this test starts three cluster-enabled redis-servers on 127.0.0.1
(``redis_servers.redis_cluster``) and runs a crawl cycle.
"""

from __future__ import annotations

import pytest
from redis_servers import redis_cluster  # noqa: I001

from frontier_rate import Frontier


@pytest.fixture(scope="module")
def cluster_url(tmp_path_factory):
    with redis_cluster(tmp_path_factory.mktemp("cluster")) as cluster:
        yield cluster.url


def test_crawl_cycle_on_redis_cluster(cluster_url):
    f = Frontier(cluster_url, namespace="cluster", estimator="sam", budget=1000.0,
                 min_host_delay=1.0, min_interval=10.0, max_interval=1000.0, seed=1)
    urls = [f"http://h{i}.example/{j}" for i in range(20) for j in range(3)]
    assert f.add_many(urls, now=0.0) == 60
    t, fetched = 0.0, 0
    while fetched < 200:
        got = f.next_requests(100, now=t)
        results = f.observe_many([(d, {"fingerprint": f"{d.url}{int(t) // 5}",
                                       "fetched_at": t}) for d in got])
        assert all(r.accepted for r in results)
        fetched += len(got)
        t = max(t + 1.0, f.next_due_time())
    stats = f.stats(now=t)
    assert stats["pages"] == 60 and stats["fetches"] == fetched
    assert stats["changes"] > 0 and stats["nu"] >= 0.0
    page = f.page(urls[0])
    assert page["fetches"] >= 2 and page["status"] in ("active", "leased")
    assert len(list(f.iter_pages())) == 60

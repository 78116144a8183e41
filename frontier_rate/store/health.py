"""What the Redis server under a frontier promises: eviction, persistence, role, clock.

``server_facts`` reads them (``CONFIG GET`` where the Redis user may, ``INFO``
otherwise; a Redis Cluster's every primary), ``warnings`` says what can lose a
frontier's data: a ``maxmemory-policy`` that evicts keys without a TTL (the
frontier sets none, so ``noeviction`` and the ``volatile-*`` policies are safe),
no persistence at all (a restart empties Redis), a read-only replica.
``EvictionWatch`` notices keys evicted while a frontier runs, and
``clock_offset`` measures how far this process's clock is from Redis's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import redis
from redis.cluster import RedisCluster

from frontier_rate.store.errors import redact_url

logger = logging.getLogger(__name__)

EVICTING = ("allkeys-lru", "allkeys-lfu", "allkeys-random")
"""maxmemory policies that may evict a frontier's keys (they have no TTL)."""


def _info(client: Any) -> list[dict[str, Any]]:
    """INFO of the server, or of every primary of a cluster."""
    if isinstance(client, RedisCluster):
        replies = client.info(target_nodes=RedisCluster.PRIMARIES)
        infos = list(replies.values()) if isinstance(replies, dict) and replies \
            and all(isinstance(v, dict) for v in replies.values()) else [replies]
        # A client that lived through a failover may still take the old primary, now a
        # replica, for one: a cluster's slots are served by its primaries only.
        return [i for i in infos if i.get("role") != "slave"] or infos
    return [client.info()]


def server_facts(client: Any) -> dict[str, Any]:
    """Eviction policy, persistence, role, memory and evicted keys of the server(s);
    "unknown" where the Redis user may not read them (ACL without INFO/CONFIG)."""
    facts: dict[str, Any] = {"maxmemory_policy": "unknown", "persistence": "unknown",
                             "role": "unknown", "maxmemory": None, "used_memory": None,
                             "evicted_keys": None, "redis_version": "unknown"}
    try:
        infos = _info(client)
    except redis.RedisError as exc:
        logger.debug("INFO refused: %s", exc)
        return facts
    policies = {str(i.get("maxmemory_policy", "unknown")) for i in infos}
    facts["maxmemory_policy"] = ",".join(sorted(policies))
    facts["role"] = ",".join(sorted({str(i.get("role", "unknown")) for i in infos}))
    facts["redis_version"] = ",".join(sorted({str(i.get("redis_version", "?")) for i in infos}))
    facts["maxmemory"] = min(int(i.get("maxmemory", 0)) for i in infos)
    facts["used_memory"] = sum(int(i.get("used_memory", 0)) for i in infos)
    facts["evicted_keys"] = sum(int(i.get("evicted_keys", 0)) for i in infos)
    aof = all(int(i.get("aof_enabled", 0)) for i in infos)
    save: str | None = None
    try:
        if isinstance(client, RedisCluster):
            saves = client.config_get("save", target_nodes=RedisCluster.PRIMARIES)
            values = [v.get("save", "") for v in saves.values()] if isinstance(saves, dict) \
                and all(isinstance(v, dict) for v in saves.values()) else [saves.get("save", "")]
            save = "" if any(not v for v in values) else values[0]
        else:
            save = client.config_get("save").get("save", "")
    except redis.RedisError as exc:  # an ACL without CONFIG: RDB save points unknown
        logger.debug("CONFIG GET save refused: %s", exc)
    if aof:
        facts["persistence"] = "aof" + ("+rdb" if save else "")
    elif save:
        facts["persistence"] = "rdb"
    elif save == "":
        facts["persistence"] = "off"
    else:
        facts["persistence"] = "unknown (no AOF; RDB save points not readable)"
    return facts


def warnings(facts: dict[str, Any], url: str | None) -> list[str]:
    """One sentence per way the server can lose a frontier's data or refuse its writes."""
    where = redact_url(url)
    out = []
    policy = facts.get("maxmemory_policy", "unknown")
    if any(p in EVICTING for p in policy.split(",")):
        out.append(f"Redis at {where} has maxmemory-policy {policy}: when it reaches maxmemory it "
                   "evicts keys, the frontier's too, and the frontier then stops (it does not run "
                   "on with half a namespace). Set maxmemory-policy noeviction: Redis then refuses "
                   "writes when full, and crawlers hold their results until it has room")
    if facts.get("persistence") == "off":
        out.append(f"Redis at {where} keeps nothing on disk (no AOF, no RDB save points): a "
                   "restart empties it and every frontier on it is lost. Set appendonly yes")
    if "slave" in str(facts.get("role", "")):
        out.append(f"Redis at {where} is a read-only replica: the frontier can be inspected "
                   "there, not run; point crawlers at the primary")
    return out


_WARNED: set[tuple[str, str]] = set()


def warn_once(facts: dict[str, Any], url: str | None) -> None:
    """Log each of ``warnings`` once per process and server (and, at INFO, that the
    server's eviction policy could not be read: an ACL without INFO)."""
    texts = [(logging.WARNING, text) for text in warnings(facts, url)]
    if facts.get("maxmemory_policy") == "unknown":
        texts.append((logging.INFO, f"the Redis user at {redact_url(url)} may not run INFO: the "
                      "frontier cannot tell whether Redis may evict its keys, nor notice it"))
    for level, text in texts:
        key = (redact_url(url), text)
        if key not in _WARNED:
            _WARNED.add(key)
            logger.log(level, "frontier-rate: %s", text)


class EvictionWatch:
    """Notices keys Redis evicted while a frontier ran under an evicting policy.

    ``check()`` reads INFO at most every ``every`` seconds (``force``: now) and returns
    a description of the evictions since the first reading (None while there were none,
    or when the policy never evicts, or INFO is refused).
    """

    def __init__(self, client: Any, every: float = 5.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.client, self.every, self.monotonic = client, every, monotonic
        self.baseline: int | None = None
        self.next_at = -1.0

    def check(self, force: bool = False) -> str | None:
        now = self.monotonic()
        if now < self.next_at and not force:
            return None
        self.next_at = now + self.every
        try:
            infos = _info(self.client)
        except redis.RedisError:
            return None
        evicted = sum(int(i.get("evicted_keys", 0)) for i in infos)
        policies = sorted({str(i.get("maxmemory_policy", "")) for i in infos})
        if self.baseline is None or evicted < self.baseline \
                or not any(p in EVICTING for p in policies):
            self.baseline = evicted  # first reading, counters reset, or a policy that never evicts
            return None
        if evicted > self.baseline:
            return (f"Redis evicted {evicted - self.baseline} keys under maxmemory-policy "
                    f"{','.join(policies)} while the frontier ran")
        return None


def clock_offset(client: Any, clock: Callable[[], float], samples: int = 3) -> tuple[float, float]:
    """(Redis's TIME minus ``clock()``, the round trip it was measured over): the sample
    with the shortest round trip of ``samples``."""
    best: tuple[float, float] | None = None
    for _ in range(samples):
        before = clock()
        seconds, micros = client.time()
        after = clock()
        offset = seconds + micros / 1e6 - (before + after) / 2
        trip = after - before
        if best is None or trip < best[1]:
            best = (offset, trip)
    assert best is not None
    return best


def kept_offset(kept: tuple[float, float] | None,
                measured: tuple[float, float]) -> tuple[float, float]:
    """Of the offset kept and one ``measured`` again (each ``(offset, round trip)`` from
    ``clock_offset``), the one to use from now on. A measurement is only known to within half
    its round trip (the answer may have waited on either leg), and one taken when the server
    or this machine is busy (right after a ``CLIENT PAUSE``, when every client's calls come
    back at once) has a long one. So the kept offset stays while it lies within the new
    measurement's bounds and was measured over a shorter round trip: the clocks did not move
    by more than the new measurement can tell. Otherwise the new one is taken (a clock
    stepped, or the server answering is another machine). Why: processes on one frontier
    space their requests to a host on their offsets to one shared clock, so an error in one
    process's offset shortens the gap between its requests and the others' (the bounds of
    a sample are Cristian's, Distributed Computing 3(3), 1989)."""
    if kept is None:
        return measured
    (old, old_trip), (new, new_trip) = kept, measured
    if old_trip < new_trip and abs(old - new) <= new_trip / 2:
        return kept
    return measured

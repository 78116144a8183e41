"""Reading a Redis Cluster's slot map again, the one redis-py internal the store uses.

The script runner sends its calls in plain per-node pipelines (redis-py refuses EVALSHA
and FCALL in cluster pipelines), which skip redis-py's handling of MOVED replies and of
a node that stopped answering: after a failover every call to the moved slots failed
until the process restarted. redis-py has no public call that reads the slot map again;
``RedisCluster.nodes_manager.initialize()`` is what its own command path calls on MOVED.
Guarded here, and listed in docs/ARCHITECTURE.md.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import redis

logger = logging.getLogger(__name__)


AFTER_ERROR_EVERY = 5.0
"""Seconds between two readings of the slot map after a node did not answer: while the
whole cluster is down each reading asks every known node (a connect timeout each), and
a call that failed should fail fast."""


def read_again(client: Any, after_error: bool = False) -> bool:
    """Read ``client``'s slot map and nodes from the cluster again; False (logged at
    DEBUG) where no node answered, this redis-py has no nodes manager, or (``after_error``:
    a node did not answer) the map was read less than ``AFTER_ERROR_EVERY`` s ago."""
    manager = getattr(client, "nodes_manager", None)
    initialize = getattr(manager, "initialize", None)
    if initialize is None:
        logger.debug("this redis-py's cluster client has no nodes_manager.initialize()")
        return False
    now = time.monotonic()
    if after_error and now < _read_at.get(id(client), -math.inf) + AFTER_ERROR_EVERY:
        return False
    _read_at[id(client)] = now
    try:
        initialize()
    except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException, OSError) as exc:
        logger.debug("the cluster's slots could not be read again: %s", exc)
        return False
    return True


_read_at: dict[int, float] = {}
"""id of a client -> when (monotonic) its slot map was last read again."""

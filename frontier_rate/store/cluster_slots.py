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
from typing import Any

import redis

logger = logging.getLogger(__name__)


def read_again(client: Any) -> bool:
    """Read ``client``'s slot map and nodes from the cluster again; False (logged at
    DEBUG) where no node answered or this redis-py has no nodes manager."""
    manager = getattr(client, "nodes_manager", None)
    initialize = getattr(manager, "initialize", None)
    if initialize is None:
        logger.debug("this redis-py's cluster client has no nodes_manager.initialize()")
        return False
    try:
        initialize()
    except (redis.exceptions.RedisError, OSError) as exc:
        logger.debug("the cluster's slots could not be read again: %s", exc)
        return False
    return True

"""The client both adapters drive a ``Frontier`` through: an ordered outbox, the sender thread, the circuit
breaker, lease handoff, the spool at close. May import ``engine``, ``store`` and ``math``."""

from frontier_rate.client.frontier_client import *  # noqa: F403 (the client's public names, as before the split)
from frontier_rate.client.frontier_client import __all__  # noqa: F401

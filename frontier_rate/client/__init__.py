"""The client both adapters drive a ``Frontier`` through: an ordered outbox, the sender thread, the circuit
breaker, lease handoff, the spool at close. May import ``engine``, ``store`` and ``math``.

The client's public names (``frontier_client.__all__``, listed again here and checked equal
by tests/test_layers.py) are imported on first use (PEP 562): a process that needs one
client module (the detection process needs ``outage``) does not import the engine."""

from __future__ import annotations

from typing import Any

__all__ = ["SETTLE_SLICE", "Call", "FrontierClient", "NewPage", "Stat", "status_reason",
           "result_meta"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        import frontier_rate.client.frontier_client as frontier_client

        return getattr(frontier_client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""The namespaces a Redis server holds, for ``frontier-rate stats`` without ``-n``.

Found by ``SCAN`` (never ``KEYS``) over the configuration hashes ``fr:{ns}:cfg``; each with
the project and spider that created it where recorded (``namespace.origin_key``).
"""

from __future__ import annotations

import re
from typing import Any

from frontier_rate.store.namespace import origin_key

_CFG = re.compile(rb"^fr:\{([A-Za-z0-9_.-]{1,64})\}:cfg$")


def list_namespaces(client: Any) -> list[dict[str, Any]]:
    """Every namespace on ``client``'s server, sorted: name, project, spider."""
    names = set()
    for key in client.scan_iter(match="fr:{*}:cfg", count=1000):
        found = _CFG.match(key if isinstance(key, bytes) else str(key).encode())
        if found:
            names.add(found.group(1).decode())
    rows = []
    for name in sorted(names):
        origin = client.hgetall(origin_key(name))
        decoded = {k.decode(): v.decode("utf-8", "replace") for k, v in origin.items()}
        rows.append({"namespace": name, "project": decoded.get("project", ""),
                     "spider": decoded.get("spider", "")})
    return rows

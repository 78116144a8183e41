"""A local file of frontier calls that Redis has not taken yet.

A crawler that closes while Redis is unreachable still holds fetch results
and newly found pages. Rather than lose them, the adapter writes them here as
JSON lines and the next crawl of the same namespace replays them: ``add`` is
idempotent, and ``observe`` / ``failed`` are accepted once per lease token,
so a replay never counts a fetch twice (a result whose lease has expired by
then is refused as stale and its page is simply fetched again).

Files are ``<directory>/<namespace>.<pid>.<time>.jsonl``; a reader claims a
file by renaming it, so two crawlers starting at once never both replay it.
Only JSON is read back: nothing is unpickled or evaluated.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from frontier_rate.engine import Dispatch

logger = logging.getLogger(__name__)

SUFFIX = ".jsonl"
CALL_KINDS = ("observe", "failed", "host_delay")


class Spool:
    """The spool files of one namespace in ``directory``."""

    def __init__(self, directory: str | os.PathLike, namespace: str) -> None:
        self.directory = Path(directory)
        self.namespace = namespace

    def save(self, entries: list[dict[str, Any]]) -> Path:
        """Write ``entries`` (JSON-serialisable dicts) to a new file; its path.

        The file appears complete or not at all (written aside, then renamed).
        Raises OSError or ValueError (an entry JSON cannot carry) on failure.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        name = f"{self.namespace}.{os.getpid()}.{time.time_ns()}"
        path = self.directory / (name + SUFFIX)
        partial = self.directory / (name + ".partial")
        try:
            with open(partial, "w", encoding="utf-8") as handle:
                for entry in entries:
                    handle.write(json.dumps(entry, allow_nan=False) + "\n")
            partial.replace(path)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        return path

    def claim(self) -> list[dict[str, Any]]:
        """Read and remove every spool file of the namespace; the entries in file order.

        A line that is not a JSON object is skipped with a WARNING naming the
        file and line, and that file is kept (renamed ``.bad``) for inspection.
        """
        entries: list[dict[str, Any]] = []
        if not self.directory.is_dir():
            return entries
        for path in sorted(self.directory.glob(f"{self.namespace}.*{SUFFIX}")):
            if not re.fullmatch(rf"{re.escape(self.namespace)}\.\d+\.\d+{re.escape(SUFFIX)}", path.name):
                continue  # another namespace whose name starts the same
            claimed = path.with_name(f"{path.name}.claimed-{os.getpid()}")
            try:
                path.rename(claimed)
            except OSError:  # another crawler claimed it first
                continue
            bad = False
            with open(claimed, encoding="utf-8", errors="replace") as handle:
                for number, line in enumerate(handle, 1):
                    try:
                        entry = json.loads(line)
                        if not isinstance(entry, dict):
                            raise ValueError("not a JSON object")
                    except ValueError as exc:
                        logger.warning("frontier-rate: skipping line %d of spool file %s: %s",
                                       number, path, exc)
                        bad = True
                        continue
                    entries.append(entry)
            if bad:
                claimed.replace(path.with_name(path.name + ".bad"))
            else:
                claimed.unlink()
        return entries



def page_entry(url: str, weight: float, meta: dict[str, Any] | None,
               priority: float = 0) -> dict[str, Any]:
    """A spool entry for a page not yet added."""
    entry = {"kind": "page", "url": url, "weight": weight, "meta": meta}
    if priority:
        entry["priority"] = priority
    return entry


def call_entry(kind: str, dispatch: Dispatch | None, args: dict[str, Any]) -> dict[str, Any]:
    """A spool entry for a held ``observe`` / ``failed`` / ``host_delay`` call.

    A bytes fingerprint (from a custom fingerprint function) is kept as hex.
    """
    args = dict(args)
    fingerprint = args.get("fingerprint")
    if isinstance(fingerprint, (bytes, bytearray)):
        args["fingerprint"], args["fingerprint_hex"] = None, bytes(fingerprint).hex()
    entry: dict[str, Any] = {"kind": kind, "args": args}
    if dispatch is not None:
        entry["dispatch"] = asdict(dispatch)
    return entry


def read_entry(entry: dict[str, Any]) -> tuple[str, Any, dict[str, Any]]:
    """(kind, dispatch or None, args) of a call entry, or ("page", (url, weight, meta,
    priority), {}).

    Raises ValueError naming what is wrong with an entry that cannot be used.
    """
    try:
        kind = entry["kind"]
        if kind == "page":
            return kind, (str(entry["url"]), float(entry["weight"]), dict(entry["meta"] or {}),
                          float(entry.get("priority", 0))), {}
        if kind not in CALL_KINDS:
            raise ValueError(f"unknown kind {kind!r}")
        args = dict(entry["args"])
        if args.get("fingerprint_hex") is not None:
            args["fingerprint"] = bytes.fromhex(args.pop("fingerprint_hex"))
        if kind != "host_delay" and "dispatch" not in entry:
            raise ValueError(f"a {kind} entry needs its dispatch")
        dispatch = Dispatch(**entry["dispatch"]) if "dispatch" in entry else None
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"unreadable spool entry ({type(exc).__name__}: {exc}): {entry!r:.200}") from None
    return kind, dispatch, args

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

from frontier_rate.client.calls import Call, NewPage, Stat
from frontier_rate.engine.records import Lease
from frontier_rate.engine.validation import parse_url
from frontier_rate.store.errors import redact_url

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
        path = self.new_path()
        partial = path.with_suffix(".partial")
        try:
            with open(partial, "w", encoding="utf-8") as handle:
                for entry in entries:
                    handle.write(json.dumps(entry, allow_nan=False) + "\n")
            partial.replace(path)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        return path

    def new_path(self) -> Path:
        """A new file's path (``<namespace>.<pid>.<time>.jsonl``, what ``claim`` reads); the
        directory is made if missing."""
        self.directory.mkdir(parents=True, exist_ok=True)
        return self.directory / f"{self.namespace}.{os.getpid()}.{time.time_ns()}{SUFFIX}"

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
               priority: float = 0, source: bool = False) -> dict[str, Any]:
    """A spool entry for a page not yet added (a ``NewPage``'s fields)."""
    entry = {"kind": "page", "url": url, "weight": weight, "meta": meta}
    if priority:
        entry["priority"] = priority
    if source:
        entry["source"] = True
    return entry


def call_entry(kind: str, lease: Lease | None, args: dict[str, Any]) -> dict[str, Any]:
    """A spool entry for a held ``observe`` / ``failed`` / ``host_delay`` call.

    A bytes fingerprint (from a custom fingerprint function) is kept as hex.
    """
    args = dict(args)
    fingerprint = args.get("fingerprint")
    if isinstance(fingerprint, (bytes, bytearray)):
        args["fingerprint"], args["fingerprint_hex"] = None, bytes(fingerprint).hex()
    entry: dict[str, Any] = {"kind": kind, "args": args}
    if lease is not None:
        entry["dispatch"] = asdict(lease)  # the key spools on disk have
    return entry


def read_entry(entry: dict[str, Any]) -> tuple[str, Any, dict[str, Any]]:
    """(kind, lease or None, args) of a call entry, or ("page", (url, weight, meta,
    priority, source), {}).

    Raises ValueError naming what is wrong with an entry that cannot be used.
    """
    try:
        kind = entry["kind"]
        if kind == "page":
            return kind, (str(entry["url"]), float(entry["weight"]), dict(entry["meta"] or {}),
                          float(entry.get("priority", 0)), entry.get("source") is True), {}
        if kind not in CALL_KINDS:
            raise ValueError(f"unknown kind {kind!r}")
        args = dict(entry["args"])
        if args.get("fingerprint_hex") is not None:
            args["fingerprint"] = bytes.fromhex(args.pop("fingerprint_hex"))
        if kind != "host_delay" and "dispatch" not in entry:
            raise ValueError(f"a {kind} entry needs its lease")
        lease = Lease(**entry["dispatch"]) if "dispatch" in entry else None
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"unreadable spool entry ({type(exc).__name__}: {exc}): {entry!r:.200}") from None
    return kind, lease, args


def entries_of(calls: list[Call]) -> list[dict[str, Any]]:
    """The spool entries of the client's outbox: its new pages first, then its held calls."""
    entries = [page_entry(*page) for call in calls if call.kind == "add" for page in call.pages]
    return entries + [call_entry(call.kind, call.lease, call.args)
                      for call in calls if call.kind not in ("add", "hint")]


def calls_of(entries: list[dict[str, Any]], namespace: str) -> tuple[list[Call], int]:
    """The client's calls of claimed spool entries, in their order (consecutive pages as
    one add, every call held: Redis has not taken it), and how many are fetch results.
    An unusable entry is skipped with a WARNING."""
    calls: list[Call] = []
    pages: list[NewPage] = []
    results = 0
    for entry in entries:
        try:
            kind, item, args = read_entry(entry)
            if kind == "page":
                parse_url(item[0])
        except ValueError as exc:
            logger.warning("frontier-rate: skipping a spool entry of namespace %r: %s",
                           namespace, exc)
            continue
        if kind == "page":
            pages.append(item)
            continue
        if pages:
            calls.append(Call("add", pages=pages, held=True))
            pages = []
        calls.append(Call(kind, item, args, held=True))
        results += kind != "host_delay"
    if pages:
        calls.append(Call("add", pages=pages, held=True))
    return calls, results


class OutboxSpool:
    """The client's calls Redis has not taken, carried to the next crawl of its namespace:
    ``save`` at close, ``replay`` at open (logged, and counted as stats)."""

    def __init__(self, directory: str, namespace: str, redis_url: str | None,
                 stat: Stat) -> None:
        self.spool = Spool(directory, namespace)
        self.namespace, self.redis_url, self._stat = namespace, redis_url, stat

    def save(self, calls: list[Call], state: str, lease_timeout: float) -> bool:
        """Write ``calls`` (closing while Redis ``state``: "is unreachable", ...); whether
        they are in the spool (False: none to write, or the file could not be written)."""
        entries = entries_of(calls)
        if not entries:
            return False
        results = sum(1 for call in calls if call.kind in ("observe", "failed"))
        pages = sum(len(call.pages) for call in calls if call.kind == "add")
        try:
            path = self.spool.save(entries)
        except (OSError, ValueError) as exc:
            logger.error("frontier-rate: could not write the spool in %s (%s): %d fetch results "
                         "lost (their leases expire after %.0f s and those pages are fetched "
                         "again) and %d new pages not added", self.spool.directory, exc, results,
                         lease_timeout, pages)
            self._stat("lost_results", results, True)
            return False
        self._stat("spooled", len(entries), True)
        logger.warning(
            "frontier-rate: closing while Redis at %s %s: %d fetch results and %d new "
            "pages saved to %s; the next crawl of namespace %r replays them (results whose lease "
            "has expired by then, after %.0f s, are refused and those pages fetched again)",
            redact_url(self.redis_url), state, results, pages, path, self.namespace,
            lease_timeout)
        return True

    def replay(self) -> list[Call]:
        """The calls an earlier crawl of the namespace could not give Redis (claimed)."""
        entries = self.spool.claim()
        if not entries:
            return []
        calls, results = calls_of(entries, self.namespace)
        pages = sum(len(call.pages) for call in calls if call.kind == "add")
        logger.info("frontier-rate: replaying %d results and %d new pages an earlier crawl of "
                    "namespace %r could not give Redis", results, pages, self.namespace)
        self._stat("spool_replayed", results + pages, False)
        return calls


class OutageJournal:
    """The calls held through an outage, appended to a spool file as they are held, so that
    a crawler killed before Redis came back (kill -9, a crash) loses none of them: the next
    crawl of the namespace replays the file as any spool (issue 63: a crawler killed at the
    end of a 22-s Cluster outage lost the three results it held). Replaying a call that
    reached Redis after all does nothing (``observe`` / ``failed`` once per lease token,
    ``add`` idempotent). The file is removed once the held calls reach Redis, or once the
    close wrote them to the spool as usual."""

    def __init__(self, directory: str, namespace: str) -> None:
        self.spool = Spool(directory, namespace)
        self.path: Path | None = None
        """This outage's file, from its first write until ``drop``."""

    def append(self, calls: list[Call]) -> None:
        """Append the calls not written yet (the held outbox, oldest first: those written
        are a prefix of it). A file claimed by another crawler meanwhile is begun anew;
        raises OSError or ValueError as ``Spool.save`` does."""
        fresh = [call for call in calls if not call.journaled]
        entries = entries_of(fresh)
        if self.path is None:
            self.path = self.spool.new_path()
        if entries:
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write("".join(json.dumps(entry, allow_nan=False) + "\n"
                                     for entry in entries))
        for call in fresh:
            call.journaled = True

    def drop(self) -> None:
        """The held calls are in Redis or in the close's spool file: remove this file."""
        if self.path is not None:
            self.path.unlink(missing_ok=True)
            self.path = None

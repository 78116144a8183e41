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
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

SUFFIX = ".jsonl"


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


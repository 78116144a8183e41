"""A page's last detection, as ``frontier-rate inspect URL`` shows it (issue 59, item 6).

With the pages' detection memories in Redis (``FRONTIER_RATE_SHARED_PAGE_MEMORY``), each
``"content"`` detection that parsed the page (not the same bytes as its last copy again)
also writes one small record of what it decided and why to its shard's capped log of recent
detections (``Keys.last_detections``, store/detection_memory.py): how many segments the copy had,
how many changed and how many differences were ignored, how many of its segments the host's
learned masks hid (boilerplate, volatile blocks) and how many sat in the host's volatile
slots, and which content rule applied (the selector, the number of ignore-text patterns).
Counts and a short selector only: a record is bounded (``MAX_SELECTOR``; under 400 bytes),
whatever the page. It is JSON, read back with ``json.loads`` (never evaluated).
"""

from __future__ import annotations

import json
import time
from typing import Any

from frontier_rate.detection.change_detection import ContentDetector, Detection
from frontier_rate.detection.content_rules import ContentRule
from frontier_rate.detection.host_mask import host_of

MAX_SELECTOR = 64
"""Characters of a content selector, or of the reason an answer was no copy, kept in a
record (a longer one ends with "...")."""


def explain(detection: Detection, detector: ContentDetector | None, url: str,
            rule: ContentRule | None) -> dict[str, Any]:
    """The record of ``detection`` of ``url`` (module docstring); ``detector``: the
    ``"content"`` detector that made it, whose memory of the page and mask of its host say
    what the masks hid (None: not known)."""
    record: dict[str, Any] = {
        "at": round(time.time(), 3), "fingerprint": detection.fingerprint,
        "not_content": _short(detection.reason), "segments": detection.segments,
        "changed_segments": detection.changed_segments,
        "ignored_segments": detection.ignored,
    }
    masked = slots = mask_size = 0
    if detector is not None and detection.fingerprint is not None:
        memory = detector._pages.get(url)
        host = detector._hosts.get(host_of(url))
        if memory is not None and host is not None:
            hashes = list(memory.hashes)
            masked = sum(map(host.masked.__contains__, hashes))
            slots = len(host.in_volatile_slots(hashes))
            mask_size = len(host.masked)
    record.update({"host_masked_segments": masked, "host_slot_segments": slots,
                   "host_mask_size": mask_size})
    record["content_selector"] = _short(rule.select if rule is not None else None)
    record["ignore_text_patterns"] = len(rule.ignore_text) if rule is not None else 0
    return record


def _short(text: str | None) -> str | None:
    """``text`` cut to ``MAX_SELECTOR`` characters."""
    if text is None or len(text) <= MAX_SELECTOR:
        return text
    return text[:MAX_SELECTOR - 3] + "..."


def encode(record: dict[str, Any]) -> bytes:
    """The bytes stored for ``record``."""
    return json.dumps(record, separators=(",", ":")).encode("utf-8")


def decode(data: bytes | None) -> dict[str, Any] | None:
    """A stored record, or None (none stored, or not a record: another version, damaged)."""
    if data is None:
        return None
    try:
        found = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
    return found if isinstance(found, dict) else None

"""A fetched response as the frontier's evidence: what both adapters hand to the client.

An adapter translates its framework's response into status, headers, body and URL;
``outcome`` turns them into either an observation (2xx: the body's fingerprint; 304:
unchanged) with the validators that may be sent back and the answer's ``Date``, or a
failure (any other status, or a 2xx that ``Fingerprinter.detect`` finds is no copy of
the page: a bot wall, an empty or an error page). One function, so the Scrapy scheduler and the Frontera
backend cannot record the same answer differently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from frontier_rate.client.frontier_client import status_reason
from frontier_rate.detection.change_detection import Detection
from frontier_rate.detection.content_rules import ContentRule
from frontier_rate.detection.fingerprint import Fingerprinter, header_value
from frontier_rate.detection.not_content import wall_like
from frontier_rate.engine.validation import MAX_VALIDATOR_LENGTH

if TYPE_CHECKING:
    from frontier_rate.engine.frontier import Lease

VALIDATORS = ("ETag", "Last-Modified")

_PRINTABLE_ASCII = re.compile(r"[\x20-\x7e]+")


def clean_validator(value: str | None) -> str | None:
    """``value`` if it may go back verbatim in If-None-Match / If-Modified-Since, else None.

    Only printable ASCII (space to ``~``) up to the engine's
    ``MAX_VALIDATOR_LENGTH``: no control character (CR, LF, NUL ...) can end
    up in a request header, and the value sent is byte for byte the one the
    server sent. A validator with other bytes (legal but rare) means no
    conditional request for that page; change detection still works.
    """
    if not isinstance(value, str) or not value or len(value) > MAX_VALIDATOR_LENGTH:
        return None
    return value if _PRINTABLE_ASCII.fullmatch(value) else None


@dataclass(frozen=True)
class Outcome:
    """``kind`` "observe" (``args``: ``Frontier.observe`` keywords, ``fetched_at``
    included) or "failed" (``args``: ``reason``, ``status``); ``bad_validators``: the
    validator headers the server sent that cannot be sent back (not printable ASCII of at
    most ``engine.MAX_VALIDATOR_LENGTH`` characters), as (name, value)."""

    kind: str
    args: dict[str, Any]
    bad_validators: list[tuple[str, str]] = field(default_factory=list)

    @property
    def not_modified(self) -> bool:
        return bool(self.args.get("not_modified"))


def outcome(lease: Lease, status: int, headers: Any, body: bytes, url: str,
            fingerprinter: Fingerprinter, now: float, *, truncated: bool = False,
            detection: Detection | None = None, rule: ContentRule | None = None,
            wall: bool | None = None) -> Outcome:
    """The evidence one answer to ``lease`` gives (see the module docstring).

    ``headers``: any mapping ``fingerprint.header_value`` reads (Scrapy ``Headers``, a
    dict); ``truncated``: the download was cut at ``max_body`` (the fingerprint then
    covers the body received plus the declared Content-Length); ``detection``: the
    body's ``Detection`` when it was made elsewhere (a detection process), else made here;
    ``rule``: the page's ``ContentRule`` (what counts on it), for a detection made here;
    ``wall``: whether the body reads like a bot wall (``not_content.wall_like``), when that
    was worked out with ``detection``, else worked out here.
    """
    if not (200 <= status < 300 or status == 304):
        return Outcome("failed", {"reason": status_reason(status), "status": status})
    bad: list[tuple[str, str]] = []
    validators: dict[str, str | None] = {}
    for name in VALIDATORS:
        value = header_value(headers, name)
        validators[name] = clean_validator(value)
        if value and validators[name] is None:
            bad.append((name, value))
    args: dict[str, Any] = {
        "status": status, "fetched_at": now, "etag": validators["ETag"],
        "last_modified": validators["Last-Modified"], "served_at": header_value(headers, "Date")}
    if status == 304:
        args["not_modified"] = True
        args["etag"] = args["etag"] or clean_validator(lease.etag)
        args["last_modified"] = args["last_modified"] or clean_validator(lease.last_modified)
    else:
        if detection is None:
            detection = fingerprinter.detect(
                body, url, headers, truncated=truncated,
                full_length=content_length(headers) if truncated else None, rule=rule)
        if detection.fingerprint is None:  # a bot wall, empty or error page: no copy
            return Outcome("failed", {"reason": f"not content: {detection.reason}",
                                      "status": status})
        args["fingerprint"] = detection.fingerprint
        if wall is None:
            wall = wall_like(body, header_value(headers, "Content-Type"))
        if wall:  # taken as a copy, but it may be a wall: no validators
            args["etag"] = args["last_modified"] = None
    return Outcome("observe", args, bad)


def content_length(headers: Any) -> int | None:
    """The declared Content-Length as a non-negative int, or None."""
    value = header_value(headers, "Content-Length")
    try:
        length = int(value) if value is not None else -1
    except ValueError:
        return None
    return length if length >= 0 else None

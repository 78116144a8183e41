"""The frontier's errors, and how an error Redis answers becomes one of them.

Every error the package raises on purpose is a ``FrontierError``. Those that
say Redis did not carry out a call are ``RedisFault``s: unreachable, writes
refused (out of memory, a read-only replica, failing persistence), an ACL
refusal, a cluster that could not route a call, a namespace that is gone.
Each message names the condition and the Redis URL without its password, so a
crawler can log it as it is and hold its results until Redis takes them again
(``client.FrontierClient``). ``translate`` maps redis-py's exceptions, whose
text names a pipeline position or a script hash, to these.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit

import redis

NAMESPACE_LOST = "FRLOST"
"""Error reply prefix of a shard script that found its namespace marker gone (lua/lib.lua)."""


class FrontierError(Exception):
    """Base class of the errors this package raises on purpose."""


class RedisFault(FrontierError):
    """Redis did not carry out a call; the message names the condition and the URL.

    ``condition`` is the short form for logs ("unreachable", "refused writes: out of
    memory", ...). A script call is applied whole or not at all, so a call made of
    one script changed nothing; the message of a call of several says so.
    """

    condition = "failed"

    def __init__(self, message: str, *, condition: str | None = None) -> None:
        super().__init__(message)
        if condition is not None:
            self.condition = condition


class RedisUnavailable(RedisFault):
    """Redis could not be reached or refused us; the message names the URL (no password)."""

    condition = "unreachable"


class RedisAuthenticationFailed(RedisUnavailable):
    """Redis refused this client's password or user (AUTH): waiting for it does not help,
    unlike the outages ``RedisUnavailable`` otherwise says."""


class RedisRefused(RedisFault):
    """Redis refused writes: out of memory (maxmemory under ``noeviction``), a read-only
    replica (or a demoted primary), or persistence failing (MISCONF)."""

    condition = "refused writes"


class RedisPermissionDenied(RedisFault, PermissionError):
    """Redis refused a command under its ACL rules (NOPERM): the Redis user may not touch
    this namespace's keys. The message names the URL (no password) and the namespace."""

    condition = "refused access (ACL)"


class RedisClusterError(RedisFault):
    """A Redis Cluster could not serve a call (CLUSTERDOWN, a slot moving, no node for it)."""

    condition = "cluster error"


class NamespaceLost(RedisFault):
    """The namespace's data is gone or was replaced: Redis was emptied (FLUSHDB,
    FLUSHALL, a restart without persistence), evicted its keys, or another process
    created the namespace anew. The frontier stops using it rather than run on with
    half a namespace; the message says what a user can do."""

    condition = "namespace lost"


class SettingsMismatch(FrontierError, ValueError):
    """A process opened a namespace with settings other than the ones it stores."""


class UnknownNamespace(FrontierError, LookupError):
    """``Frontier.attach`` found nothing stored under the namespace."""


class NoEmbeddedData(UnknownNamespace):
    """An inspecting caller asked for the embedded Redis of a data directory that holds none
    (a misspelt ``FRONTIER_RATE_DATA_DIR``): nothing is started or created there."""


def redact_url(url: str | None) -> str:
    """The URL with any password replaced by ``***`` (userinfo and ``?password=``)."""
    if url is None:
        return "<embedded redis>"
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable redis URL>"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, hostport = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0] if ":" in userinfo else ""
        netloc = f"{user}:***@{hostport}" if ":" in userinfo else f"***@{hostport}"
    query = parts.query
    if query:
        pairs = [(k, "***" if k.lower() == "password" else v)
                 for k, v in parse_qsl(query, keep_blank_values=True)]
        query = urlencode(pairs, safe="*")
    text = f"{parts.scheme}://{netloc}{parts.path}"
    if query:
        text += "?" + query
    return text + ("#" + parts.fragment if parts.fragment else "")


def without_url(exc: BaseException, url: str) -> str:
    """What Redis answered (``exc``), without the redacted ``url`` a frontier error's
    message names already ("... at URL: reason"), for a log line that names the URL itself."""
    text = str(exc)
    return text.split(f" at {url}: ", 1)[1] if f" at {url}: " in text else text


REFUSALS = (
    # (marker in the error text, condition, what it means and what to do)
    ("OOM", "out of memory",
     "its used memory is over maxmemory and maxmemory-policy does not evict: free memory, "
     "raise maxmemory, or delete namespaces no longer used"),
    ("READONLY", "read-only replica",
     "the URL points to a replica, or its primary was demoted: point the frontier at the "
     "current primary"),
    ("MISCONF", "persistence failing (MISCONF)",
     "Redis stops writes while it cannot save its RDB snapshot "
     "(stop-writes-on-bgsave-error): check its disk and its log"),
)
CLUSTER_MARKERS = ("CLUSTERDOWN", "TRYAGAIN", "MOVED", "ASK", "MASTERDOWN", "CROSSSLOT")
_SCRIPT_PREFIX = re.compile(r"^(?:Command # \d+ \(.*?\) of pipeline caused error: )?"
                            r"(?:Error running script \(call to \w+\): )?"
                            r"(?:@user_script:\d+: )*(?:@user_script: \d+: )?-?", re.S)


def error_text(exc: BaseException) -> str:
    """The server's own words of a redis-py error: without the pipeline position, the
    command's arguments and the script wrapper redis-py and Redis 6 put around them."""
    text = str(exc)
    cut = _SCRIPT_PREFIX.match(text)
    if cut:
        text = text[cut.end():]
    return text.split("\n", 1)[0].strip()


def _marker(exc: BaseException, text: str) -> str:
    """The error code (OOM, READONLY, ...) of a Redis error, wherever redis-py put it."""
    if isinstance(exc, redis.exceptions.OutOfMemoryError):
        return "OOM"
    if isinstance(exc, redis.exceptions.ReadOnlyError):
        return "READONLY"
    if isinstance(exc, redis.exceptions.NoScriptError):
        return "NOSCRIPT"
    if isinstance(exc, redis.exceptions.NoPermissionError):
        return "NOPERM"
    if isinstance(exc, (redis.exceptions.ClusterDownError, redis.exceptions.TryAgainError,
                        redis.exceptions.MovedError, redis.exceptions.AskError,
                        redis.exceptions.MasterDownError, redis.exceptions.SlotNotCoveredError,
                        redis.exceptions.ClusterCrossSlotError)):
        return "CLUSTER"
    word = text.split(" ", 1)[0].lstrip("-").upper()
    if word in CLUSTER_MARKERS:
        return "CLUSTER"
    if word.startswith(NAMESPACE_LOST):
        return NAMESPACE_LOST
    return word


def lost_message(url: str | None, namespace: str, detail: str) -> str:
    """The message of ``NamespaceLost``: what happened, and what a user can do."""
    return (f"namespace {namespace!r} at {redact_url(url)} is gone: {detail}. Redis was emptied "
            "(FLUSHDB, FLUSHALL, a restart without persistence), evicted the frontier's keys, or "
            "another process created the namespace anew. This frontier stops using it and holds "
            "its results (a crawl spools them at close). Restore Redis's data and start again, or "
            f"start afresh: 'frontier-rate drop -n {namespace}' deletes what is left")


def _lost_detail(text: str) -> str:
    """What a shard script's FRLOST reply (lua/lib.lua) says it found."""
    parts = text.split(" ")
    shard = parts[1] if len(parts) > 1 else "?"
    found = parts[2] if len(parts) > 2 else ""
    if not found:
        return f"its shard {shard} has lost its marker"
    if found.startswith("x"):
        return f"its shard {shard} is marked damaged ({found[1:].lstrip('-') or 'evicted'})"
    return f"its shard {shard} belongs to a namespace created anew since this frontier opened"


def translate(exc: BaseException, url: str | None, what: str, *, namespace: str = "",
              applied: str = "nothing of it was applied") -> FrontierError | None:
    """The ``FrontierError`` for a redis-py error raised during ``what`` (None for any
    other exception, and for an ACL refusal, which the caller names with its namespace).
    ``applied`` says what of the call took effect when Redis refused it (a call of
    several script calls says each was applied whole or not at all)."""
    where = redact_url(url)
    if isinstance(exc, FrontierError):
        return exc
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
        reason = type(exc).__name__
        if isinstance(exc, redis.exceptions.BusyLoadingError):
            reason = "BusyLoadingError: Redis is loading its data set"
        return RedisUnavailable(f"lost Redis at {where}: {reason}")
    if isinstance(exc, redis.exceptions.RedisClusterException):  # no RedisError: no node answered
        return RedisUnavailable(f"lost Redis at {where}: {error_text(exc)}")
    if isinstance(exc, redis.exceptions.ClusterError) and not isinstance(exc, redis.ResponseError):
        return RedisClusterError(f"Redis Cluster at {where} could not serve {what}: "
                                 f"{error_text(exc)}; {applied}",
                                 condition=f"cluster error: {error_text(exc)}")
    if not isinstance(exc, redis.RedisError):
        return None
    text = error_text(exc)
    marker = _marker(exc, text)
    for code, condition, meaning in REFUSALS:
        if marker == code:
            return RedisRefused(f"Redis at {where} refused writes: {condition} ({what}: "
                                f"{applied}); {meaning}",
                                condition=f"refused writes: {condition}")
    if marker == NAMESPACE_LOST:
        return NamespaceLost(lost_message(url, namespace, _lost_detail(text)))
    if marker == "NOPERM":
        return None  # the caller names the namespace (RedisPermissionDenied)
    if marker == "CLUSTER":
        return RedisClusterError(f"Redis Cluster at {where} could not serve {what}: {text}; "
                                 f"{applied}", condition=f"cluster error: {text}")
    if marker == "NOSCRIPT":
        return RedisFault(f"Redis at {where} lost the frontier's Lua scripts again right after "
                          f"they were loaded ({what}: {applied}); is something running SCRIPT "
                          "FLUSH, or does a proxy spread calls over several servers?",
                          condition="lost the Lua scripts")
    if marker == "BUSY":
        return RedisUnavailable(f"lost Redis at {where}: busy running a script ({text})")
    return RedisFault(f"Redis at {where} answered an error to {what}: {text} ({applied})",
                      condition=f"error: {text}")

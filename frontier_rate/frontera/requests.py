"""How a Frontera request becomes a stored page and back: the request as JSON (bytes, tuples and
bytes-keyed dicts tagged by ``pack``, never pickled), the lease it carries, one-off fingerprints.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import math
from typing import Any
from urllib.parse import urlsplit

from frontera.core.models import Request as FrontierRequest
from w3lib.url import canonicalize_url

from frontier_rate.crawl.settings import (
    DONT_REVISIT_KEY,
    WEIGHT_KEY,
    page_weight,
)
from frontier_rate.engine.frontier import Lease, parse_url
from frontier_rate.renamed import resolve

logger = logging.getLogger(__name__)



LEASE_KEY = "frontier_rate_dispatch"
"""Meta key (str in Scrapy meta, bytes in frontera meta) that carries the lease of a fetch."""

RESULT_KEY = b"frontier_rate"
"""Frontera response meta key that ``page_crawled`` fills (``client.result_meta``)."""

_PER_FETCH_META = frozenset({
    LEASE_KEY, "download_slot", "download_latency", "download_timeout", "redirect_urls",
    "redirect_times", "redirect_ttl", "redirect_reasons", "retry_times", "_scheme_proxy",
    "frontier_request", "frontier_rate",
})
"""Scrapy meta keys that describe one fetch: never stored with a page."""

_PER_FETCH_FRONTERA_META = frozenset({LEASE_KEY.encode(), RESULT_KEY})
"""Frontera meta keys (bytes) that describe one fetch: never stored with a page."""

_CONDITIONAL = ("if-none-match", "if-modified-since")

PACK_DEPTH = 64
"""Deepest nesting ``pack`` stores (deeper, or a cycle: ValueError)."""


def page_meta(request: FrontierRequest) -> dict[str, Any]:
    """The JSON dict stored with a page so that a revisit rebuilds ``request`` as given.

    ``{"fr": {"m": meta, "h": headers, "c": cookies, "b": body}}``, each
    ``pack``-ed and present only when not empty: every frontera meta key (the
    per-fetch lease and result keys dropped, and in ``meta[b"scrapy_meta"]``
    the per-fetch Scrapy keys), headers without the conditional ones the
    frontier sets itself. Raises ValueError naming the first value that cannot
    be stored (``meta['key']`` for Scrapy meta, ``cb_kwargs['key']``, else
    ``frontera meta[b'key']``, ``headers``, ``cookies``, ``body``).
    """
    packed: list[tuple[Any, Any]] = []
    for key, value in dict(request.meta or {}).items():
        if key in _PER_FETCH_FRONTERA_META:
            continue
        if key == b"scrapy_meta" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in _PER_FETCH_META}
            what = "meta"
        elif key == b"scrapy_cb_kwargs":
            what = "cb_kwargs"
        else:
            what = f"frontera meta[{key!r}]"
        packed.append((_pack(key, f"frontera meta key {key!r}", 1), _pack(value, what, 1)))
    headers = {name: value for name, value in dict(request.headers or {}).items()
               if _text(name).lower() not in _CONDITIONAL}
    stored: dict[str, Any] = {}
    if packed:
        stored["m"] = _pack_dict(packed)
    if headers:
        stored["h"] = pack(headers, "headers")
    if request.cookies:
        stored["c"] = pack(dict(request.cookies), "cookies")
    if request.body is not None and not (isinstance(request.body, str) and request.body == ""):
        stored["b"] = pack(request.body, "body")
    return {"fr": stored}


def page_request(url: str, stored: dict[str, Any] | None,
                 request_model: type[FrontierRequest] = FrontierRequest) -> FrontierRequest:
    """The GET request a page's stored meta rebuilds (``page_meta``'s inverse).

    No lease and no validators (``RevisitBackend`` adds them). Pages stored
    before the ``fr`` format (keys ``cb``/``eb``/``kw``/``m``/``h``/``c``) are
    rebuilt as scrapy-frontera requests, as they were then. ValueError if the
    stored value is not one ``page_meta`` writes.
    """
    stored = stored or {}
    if "fr" not in stored:
        return _legacy_request(url, stored, request_model)
    fields = stored["fr"]
    if not isinstance(fields, dict):
        raise ValueError(f"'fr' is a {type(fields).__name__}, not an object")
    try:
        meta, headers, cookies = (unpack(fields.get(key, {})) for key in ("m", "h", "c"))
        body = unpack(fields["b"]) if "b" in fields else ""
    except RecursionError:
        raise ValueError("nested too deeply") from None
    for name, value in (("meta", meta), ("headers", headers), ("cookies", cookies)):
        if not isinstance(value, dict):
            raise ValueError(f"{name} is a {type(value).__name__}, not a dict")
    headers = {name: value for name, value in headers.items()
               if _text(name).lower() not in _CONDITIONAL}
    return request_model(url, method=b"GET", headers=headers, cookies=cookies, meta=meta,
                         body=body)


def _legacy_request(url: str, stored: dict[str, Any],
                    request_model: type[FrontierRequest]) -> FrontierRequest:
    """A request from the JSON keys earlier versions stored (scrapy-frontera's fields only)."""
    headers = {name.encode("latin-1"): [v.encode("latin-1") for v in values]
               for name, values in (stored.get("h") or {}).items()
               if name.lower() not in _CONDITIONAL}
    callback, errback = stored.get("cb"), stored.get("eb")
    meta = {
        b"scrapy_callback": callback.encode() if callback else None,
        b"scrapy_errback": errback.encode() if errback else None,
        b"scrapy_cb_kwargs": dict(stored.get("kw") or {}),
        b"scrapy_meta": dict(stored.get("m") or {}),
        b"origin_is_frontier": True,
    }
    return request_model(url, method=b"GET", headers=headers,
                         cookies=dict(stored.get("c") or {}), meta=meta)


_BYTES, _TUPLE, _BYTES_KEYS, _PAIRS = "$b", "$t", "$k", "$d"
_TAGS = frozenset({_BYTES, _TUPLE, _BYTES_KEYS, _PAIRS})


def pack(value: Any, what: str = "value") -> Any:
    """``value`` as JSON that ``unpack`` turns back into an equal value of the same types.

    JSON's own types pass as they are; the rest are one-key objects:
    ``{"$b": base64}`` bytes, ``{"$t": [...]}`` a tuple, ``{"$k": {text: ...}}``
    a dict whose keys are all UTF-8 bytes (frontera's meta and headers),
    ``{"$d": [[key, value], ...]}`` any other dict (int keys, keys starting
    with ``$``). Why not pickle: Redis data is never unpickled. Anything else
    (sets, objects, NaN) raises ValueError naming ``what``.
    """
    return _pack(value, what, 0)


def _pack(value: Any, what: str, depth: int) -> Any:
    if depth > PACK_DEPTH:
        raise ValueError(f"{what} is nested deeper than {PACK_DEPTH} levels (or contains itself)")
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{what} is {value!r}, which JSON cannot carry")
        return value
    if isinstance(value, bytes):
        return {_BYTES: base64.b64encode(value).decode("ascii")}
    if isinstance(value, list):
        return [_pack(item, f"{what}[{i}]", depth + 1) for i, item in enumerate(value)]
    if isinstance(value, tuple):
        return {_TUPLE: [_pack(item, f"{what}[{i}]", depth + 1) for i, item in enumerate(value)]}
    if isinstance(value, dict):
        return _pack_dict([(_pack(key, f"{what} key {key!r}", depth + 1),
                            _pack(item, f"{what}[{key!r}]", depth + 1))
                           for key, item in value.items()])
    raise ValueError(
        f"{what} cannot be stored ({type(value).__name__}); frontier-rate stores requests as "
        "JSON in Redis (never pickle): str, bytes, numbers, bool, None and lists, tuples and "
        "dicts of them. Store an id or a plain value instead, or set "
        f"meta[{DONT_REVISIT_KEY!r}]=True for a one-off request."
    )


def _pack_dict(items: list[tuple[Any, Any]]) -> Any:
    """A dict from packed (key, value) pairs: a plain object when every key is text."""
    keys = [key for key, _ in items]
    if all(isinstance(key, str) and not key.startswith("$") for key in keys):
        return dict(items)
    texts = [_utf8(key[_BYTES]) if isinstance(key, dict) and _BYTES in key else None
             for key in keys]
    if all(text is not None and not text.startswith("$") for text in texts):
        return {_BYTES_KEYS: {text: value for text, (_, value) in zip(texts, items, strict=True)}}
    return {_PAIRS: [[key, value] for key, value in items]}


def _utf8(encoded: str) -> str | None:
    try:
        return base64.b64decode(encoded).decode("utf-8")
    except UnicodeDecodeError:
        return None


def unpack(value: Any) -> Any:
    """The value ``pack`` stored; ValueError if ``value`` is not one ``pack`` writes."""
    if isinstance(value, list):
        return [unpack(item) for item in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        tag, inner = next(iter(value.items()))
        if tag in _TAGS:
            return _unpack_tagged(tag, inner)
    return {key: unpack(item) for key, item in value.items()}


def _unpack_tagged(tag: str, inner: Any) -> Any:
    try:
        if tag == _BYTES and isinstance(inner, str):
            return base64.b64decode(inner.encode("ascii"), validate=True)
        if tag == _TUPLE and isinstance(inner, list):
            return tuple(unpack(item) for item in inner)
        if tag == _BYTES_KEYS and isinstance(inner, dict):
            return {key.encode("utf-8"): unpack(item) for key, item in inner.items()}
        if tag == _PAIRS and isinstance(inner, list) \
                and all(isinstance(pair, list) and len(pair) == 2 for pair in inner):
            return {unpack(key): unpack(item) for key, item in inner}
    except (TypeError, ValueError, binascii.Error) as exc:  # bad base64, unhashable key
        raise ValueError(f"malformed {tag!r} value ({type(exc).__name__})") from None
    raise ValueError(f"malformed {tag!r} value")


def one_off_fingerprint(request: FrontierRequest) -> bytes:
    """What makes two one-off requests the same for this crawl (Scrapy's dupefilter's rule).

    scrapy-frontera's ``meta[b"frontier_fingerprint"]`` when present: Scrapy's
    request fingerprint, made unique per request for ``dont_filter``. Else a
    SHA-1 of method, canonical URL (fragment dropped) and body, as Scrapy's
    default fingerprinter hashes them.
    """
    meta = request.meta or {}
    given = meta.get(b"frontier_fingerprint")
    if isinstance(given, (str, bytes)) and given:
        return b"s" + (given.encode("utf-8") if isinstance(given, str) else given)
    try:
        url = canonicalize_url(request.url)
    except (TypeError, ValueError):
        url = str(request.url)
    body = meta.get(b"scrapy_body", request.body)
    body = body.encode("utf-8") if isinstance(body, str) else \
        body if isinstance(body, bytes) else repr(body).encode("utf-8")
    digest = hashlib.sha1(usedforsecurity=False)
    for part in (_method(request).encode("utf-8"), url.encode("utf-8"), body):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return b"f" + digest.digest()


def lease_of(request: Any) -> Lease | None:
    """The lease a request carries, or None if the frontier did not lease it.

    Looks in ``meta[b"frontier_rate_dispatch"]`` and in the Scrapy meta (which
    survives scrapy-frontera's round trip, redirects and retries). A lease
    copied into an unrelated request (a spider passing ``response.meta`` on)
    is ignored: its URL must be the request's URL or one it redirected from.
    """
    if request is None:
        return None
    meta = request.meta or {}
    scrapy_meta = meta.get(b"scrapy_meta")
    scrapy_meta = scrapy_meta if isinstance(scrapy_meta, dict) else {}
    lease = scrapy_meta.get(LEASE_KEY) or meta.get(LEASE_KEY.encode())
    if not isinstance(lease, dict) or not isinstance(lease.get("url"), str) \
            or not isinstance(lease.get("token"), str):
        return None
    if lease["url"] != request.url and lease["url"] not in (scrapy_meta.get("redirect_urls") or ()):
        return None
    due = lease.get("due")
    return Lease(url=lease["url"], token=lease["token"],
                    host=lease.get("host") or parse_url(lease["url"]),
                    etag=lease.get("etag"), last_modified=lease.get("last_modified"),
                    due=float(due) if isinstance(due, (int, float)) else None,
                    first=lease.get("first") is True)


def _method(request: FrontierRequest) -> str:
    method = request.method
    return (method.decode() if isinstance(method, bytes) else str(method)).upper()


def _meta_flag(request: FrontierRequest, key: str) -> bool:
    meta = request.meta or {}
    return bool(meta.get(key.encode()) or (meta.get(b"scrapy_meta") or {}).get(key))


def _weight(request: FrontierRequest) -> float:
    meta = request.meta or {}
    value = (meta.get(b"scrapy_meta") or {}).get(WEIGHT_KEY, meta.get(WEIGHT_KEY.encode(), 1.0))
    return page_weight(value, _text(request.url))


def _text(value: Any) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


def _body(body: Any) -> bytes:
    if isinstance(body, str):
        return body.encode("utf-8")
    return bytes(body or b"")


def _host_of(url: str) -> str:
    """A URL's host name as Scrapy keys download slots by it ("" if it has none)."""
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


def _slot_key(host: str, key_type: str) -> str:
    """The downloader slot key of a host, as scrapy-frontera reports overused ones.

    "ip" uses Scrapy's DNS cache (never a blocking lookup); a host not in it
    is compared by name.
    """
    if key_type != "ip":
        return host
    try:
        from scrapy.resolver import dnscache
    except ImportError:
        return host
    return str(dnscache.get(host, host))


RENAMED = {"DISPATCH_KEY": "LEASE_KEY"}
"""Retired names still importable (issue 61): old -> new (``frontier_rate.renamed``)."""


def __getattr__(name: str) -> Any:
    return resolve(globals(), name, RENAMED)

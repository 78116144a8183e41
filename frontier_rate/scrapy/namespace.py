"""Which frontier (namespace) a Scrapy crawl uses when ``FRONTIER_RATE_NAMESPACE`` is unset.

Before issue 33 the default was the spider's name, and every project of a user shares
one embedded Redis: a second project's spider of the same name (``pages``) fetched the
first project's pages and yielded them as its own items. The default is now
``<project>.<spider>``, the project being the first of:

1. ``BOT_NAME`` when the project sets it (``scrapy startproject`` writes it);
2. the top package of ``SCRAPY_SETTINGS_MODULE``;
3. the top package of the spider's module, or the stem of the script that runs it.

Each namespace records the project that created it (``fr:{ns}:origin``, a small hash
of plain strings); a crawl of another project that opens it (an explicit
``FRONTIER_RATE_NAMESPACE`` shared on purpose, or by mistake) is told so in a WARNING.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from dataclasses import dataclass
from typing import Any

from scrapy.settings import SETTINGS_PRIORITIES

from frontier_rate.store.keys import Keys
from frontier_rate.store.namespace import origin_key

logger = logging.getLogger(__name__)

NAMESPACE_LIMIT = 64
"""Longest namespace (``store.NAMESPACE_RE``)."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def project_name(settings: Any, spider: Any) -> str:
    """The Scrapy project a crawl belongs to (see the module docstring)."""
    if settings.getpriority("BOT_NAME") > SETTINGS_PRIORITIES["default"] and \
            settings.get("BOT_NAME"):
        return str(settings.get("BOT_NAME"))
    module = os.environ.get("SCRAPY_SETTINGS_MODULE", "")
    if module:
        return module.split(".")[0]
    module = type(spider).__module__ or ""
    if module == "__main__":
        main = getattr(sys.modules.get("__main__"), "__file__", None) or "script"
        return os.path.splitext(os.path.basename(main))[0]
    return module.split(".")[0] or "scrapy"


def default_namespace(project: str, spider_name: str) -> str:
    """``<project>.<spider>``, with characters a namespace cannot hold made ``_``."""
    name = f"{_UNSAFE.sub('_', project)}.{_UNSAFE.sub('_', spider_name)}"
    return name[:NAMESPACE_LIMIT]


def claim(client: Any, namespace: str, project: str, spider_name: str,
          legacy: str | None) -> str:
    """Record (once) who created ``namespace``; log at start-up what the crawl opened.

    ``legacy``: the namespace the default was before issue 33 (the spider's name), checked
    when this namespace is new. Returns how the namespace came to be ("created",
    "opened", "shared"). Never raises: a Redis error only skips the check.
    """
    key = origin_key(namespace)
    try:
        created = client.hsetnx(key, "project", project)
        if created:
            client.hset(key, mapping={"spider": spider_name, "created": f"{time.time():.0f}"})
        owner = client.hget(key, "project")
        old = legacy is not None and created and client.exists(Keys(legacy, 1).cfg)
    except Exception as exc:  # an outage at start: the client's own retries report it
        logger.debug("frontier-rate: origin of namespace %r not checked: %r", namespace, exc)
        return "unchecked"
    owner = owner.decode("utf-8", "replace") if isinstance(owner, bytes) else str(owner)
    if old:
        logger.warning("frontier-rate: a frontier named %r exists from before namespaces were "
                       "per project; this crawl uses %r. Set FRONTIER_RATE_NAMESPACE = %r to "
                       "go on with the old one.", legacy, namespace, legacy)
    if created:
        return "created"
    if owner != project:
        logger.warning("frontier-rate: namespace %r was created by project %r; this crawl is "
                       "project %r, and both now share its pages. Set FRONTIER_RATE_NAMESPACE "
                       "to keep them apart.", namespace, owner, project)
        return "shared"
    return "opened"


@dataclass(frozen=True)
class NamespaceChoice:
    """The namespace a crawl opens and why: ``explicit`` (FRONTIER_RATE_NAMESPACE) or the
    default ``<project>.<spider>``."""

    namespace: str
    project: str
    spider: str
    explicit: bool

    @classmethod
    def of(cls, settings: Any, spider: Any, explicit: str | None) -> NamespaceChoice:
        project = project_name(settings, spider)
        return cls(explicit or default_namespace(project, spider.name), project, spider.name,
                   bool(explicit))

    def announce(self, frontier: Any, fingerprint: str) -> None:
        """Record the namespace's origin and log, at INFO, which one the crawl opened."""
        how = claim(frontier.client, frontier.namespace, self.project, self.spider,
                    None if self.explicit else self.spider)
        logging.getLogger("frontier_rate.scrapy").info(
            "frontier-rate scheduler opened: namespace=%r (%s, %s; project %r), "
            "fingerprint=%s", frontier.namespace, how,
            "FRONTIER_RATE_NAMESPACE" if self.explicit else "default", self.project, fingerprint)

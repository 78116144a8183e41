"""Which frontier (namespace) a Scrapy crawl uses when ``FRONTIER_RATE_NAMESPACE`` is unset.

Before issue 33 the default was the spider's name, and every project of a user shares
one embedded Redis: a second project's spider of the same name (``pages``) fetched the
first project's pages and yielded them as its own items. The default is now
``<project>.<spider>``, the project being the first of:

1. ``BOT_NAME`` when the project sets it (``scrapy startproject`` writes it);
2. the top package of ``SCRAPY_SETTINGS_MODULE``;
3. the top package of the spider's module, or the stem of the script that runs it.

Each namespace records the project that created it (``Keys.origin``, a small hash of
plain strings, written by ``store.namespace.claim_origin``); a crawl of another project that
opens it (an explicit ``FRONTIER_RATE_NAMESPACE`` shared on purpose, or by mistake) is told
so in a WARNING. A project named after a script (case 3) also records the script's folder:
two ``scrapy runspider pages.py`` in two folders both default to ``pages.pages``, and the
second is told at start-up, before any request, that it shares the first one's frontier and
how to name its own (before issue 61 it fetched 11 of the first one's URLs silently).
"""

from __future__ import annotations

import logging
import os
import re
import sys
from dataclasses import dataclass
from typing import Any

from scrapy.settings import SETTINGS_PRIORITIES

from frontier_rate.store.namespace import claim_origin, namespace_exists

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


def script_folder(settings: Any, spider: Any) -> str | None:
    """The folder of the script a crawl's project is named after (case 3 of the module
    docstring: ``scrapy runspider pages.py``), else None: two scripts ``pages.py`` in two
    folders are two projects of one name."""
    if settings.getpriority("BOT_NAME") > SETTINGS_PRIORITIES["default"] and \
            settings.get("BOT_NAME") or os.environ.get("SCRAPY_SETTINGS_MODULE"):
        return None
    module = sys.modules.get(type(spider).__module__)
    path = getattr(module, "__file__", None)
    return os.path.dirname(os.path.abspath(path)) if path else None


def claim(client: Any, namespace: str, project: str, spider_name: str,
          legacy: str | None, folder: str | None = None) -> str:
    """Record (once) who created ``namespace``; log at start-up what the crawl opened.

    ``legacy``: the namespace the default was before issue 33 (the spider's name), checked
    when this namespace is new; ``folder``: the script's folder when the project is a
    script (``script_folder``), for a default namespace. Returns how the namespace came to
    be ("created", "opened", "shared"). Never raises: a Redis error only skips the check.
    """
    try:
        origin = claim_origin(client, namespace, project, spider_name, folder)
        old = legacy is not None and origin.created and namespace_exists(client, legacy)
    except Exception as exc:  # an outage at start: the client's own retries report it
        logger.debug("frontier-rate: origin of namespace %r not checked: %r", namespace, exc)
        return "unchecked"
    if old:
        logger.warning("frontier-rate: a frontier named %r exists from before namespaces were "
                       "per project; this crawl uses %r. Set FRONTIER_RATE_NAMESPACE = %r to "
                       "go on with the old one.", legacy, namespace, legacy)
    if origin.created:
        return "created"
    if origin.project != project:
        logger.warning("frontier-rate: namespace %r was created by project %r; this crawl is "
                       "project %r, and both now share its pages. Set FRONTIER_RATE_NAMESPACE "
                       "to keep them apart.", namespace, origin.project, project)
        return "shared"
    if folder is not None and origin.folder is not None and origin.folder != folder:
        logger.warning("frontier-rate: namespace %r was created by a script in %s; this script "
                       "is in %s, and both now share its pages. Set FRONTIER_RATE_NAMESPACE "
                       "(e.g. -s FRONTIER_RATE_NAMESPACE=%s) to keep them apart.", namespace,
                       origin.folder, folder, default_namespace(
                           f"{os.path.basename(folder) or 'script'}.{project}", spider_name))
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
    folder: str | None = None
    """The script's folder (``script_folder``) of a default namespace, else None."""

    @classmethod
    def of(cls, settings: Any, spider: Any, explicit: str | None) -> NamespaceChoice:
        project = project_name(settings, spider)
        return cls(explicit or default_namespace(project, spider.name), project, spider.name,
                   bool(explicit), None if explicit else script_folder(settings, spider))

    def announce(self, frontier: Any, fingerprint: str) -> None:
        """Record the namespace's origin and log, at INFO, which one the crawl opened."""
        how = claim(frontier.client, frontier.namespace, self.project, self.spider,
                    None if self.explicit else self.spider, self.folder)
        logging.getLogger("frontier_rate.scrapy").info(
            "frontier-rate scheduler opened: namespace=%r (%s, %s; project %r), "
            "fingerprint=%s", frontier.namespace, how,
            "FRONTIER_RATE_NAMESPACE" if self.explicit else "default", self.project, fingerprint)

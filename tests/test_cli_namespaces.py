"""``frontier-rate stats`` without ``-n`` lists the namespaces (issue 33: it said
``no frontier named 'default'`` and listed nothing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import redis

from frontier_rate.engine import Frontier
from frontier_rate.scrapy.namespace import claim

ROOT = Path(__file__).resolve().parent.parent


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "FRONTIER_RATE_NAMESPACE"}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "frontier_rate", *args], capture_output=True,
                          text=True, timeout=60, env=env)


def test_stats_without_a_namespace_lists_them_with_their_project(redis_url, namespace):
    crawled, plain = f"{namespace}.pages", f"{namespace}-plain"
    Frontier(redis_url, namespace=crawled).close()
    Frontier(redis_url, namespace=plain).close()
    client = redis.Redis.from_url(redis_url)
    claim(client, crawled, "shop", "pages", None)
    client.close()
    listed = _cli("stats", "--redis", redis_url)
    assert listed.returncode == 0, listed.stderr
    assert f"  {crawled}  (project shop, spider pages)\n" in listed.stdout
    assert f"  {plain}\n" in listed.stdout
    rows = json.loads(_cli("stats", "--redis", redis_url, "--json").stdout)
    assert {"namespace": crawled, "project": "shop", "spider": "pages"} in rows
    one = _cli("stats", "--redis", redis_url, "-n", plain, "--json")
    assert json.loads(one.stdout)["pages"] == 0

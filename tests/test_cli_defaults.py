"""What ``frontier-rate`` does when a user leaves things out or writes them loosely (issue 60,
item 6): a URL written as a person writes it, a misspelt data directory, no ``-n``, a lease
whose crawl stopped. Real Redis: the suite's server, or an embedded one in a temporary data
directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from frontier_rate.engine import Frontier

ROOT = Path(__file__).resolve().parent.parent


def _cli(*args: str, data_dir: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("FRONTIER_RATE_NAMESPACE", "FRONTIER_RATE_REDIS_URL")}
    env["PYTHONPATH"] = str(ROOT)
    if data_dir is not None:
        env["FRONTIER_RATE_DATA_DIR"] = str(data_dir)
    return subprocess.run([sys.executable, "-m", "frontier_rate", *args], capture_output=True,
                          text=True, timeout=60, env=env)


def test_inspect_finds_a_page_by_the_url_as_written(redis_url, namespace):
    """The scheduler stores a request's URL as Scrapy made it (host in lower case, unsafe
    characters escaped) without its fragment; inspect looked the URL up as typed."""
    stored = "http://shop.example/book?title=a%20b"
    with Frontier(redis_url, namespace=namespace) as frontier:
        frontier.add(stored)
    for written in ("http://SHOP.Example/book?title=a b#reviews", stored + "#top", stored):
        shown = _cli("inspect", written, "--redis", redis_url, "-n", namespace, "--json")
        assert shown.returncode == 0, (written, shown.stderr)
        assert json.loads(shown.stdout)["url"] == stored
    unknown = _cli("inspect", "http://shop.example/other#x", "--redis", redis_url, "-n", namespace)
    assert unknown.returncode == 2 and "unknown page 'http://shop.example/other#x'" in unknown.stderr


@pytest.mark.parametrize("command", [["stats"], ["stats", "-n", "shop.news"], ["due"],
                                     ["inspect", "http://a.example/"], ["settings", "-n", "x"],
                                     ["export"], ["drop", "-n", "x", "--yes"]])
def test_inspecting_a_misspelt_data_dir_creates_nothing(tmp_path, command):
    typo = tmp_path / "frontier-rat"
    shown = _cli(*command, data_dir=typo)
    assert shown.returncode == 2, shown.stderr
    assert shown.stderr.strip() == (f"frontier-rate: no frontier-rate data in {typo} (no "
                                    "frontier-rate.db there; nothing was created): check "
                                    "FRONTIER_RATE_DATA_DIR, or give --redis URL")
    assert not typo.exists() and list(tmp_path.iterdir()) == []


def test_without_n_the_only_namespace_is_used_else_they_are_listed(tmp_path, monkeypatch):
    data = tmp_path / "data"
    monkeypatch.setenv("FRONTIER_RATE_DATA_DIR", str(data))
    first = Frontier(None, namespace="shop.books")  # the embedded Redis in ``data``
    try:
        first.add("http://books.example/1")
        one = _cli("due", "--json", data_dir=data)
        assert one.returncode == 0, one.stderr
        assert [p["url"] for p in json.loads(one.stdout)] == ["http://books.example/1"]
        assert "namespace 'shop.books' (the only one at <embedded redis>)" in one.stderr
        dropped = _cli("drop", "--yes", data_dir=data)  # never guessed
        assert dropped.returncode == 2 and "drop needs the namespace named: -n NAME" \
            in dropped.stderr
        seeds = tmp_path / "seeds.txt"  # a second namespace, made by another process
        seeds.write_text("http://news.example/1\n")
        assert _cli("import", str(seeds), "-n", "shop.news", data_dir=data).returncode == 0
        two = _cli("inspect", "http://books.example/1", data_dir=data)
        assert two.returncode == 2 and two.stdout == ""
        assert two.stderr.strip() == ("frontier-rate: 2 frontiers at <embedded redis>: "
                                      "shop.books, shop.news; choose one with -n NAME")
        named = _cli("inspect", "http://books.example/1", "-n", "shop.books", data_dir=data)
        assert named.returncode == 0 and "books.example" in named.stdout, named.stderr
    finally:
        first.close()


def test_a_lease_past_its_end_shows_as_due_not_leased(redis_url, namespace):
    """A crawl stopped by force leaves its leases; once they end, inspect and stats said
    ``leased`` still, though the pages were due."""
    url = "http://stopped.example/p"
    with Frontier(redis_url, namespace=namespace, lease_timeout=5.0, min_host_delay=0.0) as f:
        f.add(url)
        assert [d.url for d in f.next_requests(1)] == [url]
        held = json.loads(_cli("stats", "--redis", redis_url, "-n", namespace, "--json").stdout)
        assert (held["leased"], held["leases_expired"], held["due_now"]) == (1, 0, 0), held
        time.sleep(max(0.0, f.page(url)["lease_ends"] - time.time()) + 0.1)
        page = json.loads(_cli("inspect", url, "--redis", redis_url, "-n", namespace,
                               "--json").stdout)
        assert page["status"] == "due (lease expired)" and page["lease_ends"] <= time.time()
        stats = json.loads(_cli("stats", "--redis", redis_url, "-n", namespace, "--json").stdout)
        assert (stats["leased"], stats["leases_expired"], stats["due_now"]) == (0, 1, 1), stats

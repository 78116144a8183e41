"""The ``frontier-rate`` command, run as a subprocess against a real Redis."""

from __future__ import annotations

import csv
import io
import json
import socket
import subprocess
import sys

import pytest

from frontier_rate import Frontier


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "frontier_rate", *args], input=stdin,
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def filled(redis_url: str, namespace: str):
    """A namespace with three pages on two hosts, one of them fetched once."""
    frontier = Frontier(redis_url, namespace=namespace, budget=10.0, min_host_delay=0.0,
                        min_interval=1.0, seed=1)
    frontier.add_many([("http://a.example/1", 2.0), ("http://a.example/2", 1.0),
                       ("http://b.example/1", 0.5)], now=1000.0)
    leases = frontier.next_requests(3, now=1000.0) + frontier.next_requests(3, now=1001.0)
    assert sorted(d.url for d in leases) == ["http://a.example/1", "http://a.example/2",
                                                 "http://b.example/1"]
    first = next(d for d in leases if d.url == "http://a.example/1")
    frontier.observe(first, fingerprint="v1", fetched_at=1001.0)
    other = next(d for d in leases if d.url == "http://b.example/1")
    frontier.observe(other, fingerprint="w1", fetched_at=1001.0)
    yield frontier
    frontier.close()


def run_json(*args: str) -> object:
    result = cli(*args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_inspect_shows_the_page(filled: Frontier, redis_url: str, namespace: str) -> None:
    record = run_json("inspect", "http://a.example/1", "--redis", redis_url, "--namespace", namespace)
    assert record["url"] == "http://a.example/1"
    assert record["weight"] == 2.0
    assert record["fetches"] == 1
    assert record["changes"] == 0, "a page's first fetch is not a change"
    table = cli("inspect", "http://a.example/1", "--redis", redis_url, "--namespace", namespace)
    assert table.returncode == 0
    assert "http://a.example/1" in table.stdout and "weight" in table.stdout


def test_stats_and_due(filled: Frontier, redis_url: str, namespace: str) -> None:
    stats = run_json("stats", "--redis", redis_url, "--namespace", namespace)
    assert stats["pages"] == 3
    assert stats["fetches"] == 2
    # a.example/2 was leased at a virtual time in 1970: its lease ended long ago (issue 60)
    assert stats["leased"] == 0 and stats["leases_expired"] == 1
    one = run_json("due", "--limit", "1", "--redis", redis_url, "--namespace", namespace)
    assert len(one) == 1
    all_due = run_json("due", "--redis", redis_url, "--namespace", namespace)
    # a.example/2 is leased (handed out, not observed): only the observed pages are queued.
    assert sorted(p["url"] for p in all_due) == ["http://a.example/1", "http://b.example/1"]
    assert [p["next_due"] for p in all_due] == sorted(p["next_due"] for p in all_due)
    assert one[0] == all_due[0]


def test_export_jsonl_and_csv(filled: Frontier, redis_url: str, namespace: str) -> None:
    lines = cli("export", "--redis", redis_url, "--namespace", namespace)
    assert lines.returncode == 0, lines.stderr
    urls = sorted(json.loads(line)["url"] for line in lines.stdout.splitlines())
    assert urls == ["http://a.example/1", "http://a.example/2", "http://b.example/1"]
    table = cli("export", "--format", "csv", "--redis", redis_url, "--namespace", namespace)
    rows = list(csv.DictReader(io.StringIO(table.stdout)))
    assert sorted(r["url"] for r in rows) == urls
    assert {r["url"]: float(r["weight"]) for r in rows}["http://b.example/1"] == 0.5


def test_import_adds_pages_and_rejects_bad_lines(redis_url: str, namespace: str, tmp_path) -> None:
    good = tmp_path / "pages.txt"
    good.write_text("# seed list\nhttp://c.example/a 3\n\nhttp://c.example/b\n")
    result = run_json("import", str(good), "--redis", redis_url, "--namespace", namespace)
    assert result == {"read": 2, "added": 2, "updated": 0, "invalid": 0}
    again = run_json("import", str(good), "--redis", redis_url, "--namespace", namespace)
    assert again["added"] == 0 and again["updated"] == 2

    bad = tmp_path / "bad.txt"
    bad.write_text("http://c.example/c 1\nnot a url at all\nhttp://c.example/d -4\n")
    rejected = cli("import", str(bad), "--redis", redis_url, "--namespace", namespace)
    assert rejected.returncode == 2
    assert "line 2" in rejected.stderr and "line 3" in rejected.stderr
    stats = run_json("stats", "--redis", redis_url, "--namespace", namespace)
    assert stats["pages"] == 2, "an import with invalid lines must import nothing"
    skipped = run_json("import", str(bad), "--skip-invalid", "--redis", redis_url, "--namespace", namespace)
    assert skipped["added"] == 1 and skipped["invalid"] == 2


def test_solve_and_clusters(filled: Frontier, redis_url: str, namespace: str) -> None:
    solved = run_json("solve", "--redis", redis_url, "--namespace", namespace)
    assert solved["nu"] >= 0 and solved["cells"] >= 1
    cells = run_json("clusters", "--redis", redis_url, "--namespace", namespace)
    assert sum(c["pages"] for c in cells) == 3


def test_unknown_url_namespace_and_bad_arguments_exit_2(filled: Frontier, redis_url: str,
                                                         namespace: str) -> None:
    unknown_page = cli("inspect", "http://nowhere.example/x", "--redis", redis_url, "--namespace", namespace)
    assert unknown_page.returncode == 2
    assert "unknown page" in unknown_page.stderr and len(unknown_page.stderr.strip().splitlines()) == 1
    unknown_ns = cli("stats", "--redis", redis_url, "--namespace", "no-such-namespace-here")
    assert unknown_ns.returncode == 2 and "no-such-namespace-here" in unknown_ns.stderr
    bad_limit = cli("due", "--limit", "zero", "--redis", redis_url, "--namespace", namespace)
    assert bad_limit.returncode == 2
    bad_command = cli("frobnicate")
    assert bad_command.returncode == 2


def test_unreachable_redis_is_one_line_without_password() -> None:
    url = f"redis://user:hunter2secret@127.0.0.1:{free_port()}/0"
    result = cli("stats", "--redis", url)
    assert result.returncode == 2
    assert "hunter2secret" not in result.stderr + result.stdout
    assert "127.0.0.1" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture
def fetched(redis_url: str, namespace: str):
    """A namespace on the real clock with two pages of one host, each fetched once a while ago."""
    import time

    frontier = Frontier(redis_url, namespace=namespace, budget=10.0, min_host_delay=0.0,
                        min_interval=60.0, max_interval=3600.0, seed=1)
    start = time.time() - 600
    frontier.add_many(["http://p.example/1", "http://p.example/2"], now=start)
    leases = frontier.next_requests(2, now=start) + frontier.next_requests(2, now=start + 1)
    assert len(leases) == 2  # one page of a host per call
    for lease in leases:
        frontier.observe(lease, fingerprint="v1", fetched_at=start + 1)
    yield frontier
    frontier.close()


def test_hint_reads_each_push_format_and_counts_the_outcomes(fetched: Frontier, redis_url: str,
                                                            namespace: str, tmp_path) -> None:
    where = ("--redis", redis_url, "--namespace", namespace)
    indexnow = json.dumps({"host": "p.example", "urlList": ["http://p.example/1",
                                                            "http://p.example/new"]})
    result = cli("hint", "--json", *where, stdin=indexnow)  # format guessed, stdin
    assert result.returncode == 0, result.stderr
    counts = json.loads(result.stdout)
    assert counts["format"] == "indexnow" and counts["read"] == 2 and counts["invalid"] == 0
    assert counts["unknown"] == 1 and counts["added"] == 0  # no --discover: not added
    assert fetched.page("http://p.example/new") is None
    assert fetched.stats()["claims"] == 1

    feed = tmp_path / "feed.xml"
    feed.write_text('<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>'
                    '<entry><link href="http://p.example/2"/>'
                    "<updated>2020-01-01T00:00:00Z</updated></entry>"
                    '<entry><link href="http://p.example/other"/></entry></feed>')
    counts = run_json("hint", str(feed), "--format", "websub", "--discover", *where)
    assert counts["format"] == "websub" and counts["read"] == 2
    assert counts["added"] == 1 and fetched.page("http://p.example/other") is not None
    assert counts["unchanged"] + counts["held"] + counts["postponed"] == 1, json.dumps(counts)

    lines = tmp_path / "pushed.txt"
    lines.write_text("# pushed\nhttp://p.example/1\nhttp://p.example/2 2020-01-01T00:00:00Z\n")
    table = cli("hint", str(lines), "--format", "lines", *where)
    assert table.returncode == 0, table.stderr
    assert "format" in table.stdout and "lines" in table.stdout and "read" in table.stdout
    assert fetched.signal_trust("p.example", "push")["checked"] == 0  # nothing fetched since
    assert fetched.stats()["claims"] == 4


def test_hint_refuses_bad_input_and_writes_nothing(fetched: Frontier, redis_url: str,
                                                   namespace: str, tmp_path) -> None:
    where = ("--redis", redis_url, "--namespace", namespace)
    claims = fetched.stats()["claims"]

    def refused(*args: str, stdin: str | None = None) -> str:
        result = cli("hint", *args, *where, stdin=stdin)
        assert result.returncode == 2, (result.stdout, result.stderr)
        assert "Traceback" not in result.stderr and result.stdout == ""
        assert fetched.stats()["claims"] == claims, "a refused push must change nothing"
        return result.stderr

    assert "not valid JSON" in refused("--format", "indexnow", stdin="http://p.example/1\n")
    assert "urlList" in refused(stdin='{"host": "p.example"}')
    assert "not well-formed XML" in refused("--format", "websub", stdin="<feed><entry>")
    assert "not a urlset" in refused(
        "--format", "websub",
        stdin='<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"></urlset>')
    assert "no URLs" in refused(stdin="# only a comment\n")
    bad = tmp_path / "bad.txt"
    bad.write_text("http://p.example/1\nnot-a-url\nhttp://p.example/2 someday\n")
    stderr = refused(str(bad))
    assert "line 2" in stderr and "line 3" in stderr and "2 invalid entries" in stderr
    assert "not on host p.example" in refused(stdin=json.dumps(
        {"host": "p.example", "urlList": ["http://p.example/1", "http://elsewhere.example/x"]}))
    assert "'rss' is not one of" in refused("--format", "rss", stdin="x")
    skipped = run_json("hint", str(bad), "--skip-invalid", *where)
    assert skipped["read"] == 3 and skipped["invalid"] == 2
    assert fetched.stats()["claims"] == claims + 1
    unknown = cli("hint", "--redis", redis_url, "--namespace", "no-such-namespace-here",
                  stdin="http://p.example/1\n")
    assert unknown.returncode == 2 and "no-such-namespace-here" in unknown.stderr


def test_inspect_shows_the_last_detection_kept_in_redis(filled: Frontier, redis_url: str,
                                                         namespace: str) -> None:
    """With the pages' detection memories in Redis, ``inspect`` shows the page's last
    detection: segments changed and ignored, what the host's masks hid, the selector."""
    from frontier_rate.crawl.shared_pages import SharedPages
    from frontier_rate.detection.content_rules import ContentRule
    from frontier_rate.detection.fingerprint import Fingerprinter

    fingerprinter = Fingerprinter("content")
    fingerprinter.share(SharedPages(filled.client, namespace, filled.shards, 3600.0))
    headers = {"Content-Type": "text/html"}
    rule = ContentRule("main", ("Updated .*",))
    menu = "".join(f"<li>Menu item {i}</li>" for i in range(5))
    for n, edit in enumerate(("first clause", "first clause", "a new clause")):
        for path in ("1", "2"):  # two pages of the host: the menu is its boilerplate
            body = (f"<html><head><title>Terms</title></head><body><ul>{menu}</ul><main>"
                    f"<p>The terms of page {path}, which the user accepts by using the "
                    f"service: {edit}.</p><p>Updated {n} times</p>"
                    f"<ul>{menu}</ul></main></body></html>").encode()
            fingerprinter.detect(body, f"http://a.example/{path}", headers, rule=rule)
    record = run_json("inspect", "http://a.example/1", "--redis", redis_url,
                      "--namespace", namespace)
    found = record["last_detection"]
    assert found["changed_segments"] == 2, found  # the clause went, its edit came
    assert found["content_selector"] == "main" and found["ignore_text_patterns"] == 1
    assert found["host_masked_segments"] == 5 and found["host_mask_size"] >= 5, found
    assert found["not_content"] is None and found["segments"] >= 1
    table = cli("inspect", "http://a.example/1", "--redis", redis_url, "--namespace", namespace)
    assert "2 changed" in table.stdout and "selector 'main'" in table.stdout, table.stdout
    # a page never detected with the memory shared has none
    other = run_json("inspect", "http://b.example/1", "--redis", redis_url, "--namespace", namespace)
    assert "last_detection" not in other

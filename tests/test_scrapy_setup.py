"""Settings said in Scrapy's terms (issue 33): typos, a changed shared setting, the data
directory as a setting. Unit checks need no Redis; the others run real crawls."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from scrapy.settings import Settings

sys.path.insert(0, str(Path(__file__).parent))
from scrapy_support.harness import run_crawl  # noqa: E402
from scrapy_support.one_page import SPIDER  # noqa: E402
from scrapy_support.server import ChangingSite  # noqa: E402

from frontier_rate.crawl.setting_table import KNOWN_SETTINGS, warn_unknown_settings  # noqa: E402
from frontier_rate.engine import Frontier  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def test_a_misspelled_setting_is_a_warning_naming_the_closest_one(caplog) -> None:
    settings = Settings({"FRONTIER_RATE_BUDGE": 1, "FRONTIER_RATE_BUDGET": 2,
                         "FRONTIER_RATE_ZZZ": 1})
    with caplog.at_level(logging.WARNING):
        assert warn_unknown_settings(settings) == ["FRONTIER_RATE_BUDGE", "FRONTIER_RATE_ZZZ"]
    text = caplog.text
    assert "unknown setting FRONTIER_RATE_BUDGE is ignored; did you mean FRONTIER_RATE_BUDGET?" \
        in text
    assert "unknown setting FRONTIER_RATE_ZZZ is ignored\n" in text + "\n"


def test_every_setting_the_sources_read_is_known() -> None:
    mentioned = set()
    for path in (ROOT / "frontier_rate").rglob("*.py"):
        mentioned |= set(re.findall(r"FRONTIER_RATE_[A-Z0-9_]*[A-Z0-9]", path.read_text()))
    assert mentioned - {"FRONTIER_RATE_SITEMAP"} <= KNOWN_SETTINGS, mentioned - KNOWN_SETTINGS


@pytest.mark.timeout(120)
def test_a_changed_download_delay_names_it_and_the_setting_that_accepts_it(
        redis_url, namespace, tmp_path):
    Frontier(redis_url, namespace=namespace, estimator="interval", min_host_delay=1.0).close()
    with ChangingSite("127.0.0.1") as site:
        site.set("/", "<p>home</p>")
        start = [{"url": site.url("/")}]
        changed = {"FRONTIER_RATE_MIN_HOST_DELAY": None, "DOWNLOAD_DELAY": 0.5,
                   "FRONTIER_RATE_CLOSE_AFTER": "idle", "LOG_FILE": None}
        refused = run_crawl(tmp_path, redis_url, namespace, start, changed, name="refused")
        lines = [line for line in refused.log.splitlines() if line.strip()]
        assert f"namespace {namespace!r}: DOWNLOAD_DELAY = 0.5 but the frontier stores 1.0 " \
            "from an earlier run. Set FRONTIER_RATE_OVERRIDE_SETTINGS = True" in lines[-1], \
            refused.log[-3000:]
        assert site.hits == []
        accepted = run_crawl(tmp_path, redis_url, namespace, start,
                             {**changed, "FRONTIER_RATE_OVERRIDE_SETTINGS": True},
                             name="accepted")
        assert accepted.returncode == 0, accepted.log[-3000:]
        assert len(site.hits_for("/")) == 1
    with Frontier(redis_url, namespace=namespace, estimator="interval") as frontier:
        assert frontier.min_host_delay == 0.5


@pytest.mark.timeout(120)
def test_data_dir_works_as_a_scrapy_setting(namespace, tmp_path, monkeypatch):
    monkeypatch.delenv("FRONTIER_RATE_DATA_DIR", raising=False)
    data = tmp_path / "data"
    with ChangingSite("127.0.0.1") as site:
        site.set("/", "<p>home</p>")
        crawl = run_crawl(tmp_path, "", namespace, [{"url": site.url("/")}],
                          {"FRONTIER_RATE_REDIS_URL": None, "FRONTIER_RATE_DATA_DIR": str(data),
                           "FRONTIER_RATE_CLOSE_AFTER": "idle"})
    assert crawl.returncode == 0, crawl.log[-3000:]
    assert len(site.hits_for("/")) == 1
    assert (data / "frontier-rate.db").exists(), crawl.log[-3000:]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", ["mismatch", "bad value"])
def test_a_refused_setting_is_one_line_last_and_a_failed_exit(redis_url, namespace, tmp_path,
                                                              case):
    """Issue 60: a settings mismatch printed its line inside two unrelated tracebacks
    (Scrapy's "Scraper close failure" and CoreStats' AssertionError) and a third one
    repeating it. Now: that line alone, last, and ``scrapy runspider`` exits with 1."""
    Frontier(redis_url, namespace=namespace, budget=3.0).close()
    (tmp_path / "one.py").write_text(SPIDER)
    budget, shown = ("4", f"namespace {namespace!r}: FRONTIER_RATE_BUDGET = 4.0 but the frontier "
                     "stores 3.0 from an earlier run. Set FRONTIER_RATE_OVERRIDE_SETTINGS") \
        if case == "mismatch" else ("abc", "FRONTIER_RATE_BUDGET='abc' is not a valid float")
    with ChangingSite("127.0.0.1") as site:
        site.set("/", "<p>home</p>")
        options = {"SCHEDULER": "frontier_rate.scrapy.Scheduler",
                   "FRONTIER_RATE_REDIS_URL": redis_url, "FRONTIER_RATE_NAMESPACE": namespace,
                   "FRONTIER_RATE_BUDGET": budget, "TELNETCONSOLE_ENABLED": "0",
                   "LOG_LEVEL": "DEBUG"}
        command = [sys.executable, "-m", "scrapy", "runspider", "one.py", "-a",
                   f"url={site.url('/')}"]
        for name, value in options.items():
            command += ["-s", f"{name}={value}"]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=90)
        assert site.hits == []
    out = done.stdout + done.stderr
    lines = [line for line in out.splitlines() if line.strip()]
    assert done.returncode == 1, out[-3000:]
    assert "Traceback" not in out and "close failure" not in out, out[-3000:]
    assert shown in lines[-1] and " ERROR: frontier-rate: " in lines[-1], out[-3000:]
    assert sum(shown in line for line in lines) == 1, out[-3000:]

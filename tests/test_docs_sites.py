"""The second real population of issue 62: documentation sites built from git
(benchmarks/make_docs_sites.py) and what benchmarks/docs_sites.py reads of it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import docs_sites  # noqa: E402
import make_docs_sites as mk  # noqa: E402
import sample_then_revisit  # noqa: E402
from test_traces import _git  # noqa: E402
from web_like import DAY, WINDOW_DAYS, Page  # noqa: E402


def test_a_page_is_kept_when_it_existed_before_the_window_and_its_later_commits_are_its_changes(tmp_path):
    """Head at day 200, so the window starts at day 20: a page added at day 0 and edited at
    days 10, 50 and 100 is kept with those three changes (its adding commit is not one); a
    page added at day 60 is kept apart as found within the window; a file outside the
    pattern and a page deleted before the head are not pages."""
    work = tmp_path / "work"
    work.mkdir()
    _git(work, "init", "-q", "-b", "main")

    def commit(name: str, text: str, day: float) -> None:
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        _git(work, "add", name)
        _git(work, "commit", "-q", "-m", f"{name} {text}", when=int(day * DAY))

    commit("docs/en/docs/a.md", "v1", 0)
    commit("docs/en/docs/gone.md", "v1", 1)
    commit("docs/en/docs/a.md", "v2", 10)
    commit("tests/x.md", "v1", 11)
    _git(work, "rm", "-q", "docs/en/docs/gone.md")
    _git(work, "commit", "-q", "-m", "rm", when=int(12 * DAY))
    commit("docs/en/docs/a.md", "v3", 50)
    commit("docs/zh/docs/b.md", "v1", 60)
    commit("docs/en/docs/a.md", "v4", 100)
    commit("README.md", "head", 200)
    mirrors = tmp_path / "mirrors"
    subprocess.run(["git", "clone", "-q", "--mirror", str(work), str(mirrors / "me+site" / "repo")],
                   check=True)
    data = mk.build(mirrors, [("me/site", "site.example", r"docs/[a-z-]+/docs/.+\.md")])
    (page,) = data["pages"]
    assert page["page"] == "me/site:docs/en/docs/a.md" and page["host"] == "site.example"
    assert page["first"] == 0
    assert np.cumsum(page["changes"]).tolist() == [10 * DAY, 50 * DAY, 100 * DAY]
    assert [p["page"] for p in data["added"]] == ["me/site:docs/zh/docs/b.md"]
    assert data["sources"][0]["pages"] == 1 and data["sources"][0]["added"] == 1
    assert data["sources"][0]["head_time"] == 200 * DAY


def test_a_pages_path_on_its_site_comes_from_its_source_file():
    assert docs_sites.site_path("fastapi/fastapi:docs/zh/docs/tutorial/first-steps.md") == "zh/tutorial/first-steps/"
    assert docs_sites.site_path("fastapi/fastapi:docs/en/docs/index.md") == "en/"
    assert docs_sites.site_path("python/peps:peps/pep-0008.rst") == "pep-0008/"
    assert docs_sites.site_path("reactjs/react.dev:src/content/learn/index.md") == "learn/"
    assert docs_sites.site_path("scrapy/scrapy:docs/topics/settings.rst") == "topics/settings/"


def test_the_co_change_share_counts_changes_within_a_day_of_another_page_of_the_host():
    """a changes at days 10 and 50, b at day 10.5, c (another host) at day 50.2: a's day-10
    change and b's are within a day of each other, a's day-50 change has no neighbour on its
    host: 2 of 3 changes."""
    def page(name: str, host: str, days: list[float]) -> Page:
        return Page(name, host, "document", np.array(days) * DAY)

    pages = [page("a", "h1", [10, 50]), page("b", "h1", [10.5]), page("c", "h2", [50.2]),
             page("d", "h1", [])]
    real, random = docs_sites.together(pages)
    assert real == 2 / 3
    assert 0.0 <= random <= 1.0


def test_the_committed_population_is_the_scripts_and_lies_in_its_windows():
    assert mk.main(["--quick"]) == 0  # the file lists the script's sources, in order
    pages = docs_sites.population(1)
    assert len(pages) >= 3000 and len({p.host for p in pages}) == len(mk.SOURCES)
    for p in pages:
        assert np.all((p.changes >= 0) & (p.changes < WINDOW_DAYS * DAY)), p.name
        assert np.all(np.diff(p.changes) > 0), p.name
    counts = np.array([p.changes.size for p in pages])
    assert 0.3 < (counts == 0).mean() < 0.8 and counts.max() > 100  # web-like: most quiet, a few busy
    sample = docs_sites.population(docs_sites.EVERY)
    assert {p.host for p in sample} == {p.host for p in pages}  # every site is in the sample


def test_a_sample_that_finds_a_change_brings_its_groups_older_copies_forward():
    """Four pages of one host change at day 50. At 0.1 fetches/page/day (U = 10 days) one
    sample is revisited every 2.5 days and the rest every 30: the sample's first fetch after day
    50 finds the change and every other page is fetched at that instant; without ``follow``
    none is."""
    pages = [Page(name, "h", "document", np.array([50.0 * DAY])) for name in "abcd"]
    world = sample_then_revisit.World(pages, 0.1, seed=0, host_share=sample_then_revisit.UNLIMITED)
    group = sample_then_revisit.groups_of(pages, "web_like")
    led = sample_then_revisit.sampled(world, group, samples=1, lead=0.25, rest=3.0, seed=0)
    sample = max(range(4), key=lambda i: len(led[i]))
    assert np.allclose(np.diff(led[sample]), 2.5 * DAY)
    found = led[sample][led[sample] >= 50 * DAY][0]
    for i in set(range(4)) - {sample}:
        assert found in led[i], i
        assert np.allclose(np.diff(led[i][led[i] >= found]), 30 * DAY)  # its period starts again
    control = sample_then_revisit.sampled(world, group, samples=1, lead=0.25, rest=3.0, seed=0, follow=False)
    assert all(found not in control[i] for i in set(range(4)) - {sample})
    assert np.array_equal(control[sample], led[sample])


def test_pages_added_within_the_window_arrive_when_added_and_change_only_after():
    base = docs_sites.population(docs_sites.EVERY)
    pages, found = docs_sites.found_during(docs_sites.EVERY)
    assert [p.name for p in pages[:len(base)]] == [p.name for p in base]
    assert not found[:len(base)].any()
    late = found[len(base):]
    assert late.size > 0 and np.all((late > 0) & (late < WINDOW_DAYS * DAY))
    for page, at in zip(pages[len(base):], late, strict=True):
        assert np.all(page.changes > at), page.name

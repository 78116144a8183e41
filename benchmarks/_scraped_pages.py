"""Real HTML captures over time from "git scraping" repositories, labelled by their visible text.

A git-scraping repository commits a page's HTML each time a scheduled fetch returned other
bytes than the last one, so the commits touching one file are that page's captures, each
different in bytes from the one before. Which of them changed in content is decided here
by an extractor that shares nothing with this project's detector: ``html2text`` (the
page as Markdown, links and images left out), whitespace and Markdown markers removed. A
capture whose words equal the previous capture's is an **unchanged-content revisit**;
one whose words differ is a **real change**; one whose words differ only in digits is
labelled ``None`` (reason ``numbers_only``: a price or a stock count, or a clock or a
comment count; no label can tell them apart without knowing the page) and left out of
the scores; so are the two captures of a flap A -> B -> A where B is less than half of
A's text (an error page or an empty shell between two copies of the page).

Used by ``benchmarks/make_html_corpus.py``; each source names its repository (read from
the ``fetch`` tool's mirror), which files are pages, each page's host and family.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

FAMILIES = ("news/portal", "government/data", "shop/product", "docs/changelog",
            "forum/blog", "status", "legal")
LEGAL_WORDS = re.compile(r"impressum|datenschutz|privacy|terms|agb|nutzungsbedingungen|cookie",
                         re.I)


def _reversed_host(path: str) -> str:
    """``de/netcup/vserver.html`` and ``sites/de-netcup-vserver.html`` -> ``netcup.de``."""
    parts = path.removesuffix(".html").split("/")
    if parts[0] == "sites":
        parts = parts[1].split("-")
    host = f"{parts[1]}.{parts[0]}"
    return {"rain.de": "rain-brainz.de"}.get(host, host)  # a dash in the flat form


# website-stalker-example's pages, by words of their file name (first match wins)
STALKER_FAMILIES = (
    ("availability-and-shipping-status", "status"),
    ("newsroom|apple-events|wdrmaus|netcup-news", "news/portal"),
    ("wiki|docs|releases|telegram|debian|gnome|conventionalcommits|raspberrypi|archriscv"
     "|teamspeak|hetzner", "docs/changelog"),
    ("netcup|pine64-product|pine64/product|apple|cirrus7", "shop/product"),
    ("edjopato|blinry|rain-brainz|konkludenz|ccc", "forum/blog"),
)


def _stalker_family(path: str) -> str | None:
    flat = path.replace("/", "-")
    for words, family in STALKER_FAMILIES:
        if re.search(words, flat):
            return family
    return None


@dataclass(frozen=True)
class Source:
    """One repository: ``pattern`` matches the paths of its pages; ``host`` and ``family``
    map a path to the page's site and family (``None``: not a page of the corpus);
    ``per_host``: at most that many pages of one host and family (those with the most
    captures);
    ``one_page``: all files the pattern matches are captures of one page, the folder (a
    scraper that names each capture's file by the day its data are of)."""

    name: str
    repo: str
    pattern: str
    host: Callable[[str], str]
    family: Callable[[str], str | None]
    per_host: int = 100
    one_page: bool = False
    notes: str = field(default="", compare=False)


# covid-data-archive's raw/<name>.html: each state's or territory's COVID-19 page, the host
# it was fetched from (the archive's own index lists them); dashboards served by a third
# party's app platform (ArcGIS, Tableau, Power BI, Facebook) are left out: a script shell,
# not the government's page.
COVID_STATE_HOSTS = {
    "AK": "dhss.alaska.gov", "AK_data": "dhss.alaska.gov", "AR": "healthy.arkansas.gov",
    "AS": "americansamoa.gov", "AZ": "azdhs.gov", "CA": "cdph.ca.gov",
    "CA_data": "cdph.ca.gov", "CO": "covid19.colorado.gov", "CO_data": "covid19.colorado.gov",
    "CT": "portal.ct.gov", "DC": "coronavirus.dc.gov", "DC_data": "coronavirus.dc.gov",
    "DE": "dhss.delaware.gov", "GA": "dph.georgia.gov", "GA_data": "dph.georgia.gov",
    "GU": "ghs.guam.gov", "HI": "health.hawaii.gov", "HI_data": "hawaiicovid19.com",
    "IA": "idph.iowa.gov", "ID": "coronavirus.idaho.gov", "IL": "dph.illinois.gov",
    "IN": "in.gov", "KS_data": "kdheks.gov", "KY": "chfs.ky.gov", "LA": "ldh.la.gov",
    "MA": "mass.gov", "MA_data": "mass.gov", "MD": "coronavirus.maryland.gov",
    "ME": "maine.gov", "MI": "michigan.gov", "MN": "health.state.mn.us",
    "MN_data": "health.state.mn.us", "MO": "health.mo.gov", "MP": "chcc.gov.mp",
    "MS": "msdh.ms.gov", "NC": "ncdhhs.gov", "NC_data": "ncdhhs.gov", "ND": "health.nd.gov",
    "ND_data": "health.nd.gov", "NH": "dhhs.nh.gov", "NJ": "covid19.nj.gov",
    "NJ_data": "nj.gov", "NM": "cv.nmhealth.org", "NV_data": "dpbh.nv.gov",
    "NY": "coronavirus.health.ny.gov", "NY_data": "coronavirus.health.ny.gov",
    "OH": "coronavirus.ohio.gov", "OH_data": "coronavirus.ohio.gov",
    "OK": "coronavirus.health.ok.gov", "OK_data": "coronavirus.health.ok.gov",
    "OR": "oregon.gov", "PA": "health.pa.gov", "PA_data": "health.pa.gov",
    "PR": "estadisticas.pr", "PR_data": "salud.gov.pr", "RI": "health.ri.gov",
    "RI_data": "health.ri.gov", "SC": "scdhec.gov", "SC_data": "scdhec.gov",
    "SD": "doh.sd.gov", "TN": "tn.gov", "TX_data": "dshs.texas.gov",
    "UT": "coronavirus-dashboard.utah.gov", "UT_data": "coronavirus-dashboard.utah.gov",
    "VI": "doh.vi.gov", "VT": "healthvermont.gov", "WA": "doh.wa.gov",
    "WI": "dhs.wisconsin.gov", "WI_data": "dhs.wisconsin.gov", "WV": "dhhr.wv.gov",
    "WY": "health.wyo.gov",
}


def _covid_state(path: str) -> str:
    return path.removeprefix("raw/").removesuffix(".html")


def _frontpage_family(path: str) -> str:
    return "legal" if LEGAL_WORDS.search(path.rsplit("/", 1)[-1]) else "news/portal"


SOURCES = (
    Source("frontpage-archive", "defgsus/frontpage-archive",
           r"^docs/snapshots/[^/]+/[^/]+\.html$", lambda p: p.split("/")[2], _frontpage_family,
           per_host=4, notes="German news and portal home and section pages, monthly"),
    Source("christian-daily-reporter", "jpoehls/christian-daily-reporter-archive",
           r"^index\.html$", lambda p: "christiandailyreporter.com", lambda p: "news/portal",
           notes="a news home page, captured when its owner ran the scraper"),
    Source("website-stalker", "EdJoPaTo/website-stalker-example",
           r"^(sites/[a-z0-9]+-[^/]+|[a-z]+/[^/]+/.+)\.html$", _reversed_host, _stalker_family,
           per_host=8, notes="shop, docs, blog, news and status pages; website-stalker keeps "
                             "the HTML its editors made (a CSS selection, prettified)"),
    Source("caltech-library", "caltechlibrary/overtime",
           r"^content/(pages|posts)/[^/]+\.html$", lambda p: "library.caltech.edu",
           lambda p: "docs/changelog" if "/pages/" in p else "forum/blog", per_host=25,
           notes="a library's guide pages and blog posts (the body of each, as its API "
                 "serves it)"),
    Source("neos-website", "Wazbat/neos-website-archive",
           r"^neos-local/neos\.com/[^/]+\.html$", lambda p: "neos.com",
           lambda p: "shop/product", notes="a product's home and features pages, every 3 h"),
    Source("michigan-covid", "MJHutchinson/michigan-covid-data",
           r"^website-snapshots/\d\d-\d\d-\d{4}\.html$", lambda p: "michigan.gov",
           lambda p: "government/data", one_page=True,
           notes="a state government's data page, its file named by its data's day"),
    Source("lisboa-kiosks", "ABCurado/quiosque-monitoring",
           r"^pt/lisboa/.+\.html$", lambda p: "lisboa.pt", lambda p: "government/data",
           notes="a city council's calls for tenders and a municipal service page "
                 "(website-stalker, a CSS selection of each)"),
    Source("haw-study", "HAWHHCalendarBot/study-website-stalker",
           r"^de/haw-hamburg/.+\.html$", lambda p: "haw-hamburg.de",
           lambda p: "docs/changelog",
           notes="a university department's wiki pages listing its timetables "
                 "(website-stalker)"),
    Source("geekhack", "Gobluebro/Geekhack-scraper",
           r"^tests/mocks/group-buy(-links)?-test-page\.html$", lambda p: "geekhack.org",
           lambda p: "forum/blog",
           notes="a forum's group-buy board listing and one of its topics, monthly (Flat "
                 "Data commits the whole page)"),
    Source("nz-health", "Staz/nz-covid19-data",
           r"^data/moh/([^/]+)/\1\.html$", lambda p: "health.govt.nz",
           lambda p: "government/data",
           notes="a health ministry's COVID-19 data pages (cases, vaccines, tests), "
                 "whole pages, each fetch that returned other bytes"),
    Source("cmteb-heating", "FlorinPopaCodes/termoficare-data",
           r"^data/termoficare\.html$", lambda p: "cmteb.ro", lambda p: "status",
           notes="a city heating utility's live outage page (the districts without heat "
                 "or hot water and when they come back), every few minutes"),
    Source("apple-security", "Geek-MD/CrazyOnes",
           r"^html/[a-z]{2}-[a-z]{2}\.html$", lambda p: "support.apple.com",
           lambda p: "docs/changelog", per_host=4,
           notes="a vendor's security-release notes page in its regional editions "
                 "(the most-captured four)"),
    Source("edinburgh-covid", "NorwinYu/Edin-Covid-19-Pages-Archive",
           r"^www\.ed\.ac\.uk/news/covid-19.*\.html$", lambda p: "ed.ac.uk",
           lambda p: "government/data", per_host=8,
           notes="a university's official COVID-19 notices (rules for students and staff, "
                 "testing, travel), fetched with wget several times a day: a public body's "
                 "guidance, counted with government pages"),
    Source("liaise-project", "bitic/liaise-website-notifications",
           r"^www\.hymex\.fr/liaise/[^/]+\.html$", lambda p: "hymex.fr",
           lambda p: "docs/changelog",
           notes="a research campaign's pages (working groups, publications, meetings), "
                 "a wget mirror committed when it changed"),
    Source("csgames", "Becojo/csgamesdiff",
           r"^20\d\d(-en)?\.html$", lambda p: "csgames.org", lambda p: "news/portal",
           notes="a student competition's yearly home page (schedule, sponsors, "
                 "announcements), curl'd by a cron job and committed when it changed"),
    Source("ca-roads", "simonw/scrape-roads-dot-ca-gov",
           r"^\d+\.html$", lambda p: "roads.dot.ca.gov", lambda p: "status",
           notes="a state highway department's road-conditions page for four highways "
                 "(closures, lane restrictions, chain controls), every few minutes"),
    Source("fire-dispatch", "simonw/scrape-san-mateo-fire-dispatch",
           r"^incidents\.html$", lambda p: "firedispatch.com",
           lambda p: "government/data",
           notes="a county fire agency's list of active incidents, as its dispatch site "
                 "serves it, every few minutes"),
    Source("alaska-fund", "ShipCreekGroup/permanent-fund-tracker",
           r"^htmls/[0-9T:-]+\.html$", lambda p: "apfc.org", lambda p: "government/data",
           one_page=True,
           notes="a state fund's performance page, fetched twice a day, each capture a file "
                 "named by its time"),
    Source("covid-states", "COVID19Tracking/covid-data-archive",
           r"^raw/[A-Z]{2}(_data)?\.html$",
           lambda p: COVID_STATE_HOSTS.get(_covid_state(p), "unknown"),
           lambda p: "government/data" if _covid_state(p) in COVID_STATE_HOSTS else None,
           notes="US states' and territories' COVID-19 pages (March 2020), the raw HTML the "
                 "COVID Tracking Project's scanner fetched, committed when its cleaned copy "
                 "changed"),
    Source("canada-standards", "PatLittle/GC-Ref-Data-Tracker",
           r"^REF_STDs/[^/]+/[^/]+\.html$", lambda p: "canada.ca",
           lambda p: "government/data", per_host=8,
           notes="a national government's data reference standards (provinces, countries, "
                 "date format, gender, business number ...), several fetches a day"),
    Source("hacker-news", "benfoxall/scrape",
           r"^hacker-news\.html$", lambda p: "news.ycombinator.com", lambda p: "forum/blog",
           notes="a discussion forum's front page (stories, points, comment counts), every "
                 "few minutes"),
    Source("olx-listing", "diogoalves/gitscraping-olx",
           r"^honda-fit-jundiai\.html$", lambda p: "olx.com.br", lambda p: "shop/product",
           notes="a classifieds marketplace's search results for one car model in one region "
                 "(Flat Data, hourly)"),
)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "core.quotepath=off", f"--git-dir={repo}", *args],
                          check=True, capture_output=True, text=True).stdout


def blob(repo: Path, sha: str) -> bytes:
    return subprocess.run(["git", f"--git-dir={repo}", "cat-file", "blob", sha], check=True,
                          capture_output=True).stdout


def present(repo: Path, shas: list[str]) -> set[str]:
    """The blobs the mirror holds: the ``fetch`` tool's snapshots leave out files of 4 MiB
    and more, and a capture whose bytes are not there is no capture of the corpus."""
    out = subprocess.run(["git", f"--git-dir={repo}", "cat-file", "--batch-check"],
                         input="".join(f"{sha}\n" for sha in shas), check=True,
                         capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if not line.endswith(" missing")}


def mirror(mirrors: Path, repo: str) -> Path | None:
    """The git directory the ``fetch`` tool made for ``owner/name``, if any."""
    base = mirrors / repo.replace("/", "+") / "repo"
    for candidate in (base / ".git", base):
        if (candidate / "HEAD").is_file():
            return candidate
    return None


def page_captures(source: Source, repo: Path) -> dict[str, list[tuple[str, str, str]]]:
    """Per page path: [(commit, date, blob)] oldest first, one capture a commit that added
    or modified the page's file (``one_page``: any file of the folder)."""
    pattern = re.compile(source.pattern)
    log = git(repo, "log", "--reverse", "--no-renames", "--format=%x00%H%x01%aI", "--raw",
              "--no-abbrev")
    pages: dict[str, list[tuple[str, str, str]]] = {}
    for entry in log.split("\x00")[1:]:
        head, _, raw = entry.partition("\n")
        commit, date = head.split("\x01")
        for line in raw.splitlines():
            if not line.startswith(":"):
                continue
            meta, path = line.split("\t", 1)
            fields = meta.split()
            if fields[4] not in ("A", "M") or not pattern.search(path):
                continue
            page = path.rsplit("/", 1)[0] if source.one_page else path
            pages.setdefault(page, []).append((commit, date, fields[3]))
    return pages


def choose_pages(source: Source, pages: dict[str, list]) -> list[str]:
    """The pages of the corpus: those with a family and at least 3 captures, at most
    ``per_host`` a host and family (most captures first, then by path: fixed, label-independent)."""
    by_host: dict[tuple[str, str], list[str]] = {}
    for path, caps in pages.items():
        family = source.family(path)
        if family is not None and len(caps) >= 3:
            by_host.setdefault((source.host(path), family), []).append(path)
    chosen = []
    for paths in by_host.values():
        paths.sort(key=lambda p: (-len(pages[p]), p))
        chosen += paths[:source.per_host]
    return sorted(chosen)


_MARKUP = re.compile(r"[#*_>`|\\\-]+")


def visible_words(body: bytes) -> str:
    """The page's words as html2text renders them (links and images left out), without
    Markdown markers and whitespace: the independent label's view of a capture."""
    import html2text  # only the corpus builder needs it (pip install html2text)

    converter = html2text.HTML2Text()
    converter.ignore_links = converter.ignore_images = converter.ignore_emphasis = True
    converter.body_width = 0
    try:
        text = converter.handle(body.decode("utf-8", "replace"))
    except Exception as error:  # a page html2text cannot read is no page of the corpus
        raise ValueError(f"html2text could not read the capture: {error}") from error
    return " ".join(_MARKUP.sub(" ", text).split())


def labels(words: list[str]) -> list[tuple[bool | None, str]]:
    """Per capture (the first has no previous one: ``None``, "first"): real change, or
    unchanged, or left out, with the reason."""
    out: list[tuple[bool | None, str]] = [(None, "first")]
    for before, after in zip(words, words[1:], strict=False):
        if before == after:
            out.append((False, "same_text"))
        elif re.sub(r"\d+", "0", before) == re.sub(r"\d+", "0", after):
            out.append((None, "numbers_only"))
        else:
            out.append((True, "text"))
    for i in range(1, len(words) - 1):
        if words[i - 1] == words[i + 1] != words[i] and len(words[i]) < len(words[i - 1]) / 2:
            out[i] = (None, "flap")
            out[i + 1] = (None, "flap")
    return out

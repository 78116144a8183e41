"""Build the labelled real-HTML corpus for ``benchmarks/change_detection.py`` (issues 34, 59).

Two kinds of sources, read from local git mirrors (the search tool's ``fetch`` brings a
repository to ``/work/.mirror/<owner>+<name>/repo``); each page of the manifest records its
family, host and source (repository, file, first and last commit), so the corpus is
rebuilt from the same mirrors by this script alone.

**Legal documents** (family "legal"): Open Terms Archive collections. Each collection is
two repositories:

- ``<name>-snapshots``: the HTML of each document (terms, privacy policy, imprint,
  trackers policy, community guidelines ... of one service) as fetched, one commit
  each time the fetched bytes differed from the previous fetch ("Record new changes
  of ..." / "First record of ...");
- ``<name>-versions``: the text Open Terms Archive extracts from a snapshot with the
  curated, per-document selectors of its declarations, one commit each time that text
  changed; the commit message names the snapshot commit it was extracted from.

Label of a capture (independent of any detector in this repository): a capture whose
snapshot commit is named by a "Record new changes" / "First record" version commit is a
**real change** (the curated content changed); any other capture is an
**unchanged-content revisit** (its bytes differ from the previous fetch, so a raw-byte
detector calls it changed, but the curated content is the same). Captures named only by
"Apply technical or declaration upgrade" commits (the extraction rules changed, not the
page), and captures whose version differs only in links or whitespace (the versions
are Markdown with link URLs: a tracking id in a link, a link added to or moved from
the same words, a space added after a comma) are labelled ``None`` (``link_only`` says
which) and left out of the scores: the visible wording did not change (Markdown
formatting, a heading made bold, is no change of wording either). So are the two
captures of a flap, a version B whose next version returns to the text before it
(A -> B -> A): B was no copy of the document (a "Loading" shell, an error page, a
page without its main text), whose recording and removal are no content change.

Selection (fixed, detector-independent): only single-source HTML documents (no ``#``
in the file name), only captures after the first version commit that names a snapshot
(older version commits do not); per document, one episode of ``--window`` consecutive
captures around each of its ``--changes`` most recent real changes (8 before, the rest
after) and one episode of the last ``--window`` captures; overlapping episodes are
merged. Each episode is one "page" in the benchmark (its first capture is the first
fetch, each later one a revisit).

**Other families** (news/portal, government/data, shop/product, docs/changelog,
forum/blog, status): "git scraping" repositories that commit a page's HTML whenever a
scheduled fetch returned other bytes (``benchmarks/_scraped_pages.py``: the sources,
how a path maps to a host and a family, and the labels: html2text's visible words,
compared with the previous capture's). Per page, its last ``--window`` captures whose
bytes the mirror holds (a snapshot leaves out files of 4 MiB and more).

Output (outside the repository: the licences of the pages are unknown):
``OUT/manifest.json`` and ``OUT/<collection>/<site>/<doc>/<n>.html``. Run:

    pip install html2text
    python benchmarks/make_html_corpus.py --out /work/html-corpus-v2
    python benchmarks/make_html_corpus.py --legal-only --out /work/html-corpus  # issue 34's
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._scraped_pages import (  # noqa: E402
    SOURCES,
    blob,
    choose_pages,
    labels,
    mirror,
    page_captures,
    present,
    visible_words,
)

COLLECTIONS = ("dating", "genai-eu", "sante-numerique-france")
SNAPSHOT_REF = re.compile(r"snapshots?\s+(https://\S+/commit/([0-9a-f]{40}))")
SHA = re.compile(r"/commit/([0-9a-f]{40})")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "core.quotepath=off", "-C", str(repo), *args], check=True,
                          capture_output=True, text=True).stdout


LINK = re.compile(r"!?\[([^\]]*)\]\([^)\s]*(?:\s+\"[^\"]*\")?\)")


MARKUP = re.compile(r"[#*_>`|\\]")


def _text_only(markdown: str) -> str:
    """The words of a version: links reduced to their text, Markdown emphasis, heading,
    quote and table markers and all whitespace removed."""
    return "".join(MARKUP.sub("", LINK.sub(r"\1", markdown)).split())


def version_labels(versions: Path) -> tuple[set[str], set[str], set[str], str]:
    """Snapshot commits named by content versions whose text changed, by versions where
    only link targets changed, by declaration upgrades, and the date of the first
    version commit that names a snapshot."""
    changed: set[str] = set()
    links: set[str] = set()
    upgrade: set[str] = set()
    flaps: set[str] = set()
    history: dict[str, list[tuple[str, str, str]]] = {}
    first = "9999"
    log = git(versions, "log", "--format=%x00%H%x01%aI%x01%s%x01%b%x01", "--name-only")
    for entry in log.split("\x00")[1:]:
        commit, date, subject, body, names = entry.split("\x01", 4)
        shas = SHA.findall(body)
        if not shas:
            continue
        first = min(first, date)
        files = [n for n in names.split("\n") if n.strip()]
        if not subject.startswith(("Record new changes", "First record")) or len(shas) != 1 \
                or len(files) != 1:
            upgrade.update(shas)
            continue
        if subject.startswith("First record"):
            changed.add(shas[0])
            continue
        after = git(versions, "show", f"{commit}:{files[0]}")
        try:
            before = git(versions, "show", f"{commit}^:{files[0]}")
        except subprocess.CalledProcessError:
            changed.add(shas[0])
            continue
        before_text, after_text = _text_only(before), _text_only(after)
        if before_text == after_text:
            links.add(shas[0])
        else:
            changed.add(shas[0])
            history.setdefault(files[0], []).append((shas[0], before_text, after_text))
    for steps in history.values():
        steps.reverse()  # oldest first
        for (sha_a, before_a, _), (sha_b, _, after_b) in zip(steps, steps[1:], strict=False):
            if after_b == before_a:  # A -> B -> A: B was no copy of the document
                changed.discard(sha_a)
                changed.discard(sha_b)
                flaps.update((sha_a, sha_b))
    return changed, links | flaps, upgrade, first


def captures(snapshots: Path, since: str) -> dict[str, list[tuple[str, str]]]:
    """Per document file: [(commit, date)] oldest first, from ``since`` on."""
    log = git(snapshots, "log", "--reverse", f"--since={since}",
              "--format=%x00%H%x01%aI%x01%s", "--name-only")
    docs: dict[str, list[tuple[str, str]]] = {}
    for entry in log.split("\x00")[1:]:
        head, _, names = entry.partition("\n")
        sha, date, subject = head.split("\x01", 2)
        if not subject.startswith(("Record new changes", "First record")):
            continue
        files = [n for n in names.split("\n") if n.strip()]
        if len(files) != 1:
            continue
        name = files[0]
        if not name.endswith(".html") or "#" in name or name.count("/") != 1:
            continue
        docs.setdefault(name, []).append((sha, date))
    return docs


def episodes(n: int, changes: list[int], window: int, per_doc: int) -> list[range]:
    spans = [range(max(0, n - window), n)]
    for index in changes[-per_doc:]:
        start = max(1, index - 8)
        spans.append(range(start, min(n, start + window)))
    spans.sort(key=lambda r: r.start)
    merged: list[range] = []
    for span in spans:
        if merged and span.start <= merged[-1].stop:
            merged[-1] = range(merged[-1].start, max(merged[-1].stop, span.stop))
        else:
            merged.append(span)
    return [span for span in merged if len(span) >= 2]


def legal_pages(args: argparse.Namespace, out: Path) -> list[dict]:
    """Episodes of Open Terms Archive documents (family "legal")."""
    pages = []
    for collection in COLLECTIONS:
        base = Path(args.mirrors)
        versions = base / f"OpenTermsArchive+{collection}-versions" / "repo"
        snapshots = base / f"OpenTermsArchive+{collection}-snapshots" / "repo"
        if not versions.is_dir() or not snapshots.is_dir():
            print(f"{collection}: no mirror at {versions} and {snapshots} (fetch "
                  f"OpenTermsArchive/{collection}-versions and -snapshots); skipped")
            continue
        changed, links, upgrade, first = version_labels(versions)
        if args.quick:
            print(f"{collection}: {len(changed)} content versions, {len(links)} link-only "
                  f"or flapping, {len(upgrade)} upgrades (--quick: nothing written)")
            continue
        docs = captures(snapshots, first)
        for name, caps in sorted(docs.items()):
            service, doc = name.split("/")
            doc = doc[: -len(".html")]
            change_index = [i for i, (sha, _) in enumerate(caps) if sha in changed and i > 0]
            for number, span in enumerate(episodes(len(caps), change_index, args.window,
                                                   args.changes)):
                folder = out / collection / service / doc
                folder.mkdir(parents=True, exist_ok=True)
                items = []
                for i in span:
                    sha, date = caps[i]
                    body = subprocess.run(
                        ["git", "-C", str(snapshots), "show", f"{sha}:{name}"],
                        check=True, capture_output=True).stdout
                    path = folder / f"{i:05d}.html"
                    path.write_bytes(body)
                    label = None if sha in upgrade or sha in links else (sha in changed)
                    items.append({"path": str(path.relative_to(out)), "time": date,
                                  "commit": sha, "changed": label,
                                  "link_only": sha in links})
                pages.append({"collection": collection, "family": "legal",
                              "host": service.lower().replace(" ", "-"),
                              "page": f"{service}/{doc}#{number}", "doc": doc,
                              "kind": "legal", "captures": items,
                              "source": {"repo": f"OpenTermsArchive/{collection}-snapshots",
                                         "path": name, "from": items[0]["commit"],
                                         "to": items[-1]["commit"],
                                         "labels": f"OpenTermsArchive/{collection}-versions"}})
        print(f"{collection}: {len(docs)} documents, {len(changed)} content versions, "
              f"{len(links)} link-only versions")
    return pages


def scraped_pages(args: argparse.Namespace, out: Path) -> list[dict]:
    """The last ``--window`` captures of each page of the git-scraping sources."""
    pages = []
    for source in SOURCES:
        repo = mirror(Path(args.mirrors), source.repo)
        if repo is None:
            print(f"{source.name}: no mirror of {source.repo} under {args.mirrors} (fetch "
                  f"it); skipped")
            continue
        history = page_captures(source, repo)
        chosen = choose_pages(source, history)
        hosts = {source.host(p) for p in chosen}
        print(f"{source.name}: {len(chosen)} pages of {len(hosts)} hosts from {source.repo}"
              + (" (--quick: nothing written)" if args.quick else ""), flush=True)
        if args.quick:
            continue
        for path in chosen:
            held = present(repo, [sha for _, _, sha in history[path]])
            kept = [capture for capture in history[path] if capture[2] in held]
            caps = kept[-args.window:]
            first = len(kept) - len(caps)
            bodies = [blob(repo, sha) for _, _, sha in caps]
            try:
                words = [visible_words(body) for body in bodies]
            except ValueError as error:
                raise SystemExit(f"{source.repo} {path}: {error}") from error
            host = source.host(path)
            doc = re.sub(r"[^A-Za-z0-9._-]+", "-", path.rsplit("/", 1)[-1].removesuffix(".html"))
            folder = out / source.name / host / doc
            folder.mkdir(parents=True, exist_ok=True)
            items = []
            for number, ((commit, date, _), body, (label, reason)) in enumerate(
                    zip(caps, bodies, labels(words), strict=True)):
                file = folder / f"{first + number:05d}.html"
                file.write_bytes(body)
                items.append({"path": str(file.relative_to(out)), "time": date,
                              "commit": commit, "changed": label if number else None,
                              "reason": reason if number else "first", "link_only": False})
            family = source.family(path)
            pages.append({"collection": source.name, "family": family, "host": host,
                          "page": f"{host}/{doc}#0", "doc": doc, "kind": family,
                          "captures": items,
                          "source": {"repo": source.repo, "path": path,
                                     "from": items[0]["commit"], "to": items[-1]["commit"],
                                     "labels": "html2text visible words"}})
    return pages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mirrors", default="/work/.mirror")
    parser.add_argument("--out", default="/work/html-corpus-v2")
    parser.add_argument("--window", type=int, default=13)
    parser.add_argument("--changes", type=int, default=3)
    parser.add_argument("--legal-only", action="store_true",
                        help="only the Open Terms Archive documents (the corpus of issue 34)")
    parser.add_argument("--quick", action="store_true",
                        help="only count the labels of the mirrors present; write nothing")
    args = parser.parse_args()
    out = Path(args.out)
    pages = legal_pages(args, out)
    if not args.legal_only:
        pages += scraped_pages(args, out)
    if args.quick or not pages:
        return
    (out / "manifest.json").write_text(json.dumps({"pages": pages}, indent=1))
    for family in sorted({p["family"] for p in pages}):
        chosen = [p for p in pages if p["family"] == family]
        revisits = [c for p in chosen for c in p["captures"][1:]]
        print(f"{family}: {len(chosen)} pages, {len({p['host'] for p in chosen})} hosts, "
              f"{sum(c['changed'] is True for c in revisits)} real changes, "
              f"{sum(c['changed'] is False for c in revisits)} unchanged-content revisits, "
              f"{sum(c['changed'] is None for c in revisits)} left out")
    revisits = [c for p in pages for c in p["captures"][1:]]
    print(f"{len(pages)} pages, {len({p['host'] for p in pages})} hosts, "
          f"{sum(c['changed'] is True for c in revisits)} real changes, "
          f"{sum(c['changed'] is False for c in revisits)} unchanged-content revisits")


if __name__ == "__main__":
    main()

"""Build the labelled real-HTML corpus for ``benchmarks/change_detection.py`` (issue 34).

Source: Open Terms Archive collections, read from local git mirrors (the search tool's
``fetch`` brings them to ``/work/.mirror/OpenTermsArchive+<name>/repo``). Each collection
is two repositories:

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

Output (outside the repository: the licences of the pages are unknown):
``OUT/manifest.json`` and ``OUT/<collection>/<service>/<doc>/<n>.html``. Run:

    python benchmarks/make_html_corpus.py --out /work/html-corpus
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mirrors", default="/work/.mirror")
    parser.add_argument("--out", default="/work/html-corpus")
    parser.add_argument("--window", type=int, default=13)
    parser.add_argument("--changes", type=int, default=3)
    parser.add_argument("--quick", action="store_true",
                        help="only count the labels of the mirrors present; write nothing")
    args = parser.parse_args()
    out = Path(args.out)
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
                pages.append({"collection": collection, "host": service.lower().replace(" ", "-"),
                              "page": f"{service}/{doc}#{number}", "doc": doc,
                              "kind": "legal", "captures": items})
        print(f"{collection}: {len(docs)} documents, {len(changed)} content versions, "
              f"{len(links)} link-only versions")
    if args.quick or not pages:
        return
    (out / "manifest.json").write_text(json.dumps({"pages": pages}, indent=1))
    revisits = [c for p in pages for c in p["captures"][1:]]
    print(f"{len(pages)} pages, {len({p['host'] for p in pages})} hosts, "
          f"{sum(c['changed'] is True for c in revisits)} real changes, "
          f"{sum(c['changed'] is False for c in revisits)} unchanged-content revisits")


if __name__ == "__main__":
    main()

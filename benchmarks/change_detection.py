"""Change detection on real HTML revisits (issue 34): false and missed changes per mode.

Reads the labelled corpus ``benchmarks/make_html_corpus.py`` writes (outside the
repository; its pages' licences are unknown) and replays every capture, oldest first
across all pages, through one ``Fingerprinter`` per mode, as one crawler process would
see them (``Fingerprinter.detect``, the call ``responses.outcome`` makes). Per revisit:
"changed" iff the fingerprint differs from the page's stored one; an answer the
detector finds is no copy (bot wall, empty, error page) is a failed fetch: no change,
nothing stored. Scores against the corpus labels:

- false changes: the share of unchanged-content revisits called "changed";
- missed changes: the share of real changes not called "changed";
- detection time per response (``detect`` alone, the body already in memory).

``--processes 2,4``: the ``content`` mode again with K crawler processes sharing one
frontier: each capture goes to one of K ``Fingerprinter`` objects (a seeded draw), and the
frontier keeps the last fingerprint whichever process sent it. Each process learns its own
host masks and remembers only the copies it fetched itself, or, in the "memory shared"
runs, reads and writes each page's memory and each host's masks in Redis
(``crawl/shared_pages.py``, ``detection/host_mask.py``; the embedded server unless ``--url``).
``--restarts 4,40``: one process started afresh N times over the replay, with and without
the shared memory (at 40 a process sees each page about once, as a crawl run as a periodic
job does).

Run: ``python benchmarks/change_detection.py --corpus /work/html-corpus --write``
(``--quick``: every eighth page; writes nothing unless ``--write``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
import zlib
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import table, write_json, write_section  # noqa: E402
from frontier_rate.crawl.shared_pages import SharedPages  # noqa: E402
from frontier_rate.detection.fingerprint import Fingerprinter  # noqa: E402
from frontier_rate.store.connection import connect  # noqa: E402
from frontier_rate.store.namespace import drop  # noqa: E402

MODES = ("raw", "text", "content")
EMPTY = {"unchanged": 0, "false": 0, "changed": 0, "missed": 0, "numbers_only": 0,
         "numbers_only_said": 0}
HEADERS = {"Content-Type": "text/html"}
TERMS_PRIVACY = ("Terms", "Privacy", "Conditions", "Policy", "Imprint", "Guidelines",
                 "Agreement", "Notice")


def load(corpus: Path, quick: bool) -> list[dict]:
    pages = json.loads((corpus / "manifest.json").read_text())["pages"]
    return pages[::8] if quick else pages


def synthetic_corpus(folder: Path, seed: int = 34) -> None:
    """A small synthetic corpus (no real corpus here, as in CI): 3 hosts x 3 legal pages x
    13 fetches, tokens, clock, counter, relative time and a rotating widget changing on
    every fetch, a real one-word edit on about one fetch in eight, a bot wall now and
    then. Only for the script to run; the numbers of record come from the real corpus."""
    rng = random.Random(seed)
    pages = []
    words = ["promptly", "in writing", "reasonably", "at any time", "without notice"]
    for host in range(3):
        for number in range(3):
            text = [f"Clause {i} of document {number} of host {host}: the user agrees to the "
                    f"terms set out here, and the company may act on them." for i in range(6)]
            captures = []
            for fetch in range(13):
                edit = fetch > 0 and rng.random() < 0.125
                if edit:
                    i = rng.randrange(len(text))
                    text[i] = text[i].replace(" the ", f" {rng.choice(words)} the ", 1)
                if fetch > 0 and not edit and rng.random() < 0.05:
                    body = (f"<html><head><title>Just a moment...</title></head><body><p>"
                            f"Checking your browser {rng.getrandbits(32)}</p></body></html>")
                else:
                    body = "".join([
                        f"<html><head><title>Doc {number}</title><script nonce="
                        f"'{rng.getrandbits(64):x}'>var t={rng.getrandbits(40)}</script></head>",
                        "<body><nav><a>Home</a><a>Help</a></nav><main>",
                        *(f"<p>{t}</p>" for t in text),
                        f"</main><aside><p>Most read: story {rng.randrange(4)}</p>"
                        f"<p>{rng.randrange(900)} comments</p>"
                        f"<p>updated {rng.randrange(1, 59)} min ago</p></aside>"
                        f"<footer><p>Built {rng.randrange(24):02d}:{rng.randrange(60):02d}:00, "
                        f"trace {rng.getrandbits(80):020x}</p></footer></body></html>"])
                path = folder / f"h{host}" / f"d{number}" / f"{fetch:02d}.html"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(body)
                captures.append({"path": str(path.relative_to(folder)),
                                 "time": f"2026-01-01T{fetch:02d}:{host}{number}:00",
                                 "changed": edit})
            pages.append({"collection": "synthetic", "host": f"h{host}",
                          "page": f"h{host}/Terms {number}#0", "doc": f"Terms {number}",
                          "kind": "legal", "captures": captures})
    (folder / "manifest.json").write_text(json.dumps({"pages": pages}))


def half_of(host: str) -> int:
    """The half of the corpus a site is in (``--half``): a fixed hash of its host name, so a
    rule is decided on one half and measured on the other (issue 59)."""
    return zlib.crc32(host.encode("utf-8")) % 2


def family_of(page: dict) -> str:
    """The page's family in the manifest (issue 34's corpus: all legal documents)."""
    return page.get("family", "legal")


def group_of(page: dict) -> str | None:
    """Terms and privacy pages apart from the other legal documents (None: not legal)."""
    if family_of(page) != "legal":
        return None
    return "terms/privacy" if any(w.lower() in page["doc"].lower() for w in
                                  ("terms", "privacy", "conditions", "cgu", "cgv")) else "other legal"


def url_of(page: dict) -> str:
    """The URL a page's captures are fetched at. Episodes of one document (pages of the
    corpus) share it: to the frontier and in Redis they are one page."""
    return f"http://{page['host']}.test/{quote(page['page'].split('#')[0], safe='')}"


def run_mode(mode: str, pages: list[dict], corpus: Path, processes: int = 1,
             shared: SharedPages | None = None, restarts: int = 0) -> dict:
    """Replay every capture through ``processes`` fingerprinters (``shared``: their pages'
    memories in Redis); ``restarts``: every process starts afresh that many times, evenly
    over the replay (a crawl stopped and started again)."""

    def fresh() -> list[Fingerprinter]:
        started = [Fingerprinter(mode) for _ in range(processes)]
        if shared is not None:
            for fingerprinter in started:
                fingerprinter.share(shared)
        return started

    fingerprinters = fresh()
    draw = random.Random(34)  # which process fetches each capture
    events = []
    for index, page in enumerate(pages):
        for position, capture in enumerate(page["captures"]):
            events.append((capture["time"], index, position))
    events.sort()
    restart_at = {len(events) * (k + 1) // (restarts + 1) for k in range(restarts)}
    ignored = 0
    stored: dict[int, str | None] = {}
    counts: dict[str, dict[str, int]] = {}
    times: list[float] = []
    wrong: list[tuple[str, str, int, int]] = []  # (family, "false"/"missed", page, capture)
    cpu: list[float] = []  # the detecting thread's CPU time: less of the other jobs' load
    first: list[int] = []  # positions in ``times`` of each page's first copy
    failed_by_label = {"changed": 0, "unchanged": 0, "first": 0}
    for event, (_, index, position) in enumerate(events):
        if event in restart_at:
            ignored += sum(f.stats().get("volatile_ignored", 0) for f in fingerprinters)
            fingerprinters = fresh()
        page = pages[index]
        capture = page["captures"][position]
        body = (corpus / capture["path"]).read_bytes()
        url = url_of(page)
        fingerprinter = fingerprinters[draw.randrange(processes)] if processes > 1 else \
            fingerprinters[0]
        if position == 0:
            first.append(len(times))
        start, start_cpu = time.perf_counter(), time.thread_time()
        detection = fingerprinter.detect(body, url, HEADERS)
        times.append(time.perf_counter() - start)
        cpu.append(time.thread_time() - start_cpu)
        previous = stored.get(index)
        if detection.fingerprint is None:
            key = "first" if previous is None else (
                "changed" if capture["changed"] else "unchanged")
            failed_by_label[key] += 1
            said = False
        else:
            said = previous is not None and detection.fingerprint != previous
            stored[index] = detection.fingerprint
        if previous is None or position == 0:
            continue
        groups = ("all", f"family {family_of(page)}", group_of(page), page["collection"])
        if capture["changed"] is None:
            if capture.get("reason") == "numbers_only":  # left out, but told apart
                for group in filter(None, groups):
                    c = counts.setdefault(group, dict(EMPTY))
                    c["numbers_only"] += 1
                    c["numbers_only_said"] += said
            continue
        if said != capture["changed"]:
            wrong.append((family_of(page), "false" if said else "missed", index, position))
        for group in filter(None, groups):
            c = counts.setdefault(group, dict(EMPTY))
            if capture["changed"]:
                c["changed"] += 1
                c["missed"] += not said
            else:
                c["unchanged"] += 1
                c["false"] += said
    firsts = set(first)
    first_times = sorted(times[i] for i in first)
    first_cpu = sorted(cpu[i] for i in first)
    revisit_times = sorted(t for i, t in enumerate(times) if i not in firsts)
    times.sort()
    cpu.sort()
    return {
        "groups": {g: {**c, "false_share": c["false"] / max(1, c["unchanged"]),
                       "missed_share": c["missed"] / max(1, c["changed"])}
                   for g, c in counts.items()},
        "median_ms": statistics.median(times) * 1e3,
        "p99_ms": times[int(0.99 * (len(times) - 1))] * 1e3,
        "first_copy_median_ms": statistics.median(first_times) * 1e3,
        "first_copy_p99_ms": first_times[int(0.99 * (len(first_times) - 1))] * 1e3,
        "revisit_median_ms": statistics.median(revisit_times) * 1e3,
        "cpu_median_ms": statistics.median(cpu) * 1e3,
        "cpu_p99_ms": cpu[int(0.99 * (len(cpu) - 1))] * 1e3,
        "cpu_first_copy_median_ms": statistics.median(first_cpu) * 1e3,
        "first_copies": len(first_times),
        "load": os.getloadavg()[0],
        "responses": len(times),
        "not_content": failed_by_label,
        "ignored_changes": ignored + sum(f.stats().get("volatile_ignored", 0)
                                         for f in fingerprinters),
        "wrong": wrong,
    }


def print_families(result: dict) -> None:
    """One line a family: false and missed shares, and how the detector called the
    captures whose text changed only in digits (left out of the scores)."""
    for group, c in sorted(result["groups"].items()):
        if group.startswith("family "):
            print(f"    {group[7:]:16s} false {c['false_share']:7.2%} of {c['unchanged']:5d}, "
                  f"missed {c['missed_share']:7.2%} of {c['changed']:5d}; digits only: "
                  f"{c['numbers_only_said']} of {c['numbers_only']} called changed")


def explain(wrong: list, pages: list[dict], corpus: Path, limit: int) -> None:
    """For up to ``limit`` false and missed changes a family, the detector's segments
    (``detection/segments.py``) that the capture added and removed against the page's
    previous capture: which kinds of blocks make an unchanged page "change"."""
    from collections import Counter

    from frontier_rate.detection.segments import segments

    shown: Counter = Counter()
    for family, kind, index, position in wrong:
        if shown[family, kind] >= limit:
            continue
        shown[family, kind] += 1
        page = pages[index]
        lists = [segments((corpus / page["captures"][i]["path"]).read_bytes()
                          .decode("utf-8", "replace")) for i in (position - 1, position)]
        texts = [Counter(parts) for parts in lists]
        added, removed = texts[1] - texts[0], texts[0] - texts[1]
        same = "" if added or removed else (
            ", same segments in another order" if lists[0] != lists[1] else
            ", same segments in the same order")
        print(f"  {family} {kind}: {page['captures'][position]['path']}: "
              f"+{sum(added.values())} -{sum(removed.values())} segments{same}")
        for sign, part in (("+", added), ("-", removed)):
            for text in list(part)[:3]:
                print(f"      {sign} {text[:110]!r}")


SHARDS = 16
"""Shards of the shared runs' namespaces (the frontier's default)."""


def memory_of(client, namespace: str, kind: str) -> int:
    """``MEMORY USAGE`` (value, key and Redis's own overhead) summed over the namespace's
    keys of one ``kind``: "pm" the shards' page memory hashes, "hm" the hosts' mask logs (a
    host with no mask has no key), "ld" the shards' capped logs of last detections."""
    pattern = f"fr:{{{namespace}:*}}:{kind}" + (":*" if kind == "hm" else "")
    return sum(client.memory_usage(key, samples=0) or 0
               for key in client.scan_iter(match=pattern, count=1000))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default="/work/html-corpus")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--processes", default="2,4",
                        help="content mode with K processes on one frontier ('' for none)")
    parser.add_argument("--restarts", default="4,40",
                        help="content mode with one process started afresh N times, for "
                             "each N ('' for none; 40: each process sees a page about once)")
    parser.add_argument("--half", type=int, choices=(0, 1),
                        help="only the sites whose CRC-32 of the host name is even (0) or odd "
                             "(1): decide a rule on one half, report the other apart")
    parser.add_argument("--explain", type=int, default=0,
                        help="print the segments behind N false and N missed changes a "
                             "family (the content mode, one process)")
    parser.add_argument("--url", default=os.environ.get("FRONTIER_RATE_REDIS_URL"),
                        help="where the shared runs keep the pages' memories (default: "
                             "$FRONTIER_RATE_REDIS_URL, else the embedded server)")
    args = parser.parse_args()
    corpus = Path(args.corpus)
    scratch = None
    if not (corpus / "manifest.json").is_file():
        if args.write:
            raise SystemExit(f"--corpus {corpus}: no manifest.json (build the corpus with "
                             "benchmarks/make_html_corpus.py)")
        scratch = tempfile.TemporaryDirectory()
        corpus = Path(scratch.name)
        synthetic_corpus(corpus)
        print(f"no corpus at {args.corpus}: a synthetic one (numbers not of record)")
    pages = load(corpus, args.quick and scratch is None)
    if args.half is not None:
        pages = [p for p in pages if half_of(p["host"]) == args.half]
    results = {}
    for mode in args.modes.split(","):
        results[mode] = run_mode(mode, pages, corpus)
        r = results[mode]
        a = r["groups"]["all"]
        tp = r["groups"].get("terms/privacy", a)
        print(f"{mode:8s} false {a['false_share']:.3%} of {a['unchanged']} "
              f"(terms/privacy {tp['false_share']:.3%}), missed {a['missed_share']:.3%} of "
              f"{a['changed']} (terms/privacy {tp['missed_share']:.3%}), "
              f"median {r['median_ms']:.2f} ms p99 {r['p99_ms']:.2f} ms (CPU "
              f"{r['cpu_median_ms']:.2f} / {r['cpu_p99_ms']:.2f} ms), first copies median "
              f"{r['first_copy_median_ms']:.2f} ms (CPU {r['cpu_first_copy_median_ms']:.2f}) "
              f"p99 {r['first_copy_p99_ms']:.2f} ms, revisits median "
              f"{r['revisit_median_ms']:.2f} ms, not content {r['not_content']}", flush=True)
        print_families(r)
        if mode == "content" and args.explain:
            explain(r["wrong"], pages, corpus, args.explain)
    shared = {}
    counts = [int(k) for k in args.processes.split(",") if k.strip()]
    if any(count < 2 for count in counts):
        parser.error(f"--processes: counts of at least 2, got {args.processes}")
    restarts = [int(n) for n in args.restarts.split(",") if n.strip()]
    if any(n < 1 for n in restarts):
        parser.error(f"--restarts: counts of at least 1, got {args.restarts}")
    client = connect(args.url) if counts or restarts else None
    runs = [(f"{count} processes", count, 0) for count in counts]
    runs += [(f"{n} restarts", 1, n) for n in restarts]
    for name, count, started_again in runs:
        for memory in ("own", "shared"):
            namespace = f"bench-change-detection-{uuid.uuid4().hex[:8]}"
            pages_memory = SharedPages(client, namespace, SHARDS, 86400.0) \
                if memory == "shared" else None
            try:
                r = run_mode("content", pages, corpus, count, pages_memory, started_again)
                if pages_memory is not None:
                    urls = len({url_of(p) for p in pages})
                    hosts = len({p["host"] for p in pages})
                    fields, logs = memory_of(client, namespace, "pm"), \
                        memory_of(client, namespace, "hm")
                    r["memory_bytes_per_page"] = fields / urls
                    r["memory_bytes_per_host"] = logs / hosts  # every host, logged or not
                    r["memory_bytes_per_page_all"] = (fields + logs) / urls
                    r["memory_pages"] = urls
                    r["memory_bytes_last_detections"] = memory_of(client, namespace, "ld")
            finally:
                drop(client, namespace)
            shared[name if memory == "own" else f"{name}, memory shared"] = r
            a = r["groups"]["all"]
            print(f"content, {name}, memory {memory}: false {a['false_share']:.3%} of "
                  f"{a['unchanged']}, missed {a['missed_share']:.3%} of {a['changed']}, "
                  f"median {r['median_ms']:.2f} ms p99 {r['p99_ms']:.2f} ms"
                  + (f", {r['memory_bytes_per_page']:.0f} bytes a page and "
                     f"{r['memory_bytes_per_host']:.0f} a host in Redis "
                     f"({r['memory_bytes_per_page_all']:.0f} a page in all)"
                     if pages_memory is not None else ""), flush=True)
            print_families(r)
    hosts = len({p["host"] for p in pages})
    sizes = sorted(len((corpus / c["path"]).read_bytes()) for p in pages for c in p["captures"][:1])
    for r in [*results.values(), *shared.values()]:
        r.pop("wrong", None)
    families = sorted({family_of(p) for p in pages})
    summary = {"pages": len(pages), "hosts": hosts, "modes": results, "processes": shared,
               "families": {f: {"pages": sum(family_of(p) == f for p in pages),
                                "hosts": len({p["host"] for p in pages if family_of(p) == f})}
                            for f in families},
               "median_first_copy_bytes": statistics.median(sizes), "quick": args.quick}
    if not args.write:
        return
    write_json("change_detection", summary)
    write_section("change_detection", section(pages, results, shared, hosts, sizes))


def cell(c: dict | None) -> str:
    return "" if c is None else (f"{c['false_share']:.1%} of {c['unchanged']} / "
                                 f"{c['missed_share']:.1%} of {c['changed']}")


def section(pages: list[dict], results: dict, shared: dict, hosts: int,
            sizes: list[int]) -> str:
    """The BENCHMARKS.md section: all pages per mode and run, then every family apart."""
    rows = []
    for mode, r in results.items():
        for group in ("all", "terms/privacy", "other legal"):
            c = r["groups"].get(group)
            if c is None:
                continue
            rows.append([f"`{mode}`", group, f"{c['false_share']:.1%} of {c['unchanged']}",
                         f"{c['missed_share']:.1%} of {c['changed']}",
                         f"{r['median_ms']:.2f}" if group == "all" else "",
                         f"{r['p99_ms']:.2f}" if group == "all" else "", ""])
    for count, r in shared.items():
        for group in ("all", "terms/privacy"):
            c = r["groups"].get(group)
            if c is not None:
                in_redis = (f"{r['memory_bytes_per_page']:,.0f} B / "
                            f"{r['memory_bytes_per_host']:,.0f} B / "
                            f"**{r['memory_bytes_per_page_all']:,.0f} B**"
                            if group == "all" and "memory_bytes_per_page" in r else "")
                rows.append([f"`content`, {count}", group,
                             f"{c['false_share']:.1%} of {c['unchanged']}",
                             f"{c['missed_share']:.1%} of {c['changed']}",
                             f"{r['median_ms']:.2f}" if group == "all" else "",
                             f"{r['p99_ms']:.2f}" if group == "all" else "", in_redis])
    runs = {"1 process": results.get("content"), **shared}
    runs = {name: r for name, r in runs.items() if r is not None}
    families = sorted({family_of(p) for p in pages})
    family_rows = []
    for family in families:
        chosen = [p for p in pages if family_of(p) == family]
        counts = [r["groups"].get(f"family {family}") for r in runs.values()]
        digits = counts[0] or {}
        family_rows.append([family, f"{len(chosen)} / {len({p['host'] for p in chosen})}",
                            *map(cell, counts),
                            f"{digits.get('numbers_only_said', 0)} of "
                            f"{digits.get('numbers_only', 0)}"])
    sources = sorted({(p.get("source") or {}).get("repo", p["collection"]) for p in pages})
    content = results.get("content")
    note = ""
    if content:
        note = (f"\n`content` answers taken as no copy (bot wall, empty, error page): "
                f"{content['not_content']['unchanged']} unchanged-content revisits, "
                f"{content['not_content']['changed']} real changes, "
                f"{content['not_content']['first']} first fetches; "
                f"copies whose bytes differed but content did not (the `ignored_changes` "
                f"stat): {content['ignored_changes']}.\n")
    first_copies = ""
    if content:
        first_copies = (f"`content`, one process: first copies of the pages apart "
                        f"({content['first_copies']}): median "
                        f"{content['first_copy_median_ms']:.2f} ms, p99 "
                        f"{content['first_copy_p99_ms']:.2f} ms; revisits median "
                        f"{content['revisit_median_ms']:.2f} ms; the detecting thread's CPU "
                        f"time (less of the other jobs' load): median "
                        f"{content['cpu_median_ms']:.2f} ms, p99 {content['cpu_p99_ms']:.2f} "
                        f"ms, first copies median {content['cpu_first_copy_median_ms']:.2f} ms "
                        f"(load {content['load']:.1f}).")
    urls = len({url_of(p) for p in pages})
    logs = [r["memory_bytes_last_detections"] for r in shared.values()
            if "memory_bytes_last_detections" in r]
    last_detections = (f"{min(logs):,}-{max(logs):,} B in all for its {SHARDS} shards"
                       if logs else "not measured")
    return f"""## Change detection on real HTML (`benchmarks/change_detection.py`)

Corpus (`benchmarks/make_html_corpus.py`, kept outside the repository): {len(pages)} pages
(episodes of consecutive real captures) of {hosts} sites in {len(families)} families;
median first copy {statistics.median(sizes) / 1024:.0f} KiB; sources: {", ".join(sources)}.
Labels are independent of this project's detector: for legal documents, the Open Terms
Archive versions repositories (curated extraction: a capture whose text version changed
is a real change, every other capture, its bytes different from the previous fetch, an
unchanged-content revisit); for the other families, the visible words html2text renders
(links and images left out, whitespace and Markdown markers removed) compared with the
previous capture's; captures whose words differ only in digits (a price or a clock: no
label tells them apart) are left out and counted in the last column of the family table.
All captures are replayed oldest first through one `Fingerprinter` per mode, as one crawler process;
"K processes": K crawler processes on one frontier, each capture fetched by one of them
(a seeded draw), each with its own masks and memory of the copies it fetched; "N restarts":
one process started afresh N times, evenly over the replay; "memory shared": the same with
each page's memory and each host's masks in Redis (`FRONTIER_RATE_SHARED_PAGE_MEMORY`;
in the last column `MEMORY USAGE` summed over the namespace's keys: the shards' page memory
hashes a page, the hosts' mask logs a host of the corpus (a host with no mask has no key),
and both a page, the target's figure; a page is a URL: {urls} URLs, as episodes of one
document share theirs). Beside them, a fixed cost of the namespace, not of
its pages: each shard's capped log of its last detections for `frontier-rate inspect`
(`fr:{{ns:s}}:ld`, {last_detections}).
Time: `Fingerprinter.detect` per response on this 2-core machine shared with other
jobs (load in the JSON); "median ms" and "p99 ms" over every response, wall clock.
{first_copies}

{table(["mode", "pages", "unchanged-content revisits called changed",
        "real changes missed", "median ms", "p99 ms",
        "in Redis: a page / a host / both, a page"], rows)}
{note}
Every family apart, `content` mode (each cell: unchanged-content revisits called changed /
real changes missed):

{table(["family", "pages / sites", *[f"`content`, {name}" for name in runs],
        "digits only, called changed (1 process)"], family_rows)}
"""

if __name__ == "__main__":
    main()

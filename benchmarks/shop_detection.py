"""Change detection on a shop (issue 59): prices, stock and titles a shop shows on several
pages, and a "deal of the moment" box naming a random book on every answer.

A synthetic shop (``frontier_rate/testbed/shop.py``: a home page listing the first books,
categories with lists of ten, a page per book) is revisited pass after pass by one crawler
process (``Fingerprinter("content")``, the default mode). From the third pass on, five books
are edited before each pass (a new price or a new stock line, a seeded draw). The truth of a
revisit is the page's HTML without the deal box; "changed" is a fingerprint other than the
stored one. Reported per shop size: unchanged revisits called changed and real changes
missed, from the third pass on (the second pass is where the deal box is learned; its false
changes are reported apart).

Run: ``python benchmarks/shop_detection.py --write`` (``--quick``: two sizes, prints only).
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import table, write_json, write_section  # noqa: E402
from frontier_rate.detection.fingerprint import Fingerprinter  # noqa: E402
from frontier_rate.testbed.shop import Shop, catalogue  # noqa: E402

HTML = {"Content-Type": "text/html; charset=utf-8"}
SIZES = (12, 30, 100, 300, 1000)
EDITS = 5
PASSES = 10


def replay(books: int, passes: int, seed: int) -> dict[str, int]:
    """Counts of one shop's replay (see the module docstring)."""
    shop = Shop(catalogue(books=books, seed=seed), seed=seed)
    detector = Fingerprinter("content")
    draw = random.Random(seed)
    stored: dict[str, str] = {}
    last: dict[str, str] = {}
    counts = {"learning_false": 0, "learning_revisits": 0, "false": 0, "unchanged": 0,
              "missed": 0, "changes": 0}
    for number in range(passes):
        if number >= 2:
            for book in draw.sample(shop.books, EDITS):
                if draw.random() < 0.5:
                    book.price = f"£{draw.randint(10, 60)}.{draw.randint(0, 99):02d}"
                else:
                    book.stock = draw.randint(1, 25)
        truth = shop.pages(deal=False)
        for path, body in shop.pages().items():
            fingerprint = detector.detect(body.encode(), "http://shop.test" + path, HTML).fingerprint
            if path in stored:
                called = fingerprint != stored[path]
                if number == 1:
                    counts["learning_revisits"] += 1
                    counts["learning_false"] += called
                elif truth[path] != last[path]:
                    counts["changes"] += 1
                    counts["missed"] += not called
                else:
                    counts["unchanged"] += 1
                    counts["false"] += called
            if fingerprint is not None:
                stored[path] = fingerprint
        last = truth
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    sizes = SIZES[:2] if args.quick else SIZES
    rows, results = [], {}
    for books in sizes:
        counts = replay(books, 4 if args.quick else PASSES, seed=books)
        results[str(books)] = counts
        false = counts["false"] / max(1, counts["unchanged"])
        missed = counts["missed"] / max(1, counts["changes"])
        rows.append([books, f"{100 * false:.1f}% of {counts['unchanged']}",
                     f"{100 * missed:.1f}% of {counts['changes']}",
                     f"{counts['learning_false']} of {counts['learning_revisits']}"])
        print(f"{books} books: false {100 * false:.2f}% of {counts['unchanged']}, missed "
              f"{100 * missed:.2f}% of {counts['changes']}, while learning the deal box "
              f"{counts['learning_false']} of {counts['learning_revisits']}")
    if args.write:
        write_json("shop_detection", {"sizes": results, "passes": PASSES, "edits": EDITS})
        write_section("shop_detection", "## Change detection on a shop (`benchmarks/shop_detection.py`)\n\n"
                      "A synthetic shop revisited pass after pass by one process, five books' prices or stock "
                      "edited before each pass from the third; a deal box names a random book on every answer "
                      "(module docstring). From the third pass on:\n\n"
                      + table(["books", "unchanged revisits called changed", "real changes missed",
                               "false on the 2nd pass (deal box learned)"], rows))


if __name__ == "__main__":
    main()

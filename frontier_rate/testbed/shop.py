"""A book shop as a crawler meets one (issue 60): a home page, categories with paginated
lists, product pages with a price, a stock line and a description, and a "deal of the
moment" box naming a random book on every answer.

``Shop`` holds the catalogue and renders every page from it, so a test or a benchmark edits a
book (its price, stock or title) and every page that shows it (the product page, its
category's list, the home page) changes together, as on a real shop. The tests serve it on a
loopback address (tests/shop_support/site.py); ``benchmarks/shop_detection.py`` replays it
through the change detection.
"""

from __future__ import annotations

import html
import random
from dataclasses import dataclass

PER_PAGE = 10
"""Books on one list page (the home page shows the first ``PER_PAGE`` books)."""


@dataclass
class Book:
    slug: str
    title: str
    category: str
    price: str
    stock: int
    description: str


def catalogue(seed: int = 7, books: int = 30, categories: tuple[str, ...] = ("travel", "poetry", "history")
              ) -> list[Book]:
    """``books`` books spread over ``categories``, prices and stock drawn with ``seed``."""
    draw = random.Random(seed)
    words = ("river", "night", "garden", "stone", "letter", "winter", "harbour", "silence", "orchard",
             "lantern", "compass", "meadow", "mirror", "voyage", "ember", "thread")
    found = []
    for number in range(books):
        title = " ".join(draw.choice(words).title() for _ in range(3)) + f" {number}"
        found.append(Book(
            slug=f"book-{number}", title=title, category=categories[number % len(categories)],
            price=f"£{draw.randint(10, 60)}.{draw.randint(0, 99):02d}", stock=draw.randint(1, 25),
            description=" ".join(draw.choice(words) for _ in range(60)).capitalize() + "."))
    return found


class Shop:
    """The pages of a shop of ``books``; ``pages()`` renders them all as they are now."""

    def __init__(self, books: list[Book], seed: int = 11) -> None:
        self.books = books
        self._deal = random.Random(seed)

    def categories(self) -> list[str]:
        return sorted({book.category for book in self.books})

    def book(self, slug: str) -> Book:
        return next(book for book in self.books if book.slug == slug)

    def pages(self, deal: bool = True) -> dict[str, str]:
        """Path -> HTML of every page (the deal box drawn anew: call per answer). Without
        ``deal``, the pages as they are without the box: what a revisit's truth compares."""
        pages = {"/": self._page("Home", self._list(self.books[:PER_PAGE]), deal)}
        for category in self.categories():
            books = [book for book in self.books if book.category == category]
            chunks = [books[start:start + PER_PAGE] for start in range(0, len(books), PER_PAGE)]
            for number, chunk in enumerate(chunks, 1):
                following = (f'<li class="next"><a href="/catalogue/{category}/page-{number + 1}.html">next</a></li>'
                             if number < len(chunks) else "")
                pages[f"/catalogue/{category}/page-{number}.html"] = self._page(
                    category.title(), self._list(chunk) + f'<ul class="pager">{following}</ul>',
                    deal)
        for book in self.books:
            pages[f"/book/{book.slug}.html"] = self._page(book.title, (
                f'<div class="product_main"><h1>{html.escape(book.title)}</h1>'
                f'<p class="price_color">{book.price}</p>'
                f'<p class="instock availability">In stock ({book.stock} available)</p></div>'
                f'<div id="product_description"><h2>Product Description</h2></div>'
                f'<p class="description">{html.escape(book.description)}</p>'), deal)
        return pages

    def page(self, path: str) -> str:
        return self.pages()[path]

    def _list(self, books: list[Book]) -> str:
        items = "".join(
            f'<li><article class="product_pod"><h3><a href="/book/{book.slug}.html" '
            f'title="{html.escape(book.title)}">{html.escape(book.title)}</a></h3>'
            f'<div class="product_price"><p class="price_color">{book.price}</p>'
            f'<p class="instock availability">In stock</p></div></article></li>'
            for book in books)
        return f'<ol class="row">{items}</ol>'

    def _page(self, title: str, main: str, with_deal: bool) -> str:
        deal = self._deal.choice(self.books) if with_deal else None
        menu = "".join(f'<li><a href="/catalogue/{category}/page-1.html">{category.title()}</a></li>'
                       for category in self.categories())
        return (f"<!DOCTYPE html><html><head><title>{html.escape(title)} | Books to Scrape</title></head>"
                f'<body><header><a href="/">Books to Scrape</a></header>'
                f'<div class="side"><ul class="categories">{menu}</ul></div>'
                + (f'<div class="deal">Deal of the moment: <a href="/book/{deal.slug}.html">'
                   f"{html.escape(deal.title)}</a> for {deal.price}</div>" if deal else "") +
                f'<div class="page_inner">{main}</div>'
                f"<footer><p>Warning! This is a demo website for web scraping purposes.</p></footer>"
                f"</body></html>")

"""A list a page shows inside the host's template (issue 59): a product table whose offers
and prices are replaced, or a listing whose entries are, is the page's content. Its new short
texts sit between the host's boilerplate (the menu above, the footer below), where a renamed
menu item sits too; a run of more than ``MENU_RUN`` of them is a list, not a menu edit, and
its change counts. The pages are generated with a fixed seed; the detector is the default
``content`` mode of one process."""

from __future__ import annotations

import random

from frontier_rate.detection.fingerprint import Fingerprinter

HTML = {"Content-Type": "text/html; charset=utf-8"}
BASE = "http://hosting.test"
PAGES = [f"/server/{name}" for name in ("root", "vps", "storage", "gpu", "web", "mail")]


def offers(draw: random.Random, count: int) -> list[tuple[str, str]]:
    """``count`` offers: a short product name and its price."""
    return [(f"{draw.choice(('RS', 'VPS', 'ARM', 'Root'))} {draw.randint(100, 9999)} "
             f"G{draw.randint(8, 12)}", f"ab {draw.randint(3, 90)},{draw.randint(0, 99):02d} €")
            for _ in range(count)]


def page(path: str, table: list[tuple[str, str]], menu: tuple[str, ...]) -> bytes:
    """One page of the host: the menu, a table of offers (name and price cells) right after
    it, the footer."""
    rows = "".join(f"<tr><td>{name}</td><td>{price}</td></tr>" for name, price in table)
    items = "".join(f"<li><a href='/{item.lower()}'>{item}</a></li>" for item in menu)
    return (f"<html><head><title>Server {path}</title></head><body>"
            f"<nav><ul>{items}</ul></nav><table>{rows}</table><footer><p>Prices include VAT.</p>"
            f"<p>Hosting GmbH, Example Street 1, Nuremberg</p></footer></body></html>").encode()


class Host:
    """Every page of the host revisited once a pass by one detector."""

    def __init__(self) -> None:
        self.draw = random.Random(59)
        self.tables = {path: offers(self.draw, 6) for path in PAGES}
        self.menu = ("Products", "Support", "Company", "Contact")
        self.detector = Fingerprinter("content")
        self.stored: dict[str, str] = {}

    def crawl(self) -> set[str]:
        """One pass: the pages called changed."""
        called = set()
        for path in PAGES:
            body = page(path, self.tables[path], self.menu)
            fingerprint = self.detector.detect(body, BASE + path, HTML).fingerprint
            assert fingerprint is not None, path
            if path in self.stored and fingerprint != self.stored[path]:
                called.add(path)
            self.stored[path] = fingerprint
        return called


def test_a_table_of_offers_replaced_inside_the_template_is_a_change():
    host = Host()
    host.crawl()
    assert host.crawl() == set()
    host.tables["/server/vps"] = offers(host.draw, 6)  # a new generation: a run of 12 cells
    assert host.crawl() == {"/server/vps"}
    assert host.crawl() == set()


def test_a_price_in_a_table_replaced_before_is_still_content():
    host = Host()
    host.crawl()
    host.crawl()
    host.tables["/server/vps"] = offers(host.draw, 6)
    assert host.crawl() == {"/server/vps"}
    name, _ = host.tables["/server/vps"][2]
    host.tables["/server/vps"][2] = (name, "ab 1,00 €")  # one price of the new table
    assert host.crawl() == {"/server/vps"}


def test_a_menu_item_renamed_on_every_page_is_still_no_change():
    host = Host()
    host.crawl()
    host.crawl()
    host.menu = ("Products", "Help", "Company", "Contact")
    assert host.crawl() == set()
    assert host.crawl() == set()


def category(products: list[tuple[str, str, bool]]) -> bytes:
    """A category page of a shop: the menu, each product's name and its price-and-stock line
    ("$ 24.99 Add to cart", or "Sold out"), the footer."""
    items = "".join(f"<li><h2>{name}</h2><p>{price} {'Add to cart' if stock else 'Sold out'}</p></li>"
                    for name, price, stock in products)
    return (f"<html><head><title>Shop</title></head><body><nav><ul><li>Boards</li><li>Cases</li>"
            f"</ul></nav><ul>{items}</ul><footer><p>Shop Ltd, Example Road 2</p></footer>"
            f"</body></html>").encode()


def test_a_stock_line_that_goes_and_comes_back_stays_content():
    """A product's stock line with its price on two category pages (the product's name there
    is on a share of the host's pages: spread) flips between in and out of stock: every flip
    is a change of both pages, never a rotating block or a menu edit of the host."""
    detector = Fingerprinter("content")
    products = [("PineBoard 64", "$ 24.99", True), ("PineCase", "$ 9.99", True),
                ("SolderKit", "$ 14.50", True)]
    shelves = {"/shop/boards": (0, 1), "/shop/cases": (1, 2), "/shop/kits": (2, 0)}
    stored: dict[str, str] = {}

    def crawl() -> set[str]:
        called = set()
        for path, shelf in shelves.items():
            body = category([products[i] for i in shelf])
            fingerprint = detector.detect(body, "http://pine.test" + path, HTML).fingerprint
            assert fingerprint is not None, path
            if path in stored and fingerprint != stored[path]:
                called.add(path)
            stored[path] = fingerprint
        return called

    crawl()
    assert crawl() == set()
    for stock in (False, True, False, True):
        products[0] = (*products[0][:2], stock)
        assert crawl() == {"/shop/boards", "/shop/kits"}, stock
        assert crawl() == set()

"""The settings table (``crawl/setting_table.py``, issue 61): the docs' settings tables, the
adapters' readers and the ``Frontier`` options all agree with it. No Redis."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from frontier_rate.crawl import setting_table
from frontier_rate.crawl.setting_table import FRONTERA, SCRAPY, TABLE, anything
from frontier_rate.crawl.settings import AdapterSettings, adapter_settings
from frontier_rate.engine import Frontier, FrontierOptions
from frontier_rate.engine.options import FIELDS
from frontier_rate.store.namespace import FIXED, SETTINGS

DOCS = Path(__file__).resolve().parent.parent / "docs"
DERIVED = {"frontier", "close_after", "close_when_idle", "robots_agent", "per_host",
           "framework_reads_robots", "content_rules"}
"""``AdapterSettings`` fields made from more than one setting, or from the framework's own."""


def docs_rows(doc: str) -> dict[str, str]:
    """Setting name -> default cell of the ``| setting | default | meaning |`` table in ``doc``."""
    text = (DOCS / doc).read_text()
    table = text[text.index("| setting | default | meaning |"):]
    rows = {}
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        name, default = (cell.strip() for cell in line.split(" | ")[:2])
        rows[name.strip("|` ")] = default
    return rows


def test_scrapy_docs_table_lists_every_setting_with_its_default() -> None:
    rows = docs_rows("SCRAPY.md")
    assert rows == {setting.name: setting.shown for setting in TABLE}
    for setting in TABLE:  # a setting only Frontera reads says so
        only = "Frontera only" in (DOCS / "SCRAPY.md").read_text().split(f"`{setting.name}` |")[1]\
            .splitlines()[0]
        assert only is (SCRAPY not in setting.readers), setting.name


def test_frontera_docs_table_agrees_with_who_reads_what() -> None:
    by_name = {setting.name: setting for setting in TABLE}
    rows = docs_rows("FRONTERA.md")
    assert rows
    for name, default in rows.items():
        setting = by_name[name]
        if default == "-":
            assert FRONTERA not in setting.readers, name
        else:
            assert FRONTERA in setting.readers and default == setting.shown, name


def test_every_field_comes_from_the_table_and_unset_settings_read_as_its_defaults() -> None:
    fields = {f.name for f in dataclasses.fields(AdapterSettings)}
    from_table = {setting.field for setting in TABLE if setting.field}
    assert from_table <= fields and fields - from_table == DERIVED
    assert {setting.option for setting in TABLE if setting.option} <= FIELDS
    read = adapter_settings({}.get)
    for setting in TABLE:
        if setting.field and setting.field != "spool_dir":
            assert getattr(read, setting.field) == setting.default, setting.name
    assert read.frontier == {}


BAD = ("not-a-value", 5, -1, "0", 0.0)


@pytest.mark.parametrize("setting", [s for s in TABLE if s.check is not anything
                                     and s.kind != "str"], ids=lambda s: s.name)
def test_a_bad_value_is_an_error_naming_the_setting_and_the_value(setting) -> None:
    refused = 0
    for value in BAD:
        try:
            setting.check(value)
        except ValueError:
            refused += 1
            with pytest.raises(ValueError, match=re.escape(f"{setting.name}={value!r}")):
                adapter_settings({setting.name: value}.get)
    assert refused, f"no bad value among {BAD} for {setting.name}"


def test_frontier_options_are_one_frozen_object_and_shared_settings_are_properties() -> None:
    assert "__getattr__" not in vars(Frontier)
    assert {s.option for s in TABLE if s.scope == setting_table.SHARED} == set(SETTINGS)
    assert {s.option for s in TABLE if s.scope == setting_table.FIXED} <= set(FIXED)
    for name in SETTINGS:
        assert isinstance(vars(Frontier)[name], property), name
    options = FrontierOptions(budget=2.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.budget = 3.0  # type: ignore[misc]
    with pytest.raises(TypeError, match="budgte"):
        options.replace(budgte=1.0)
    with pytest.raises(ValueError, match="budget"):
        Frontier.check_options(budget=-1.0)
    config = adapter_settings({"FRONTIER_RATE_BUDGET": "2", "DOWNLOAD_DELAY": "0.5"}.get)
    assert config.options(namespace="n") == FrontierOptions(namespace="n", budget=2.0,
                                                            min_host_delay=0.5)


def test_frontera_warns_of_a_setting_it_does_not_read_only_when_set_true(caplog) -> None:
    for value, warned in ((None, False), (False, False), (True, True)):
        caplog.clear()
        names = setting_table.warn_unread({"FRONTIER_RATE_DETECTION_PROCESS": value}.get,
                                          FRONTERA)
        assert bool(names) is warned and ("is not read" in caplog.text) is warned

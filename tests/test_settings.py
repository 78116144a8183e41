"""Settings parsing shared by the adapters (frontier_rate.crawl.settings)."""

from __future__ import annotations

import pytest

from frontier_rate.crawl.settings import flag, frontier_kwargs


@pytest.mark.parametrize("value, expected", [(True, True), (False, False), ("0", False),
                                             ("yes", True), (" Off ", False), (1, True)])
def test_flag_reads_booleans(value, expected):
    assert flag(value) is expected


def test_fill_budget_setting_reaches_the_frontier_and_bad_values_name_it():
    assert frontier_kwargs({"FRONTIER_RATE_FILL_BUDGET": "false"}.get) == {"fill_budget": False}
    with pytest.raises(ValueError, match="FRONTIER_RATE_FILL_BUDGET='maybe'"):
        frontier_kwargs({"FRONTIER_RATE_FILL_BUDGET": "maybe"}.get)


def test_both_adapters_read_one_parse_spool_under_jobdir_and_bad_values_named(tmp_path):
    from frontier_rate.crawl.settings import adapter_settings

    assert adapter_settings({"JOBDIR": str(tmp_path)}.get).spool_dir == f"{tmp_path}/frontier-rate"
    assert adapter_settings({"JOBDIR": str(tmp_path),
                             "FRONTIER_RATE_SPOOL_DIR": "/elsewhere"}.get).spool_dir == "/elsewhere"
    assert adapter_settings({"FRONTIER_RATE_CLOSE_AFTER": "idle"}.get).frontier == {
        "fill_budget": False}
    assert adapter_settings({}.get).shared_page_memory is True
    assert adapter_settings({"FRONTIER_RATE_SHARED_PAGE_MEMORY": "True"}.get).shared_page_memory
    for name, value in (("FRONTIER_RATE_MAX_BODY", "big"), ("FRONTIER_RATE_CONDITIONAL", "maybe"),
                        ("FRONTIER_RATE_BATCH", "0"), ("FRONTIER_RATE_LOG_INTERVAL", "often"),
                        ("FRONTIER_RATE_OBEY_CRAWL_DELAY", "perhaps"),
                        ("FRONTIER_RATE_SHARED_PAGE_MEMORY", "sometimes")):
        with pytest.raises(ValueError, match=name):
            adapter_settings({name: value}.get)

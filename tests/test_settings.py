"""Settings parsing shared by the adapters (frontier_rate.settings)."""

from __future__ import annotations

import pytest

from frontier_rate.settings import flag, frontier_kwargs


@pytest.mark.parametrize("value, expected", [(True, True), (False, False), ("0", False),
                                             ("yes", True), (" Off ", False), (1, True)])
def test_flag_reads_booleans(value, expected):
    assert flag(value) is expected


def test_fill_budget_setting_reaches_the_frontier_and_bad_values_name_it():
    assert frontier_kwargs({"FRONTIER_RATE_FILL_BUDGET": "false"}.get) == {"fill_budget": False}
    with pytest.raises(ValueError, match="FRONTIER_RATE_FILL_BUDGET='maybe'"):
        frontier_kwargs({"FRONTIER_RATE_FILL_BUDGET": "maybe"}.get)

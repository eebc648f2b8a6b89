"""Tests the token budget (SPEC B-1..B-4)."""

from __future__ import annotations

import pytest

from foya_tui.runtime.context.budget import Verdict, compute_budget
from foya_tui.settings import BudgetSettings, SettingsError, settings_from_mapping

DEFAULTS = BudgetSettings()


def test_first_request_reserves_a_quarter_of_the_window() -> None:
    budget = compute_budget(8_192, None, None, DEFAULTS)
    assert (budget.output_reserve, budget.input_budget) == (2_048, 6_144)
    # The numbers UX.md shows for foya-sim/small.
    assert (budget.handoff_at, budget.high_water) == (4_300, 4_915)
    assert budget.reserve_basis == "first request"


def test_first_reserve_is_capped_at_16k() -> None:
    budget = compute_budget(200_000, None, None, DEFAULTS)
    assert budget.output_reserve == 16_384 and budget.input_budget == 183_616


@pytest.mark.parametrize(
    ("last_output", "reserve"), [(0, 1_024), (300, 1_024), (2_000, 4_000), (10_000, 8_192)]
)
def test_after_usage_reserve_is_twice_the_last_output_clamped(last_output: int, reserve: int) -> None:
    budget = compute_budget(128_000, None, last_output, DEFAULTS)
    assert budget.output_reserve == reserve and budget.input_budget == 128_000 - reserve


def test_max_input_only_makes_the_limit_stricter() -> None:
    assert compute_budget(128_000, 50_000, None, DEFAULTS).input_budget == 50_000
    assert compute_budget(8_192, 50_000, None, DEFAULTS).input_budget == 6_144


def test_unknown_window_uses_b3_defaults() -> None:
    budget = compute_budget(None, None, 500, DEFAULTS)
    assert budget.high_water == 32_768 and budget.output_reserve == 16_384
    assert budget.window is None and budget.reserve_basis == "unknown window"


def test_verdicts_at_the_lines() -> None:
    budget = compute_budget(8_192, None, None, DEFAULTS)
    assert budget.verdict(4_299) is Verdict.OK
    assert budget.verdict(4_300) is Verdict.HANDOFF
    assert budget.verdict(4_915) is Verdict.COMPACT
    assert budget.verdict(1_000_000) is Verdict.COMPACT  # over budget is a verdict, never a rejection


def test_tiny_window_still_has_an_input_budget() -> None:
    budget = compute_budget(100, None, 5_000, DEFAULTS)
    assert budget.input_budget >= 1 and budget.output_reserve < 100


def test_every_number_is_overridable_in_config() -> None:
    settings = settings_from_mapping(
        {
            "budget": {
                "handoff_ratio": 0.5,
                "compact_ratio": 0.6,
                "first_reserve_ratio": 0.5,
                "reserve_min": 10,
            }
        }
    )
    budget = compute_budget(10_000, None, None, settings.budget)
    assert (budget.output_reserve, budget.handoff_at, budget.high_water) == (5_000, 2_500, 3_000)
    with pytest.raises(SettingsError):
        settings_from_mapping({"budget": {"handoff_ratio": 0.9, "compact_ratio": 0.8}})

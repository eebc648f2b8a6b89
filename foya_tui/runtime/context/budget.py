"""Provides the token budget: output reserve, input budget, handoff and compaction lines (SPEC B-1..B-4).

Window and output share one budget, so history never gets the whole window. The numbers are
recomputed for every request from the route's window and its last real output.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from foya_tui.settings import BudgetSettings


class Verdict(StrEnum):
    OK = "ok"
    HANDOFF = "handoff"
    """In the handoff band (70–80% by default): time to record the execution frontier (SPEC K-1)."""
    COMPACT = "compact"
    """At or past the high-water mark: compaction is due before sending (SPEC C-2 budget trigger)."""


@dataclass(frozen=True)
class Budget:
    window: int | None
    """The route's context window; None when unknown (SPEC B-3 applies)."""
    max_input: int | None
    """A configured input limit, if any."""
    output_reserve: int
    input_budget: int
    handoff_at: int
    high_water: int
    reserve_basis: str
    """Why the reserve is what it is: `first request`, `2 × last output`, `unknown window`."""

    def verdict(self, estimate: int) -> Verdict:
        """Where an estimate falls. Never a rejection: the provider is the final judge (SPEC B-8)."""
        if estimate >= self.high_water:
            return Verdict.COMPACT
        if estimate >= self.handoff_at:
            return Verdict.HANDOFF
        return Verdict.OK


def compute_budget(
    window: int | None,
    max_input: int | None,
    last_output_tokens: int | None,
    settings: BudgetSettings,
) -> Budget:
    """The budget for the next request on a route.

    `last_output_tokens` is the last *real* output on this route (None before any usage).
    """
    if window is None:
        # SPEC B-3: the high-water mark is fixed; the input budget is what puts it at compact_ratio.
        reserve = settings.unknown_reserve
        input_budget = round(settings.unknown_high_water / settings.compact_ratio)
        basis = "unknown window"
    else:
        if last_output_tokens is None:
            reserve = min(int(window * settings.first_reserve_ratio), settings.first_reserve_max)
            basis = "first request"
        else:
            wanted = int(settings.reserve_output_multiplier * last_output_tokens)
            reserve = max(settings.reserve_min, min(settings.reserve_max, wanted))
            basis = "2 × last output"
        reserve = min(reserve, window - 1)  # a tiny window still leaves one input token
        input_budget = window - reserve
    if max_input is not None and max_input < input_budget:
        input_budget = max_input  # SPEC B-2: a configured max input only ever makes it stricter
    input_budget = max(1, input_budget)
    return Budget(
        window=window,
        max_input=max_input,
        output_reserve=reserve,
        input_budget=input_budget,
        handoff_at=int(input_budget * settings.handoff_ratio),
        high_water=int(input_budget * settings.compact_ratio),
        reserve_basis=basis,
    )

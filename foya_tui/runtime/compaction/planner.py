"""Provides the compaction planner: which contiguous, complete prefix of valid history a checkpoint
may cover, at which safe boundary (SPEC C-1, C-3, C-4).

The units a boundary may fall between, and why, live in `view/groups.py`; this module chooses the
phase and how many of them a checkpoint covers.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, replace

from foya_tui.runtime.view.checkpoint import Phase
from foya_tui.runtime.view.groups import Unit


@dataclass(frozen=True)
class Plan:
    """What a compaction will cover: the units after the current checkpoint, through a safe boundary."""

    phase: Phase
    from_seq: int
    """First seq of the new coverage (the current checkpoint's through seq + 1, or 1)."""
    through_seq: int
    anchor_seq: int | None
    """The head anchor; re-inserted verbatim when the plan covers it (mid_turn, standalone)."""
    units: tuple[Unit, ...]
    """The units newly covered, in order."""

    @property
    def message_count(self) -> int:
        """The messages the plan covers: its units are one contiguous run of the message log."""
        return self.units[-1].last - self.units[0].first + 1

    def backed_off(self, through_seq: int) -> Plan | None:
        """This plan covering no further than `through_seq` (at a unit end), or None if nothing is left.

        Used when a compaction request itself overflows (SPEC C-13): coverage backs off to the
        route's accepted boundary, or to half its units."""
        units = tuple(unit for unit in self.units if unit.last_seq <= through_seq)
        if not units:
            return None
        return replace(self, units=units, through_seq=units[-1].last_seq)

    def halved(self) -> Plan | None:
        if len(self.units) < 2:
            return None
        return self.backed_off(self.units[len(self.units) // 2 - 1].last_seq)


@dataclass(frozen=True)
class NothingToCompact:
    reason: str


def plan_compaction(
    units: Sequence[Unit],
    *,
    anchor_seq: int | None,
    covered_through: int,
    phase: Phase | None,
    mid_turn_min_steps: int,
) -> Plan | NothingToCompact:
    """Plan a compaction of valid history, given as its complete `units` (`view/groups.py`, the
    open group left out), beyond `covered_through`.

    `phase` None lets the planner choose, as the budget and provider triggers do (SPEC C-2):
    mid_turn when at least `mid_turn_min_steps` complete steps follow the anchor, else pre_turn.
    The anchor is never summarised away from the model: pre_turn stops before it, mid_turn and
    standalone re-insert it verbatim. The latest complete work step always stays verbatim. When
    pre_turn would find nothing (all before the anchor is covered) but two or more steps follow the
    anchor, mid_turn is chosen below `mid_turn_min_steps`: a turn of large steps must still shrink.

    Units are in seq order, so every look-up here is a bisection or reads only the units after
    the anchor: a plan costs the same at 1,000 and at 100,000 events (issue 17 item 4).
    """
    first_seqs = _FirstSeqs(units)
    anchor_unit = first_seqs.index_of(anchor_seq)
    start = 0 if anchor_unit is None else anchor_unit + 1
    after_anchor = [i for i in range(start, len(units)) if units[i].is_step]
    min_steps = mid_turn_min_steps
    if phase is None:
        phase = Phase.MID_TURN if len(after_anchor) >= mid_turn_min_steps else Phase.PRE_TURN
        if phase is Phase.PRE_TURN and anchor_unit is None:
            phase = Phase.STANDALONE
        # Under pressure with everything before the anchor already covered, a turn of large steps
        # still has its earlier steps to give: mid_turn as soon as one step precedes the latest.
        if (
            phase is Phase.PRE_TURN
            and len(after_anchor) >= 2
            and (not anchor_unit or units[anchor_unit - 1].first_seq <= covered_through)
        ):
            phase, min_steps = Phase.MID_TURN, 2
    if phase is Phase.PRE_TURN:
        if anchor_unit is None:
            return NothingToCompact("there is no user message to keep as the anchor")
        last = anchor_unit - 1
    else:
        if phase is Phase.MID_TURN and len(after_anchor) < min_steps:
            return NothingToCompact(
                f"mid_turn needs {min_steps} complete steps after the anchor; there are {len(after_anchor)}"
            )
        # Everything before the latest complete work step (which stays verbatim: SPEC C-3).
        last = (after_anchor[-1] - 1) if after_anchor else len(units) - 1
    first = first_seqs.first_after(covered_through)
    covered = tuple(units[first : last + 1])
    if not covered:
        if covered_through:
            return NothingToCompact("everything that may be compacted is already covered by the checkpoint")
        # No checkpoint yet: what is left is the anchor's turn and the latest step, kept verbatim.
        return NothingToCompact(
            "there is nothing old enough to compact yet: the latest request and its last step stay verbatim"
        )
    if len(covered) == 1 and covered[0].first_seq == anchor_seq:
        return NothingToCompact("only the anchor would be covered, and it stays verbatim")
    return Plan(
        phase=phase,
        from_seq=covered_through + 1,
        through_seq=covered[-1].last_seq,
        anchor_seq=anchor_seq,
        units=covered,
    )


class _FirstSeqs(Sequence[int]):
    """The units' first seqs as a sequence bisect can search, without copying them."""

    def __init__(self, units: Sequence[Unit]) -> None:
        self._units = units

    def __len__(self) -> int:
        return len(self._units)

    def __getitem__(self, index: int) -> int:  # type: ignore[override]
        return self._units[index].first_seq

    def index_of(self, seq: int | None) -> int | None:
        """The index of the unit that starts at `seq`, or None."""
        if seq is None:
            return None
        index = bisect.bisect_left(self, seq)
        return index if index < len(self._units) and self._units[index].first_seq == seq else None

    def first_after(self, seq: int) -> int:
        """The index of the first unit that starts after `seq`."""
        return bisect.bisect_right(self, seq)

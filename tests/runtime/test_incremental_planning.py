"""Tests that compaction planning follows what was appended, not the whole history (issue 17
item 4): the units of a growing log are extended, never rescanned (SPEC C-4), and a plan looks up
the anchor and the covered prefix by bisection (SPEC C-3)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

from foya_tui.runtime.compaction.planner import Plan, plan_compaction
from foya_tui.runtime.model import Event, EventKind, Role
from foya_tui.runtime.view.checkpoint import Phase
from foya_tui.runtime.view.groups import Unit, UnitLog, units_of
from foya_tui.runtime.view.history import MessageLog


def _call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "name": "read_file", "arguments": "{}"}


def _events() -> Iterator[dict[str, Any]]:
    """Requests, parallel tool groups whose results arrive one event at a time (the last one of a
    batch is sometimes never answered), notes and replies."""
    call = 0
    for turn in range(12):
        yield {"role": "user", "content": f"request {turn}"}
        for step in range(turn % 4 + 1):
            ids = [f"c{call + n}" for n in range(step % 3 + 1)]
            call += len(ids)
            yield {"role": "assistant", "content": None, "tool_calls": [_call(i) for i in ids]}
            answered = ids[:-1] if (turn + step) % 5 == 4 else ids  # an interrupted batch
            for call_id in reversed(answered):
                yield {"role": "tool", "tool_call_id": call_id, "content": "data"}
        yield {"role": "assistant", "content": f"done {turn}"}


def test_the_unit_log_extended_event_by_event_equals_a_full_scan() -> None:
    """SPEC C-4: after every appended event (open groups, placeholders for unanswered calls,
    parallel results in any order), the kept units are exactly those a full scan finds."""
    log = MessageLog()
    units = UnitLog()
    for seq, payload in enumerate(_events(), start=1):
        log.add(Event("s", seq, EventKind.IMPORTED_MESSAGE, payload, "t"))
        open_group = log.open_group_seq
        assert units.units(log.entries, open_group) == units_of(log.entries, open_group), seq


def test_a_replaced_log_is_scanned_again_from_its_start() -> None:
    """A rebuild (after a rewind) gives the index a new log: no unit of the old one survives."""
    first, second = MessageLog(), MessageLog()
    for seq, payload in enumerate(_events(), start=1):
        first.add(Event("s", seq, EventKind.IMPORTED_MESSAGE, payload, "t"))
        if seq <= 20:
            second.add(Event("s", seq, EventKind.IMPORTED_MESSAGE, payload, "t"))
    units = UnitLog()
    assert units.units(first.entries, first.open_group_seq) == units_of(first.entries, first.open_group_seq)
    assert units.units(second.entries, second.open_group_seq) == units_of(
        second.entries, second.open_group_seq
    )


class _CountingUnits(Sequence[Unit]):
    """Units that count how many of them the planner reads."""

    def __init__(self, units: Sequence[Unit]) -> None:
        self._units = units
        self.reads = 0

    def __len__(self) -> int:
        return len(self._units)

    @overload
    def __getitem__(self, index: int) -> Unit: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Unit]: ...
    def __getitem__(self, index: int | slice) -> Unit | Sequence[Unit]:
        if isinstance(index, slice):
            return self._units[index]  # the covered units, handed over whole
        self.reads += 1
        return self._units[index]


def _long_history(turns: int) -> list[Unit]:
    """`turns` of (request, tool step, reply), then a request with three steps after it."""
    units: list[Unit] = []
    seq = 0

    def add(length: int, role: Role) -> None:
        nonlocal seq
        first = len(units) and units[-1].last + 1
        units.append(Unit(first, first + length - 1, seq + 1, seq + length, role))
        seq += length

    for _ in range(turns):
        add(1, Role.USER)
        add(2, Role.ASSISTANT)
        add(1, Role.ASSISTANT)
    add(1, Role.USER)
    for _ in range(3):
        add(2, Role.ASSISTANT)
    return units


def test_a_plan_reads_a_bounded_number_of_units_at_any_history_length() -> None:
    """SPEC C-3 with issue 17 item 4: the anchor and the first uncovered unit are found by
    bisection, and only the units after the anchor are walked: 100 times the history, about the
    same number of units read (a linear scan would read every one)."""
    reads = {}
    for turns in (300, 30_000):
        history = _long_history(turns)
        anchor_seq = history[-4].first_seq
        counted = _CountingUnits(history)
        plan = plan_compaction(
            counted,
            anchor_seq=anchor_seq,
            covered_through=history[len(history) // 2].last_seq,
            phase=None,
            mid_turn_min_steps=3,
        )
        assert isinstance(plan, Plan) and plan.phase is Phase.MID_TURN
        assert plan.units[-1] == history[-2]  # the latest step stays verbatim
        assert plan.units[0] == history[len(history) // 2 + 1]
        reads[turns] = counted.reads
    assert reads[30_000] < 3 * reads[300], reads
    assert reads[30_000] < 200, reads

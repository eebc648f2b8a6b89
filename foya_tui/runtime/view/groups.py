"""Provides atomic tool groups: the units history is cut into, and the one rule for where a cut may
fall (SPEC V, C-1, C-4).

History is cut into *units*: a user message; an assistant message with the results of all its
calls (an atomic tool group, parallel batches included, call ids matched per group so repeated ids
pair correctly); an assistant message without calls. A boundary only ever falls between units, so a
call is never separated from its result, and the incomplete group at the end of history (calls
still waiting) never enters a compacted prefix. The planner, fork and rewind all ask this module;
none of them decides a cut point on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from foya_tui.runtime.model import Role
from foya_tui.runtime.view.history import LogEntry


@dataclass(frozen=True)
class Unit:
    """Whole messages that move together: entries[first..last] of the message log."""

    first: int
    last: int
    first_seq: int
    last_seq: int
    role: Role
    """The role of its head message: user, or assistant (a work step)."""

    @property
    def is_step(self) -> bool:
        return self.role is Role.ASSISTANT


def units_of(entries: Sequence[LogEntry], open_group_seq: int | None = None) -> list[Unit]:
    """The complete units of a message log, in order (the open group at the end left out)."""
    return _scan(entries, 0, open_group_seq)


def _scan(entries: Sequence[LogEntry], start: int, open_group_seq: int | None) -> list[Unit]:
    """The complete units of entries[start:], `start` being the first entry of a unit."""
    units: list[Unit] = []
    count = len(entries)
    while start < count:
        end = start
        head = entries[start].message
        if head.role is Role.ASSISTANT:
            while end + 1 < count and entries[end + 1].message.role is Role.TOOL:
                end += 1
        if head.role is Role.ASSISTANT and entries[start].seq == open_group_seq:
            break  # calls still waiting for their results: incomplete (SPEC C-4)
        seqs = [entries[index].seq for index in range(start, end + 1)]
        units.append(Unit(start, end, min(seqs), max(seqs), head.role))
        start = end + 1
    return units


class UnitLog:
    """The units of one growing message log, kept between calls so that planning a compaction
    costs what was appended since the last plan, not the whole history (issue 17 item 4).

    A message log only ever grows at its end, so every unit that ends before the last entry is
    final; the last one (a tool group may still get results) and an open group are scanned again
    on the next call. A log that was replaced (a rebuild after a rewind) is scanned from the start.
    """

    def __init__(self) -> None:
        self._source: Sequence[LogEntry] | None = None
        self._final: list[Unit] = []
        self._next = 0
        """Index of the first entry not in a final unit."""

    def units(self, entries: Sequence[LogEntry], open_group_seq: int | None) -> list[Unit]:
        """units_of(entries, open_group_seq), from the final units of the previous call."""
        if entries is not self._source or len(entries) < self._next:
            self._source, self._final, self._next = entries, [], 0
        tail = _scan(entries, self._next, open_group_seq)
        final = tail if not tail or tail[-1].last < len(entries) - 1 else tail[:-1]
        if final:
            self._final.extend(final)
            self._next = final[-1].last + 1
        return [*self._final, *tail[len(final) :]]


@dataclass(frozen=True)
class GroupSplit:
    """A cut after `seq` that would separate a tool group's calls from their results (SPEC C-4)."""

    seq: int
    group: Unit

    def refusal(self, action: str, before_seq: int) -> str:
        """One line for the user: where the cut may go instead. `action` reads "fork at" or
        "rewind to"; `before_seq` is the nearest point before the calls that history offers."""
        verb, preposition = action.rsplit(" ", 1)
        return (
            f"seq {self.seq} would separate tool calls from their results: {verb} {preposition} "
            f"{self.group.last_seq} (after the results) or {preposition} {before_seq} (before the calls)"
        )


def group_split(entries: Sequence[LogEntry], seq: int) -> GroupSplit | None:
    """The tool group a history cut right after `seq` would split, or None when the cut is safe."""
    for unit in units_of(entries):
        if unit.is_step and unit.first_seq <= seq < unit.last_seq:
            return GroupSplit(seq, unit)
    return None


__all__ = ["GroupSplit", "Unit", "UnitLog", "group_split", "units_of"]

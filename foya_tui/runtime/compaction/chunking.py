"""Provides the transcript chunks one compaction summarises: a prefix cut into whole-unit chunks
that each fit one summary request, the strictly shrinking versions of a chunk for a request that
overflowed (SPEC K-8), and the merge of segments into one session-level summary in groups that fit
(SPEC C-10). Nothing here sends a request: the service passes in how to summarise.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from foya_tui.runtime.compaction.planner import Plan
from foya_tui.runtime.compaction.summary import (
    PreviousSummary,
    transcript_lines,
)
from foya_tui.runtime.compaction.text import (
    RequestBudget,
    SummaryFailed,
)
from foya_tui.runtime.context.budget import Budget
from foya_tui.runtime.model import Event, EventKind, Role
from foya_tui.runtime.tokens import TokenCounter
from foya_tui.runtime.view.groups import Unit
from foya_tui.runtime.view.history import LogEntry
from foya_tui.runtime.view.snapshot import HistorySnapshot

REQUEST_SAFETY = 0.9
"""Share of the room left for a summary request that its local estimate may fill (tokenizers differ)."""
MIN_MESSAGE_CHARS = 200
REREADABLE_TOOLS = frozenset({"read_file"})
"""Tools whose successful output is file content the agent can read again (K-8 drops it first)."""


@dataclass(frozen=True)
class Chunk:
    """Whole units summarised by one request; its seq range joins the previous chunk's, so the
    segments made from chunks are continuous even where non-message events lie between units."""

    from_seq: int
    through_seq: int
    lines: tuple[str, ...]
    events: tuple[Event, ...]
    units: tuple[Unit, ...]
    chars: int
    """The (lowest) per-message character cap its lines were made with."""
    error_seqs: frozenset[int]


class ShrinkingTranscript:
    """A chunk's transcript, and strictly smaller versions of it for a summary request the provider
    rejected as too long (SPEC K-8): re-readable file contents dropped, then the oldest complete
    unit, then a lower per-message cap, again and again. `at(k)` is the k-th version (0 = as
    chunked), each with fewer tokens than the one before; None when nothing smaller is left."""

    def __init__(self, entries: Sequence[LogEntry], chunk: Chunk, counter: TokenCounter) -> None:
        self._entries = entries
        self._chunk = chunk
        self._counter = counter
        self._versions: list[tuple[Sequence[str], int]] = []
        """Versions made so far with their tokens; counted only once a request overflowed."""
        self._ladder = self._steps()

    def _lines(self, skip_units: int, chars: int, omit_reads: bool) -> tuple[str, ...]:
        entries = [
            entry
            for unit in self._chunk.units[skip_units:]
            for entry in self._entries[unit.first : unit.last + 1]
        ]
        # Imported results often carry no tool name: the call that asked for them does.
        names = {call.id: call.name for entry in entries for call in entry.message.tool_calls}
        reread = frozenset(
            entry.seq
            for entry in entries
            if omit_reads
            and entry.message.role is Role.TOOL
            and (entry.message.name or names.get(entry.message.tool_call_id or "")) in REREADABLE_TOOLS
            and entry.seq not in self._chunk.error_seqs
        )
        return tuple(transcript_lines(entries, chars, self._chunk.error_seqs, reread))

    def _steps(self) -> Iterator[tuple[str, ...]]:
        chars = self._chunk.chars
        yield self._lines(0, chars, True)
        units = len(self._chunk.units)
        for skip in range(1, units):
            yield self._lines(skip, chars, True)
            if chars > MIN_MESSAGE_CHARS:
                chars = max(MIN_MESSAGE_CHARS, chars // 2)
                yield self._lines(skip, chars, True)

    def at(self, level: int) -> Sequence[str] | None:
        if level == 0:
            return self._chunk.lines
        if not self._versions:
            self._versions.append((self._chunk.lines, self._counter.count("\n".join(self._chunk.lines))))
        while len(self._versions) <= level:
            smaller = next(
                (
                    (lines, tokens)
                    for lines in self._ladder
                    if (tokens := self._counter.count("\n".join(lines))) < self._versions[-1][1]
                ),
                None,
            )
            if smaller is None:
                return None
            self._versions.append(smaller)
        return self._versions[level][0]


def summary_input_limit(budget: Budget, summary_max_tokens: int) -> int:
    """Tokens one compaction request may carry on a route: its window minus the summary's reserve."""
    room = budget.window - summary_max_tokens if budget.window else budget.input_budget
    if budget.max_input is not None:
        room = min(room, budget.max_input)
    return max(256, int(room * REQUEST_SAFETY))


def chunks_of(
    snapshot: HistorySnapshot,
    plan: Plan,
    covered: Sequence[Event],
    counter: TokenCounter,
    room: int,
    message_chars: int,
) -> list[Chunk]:
    """The plan's units as transcript chunks that each fit one request (whole units only)."""
    error_seqs = frozenset(
        event.seq
        for event in covered
        if event.kind is EventKind.TOOL_RESULT and event.payload.get("is_error") is True
    )
    covered_seqs = [event.seq for event in covered]
    chunks: list[Chunk] = []
    units: list[Unit] = []
    lines: list[str] = []
    used = 0
    chunk_chars = message_chars
    for unit in plan.units:
        entries = snapshot.entries[unit.first : unit.last + 1]
        chars = message_chars
        unit_lines = transcript_lines(entries, chars, error_seqs)
        tokens = counter.count("\n".join(unit_lines))
        # K-8: a unit too large for one request is read with a lower per-message cap.
        while tokens > room and chars > MIN_MESSAGE_CHARS:
            chars = max(MIN_MESSAGE_CHARS, chars // 2)
            unit_lines = transcript_lines(entries, chars, error_seqs)
            tokens = counter.count("\n".join(unit_lines))
        if units and used + tokens > room:
            chunks.append(_chunk(chunks, plan, units, lines, covered, covered_seqs, chunk_chars, error_seqs))
            units, lines, used = [], [], 0
            chunk_chars = message_chars
        units.append(unit)
        lines.extend(unit_lines)
        used += tokens
        chunk_chars = min(chunk_chars, chars)
    if units:
        chunks.append(_chunk(chunks, plan, units, lines, covered, covered_seqs, chunk_chars, error_seqs))
    return chunks


def _chunk(
    before: Sequence[Chunk],
    plan: Plan,
    units: Sequence[Unit],
    lines: Sequence[str],
    covered: Sequence[Event],
    covered_seqs: Sequence[int],
    chars: int,
    error_seqs: frozenset[int],
) -> Chunk:
    first = before[-1].through_seq + 1 if before else plan.from_seq
    last = units[-1].last_seq
    # `covered` is in seq order: slicing by bisection keeps chunking linear in the prefix.
    events = covered[bisect.bisect_left(covered_seqs, first) : bisect.bisect_right(covered_seqs, last)]
    return Chunk(first, last, tuple(lines), tuple(events), tuple(units), chars, error_seqs)


def fits(previous: Sequence[PreviousSummary], chunk: Chunk, counter: TokenCounter, room: int) -> bool:
    used = sum(counter.count(item.text) + 16 for item in previous)
    return used + counter.count("\n".join(chunk.lines)) <= room


def merge_segments(
    segments: Sequence[tuple[int, int, int, str]],
    counter: TokenCounter,
    room: int,
    requests: RequestBudget,
    summarise: Callable[[int, Sequence[PreviousSummary], Chunk | None], str],
    planned: Callable[[int], None] | None = None,
) -> tuple[int, int, int, str]:
    """One session-level summary over segments (SPEC C-10), merging in groups that fit one
    request when all of them do not (so the merge itself never overflows). Every round has
    fewer items than the last, so this ends; its requests are necessary ones, added to the
    budget, which still bounds repairs. `planned` hears how many merge requests each round adds."""
    items = [PreviousSummary(i, f, t, lvl, text) for i, (f, t, lvl, text) in enumerate(segments, start=1)]
    while True:
        groups: list[list[PreviousSummary]] = [[]]
        used = 0
        for item in items:
            tokens = counter.count(item.text) + 16
            if groups[-1] and used + tokens > room:
                groups.append([])
                used = 0
            groups[-1].append(item)
            used += tokens
        merges = sum(1 for group in groups if len(group) > 1 or len(groups) == 1)
        requests.limit += merges
        if planned is not None:
            planned(merges)  # the progress counter counts on, never restarts at 1
        merged = [
            PreviousSummary(
                index,
                group[0].from_seq,
                group[-1].through_seq,
                max(g.level for g in group) + 1,
                summarise(index, group, None),
            )
            if len(group) > 1 or len(groups) == 1
            else replace(group[0], index=index)
            for index, group in enumerate(groups, start=1)
        ]
        if len(merged) == 1:
            only = merged[0]
            return (only.from_seq, only.through_seq, only.level, only.text)
        if len(merged) >= len(items):
            raise SummaryFailed(
                "cannot reduce further: the summaries do not merge into one request", deterministic=True
            )
        items = merged

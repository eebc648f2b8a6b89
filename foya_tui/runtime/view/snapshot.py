"""Provides a snapshot of valid history at one moment: its messages with what the compaction planner
needs to cut it safely (the open tool group, the anchor, the checkpoints) (SPEC C-3, C-4, R-2)."""

from __future__ import annotations

from dataclasses import dataclass

from foya_tui.runtime.view.checkpoint import Checkpoint
from foya_tui.runtime.view.groups import Unit
from foya_tui.runtime.view.history import LogEntry
from foya_tui.runtime.view.recovery import CheckpointState


@dataclass(frozen=True)
class HistorySnapshot:
    """Valid history's messages at one moment, with what the planner needs to cut it safely."""

    session_id: str
    entries: tuple[LogEntry, ...]
    units: tuple[Unit, ...]
    """The complete atomic units of `entries` (the open group left out): where a cut may fall."""
    open_group_seq: int | None
    anchor_index: int | None
    checkpoints: CheckpointState | None
    checkpoint: Checkpoint | None
    """The checkpoint the snapshot's route applies (SPEC R-2): the planner plans from what that
    route actually sees. Without a route, the current checkpoint."""

    @property
    def anchor(self) -> LogEntry | None:
        """The head anchor: the latest user message (SPEC V), None before the first."""
        if self.anchor_index is None or self.anchor_index >= len(self.entries):
            return None
        return self.entries[self.anchor_index]

    @property
    def anchor_seq(self) -> int | None:
        return self.anchor.seq if self.anchor is not None else None

    @property
    def current(self) -> Checkpoint | None:
        """The session's current checkpoint, whichever route applies it: a new one's parent."""
        return self.checkpoints.current if self.checkpoints is not None else None

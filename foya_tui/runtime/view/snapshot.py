"""Provides a snapshot of valid history at one moment: its messages with what the compaction planner
needs to cut it safely (the open tool group, the anchor, the checkpoints) (SPEC C-3, C-4, R-2)."""

from __future__ import annotations

from dataclasses import dataclass

from foya_tui.runtime.view.checkpoint import Checkpoint
from foya_tui.runtime.view.history import LogEntry
from foya_tui.runtime.view.recovery import CheckpointState


@dataclass(frozen=True)
class HistorySnapshot:
    """Valid history's messages at one moment, with what the planner needs to cut it safely."""

    session_id: str
    entries: tuple[LogEntry, ...]
    open_group_seq: int | None
    anchor_index: int | None
    checkpoints: CheckpointState | None
    checkpoint: Checkpoint | None
    """The checkpoint the snapshot's route applies (SPEC R-2): the planner plans from what that
    route actually sees. Without a route, the current checkpoint."""

    @property
    def current(self) -> Checkpoint | None:
        """The session's current checkpoint, whichever route applies it: a new one's parent."""
        return self.checkpoints.current if self.checkpoints is not None else None

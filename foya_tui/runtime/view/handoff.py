"""Provides handoff records: the hidden continuation reminder persisted once per compaction epoch in
the handoff band, its strict v1 form, and which epochs hold exactly one valid record (SPEC K-1).

A compaction epoch is the current checkpoint ("none" before the first). In the 70–80% band the
runtime stores one `handoff` event for the epoch; it reaches the model as a user-role control
message, is never shown as a user message, and is stripped from forks and compaction input. A
duplicate or a malformed record suppresses its epoch: then no record of that epoch is sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from foya_tui.runtime.model import Event, EventKind, NewEvent
from foya_tui.runtime.providers.summary_format import HANDOFF_MARKER

HANDOFF_VERSION = 1
MAX_TEXT_CHARS = 4_000
NO_EPOCH = "none"
"""The epoch before any checkpoint (and after a rewind voids them all: SPEC P-6)."""

REMINDER_TEXT = (
    f"{HANDOFF_MARKER} Control message from Foya, not a request from the user: the context is "
    "filling up and may soon be compacted. In your next reply, first record your execution "
    "frontier in a few lines: the goal; what is done and verified; what is in flight; the next "
    "concrete step; the paths and commands you need to continue. Then continue the task."
)


class EpochStatus(StrEnum):
    """What an epoch's handoff records amount to (SPEC K-1: one strict v1 record per epoch)."""

    NONE = "none"
    RECORDED = "recorded"
    """Exactly one valid record: it is sent at its position in history."""
    SUPPRESSED = "suppressed"
    """Two or more records, or a malformed one: none of the epoch's records is sent."""


@dataclass(frozen=True)
class HandoffRecord:
    version: int
    epoch: str
    text: str


def epoch_of(checkpoint_id: str | None) -> str:
    """The compaction epoch a checkpoint opens (the current checkpoint is the epoch)."""
    return checkpoint_id or NO_EPOCH


def handoff_event(epoch: str) -> NewEvent:
    return NewEvent(EventKind.HANDOFF, {"version": HANDOFF_VERSION, "epoch": epoch, "text": REMINDER_TEXT})


def parse_handoff(payload: Any) -> HandoffRecord | None:
    """A strict v1 record, or None: exactly the keys version, epoch and text; version the integer 1;
    a non-empty epoch; a non-empty text that starts with the marker and fits MAX_TEXT_CHARS."""
    if not isinstance(payload, Mapping) or set(payload) != {"version", "epoch", "text"}:
        return None
    version, epoch, text = payload["version"], payload["epoch"], payload["text"]
    # bool is an int subclass: True must not pass for version 1.
    if type(version) is not int or version != HANDOFF_VERSION:
        return None
    if not isinstance(epoch, str) or not epoch:
        return None
    if not isinstance(text, str) or not text.startswith(HANDOFF_MARKER) or len(text) > MAX_TEXT_CHARS:
        return None
    return HandoffRecord(version=version, epoch=epoch, text=text)


def _completed_id(event: Event) -> str | None:
    raw = event.payload.get("checkpoint")
    if isinstance(raw, Mapping) and isinstance(checkpoint_id := raw.get("id"), str) and checkpoint_id:
        return checkpoint_id
    return None


class HandoffTracker:
    """Handoff records per epoch, fed valid history in order (incrementally: each event once).

    A record names its epoch; a record too damaged to name one belongs to the epoch current where
    it stands in history: the checkpoint of the latest completion before it, or what a later undo
    restored, or none (also after a rewind, which voids every earlier checkpoint: SPEC P-6).
    """

    def __init__(self) -> None:
        self.current = NO_EPOCH
        self.last_seq = 0
        self._records: dict[str, int] = {}
        self._malformed: set[str] = set()
        self._epochs: dict[int, str] = {}
        """Epoch of each handoff event seen, by seq."""

    def observe(self, event: Event) -> None:
        """Take one event of history into account; events at or before the last one seen are skipped."""
        if event.seq <= self.last_seq:
            return
        self.last_seq = event.seq
        kind = event.kind
        if event.problem is not None:
            # An unreadable handoff row is a malformed record of the epoch where it stands.
            if kind is EventKind.HANDOFF:
                self._count(event.seq, self.current, valid=False)
            return
        if kind is EventKind.COMPACTION_COMPLETED:
            self.current = _completed_id(event) or self.current
        elif kind is EventKind.COMPACTION_UNDONE:
            restored = event.payload.get("restored_id")
            self.current = restored if isinstance(restored, str) and restored else NO_EPOCH
        elif kind is EventKind.REWIND:
            self.current = NO_EPOCH
        elif kind is EventKind.HANDOFF:
            record = parse_handoff(event.payload)
            if record is not None:
                self._count(event.seq, record.epoch, valid=True)
            else:
                epoch = event.payload.get("epoch")
                if not (isinstance(epoch, str) and epoch != ""):  # unreadable: the current epoch's
                    epoch = self.current
                self._count(event.seq, epoch, valid=False)

    def _count(self, seq: int, epoch: str, *, valid: bool) -> None:
        self._epochs[seq] = epoch
        self._records[epoch] = self._records.get(epoch, 0) + 1
        if not valid:
            self._malformed.add(epoch)

    def epoch_at(self, seq: int) -> str | None:
        """The epoch of the handoff event at `seq`, if one was seen there."""
        return self._epochs.get(seq)

    def status(self, epoch: str) -> EpochStatus:
        count = self._records.get(epoch, 0)
        if count == 0:
            return EpochStatus.NONE
        if count == 1 and epoch not in self._malformed:
            return EpochStatus.RECORDED
        return EpochStatus.SUPPRESSED

    def suppressed(self) -> tuple[str, ...]:
        """Epochs whose records are not sent, sorted (part of the projection's revision: SPEC B-7)."""
        return tuple(sorted(epoch for epoch in self._records if self.status(epoch) is EpochStatus.SUPPRESSED))

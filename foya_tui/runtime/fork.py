"""Provides forking a session: a new session whose history is another's valid history up to a seq.

A fork starts from what the conversation *was*, not from how it was managed: its events are the
source's valid messages up to the fork point, imported as `imported_message` events in the shape
`foya import` writes (SPEC H-1). Left out: rewound and unreadable events (SPEC H-4), handoff
records (SPEC K-1: stripped from forks), and every event that is not a message (usage, compaction
events, diagnostics, snips): the fork's own budget, checkpoints and handoff epochs start afresh.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from foya_tui.errors import InputError
from foya_tui.runtime.model import Event, EventKind, NewArtifact, NewEvent, Role, SessionInfo
from foya_tui.runtime.store import EventStore
from foya_tui.runtime.view.groups import group_split
from foya_tui.runtime.view.history import LogEntry, MessageLog, message_role, valid_events


class ForkError(InputError):
    """A fork point that history cannot be cut at (one line for the user)."""


@dataclass(frozen=True)
class ForkedSession:
    """A fork just made: the new session, and the session and seq it was cut from."""

    info: SessionInfo
    source_id: str
    at_seq: int
    """The last event of the source the fork keeps (0: none of them)."""


def _log(events: Sequence[Event]) -> list[LogEntry]:
    """The messages of valid events, tool groups closed as the model sees them (an interrupted
    group's missing results become explicit placeholders)."""
    log = MessageLog()
    for event in events:
        if event.kind is not EventKind.HANDOFF:  # never part of a fork (SPEC K-1)
            log.add(event)
    return [*log.entries, *log.tail()]


def _check_fork_point(at_seq: int, last: int, valid: Sequence[Event]) -> None:
    """Refuse a seq that is not in valid history, or that falls inside a tool group (SPEC C-4)."""
    if at_seq < 0 or at_seq > last:
        raise ForkError(f"seq {at_seq} is not in this session: its events are numbered 1 to {last}")
    seqs = [event.seq for event in valid]
    if at_seq > 0 and at_seq not in seqs:
        raise ForkError(
            f"seq {at_seq} is not an event of this session's valid history (rewound or unreadable)"
        )
    split = group_split(_log(valid), at_seq)
    if split is not None:
        before = max((seq for seq in seqs if seq < split.group.first_seq), default=0)
        raise ForkError(split.refusal("fork at", before))


def _extras(result: Event) -> dict[str, Any]:
    """What a tool result says beyond its text: the ledger reads the error flag and exit code (K-12)."""
    payload = result.payload
    extras: dict[str, Any] = {}
    if isinstance(payload.get("is_error"), bool):
        extras["is_error"] = payload["is_error"]
    if isinstance(payload.get("metadata"), Mapping):
        extras["metadata"] = dict(payload["metadata"])
    return extras


def _imported(entry: LogEntry, result: Event | None, source: str) -> NewEvent:
    """One message as `foya import` stores it (runtime/transcripts.py); `result` is the tool result
    event of a tool message (None for a placeholder of a result that was never recorded)."""
    message = entry.message
    payload: dict[str, Any] = {"role": str(message.role), "content": message.content}
    if message.attachments:
        payload["attachments"] = [ref.to_payload() for ref in message.attachments]
    if message.tool_calls:
        payload["tool_calls"] = [call.to_payload() for call in message.tool_calls]
    if message.tool_call_id is not None:
        payload["tool_call_id"] = message.tool_call_id
        if result is not None:
            payload.update(_extras(result))
    if message.name is not None:
        payload["name"] = message.name
    payload["source"] = source
    return NewEvent(EventKind.IMPORTED_MESSAGE, payload)


def fork_session(store: EventStore, source_id: str, at_seq: int | None = None) -> SessionInfo:
    """Create a session whose history is `source_id`'s valid messages through `at_seq` (default: its
    end), in one transaction, with the attachments' bytes copied (SPEC H-3, H-5).

    Raises ForkError (a ValueError, one line) for a seq that is not in valid history or that would
    separate tool calls from their results, and UnknownSessionError for an unknown session.
    """
    source = store.get_session(source_id)
    events = store.events(source.id)
    last = events[-1].seq if events else 0
    valid = valid_events(events)
    # The end is the last valid event (an unreadable last row is not a place to fork at).
    at = (valid[-1].seq if valid else 0) if at_seq is None else at_seq
    _check_fork_point(at, last, valid)
    # Valid history up to a valid seq is the same whether later rewinds are read or not: a later
    # rewind that cut before `at` would have made `at` itself invalid.
    kept = [event for event in valid if event.seq <= at]
    by_seq = {event.seq: event for event in kept}
    label = f"session {source.id}"
    new_events: list[NewEvent] = []
    artifacts: dict[str, NewArtifact] = {}
    for entry in _log(kept):
        # A placeholder for a missing result carries its call's seq, so it finds no tool event here.
        event = by_seq.get(entry.seq)
        result = event if event is not None and message_role(event) is Role.TOOL else None
        new_events.append(_imported(entry, result, label))
        for ref in entry.message.attachments:
            data = store.artifact(source.id, ref.sha256) if ref.sha256 not in artifacts else None
            if data is not None:
                artifacts[ref.sha256] = NewArtifact(data=data, mime=ref.mime)
            # Missing bytes keep their reference: the compiler says so in the request (SPEC I-1).
    title = f"fork of {source.title or source.short_id}"
    return store.create_session(
        title=title,
        workspace=source.workspace,
        metadata={"forked_from": {"session": source.id, "seq": at}},
        events=new_events,
        artifacts=list(artifacts.values()),
    )


__all__ = ["ForkError", "ForkedSession", "fork_session"]

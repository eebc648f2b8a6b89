"""Provides pure functions over canonical history: valid events, anchors, tool groups, messages.

Everything here derives a *view* from events; nothing changes them (SPEC H-2).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from foya_tui.runtime.model import Event, EventKind, Message, Role, ToolCall

MESSAGE_KINDS = frozenset(
    {EventKind.USER_MESSAGE, EventKind.ASSISTANT_MESSAGE, EventKind.TOOL_RESULT, EventKind.IMPORTED_MESSAGE}
)
MISSING_TOOL_RESULT = "[no result was recorded for this call: it was interrupted]"


def valid_events(events: Iterable[Event]) -> list[Event]:
    """History without rewound or unreadable events (SPEC H-4).

    A rewind event `{"to_seq": n}` invalidates every event after seq n that precedes the rewind.
    Rewinds apply in order, so a later rewind can cut into history written after an earlier one.
    """
    valid: list[Event] = []
    for event in events:
        if event.problem is not None:
            continue
        if event.kind is EventKind.REWIND:
            to_seq = event.payload.get("to_seq")
            if isinstance(to_seq, int):
                valid = [kept for kept in valid if kept.seq <= to_seq]
        valid.append(event)
    return valid


def message_role(event: Event) -> Role | None:
    """The chat role an event speaks in, or None for non-message events."""
    if event.kind is EventKind.USER_MESSAGE:
        return Role.USER
    if event.kind is EventKind.ASSISTANT_MESSAGE:
        return Role.ASSISTANT
    if event.kind is EventKind.TOOL_RESULT:
        return Role.TOOL
    if event.kind is EventKind.IMPORTED_MESSAGE:
        try:
            return Role(event.payload.get("role"))
        except ValueError:
            return None
    return None


def anchor_seq(events: Sequence[Event]) -> int | None:
    """The Head Anchor Seq: the latest user message among valid events (SPEC V)."""
    for event in reversed(events):
        if message_role(event) is Role.USER:
            return event.seq
    return None


def _tool_calls(raw: Any) -> tuple[ToolCall, ...]:
    if not isinstance(raw, list):
        return ()
    return tuple(ToolCall.from_payload(call) for call in raw if isinstance(call, Mapping) and "id" in call)


def event_message(event: Event) -> Message | None:
    """The model-visible message for one event (reasoning is never re-sent: SPEC X-8)."""
    role = message_role(event)
    payload = event.payload
    if role is None:
        return None
    if event.kind is EventKind.IMPORTED_MESSAGE:
        content = payload.get("content")
        return Message(
            role=role,
            content=content if isinstance(content, str) else None,
            tool_calls=_tool_calls(payload.get("tool_calls")),
            tool_call_id=payload.get("tool_call_id"),
            name=payload.get("name"),
        )
    if role is Role.USER:
        return Message(role=role, content=str(payload.get("text", "")))
    if role is Role.ASSISTANT:
        text = payload.get("text") or None
        return Message(role=role, content=text, tool_calls=_tool_calls(payload.get("tool_calls")))
    return Message(
        role=role,
        content=str(payload.get("content", "")),
        tool_call_id=str(payload.get("tool_call_id", "")),
        name=payload.get("name"),
    )


def close_tool_groups(messages: Sequence[Message]) -> list[Message]:
    """Make every atomic tool group complete for the provider (SPEC V, C-4).

    An assistant message's calls must be answered by the tool messages right after it. Calls
    left unanswered (an interrupted turn) get an explicit placeholder result; tool messages that
    answer no pending call cannot be sent and are dropped from this *view* only. Call ids are
    matched per group, so transcripts that reuse ids across turns pair correctly.
    """
    out: list[Message] = []
    pending: list[ToolCall] = []

    def flush() -> None:
        for call in pending:
            out.append(
                Message(role=Role.TOOL, content=MISSING_TOOL_RESULT, tool_call_id=call.id, name=call.name)
            )
        pending.clear()

    for message in messages:
        if message.role is Role.TOOL:
            match = next((call for call in pending if call.id == message.tool_call_id), None)
            if match is not None:
                pending.remove(match)
                out.append(message)
            continue
        flush()
        out.append(message)
        if message.role is Role.ASSISTANT:
            pending.extend(message.tool_calls)
    flush()
    return out


def history_messages(events: Iterable[Event]) -> list[Message]:
    """All valid messages of a history, as the model would see them without a checkpoint."""
    messages = [message for event in valid_events(events) if (message := event_message(event)) is not None]
    return close_tool_groups(messages)

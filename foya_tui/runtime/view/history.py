"""Provides pure functions over canonical history: valid events, anchors, tool groups, messages.

Everything here derives a *view* from events; nothing changes them (SPEC H-2).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

from foya_tui.runtime.model import AttachmentRef, Event, EventKind, Message, Role, ToolCall

MISSING_TOOL_RESULT = "[no result was recorded for this call: it was interrupted]"

T = TypeVar("T")

HISTORY_READ_TOOL: Final = "history_read_tool_result"
"""The tool that reads a tool result back from canonical history: every shortened or snipped result
the model sees points to it (SPEC T-1, T-2, K-3)."""
HISTORY_SEARCH_TOOL: Final = "history_search"
"""The tool that finds any covered event again: what the ledger left out points to it (SPEC K-12)."""


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


def rewound(seq: int, later_rewinds: Iterable[Event]) -> bool:
    """Whether a rewind after `seq` invalidated it (SPEC H-4), given the rewinds that follow it.

    Every rewind applies when it is reached, whatever later rewinds do to it, so an event is
    invalid exactly when some later rewind goes back to before it: `valid_events` agrees.
    """
    return any(
        isinstance(to_seq := rewind.payload.get("to_seq"), int) and to_seq < seq < rewind.seq
        for rewind in later_rewinds
        if rewind.kind is EventKind.REWIND and rewind.problem is None
    )


_KIND_ROLES: Final = {
    EventKind.USER_MESSAGE: Role.USER,
    EventKind.ASSISTANT_MESSAGE: Role.ASSISTANT,
    EventKind.TOOL_RESULT: Role.TOOL,
}
_ROLES: Final = {str(role): role for role in Role}


def message_role(event: Event) -> Role | None:
    """The chat role an event speaks in, or None for non-message events."""
    # Dict lookups rather than Role(...): this runs for every event a compile reads (100,000 on a
    # long session that was never compacted, tests/bench/bench_tui_scale.py).
    if event.kind is EventKind.IMPORTED_MESSAGE:
        role = event.payload.get("role")
        return _ROLES.get(role) if isinstance(role, str) else None
    return _KIND_ROLES.get(event.kind)


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


def _attachments(raw: Any) -> tuple[AttachmentRef, ...]:
    if not isinstance(raw, list):
        return ()
    return tuple(ref for item in raw if (ref := AttachmentRef.from_payload(item)) is not None)


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
            attachments=_attachments(payload.get("attachments")),
        )
    if role is Role.USER:
        return Message(
            role=role,
            content=str(payload.get("text", "")),
            attachments=_attachments(payload.get("attachments")),
        )
    if role is Role.ASSISTANT:
        text = payload.get("text") or None
        return Message(role=role, content=text, tool_calls=_tool_calls(payload.get("tool_calls")))
    return Message(
        role=role,
        content=str(payload.get("content", "")),
        tool_call_id=str(payload.get("tool_call_id", "")),
        name=payload.get("name"),
    )


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One model-visible message, with the seq of the event it came from."""

    seq: int
    message: Message
    hidden: bool = False
    """A control message the model sees but the user never does (a handoff record, SPEC K-1): never
    the head anchor, and stripped from compaction input and forks."""
    _openai: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def openai(self) -> Mapping[str, Any]:
        """The provider form, built on first use and then kept (compiles reuse it, and compare it by
        identity): a long session's entries whose tokens are stored are mostly never sent, and
        their forms would be a fifth of the index's memory."""
        form = self._openai
        if form is None:
            form = self.message.to_openai()
            object.__setattr__(self, "_openai", form)  # a cache: the entry itself does not change
        return form


def _entry(seq: int, message: Message, *, hidden: bool = False) -> LogEntry:
    return LogEntry(seq, message, hidden)  # positional: one per message a compile reads


def handoff_message(event: Event) -> Message | None:
    """The user-role control message a handoff event carries (SPEC K-1), when it has text.

    Kept apart from `event_message`, whose callers (ledger, search, the conversation view) must
    never take a handoff for something the user said; whether a record is sent at all depends on
    its epoch, which the compiler decides.
    """
    text = event.payload.get("text") if event.kind is EventKind.HANDOFF else None
    return Message(role=Role.USER, content=text) if isinstance(text, str) and text else None


class PendingCalls(Generic[T]):
    """The calls of the latest assistant message still waiting for their results (SPEC V, C-4).

    A tool message answers the first waiting call with its id: ids are matched per group and in
    order, so a transcript that reuses ids across groups, or repeats one inside a group, pairs the
    way the model sees it. The model's view (`MessageLog`) and the conversation's
    (`ui/widgets/message_list.history_items`) both pair through this one rule; each keeps its own
    item per call (a log position, a tool block's index)."""

    def __init__(self) -> None:
        self._waiting: list[tuple[str, T]] = []

    def open(self, calls: Iterable[tuple[str, T]]) -> None:
        """A new assistant message: its calls now wait (any older ones are closed by the caller)."""
        self._waiting = list(calls)

    def answer(self, call_id: str) -> T | None:
        """The item of the first waiting call with this id, no longer waiting; None if none waits."""
        for position, (waiting_id, item) in enumerate(self._waiting):
            if waiting_id == call_id:
                del self._waiting[position]
                return item
        return None

    def waiting(self) -> list[T]:
        """The items of the calls still unanswered, in call order."""
        return [item for _, item in self._waiting]

    def close(self) -> list[T]:
        """The calls still unanswered, which no later result may answer any more."""
        if not self._waiting:
            return []  # the usual case, once per message of a long history
        closed = self.waiting()
        self._waiting = []
        return closed


class MessageLog:
    """The valid messages of a history, built incrementally, with atomic tool groups closed.

    `add` ignores handoff events: a handoff record enters only through `add_hidden`, when the
    compiler found it the one valid record of its epoch (SPEC K-1).

    An assistant message's calls must be answered by the tool messages right after it
    (SPEC V, C-4). Calls left unanswered (an interrupted turn) get an explicit placeholder
    result; tool messages that answer no pending call cannot be sent and are left out of this
    *view* only. Call ids are matched per group, so transcripts that reuse ids pair correctly.
    """

    def __init__(self) -> None:
        self.entries: list[LogEntry] = []
        self.anchor_index: int | None = None
        """Index of the latest user message (the Head Anchor) in `entries`; hidden entries never are."""
        self._pending: PendingCalls[tuple[int, ToolCall]] = PendingCalls()

    def add(self, event: Event) -> None:
        message = event_message(event)
        if message is None:
            return
        if message.role is Role.TOOL:
            if self._pending.answer(message.tool_call_id or "") is not None:
                self.entries.append(_entry(event.seq, message))
            return
        unanswered = self._pending.close()
        if unanswered:
            self.entries.extend(self._placeholders(unanswered))
        if message.role is Role.USER:
            self.anchor_index = len(self.entries)
        self.entries.append(_entry(event.seq, message))
        if message.role is Role.ASSISTANT and message.tool_calls:  # none wait now: closed above
            self._pending.open((call.id, (event.seq, call)) for call in message.tool_calls)

    def add_hidden(self, event: Event) -> None:
        """Add a handoff record as a hidden user-role entry (SPEC K-1). Like any user message it
        closes a group still waiting for results (handoffs are written between steps, after all
        results, so in practice there is none), but it never becomes the head anchor."""
        message = handoff_message(event)
        if message is None:
            return
        self.entries.extend(self._placeholders(self._pending.close()))
        self.entries.append(_entry(event.seq, message, hidden=True))

    @staticmethod
    def _placeholders(unanswered: Sequence[tuple[int, ToolCall]]) -> list[LogEntry]:
        return [
            _entry(
                seq,
                Message(role=Role.TOOL, content=MISSING_TOOL_RESULT, tool_call_id=call.id, name=call.name),
            )
            for seq, call in unanswered
        ]

    @property
    def open_group_seq(self) -> int | None:
        """Seq of the assistant message whose calls still wait for results: an incomplete group
        at the end of history, which never enters a compacted prefix (SPEC C-4)."""
        waiting = self._pending.waiting()
        return waiting[0][0] if waiting else None

    def tail(self) -> list[LogEntry]:
        """Placeholders the view needs now for calls still unanswered at the end of history."""
        return self._placeholders(self._pending.waiting())

    def messages(self) -> list[Message]:
        return [entry.message for entry in (*self.entries, *self.tail())]


def history_messages(events: Iterable[Event]) -> list[Message]:
    """All valid messages of a history, as the model would see them without a checkpoint."""
    log = MessageLog()
    for event in valid_events(events):
        log.add(event)
    return log.messages()

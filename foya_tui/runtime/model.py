"""Provides the runtime's domain values: event kinds, events, messages, tool calls, usage, sessions.

Everything here is a frozen dataclass; the store converts rows to these, and nothing above
the store ever sees a database row.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class EventKind(StrEnum):
    """The kinds of canonical history events (SPEC H-1)."""

    USER_MESSAGE = "user_message"
    ASSISTANT_MESSAGE = "assistant_message"
    TOOL_RESULT = "tool_result"
    IMPORTED_MESSAGE = "imported_message"
    COMPACTION_COMPLETED = "compaction_completed"
    COMPACTION_DIAGNOSTIC = "compaction_diagnostic"
    COMPACTION_UNDONE = "compaction_undone"
    """"Undo compaction": makes the previous checkpoint (or none) current again, deleting nothing."""
    REWIND = "rewind"
    HANDOFF = "handoff"
    """A hidden continuation reminder, user-role, never shown as a user message (SPEC K-1)."""
    CONTEXT_SNIPPED = "context_snipped"
    """Tool results the model no longer sees in full (micro-compaction or snip, SPEC K-2..K-4)."""
    PROVIDER_USAGE = "provider_usage"
    TURN_OUTCOME = "turn_outcome"
    """A turn that ended without its reply: failed (with the failure's kind and one-line reason) or
    cancelled. A record for the user, shown on resume as it was live; never a message the model
    sees (the compiler and forks read messages only)."""


class Role(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call requested by the assistant; `arguments` is the raw JSON text."""

    id: str
    name: str
    arguments: str

    def to_payload(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_payload(cls, raw: Mapping[str, Any]) -> ToolCall:
        return cls(id=str(raw["id"]), name=str(raw["name"]), arguments=str(raw.get("arguments") or ""))


@dataclass(frozen=True)
class Usage:
    """Token usage reported by a provider for one request.

    A provider that reports 0/0/0 did not measure anything: that is unknown, not zero, so
    `from_counts` returns None for it (and for missing numbers).
    """

    input_tokens: int
    output_tokens: int
    total_tokens: int

    @classmethod
    def from_counts(cls, input_tokens: Any, output_tokens: Any, total_tokens: Any = None) -> Usage | None:
        def as_int(value: Any) -> int:
            return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

        prompt, completion, total = as_int(input_tokens), as_int(output_tokens), as_int(total_tokens)
        if prompt == 0 and completion == 0 and total == 0:
            return None
        return cls(
            input_tokens=prompt, output_tokens=completion, total_tokens=max(total, prompt + completion)
        )

    def to_payload(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass(frozen=True, slots=True)
class AttachmentRef:
    """A reference from an event to bytes in the session's artifact store (SPEC H-3)."""

    sha256: str
    mime: str
    size: int

    def to_payload(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "mime": self.mime, "size": self.size}

    @classmethod
    def from_payload(cls, raw: Any) -> AttachmentRef | None:
        if not isinstance(raw, Mapping) or not isinstance(raw.get("sha256"), str):
            return None
        size = raw.get("size")
        return cls(
            sha256=raw["sha256"], mime=str(raw.get("mime", "")), size=size if isinstance(size, int) else 0
        )


@dataclass(frozen=True)
class NewArtifact:
    """Bytes to store in a session's artifact store, addressed by their SHA-256."""

    data: bytes
    mime: str

    @property
    def ref(self) -> AttachmentRef:
        return AttachmentRef(
            sha256=hashlib.sha256(self.data).hexdigest(), mime=self.mime, size=len(self.data)
        )


@dataclass(frozen=True, slots=True)
class Event:
    """One immutable row of a session's canonical history (SPEC H-2: never edited)."""

    session_id: str
    seq: int
    kind: EventKind
    payload: Mapping[str, Any]
    created_at: str
    problem: str | None = None
    """Set when the stored row could not be read (corrupt JSON, unknown kind); history skips it."""

    def to_export(self) -> dict[str, Any]:
        record = {
            "seq": self.seq,
            "kind": str(self.kind),
            "created_at": self.created_at,
            "payload": self.payload,
        }
        if self.problem is not None:
            record["problem"] = self.problem
        return record


@dataclass(frozen=True)
class NewEvent:
    """An event about to be appended: the store assigns `seq` and `created_at`."""

    kind: EventKind
    payload: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Message:
    """One model-visible chat message (OpenAI shape), derived from events, never stored."""

    role: Role
    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    attachments: tuple[AttachmentRef, ...] = ()
    """Images the compiler materialises (or replaces by a note) per request (SPEC I-1)."""

    def to_openai(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": str(self.role), "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.tool_calls
            ]
        if self.tool_call_id is not None:
            message["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            message["name"] = self.name
        return message


@dataclass(frozen=True)
class SessionInfo:
    """A session as listed: id, title, timestamps and how many events it holds."""

    id: str
    title: str
    created_at: str
    updated_at: str
    event_count: int
    workspace: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def short_id(self) -> str:
        return self.id[:6]

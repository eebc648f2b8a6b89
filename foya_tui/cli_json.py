"""Provides the CLI's one JSON serializer: runtime values (frozen dataclasses, enums, tuples) become
the JSON that `--json` prints, and only here (SPEC X-6; the runtime talks to its faces in types).

`json_of` turns a report dataclass into an object whose keys are its field names, enums into their
values and tuples into lists, so a report's fields are its JSON keys. `update_json` gives each
runtime update its `foya run --json` line; their keys are pinned by the CLI tests.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

from foya_tui.runtime.updates import (
    CompactionFinished,
    CompactionProgressed,
    ContextSnipped,
    ContextUpdated,
    HandoffRecorded,
    ReplyDelta,
    RetryScheduled,
    RuntimeUpdate,
    StepStarted,
    ToolCallFinished,
    ToolCallStarted,
    TurnFailed,
    TurnFinished,
    TurnStarted,
)


def json_of(value: Any) -> Any:
    """A JSON-ready form of a runtime value: dataclasses by field, enums by value, tuples as lists."""
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: json_of(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(key): json_of(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_of(item) for item in value]
    return value


def update_json(update: RuntimeUpdate) -> dict[str, Any]:
    """The `foya run --json` line of one runtime update."""
    match update:
        case TurnStarted():
            return {
                "type": "turn_started",
                "session": update.session_id,
                "user_seq": update.user_seq,
                "route": update.route_id,
                "model": update.model,
            }
        case StepStarted():
            return {
                "type": "step",
                "session": update.session_id,
                "number": update.number,
                "max_steps": update.max_steps,
            }
        case ContextUpdated():
            return {"type": "context", **json_of(update.report), "session": update.session_id}
        case ReplyDelta():
            return {"type": "delta", "session": update.session_id, "text": update.text}
        case RetryScheduled():
            return {
                "type": "retry",
                "session": update.session_id,
                "reason": update.reason,
                "attempt": update.attempt,
                "delay": round(update.delay_seconds, 3),
            }
        case ToolCallStarted():
            return {
                "type": "tool_call",
                "session": update.session_id,
                "id": update.call_id,
                "name": update.name,
                "arguments": update.arguments,
            }
        case ToolCallFinished():
            return {
                "type": "tool_result",
                "session": update.session_id,
                "seq": update.seq,
                "id": update.call_id,
                "name": update.name,
                "is_error": update.is_error,
                "chars": len(update.content),
                "metadata": dict(update.metadata),
            }
        case TurnFinished():
            return {
                "type": "turn_finished",
                "session": update.session_id,
                "seq": update.assistant_seq,
                "finish_reason": update.finish_reason,
                "usage": update.usage.to_payload() if update.usage else None,
                "notice": update.notice,
            }
        case TurnFailed():
            return {
                "type": "turn_failed",
                "session": update.session_id,
                "kind": update.kind,
                "reason": update.reason,
            }
        case CompactionProgressed():
            return {
                "type": "compaction_progress",
                "session": update.session_id,
                "trigger": update.trigger,
                "stage": update.stage,
                "detail": update.detail,
            }
        case CompactionFinished():
            return {"type": "compaction", **update.report, "session": update.session_id}
        case ContextSnipped():
            return {
                "type": "snipped",
                "session": update.session_id,
                "mode": update.mode,
                "results": update.results,
                "tokens_saved": update.tokens_saved,
            }
        case HandoffRecorded():
            return {"type": "handoff", "session": update.session_id, "seq": update.seq, "epoch": update.epoch}
    raise TypeError(f"no JSON form for {type(update).__name__}")


__all__ = ["json_of", "update_json"]

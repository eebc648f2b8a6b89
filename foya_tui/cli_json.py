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

from foya_tui.paths import FoyaPaths
from foya_tui.runtime.compaction.attempt import CompactionResult
from foya_tui.runtime.compaction.failures import BreakerState
from foya_tui.runtime.compaction.report import InspectReport
from foya_tui.runtime.runtime import SessionOverview
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
from foya_tui.runtime.view.recovery import CheckpointRecord
from foya_tui.settings import Settings


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
            return {"type": "compaction", **compaction_json(update.result), "session": update.session_id}
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


def compaction_json(result: CompactionResult) -> dict[str, Any]:
    """`foya compact --json` (and the `compaction` line of `foya run --json`)."""
    return {
        "outcome": str(result.outcome),
        "checkpoint_id": result.checkpoint_id,
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "reason": result.reason,
        "trigger": str(result.trigger),
        "phase": result.phase,
        "requests": result.requests,
        "segments": result.segments,
        "level": result.level,
        "producer": result.producer,
    }


def inspect_json(report: InspectReport) -> dict[str, Any]:
    """`foya inspect --json`: every checkpoint (with its status), diagnostic, fingerprint, accepted
    boundary and rewound range, the notices and the circuit breaker."""
    return {
        "session": report.session_id,
        "current_checkpoint_id": report.current_id,
        "checkpoints": [
            {**_record_json(report, record), "status": report.status(record)} for record in report.records
        ],
        "diagnostics": [
            {"seq": diagnostic.seq, "created_at": diagnostic.created_at, **diagnostic.payload}
            for diagnostic in report.diagnostics
        ],
        "fingerprints": [
            {"fingerprint": f.fingerprint, "reason": f.reason, "recorded_at": f.recorded_at}
            for f in report.fingerprints
        ],
        "accepted_boundaries": [
            {
                "route": b.route_id,
                "through_seq": b.through_seq,
                "input_tokens": b.input_tokens,
                "output_tokens": b.output_tokens,
                "payload_bytes": b.payload_bytes,
                "recorded_at": b.recorded_at,
            }
            for b in report.boundaries
        ],
        "rewound": [
            {"rewind_seq": r.rewind_seq, "from_seq": r.first_seq, "through_seq": r.last_seq}
            for r in report.rewound
        ],
        "notices": list(report.notices),
        "breaker": breaker_json(report.breaker) if report.breaker is not None else None,
    }


def breaker_json(breaker: BreakerState) -> dict[str, Any]:
    return {
        "state": "open" if breaker.open else "closed",
        "failures": breaker.failures,
        "threshold": breaker.threshold,
        "reasons": list(breaker.reasons),
    }


def _record_json(report: InspectReport, record: CheckpointRecord) -> dict[str, Any]:
    checkpoint = record.checkpoint
    base: dict[str, Any] = {
        "id": record.id,
        "event_seq": record.event_seq,
        "valid": checkpoint is not None and record.problem is None,
        "usable": record.usable,
        "current": record.id == report.current_id,
        "problem": record.problem,
    }
    if checkpoint is None:
        return base
    return {
        **base,
        "previous_id": checkpoint.previous_id,
        "through_seq": checkpoint.through_seq,
        "source_digest": checkpoint.source_digest,
        "head_anchor_seq": checkpoint.head_anchor_seq,
        "phase": str(checkpoint.phase),
        "projection_kind": str(checkpoint.projection_kind),
        "level": checkpoint.level,
        "route": checkpoint.route_id,
        "model": checkpoint.model,
        "created_at": checkpoint.created_at,
        "tokens_before": checkpoint.tokens_before,
        "tokens_after": checkpoint.tokens_after,
        "covered_messages": checkpoint.covered_messages,
        "producer": checkpoint.producer,
        "kept_messages": len(checkpoint.kept_messages),
        "native_state_bytes": report.native_state_size(record),
        "ledger": {
            "counts": checkpoint.ledger.counts,
            "dropped": checkpoint.ledger.dropped,
            "budget_chars": checkpoint.ledger.budget_chars,
            "kinds": json_of(checkpoint.ledger.kinds),
            "text": checkpoint.ledger.render(),
        },
        "segments": [
            {
                "index": s.index,
                "from_seq": s.from_seq,
                "through_seq": s.through_seq,
                "level": s.level,
                "tokens": s.tokens,
                "text": s.text,
            }
            for s in checkpoint.segments
        ],
    }


__all__ = ["breaker_json", "compaction_json", "inspect_json", "json_of", "update_json"]


def session_json(overview: SessionOverview) -> dict[str, Any]:
    """One session of `foya sessions --json`: the keys it always had (id, title, updated, events)
    and what the sessions browser shows beside them."""
    info, stats = overview.info, overview.stats
    return {
        "id": info.id,
        "title": info.title,
        "updated": info.updated_at,
        "events": info.event_count,
        "model": stats.model,
        "replies": stats.replies,
        "checkpoints": stats.checkpoints,
        "size_bytes": stats.size_bytes,
        "forked_from": overview.forked_from,
        "status": overview.status,
    }


ENV_OVERRIDES = {"FOYA_MODEL": "model", "FOYA_THEME": "theme"}
"""The environment variables that override a setting of config.toml, and the setting each sets."""


def config_json(paths: FoyaPaths, settings: Settings, env: Mapping[str, str]) -> dict[str, Any]:
    """`foya config --json`: where the files are and every setting in force. A connection's key
    is named by its variable and said to be set or not; its value never appears (nor anywhere
    else: settings hold no secrets, `api_key` in the file is refused when it is read)."""
    values = dataclasses.asdict(settings)
    values["connections"] = {
        name: {
            # Its name is the table's; the file has no `name` key.
            **{key: value for key, value in dataclasses.asdict(connection).items() if key != "name"},
            "api_key_set": None if not connection.api_key_env else bool(env.get(connection.api_key_env)),
        }
        for name, connection in settings.connections.items()
    }
    return {
        "config": str(paths.config_file),
        "config_exists": paths.config_file.is_file(),
        "database": str(paths.database),
        "database_exists": paths.database.is_file(),
        "environment": {name: setting for name, setting in ENV_OVERRIDES.items() if env.get(name)},
        "settings": values,
    }

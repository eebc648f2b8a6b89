"""Provides applying a checkpoint to history: the messages that stand for the prefix it covers
(SPEC V "Model Projection", C-5, C-11).

A text checkpoint reaches the model as one user-role message (its segments, then the evidence
ledger) followed by the messages it keeps verbatim; a native checkpoint only as its kept messages,
because its state travels beside the messages on its own route. The compiler, acceptance and the
effect gates all weigh this same rendering, so what is measured is what is sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from foya_tui.runtime.model import Message, Role
from foya_tui.runtime.providers.summary_format import CHECKPOINT_MESSAGE_PREFIX
from foya_tui.runtime.view.checkpoint import Checkpoint, ProjectionKind
from foya_tui.runtime.view.ledger import Ledger


def checkpoint_message_text(
    segments: Sequence[tuple[int, int, str]], ledger: Ledger, checkpoint_id: str, covered: int
) -> str:
    """The text the model sees in place of the covered prefix: segments (seq range, summary), then
    the evidence ledger, which belongs to the summary's `## Critical Context`."""
    first = segments[0][0] if segments else 1
    last = segments[-1][1] if segments else 0
    parts = [
        f"{CHECKPOINT_MESSAGE_PREFIX}{checkpoint_id[:12]}: a summary of {covered:,} earlier messages "
        f"(events {first}–{last}). "
        "Canonical history keeps every event; this summary replaces them in your context.]"
    ]
    for index, (from_seq, through_seq, text) in enumerate(segments, start=1):
        if len(segments) > 1:
            parts.append(f"# Segment {index} (events {from_seq}–{through_seq})")
        parts.append(text.strip())
    rendered = ledger.render()
    if rendered:
        parts.append(
            "## Critical Context — evidence ledger (exact records from the covered events)\n" + rendered
        )
    return "\n\n".join(parts)


def checkpoint_text(checkpoint: Checkpoint) -> str:
    """The text message of a text checkpoint (its segments and ledger)."""
    return checkpoint_message_text(
        [(segment.from_seq, segment.through_seq, segment.text) for segment in checkpoint.segments],
        checkpoint.ledger,
        checkpoint.id,
        checkpoint.covered_messages,
    )


def checkpoint_head(checkpoint: Checkpoint) -> tuple[Mapping[str, Any], ...]:
    """The provider-form messages that replace the covered prefix: the checkpoint text (text
    checkpoints only) and the messages the checkpoint keeps verbatim."""
    if checkpoint.projection_kind is ProjectionKind.TEXT:
        message = Message(role=Role.USER, content=checkpoint_text(checkpoint))
        return (message.to_openai(), *checkpoint.kept_messages)
    return tuple(checkpoint.kept_messages)


__all__ = ["checkpoint_head", "checkpoint_message_text", "checkpoint_text"]

"""Provides checkpoint acceptance: the six conditions a candidate must meet before it is committed
(SPEC C-12), measured against the projection the model would see now, and the effect gates a
model-made replacement must pass (K-9).
"""

from __future__ import annotations

import json

from foya_tui.runtime.compaction.summary import summary_problems
from foya_tui.runtime.tokens import TOKENS_PER_MESSAGE, TokenCounter, message_text
from foya_tui.runtime.view.checkpoint import (
    Checkpoint,
    CheckpointError,
    ProjectionKind,
    check_structure,
)
from foya_tui.runtime.view.projection import checkpoint_text


def acceptance_problems(
    candidate: Checkpoint,
    *,
    current_checkpoint_id: str | None,
    source_digest_now: str,
    projection_before: int,
    projection_after: int,
) -> list[str]:
    """Why `candidate` may not be committed (empty when it may). The six conditions of C-12:

    1. projection kind and required fields are valid; 2. the text summary passes C-9;
    3. native state is valid JSON; 4. the covered events' digest matches current history;
    5. lineage still points to the current checkpoint; 6. the new projection is smaller than the
    effective projection it replaces (`projection_before`: what the model would see now).
    """
    problems: list[str] = []
    try:
        check_structure(candidate)
    except CheckpointError as exc:
        problems.append(f"invalid checkpoint: {exc}")
    if candidate.projection_kind is ProjectionKind.TEXT:
        for segment in candidate.segments:
            for problem in summary_problems(segment.text, "stop", (segment.from_seq, segment.through_seq)):
                problems.append(f"segment {segment.index}: {problem}")
    elif candidate.native_state is not None:
        try:
            json.loads(json.dumps(candidate.native_state, allow_nan=False))
        except (TypeError, ValueError) as exc:
            problems.append(f"the native state is not valid JSON ({exc})")
    if candidate.source_digest != source_digest_now:
        problems.append("the covered events changed since the summary was made (source digest differs)")
    if candidate.previous_id != current_checkpoint_id:
        problems.append("another checkpoint became current meanwhile (lineage is stale)")
    if projection_after >= projection_before:
        problems.append(
            f"it would not shrink the projection ({projection_before:,} → {projection_after:,} tokens)"
        )
    return problems


LARGE_SOURCE_TOKENS = 2_048
"""From this size on a history counts as large: its replacement must really shrink it (K-9)."""
GATE_SOURCE_SHARE = 0.8
GATE_WINDOW_SHARE = 0.5
GATE_MAX_TOKENS = 50_000


def replacement_tokens(checkpoint: Checkpoint, counter: TokenCounter) -> int:
    """Tokens the checkpoint itself adds to a request: its message (or native state) and the
    messages it keeps verbatim — what K-9's gates weigh against the source it replaces."""
    if checkpoint.projection_kind is ProjectionKind.NATIVE:
        head = TOKENS_PER_MESSAGE + counter.count(
            json.dumps(checkpoint.native_state, ensure_ascii=False, separators=(",", ":"))
        )
    else:
        head = TOKENS_PER_MESSAGE + counter.count(checkpoint_text(checkpoint))
    return head + sum(TOKENS_PER_MESSAGE + counter.count(message_text(m)) for m in checkpoint.kept_messages)


def effect_gate_problems(*, replacement: int, source: int, window: int) -> list[str]:
    """SPEC K-9: a large history's replacement is at most 80% of its source; every replacement is
    at most half the window and at most 50,000 tokens. Not enough reduction is a failure."""
    problems = []
    if source >= LARGE_SOURCE_TOKENS and replacement > source * GATE_SOURCE_SHARE:
        problems.append(
            f"not enough reduction: {replacement:,} tokens replace {source:,} (more than "
            f"{GATE_SOURCE_SHARE:.0%}, K-9)"
        )
    if replacement > window * GATE_WINDOW_SHARE:
        problems.append(
            f"the replacement ({replacement:,} tokens) is more than half the window ({window:,}, K-9)"
        )
    if replacement > GATE_MAX_TOKENS:
        problems.append(f"the replacement ({replacement:,} tokens) is over {GATE_MAX_TOKENS:,} tokens (K-9)")
    return problems

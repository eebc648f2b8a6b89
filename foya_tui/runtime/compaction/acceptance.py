"""Provides checkpoint acceptance: the six conditions a candidate must meet before it is committed
(SPEC C-12), measured against the projection the model would see now.
"""

from __future__ import annotations

import json

from foya_tui.runtime.compaction.checkpoint import (
    Checkpoint,
    CheckpointError,
    ProjectionKind,
    check_structure,
)
from foya_tui.runtime.compaction.summary import summary_problems


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

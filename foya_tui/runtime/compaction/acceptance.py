"""Provides checkpoint acceptance: the conditions a candidate must meet before it is committed
(SPEC C-12), measured against the projection the model would see now, the fit check that goes with
them (C-12 extended: a smaller projection that is still over the compaction line is not the end
state), and the effect gates a model-made replacement must pass (K-9), whose refusal names the part
that is too large.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from foya_tui.runtime.compaction.summary import summary_problems
from foya_tui.runtime.tokens import TOKENS_PER_MESSAGE, TokenCounter, message_text
from foya_tui.runtime.view.checkpoint import (
    Checkpoint,
    CheckpointError,
    ProjectionKind,
    check_structure,
)
from foya_tui.runtime.view.projection import checkpoint_text

OVER_THE_LINE = "smaller, but still over the compaction line"
"""How a fit problem starts: the pipeline goes on after it (SPEC C-12 extended, T-4, K-10)."""
NOT_SMALLER = "it would not shrink"
"""How the size problem of a candidate at least as large as what it replaces starts (C-12)."""
NOT_ENOUGH = "not enough reduction"
"""How K-9's effect-gate problem starts."""


def refused_for_size(problem: str) -> bool:
    """Whether a refusal is about size alone, which a smaller checkpoint can answer."""
    return problem.startswith((OVER_THE_LINE, NOT_ENOUGH, NOT_SMALLER))


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
        problems.append(f"{NOT_SMALLER} the projection ({projection_before:,} → {projection_after:,} tokens)")
    return problems


def fit_problem(*, estimate: int, compaction_line: int, input_budget: int) -> str | None:
    """Why a smaller candidate's projection is not the end state, or None when it fits: it must be
    at or under the compaction line (after the elastic step shrank the working set, SPEC T-4)."""
    if estimate <= compaction_line:
        return None
    where = "over the input budget" if estimate > input_budget else "under the input budget"
    return (
        f"{OVER_THE_LINE}: the next request would be ~{estimate:,} tokens against a line of "
        f"{compaction_line:,} ({where} of {input_budget:,})"
    )


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


def replacement_parts(
    checkpoint: Checkpoint, earlier: Checkpoint | None, counter: TokenCounter
) -> dict[str, int]:
    """The parts of a checkpoint's replacement by name, in tokens: the summary carried over from
    the checkpoint it extends, the newly written summary, the evidence ledger and the messages it
    keeps verbatim — so a refused gate can say which one is too large (SPEC K-9)."""
    carried = {segment.text for segment in earlier.segments} if earlier is not None else set()
    parts = {"the carried-over summary": 0, "the new summary": 0}
    for segment in checkpoint.segments:
        key = "the carried-over summary" if segment.text in carried else "the new summary"
        parts[key] += counter.count(segment.text)
    parts["the evidence ledger"] = counter.count(checkpoint.ledger.render())
    parts["the messages kept verbatim"] = sum(
        TOKENS_PER_MESSAGE + counter.count(message_text(m)) for m in checkpoint.kept_messages
    )
    return parts


def effect_gate_problems(
    *, replacement: int, source: int, window: int, parts: Mapping[str, int] | None = None
) -> list[str]:
    """SPEC K-9: a large history's replacement is at most 80% of its source; every replacement is
    at most half the window and at most 50,000 tokens. Not enough reduction is a failure; `parts`
    (from `replacement_parts`) lets the reason name the largest part of the replacement."""
    problems = []
    if source >= LARGE_SOURCE_TOKENS and replacement > source * GATE_SOURCE_SHARE:
        largest = ""
        if parts:
            name, tokens = max(parts.items(), key=lambda item: item[1])
            largest = f"; {name} is the largest part ({tokens:,} tokens)"
        problems.append(
            f"{NOT_ENOUGH}: {replacement:,} tokens replace {source:,} (more than "
            f"{GATE_SOURCE_SHARE:.0%}){largest}"
        )
    if replacement > window * GATE_WINDOW_SHARE:
        problems.append(f"the replacement ({replacement:,} tokens) is more than half the window ({window:,})")
    if replacement > GATE_MAX_TOKENS:
        problems.append(f"the replacement ({replacement:,} tokens) is over {GATE_MAX_TOKENS:,} tokens")  # K-9
    return problems

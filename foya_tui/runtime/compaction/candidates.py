"""Provides the checkpoint candidates the compaction paths make: the text summariser's (chunked,
appended as a segment or merged, SPEC C-8..C-10, K-12), the deterministic fallback's within a token
budget (K-10), and the one Checkpoint skeleton every path fills (C-3..C-6).

The service (service.py) decides which path runs, measures and accepts; this module only builds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from foya_tui.runtime.compaction.attempt import Attempt
from foya_tui.runtime.compaction.chunking import (
    Chunk,
    ShrinkingTranscript,
    chunks_of,
    fits,
    merge_segments,
    summary_input_limit,
)
from foya_tui.runtime.compaction.failures import Producer, Stage
from foya_tui.runtime.compaction.fallback import fallback_summary
from foya_tui.runtime.compaction.planner import Plan
from foya_tui.runtime.compaction.summary import (
    SYSTEM_PROMPT,
    Anchor,
    PreviousSummary,
    SummaryContext,
    context_tokens,
    earlier_context,
    request_anchor,
    request_messages,
)
from foya_tui.runtime.compaction.text import CompactionCancelled, Compactor
from foya_tui.runtime.context.budget import Budget
from foya_tui.runtime.context.floor import summary_target_tokens
from foya_tui.runtime.model import Event
from foya_tui.runtime.providers.client import CancelToken
from foya_tui.runtime.providers.routes import Route
from foya_tui.runtime.text import content_text
from foya_tui.runtime.tokens import TokenCounter, counter_for_model
from foya_tui.runtime.view.checkpoint import (
    MAX_SEGMENTS,
    Checkpoint,
    ProjectionKind,
    Segment,
    check_structure,
)
from foya_tui.runtime.view.history import LogEntry
from foya_tui.runtime.view.ledger import Ledger, extract_ledger, ledger_budget_chars
from foya_tui.runtime.view.snapshot import HistorySnapshot
from foya_tui.settings import CompactionSettings

ANCHOR_SHARE = 0.15
"""Share of a summary request's limit the anchor may take; a larger one keeps head and tail."""
EARLIER_SHARE = 0.1
"""Share of a summary request's limit reserved for the earlier segments whenever a request
summarises after an earlier segment; each request also gives them the room its chunk leaves, and
shows a digest when even that is not enough."""


def appends(base: Checkpoint | None, current: Checkpoint | None, plan: Plan) -> bool:
    """SPEC C-10: new coverage is appended as a segment while the text checkpoint it builds on is
    the current one, the anchor is unchanged and it has fewer than 4 segments."""
    return (
        base is not None
        and base is current
        and plan.anchor_seq == base.head_anchor_seq
        and len(base.segments) < MAX_SEGMENTS
    )


def text_candidate(
    snapshot: HistorySnapshot,
    base: Checkpoint | None,
    plan: Plan,
    route: Route,
    budget: Budget,
    source: str,
    cancel: CancelToken,
    attempt: Attempt,
    *,
    covered: Sequence[Event],
    compactor: Compactor,
    settings: CompactionSettings,
    now: Callable[[], str],
) -> Checkpoint:
    """A text checkpoint made by the summariser on `route` (the summary route), building on the
    portable text checkpoint `base`; its lineage parent is the session's current checkpoint."""
    current = snapshot.current
    requests = attempt.requests
    counter = counter_for_model(route.model)
    limit = summary_input_limit(budget, settings.summary_max_tokens)
    ledger_chars = ledger_budget_chars(budget.window, settings.ledger_chars)
    length = summary_target_tokens(budget.window, settings.summary_max_tokens)
    ledger = extract_ledger(covered, ledger_chars, earlier=base.ledger if base is not None else None)
    append = appends(base, current, plan)
    previous = [
        PreviousSummary(s.index, s.from_seq, s.through_seq, s.level, s.text)
        for s in (base.segments if base is not None else ())
    ]
    # K-12: every request carries the anchor, and the earlier segments read-only; their room is
    # planned here, so that no request exceeds the limit whatever it carries.
    anchor = plan_anchor(snapshot, plan, counter, int(limit * ANCHOR_SHARE))
    overhead = (
        counter.count(SYSTEM_PROMPT)
        + counter.count("\n".join(t for _, t in ledger.must_mention()))
        + context_tokens(SummaryContext(anchor), counter)
        + 64
    )
    message_chars = settings.transcript_message_chars
    chunks = chunks_of(snapshot, plan, covered, counter, limit - overhead, message_chars)
    earlier_room = 0
    # Reserved for the segments of the checkpoint this one extends; the summaries of earlier
    # chunks of this compaction get the room their own chunk leaves.
    if previous:
        earlier_room = int(limit * EARLIER_SHARE)
        chunks = chunks_of(snapshot, plan, covered, counter, limit - overhead - earlier_room, message_chars)
    # The segments before the next chunk's: the base's, then those made so far here.
    earlier: list[PreviousSummary] = list(previous)
    # Chunks (and merges, see `chunking.merge_segments`) are necessary requests; `max_requests`
    # bounds repairs and back-offs on top of them.
    requests.limit = settings.max_requests + len(chunks)
    repaired = False
    total = len(chunks)
    # Progress counts every summary request of this compaction, chunks then merges: "143/174"
    # goes on to "175/176", never back to "1/174" when the merging starts.
    done, planned = 0, total

    def plan_more(merges: int) -> None:
        nonlocal planned
        planned = max(planned, done) + merges

    def summarise(index: int, previous_part: Sequence[PreviousSummary], chunk: Chunk | None) -> str:
        nonlocal repaired, done
        if cancel.cancelled:
            raise CompactionCancelled()
        done += 1
        planned_now = max(planned, done)
        attempt.report(Stage.SUMMARISING, f"{done}/{planned_now}" if planned_now > 1 else "")
        chunk_ledger = (
            extract_ledger(chunk.events, ledger_chars).requiring(ledger, chunk.from_seq, chunk.through_seq)
            if chunk is not None and not previous_part
            else ledger
        )
        # The events this summary stands for: its chunk, and the summaries it merges.
        first = previous_part[0].from_seq if previous_part else chunk.from_seq  # type: ignore[union-attr]
        last = chunk.through_seq if chunk is not None else previous_part[-1].through_seq
        inputs = ShrinkingTranscript(snapshot.entries, chunk, counter) if chunk is not None else None
        # A chunk summarised on its own reads the segments before it, in the reserve and in
        # whatever room its transcript leaves; a rewrite or a merge has them as its input already.
        spare = (
            max(0, limit - overhead - earlier_room - counter.count("\n".join(chunk.lines)))
            if chunk is not None
            else 0
        )
        shown, digest = (
            earlier_context(earlier, counter, earlier_room + spare) if not previous_part else ((), False)
        )
        context = SummaryContext(anchor, shown, digest, length)

        def build(reasons: Sequence[str], shrink: int) -> tuple[dict[str, Any], ...] | None:
            lines: Sequence[str] = ()
            if inputs is not None:
                found = inputs.at(shrink)
                if found is None:
                    return None
                lines = found
            elif shrink:
                return None  # a merge has no transcript to shrink: the plan backs off instead
            return request_messages(
                from_seq=chunk.from_seq if chunk is not None else first,
                through_seq=last,
                transcript=lines,
                previous=previous_part,
                ledger=chunk_ledger,
                repair_reasons=reasons,
                context=context,
            )

        summary = compactor.summarise(route, build, chunk_ledger, (first, last), cancel, requests)
        repaired = repaired or summary.repaired
        return summary.text

    segments: list[tuple[int, int, int, str]]  # (from, through, level, text)
    top_level = base.level if base is not None else 0
    if not append and previous and total == 1 and fits(previous, chunks[0], counter, limit - overhead):
        # One session-level rewrite over the old summary and the new events (C-10).
        text = summarise(1, previous, chunks[0])
        segments = [(previous[0].from_seq, plan.through_seq, top_level + 1, text)]
    else:
        fresh = []
        for i, c in enumerate(chunks, start=1):
            made = (c.from_seq, c.through_seq, 0, summarise(i, (), c))
            fresh.append(made)
            earlier.append(PreviousSummary(len(earlier) + 1, *made))
        segments = [(s.from_seq, s.through_seq, s.level, s.text) for s in previous] + fresh
        # More than 4 segments, or an anchor change: one session-level summary over them all.
        if len(segments) > MAX_SEGMENTS or (previous and not append):
            segments = [merge_segments(segments, counter, limit - overhead, requests, summarise, plan_more)]
    producer = Producer.REPAIRED if repaired else Producer.LLM
    checkpoint = candidate_checkpoint(
        snapshot,
        base,
        plan,
        route,
        source,
        producer,
        ledger,
        created_at=now(),
        segments=tuple(
            Segment(index, from_seq, through_seq, level, text, counter.count(text))
            for index, (from_seq, through_seq, level, text) in enumerate(segments, start=1)
        ),
    )
    check_structure(checkpoint)
    attempt.producer = producer
    return checkpoint


def fallback_candidate(
    snapshot: HistorySnapshot,
    base: Checkpoint | None,
    plan: Plan,
    route: Route,
    source: str,
    ledger: Ledger,
    anchor: LogEntry | None,
    absorbed: str,
    why: str,
    append: bool,
    budget_tokens: int,
    *,
    created_at: str,
) -> Checkpoint:
    """One deterministic checkpoint for `plan` within `budget_tokens` (raises CheckpointError)."""
    counter = counter_for_model(route.model)
    made = fallback_summary(
        snapshot.entries,
        plan,
        active_task=anchor,
        previous_text=absorbed,
        reason=why,
        counter=counter,
        budget_tokens=budget_tokens,
        count_ledger=lambda: counter.count(ledger.render()),
    )
    if append and base is not None:
        segments = [
            *base.segments,
            Segment(
                len(base.segments) + 1,
                plan.from_seq,
                plan.through_seq,
                0,
                made.text,
                counter.count(made.text),
            ),
        ]
    else:
        first = base.segments[0].from_seq if base is not None and base.segments else plan.from_seq
        level = base.level + 1 if base is not None else 0
        segments = [Segment(1, first, plan.through_seq, level, made.text, counter.count(made.text))]
    candidate = candidate_checkpoint(
        snapshot,
        base,
        plan,
        route,
        source,
        Producer.FALLBACK,
        ledger,
        created_at=created_at,
        segments=tuple(segments),
        kept=made.kept_messages,
    )
    check_structure(candidate)
    return candidate


def candidate_checkpoint(
    snapshot: HistorySnapshot,
    base: Checkpoint | None,
    plan: Plan,
    route: Route,
    source: str,
    producer: Producer,
    ledger: Ledger,
    *,
    created_at: str,
    segments: tuple[Segment, ...] = (),
    kept: tuple[Mapping[str, Any], ...] = (),
    native_state: Mapping[str, Any] | None = None,
) -> Checkpoint:
    """A candidate (id set, sizes still 0) covering `plan` on top of `base`, whose lineage parent
    is the session's current checkpoint, whichever path made it."""
    current = snapshot.current
    return Checkpoint(
        id="",
        previous_id=current.id if current is not None else None,
        session_id=snapshot.session_id,
        through_seq=plan.through_seq,
        source_digest=source,
        head_anchor_seq=plan.anchor_seq,
        phase=plan.phase,
        projection_kind=ProjectionKind.TEXT if native_state is None else ProjectionKind.NATIVE,
        level=max((segment.level for segment in segments), default=0),
        segments=segments,
        route_id=route.id,
        model=route.model,
        created_at=created_at,
        tokens_before=0,
        tokens_after=0,
        covered_messages=(base.covered_messages if base is not None else 0) + plan.message_count,
        producer=str(producer),
        ledger=ledger,
        native_state=native_state,
        kept_messages=kept,
    ).with_id()


def plan_anchor(snapshot: HistorySnapshot, plan: Plan, counter: TokenCounter, room: int) -> Anchor | None:
    """The plan's head anchor as summary requests carry it (None: the session has no request)."""
    entry = snapshot.anchor
    if plan.anchor_seq is None or entry is None:
        return None
    text = content_text(entry.openai.get("content"))
    return request_anchor(entry.seq, text, counter, room) if text.strip() else None

"""Tests that a compile in a new process costs what the model sees (issue 17 item 0): with a
checkpoint, the compiler's index reads the checkpoint and the events after the prefix it covers,
plus the few kinds the layers need from before (usage records, rewinds, handoffs, snips), and
never decodes the covered messages; what it builds is the request an index that read all of
history builds (messages, layers, revision, estimate, notices), through every consumer.

Reads are counted with the store's `events_decoded` (rows decoded), never timed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from foya_tui.runtime.compaction.failures import Outcome, Trigger
from foya_tui.runtime.context.compiler import ContextCompiler
from foya_tui.runtime.context.index import ANCHOR_BATCH
from foya_tui.runtime.context.request import RequestView
from foya_tui.runtime.model import EventKind, NewEvent
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.session import RewindError
from foya_tui.runtime.view.checkpoint import Checkpoint, Phase
from tests.conftest import FIXED_NOW
from tests.runtime.test_compaction import append_turn, import_session, tool_turn

T = TypeVar("T")

TURNS = 40
"""Turns before the checkpoint: 160 covered events, enough that reading them shows in the count."""


def fresh(runtime: Runtime, workdir: Path) -> ContextCompiler:
    """A compiler as a new process builds it: no index yet, the same store and checkpoint reader."""
    return ContextCompiler(
        runtime.parts.store,
        runtime.settings,
        workdir=workdir,
        clock=lambda: FIXED_NOW,
        registry=runtime.parts.registry,
        checkpoints=runtime.parts.checkpoints,
    )


def compacted(runtime: Runtime, later_turns: int = 2, turns: int = TURNS) -> tuple[str, Checkpoint]:
    """An imported session of `turns` tool turns, compacted by the simulator, then more turns."""
    session_id = import_session(runtime, [m for index in range(turns) for m in tool_turn(index, size=400)])
    result = runtime.compact(session_id)
    assert result.outcome is Outcome.ACCEPTED, result.reason
    assert result.checkpoint is not None
    for index in range(later_turns):
        append_turn(runtime, session_id, index)
    return session_id, result.checkpoint


def same_request(cold: RequestView, warm: RequestView) -> None:
    assert cold.messages == warm.messages
    assert cold.tools == warm.tools
    assert (cold.layers, cold.estimate, cold.revision) == (warm.layers, warm.estimate, warm.revision)
    assert (cold.notices, cold.checkpoint, cold.anchor_seq) == (
        warm.notices,
        warm.checkpoint,
        warm.anchor_seq,
    )
    assert (cold.shortened_seqs, cold.snipped_seqs, cold.verdict) == (
        warm.shortened_seqs,
        warm.snipped_seqs,
        warm.verdict,
    )


def decoded_by(runtime: Runtime, work: Callable[[], T]) -> tuple[T, int]:
    """What `work` returns, and how many event rows the runtime's store decoded meanwhile."""
    before = runtime.parts.store.events_decoded
    value = work()
    return value, runtime.parts.store.events_decoded - before


def test_a_cold_compile_reads_only_what_follows_the_checkpoint(runtime: Runtime, workdir: Path) -> None:
    session_id, checkpoint = compacted(runtime)
    session = runtime.open_session(session_id)
    warm = session.context()  # this runtime's index read all of history before the compaction
    total = runtime.parts.store.last_seq(session_id)
    after = total - checkpoint.through_seq
    cold, read = decoded_by(runtime, lambda: fresh(runtime, workdir).compile(session_id, session.route))
    same_request(cold, warm)
    assert cold.checkpoint is not None and cold.checkpoint.id == checkpoint.id
    # The events after the checkpoint, the anchor and P-2's short start check (one batch of 32);
    # none of the covered messages.
    assert read <= after + 32 + 2, (read, after)
    assert checkpoint.through_seq > 4 * 32
    # The same index built over everything decodes the whole log (the count can fail).
    parts = runtime.parts
    _, everything = decoded_by(runtime, lambda: ContextCompiler(
        parts.store, runtime.settings, workdir=workdir, clock=lambda: FIXED_NOW, registry=parts.registry
    ).compile(session_id, session.route))  # fmt: skip
    assert everything >= total


def test_consumers_inherit_the_short_read(runtime: Runtime, workdir: Path, tmp_path: Path) -> None:
    """`foya context`, the meter's report and `export --projection` all compile through the index."""
    session_id, checkpoint = compacted(runtime)
    warm = runtime.context(session_id)
    covered = checkpoint.through_seq
    # A second process's Runtime over the same files: `foya context` and the meter's report.
    with Runtime(runtime.settings, runtime.paths, workdir=workdir, clock=lambda: FIXED_NOW) as other:
        view = other.context(session_id)
        assert other.parts.store.events_decoded < covered // 2, (other.parts.store.events_decoded, covered)
        same_request(view, warm)
        assert view.report() == warm.report()
    # `foya export --projection`, in a process of its own.
    with Runtime(runtime.settings, runtime.paths, workdir=workdir, clock=lambda: FIXED_NOW) as other:
        projection = list(other.export(session_id, projection=True))
        assert projection == list(warm.messages)
        assert other.parts.store.events_decoded < covered // 2


def test_a_mid_turn_checkpoint_reads_back_to_its_anchor_only(runtime: Runtime, workdir: Path) -> None:
    """A checkpoint that covers the head anchor (mid-turn, SPEC C-3): the anchor is re-inserted
    verbatim, so the index reads back to it, and no further."""
    session_id, _ = compacted(runtime, later_turns=0, turns=2 * ANCHOR_BATCH // 4 + TURNS)
    runtime.parts.store.append(session_id, [NewEvent(EventKind.USER_MESSAGE, {"text": "one long request"})])
    anchor = runtime.parts.store.last_seq(session_id)
    for step in range(8):
        call = {"id": f"step_{step}", "name": "read_file", "arguments": json.dumps({"path": f"s{step}.py"})}
        runtime.parts.store.append(
            session_id,
            [
                NewEvent(EventKind.ASSISTANT_MESSAGE, {"text": "", "tool_calls": [call]}),
                NewEvent(
                    EventKind.TOOL_RESULT,
                    {"tool_call_id": call["id"], "name": "read_file", "content": "    z = 3\n" * 60},
                ),
            ],
        )
    session = runtime.open_session(session_id)
    result = runtime.parts.compaction.compact(session_id, session.route, Trigger.MANUAL, phase=Phase.MID_TURN)
    assert result.outcome is Outcome.ACCEPTED, result.reason
    assert result.checkpoint is not None and result.checkpoint.through_seq > anchor
    runtime.parts.store.append(session_id, [NewEvent(EventKind.ASSISTANT_MESSAGE, {"text": "done"})])
    warm = session.context()
    cold, read = decoded_by(runtime, lambda: fresh(runtime, workdir).compile(session_id, session.route))
    same_request(cold, warm)
    assert cold.anchor_seq == anchor
    # Back to the anchor in one batch, never the prefix before it.
    assert read <= result.checkpoint.through_seq - anchor + ANCHOR_BATCH + 32 + 2 + 2
    assert anchor > 2 * ANCHOR_BATCH


def test_snips_over_covered_results_keep_their_notices(runtime: Runtime, workdir: Path) -> None:
    """A snip naming a covered result is never in the view; one naming a wrong covered seq still
    says so (SPEC K-2), exactly as an index over all of history does."""
    session_id, checkpoint = compacted(runtime)
    events = runtime.parts.store.events(session_id, through_seq=checkpoint.through_seq)
    result = next(event.seq for event in events if event.kind is EventKind.IMPORTED_MESSAGE
                  and event.payload.get("role") == "tool")  # fmt: skip
    user = next(event.seq for event in events if event.payload.get("role") == "user")
    runtime.parts.store.append(
        session_id, [NewEvent(EventKind.CONTEXT_SNIPPED, {"seqs": [result, user], "reason": "k3"})]
    )
    session = runtime.open_session(session_id)
    warm = session.context()
    cold, read = decoded_by(runtime, lambda: fresh(runtime, workdir).compile(session_id, session.route))
    assert read < checkpoint.through_seq // 2  # the covered seqs are read one by one, not the prefix
    same_request(cold, warm)
    assert any(str(user) in notice for notice in cold.notices), cold.notices


def test_an_undo_and_a_rewind_into_the_covered_prefix_read_it_again(runtime: Runtime, workdir: Path) -> None:
    session_id, checkpoint = compacted(runtime)
    compiler = fresh(runtime, workdir)
    session = runtime.open_session(session_id)
    _, read = decoded_by(runtime, lambda: compiler.compile(session_id, session.route))
    assert read < checkpoint.through_seq // 2
    runtime.undo_compaction(session_id)
    undone = compiler.compile(session_id, session.route)
    assert undone.checkpoint is None
    whole = ContextCompiler(
        runtime.parts.store,
        runtime.settings,
        workdir=workdir,
        clock=lambda: FIXED_NOW,
        registry=runtime.parts.registry,
    ).compile(session_id, session.route)
    assert undone.messages == whole.messages and undone.layers == whole.layers
    # A rewind into the middle of a covered tool group is refused, as with all history read.
    redone_id, redone = compacted(runtime)
    events = runtime.parts.store.events(redone_id, through_seq=redone.through_seq)
    call = next(e.seq for e in events if e.payload.get("tool_calls"))
    with Runtime(runtime.settings, runtime.paths, workdir=workdir, clock=lambda: FIXED_NOW) as other:
        other.context(redone_id)  # its index starts after the checkpoint
        assert other.parts.store.events_decoded < redone.through_seq // 2
        with pytest.raises(RewindError):
            other.rewind(redone_id, call)


def test_a_turn_and_a_compaction_in_a_new_process_read_only_what_follows(
    runtime: Runtime, workdir: Path
) -> None:
    """`foya run` and `foya compact`: a step's compiles, the planner's snapshot and the next
    checkpoint (which extends the first) come from the events after the checkpoint."""
    session_id, checkpoint = compacted(runtime, later_turns=6, turns=3 * TURNS)
    covered = checkpoint.through_seq
    with Runtime(runtime.settings, runtime.paths, workdir=workdir, clock=lambda: FIXED_NOW) as other:
        result = other.compact(session_id)
        assert result.outcome is Outcome.ACCEPTED, result.reason
        assert result.checkpoint is not None and result.checkpoint.previous_id == checkpoint.id
        assert result.checkpoint.through_seq > covered
        assert other.parts.store.events_decoded < covered // 2, (other.parts.store.events_decoded, covered)
    with Runtime(runtime.settings, runtime.paths, workdir=workdir, clock=lambda: FIXED_NOW) as other:
        updates = list(other.open_session(session_id).send("hello"))
        assert type(updates[-1]).__name__ == "TurnFinished", updates[-1]
        assert other.parts.store.events_decoded < covered // 2, (other.parts.store.events_decoded, covered)
    # This runtime's index read all of history before the first compaction: the same request.
    warm = runtime.open_session(session_id).context()
    assert warm.checkpoint is not None and warm.checkpoint.previous_id == checkpoint.id
    same_request(fresh(runtime, workdir).compile(session_id, warm.route), warm)

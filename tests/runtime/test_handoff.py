"""Tests handoff records: the strict v1 form, one record per compaction epoch, suppression by
duplicates and malformed records, the hidden user-role entry that is never the anchor, and the
K-5 snapshot gate (SPEC K-1, K-5, B-4, B-7, H-1)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from foya_tui.cli_json import json_of
from foya_tui.runtime.context.budget import Verdict
from foya_tui.runtime.context.compiler import ContextCompiler
from foya_tui.runtime.context.report import HandoffState, handoff_state
from foya_tui.runtime.context.request import RequestView
from foya_tui.runtime.context.tracker import EstimateSource
from foya_tui.runtime.model import Event, EventKind, NewEvent, Role
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.tokens import count_messages, count_tools, counter_for_model
from foya_tui.runtime.view.handoff import (
    HANDOFF_MARKER,
    MAX_TEXT_CHARS,
    REMINDER_TEXT,
    EpochStatus,
    epoch_of,
    handoff_event,
    parse_handoff,
)
from foya_tui.runtime.view.history import MessageLog, event_message, message_role
from foya_tui.settings import ModelSettings, Settings
from tests.conftest import FIXED_NOW
from tests.runtime.test_native_projection import commit_checkpoint, make_checkpoint


def append(runtime: Runtime, session_id: str, kind: EventKind, **payload: Any) -> int:
    return runtime.parts.store.append(session_id, [NewEvent(kind, payload)])[0].seq


def record(runtime: Runtime, session_id: str, epoch: str) -> int:
    return runtime.parts.store.append(session_id, [handoff_event(epoch)])[0].seq


def reminders(view: RequestView) -> list[int]:
    """Positions of the handoff reminder among the request's messages."""
    return [i for i, m in enumerate(view.messages) if str(m.get("content", "")).startswith(HANDOFF_MARKER)]


def exact(view: RequestView) -> bool:
    counter = counter_for_model(view.route.model)
    return view.layers.total == count_messages(view.messages, counter) + count_tools(view.tools, counter)


def fresh(runtime: Runtime, workdir: Path) -> ContextCompiler:
    return ContextCompiler(
        runtime.parts.store,
        runtime.settings,
        workdir=workdir,
        clock=lambda: FIXED_NOW,
        registry=runtime.parts.registry,
        checkpoints=runtime.parts.checkpoints,
    )


def work(runtime: Runtime, session_id: str) -> int:
    """A user request answered by one tool step; returns the user message's seq (the anchor)."""
    anchor = append(runtime, session_id, EventKind.USER_MESSAGE, text="fix the build")
    call = {"id": "c1", "name": "read_file", "arguments": "{}"}
    append(runtime, session_id, EventKind.ASSISTANT_MESSAGE, text="", tool_calls=[call])
    append(runtime, session_id, EventKind.TOOL_RESULT, tool_call_id="c1", name="read_file", content="data")
    return anchor


# -- the record (pure) ----------------------------------------------------------------------------


def test_states_epochs_and_the_event() -> None:
    assert handoff_state(Verdict.OK) is HandoffState.BELOW_HANDOFF
    assert handoff_state(Verdict.HANDOFF) is HandoffState.HANDOFF_BAND
    assert handoff_state(Verdict.COMPACT) is HandoffState.COMPACTION_DUE
    assert epoch_of(None) == "none" and epoch_of("abc") == "abc"
    event = handoff_event("abc")
    assert event.kind is EventKind.HANDOFF
    assert event.payload == {"version": 1, "epoch": "abc", "text": REMINDER_TEXT}
    assert REMINDER_TEXT.startswith(HANDOFF_MARKER) and "not a request from the user" in REMINDER_TEXT
    parsed = parse_handoff(event.payload)
    assert parsed is not None and parsed.epoch == "abc" and parsed.text == REMINDER_TEXT


GOOD = {"version": 1, "epoch": "abc", "text": REMINDER_TEXT}


@pytest.mark.parametrize(
    "payload",
    [
        {**GOOD, "extra": True},
        {"version": 1, "epoch": "abc"},
        {**GOOD, "version": True},  # a bool is not the integer 1
        {**GOOD, "version": 2},
        {**GOOD, "version": "1"},
        {**GOOD, "epoch": ""},
        {**GOOD, "epoch": 7},
        {**GOOD, "text": ""},
        {**GOOD, "text": "remember the frontier"},  # no marker
        {**GOOD, "text": HANDOFF_MARKER + "x" * MAX_TEXT_CHARS},  # too long
        ["not", "an", "object"],
    ],
)
def test_parse_handoff_is_strict(payload: Any) -> None:
    assert parse_handoff(payload) is None


def test_a_hidden_entry_closes_an_open_group_but_is_never_the_anchor() -> None:
    """The log keeps tool groups valid around a handoff like around any user message; `add` ignores
    handoffs (so the UI, ledger and search never take one for the user's words)."""
    event = Event("s", 3, EventKind.HANDOFF, dict(GOOD), "t")
    assert event_message(event) is None and message_role(event) is None
    log = MessageLog()
    log.add(Event("s", 1, EventKind.USER_MESSAGE, {"text": "go"}, "t"))
    call = {"id": "c", "name": "read_file", "arguments": "{}"}
    log.add(Event("s", 2, EventKind.ASSISTANT_MESSAGE, {"text": "", "tool_calls": [call]}, "t"))
    log.add(event)
    assert len(log.entries) == 2  # ignored by add
    log.add_hidden(event)
    assert [(e.seq, e.message.role, e.hidden) for e in log.entries] == [
        (1, Role.USER, False),
        (2, Role.ASSISTANT, False),
        (2, Role.TOOL, False),  # the interrupted call's placeholder, as before a user message
        (3, Role.USER, True),
    ]
    assert log.anchor_index == 0 and log.open_group_seq is None


# -- the compiler ----------------------------------------------------------------------------------


def test_a_recorded_handoff_is_sent_at_its_position_and_is_not_the_anchor(runtime: Runtime) -> None:
    session = runtime.new_session()
    anchor = work(runtime, session.id)
    view = session.context()
    assert view.handoff_epoch == "none" and view.handoff_status is EpochStatus.NONE
    seq = record(runtime, session.id, view.handoff_epoch)
    append(runtime, session.id, EventKind.ASSISTANT_MESSAGE, text="Frontier: the build; next: run make.")
    view = session.context()
    assert view.handoff_status is EpochStatus.RECORDED
    (position,) = reminders(view)
    assert view.messages[position] == {"role": "user", "content": REMINDER_TEXT}
    assert view.messages[position - 1]["role"] == "tool"  # after the step's results
    assert view.anchor_seq == anchor and exact(view)
    handoff = json_of(view.report())["handoff"]
    assert handoff == {"state": "below_handoff", "epoch": "none", "status": "recorded"}
    (hidden,) = [entry for entry in runtime.parts.compiler.snapshot(session.id).entries if entry.hidden]
    assert hidden.seq == seq and hidden.message.role is Role.USER


def test_a_duplicate_suppresses_the_epoch_even_after_its_record_was_sent(
    runtime: Runtime, workdir: Path
) -> None:
    """One strict record per epoch: a second one suppresses both; the log is rebuilt, the revision
    changes (B-7: history as sent was rewritten), and it equals a fresh compiler's view."""
    session = runtime.new_session()
    work(runtime, session.id)
    record(runtime, session.id, "none")
    sent = session.context()
    assert reminders(sent) and sent.handoff_status is EpochStatus.RECORDED
    record(runtime, session.id, "none")
    view = session.context()
    assert reminders(view) == [] and view.handoff_status is EpochStatus.SUPPRESSED
    assert view.revision != sent.revision and exact(view)
    cold = fresh(runtime, workdir).compile(session.id, session.route)
    assert cold.messages == view.messages and cold.layers == view.layers and cold.revision == view.revision


def test_an_unreadable_record_suppresses_the_epoch_where_it_stands(runtime: Runtime, workdir: Path) -> None:
    """A handoff row whose payload cannot be read is a malformed record of the epoch it stands in."""
    session = runtime.new_session()
    work(runtime, session.id)
    record(runtime, session.id, "none")
    assert reminders(session.context())
    seq = runtime.parts.store.last_seq(session.id) + 1
    with sqlite3.connect(runtime.parts.store.path) as raw:  # events are immutable: write the damage directly
        raw.execute(
            "INSERT INTO event (session_id, seq, kind, payload, created_at) VALUES (?, ?, 'handoff', ?, 'x')",
            (session.id, seq, "{broken"),
        )
    warm = session.context()
    cold = fresh(runtime, workdir).compile(session.id, session.route)
    for view in (warm, cold):
        assert reminders(view) == [] and view.handoff_status is EpochStatus.SUPPRESSED
    assert warm.messages == cold.messages and warm.revision == cold.revision


def test_a_malformed_record_without_an_epoch_belongs_to_the_current_checkpoint(runtime: Runtime) -> None:
    """The epoch is the current checkpoint: a record too damaged to name its epoch counts against
    the epoch where it stands (the latest completion, or what an undo restored)."""
    session = runtime.new_session()
    route = session.route
    first = work(runtime, session.id)
    early = record(runtime, session.id, "none")  # recorded in epoch "none"
    anchor = append(runtime, session.id, EventKind.USER_MESSAGE, text="next task")
    checkpoint = make_checkpoint(runtime, session.id, route, through_seq=early, anchor_seq=anchor)
    commit_checkpoint(runtime, checkpoint)
    view = session.context()
    assert view.handoff_epoch == checkpoint.id and view.handoff_status is EpochStatus.NONE
    assert reminders(view) == []  # the checkpoint covers the earlier record
    record(runtime, session.id, checkpoint.id)
    assert session.context().handoff_status is EpochStatus.RECORDED
    append(runtime, session.id, EventKind.HANDOFF, version=1, text=REMINDER_TEXT)  # no epoch
    view = session.context()
    assert view.handoff_status is EpochStatus.SUPPRESSED and reminders(view) == []
    # After an undo the epoch is "none" again: its one record (covered before) is sent again.
    append(runtime, session.id, EventKind.COMPACTION_UNDONE, undone_id=checkpoint.id, restored_id=None)
    view = session.context()
    assert view.checkpoint is None and view.handoff_epoch == "none"
    assert view.handoff_status is EpochStatus.RECORDED and len(reminders(view)) == 1
    assert view.anchor_seq == anchor and first < early


def test_k5_the_snapshot_is_known_with_a_window_or_a_measurement(runtime: Runtime, workdir: Path) -> None:
    settings = Settings(models={"acme/mystery": ModelSettings()})
    compiler = ContextCompiler(runtime.parts.store, settings, workdir=workdir, clock=lambda: FIXED_NOW)
    session = runtime.new_session()
    user = append(runtime, session.id, EventKind.USER_MESSAGE, text="q")
    append(runtime, session.id, EventKind.ASSISTANT_MESSAGE, text="a")
    assert session.context().snapshot_known  # the simulator declares its window
    unknown = runtime.route_for("acme/mystery")
    view = compiler.compile(session.id, unknown)
    assert view.model.window is None and not view.snapshot_known
    assert not json_of(view.report())["snapshot_known"]
    append(
        runtime,
        session.id,
        EventKind.PROVIDER_USAGE,
        route_id=unknown.id,
        through_seq=user,
        revision=view.revision,
        fixed_tokens=view.layers.fixed,
        usage={"input_tokens": 100, "output_tokens": 5, "total_tokens": 105},
    )
    measured = compiler.compile(session.id, unknown)
    assert measured.estimate.source is not EstimateSource.ESTIMATE and measured.snapshot_known

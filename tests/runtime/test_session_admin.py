"""Tests what the sessions browser and `foya sessions rm/rename` rest on, against real SQLite files
and the simulator: each session's overview (model, replies, checkpoints, size, fork origin, a first
message that failed), renaming, and deleting a session whole in one transaction (its events,
checkpoints, artifacts, index rows, side tables and lease file) while every other session still
verifies (SPEC H-2, H-5, P-2); and the record of failed and cancelled turns (`turn_outcome`), which
the model never sees."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from foya_tui.errors import InputError
from foya_tui.runtime.model import EventKind
from foya_tui.runtime.providers.client import CancelToken
from foya_tui.runtime.runtime import Runtime, SessionBusy
from foya_tui.runtime.store import UnknownSessionError
from foya_tui.runtime.store.lease import lock_path
from foya_tui.runtime.store.sessions import SESSION_TABLES
from foya_tui.runtime.updates import ReplyDelta, TurnFailed, TurnFinished
from tests.runtime.test_compaction import import_session, tool_turn
from tests.runtime.test_fork import build_source


def rows_of(runtime: Runtime, table: str, session_id: str) -> int:
    column = "id" if table == "session" else "session_id"
    with sqlite3.connect(runtime.parts.store.path) as raw:
        found = raw.execute(f"SELECT COUNT(*) FROM {table} WHERE {column} = ?", (session_id,))
        return int(found.fetchone()[0])


def index_rows(runtime: Runtime, session_id: str) -> int:
    with sqlite3.connect(runtime.parts.store.path) as raw:
        return int(
            raw.execute("SELECT COUNT(*) FROM event_fts WHERE session_id = ?", (session_id,)).fetchone()[0]
        )


def finished_turn(runtime: Runtime, session_id: str, text: str) -> None:
    updates = list(runtime.open_session(session_id).send(text))
    assert isinstance(updates[-1], TurnFinished), updates[-1]


# -- outcomes of turns (issue 16 item 5) ---------------------------------------------------------------


def test_a_failed_turn_is_recorded_and_never_reaches_the_model(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FOYA_SIM_FAULTS", "quota")
    session = runtime.new_session()
    failed = list(session.send("first try"))[-1]
    assert isinstance(failed, TurnFailed) and failed.kind == "quota"
    events = runtime.parts.store.events(session.id)
    assert [e.kind for e in events] == [EventKind.USER_MESSAGE, EventKind.TURN_OUTCOME]
    assert events[1].payload == {"outcome": "failed", "kind": "quota", "reason": failed.reason}

    monkeypatch.delenv("FOYA_SIM_FAULTS")
    finished_turn(runtime, session.id, "second try")
    sent = [m for m in session.context().messages if m["role"] != "system"]
    assert [m["role"] for m in sent] == ["user", "user", "assistant"]
    assert all(failed.reason not in str(m["content"]) and "quota" not in str(m["content"]) for m in sent)
    # Not a message: the search index leaves it out, and the store still verifies.
    assert runtime.verify(session.id).ok
    assert [hit.kind for hit in runtime.search(session.id, "quota")] == []


def test_a_cancelled_turn_is_recorded_after_what_streamed(runtime: Runtime) -> None:
    session = runtime.new_session()
    cancel = CancelToken()
    for update in session.send("hello", cancel):
        if isinstance(update, ReplyDelta):
            cancel.cancel()
    kinds = [e.kind for e in runtime.parts.store.events(session.id)]
    assert kinds == [EventKind.USER_MESSAGE, EventKind.ASSISTANT_MESSAGE, EventKind.TURN_OUTCOME]
    outcome = runtime.parts.store.last_event(session.id, EventKind.TURN_OUTCOME)
    assert outcome is not None and outcome.payload["outcome"] == "cancelled"


def test_turn_outcomes_are_left_out_of_forks_and_kept_in_the_export(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = runtime.new_session()
    finished_turn(runtime, session.id, "hello")
    monkeypatch.setenv("FOYA_SIM_FAULTS", "quota")
    list(session.send("and now?"))
    exported = [record["kind"] for record in runtime.export(session.id)]
    assert exported[-1] == "turn_outcome"
    forked = runtime.fork(session.id)
    assert EventKind.TURN_OUTCOME not in [e.kind for e in runtime.parts.store.events(forked.info.id)]


# -- overviews -------------------------------------------------------------------------------------------


def test_overviews_say_model_replies_checkpoints_size_and_origin(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = runtime.new_session()
    finished_turn(runtime, chat.id, "hello")
    compacted = import_session(runtime, [*tool_turn(1), *tool_turn(2), *tool_turn(3)])
    assert runtime.compact(compacted).accepted
    forked = runtime.fork(chat.id).info.id
    monkeypatch.setenv("FOYA_SIM_FAULTS", "quota")
    failing = runtime.new_session()
    list(failing.send("does this work?"))

    listed = {overview.info.id: overview for overview in runtime.session_overviews()}
    assert set(listed) == {chat.id, compacted, forked, failing.id}
    assert listed[chat.id].stats.model == chat.route.model and listed[chat.id].stats.replies == 1
    assert listed[chat.id].status == "" and listed[chat.id].forked_from is None
    # Each imported tool turn holds two assistant messages: the call and the reply.
    assert listed[compacted].stats.checkpoints == 1 and listed[compacted].stats.replies == 6
    assert listed[forked].forked_from == chat.id and listed[forked].stats.model is None
    assert listed[failing.id].stats.replies == 0
    assert listed[failing.id].status == "no reply · last turn failed (quota)"
    with sqlite3.connect(runtime.parts.store.path) as raw:
        (payload,) = raw.execute(
            "SELECT SUM(LENGTH(CAST(payload AS BLOB))) FROM event WHERE session_id = ?", (chat.id,)
        ).fetchone()
    assert listed[chat.id].stats.size_bytes == payload
    assert runtime.fork_origin(forked) is not None and runtime.fork_origin(forked).id == chat.id
    assert runtime.fork_origin(chat.id) is None


def test_rename_cleans_the_title_and_refuses_an_empty_one(runtime: Runtime) -> None:
    session = runtime.new_session()
    renamed = runtime.rename_session(session.info.short_id, "  the \x1b[31mparser\x1b[0m\n fix  ")
    assert renamed.title == "the parser fix" and runtime.find_session(session.id).title == "the parser fix"
    with pytest.raises(InputError, match="cannot be empty"):
        runtime.rename_session(session.id, " \x1b[2J \n")
    with pytest.raises(UnknownSessionError):
        runtime.rename_session("abcdef0123", "x")


# -- deleting ----------------------------------------------------------------------------------------------


def test_deleting_a_session_removes_all_of_it_and_the_others_still_verify(runtime: Runtime) -> None:
    doomed = build_source(runtime)  # artifacts, a compaction, a rewind, an unreadable row, handoff
    kept = import_session(runtime, [*tool_turn(1), *tool_turn(2), *tool_turn(3)])
    assert runtime.compact(kept).accepted
    finished_turn(runtime, kept, "and then?")
    fork = runtime.fork(doomed.id, doomed.first_turn_end).info.id
    assert runtime.verify(kept).ok and runtime.verify(fork).ok
    runtime.claim(doomed.id).release()  # a lease file exists, as after any write from the TUI
    assert lock_path(runtime.paths.database, doomed.id).exists()
    assert rows_of(runtime, "artifact", doomed.id) and index_rows(runtime, doomed.id)
    kept_before = runtime.parts.store.events(kept)
    stored = rows_of(runtime, "event", doomed.id)

    deleted = runtime.delete_session(doomed.id[:8])

    assert deleted.info.id == doomed.id and deleted.events == stored
    for table in ("session", "event", *SESSION_TABLES):
        assert rows_of(runtime, table, doomed.id) == 0, table
    assert index_rows(runtime, doomed.id) == 0
    assert not lock_path(runtime.paths.database, doomed.id).exists()
    with pytest.raises(UnknownSessionError):
        runtime.find_session(doomed.id)
    assert runtime.parts.store.events(kept) == kept_before
    for other in (kept, fork):
        report = runtime.verify(other)
        assert report.ok, report.problems
    # The fork's origin is gone: it no longer offers a way back.
    assert runtime.fork_origin(fork) is None
    assert {o.info.id: o.forked_from for o in runtime.session_overviews()}[fork] is None
    # Events of the other sessions are still protected (SPEC H-2): the trigger came back.
    with (
        sqlite3.connect(runtime.parts.store.path) as raw,
        pytest.raises(sqlite3.DatabaseError, match="immutable"),
    ):
        raw.execute("DELETE FROM event WHERE session_id = ?", (kept,))


def test_a_session_another_foya_writes_is_not_deleted(runtime: Runtime) -> None:
    session = runtime.new_session()
    finished_turn(runtime, session.id, "hello")
    with runtime.claim(session.id), pytest.raises(SessionBusy):
        runtime.delete_session(session.id)
    assert rows_of(runtime, "event", session.id) == 3


def test_a_delete_that_fails_midway_leaves_everything(runtime: Runtime, tmp_path: Path) -> None:
    session = runtime.new_session()
    finished_turn(runtime, session.id, "hello")
    # A row the deletion does not know about references the session: the final DELETE of the
    # session row fails on the foreign key, after the events went, and everything rolls back.
    with sqlite3.connect(runtime.parts.store.path) as raw:
        raw.execute("PRAGMA foreign_keys = ON")
        raw.execute("CREATE TABLE extra (session_id TEXT REFERENCES session (id) ON DELETE RESTRICT)")
        raw.execute("INSERT INTO extra VALUES (?)", (session.id,))
    indexed = index_rows(runtime, session.id)
    with pytest.raises(Exception, match="FOREIGN KEY"):
        runtime.delete_session(session.id)
    assert rows_of(runtime, "event", session.id) == 3 and index_rows(runtime, session.id) == indexed > 0
    assert runtime.verify(session.id).ok

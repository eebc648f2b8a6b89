"""Tests forking a session: the fork holds the source's valid messages up to the fork point as
imported messages, without handoff records, rewound or unreadable events or non-message events,
with the attachments' bytes copied; a fork point inside a tool group is refused (SPEC H-1, H-4,
C-4, K-1), and `foya fork` prints the new session or one clear error."""

from __future__ import annotations

import base64
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from foya_tui.cli import main
from foya_tui.runtime.fork import ForkError, fork_session
from foya_tui.runtime.model import Event, EventKind, Message, NewEvent
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.store import UnknownSessionError
from foya_tui.runtime.updates import TurnFinished
from foya_tui.runtime.view.history import MISSING_TOOL_RESULT, history_messages, valid_events
from foya_tui.settings import Settings
from tests.conftest import FIXED_NOW, make_paths

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
HANDOFF_TEXT = "[foya:handoff v1] Control message from Foya: record your execution frontier."


@dataclass(frozen=True)
class Source:
    """A session with every kind of history a fork must sort out, and the seqs that matter."""

    id: str
    first_turn_end: int
    """The first turn's final reply: a safe fork point."""
    call_seq: int
    """The assistant message that calls list_dir; its result comes later."""
    result_seq: int
    rewound_seq: int
    unreadable_seq: int


def turn(runtime: Runtime, session_id: str, text: str) -> None:
    session = runtime.open_session(session_id)
    updates = list(session.send(text))
    assert isinstance(updates[-1], TurnFinished), updates[-1]


def events_of(runtime: Runtime, session_id: str) -> list[Event]:
    return runtime.parts.store.events(session_id)


def messages_of(runtime: Runtime, session_id: str, through: int | None = None) -> list[Message]:
    events = [e for e in events_of(runtime, session_id) if through is None or e.seq <= through]
    return history_messages(e for e in events if e.kind is not EventKind.HANDOFF)


def build_source(runtime: Runtime) -> Source:
    image = "data:image/png;base64," + base64.b64encode(PNG).decode()
    transcript = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look at this"},
                {"type": "image_url", "image_url": {"url": image}},
            ],
        },
        {"role": "assistant", "content": "A small picture."},
    ]
    session_id = runtime.import_transcript(json.dumps(transcript).encode(), "pic.json").id
    turn(runtime, session_id, "what files are here?")  # list_dir, then read_file README, then text
    events = events_of(runtime, session_id)
    call = next(e for e in events if e.kind is EventKind.ASSISTANT_MESSAGE and e.payload.get("tool_calls"))
    result = next(e for e in events if e.kind is EventKind.TOOL_RESULT)
    first_turn_end = events[-1].seq
    runtime.parts.store.append(
        session_id, [NewEvent(EventKind.HANDOFF, {"version": 1, "epoch": "e1", "text": HANDOFF_TEXT})]
    )
    runtime.compact(session_id)  # whatever it concludes, it writes compaction events
    turn(runtime, session_id, "hello")
    rewound = runtime.parts.store.last_event(session_id, EventKind.ASSISTANT_MESSAGE)
    assert rewound is not None
    runtime.rewind(session_id, first_turn_end)
    turn(runtime, session_id, "hello again")
    # An unreadable row in the middle of history (a damaged database): skipped, never forked.
    unreadable = runtime.parts.store.last_seq(session_id) + 1
    with sqlite3.connect(runtime.parts.store.path) as raw:
        raw.execute(
            "INSERT INTO event (session_id, seq, kind, payload, created_at) VALUES (?, ?, ?, ?, 'x')",
            (session_id, unreadable, "user_message", "{not json"),
        )
        raw.execute("UPDATE session SET last_seq = ? WHERE id = ?", (unreadable, session_id))
    turn(runtime, session_id, "one more thing")
    return Source(session_id, first_turn_end, call.seq, result.seq, rewound.seq, unreadable)


@pytest.fixture
def runtime(tmp_path: Path, workdir: Path) -> Iterator[Runtime]:
    with Runtime(
        Settings(retry_backoff=0.0), make_paths(tmp_path), workdir=workdir, clock=lambda: FIXED_NOW
    ) as rt:
        yield rt


@pytest.fixture
def source(runtime: Runtime) -> Source:
    return build_source(runtime)


def test_a_fork_holds_the_valid_messages_and_nothing_else(runtime: Runtime, source: Source) -> None:
    info = fork_session(runtime.parts.store, source.id)
    events = events_of(runtime, info.id)
    assert {e.kind for e in events} == {EventKind.IMPORTED_MESSAGE}
    # Exactly what the model would see of the source without a checkpoint (SPEC V), in order.
    assert messages_of(runtime, info.id) == messages_of(runtime, source.id)
    texts = [str(e.payload.get("content")) for e in events]
    assert "hello again" in texts and "one more thing" in texts
    assert "hello" not in texts  # the rewound turn (SPEC H-4)
    assert not any("[foya:handoff" in text for text in texts)  # SPEC K-1
    assert all(e.payload["source"] == f"session {source.id}" for e in events)
    source_kinds = {e.kind for e in events_of(runtime, source.id)}
    assert {EventKind.PROVIDER_USAGE, EventKind.HANDOFF, EventKind.REWIND} <= source_kinds
    assert EventKind.COMPACTION_DIAGNOSTIC in source_kinds or EventKind.COMPACTION_COMPLETED in source_kinds
    # The new session: its own title, the same workspace, where it came from.
    origin = runtime.parts.store.get_session(source.id)
    assert info.title == f"fork of {origin.title}" and info.workspace == origin.workspace
    assert info.metadata == {"forked_from": {"session": source.id, "seq": origin.event_count}}
    assert info.event_count == len(messages_of(runtime, source.id))


def test_attachment_bytes_and_tool_result_facts_are_copied(runtime: Runtime, source: Source) -> None:
    info = fork_session(runtime.parts.store, source.id)
    first = events_of(runtime, info.id)[0].payload
    (ref,) = first["attachments"]
    assert runtime.parts.store.artifact(info.id, ref["sha256"]) == PNG
    original = runtime.parts.store.event(source.id, source.result_seq)
    assert original is not None
    copied = next(
        e.payload
        for e in events_of(runtime, info.id)
        if e.payload.get("tool_call_id") == original.payload["tool_call_id"]
    )
    assert copied["name"] == original.payload["name"] and copied["content"] == original.payload["content"]
    assert copied["is_error"] is False and copied["metadata"] == original.payload["metadata"]


def test_a_fork_at_a_seq_keeps_history_up_to_it(runtime: Runtime, source: Source) -> None:
    info = fork_session(runtime.parts.store, source.id, source.first_turn_end)
    assert messages_of(runtime, info.id) == messages_of(runtime, source.id, source.first_turn_end)
    assert info.metadata["forked_from"]["seq"] == source.first_turn_end
    # Right before the calls is safe too.
    before = fork_session(runtime.parts.store, source.id, source.call_seq - 1)
    assert messages_of(runtime, before.id)[-1].content == "what files are here?"


def test_a_fork_of_a_fork_and_a_fork_that_goes_on(runtime: Runtime, source: Source) -> None:
    first = fork_session(runtime.parts.store, source.id)
    second = fork_session(runtime.parts.store, first.id)
    assert messages_of(runtime, second.id) == messages_of(runtime, source.id)
    assert second.metadata["forked_from"] == {"session": first.id, "seq": first.event_count}
    assert second.title == f"fork of {first.title}"
    (ref,) = events_of(runtime, second.id)[0].payload["attachments"]
    assert runtime.parts.store.artifact(second.id, ref["sha256"]) == PNG
    turn(runtime, second.id, "what did we say so far?")
    assert len(events_of(runtime, source.id)) > 0 and len(events_of(runtime, first.id)) == first.event_count


@pytest.mark.parametrize("where", ["call", "between"])
def test_a_fork_point_inside_a_tool_group_is_refused(runtime: Runtime, source: Source, where: str) -> None:
    sessions = len(runtime.list_sessions())
    at = source.call_seq if where == "call" else source.result_seq - 1  # the call, or its usage record
    with pytest.raises(ForkError) as caught:
        fork_session(runtime.parts.store, source.id, at)
    message = str(caught.value)
    assert "\n" not in message
    assert message == (
        f"seq {at} would separate tool calls from their results: fork at {source.result_seq} "
        f"(after the results) or at {source.call_seq - 1} (before the calls)"
    )
    assert len(runtime.list_sessions()) == sessions  # nothing written


def test_a_fork_point_outside_valid_history_is_refused(runtime: Runtime, source: Source) -> None:
    last = runtime.parts.store.last_seq(source.id)
    with pytest.raises(
        ForkError, match=f"seq {last + 1} is not in this session: its events are numbered 1 to {last}"
    ):
        fork_session(runtime.parts.store, source.id, last + 1)
    for seq in (source.rewound_seq, source.unreadable_seq):
        with pytest.raises(ForkError, match="not an event of this session's valid history"):
            fork_session(runtime.parts.store, source.id, seq)
    with pytest.raises(UnknownSessionError):
        fork_session(runtime.parts.store, "f" * 32)


def test_an_interrupted_group_is_closed_in_the_fork(runtime: Runtime, source: Source) -> None:
    call = {"id": "lost_1", "name": "read_file", "arguments": json.dumps({"path": "README.md"})}
    runtime.parts.store.append(
        source.id, [NewEvent(EventKind.ASSISTANT_MESSAGE, {"text": "", "tool_calls": [call]})]
    )
    info = fork_session(runtime.parts.store, source.id)
    last = events_of(runtime, info.id)[-1].payload
    assert (
        last["role"] == "tool" and last["tool_call_id"] == "lost_1" and last["content"] == MISSING_TOOL_RESULT
    )
    assert "is_error" not in last  # no result event to take facts from
    assert [e.seq for e in valid_events(events_of(runtime, info.id))] == list(range(1, info.event_count + 1))


def test_cli_fork(tmp_path: Path, workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = make_paths(tmp_path)
    with Runtime(Settings(retry_backoff=0.0), paths, workdir=workdir, clock=lambda: FIXED_NOW) as rt:
        source = build_source(rt)
    database = str(paths.database)
    assert main(["--db", database, "fork", source.id[:8], "--at", str(source.first_turn_end), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["from"] == source.id and report["at"] == source.first_turn_end
    assert main(["--db", database, "fork", report["session"]]) == 0
    printed = capsys.readouterr().out.strip()
    assert len(printed) == 32 and printed != report["session"]
    with Runtime(Settings(retry_backoff=0.0), paths, workdir=workdir, clock=lambda: FIXED_NOW) as rt:
        assert report["messages"] == len(messages_of(rt, source.id, source.first_turn_end))
        assert rt.parts.store.get_session(printed).metadata["forked_from"]["session"] == report["session"]
    assert main(["--db", database, "fork", source.id, "--at", str(source.call_seq)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("foya: seq") and "separate tool calls" in err
    assert main(["--db", database, "fork", "0000000"]) == 2
    assert "no session" in capsys.readouterr().err

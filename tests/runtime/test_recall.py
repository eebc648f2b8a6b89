"""Tests recall: the full-text index kept in step with history (same transaction, rewinds
excluded, older databases indexed by migration), queries in any language with clear errors,
`history_search` / `history_read` for the model once a checkpoint exists, `[seq a–b]` provenance,
and `foya search`."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from foya_tui.cli import main
from foya_tui.runtime.compaction.failures import Outcome
from foya_tui.runtime.compaction.summary import out_of_range_references, summary_problems
from foya_tui.runtime.digests import sha256_hex
from foya_tui.runtime.model import EventKind, NewEvent
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.store import EventStore, SearchError, UnknownSessionError, open_database
from foya_tui.runtime.tools.registry import HISTORY_EVENT_TOOL, HISTORY_SEARCH_TOOL, TOOL_SEARCH, ToolContext
from foya_tui.runtime.updates import ToolCallStarted, TurnFinished
from tests.fakes.scripted import ScriptedClient
from tests.runtime.test_compaction import import_session, scripted_runtime, summary, tool_turn


def tool_names(runtime: Runtime, session_id: str, model: str | None = None) -> set[str]:
    view = runtime.context(session_id, runtime.route_for(model) if model else None)
    return {tool["function"]["name"] for tool in view.tools}


@pytest.fixture
def scripted(tmp_path: Path, workdir: Path) -> Iterator[Runtime]:
    with scripted_runtime(tmp_path, workdir, ScriptedClient()) as runtime:
        yield runtime


@pytest.fixture
def store(tmp_path: Path) -> EventStore:
    return EventStore(open_database(tmp_path / "search.sqlite3"))


def test_the_index_follows_appends_in_the_same_transaction(store: EventStore) -> None:
    session = store.create_session()
    store.append(
        session.id,
        [
            NewEvent(EventKind.USER_MESSAGE, {"text": "Why does parse_header raise KeyError: 'user_id'?"}),
            NewEvent(
                EventKind.ASSISTANT_MESSAGE,
                {
                    "text": "Let me grep.",
                    "tool_calls": [{"id": "c1", "name": "grep", "arguments": '{"pattern": "user_id"}'}],
                },
            ),
            NewEvent(
                EventKind.TOOL_RESULT,
                {"tool_call_id": "c1", "name": "grep", "content": "src/h.py:3: user_id = row[0]"},
            ),
            NewEvent(EventKind.PROVIDER_USAGE, {"route_id": "r", "through_seq": 1, "usage": None}),
        ],
    )
    hits = store.search(session.id, "user_id")
    assert [(hit.seq, hit.role) for hit in hits] == [(3, "tool"), (2, "assistant"), (1, "user")]
    assert "KeyError: 'user_id'" in hits[-1].snippet
    with pytest.raises(UnknownSessionError):  # a failed append indexes nothing
        store.append("nope", [NewEvent(EventKind.USER_MESSAGE, {"text": "user_id ghost"})])
    assert len(store.search(session.id, "user_id")) == 3
    other = store.create_session()
    assert store.search(other.id, "user_id") == []  # sessions never see each other


def test_queries_in_any_language_phrases_prefixes_and_clear_errors(store: EventStore) -> None:
    session = store.create_session()
    store.append(
        session.id,
        [
            NewEvent(EventKind.USER_MESSAGE, {"text": "请列出项目目录里的文件"}),
            NewEvent(EventKind.USER_MESSAGE, {"text": "The Parser handles multi-line headers"}),
            NewEvent(EventKind.USER_MESSAGE, {"text": "headers, multi-line? parser!"}),
        ],
    )
    assert [hit.seq for hit in store.search(session.id, "目录")] == [1]  # two characters: LIKE fallback
    assert [hit.seq for hit in store.search(session.id, "项目目录")] == [1]
    assert [hit.seq for hit in store.search(session.id, '"multi-line headers"')] == [2]
    assert [hit.seq for hit in store.search(session.id, "pars* HEADERS")] == [3, 2]
    assert store.search(session.id, "parser", from_seq=3) == store.search(session.id, "parser")[:1]
    for bad, message in (("", "empty"), ('"unclosed', "unbalanced quote"), ('""', "no words")):
        with pytest.raises(SearchError, match=message):
            store.search(session.id, bad)
    # Quotes and FTS operators in a query are text to find, never syntax.
    assert store.search(session.id, "NOT AND OR NEAR(") == []


def test_rewound_events_leave_the_index_and_stay_in_history(store: EventStore) -> None:
    session = store.create_session()
    store.append(
        session.id,
        [NewEvent(EventKind.USER_MESSAGE, {"text": f"step {n} of the migration"}) for n in range(5)],
    )
    store.append(session.id, [NewEvent(EventKind.REWIND, {"to_seq": 2})])
    assert [hit.seq for hit in store.search(session.id, "migration")] == [2, 1]
    assert len(store.events(session.id)) == 6
    store.append(session.id, [NewEvent(EventKind.USER_MESSAGE, {"text": "a new migration plan"})])
    assert [hit.seq for hit in store.search(session.id, "migration")] == [7, 2, 1]
    # A rewind in the same batch as the events it invalidates (through the public API).
    store.append(
        session.id,
        [
            NewEvent(EventKind.USER_MESSAGE, {"text": "migration typo"}),
            NewEvent(EventKind.REWIND, {"to_seq": 7}),
        ],
    )
    assert [hit.seq for hit in store.search(session.id, "migration")] == [7, 2, 1]


def test_undecodable_text_is_indexed_without_losing_history(store: EventStore) -> None:
    session = store.create_session()
    raw = b"binary \xff\xfe output with marker".decode("utf-8", "surrogateescape")
    store.append(session.id, [NewEvent(EventKind.TOOL_RESULT, {"tool_call_id": "x", "content": raw})])
    assert [hit.seq for hit in store.search(session.id, "marker")] == [1]
    assert store.events(session.id)[0].payload["content"] == raw


def test_an_older_database_is_indexed_by_migration_with_progress(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    store = EventStore(open_database(path))
    session = store.create_session()
    store.append(
        session.id,
        [NewEvent(EventKind.USER_MESSAGE, {"text": f"request {n} about caching"}) for n in range(6)],
    )
    store.append(session.id, [NewEvent(EventKind.REWIND, {"to_seq": 4})])
    store._db.close()
    with sqlite3.connect(path) as raw:
        raw.execute("DROP TABLE event_fts")
        raw.execute("UPDATE schema_version SET version = 3")
    calls: list[tuple[int, int]] = []
    reopened = EventStore(open_database(path, lambda done, total: calls.append((done, total))))
    assert calls and calls[-1] == (7, 7)
    assert [hit.seq for hit in reopened.search(session.id, "caching")] == [4, 3, 2, 1]


def test_provenance_references_must_lie_inside_the_covered_range() -> None:
    text = summary(critical="Seen in [seq 3], [seq 5–9] and [seq 12-40].")  # and [seq 1] in Progress
    assert out_of_range_references(text, (1, 40)) == []
    assert out_of_range_references(text, (4, 30)) == ["[seq 1]", "[seq 3]", "[seq 12-40]"]
    assert any("outside the summarised events 4–30" in p for p in summary_problems(text, "stop", (4, 30)))


def test_a_summary_citing_events_it_does_not_cover_is_repaired(tmp_path: Path, workdir: Path) -> None:
    client = ScriptedClient(summaries=[summary(critical="See [seq 9999]."), summary()])
    with scripted_runtime(tmp_path, workdir, client) as runtime:
        session_id = import_session(runtime, [m for i in range(3) for m in tool_turn(i)])
        result = runtime.compact(session_id)
        assert result.outcome is Outcome.ACCEPTED and result.checkpoint.producer == "repaired"
        assert "[seq 9999]" in client.summary_requests[1].messages[1]["content"]


def test_the_model_gets_search_and_read_once_a_checkpoint_exists(scripted: Runtime) -> None:
    messages = [m for i in range(4) for m in tool_turn(i)]
    messages[0]["content"] = "Note: the staging database is called heron-db-7."
    session_id = import_session(scripted, messages)
    assert not tool_names(scripted, session_id) & {HISTORY_SEARCH_TOOL, HISTORY_EVENT_TOOL}
    checkpoint = scripted.compact(session_id).checkpoint
    assert checkpoint is not None
    assert {HISTORY_SEARCH_TOOL, HISTORY_EVENT_TOOL} <= tool_names(scripted, session_id, "foya-sim/large")
    # On a small window they wait for tool_search, which names them (issue 17 item 5).
    assert TOOL_SEARCH in tool_names(scripted, session_id)
    context = ToolContext(
        workdir=Path("."),
        session_id=session_id,
        store=scripted.parts.store,
        covered=(checkpoint.from_seq, checkpoint.through_seq),
    )
    registry = scripted.parts.registry
    found = registry.call(HISTORY_SEARCH_TOOL, json.dumps({"query": "heron-db-7"}), context)
    assert (
        not found.is_error
        and "[seq 1] user: Note: the staging database is called heron-db-7." in found.content
    )
    assert "(the summarised range)" in found.content
    late = registry.call(HISTORY_SEARCH_TOOL, json.dumps({"query": "module_3.py defines"}), context)
    assert "no events" in late.content and "scope=all" in late.content  # verbatim in context, not covered
    everywhere = registry.call(
        HISTORY_SEARCH_TOOL, json.dumps({"query": "module_3.py defines", "scope": "all"}), context
    )
    assert "module_3.py defines f3." in everywhere.content
    bad = registry.call(HISTORY_SEARCH_TOOL, json.dumps({"query": '"oops'}), context)
    assert bad.is_error and "unbalanced quote" in bad.content

    page = registry.call(HISTORY_EVENT_TOOL, json.dumps({"seq": 3, "length": 40}), context)
    assert not page.is_error and page.content.startswith("event 3 · imported_message · tool")
    assert "call with op=read offset=40" in page.content
    text = scripted.parts.store.event(session_id, 3).payload["content"]
    ok = registry.call(HISTORY_EVENT_TOOL, json.dumps({"seq": 3, "sha256": sha256_hex(text)}), context)
    assert not ok.is_error
    wrong = registry.call(HISTORY_EVENT_TOOL, json.dumps({"seq": 3, "sha256": "0" * 64}), context)
    assert wrong.is_error and "sha256 mismatch" in wrong.content
    usage = registry.call(
        HISTORY_EVENT_TOOL, json.dumps({"seq": scripted.parts.store.last_seq(session_id)}), context
    )
    assert usage.is_error and "not a message" in usage.content
    scripted.rewind(session_id, 4)
    gone = registry.call(HISTORY_EVENT_TOOL, json.dumps({"seq": 5}), context)
    assert gone.is_error and "rewound" in gone.content


def test_cli_search_names_the_segment_that_summarises_a_hit(
    scripted: Runtime, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = [m for i in range(4) for m in tool_turn(i)]
    session_id = import_session(scripted, messages)
    checkpoint = scripted.compact(session_id).checkpoint
    assert checkpoint is not None
    database = str(scripted.parts.store.path)
    assert main(["--db", database, "search", session_id, "defines", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)["hits"]
    assert [hit["seq"] for hit in hits] == [16, 12, 8, 4]
    assert set(hits[0]) == {"seq", "kind", "role", "snippet", "covered_by"}
    covered = {hit["seq"]: hit["covered_by"] for hit in hits}
    assert covered[4] == {
        "checkpoint_id": checkpoint.id,
        "segment": 1,
        "from_seq": 1,
        "through_seq": checkpoint.through_seq,
    }
    assert covered[16] is None  # after the checkpoint: the model sees it verbatim
    assert main(["--db", database, "search", session_id, '"unclosed']) == 2
    assert "unbalanced quote" in capsys.readouterr().err
    assert main(["--db", database, "search", session_id, "defines"]) == 0
    assert "summarised: checkpoint" in capsys.readouterr().out


def test_the_simulator_recalls_what_a_checkpoint_summarised(runtime: Runtime) -> None:
    """End to end on the simulator: after compaction, asking about an early fact makes the model
    call history_search, and the answer quotes the canonical event."""
    messages = [m for i in range(4) for m in tool_turn(i)]
    messages[0]["content"] = "Note: the staging database is called heron-db-7."
    session_id = import_session(runtime, messages)
    assert runtime.compact(session_id).outcome is Outcome.ACCEPTED
    for model, expected in (
        ("foya-sim/large", [HISTORY_SEARCH_TOOL]),
        # A small window's recall tools wait behind tool_search, which loads them.
        ("foya-sim/small", [TOOL_SEARCH, HISTORY_SEARCH_TOOL]),
    ):
        session = runtime.open_session(session_id, runtime.route_for(model))
        updates = list(session.send("search the history for heron-db-7"))
        calls = [u for u in updates if isinstance(u, ToolCallStarted)]
        assert [call.name for call in calls] == expected
        assert isinstance(updates[-1], TurnFinished) and "heron-db-7" in updates[-1].text

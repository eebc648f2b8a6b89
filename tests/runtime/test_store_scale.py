"""Tests the store's cost at scale on real database files: running digests stored with their events
(schema 6) and what `foya verify` recomputes from the bytes, including the migration of a database
written by the previous schema."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from foya_tui.runtime.context import columns as columns_module
from foya_tui.runtime.context import index as index_module
from foya_tui.runtime.context.columns import TokenColumn
from foya_tui.runtime.context.index import SessionIndex
from foya_tui.runtime.context.tool_results import shortened_count_key, shortened_text
from foya_tui.runtime.digests import CHAIN_START, chained_digest
from foya_tui.runtime.model import EventKind, NewEvent
from foya_tui.runtime.providers.summary_format import SECTION_HEADINGS
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.store import CompactionStore, EventStore, check_store, open_database, repair_store
from foya_tui.runtime.store.chain import MESSAGE_KINDS, check_chain
from foya_tui.runtime.tokens import counter_for_model, message_tokens, stored_count_key
from foya_tui.runtime.view.checkpoint import Checkpoint, Phase, ProjectionKind, Segment
from foya_tui.runtime.view.history import MISSING_TOOL_RESULT
from foya_tui.runtime.view.recovery import CheckpointReader
from foya_tui.settings import Settings
from tests.conftest import FIXED_NOW, make_paths


def user(text: str) -> NewEvent:
    return NewEvent(EventKind.USER_MESSAGE, {"text": text})


def reply(text: str) -> NewEvent:
    return NewEvent(EventKind.ASSISTANT_MESSAGE, {"text": text})


def rewind(to_seq: int) -> NewEvent:
    return NewEvent(EventKind.REWIND, {"to_seq": to_seq})


def expected_digest(path: Path, session_id: str, through_seq: int) -> str:
    """The source digest recomputed from scratch: the valid message events 1..through_seq as they
    are valid now (every rewind of the session counts), folded from their stored bytes."""
    with sqlite3.connect(path) as raw:
        rows = raw.execute(
            "SELECT seq, kind, payload FROM event WHERE session_id = ? ORDER BY seq", (session_id,)
        ).fetchall()
    rewinds = [
        (to_seq, seq)
        for seq, kind, payload in rows
        if kind == "rewind" and isinstance(to_seq := json.loads(payload).get("to_seq"), int)
    ]
    digest = CHAIN_START
    for seq, kind, payload in rows:
        if seq > through_seq or kind not in MESSAGE_KINDS:
            continue
        if any(to_seq < seq < at for to_seq, at in rewinds):
            continue
        digest = chained_digest(digest, seq, kind, payload)
    return digest


def history_with_rewinds(store: EventStore) -> str:
    """A session whose rewinds go back plainly, into an already rewound range, to 0, and whose
    batches mix rewinds with messages (the append path chains inside one batch too)."""
    session = store.create_session(events=[user("one"), reply("two"), user("three")])
    store.append(session.id, [reply("four"), rewind(2), user("six"), reply("seven")])  # seqs 4..7
    store.append(session.id, [user("eight"), rewind(4)])  # seq 9 rewinds to 4, itself rewound
    store.append(session.id, [reply("ten"), NewEvent(EventKind.PROVIDER_USAGE, {"input_tokens": 1})])
    store.append(session.id, [rewind(0), user("thirteen"), rewind(99), reply("fifteen")])
    store.append(session.id, [NewEvent(EventKind.REWIND, {"to_seq": "x"}), user("seventeen")])
    return session.id


@pytest.fixture
def database(tmp_path: Path):
    database = open_database(tmp_path / "scale.sqlite3")
    yield database
    database.close()


def test_running_digest_equals_the_recomputed_one_at_every_prefix(database) -> None:
    store = EventStore(database)
    compaction = CompactionStore(database, store)
    session_id = history_with_rewinds(store)
    last = store.last_seq(session_id)
    for through in range(0, last + 2):
        assert compaction.source_digest(session_id, through) == expected_digest(
            database.path, session_id, through
        ), through
    assert check_chain(database.connection, session_id).ok


def test_a_rewind_changes_the_digest_of_what_it_rewound(database) -> None:
    store = EventStore(database)
    compaction = CompactionStore(database, store)
    session = store.create_session(events=[user("a"), reply("b"), user("c")])
    before = compaction.source_digest(session.id, 3)
    store.append(session.id, [rewind(1)])
    assert compaction.source_digest(session.id, 3) == compaction.source_digest(session.id, 1) != before


def test_source_digest_reads_no_event_payload_but_rewinds(database) -> None:
    """One indexed lookup (plus the rewinds): not a pass over the covered prefix."""
    store = EventStore(database)
    compaction = CompactionStore(database, store)
    session = store.create_session(events=[user(f"message {n}") for n in range(500)])
    statements: list[str] = []
    raw = database.connection.connection()
    raw.set_trace_callback(statements.append)
    try:
        compaction.source_digest(session.id, 400)
    finally:
        raw.set_trace_callback(None)
    reads_of_events = [sql for sql in statements if "FROM event " in sql or sql.endswith("FROM event")]
    assert all("kind = " in sql for sql in reads_of_events), reads_of_events
    assert any("event_digest" in sql for sql in statements)


def test_verify_catches_a_tampered_digest_row_and_repair_rewrites_it(database) -> None:
    store = EventStore(database)
    session_id = history_with_rewinds(store)
    assert check_store(database, session_id).problems == ()
    with sqlite3.connect(database.path) as raw:
        raw.execute(
            "UPDATE event_digest SET chain = ? WHERE session_id = ? AND seq = 6", ("0" * 64, session_id)
        )
        raw.execute("DELETE FROM event_digest WHERE session_id = ? AND seq = 8", (session_id,))
    check = check_store(database, session_id)
    assert check.chain_damaged
    assert any(
        "running digests: 1 differ from the events' bytes, 1 missing (first at seq 6)" in p
        for p in check.problems
    )
    actions = repair_store(database, check, session_id=session_id)
    assert any("rewrote the running digests" in action for action in actions)
    assert check_store(database, session_id).problems == ()


def test_verify_catches_an_event_whose_bytes_changed_under_its_digest(database) -> None:
    """An edited event (its triggers dropped first) no longer matches the digest stored with it."""
    store = EventStore(database)
    session = store.create_session(events=[user("a"), reply("b"), user("c")])
    with sqlite3.connect(database.path) as raw:
        raw.execute("DROP TRIGGER event_no_update")
        raw.execute(
            "UPDATE event SET payload = ? WHERE session_id = ? AND seq = 2", ('{"text":"B"}', session.id)
        )
    problems = check_store(database, session.id).problems
    assert any("running digests: 2 differ from the events' bytes (first at seq 2)" in p for p in problems)


def make_schema_5(path: Path) -> str:
    """A database as the previous schema wrote it: events with no running digests, schema 5."""
    database = open_database(path)
    store = EventStore(database)
    session_id = history_with_rewinds(store)
    database.close()
    with sqlite3.connect(path) as raw:
        raw.execute("DROP TABLE event_digest")
        raw.execute("UPDATE schema_version SET version = 5")
    return session_id


def test_migration_fills_the_running_digests_of_an_old_database(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    session_id = make_schema_5(path)
    heard: list[tuple[int, int]] = []
    database = open_database(path, progress=lambda done, total: heard.append((done, total)))
    try:
        store = EventStore(database)
        compaction = CompactionStore(database, store)
        assert check_chain(database.connection, session_id).ok
        assert heard and heard[-1] == (17, 17)
        for through in range(0, 18):
            assert compaction.source_digest(session_id, through) == expected_digest(path, session_id, through)
        # Appends after the migration chain on from the filled rows.
        store.append(session_id, [reply("eighteen")])
        assert compaction.source_digest(session_id, 18) == expected_digest(path, session_id, 18)
    finally:
        database.close()


def text_checkpoint(session_id: str, through_seq: int, source_digest: str) -> Checkpoint:
    summary = "\n\n".join(f"{heading}\nWhat happened." for heading in SECTION_HEADINGS)
    return Checkpoint(
        id="",
        previous_id=None,
        session_id=session_id,
        through_seq=through_seq,
        source_digest=source_digest,
        head_anchor_seq=None,
        phase=Phase.PRE_TURN,
        projection_kind=ProjectionKind.TEXT,
        level=1,
        segments=(Segment(1, 1, through_seq, 1, summary, 20),),
        route_id="route",
        model="foya-sim/large",
        created_at="2026-12-01T00:00:00+00:00",
        tokens_before=100,
        tokens_after=20,
        covered_messages=through_seq,
        producer="llm",
    ).with_id()


def commit(compaction: CompactionStore, checkpoint: Checkpoint) -> None:
    completion = NewEvent(
        EventKind.COMPACTION_COMPLETED, {"checkpoint": checkpoint.to_payload(), "trigger": "manual"}
    )
    compaction.commit(
        checkpoint.session_id, checkpoint.id, checkpoint.serialised(), [completion], lambda: None
    )


def test_a_checkpoint_made_before_running_digests_stays_valid_after_the_migration(tmp_path: Path) -> None:
    path = tmp_path / "old-checkpoint.sqlite3"
    database = open_database(path)
    store = EventStore(database)
    compaction = CompactionStore(database, store)
    session = store.create_session(events=[user("a"), reply("b"), user("c"), reply("d"), user("e")])
    old = text_checkpoint(session.id, 4, compaction.unchained_source_digest(session.id, 4))
    commit(compaction, old)
    database.close()
    with sqlite3.connect(path) as raw:
        raw.execute("DROP TABLE event_digest")
        raw.execute("UPDATE schema_version SET version = 5")
    database = open_database(path)
    try:
        store = EventStore(database)
        compaction = CompactionStore(database, store)
        state = CheckpointReader(store, compaction).state(session.id)
        assert state.current is not None and state.current.id == old.id and not state.notices
        # A checkpoint whose digest matches neither way is still refused (P-2).
        forged = text_checkpoint(session.id, 4, "0" * 64)
        commit(compaction, forged)
        state = CheckpointReader(store, compaction).state(session.id, repair=False)
        assert state.current is not None and state.current.id == old.id
        assert any("source digest" in notice for notice in state.notices)
    finally:
        database.close()


def test_a_new_checkpoint_is_checked_against_the_running_digest(database) -> None:
    store = EventStore(database)
    compaction = CompactionStore(database, store)
    session = store.create_session(events=[user("a"), reply("b"), user("c")])
    checkpoint = text_checkpoint(session.id, 2, compaction.source_digest(session.id, 2))
    commit(compaction, checkpoint)
    statements: list[str] = []
    raw = database.connection.connection()
    raw.set_trace_callback(statements.append)
    try:
        state = CheckpointReader(store, compaction).state(session.id, repair=False)
    finally:
        raw.set_trace_callback(None)
    assert state.current is not None and state.current.id == checkpoint.id and not state.notices
    # No pass over the covered messages: events are read by control kinds (on their index), and
    # P-2's start check reads a short batch from the session's first event.
    event_reads = [sql for sql in statements if " FROM event " in sql]
    control_reads = [sql for sql in event_reads if " kind " in sql]
    assert control_reads and all("'user_message'" not in sql for sql in control_reads)
    assert any("FROM event_digest" in sql for sql in statements)
    # …and each read of events is a range of an index, never a walk of the session's whole log.
    for sql in event_reads:
        plan = " ".join(str(row[3]) for row in raw.execute(f"EXPLAIN QUERY PLAN {sql}"))
        assert "event_by_kind" in plan or "seq=" in plan or "seq>" in plan, (sql, plan)


# -- persisted token counts (schema 7) -------------------------------------------------------------

TRANSCRIPT = [
    {"role": "user", "content": "Read the parser and fix the empty-input crash."},
    {
        "role": "assistant",
        "content": "Reading it.",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}},
            {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "b"}'}},
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "def parse(text):\n    return text[0]\n" * 40},
    # c2 is never answered: the model's view gets a placeholder under the assistant's seq.
    {"role": "user", "content": "And the tests?"},
    {"role": "assistant", "content": "They pass now: " + "ok " * 300},
]


def open_runtime(tmp_path: Path, workdir: Path, *, read_only: bool = False) -> Runtime:
    settings = Settings(retry_backoff=0.0)
    paths = make_paths(tmp_path)
    return Runtime(settings, paths, workdir=workdir, clock=lambda: FIXED_NOW, read_only=read_only)


def counted_entries(runtime: Runtime, session_id: str) -> list[tuple[int, int]]:
    """(seq, tokens) of every event's own message, counted afresh by the route's tokenizer."""
    index = SessionIndex(session_id)
    index.refresh(runtime.parts.store)
    column = TokenColumn(counter_for_model(runtime.route_for().model), runtime.settings.tools)
    return column.extend(index.log.entries)[0]


@contextmanager
def tokenizations() -> Iterator[list[str]]:
    """The start of every message the compiler's index tokenizes meanwhile (a new process's view)."""
    tokenized: list[str] = []
    real = columns_module.message_tokens

    def counting(message, counter):  # type: ignore[no-untyped-def]
        tokenized.append(str(message.get("content"))[:20])
        return real(message, counter)

    with pytest.MonkeyPatch.context() as monkeypatch:
        for module in (columns_module, index_module):  # the columns, and the checkpoint's head
            monkeypatch.setattr(module, "message_tokens", counting)
        yield tokenized


def test_a_compile_persists_each_message_count_once_and_they_equal_fresh_counts(
    tmp_path: Path, workdir: Path
) -> None:
    with Runtime(
        Settings(retry_backoff=0.0), make_paths(tmp_path), workdir=workdir, clock=lambda: FIXED_NOW
    ) as rt:
        session_id = rt.import_transcript(json.dumps(TRANSCRIPT).encode(), "t.json").id
        first = rt.context(session_id)
        key = stored_count_key(counter_for_model(rt.route_for().model))
        fresh = counted_entries(rt, session_id)
        assert sorted(rt.parts.store.token_counts(session_id, key).items()) == fresh
        assert [seq for seq, _ in fresh] == [1, 2, 3, 4, 5]  # the placeholder is not persisted
    with open_runtime(tmp_path, workdir) as rt, tokenizations() as tokenized:
        again = rt.context(session_id)
    # A new process's compile takes every event's count from the store: only the placeholder (not an
    # event's message) is counted, and the request is the same as the first process's.
    assert tokenized == [MISSING_TOOL_RESULT[:20]]
    assert again.layers == first.layers and again.messages == first.messages


def test_counts_are_not_written_by_a_read_only_process(tmp_path: Path, workdir: Path) -> None:
    paths = make_paths(tmp_path)
    with Runtime(Settings(retry_backoff=0.0), paths, workdir=workdir, clock=lambda: FIXED_NOW) as rt:
        session_id = rt.import_transcript(json.dumps(TRANSCRIPT).encode(), "t.json").id
    with Runtime(
        Settings(retry_backoff=0.0), paths, workdir=workdir, clock=lambda: FIXED_NOW, read_only=True
    ) as rt:
        rt.context(session_id)
    with sqlite3.connect(paths.database) as raw:
        assert raw.execute("SELECT COUNT(*) FROM event_tokens").fetchone()[0] == 0


def assert_repaired(rt: Runtime, session_id: str, *, seq: int) -> None:
    """One wrong stored count, first at `seq`: verify says so, repair drops it, verify is clean."""
    problems = rt.verify(session_id).problems
    assert (
        len(problems) == 1
        and f"1 stored count(s) differ from a fresh count (first at seq {seq})" in problems[0]
    )
    assert any("deleted 1 wrong token count" in action for action in rt.repair(session_id))
    assert rt.verify(session_id).problems == ()


def test_verify_catches_a_tampered_count_row_and_repair_drops_it(tmp_path: Path, workdir: Path) -> None:
    with open_runtime(tmp_path, workdir) as rt:
        session_id = rt.import_transcript(json.dumps(TRANSCRIPT).encode(), "t.json").id
        rt.context(session_id)
        assert rt.verify(session_id).problems == ()
    with sqlite3.connect(make_paths(tmp_path).database) as raw:
        raw.execute("UPDATE event_tokens SET tokens = tokens + 1 WHERE seq = 3")
    with open_runtime(tmp_path, workdir) as rt:
        assert_repaired(rt, session_id, seq=3)
        rt.context(session_id)  # counted again, and persisted again
        key = stored_count_key(counter_for_model(rt.route_for().model))
        assert sorted(rt.parts.store.token_counts(session_id, key).items()) == counted_entries(rt, session_id)


LARGE_RESULT = "def parse(text):\n    return text[0]  # the first token, or an IndexError\n" * 300
"""A tool result well over `oversized_tokens` (2,000): T-1 gives it a shortened form."""


def test_a_large_results_shortened_count_is_persisted_so_a_new_process_tokenizes_nothing(
    tmp_path: Path, workdir: Path
) -> None:
    """Issue 17 item 2: the count of a large result's shortened form (T-1) was the one count a new
    process still made for every large result of history. It is persisted under a key naming the
    form's sizes, equals a fresh count of that form, and a new process counts nothing again."""
    transcript = [
        *TRANSCRIPT[:3],
        {"role": "tool", "tool_call_id": "c2", "content": LARGE_RESULT},
        *TRANSCRIPT[3:],
    ]
    with open_runtime(tmp_path, workdir) as rt:
        session_id = rt.import_transcript(json.dumps(transcript).encode(), "t.json").id
        first = rt.context(session_id)
        counter = counter_for_model(rt.route_for().model)
        key = shortened_count_key(counter, rt.settings.tools)
        (large,) = [e for e in rt.parts.store.events(session_id) if e.payload.get("content") == LARGE_RESULT]
        full = rt.parts.store.token_counts(session_id, stored_count_key(counter))[large.seq]
        text = shortened_text(LARGE_RESULT, large.seq, "c2", full, rt.settings.tools)
        short = {"role": "tool", "tool_call_id": "c2", "content": text}
        assert rt.parts.store.token_counts(session_id, key) == {large.seq: message_tokens(short, counter)}
    with open_runtime(tmp_path, workdir) as rt, tokenizations() as tokenized:
        again = rt.context(session_id)
    assert tokenized == []  # every event's count and the shortened form's come from the store
    assert again.layers == first.layers and again.messages == first.messages


def test_verify_recounts_a_shortened_forms_count_and_repair_drops_a_wrong_one(
    tmp_path: Path, workdir: Path
) -> None:
    transcript = [
        *TRANSCRIPT[:3],
        {"role": "tool", "tool_call_id": "c2", "content": LARGE_RESULT},
        *TRANSCRIPT[3:],
    ]
    with open_runtime(tmp_path, workdir) as rt:
        session_id = rt.import_transcript(json.dumps(transcript).encode(), "t.json").id
        rt.context(session_id)
        assert rt.verify(session_id).problems == ()
        key = shortened_count_key(counter_for_model(rt.route_for().model), rt.settings.tools)
    with sqlite3.connect(make_paths(tmp_path).database) as raw:
        assert (
            raw.execute("UPDATE event_tokens SET tokens = tokens + 1 WHERE counter = ?", (key,)).rowcount == 1
        )
    with open_runtime(tmp_path, workdir) as rt:
        assert_repaired(rt, session_id, seq=4)

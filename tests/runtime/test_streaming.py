"""Tests the whole-history commands in bounded memory (issue 17 item 7): history is read in
batches (`EventStore.iter_events`: export and verify hold one batch, never the log), a batched
import commits its rows first and writes the full-text index after them in batches of its own,
with progress for both, and `foya verify`'s recount of stored token counts streams too.

Reads are counted with the store's `events_decoded`, never timed.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from foya_tui.cli import main
from foya_tui.runtime import transcripts
from foya_tui.runtime.context.columns import wrong_token_counts
from foya_tui.runtime.model import EventKind, NewEvent
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.store import EventStore, open_database
from foya_tui.runtime.transcripts import TranscriptError, TranscriptFile, open_transcript, parse_transcript
from foya_tui.settings import ToolSettings


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EventStore]:
    database = open_database(tmp_path / "foya.sqlite3")
    try:
        yield EventStore(database)
    finally:
        database.close()


def messages(count: int) -> list[NewEvent]:
    return [
        NewEvent(
            EventKind.IMPORTED_MESSAGE,
            {"role": "user" if index % 2 == 0 else "assistant", "content": f"note {index} zebra{index}"},
        )
        for index in range(count)
    ]


def test_history_is_read_in_batches_as_it_stood(store: EventStore) -> None:
    session = store.create_session(events=messages(250))
    before = store.events_decoded
    stream = store.iter_events(session.id, batch=100)
    first = next(stream)
    assert first.seq == 1 and store.events_decoded - before == 100  # one batch, not the log
    store.append(session.id, messages(3))  # appended while reading: not part of this moment's history
    rest = list(stream)
    assert [event.seq for event in [first, *rest]] == list(range(1, 251))
    assert store.events_decoded - before == 250
    assert [event.seq for event in store.iter_events(session.id, after_seq=240, batch=4)] == list(
        range(241, 254)
    )


def test_an_export_yields_before_it_has_read_history(tmp_path: Path, runtime: Runtime) -> None:
    session = runtime.parts.store.create_session(events=messages(2_500))
    before = runtime.parts.store.events_decoded
    records = runtime.export(session.id)
    first = next(records)
    assert first["seq"] == 1 and runtime.parts.store.events_decoded - before <= 1_000
    assert len([first, *records]) == 2_500


def test_a_batched_import_writes_its_rows_then_the_index(store: EventStore) -> None:
    counts: list[tuple[str, int, int, int]] = []
    path = store.path

    def indexed_rows() -> int:
        with sqlite3.connect(path) as raw:  # another connection: what is committed
            return int(raw.execute("SELECT COUNT(*) FROM event_fts").fetchone()[0])

    def rows(done: int, total: int) -> None:
        counts.append(("rows", done, total, indexed_rows()))

    def index(done: int, total: int) -> None:
        counts.append(("index", done, total, indexed_rows()))

    info = store.create_session_in_batches(
        events=iter(messages(250)), total=250, batch_events=100, progress=rows, index_progress=index
    )
    assert [(phase, done, total) for phase, done, total, _ in counts] == [
        ("rows", 100, 250),
        ("rows", 200, 250),
        ("rows", 250, 250),
        ("index", 100, 250),
        ("index", 200, 250),
        ("index", 250, 250),
    ]
    # No index row while the rows commit; then the index grows batch by batch, after them.
    assert [found for phase, _, _, found in counts] == [0, 0, 0, 100, 200, 250]
    assert [hit.seq for hit in store.search(info.id, "zebra249")] == [250]
    assert store.list_sessions()[0].id == info.id  # complete: in view


def test_the_import_command_reports_both_phases(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    transcript = tmp_path / "big.jsonl"
    transcript.write_text(
        "".join(
            json.dumps({"role": "user" if i % 2 == 0 else "assistant", "content": f"m {i}"}) + "\n"
            for i in range(2_500)
        ),
        encoding="utf-8",
    )
    home = tmp_path / "home"
    assert main(["--db", str(home / "foya.sqlite3"), "import", str(transcript)]) == 0
    err = capsys.readouterr().err
    assert "foya: importing: 2,500 of 2,500 messages" in err
    assert "foya: indexing for search: 2,500 of 2,500 messages" in err
    assert err.index("importing: 2,500") < err.index("indexing for search: 1,000")


def test_the_streamed_recount_finds_a_wrong_count_and_skips_rewound_events(runtime: Runtime) -> None:
    session = runtime.new_session()
    store = runtime.parts.store
    store.append(session.id, messages(6))
    runtime.context(session.id)  # counts made and persisted (schema 7)
    (key,) = store.token_count_keys(session.id)
    assert wrong_token_counts(store, session.id, ToolSettings()) == {}
    store.append(session.id, [NewEvent(EventKind.REWIND, {"to_seq": 4})])
    with sqlite3.connect(store.path) as raw:  # derived data: damage it directly
        raw.execute(
            "UPDATE event_tokens SET tokens = tokens + 7 WHERE session_id = ? AND seq IN (2, 5)",
            (session.id,),
        )
    # Seq 5 was rewound: no longer history, its count is not checked; seq 2 is wrong.
    assert wrong_token_counts(store, session.id, ToolSettings()) == {key: [2]}


# -- the transcript file, read a piece at a time -------------------------------------------------


def transcript_messages(count: int) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for index in range(count):
        call = {"id": f"c{index}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        out += [
            {"role": "user", "content": f"request {index} ünïcode \u2028 inside"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{index}", "content": "x" * (index * 37 % 300)},
        ]
    return out


FORMS = {
    "array": lambda items: json.dumps(items, ensure_ascii=False, indent=1).encode(),
    "array with BOM": lambda items: b"\xef\xbb\xbf  " + json.dumps(items).encode(),
    # (A raw U+2028 would end a JSONL line inside its string, for the whole-file parser too.)
    "jsonl": lambda items: "".join(json.dumps(i) + "\n" for i in items).encode(),
    "jsonl crlf and blank lines": lambda items: "\r\n\r\n".join(json.dumps(i) for i in items).encode(),
    "jsonl odd breaks": lambda items: "\x85".join(json.dumps(i) for i in items).encode(),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_file_read_in_pieces_gives_the_whole_file_parse(
    tmp_path: Path, form: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transcripts, "READ_CHUNK", 61)  # pieces end inside items, escapes, \r\n
    data = FORMS[form](transcript_messages(40))
    path = tmp_path / "t.json"
    path.write_bytes(data)
    whole = parse_transcript(data, "t.json", max_bytes=1 << 20)
    opened = open_transcript(path, "t.json", max_bytes=1 << 20)
    assert isinstance(opened, TranscriptFile), "read in pieces, not whole"
    assert (opened.title, opened.count, opened.artifacts) == (whole.title, len(whole.events), whole.artifacts)
    assert tuple(opened.events()) == whole.events


def test_the_first_message_comes_after_one_piece(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transcripts, "READ_CHUNK", 64 * 1024)
    path = tmp_path / "t.json"
    path.write_bytes(FORMS["array"](transcript_messages(4_000)))
    assert path.stat().st_size > 8 * transcripts.READ_CHUNK
    with path.open("rb") as stream:
        items = transcripts._stream_items(stream, 1 << 30)
        next(items)
        assert stream.tell() <= transcripts.READ_CHUNK  # one piece read, not the file
        assert sum(1 for _ in items) == 12_000 - 1


@pytest.mark.parametrize(
    "text",
    [
        '[{"role": "user", "content": "a"}, ]',
        '[{"role": "user", "content": "a"}] trailing',
        "[]",
        '\u00a0[{"role": "user", "content": "a"}]',
        '[{"role": "user", "content": NaN}]',
        '{"role": "user", "content": "a"}\n{"role": "robot"}\n',
        '[{"role": "tool", "tool_call_id": "x", "content": "a"}]',
        "[" * 150 + "]" * 150,
        "   \n  ",
    ],
)
def test_a_doubtful_file_gets_the_whole_file_verdict(tmp_path: Path, text: str) -> None:
    path = tmp_path / "t.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TranscriptError) as whole:
        parse_transcript(text.encode(), "t.json", max_bytes=1 << 20)
    with pytest.raises(TranscriptError) as opened:
        open_transcript(path, "t.json", max_bytes=1 << 20)
    assert str(opened.value) == str(whole.value)


def test_a_file_over_the_limit_is_refused_as_before(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(FORMS["jsonl"](transcript_messages(50)))
    with pytest.raises(TranscriptError, match="larger than"):
        open_transcript(path, "t.json", max_bytes=1_000)

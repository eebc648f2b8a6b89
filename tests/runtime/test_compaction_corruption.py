"""Tests that a damaged stored checkpoint is detected on read, then rebuilt or dropped (SPEC P-2,
P-3, C-6, C-7), and that a rewind voids earlier checkpoints without deleting events (H-4, P-6).

The database is damaged with sqlite3 directly, as a disk or another program would: a changed byte,
a wrong id, a wrong digest, a missing segment, a deleted row, version 2. Events are immutable by
trigger; to simulate a damaged event the trigger is dropped and re-created around the one UPDATE.
Every read is a fresh Runtime on the file, so nothing is remembered from before the damage.
The last test is a failure the compaction benchmark found (a long import on a small window).
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from foya_tui.cli import main
from foya_tui.runtime.context.compiler import ContextCompiler
from foya_tui.runtime.context.request import RequestView
from foya_tui.runtime.digests import digest_of
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.view.checkpoint import Checkpoint
from foya_tui.settings import Settings
from tests.conftest import FIXED_NOW, make_paths
from tests.runtime.compaction_child import more_steps, transcript

COMPLETED = "compaction_completed"


@dataclass(frozen=True)
class Base:
    """A session with two checkpoints: A, then B (previous id A, several segments)."""

    folder: Path
    workdir: Path
    session_id: str
    a: Checkpoint
    b: Checkpoint
    rows: Mapping[str, tuple[int, str]]
    """The intact rows: id → (completion event seq, body)."""
    projection: tuple[Mapping[str, Any], ...]
    """The messages the model sees with B current."""
    message_seqs: tuple[int, ...]
    """Seqs of the session's user messages (rewind targets)."""


def open_runtime(folder: Path, workdir: Path) -> Runtime:
    return Runtime(Settings(retry_backoff=0.0), make_paths(folder), workdir=workdir, clock=lambda: FIXED_NOW)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Base:
    folder = tmp_path_factory.mktemp("corruption-base")
    workdir = folder / "project"
    workdir.mkdir()
    (workdir / "README.md").write_text("# Demo project\n\nA fixture.\n", encoding="utf-8")
    with open_runtime(folder, workdir) as runtime:
        session_id = runtime.import_transcript(transcript(8), "corrupt.json").id
        first = runtime.compact(session_id)
        runtime.parts.store.append(session_id, more_steps(0, 4))
        second = runtime.compact(session_id)
        assert first.checkpoint is not None and second.checkpoint is not None, (first, second)
        a, b = first.checkpoint, second.checkpoint
        assert b.previous_id == a.id and len(b.segments) >= 2
        view = runtime.context(session_id)
        assert view.checkpoint_id == b.id and not view.notices
        assert runtime.verify(session_id).ok
        users = tuple(
            event.seq
            for event in runtime.parts.store.events(session_id)
            if event.payload.get("role") == "user"
        )
    assert not (folder / "foya.sqlite3-wal").exists()  # closed cleanly: one file to copy
    with contextlib.closing(sqlite3.connect(folder / "foya.sqlite3")) as connection:
        rows = {
            row_id: (seq, body)
            for row_id, seq, body in connection.execute("SELECT id, event_seq, body FROM checkpoint")
        }
    return Base(folder, workdir, session_id, a, b, rows, tuple(view.messages), users)


@pytest.fixture
def database(base: Base, tmp_path: Path) -> Path:
    """A copy of the base database for one test (make_paths(tmp_path) opens it)."""
    copy = tmp_path / "foya.sqlite3"
    shutil.copy(base.folder / "foya.sqlite3", copy)
    return copy


@contextlib.contextmanager
def fresh(database: Path, base: Base) -> Iterator[Runtime]:
    with open_runtime(database.parent, base.workdir) as runtime:
        yield runtime


# -- reading and damaging the file directly -------------------------------------------------------


def events(database: Path) -> list[tuple[int, str, str, str]]:
    with contextlib.closing(sqlite3.connect(database)) as connection:
        return connection.execute("SELECT seq, kind, payload, created_at FROM event ORDER BY seq").fetchall()


def rows(database: Path) -> dict[str, tuple[int, str]]:
    with contextlib.closing(sqlite3.connect(database)) as connection:
        found = connection.execute("SELECT id, event_seq, body FROM checkpoint").fetchall()
    return {row_id: (seq, body) for row_id, seq, body in found}


def execute(database: Path, sql: str, *params: Any) -> None:
    with contextlib.closing(sqlite3.connect(database)) as connection, connection:
        connection.execute(sql, params)


def damage_event(database: Path, seq: int, change: Callable[[str], str]) -> None:
    """Change one stored event as disk corruption would: past the immutability trigger, which is
    dropped and re-created inside one transaction (no other connection ever sees it missing)."""
    with contextlib.closing(sqlite3.connect(database, isolation_level=None)) as connection:
        (trigger,) = connection.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'event_no_update'"
        ).fetchone()
        (payload,) = connection.execute("SELECT payload FROM event WHERE seq = ?", (seq,)).fetchone()
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("DROP TRIGGER event_no_update")
        connection.execute("UPDATE event SET payload = ? WHERE seq = ?", (change(payload), seq))
        connection.execute(trigger)
        connection.execute("COMMIT")
        with pytest.raises(sqlite3.DatabaseError, match="immutable"):
            connection.execute("UPDATE event SET payload = payload WHERE seq = ?", (seq,))


def edit(change: Callable[[dict[str, Any]], object], *, forge: bool = False) -> Callable[[str], str]:
    """A damage to a checkpoint's JSON; with `forge`, the id is recomputed to match (so only the
    rule under test can catch it, not the id check of C-6)."""

    def apply(text: str) -> str:
        value = json.loads(text)
        change(value)
        if forge:
            value["id"] = digest_of({key: item for key, item in value.items() if key != "id"})
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    return apply


def in_event(change: Callable[[str], str]) -> Callable[[str], str]:
    """The same damage applied to the checkpoint inside a completion event's payload."""

    def apply(payload: str) -> str:
        value = json.loads(payload)
        value["checkpoint"] = json.loads(change(json.dumps(value["checkpoint"])))
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    return apply


def one_byte(old: str, new: str) -> Callable[[str], str]:
    assert len(old.encode()) == len(new.encode()) and sum(x != y for x, y in zip(old, new, strict=True)) == 1

    def apply(text: str) -> str:
        assert old in text
        return text.replace(old, new, 1)

    return apply


def foya(database: Path, *argv: str) -> tuple[int, str]:
    """The `foya` command line on this database (the same entry point, in this process)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(["--db", str(database), *argv])
    return code, out.getvalue()


def all_history(runtime: Runtime, session_id: str) -> list[Mapping[str, Any]]:
    """What the model sees with no checkpoint: every valid message (a compiler without a reader)."""
    compiler = ContextCompiler(
        runtime.parts.store,
        runtime.settings,
        workdir=runtime.workdir,
        clock=lambda: FIXED_NOW,
        config_dir=runtime.paths.config_dir,
        registry=runtime.parts.registry,
    )
    return list(compiler.compile(session_id, runtime.route_for()).messages)


def damage_notices(view: RequestView, checkpoint_id: str) -> list[str]:
    return [notice for notice in view.notices if checkpoint_id[:12] in notice]


# -- a damaged row, its event intact: detected, rebuilt, the same checkpoint used -------------------

ROW_DAMAGES: dict[str, tuple[Callable[[str], str], str]] = {
    "one changed byte in a summary": (one_byte("## Progress", "## Progresz"), "does not match its content"),
    "one changed byte in the JSON": (one_byte('{"', '["'), "not valid JSON"),
    "torn write (half the body)": (lambda body: body[: len(body) // 2], "not valid JSON"),
    "empty body": (lambda body: "", "not valid JSON"),
    "wrong id": (edit(lambda c: c.update(id="0" * 64)), "does not match its content"),
    "wrong source digest": (edit(lambda c: c.update(source_digest="0" * 64)), "does not match its content"),
    "wrong source digest, id forged": (
        edit(lambda c: c.update(source_digest="0" * 64), forge=True),
        "source digest",
    ),
    "first segment missing": (edit(lambda c: c["segments"].pop(0)), "segment 1 carries index 2"),
    "last segment missing, id forged": (
        edit(lambda c: c["segments"].pop(), forge=True),
        "does not end at the checkpoint's through seq",
    ),
    "version 2 (C-7: no migration)": (edit(lambda c: c.update(version=2)), "format version 2 is not 3"),
    "version 2, id forged": (edit(lambda c: c.update(version=2), forge=True), "format version 2 is not 3"),
    "no version": (edit(lambda c: c.pop("version"), forge=True), "format version None"),
    "no id": (edit(lambda c: c.pop("id")), "field 'id'"),
    "no model": (edit(lambda c: c.pop("model"), forge=True), "field 'model'"),
    "no created time": (edit(lambda c: c.pop("created_at"), forge=True), "field 'created_at'"),
    "no projection kind": (edit(lambda c: c.pop("projection_kind"), forge=True), "unknown projection kind"),
    "first segment starts after the first event, id forged (P-2)": (
        edit(lambda c: c["segments"][0].update(from_seq=c["segments"][0]["from_seq"] + 1), forge=True),
        "its first segment starts at seq 2, not at the first valid event (1)",
    ),
    "segments continuity broken, id forged": (
        edit(lambda c: c["segments"][1].update(from_seq=c["segments"][1]["from_seq"] + 1), forge=True),
        "segments must be continuous",
    ),
}


@pytest.mark.parametrize("damage", list(ROW_DAMAGES))
def test_a_damaged_row_is_detected_then_rebuilt_from_its_event_and_the_same_checkpoint_used(
    base: Base, database: Path, damage: str
) -> None:
    change, problem = ROW_DAMAGES[damage]
    b = base.b.id
    _, body = base.rows[b]
    execute(database, "UPDATE checkpoint SET body = ? WHERE id = ?", change(body), b)
    damaged = rows(database)
    history = events(database)

    # Reports detect it and change nothing (P-2): inspect, verify, `foya verify`.
    with fresh(database, base) as runtime:
        report = runtime.inspect(base.session_id)
        assert report.current_id == b
        assert any(b[:12] in notice and problem in notice for notice in report.notices), report.notices
        verified = runtime.verify(base.session_id)
        assert not verified.ok
        assert any(b[:12] in line and problem in line for line in verified.problems), verified.problems
    code, output = foya(database, "verify", base.session_id)
    assert code == 1 and b[:12] in output and problem in output
    assert rows(database) == damaged

    # The model's next request: the notice, the row rebuilt from its event (P-3), the same projection.
    with fresh(database, base) as runtime:
        view = runtime.context(base.session_id)
        assert view.checkpoint_id == b
        (notice,) = damage_notices(view, b)
        assert problem in notice and "rebuilt from its completion event" in notice
        assert tuple(view.messages) == base.projection
    assert rows(database) == base.rows  # byte-identical: the event holds the same serialised checkpoint
    assert events(database) == history  # recovery never writes an event

    with fresh(database, base) as runtime:
        assert runtime.verify(base.session_id).ok
        assert runtime.context(base.session_id).notices == ()
    assert foya(database, "verify", base.session_id)[0] == 0


def test_a_deleted_row_is_detected_then_rebuilt(base: Base, database: Path) -> None:
    b = base.b.id
    execute(database, "DELETE FROM checkpoint WHERE id = ?", b)
    code, output = foya(database, "verify", base.session_id)
    assert code == 1 and b[:12] in output and "its row is missing" in output
    with fresh(database, base) as runtime:
        view = runtime.context(base.session_id)
        assert view.checkpoint_id == b and tuple(view.messages) == base.projection
        (notice,) = damage_notices(view, b)
        assert "its row is missing" in notice and "rebuilt" in notice
    assert rows(database) == base.rows
    assert foya(database, "verify", base.session_id)[0] == 0


def test_a_row_naming_the_wrong_completion_event_or_checkpoint_is_rebuilt(base: Base, database: Path) -> None:
    a, b = base.a.id, base.b.id
    execute(database, "UPDATE checkpoint SET event_seq = ? WHERE id = ?", base.rows[a][0], b)
    with fresh(database, base) as runtime:
        view = runtime.context(base.session_id)
        assert view.checkpoint_id == b
        assert "names completion event" in damage_notices(view, b)[0]
    assert rows(database) == base.rows
    # A valid checkpoint, but another one (A's body under B's id): never used in B's place.
    execute(database, "UPDATE checkpoint SET body = ? WHERE id = ?", base.rows[a][1], b)
    with fresh(database, base) as runtime:
        view = runtime.context(base.session_id)
        assert view.checkpoint_id == b and tuple(view.messages) == base.projection
        assert "holds another checkpoint" in damage_notices(view, b)[0]
    assert rows(database) == base.rows
    assert foya(database, "verify", base.session_id)[0] == 0


def test_the_cli_sees_the_damage_in_a_new_process(base: Base, database: Path) -> None:
    """The same detection and rebuild through `python -m foya_tui` processes (nothing in memory)."""
    import subprocess
    import sys

    b = base.b.id
    execute(database, "UPDATE checkpoint SET body = ? WHERE id = ?", base.rows[b][1][:-1], b)

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "foya_tui", "--db", str(database), *argv],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=base.workdir,
        )

    verify = run("verify", base.session_id)
    assert verify.returncode == 1 and b[:12] in verify.stdout
    context = run("context", base.session_id, "--json")
    assert context.returncode == 0, context.stderr
    report = json.loads(context.stdout)
    assert report["checkpoint_id"] == b
    assert any(b[:12] in notice and "rebuilt" in notice for notice in report["notices"])
    assert run("verify", base.session_id).returncode == 0
    assert rows(database) == base.rows


def test_after_an_undo_the_restored_checkpoint_is_rebuilt_when_damaged(base: Base, database: Path) -> None:
    a, b = base.a.id, base.b.id
    with fresh(database, base) as runtime:
        assert runtime.undo_compaction(base.session_id) == (b, a)
    execute(database, "UPDATE checkpoint SET body = ? WHERE id = ?", "{}", a)
    with fresh(database, base) as runtime:
        view = runtime.context(base.session_id)
        assert view.checkpoint_id == a
        assert "rebuilt" in damage_notices(view, a)[0]
        assert runtime.verify(base.session_id).ok
    assert rows(database) == base.rows


# -- a row under a wrong id, a stray row, a superseded checkpoint's row -------------------------------

ORPHAN = "f" * 64


def test_a_row_stored_under_a_wrong_id_is_detected_then_rebuilt_under_its_own(
    base: Base, database: Path
) -> None:
    b = base.b.id
    execute(database, "UPDATE checkpoint SET id = ? WHERE id = ?", ORPHAN, b)
    code, output = foya(database, "verify", base.session_id)
    assert code == 1 and f"checkpoint row {ORPHAN[:12]} has no completion event" in output
    assert f"checkpoint {b[:12]}" in output
    with fresh(database, base) as runtime:
        view = runtime.context(base.session_id)
        assert view.checkpoint_id == b and tuple(view.messages) == base.projection
        assert "rebuilt" in damage_notices(view, b)[0]
    assert rows(database) == base.rows  # rebuilt under B's id, the misfiled copy gone
    assert foya(database, "verify", base.session_id)[0] == 0


def test_a_stray_row_that_no_completion_event_names_is_reported_then_dropped(
    base: Base, database: Path
) -> None:
    execute(
        database,
        "INSERT INTO checkpoint (session_id, id, event_seq, body) VALUES (?, ?, ?, ?)",
        base.session_id,
        ORPHAN,
        9_999,
        base.rows[base.b.id][1],
    )
    code, output = foya(database, "verify", base.session_id)
    assert code == 1 and f"checkpoint row {ORPHAN[:12]} has no completion event" in output
    with fresh(database, base) as runtime:
        view = runtime.context(base.session_id)
        assert view.checkpoint_id == base.b.id and tuple(view.messages) == base.projection


def test_a_stray_row_is_dropped_by_the_next_read(base: Base, database: Path) -> None:
    execute(
        database,
        "INSERT INTO checkpoint (session_id, id, event_seq, body) VALUES (?, ?, ?, ?)",
        base.session_id,
        ORPHAN,
        9_999,
        base.rows[base.b.id][1],
    )
    with fresh(database, base) as runtime:
        runtime.context(base.session_id)
    assert rows(database) == base.rows
    assert foya(database, "verify", base.session_id)[0] == 0


def test_a_damaged_row_of_a_superseded_checkpoint_is_reported_then_rebuilt(
    base: Base, database: Path
) -> None:
    a, b = base.a.id, base.b.id
    execute(database, "UPDATE checkpoint SET body = ? WHERE id = ?", base.rows[a][1][:-1], a)
    code, output = foya(database, "verify", base.session_id)
    assert code == 1 and a[:12] in output
    with fresh(database, base) as runtime:
        view = runtime.context(base.session_id)
        assert view.checkpoint_id == b and tuple(view.messages) == base.projection
        assert "rebuilt" in damage_notices(view, a)[0]  # not silent, though A is not the one in use
    assert rows(database) == base.rows
    assert foya(database, "verify", base.session_id)[0] == 0


# -- row and event both damaged: dropped, the previous valid checkpoint (or none) used --------------

# The damaged event still names the same checkpoint id (a forged id would name another checkpoint).
BOTH_DAMAGES: dict[str, Callable[[str], str]] = {
    "one changed byte in a summary": one_byte("## Progress", "## Progresz"),
    "version 2": edit(lambda c: c.update(version=2)),
    "first segment missing": edit(lambda c: c["segments"].pop(0)),
    "wrong source digest": edit(lambda c: c.update(source_digest="0" * 64)),
}


@pytest.mark.parametrize("damage", list(BOTH_DAMAGES))
def test_when_row_and_event_are_damaged_the_checkpoint_is_dropped_and_the_previous_one_used(
    base: Base, database: Path, tmp_path: Path, damage: str
) -> None:
    change = BOTH_DAMAGES[damage]
    a, b = base.a.id, base.b.id
    seq, body = base.rows[b]
    execute(database, "UPDATE checkpoint SET body = ? WHERE id = ?", change(body), b)
    damage_event(database, seq, in_event(change))
    history = events(database)
    # What the model sees with A current: the same session after undoing B (a separate copy).
    undone = tmp_path / "undone"
    undone.mkdir()
    shutil.copy(base.folder / "foya.sqlite3", undone / "foya.sqlite3")
    with open_runtime(undone, base.workdir) as runtime:
        runtime.undo_compaction(base.session_id)
        with_a = list(runtime.context(base.session_id).messages)

    with fresh(database, base) as runtime:
        view = runtime.context(base.session_id)
        assert view.checkpoint_id == a
        assert list(view.messages) == with_a
        (notice,) = damage_notices(view, b)
        assert "is invalid" in notice and "its fast projection was deleted" in notice
    assert b not in rows(database)  # the invalid projection is deleted (P-3) …
    assert rows(database)[a] == base.rows[a]
    assert events(database) == history  # … and canonical history kept, damaged event included (H-2)

    code, output = foya(database, "verify", base.session_id)
    assert code == 1 and f"checkpoint {b[:12]}" in output and "is invalid" in output
    with fresh(database, base) as runtime:
        assert runtime.inspect(base.session_id).current_id == a
        view = runtime.context(base.session_id)
        assert view.checkpoint_id == a and damage_notices(view, b)  # still shown, never silent


def test_a_row_that_differs_from_its_completion_event_is_not_used(
    base: Base, database: Path, tmp_path: Path
) -> None:
    """P-2: the fast row is compared with the checkpoint its completion event committed. The event
    is damaged (one byte of a summary, its id left as it was) while the row is intact: the row no
    longer stands for what was committed, the event no longer validates, so B is dropped and A
    serves; `foya verify` names both."""
    a, b = base.a.id, base.b.id
    seq, _ = base.rows[b]
    damage_event(database, seq, in_event(one_byte("## Progress", "## Progresz")))
    history = events(database)
    code, output = foya(database, "verify", base.session_id)
    assert code == 1 and f"checkpoint {b[:12]}" in output
    assert "its row differs from the checkpoint in its completion event" in output
    assert rows(database)[b] == base.rows[b]  # verify changes nothing
    with fresh(database, base) as runtime:
        view = runtime.context(base.session_id)
        assert view.checkpoint_id == a
        (notice,) = damage_notices(view, b)
        assert "is invalid" in notice and "its row differs from the checkpoint" in notice
    assert b not in rows(database) and events(database) == history


def test_a_checkpoint_that_starts_after_the_first_event_is_invalid_in_its_event_too(
    base: Base, database: Path
) -> None:
    """P-2: a gap before the first segment (events neither shown nor summarised), forged into the
    completion event with a matching id and no row to compare: the checkpoint is invalid."""
    a, b = base.a.id, base.b.id
    seq, _ = base.rows[b]
    shift = edit(lambda c: c["segments"][0].update(from_seq=3), forge=True)
    damage_event(database, seq, in_event(shift))
    forged = json.loads(events(database)[seq - 1][2])["checkpoint"]["id"]
    execute(database, "DELETE FROM checkpoint WHERE id = ?", b)
    code, output = foya(database, "verify", base.session_id)
    assert code == 1 and f"checkpoint {forged[:12]}" in output
    assert "its first segment starts at seq 3, not at the first valid event (1)" in output
    with fresh(database, base) as runtime:
        assert runtime.context(base.session_id).checkpoint_id == a


def test_with_every_checkpoint_damaged_the_model_sees_all_valid_history(base: Base, database: Path) -> None:
    change = one_byte("## Progress", "## Progresz")
    for checkpoint in (base.a, base.b):
        seq, body = base.rows[checkpoint.id]
        execute(database, "UPDATE checkpoint SET body = ? WHERE id = ?", change(body), checkpoint.id)
        damage_event(database, seq, in_event(change))

    with fresh(database, base) as runtime:
        view = runtime.context(base.session_id)
        assert view.checkpoint_id is None and view.checkpoint is None
        assert list(view.messages) == all_history(runtime, base.session_id)
        assert len(view.messages) > len(base.projection)
        assert damage_notices(view, base.a.id) and damage_notices(view, base.b.id)
    assert rows(database) == {}
    code, output = foya(database, "verify", base.session_id)
    assert code == 1 and base.a.id[:12] in output and base.b.id[:12] in output


def test_an_unreadable_completion_event_is_reported_and_never_used(base: Base, database: Path) -> None:
    a, b = base.a.id, base.b.id
    seq, body = base.rows[b]
    execute(database, "UPDATE checkpoint SET body = ? WHERE id = ?", body[:-1], b)
    damage_event(database, seq, lambda payload: payload[: len(payload) // 2])  # not JSON any more
    with fresh(database, base) as runtime:
        assert runtime.context(base.session_id).checkpoint_id == a
    assert b not in rows(database)  # the read dropped the row copied from the unreadable event
    code, output = foya(database, "verify", base.session_id)
    assert code == 1 and f"event {seq}" in output  # the event itself stays damaged: reported


def test_an_unreadable_completion_event_drops_its_checkpoint_with_a_notice(
    base: Base, database: Path
) -> None:
    b = base.b.id
    seq, body = base.rows[b]
    execute(database, "UPDATE checkpoint SET body = ? WHERE id = ?", body[:-1], b)
    damage_event(database, seq, lambda payload: payload[: len(payload) // 2])
    with fresh(database, base) as runtime:
        view = runtime.context(base.session_id)
        assert any(f"event {seq}" in notice or b[:12] in notice for notice in view.notices), view.notices
    assert b not in rows(database)


# -- rewind: earlier checkpoints stop counting, events are never deleted ----------------------------


def test_a_rewind_before_a_checkpoints_through_seq_voids_it_without_a_verify_problem(
    base: Base, database: Path
) -> None:
    to_seq = next(seq for seq in base.message_seqs if seq > 20) - 1  # the end of an early turn
    assert to_seq < base.a.through_seq < base.b.through_seq
    history = events(database)

    code, output = foya(database, "rewind", base.session_id, str(to_seq))
    assert code == 0, output

    after = events(database)
    assert after[: len(history)] == history  # nothing deleted or changed
    (rewind,) = after[len(history) :]
    assert rewind[1] == "rewind" and json.loads(rewind[2]) == {"to_seq": to_seq}
    assert rows(database) == base.rows  # the fast projections stay too; they are simply not used
    with fresh(database, base) as runtime:
        view = runtime.context(base.session_id)
        assert view.checkpoint_id is None and not view.notices
        assert list(view.messages) == all_history(runtime, base.session_id)
        assert len(view.messages) < len(base.projection) + to_seq
        report = runtime.inspect(base.session_id)
        assert report.current_id is None
        assert {record.id: record.usable for record in report.records} == {base.a.id: False, base.b.id: False}
        assert runtime.verify(base.session_id).ok
    assert foya(database, "verify", base.session_id)[0] == 0


def test_a_checkpoint_made_before_a_rewind_is_not_used_even_when_its_events_stay_valid(
    base: Base, database: Path
) -> None:
    """P-6: only checkpoints created after the rewind event are considered."""
    to_seq = base.b.through_seq  # the whole covered prefix stays valid; only later events are cut
    with fresh(database, base) as runtime:
        runtime.rewind(base.session_id, to_seq)
    with fresh(database, base) as runtime:
        view = runtime.context(base.session_id)
        assert view.checkpoint_id is None
        assert runtime.verify(base.session_id).ok
        # A new compaction after the rewind is used, with no lineage across the rewind.
        result = runtime.compact(base.session_id)
        assert result.checkpoint is not None, result
        assert result.checkpoint.previous_id is None
    with fresh(database, base) as runtime:
        assert runtime.context(base.session_id).checkpoint_id == result.checkpoint.id
        assert runtime.verify(base.session_id).ok
    assert len(events(database)) > len(base.message_seqs)  # every event still there


def test_a_damaged_row_of_a_checkpoint_voided_by_a_rewind_is_not_a_problem(
    base: Base, database: Path
) -> None:
    with fresh(database, base) as runtime:
        runtime.rewind(base.session_id, base.message_seqs[1] - 1)
    execute(database, "UPDATE checkpoint SET body = ? WHERE id = ?", "not json", base.b.id)
    with fresh(database, base) as runtime:
        assert runtime.context(base.session_id).checkpoint_id is None
        assert runtime.verify(base.session_id).ok


# -- found by tests/bench/bench_compaction.py ------------------------------------------------------


def test_a_long_import_can_be_compacted_on_a_small_window(tmp_path: Path, workdir: Path) -> None:
    from tests.bench.bench_compaction import transcript as long_transcript

    with open_runtime(tmp_path, workdir) as runtime:
        session_id = runtime.import_transcript(
            json.dumps(long_transcript(1_200, seed=23)).encode(), "long.json"
        ).id
        result = runtime.compact(session_id)
        assert result.checkpoint is not None, result.reason
        assert runtime.context(session_id).checkpoint_id == result.checkpoint.id

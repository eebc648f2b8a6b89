"""Hardening, part A, items 2 and 4: the search index is derived data (a damaged index never blocks
a write; `foya verify` finds it and `--repair` rebuilds it), and every database fault is one line
on stderr with exit 1 or 2, never a traceback (real subprocesses of `python -m foya_tui`, real
SQLite files damaged the way disks and people damage them)."""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.runtime.cli_process import Completed, run_foya


def assert_one_line(result: Completed, code: int) -> None:
    assert result.code == code, (result.code, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("foya: "), result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A database with one simulator session (two turns), made once and copied per case."""
    home = tmp_path_factory.mktemp("seed")
    assert run_foya(home, "run", "hello needle").code == 0
    session = json.loads(run_foya(home, "sessions", "--json").stdout)["sessions"][0]["id"]
    assert run_foya(home, "run", "--session", session, "second needle").code == 0
    return home / "foya.sqlite3", session


def copy_db(seeded: tuple[Path, str], tmp_path: Path, *damage: str) -> Path:
    """A consistent copy (the backup API folds the WAL in), with SQL damage applied to it."""
    target = tmp_path / "copy.sqlite3"
    source = sqlite3.connect(seeded[0])
    copy = sqlite3.connect(target)
    source.backup(copy)
    source.close()
    for statement in damage:
        copy.execute(statement)
    copy.commit()
    copy.close()
    return target


def events_of(db: Path, session: str) -> int:
    raw = sqlite3.connect(db)
    try:
        return raw.execute("SELECT COUNT(*) FROM event WHERE session_id = ?", (session,)).fetchone()[0]
    finally:
        raw.close()  # a connection left open would keep the tiny tmpfs busy at umount


def kinds_after(db: Path, session: str, seq: int) -> list[str]:
    raw = sqlite3.connect(db)
    try:
        rows = raw.execute(
            "SELECT kind FROM event WHERE session_id = ? AND seq > ? ORDER BY seq", (session, seq)
        ).fetchall()
    finally:
        raw.close()
    return [row[0] for row in rows]


FTS_DAMAGE = {
    "random index blocks": "UPDATE event_fts_data SET block = randomblob(length(block))",
    "dropped index table": "DROP TABLE event_fts_idx",
    "dropped content table": "DROP TABLE event_fts_content",
    "emptied config": "DELETE FROM event_fts_config",
}


@pytest.mark.parametrize("damage", FTS_DAMAGE.values(), ids=FTS_DAMAGE.keys())
def test_a_damaged_index_never_blocks_a_write_and_repair_rebuilds_it(
    seeded: tuple[Path, str], tmp_path: Path, damage: str
) -> None:
    db = copy_db(seeded, tmp_path, damage)
    session = seeded[1]
    before = events_of(db, session)
    run = run_foya(tmp_path, "--db", str(db), "run", "--session", session, "third needle")
    assert run.code == 0, run.stderr
    stored = kinds_after(db, session, before)  # the message and its reply are stored
    assert stored[0] == "user_message" and "assistant_message" in stored

    searched = run_foya(tmp_path, "--db", str(db), "search", session, "needle")
    assert_one_line(searched, 1)
    assert "search index" in searched.stderr and "--repair" in searched.stderr

    verified = run_foya(tmp_path, "--db", str(db), "verify", session)
    assert verified.code == 1 and "search index" in verified.stdout

    repaired = run_foya(tmp_path, "--db", str(db), "verify", "--repair", session)
    assert repaired.code == 0, repaired.stdout + repaired.stderr
    assert "repaired: rebuilt the search index" in repaired.stdout
    assert repaired.stdout.rstrip().endswith("no problems")

    found = run_foya(tmp_path, "--db", str(db), "search", session, "needle", "--json")
    assert found.code == 0
    users = [hit for hit in json.loads(found.stdout)["hits"] if hit["role"] == "user"]
    assert len(users) == 3  # all three user messages, the new one too


def test_verify_reports_damage_of_index_rows_without_a_failed_write(
    seeded: tuple[Path, str], tmp_path: Path
) -> None:
    """Damage nobody wrote over yet: verify's own checks find it (rows against history)."""
    db = copy_db(seeded, tmp_path, "DELETE FROM event_fts WHERE rowid = (SELECT MIN(rowid) FROM event_fts)")
    verified = run_foya(tmp_path, "--db", str(db), "verify", seeded[1])
    assert verified.code == 1 and "1 event(s) of history missing" in verified.stdout


def test_verify_finds_and_repair_recreates_missing_triggers(seeded: tuple[Path, str], tmp_path: Path) -> None:
    db = copy_db(seeded, tmp_path, "DROP TRIGGER event_no_update", "DROP TRIGGER event_no_delete")
    verified = run_foya(tmp_path, "--db", str(db), "verify", seeded[1])
    assert verified.code == 1
    assert "trigger event_no_update is missing" in verified.stdout
    assert "trigger event_no_delete is missing" in verified.stdout
    repaired = run_foya(tmp_path, "--db", str(db), "verify", "--repair", seeded[1])
    assert repaired.code == 0 and "repaired: recreated trigger event_no_delete" in repaired.stdout
    raw = sqlite3.connect(db)
    try:
        with pytest.raises(sqlite3.IntegrityError, match="immutable"):
            raw.execute("DELETE FROM event")
    finally:
        raw.close()


def test_last_seq_out_of_step_is_one_line_then_repaired(seeded: tuple[Path, str], tmp_path: Path) -> None:
    db = copy_db(seeded, tmp_path, "UPDATE session SET last_seq = last_seq - 2")
    session = seeded[1]
    before = events_of(db, session)
    run = run_foya(tmp_path, "--db", str(db), "run", "--session", session, "collide")
    assert_one_line(run, 1)
    assert "last_seq" in run.stderr and "--repair" in run.stderr
    assert events_of(db, session) == before  # nothing half-written
    verified = run_foya(tmp_path, "--db", str(db), "verify", session)
    assert verified.code == 1 and "the next write would collide" in verified.stdout
    repaired = run_foya(tmp_path, "--db", str(db), "verify", "--repair", session)
    assert repaired.code == 0 and "moved last_seq up" in repaired.stdout
    assert run_foya(tmp_path, "--db", str(db), "run", "--session", session, "works").code == 0


def test_damaged_pages_are_one_line(seeded: tuple[Path, str], tmp_path: Path) -> None:
    """Random bytes over pages of a copy (not the first: the header decides 'not a database')."""
    db = copy_db(seeded, tmp_path)
    raw = sqlite3.connect(db)
    try:
        page_size, pages = (
            raw.execute("PRAGMA page_size").fetchone()[0],
            raw.execute("PRAGMA page_count").fetchone()[0],
        )
    finally:
        raw.close()
    generator = random.Random(7)
    with db.open("r+b") as handle:
        for page in range(1, pages):
            handle.seek(page * page_size)
            handle.write(generator.randbytes(page_size))
    for argv in (
        ("sessions",),
        ("run", "--session", seeded[1], "x"),
        ("export", seeded[1]),
        ("verify", seeded[1]),
    ):
        assert_one_line(run_foya(tmp_path, "--db", str(db), *argv), 1)


def test_a_file_that_is_not_a_database_is_one_line(tmp_path: Path) -> None:
    db = tmp_path / "junk.sqlite3"
    db.write_bytes(os.urandom(8192))
    assert_one_line(run_foya(tmp_path, "--db", str(db), "sessions"), 2)


def test_disk_full_is_one_line_and_keeps_the_old_state(seeded: tuple[Path, str], tmp_path: Path) -> None:
    mount = tmp_path / "tiny"
    mount.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tiny tmpfs to fill: {mounted.stderr.strip() or 'mount refused'}")
    try:
        db = mount / "foya.sqlite3"
        shutil.copy(copy_db(seeded, tmp_path), db)
        session = seeded[1]
        before = events_of(db, session)
        transcript = tmp_path / "big.jsonl"
        line = json.dumps({"role": "user", "content": "x" * 20_000})
        transcript.write_text("\n".join([line] * 400), encoding="utf-8")  # 8 MB: more than the disk
        imported = run_foya(tmp_path, "--db", str(db), "import", str(transcript))
        assert imported.code == 1 and "disk is full" in imported.stderr, imported.stderr
        assert "Traceback" not in imported.stderr
        assert events_of(db, session) == before
        listed = run_foya(tmp_path, "--db", str(db), "sessions", "--json")
        assert [s["id"] for s in json.loads(listed.stdout)["sessions"]] == [session]  # no half import
    finally:
        if subprocess.run(["umount", str(mount)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], check=False)


def test_non_utf8_prompt_is_refused_and_stores_nothing(tmp_path: Path) -> None:
    result = run_foya(tmp_path, "run", b"\xff")
    assert_one_line(result, 2)
    assert "not valid UTF-8" in result.stderr and "0xff" in result.stderr
    listed = run_foya(tmp_path, "sessions", "--json")
    assert json.loads(listed.stdout)["sessions"] == []


def test_non_utf8_session_id_is_a_sentence(tmp_path: Path) -> None:
    result = run_foya(tmp_path, "export", b"ab\xfe")
    assert_one_line(result, 2)
    assert "argument 2 is not valid UTF-8" in result.stderr


def test_non_utf8_prompt_on_stdin_is_refused(tmp_path: Path) -> None:
    result = run_foya(tmp_path, "run", "-", stdin=b"caf\xe9")
    assert_one_line(result, 2)
    assert "stdin is not valid UTF-8" in result.stderr

"""Hardening, part A, item 3: locking. Read-only commands never take the write lock (they work while
another process holds it, and on a read-only mount); a large import commits in bounded batches,
stays invisible until complete, and lets a concurrent `foya run` through; one writer per session
(real subprocesses, real SQLite files, real `flock`s)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.runtime.cli_process import foya_command, foya_env, run_foya
from tests.runtime.test_store_faults import assert_one_line

DEADLINE_SECONDS = 120


def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Poll state until it holds (bounded): tests wait on state, never on a fixed sleep."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def scalar(db: Path, sql: str, *params: object) -> int:
    raw = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        return int(raw.execute(sql, params).fetchone()[0] or 0)
    finally:
        raw.close()


@pytest.fixture
def session_home(tmp_path: Path) -> tuple[Path, str]:
    home = tmp_path / "home"
    assert run_foya(home, "run", "hello locks").code == 0
    session = json.loads(run_foya(home, "sessions", "--json").stdout)["sessions"][0]["id"]
    return home, session


READ_ONLY = (("sessions",), ("export", "{s}"), ("search", "{s}", "locks"), ("inspect", "{s}"),
             ("context", "{s}"), ("verify", "{s}"))  # fmt: skip


def test_read_only_commands_run_while_another_process_holds_the_write_lock(
    session_home: tuple[Path, str],
) -> None:
    home, session = session_home
    holder = sqlite3.connect(home / "foya.sqlite3", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the write lock, held for the whole loop
    try:
        for argv in READ_ONLY:
            result = run_foya(home, *(part.format(s=session) for part in argv))
            assert result.code == 0, (argv, result.stderr)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.fixture
def read_only_copy(session_home: tuple[Path, str], tmp_path: Path) -> Iterator[Path]:
    """The database in a directory nobody can write: a read-only bind mount as root (root
    ignores mode bits), else a chmod'ed directory."""
    home, _ = session_home
    source = tmp_path / "ro-source"
    source.mkdir()
    raw, copy = sqlite3.connect(home / "foya.sqlite3"), sqlite3.connect(source / "foya.sqlite3")
    raw.backup(copy)
    raw.close()
    copy.close()
    if os.geteuid() != 0:
        source.chmod(0o555)
        yield source
        source.chmod(0o755)
        return
    target = tmp_path / "ro"
    target.mkdir()
    bound = subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True, text=True)
    if bound.returncode != 0:
        pytest.skip(f"cannot bind-mount read-only: {bound.stderr.strip()}")
    try:
        remounted = subprocess.run(["mount", "-o", "remount,ro,bind", str(target)], capture_output=True)
        if remounted.returncode != 0:
            pytest.skip("cannot remount read-only")
        yield target
    finally:
        subprocess.run(["umount", str(target)], check=False)


def test_read_only_commands_work_on_a_read_only_directory(
    session_home: tuple[Path, str], read_only_copy: Path, tmp_path: Path
) -> None:
    _, session = session_home
    db = str(read_only_copy / "foya.sqlite3")
    for argv in READ_ONLY:
        result = run_foya(tmp_path, "--db", db, *(part.format(s=session) for part in argv))
        assert result.code == 0, (argv, result.stderr)
    assert "hello locks" in run_foya(tmp_path, "--db", db, "export", session).stdout
    assert_one_line(run_foya(tmp_path, "--db", db, "run", "--session", session, "x"), 2)


def _hold_lease(home: Path, session: str) -> subprocess.Popen[str]:
    """Another process holding the session's lease until it is killed."""
    code = (
        "import sys; from pathlib import Path; from foya_tui.runtime.store.lease import claim_session\n"
        "lease = claim_session(Path(sys.argv[1]), sys.argv[2]); print('held', flush=True); sys.stdin.read()"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(home / "foya.sqlite3"), session],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=foya_env(home),
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    return child


def test_a_second_writer_on_a_busy_session_is_refused_then_a_dead_holder_is_taken_over(
    session_home: tuple[Path, str],
) -> None:
    home, session = session_home
    db = home / "foya.sqlite3"
    before = scalar(db, "SELECT COUNT(*) FROM event WHERE session_id = ?", session)
    holder = _hold_lease(home, session)
    try:
        busy = run_foya(home, "run", "--session", session, "interleave?")
        assert_one_line(busy, 1)
        assert f"session {session[:6]} is busy in another Foya (pid {holder.pid})" in busy.stderr
        assert scalar(db, "SELECT COUNT(*) FROM event WHERE session_id = ?", session) == before
        for argv in (("rewind", session, "1"), ("compact", session, "--fallback")):
            assert_one_line(run_foya(home, *argv), 1)
        # Another session is not affected by this one's lease.
        assert run_foya(home, "run", "a different session").code == 0
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # The holder died without releasing anything: its lease is taken over.
    after = run_foya(home, "run", "--session", session, "now mine")
    assert after.code == 0, after.stderr
    assert scalar(db, "SELECT COUNT(*) FROM event WHERE session_id = ?", session) > before


def write_transcript(path: Path, messages: int) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for index in range(messages):
            role = "user" if index % 2 == 0 else "assistant"
            handle.write(json.dumps({"role": role, "content": f"message {index} of the big import"}) + "\n")


def test_a_killed_import_leaves_no_visible_session(tmp_path: Path) -> None:
    home = tmp_path / "home"
    transcript = tmp_path / "big.jsonl"
    write_transcript(transcript, 60_000)
    assert run_foya(home, "sessions").code == 0  # the database exists
    db = home / "foya.sqlite3"
    child = subprocess.Popen(
        foya_command("import", str(transcript)), env=foya_env(home), cwd=home,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        wait_for(lambda: scalar(db, "SELECT COUNT(*) FROM event") > 0, "the first batch to commit")
        # Mid-import (at least one batch in, not all): nothing is visible yet.
        assert json.loads(run_foya(home, "sessions", "--json").stdout)["sessions"] == [] or (
            child.poll() is not None
        )
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    committed = scalar(db, "SELECT COUNT(*) FROM event")
    if committed < 60_000:  # killed part-way, as intended: no half-imported session in view
        assert json.loads(run_foya(home, "sessions", "--json").stdout)["sessions"] == []
        assert scalar(db, "SELECT COUNT(*) FROM session WHERE complete = 0") == 1


def test_an_import_commits_in_batches_with_progress_and_a_concurrent_run_gets_through(tmp_path: Path) -> None:
    home = tmp_path / "home"
    transcript = tmp_path / "big.jsonl"
    write_transcript(transcript, 40_000)
    assert run_foya(home, "sessions").code == 0
    db = home / "foya.sqlite3"
    child = subprocess.Popen(
        foya_command("import", str(transcript)), env=foya_env(home), cwd=home,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    wait_for(lambda: scalar(db, "SELECT COUNT(*) FROM event") > 0 or child.poll() is not None, "the import")
    concurrent = run_foya(home, "run", "while importing")
    _, err = child.communicate(timeout=DEADLINE_SECONDS)
    assert concurrent.code == 0, concurrent.stderr
    assert child.returncode == 0, err
    assert "foya: importing: 40,000 of 40,000 messages" in err.decode()
    listed = json.loads(run_foya(home, "sessions", "--json").stdout)["sessions"]
    assert sorted(s["events"] for s in listed)[-1] == 40_000
    assert any(s["title"] == "while importing" for s in listed)

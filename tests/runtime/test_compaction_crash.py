"""Tests that a compaction killed at any moment leaves the old or the new checkpoint, never half of
one, and that `foya verify` passes afterwards (SPEC H-5, P-1, P-3, C-14).

A child process (`compaction_child.py`) runs the real Runtime on a real SQLite file with the
offline simulator and is SIGKILLed: (a) at every named stage of the commit transaction, of the
summary request and of a recovery that rebuilds or deletes a row; (b) at seeded random moments,
many times. After each kill a fresh Runtime in this process and `foya verify` read what is on disk.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import select
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from foya_tui.cli import main
from foya_tui.runtime.model import EventKind
from foya_tui.runtime.runtime import Runtime
from foya_tui.settings import Settings
from tests.conftest import FIXED_NOW, make_paths
from tests.runtime.compaction_child import more_steps, transcript

CHILD = Path(__file__).with_name("compaction_child.py")
RANDOM_RUNS = 36
SEED = 20261129
COMMIT_STAGES = (
    "summarise",
    "summarised",
    "validating",
    "commit_begin",
    "checked",
    "events_appended",
    "row_inserted",
    "fingerprints_cleared",
    "committed",
)
REBUILD_STAGES = ("rebuild_begin", "rebuild_inserted", "rebuild_committed")
DROP_STAGES = ("drop_begin", "drop_deleted", "drop_committed")
STRAY = "f" * 64
FINGERPRINT = "an-earlier-deterministic-failure"


# -- the child server ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChildEnd:
    killed: bool
    exit: int | None
    report: dict[str, Any] | None
    """`foya compact --json`'s object of a child that ran to its end."""


class ChildServer:
    """`compaction_child.py serve`: warm once, then one forked child per compaction (milliseconds)."""

    def __init__(self, home: Path) -> None:
        self._process = subprocess.Popen(
            [sys.executable, str(CHILD), "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "FOYA_HOME": str(home)},
        )
        assert self._read(timeout=120) == {"ready": True}

    def _send(self, line: str) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write(line + "\n")
        self._process.stdin.flush()

    def _read(self, timeout: float = 60) -> dict[str, Any]:
        assert self._process.stdout is not None
        ready, _, _ = select.select([self._process.stdout], [], [], timeout)
        line = self._process.stdout.readline() if ready else ""
        if not line:
            self.close()
            raise AssertionError("the compaction child server stopped answering")
        return json.loads(line)

    def run(
        self,
        database: Path,
        session_id: str,
        workdir: Path,
        stage: str = "none",
        kill_after: float | None = None,
    ) -> ChildEnd:
        """Run one compaction in a forked child; with `kill_after`, SIGKILL it from here that many
        seconds after it started (if it is still running)."""
        result = database.with_suffix(".result.json")
        result.unlink(missing_ok=True)
        command = {
            "db": str(database),
            "session": session_id,
            "stage": stage,
            "workdir": str(workdir),
            "result": str(result),
        }
        self._send(json.dumps(command))
        pid = self._read()["pid"]
        if kill_after is not None:
            time.sleep(kill_after)
            os.kill(pid, signal.SIGKILL)  # still ours: the server reaps it only after "reap"
        self._send("reap")
        status = self._read()
        assert status["pid"] == pid
        killed = status["signal"] == signal.SIGKILL
        finished = status["exit"] == 0 and result.exists()
        report = json.loads(result.read_text(encoding="utf-8")) if finished else None
        return ChildEnd(killed, status["exit"], report)

    def close(self) -> None:
        if self._process.poll() is None:
            with contextlib.suppress(BrokenPipeError):
                assert self._process.stdin is not None
                self._process.stdin.close()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()


# -- sessions with real content --------------------------------------------------------------------


def open_runtime(database: Path, workdir: Path) -> Runtime:
    return Runtime(
        Settings(retry_backoff=0.0), make_paths(database.parent), workdir=workdir, clock=lambda: FIXED_NOW
    )


@dataclass(frozen=True)
class Base:
    """A database to copy before each kill, and what it holds."""

    database: Path
    session_id: str
    old_id: str | None
    """The current checkpoint before the child runs (None: the session has none)."""
    damaged: dict[str, str]
    """Checkpoint rows damaged on purpose (id → the damaged body): the next read rebuilds them."""
    stray: dict[str, str]
    """Rows no completion event names (id → body): the next read deletes them (P-3)."""


@dataclass(frozen=True)
class Bases:
    fresh: Base
    """No checkpoint yet; one failure fingerprint (a commit clears it: C-14)."""
    second: Base
    """A checkpoint A, then more work steps: the child commits B (previous id A)."""
    damaged: Base
    """`second` with A's row damaged: the child's first read rebuilds it (P-3)."""
    stray: Base
    """`second` plus a row no completion event names: the child's first read deletes it (P-3)."""
    workdir: Path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChildServer]:
    child = ChildServer(tmp_path_factory.mktemp("child-home"))
    yield child
    child.close()


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory, server: ChildServer) -> Bases:
    folder = tmp_path_factory.mktemp("bases")
    workdir = folder / "project"
    workdir.mkdir()
    (workdir / "README.md").write_text("# Demo project\n\nA fixture.\n", encoding="utf-8")

    fresh = folder / "fresh" / "foya.sqlite3"
    fresh.parent.mkdir()
    with open_runtime(fresh, workdir) as runtime:
        session_id = runtime.import_transcript(transcript(14), "crash.json").id
        runtime.parts.compaction_store.add_fingerprint(session_id, FINGERPRINT, "an earlier failure", 16)

    second = folder / "second" / "foya.sqlite3"
    second.parent.mkdir()
    shutil.copy(fresh, second)
    first = server.run(second, session_id, workdir)
    assert first.report is not None and first.report["outcome"] == "accepted", first
    with open_runtime(second, workdir) as runtime:
        runtime.parts.store.append(session_id, more_steps(0, 6))
        runtime.parts.compaction_store.add_fingerprint(session_id, FINGERPRINT, "an earlier failure", 16)
        assert runtime.verify(session_id).ok
    old_id = first.report["checkpoint_id"]

    damaged = folder / "damaged" / "foya.sqlite3"
    damaged.parent.mkdir()
    shutil.copy(second, damaged)
    with contextlib.closing(sqlite3.connect(damaged)) as connection, connection:
        (body,) = connection.execute("SELECT body FROM checkpoint WHERE id = ?", (old_id,)).fetchone()
        broken = body.replace("## Goal", "## Gaol", 1)  # one byte
        assert broken != body
        connection.execute("UPDATE checkpoint SET body = ? WHERE id = ?", (broken, old_id))

    stray = folder / "stray" / "foya.sqlite3"
    stray.parent.mkdir()
    shutil.copy(second, stray)
    with contextlib.closing(sqlite3.connect(stray)) as connection, connection:
        connection.execute(
            "INSERT INTO checkpoint (session_id, id, event_seq, body) VALUES (?, ?, ?, ?)",
            (session_id, STRAY, 9_999, body),
        )
    for database in (fresh, second, damaged, stray):
        assert not database.with_name("foya.sqlite3-wal").exists()  # closed cleanly: one file to copy
    return Bases(
        fresh=Base(fresh, session_id, None, {}, {}),
        second=Base(second, session_id, old_id, {}, {}),
        damaged=Base(damaged, session_id, old_id, {old_id: broken}, {}),
        stray=Base(stray, session_id, old_id, {}, {STRAY: body}),
        workdir=workdir,
    )


# -- what is on disk after a kill ------------------------------------------------------------------


@dataclass(frozen=True)
class Stored:
    events: list[tuple[int, str, str, str]]
    """(seq, kind, payload, created_at) exactly as stored."""
    rows: dict[str, tuple[int, str]]
    fingerprints: list[str]
    last_seq: int


def stored(database: Path, session_id: str) -> Stored:
    with contextlib.closing(sqlite3.connect(database)) as connection:
        events = connection.execute(
            "SELECT seq, kind, payload, created_at FROM event WHERE session_id = ? ORDER BY seq",
            (session_id,),
        ).fetchall()
        rows = connection.execute(
            "SELECT id, event_seq, body FROM checkpoint WHERE session_id = ?", (session_id,)
        ).fetchall()
        fingerprints = connection.execute(
            "SELECT fingerprint FROM compaction_fingerprint WHERE session_id = ? ORDER BY fingerprint",
            (session_id,),
        ).fetchall()
        (last_seq,) = connection.execute(
            "SELECT last_seq FROM session WHERE id = ?", (session_id,)
        ).fetchone()
    return Stored(
        events=events,
        rows={row_id: (seq, body) for row_id, seq, body in rows},
        fingerprints=[fingerprint for (fingerprint,) in fingerprints],
        last_seq=last_seq,
    )


def foya_verify(database: Path, session_id: str, *, subprocess_run: bool) -> tuple[int, str]:
    """`foya --db DB verify SESSION`: a real process, or the same entry point in this one (faster)."""
    if subprocess_run:
        done = subprocess.run(
            [sys.executable, "-m", "foya_tui", "--db", str(database), "verify", session_id],
            capture_output=True,
            text=True,
            timeout=60,
        )
        return done.returncode, done.stdout + done.stderr
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(["--db", str(database), "verify", session_id])
    return code, out.getvalue()


def copy_base(base: Base, folder: Path) -> Path:
    folder.mkdir(parents=True)
    database = folder / "foya.sqlite3"
    shutil.copy(base.database, database)
    return database


def check_old_or_new(
    database: Path, base: Base, before: Stored, workdir: Path, *, cli_subprocess: bool
) -> str:
    """Assert the session reads the old or a new valid checkpoint and nothing half-written exists;
    returns "old" or "new"."""
    after = stored(database, base.session_id)
    # Canonical history: every earlier event byte-identical (H-2), nothing removed.
    assert after.events[: len(before.events)] == before.events
    added = after.events[len(before.events) :]
    kinds = [kind for _, kind, _, _ in added]
    assert kinds in ([], [str(EventKind.COMPACTION_COMPLETED), str(EventKind.COMPACTION_DIAGNOSTIC)]), kinds
    assert after.last_seq == after.events[-1][0]  # the session row moved with its events, or not at all

    completions = {
        payload["checkpoint"]["id"]: (seq, payload["checkpoint"])
        for seq, kind, text, _ in after.events
        if kind == EventKind.COMPACTION_COMPLETED and (payload := json.loads(text))
    }
    # Damage we made (not the crash) that a recovery killed before its commit left in place:
    # id → what the next read does with it.
    still_damaged: dict[str, str] = {}
    for checkpoint_id, (seq, body) in after.rows.items():
        if base.damaged.get(checkpoint_id) == body:
            still_damaged[checkpoint_id] = "rebuilt"
        elif base.stray.get(checkpoint_id) == body:
            still_damaged[checkpoint_id] = "deleted"
        else:
            # Every other row is an exact copy of its completion event (P-1), never a partial one.
            assert checkpoint_id in completions, f"row {checkpoint_id[:12]} has no completion event"
            assert (seq, json.loads(body)) == completions[checkpoint_id]
    kept = set(after.rows) - set(base.stray)  # a stray row may be gone: that deletion committed
    if not added:
        outcome, expected_id = "old", base.old_id
        assert kept == set(before.rows) - set(base.stray)
        assert after.fingerprints == before.fingerprints
    else:
        outcome = "new"
        completion = json.loads(added[0][2])["checkpoint"]
        expected_id = completion["id"]
        assert completion["previous_id"] == base.old_id
        assert kept == set(before.rows) - set(base.stray) | {expected_id}
        assert json.loads(added[1][2])["checkpoint_id"] == expected_id
        assert after.fingerprints == []  # cleared in the same transaction (C-14)

    # `foya verify` in a fresh process, before anything reads (and repairs) the session.
    code, output = foya_verify(database, base.session_id, subprocess_run=cli_subprocess)
    if still_damaged:
        assert code == 1 and all(key[:12] in output for key in still_damaged), output
    else:
        assert code == 0, output

    with open_runtime(database, workdir) as runtime:
        state = runtime.parts.compiler.checkpoint_state(base.session_id)
        assert state is not None
        assert (state.current.id if state.current is not None else None) == expected_id
        if state.current is not None:
            assert json.loads(state.current.serialised()) == completions[state.current.id][1]
        if still_damaged:
            # Each repair is said once, naming the row: never silent (P-3).
            assert len(state.notices) == len(still_damaged), state.notices
            for key, action in still_damaged.items():
                assert any(key[:12] in notice and action in notice for notice in state.notices), state.notices
        else:
            assert state.notices == ()
        view = runtime.context(base.session_id)
        assert view.checkpoint_id == expected_id
        assert runtime.inspect(base.session_id).current_id == expected_id
        report = runtime.verify(base.session_id)
        assert report.ok, report.lines()
    if still_damaged:
        code, output = foya_verify(database, base.session_id, subprocess_run=cli_subprocess)
        assert code == 0, output
    healed = stored(database, base.session_id).rows
    assert not set(healed) & set(base.stray)
    assert all((seq, json.loads(body)) == completions[key] for key, (seq, body) in healed.items())
    return outcome


def check_usable_again(server: ChildServer, database: Path, base: Base, workdir: Path, outcome: str) -> None:
    """After a crash the session compacts normally: no stale lock, fingerprint or half state."""
    end = server.run(database, base.session_id, workdir)
    assert end.report is not None, end
    assert end.report["outcome"] == ("accepted" if outcome == "old" else "nothing_to_compact"), end.report
    with open_runtime(database, workdir) as runtime:
        report = runtime.verify(base.session_id)
        assert report.ok, report.lines()


# -- (a) deterministic stages ----------------------------------------------------------------------


@pytest.mark.parametrize("which", ["fresh", "second"])
@pytest.mark.parametrize("stage", COMMIT_STAGES)
def test_a_kill_at_each_commit_stage_leaves_the_old_or_the_new_checkpoint(
    server: ChildServer, bases: Bases, tmp_path: Path, stage: str, which: str
) -> None:
    base: Base = getattr(bases, which)
    database = copy_base(base, tmp_path / "run")
    before = stored(database, base.session_id)

    end = server.run(database, base.session_id, bases.workdir, stage)

    assert end.killed, f"the child never reached stage {stage!r}: {end}"
    outcome = check_old_or_new(database, base, before, bases.workdir, cli_subprocess=which == "second")
    # Everything before COMMIT is rolled back by SQLite; after it, the whole checkpoint is there.
    assert outcome == ("new" if stage == "committed" else "old")
    check_usable_again(server, database, base, bases.workdir, outcome)


@pytest.mark.parametrize("stage", REBUILD_STAGES)
def test_a_kill_while_recovery_rebuilds_a_damaged_row_leaves_it_damaged_or_rebuilt(
    server: ChildServer, bases: Bases, tmp_path: Path, stage: str
) -> None:
    base = bases.damaged
    database = copy_base(base, tmp_path / "run")
    before = stored(database, base.session_id)
    assert base.old_id is not None

    end = server.run(database, base.session_id, bases.workdir, stage)

    assert end.killed, f"the child never reached stage {stage!r}: {end}"
    (_, body) = stored(database, base.session_id).rows[base.old_id]
    assert (body == base.damaged[base.old_id]) is (stage != "rebuild_committed")
    assert check_old_or_new(database, base, before, bases.workdir, cli_subprocess=True) == "old"
    check_usable_again(server, database, base, bases.workdir, "old")


@pytest.mark.parametrize("stage", DROP_STAGES)
def test_a_kill_while_recovery_deletes_a_stray_row_leaves_it_there_or_gone(
    server: ChildServer, bases: Bases, tmp_path: Path, stage: str
) -> None:
    base = bases.stray
    database = copy_base(base, tmp_path / "run")
    before = stored(database, base.session_id)

    end = server.run(database, base.session_id, bases.workdir, stage)

    assert end.killed, f"the child never reached stage {stage!r}: {end}"
    assert (STRAY in stored(database, base.session_id).rows) is (stage != "drop_committed")
    assert check_old_or_new(database, base, before, bases.workdir, cli_subprocess=True) == "old"
    check_usable_again(server, database, base, bases.workdir, "old")


def test_the_child_without_a_kill_commits_a_valid_checkpoint(
    server: ChildServer, bases: Bases, tmp_path: Path
) -> None:
    """The control run: the same child, no hook fires, and the checks see the new checkpoint."""
    for base in (bases.fresh, bases.second, bases.damaged, bases.stray):
        database = copy_base(base, tmp_path / base.database.parent.name)
        before = stored(database, base.session_id)
        end = server.run(database, base.session_id, bases.workdir)
        assert not end.killed and end.exit == 0 and end.report is not None
        assert end.report["outcome"] == "accepted"
        assert check_old_or_new(database, base, before, bases.workdir, cli_subprocess=False) == "new"


# -- (b) random moments ----------------------------------------------------------------------------


def test_kills_at_random_moments_always_leave_a_consistent_session(
    server: ChildServer, bases: Bases, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    # How long one compaction takes here, so the kills spread over the whole of it.
    durations = []
    for attempt in range(3):
        database = copy_base(bases.second, tmp_path / f"calibrate-{attempt}")
        started = time.perf_counter()
        assert server.run(database, bases.second.session_id, bases.workdir).report is not None
        durations.append(time.perf_counter() - started)
    window = statistics.median(durations) * 1.15
    outcomes: dict[str, int] = {"old": 0, "new": 0}
    choices = (bases.fresh, bases.second, bases.damaged, bases.stray)
    for run in range(RANDOM_RUNS):
        base = choices[run % len(choices)]
        database = copy_base(base, tmp_path / f"run-{run}")
        before = stored(database, base.session_id)
        # Half the kills anywhere, half late, where the commit and SQLite's own COMMIT run.
        delay = rng.uniform(0, window) if run % 2 else rng.uniform(0.75 * window, window)
        end = server.run(database, base.session_id, bases.workdir, kill_after=delay)
        outcome = check_old_or_new(database, base, before, bases.workdir, cli_subprocess=False)
        if not end.killed:
            assert outcome == "new" and end.report is not None and end.report["outcome"] == "accepted"
        outcomes[outcome] += 1
    # The kills landed both before and after the commit (the window was covered).
    assert outcomes["old"] > 0 and outcomes["new"] > 0, outcomes

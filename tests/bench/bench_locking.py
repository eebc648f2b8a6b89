"""Provides a benchmark of how long a concurrent writer waits while a large import runs.

Run: `python tests/bench/bench_locking.py [--events N] [--probes N]`.

A `foya import` of N messages (default 100,000) runs as a real subprocess. While it runs:
- a probe connection with Foya's pragmas (5 s busy timeout) repeatedly takes the write lock
  (`BEGIN IMMEDIATE`, what every Foya append does first) and records how long each one waited;
- one real `foya run` subprocess starts after the first batch committed; the time from its start
  to its first commit (its user message appearing) is measured, and compared with the same
  `foya run` on an idle database (the difference is the wait).
The same is done for the old behaviour, the whole import in one transaction (batch size = N),
run through the store API in a subprocess, to show what the batches change.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from foya_tui.runtime.store.events import IMPORT_BATCH_EVENTS

IMPORTER = """
import sys
from pathlib import Path

from foya_tui.runtime.store.events import IMPORT_BATCH_EVENTS
from foya_tui.runtime.store import EventStore, open_database
from foya_tui.runtime.transcripts import parse_transcript
database = open_database(Path(sys.argv[1]))
transcript = parse_transcript(Path(sys.argv[2]).read_bytes(), "bench")
EventStore(database).create_session_in_batches(
    title=transcript.title, events=transcript.events, batch_events=int(sys.argv[3])
)
"""


def write_transcript(path: Path, messages: int) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for index in range(messages):
            role = "user" if index % 2 == 0 else "assistant"
            text = f"message {index}: a line of an imported conversation of ordinary length, with words"
            handle.write(json.dumps({"role": role, "content": text}) + "\n")


def env(home: Path) -> dict[str, str]:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("FOYA_")}
    return {**clean, "FOYA_HOME": str(home)}


def events(db: Path) -> int:
    raw = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        return int(raw.execute("SELECT COUNT(*) FROM event").fetchone()[0])
    finally:
        raw.close()


def user_message_seen(db: Path, text: str) -> bool:
    raw = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        row = raw.execute(
            "SELECT 1 FROM event WHERE kind = 'user_message' AND payload LIKE ?", (f"%{text}%",)
        ).fetchone()
    finally:
        raw.close()
    return row is not None


def run_and_time_first_commit(home: Path, db: Path, prompt: str) -> tuple[float, int]:
    """Seconds from starting `foya run` to its user message being committed; and its exit code."""
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "foya_tui", "run", prompt],
        env=env(home), cwd=home, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    seen = None
    while child.poll() is None or seen is None:
        if seen is None and user_message_seen(db, prompt):
            seen = time.perf_counter() - start
        if child.poll() is not None and seen is None:
            seen = float("nan") if not user_message_seen(db, prompt) else time.perf_counter() - start
        time.sleep(0.005)
    return seen, child.returncode


def probe_waits(db: Path, importer: subprocess.Popen[bytes], limit: int) -> tuple[list[float], int]:
    waits, failures = [], 0
    while importer.poll() is None and len(waits) < limit:
        raw = sqlite3.connect(db, timeout=5.0, isolation_level=None)
        start = time.perf_counter()
        try:
            raw.execute("BEGIN IMMEDIATE")
            waits.append(time.perf_counter() - start)
            raw.execute("ROLLBACK")
        except sqlite3.OperationalError:
            failures += 1  # `database is locked` after the 5 s busy timeout
        finally:
            raw.close()
        time.sleep(0.05)
    return waits, failures


def measure(mode: str, batch: int, messages: int, probes: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="foya-bench-locking-") as folder:
        home = Path(folder)
        db = home / "foya.sqlite3"
        transcript = home / "big.jsonl"
        write_transcript(transcript, messages)
        subprocess.run(
            [sys.executable, "-m", "foya_tui", "sessions"], env=env(home), check=True, capture_output=True
        )
        idle, _ = run_and_time_first_commit(home, db, "idle baseline")
        baseline = events(db)
        if mode == "cli":
            command = [sys.executable, "-m", "foya_tui", "import", str(transcript)]
        else:
            command = [sys.executable, "-c", IMPORTER, str(db), str(transcript), str(batch)]
        started = time.perf_counter()
        importer = subprocess.Popen(
            command, env=env(home), cwd=home, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        finished: list[float] = []
        watcher = threading.Thread(
            target=lambda: (importer.wait(), finished.append(time.perf_counter() - started)), daemon=True
        )
        watcher.start()
        # The import parses the file first; the lock question starts with its first write (in one
        # transaction nothing is visible until the end, so then it starts with the write lock).
        while importer.poll() is None and events(db) <= baseline and not _write_locked(db):
            time.sleep(0.005)
        first_write = time.perf_counter() - started
        probe_result: list[tuple[list[float], int]] = []
        prober = threading.Thread(
            target=lambda: probe_result.append(probe_waits(db, importer, probes)), daemon=True
        )
        prober.start()
        busy, code = run_and_time_first_commit(home, db, "during the import")
        prober.join()
        watcher.join()
        waits, failures = probe_result[0]
        return {
            "mode": mode,
            "batch": batch,
            "messages": messages,
            "import_first_write_s": round(first_write, 2),
            "import_seconds": round(finished[0], 2),
            "run_first_commit_idle_s": round(idle, 3),
            "run_first_commit_during_import_s": round(busy, 3),
            "run_first_commit_extra_wait_s": round(busy - idle, 3),
            "run_exit": code,
            "probe_count": len(waits),
            "probe_lock_wait_median_ms": round(statistics.median(waits) * 1000, 1) if waits else None,
            "probe_lock_wait_p95_ms": round(sorted(waits)[int(len(waits) * 0.95)] * 1000, 1)
            if waits
            else None,
            "probe_lock_wait_max_ms": round(max(waits) * 1000, 1) if waits else None,
            "probe_locked_out_after_5s": failures,
        }


def _write_locked(db: Path) -> bool:
    raw = sqlite3.connect(db, timeout=0, isolation_level=None)
    try:
        raw.execute("BEGIN IMMEDIATE")
        raw.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError:
        return True
    finally:
        raw.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--probes", type=int, default=200)
    args = parser.parse_args()
    print(json.dumps(measure("cli", IMPORT_BATCH_EVENTS, args.events, args.probes)))
    print(json.dumps(measure("one-transaction", args.events, args.events, args.probes)))


if __name__ == "__main__":
    main()

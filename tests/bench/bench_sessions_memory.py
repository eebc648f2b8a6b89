"""Provides a benchmark of the compiler's memory over many opened sessions: RSS after opening
(compiling) nine 20,000-event sessions, with the per-session index bound at 9 (every index kept,
as before) and at 4 (the default), side by side in one run.

Run: `python tests/bench/bench_sessions_memory.py [--sessions 9] [--events 20000] [--bounds 9,4]`.
The sessions are written once; each bound is measured in a fresh child process, so one bound's
memory never counts against another's. RSS is read from /proc (Linux).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `tests` and `foya_tui` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from foya_tui.runtime.context.compiler import ContextCompiler
from foya_tui.runtime.providers.routes import make_route
from foya_tui.runtime.store import EventStore, open_database
from foya_tui.settings import Settings
from tests.bench.bench_compiler import realistic_events

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
ROUTE = make_route("foya-sim/large", "default")


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def build(database: Path, sessions: int, events: int) -> None:
    store = EventStore(open_database(database))
    batch = realistic_events(events, ROUTE.id)
    for _ in range(sessions):
        session = store.create_session()
        for start in range(0, len(batch), 5_000):
            store.append(session.id, batch[start : start + 5_000])


def child(database: Path, bound: int) -> None:
    """Open every session of `database` (one compile each) and print RSS before and after."""
    store = EventStore(open_database(database))
    ids = [info.id for info in store.list_sessions()]
    compiler = ContextCompiler(
        store, Settings(), workdir=database.parent, clock=lambda: NOW, max_sessions=bound
    )
    compiler.preview(ROUTE)  # tokenizer and prompt sources loaded before the first figure
    before = rss_mb()
    for session_id in ids:
        compiler.compile(session_id, ROUTE)
    print(f"{before:.1f} {rss_mb():.1f} {len(compiler.indexed_sessions)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=9)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--bounds", default="9,4")
    parser.add_argument("--child", nargs=2, metavar=("DATABASE", "BOUND"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), int(args.child[1]))
        return
    with tempfile.TemporaryDirectory() as tmp:
        database = Path(tmp) / "sessions.sqlite3"
        build(database, args.sessions, args.events)
        print(f"{args.sessions} sessions of {args.events:,} events; RSS in MB")
        print(f"{'bound':>6} {'indexes kept':>13} {'before':>8} {'after':>8} {'growth':>8}")
        for bound in (int(value) for value in args.bounds.split(",")):
            done = subprocess.run(
                [sys.executable, __file__, "--child", str(database), str(bound)],
                capture_output=True,
                text=True,
                check=True,
            )
            before, after, kept = done.stdout.split()
            growth = float(after) - float(before)
            print(f"{bound:>6} {kept:>13} {float(before):>8.1f} {float(after):>8.1f} {growth:>8.1f}")


if __name__ == "__main__":
    main()

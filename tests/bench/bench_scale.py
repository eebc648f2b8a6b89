"""Provides a benchmark of what a fresh process pays at scale: `foya context` at 1k / 10k / 100k
events before and after a checkpoint, and the checkpoint bookkeeping that grows with history
(source digest, re-validation on the next read), with ratios measured side by side in one run.

Run: `python tests/bench/bench_scale.py [--sizes 1000,10000,100000] [--rounds 3]`.

Each size is one imported transcript (tests/bench/bench_compaction.py's generator: requests, tool
groups with code, shell and search output, replies; distinct texts), written without the search
index (not what this measures). "after" is the same session with a text checkpoint committed over
everything before the last user message, so the model sees a handful of messages. Rounds
alternate the sizes (A B C A B C …), so machine noise hits every size alike; each cell is the
median of the rounds: wall time, CPU (user + system) and peak RSS of the `foya context` process.
The in-process part times `source_digest` over the covered prefix and a new `CheckpointReader`'s
`state()` (what the next process pays to trust the checkpoint), alternating sizes too.
Targets (issue 17): after compaction 100k/1k ≤ 1.5×; before ≤ 2× once token counts are stored.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from foya_tui.paths import FoyaPaths
from foya_tui.runtime.model import EventKind, NewEvent
from foya_tui.runtime.providers.routes import route_for
from foya_tui.runtime.providers.summary_format import SECTION_HEADINGS
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.store import CompactionStore, EventStore, open_database
from foya_tui.runtime.transcripts import parse_transcript
from foya_tui.runtime.view.checkpoint import Checkpoint, Phase, ProjectionKind, Segment
from foya_tui.runtime.view.recovery import CheckpointReader
from foya_tui.settings import Settings
from tests.bench.bench_compaction import transcript

SUMMARY = "\n\n".join(f"{heading}\nThe work so far, in a few lines." for heading in SECTION_HEADINGS)
MODEL = "foya-sim/large"


@dataclass(frozen=True)
class Built:
    size: int
    events: int
    database: Path
    session_id: str
    through_seq: int


def build(size: int, folder: Path, *, checkpoint: bool) -> Built:
    """A database holding one imported session of about `size` events (and, with `checkpoint`, a
    committed text checkpoint over all but the last request)."""
    path = folder / f"{size}-{'after' if checkpoint else 'before'}.sqlite3"
    data = json.dumps(transcript(size)).encode()
    parsed = parse_transcript(data, "bench.json")
    database = open_database(path)
    try:
        store = EventStore(database, search_index=False)
        session = store.create_session(title="bench", events=parsed.events)
        events = store.events(session.id)
        last_user = max(event.seq for event in events if event.payload.get("role") == "user")
        through = last_user - 1
        if checkpoint:
            compaction = CompactionStore(database, store)
            route = route_for(Settings(model=MODEL), MODEL)
            candidate = Checkpoint(
                id="",
                previous_id=None,
                session_id=session.id,
                through_seq=through,
                source_digest=compaction.source_digest(session.id, through),
                head_anchor_seq=None,
                phase=Phase.PRE_TURN,
                projection_kind=ProjectionKind.TEXT,
                level=1,
                segments=(Segment(1, 1, through, 1, SUMMARY, 60),),
                route_id=route.id,
                model=MODEL,
                created_at=store.timestamp(),
                tokens_before=size * 100,
                tokens_after=200,
                covered_messages=through,
                producer="llm",
            ).with_id()
            completion = NewEvent(
                EventKind.COMPACTION_COMPLETED, {"checkpoint": candidate.to_payload(), "trigger": "manual"}
            )
            compaction.commit(session.id, candidate.id, candidate.serialised(), [completion], lambda: None)
        built = Built(size, store.last_seq(session.id), path, session.id, through)
    finally:
        database.close()
    # One compile by a process that can write, as `foya run` or the TUI would have made: it persists
    # the token counts it makes (schema 7), which the measured read-only processes then reuse.
    paths = FoyaPaths(folder, folder, path)
    with Runtime(Settings(model=MODEL), paths, workdir=folder) as runtime:
        runtime.context(built.session_id)
    return built


# The child reports its own peak RSS (VmHWM: this process image only). The rusage of a forked child
# starts from the parent's peak, which here holds the databases just built.
CHILD = """
import sys
from foya_tui.cli import main
code = main(sys.argv[1:])
peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(int(peak.split()[1]) // 1024, file=sys.stderr)
sys.exit(code)
"""


def run_context(built: Built, home: Path) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, peak RSS in MB) of one `foya context` in a fresh process."""
    env = {**os.environ, "FOYA_HOME": str(home), "FOYA_MODEL": MODEL}
    command = [sys.executable, "-c", CHILD, "--db", str(built.database), "context", built.session_id]
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    stderr = process.stderr.read().decode() if process.stderr else ""
    if process.stderr:
        process.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"foya context failed at {built.size}: {stderr}")
    return wall, usage.ru_utime + usage.ru_stime, int(stderr.split()[-1])


def bookkeeping(built: Built) -> tuple[float, float]:
    """(source digest over the covered prefix, a new reader's state()) in seconds, in this process."""
    database = open_database(built.database, read_only=True)
    try:
        store = EventStore(database, search_index=False)
        compaction = CompactionStore(database, store)
        started = time.perf_counter()
        compaction.source_digest(built.session_id, built.through_seq)
        digest = time.perf_counter() - started
        started = time.perf_counter()
        state = CheckpointReader(store, compaction).state(built.session_id, repair=False)
        reread = time.perf_counter() - started
        assert state.current is not None and not state.notices, state.notices
        return digest, reread
    finally:
        database.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        home = folder / "home"
        home.mkdir()
        started = time.perf_counter()
        cases = {
            (size, label): build(size, folder, checkpoint=label == "after")
            for size in sizes
            for label in ("before", "after")
        }
        print(f"built {len(cases)} databases in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        samples: dict[tuple[int, str], list[tuple[float, float, int]]] = {key: [] for key in cases}
        books: dict[int, list[tuple[float, float]]] = {size: [] for size in sizes}
        for _ in range(args.rounds):
            for size in sizes:  # A B C, then again: never one size after another
                for label in ("before", "after"):
                    samples[(size, label)].append(run_context(cases[(size, label)], home))
                books[size].append(bookkeeping(cases[(size, "after")]))
        print(f"`foya context` in a fresh process (median of {args.rounds}, sizes alternating)")
        print(f"{'events':>8} {'case':<7} {'wall s':>7} {'cpu s':>7} {'RSS MB':>7}")
        medians: dict[tuple[int, str], tuple[float, float, float]] = {}
        for (size, label), runs in samples.items():
            wall, cpu, rss = (statistics.median(column) for column in zip(*runs, strict=True))
            medians[(size, label)] = (wall, cpu, rss)
            print(f"{cases[(size, label)].events:>8,} {label:<7} {wall:>7.2f} {cpu:>7.2f} {rss:>7.0f}")
        smallest, largest = min(sizes), max(sizes)
        for label in ("before", "after"):
            big, small = medians[(largest, label)], medians[(smallest, label)]
            print(
                f"{largest // 1000}k/{smallest // 1000}k {label:<6} wall {big[0] / small[0]:.2f}x  "
                f"cpu {big[1] / small[1]:.2f}x  RSS {big[2] / small[2]:.2f}x"
            )
        print()
        print(f"checkpoint bookkeeping in one process (ms, median of {args.rounds})")
        print(f"{'events':>8} {'digest':>9} {'reread':>9}")
        book_medians = {}
        for size in sizes:
            digest, reread = (statistics.median(column) * 1000 for column in zip(*books[size], strict=True))
            book_medians[size] = (digest, reread)
            print(f"{cases[(size, 'after')].events:>8,} {digest:>9.2f} {reread:>9.2f}")
        big_book, small_book = book_medians[largest], book_medians[smallest]
        print(
            f"{largest // 1000}k/{smallest // 1000}k digest {big_book[0] / small_book[0]:.2f}x  "
            f"reread {big_book[1] / small_book[1]:.2f}x"
        )


if __name__ == "__main__":
    main()

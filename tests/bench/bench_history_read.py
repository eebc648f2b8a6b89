"""Provides a benchmark of `history_read_tool_result` over a 10 MB stored tool result (SPEC T-2).

Run: `python tests/bench/bench_history_read.py [--mb N] [--rounds R]`.
Times whole tool calls (store read + T-3 checks + the operation) and the operations alone, each
the median of R rounds, and compares `search` with the raw baseline a reader would write first:
`for line in content.lower().splitlines(): if query in line`. Numbers only, no assertions.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from foya_tui.runtime.digests import sha256_hex
from foya_tui.runtime.model import EventKind, NewEvent
from foya_tui.runtime.store import EventStore, open_database
from foya_tui.runtime.tools import ToolContext
from foya_tui.runtime.tools.history_read import HistoryReadTool, load_result, read, search

CALL_ID = "call_big"


def make_content(megabytes: float) -> str:
    """Log-like lines (~80 characters), one rare marker every 10,000 lines, a common word everywhere."""
    lines = []
    size = 0
    number = 0
    while size < megabytes * 1_000_000:
        number += 1
        marker = " FATAL checksum mismatch" if number % 10_000 == 0 else ""
        line = f"2026-11-29T12:00:{number % 60:02} INFO worker-{number % 16} processed batch {number}{marker}"
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines) + "\n"


def median_seconds(action: Callable[[], Any], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def baseline_search(content: str, query: str) -> list[tuple[int, str]]:
    needle = query.lower()
    return [(n, line) for n, line in enumerate(content.lower().splitlines(), 1) if needle in line]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    content = make_content(args.mb)
    with tempfile.TemporaryDirectory() as folder:
        database = open_database(Path(folder) / "bench.sqlite3")
        store = EventStore(database)
        session_id = store.create_session().id
        events = store.append(
            session_id,
            [
                NewEvent(EventKind.USER_MESSAGE, {"text": "build"}),
                NewEvent(
                    EventKind.ASSISTANT_MESSAGE,
                    {"text": "", "tool_calls": [{"id": CALL_ID, "name": "shell", "arguments": "{}"}]},
                ),
                NewEvent(
                    EventKind.TOOL_RESULT,
                    {"tool_call_id": CALL_ID, "name": "shell", "content": content, "is_error": False},
                ),
                NewEvent(EventKind.USER_MESSAGE, {"text": "and now?"}),
            ],
        )
        seq = events[2].seq
        context = ToolContext(workdir=Path(folder), session_id=session_id, store=store)
        tool = HistoryReadTool()
        digest = sha256_hex(content)

        def call(**arguments: Any) -> Any:
            result = tool.run({"seq": seq, "tool_call_id": CALL_ID, **arguments}, context)
            assert not result.is_error, result.content
            return result

        rounds = args.rounds
        lines = content.count("\n")
        print(f"stored result: {len(content):,} characters, {lines:,} lines; median of {rounds} rounds\n")

        rows: list[tuple[str, float]] = [
            (
                "load + verify (no sha256)",
                median_seconds(lambda: load_result(context, seq, CALL_ID, None), rounds),
            ),
            (
                "load + verify (sha256)",
                median_seconds(lambda: load_result(context, seq, CALL_ID, digest), rounds),
            ),
            (
                "call read (8,000 chars, mid)",
                median_seconds(lambda: call(op="read", offset=5_000_000), rounds),
            ),
            ("call search rare", median_seconds(lambda: call(op="search", query="fatal CHECKSUM"), rounds)),
            (
                "call search common (50 shown)",
                median_seconds(lambda: call(op="search", query="info"), rounds),
            ),
            ("call inspect (first: tokenizes)", median_seconds(lambda: call(op="inspect"), 1)),
            ("call inspect (token count cached)", median_seconds(lambda: call(op="inspect"), rounds)),
        ]
        for label, seconds in rows:
            print(f"{label:36} {seconds * 1000:9.2f} ms")

        print("\nsearch alone vs. raw baseline (lower().splitlines() + `in`):")
        for query in ("fatal CHECKSUM", "info", "no-such-text"):
            ours = median_seconds(lambda q=query: search(content, seq, q, 50), rounds)
            raw = median_seconds(lambda q=query: baseline_search(content, q), rounds)
            hits = len(baseline_search(content, query))
            print(
                f"  {query!r:18} {hits:>9,} lines  ours {ours * 1000:8.2f} ms  "
                f"baseline {raw * 1000:8.2f} ms  ratio {ours / raw:5.2f}"
            )
        page = median_seconds(lambda: read(content, seq, 5_000_000, 8_000), rounds)
        print(f"\nread alone (8,000 chars at offset 5,000,000): {page * 1e6:.1f} µs")
        database.close()


if __name__ == "__main__":
    main()

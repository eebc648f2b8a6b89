"""Provides a benchmark of large tool results (SPEC T-1): model-view tokens and compile time with
shortening on and off, for a session with twenty 200 KB tool results.

Run: `python tests/bench/bench_tool_results.py [--results 20] [--kb 200] [--rounds 15]`.
"Off" is the same compiler with the oversized threshold out of reach. Both compile the same
session in alternating rounds (a new user message each round, so every compile is a real step).
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from foya_tui.runtime.context.compiler import ContextCompiler
from foya_tui.runtime.model import EventKind, NewEvent
from foya_tui.runtime.providers.routes import make_route
from foya_tui.runtime.store import EventStore, open_database
from foya_tui.runtime.tools import default_registry
from foya_tui.settings import ModelSettings, Settings

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
MODEL = "openai/gpt-4.1"  # a real 1M-token window: even unshortened, the request is a valid one


def log_text(rng: random.Random, size: int) -> str:
    words = [
        "INFO",
        "DEBUG",
        "WARN",
        "request",
        "served",
        "cache",
        "miss",
        "retry",
        "upstream",
        "latency",
        "ms",
        "user",
        "id",
    ]
    lines, length = [], 0
    while length < size:
        line = f"{len(lines):06d} " + " ".join(rng.choice(words) for _ in range(12))
        lines.append(line)
        length += len(line) + 1
    return "\n".join(lines)[:size]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=20)
    parser.add_argument("--kb", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    rng = random.Random(3)
    with tempfile.TemporaryDirectory() as tmp:
        database = open_database(Path(tmp) / "bench.sqlite3")
        store = EventStore(database)
        session = store.create_session()
        store.append(session.id, [NewEvent(EventKind.USER_MESSAGE, {"text": "collect the logs"})])
        for i in range(args.results):
            call = {"id": f"call_{i}", "name": "shell", "arguments": '{"command": "cat app.log"}'}
            store.append(
                session.id,
                [
                    NewEvent(EventKind.ASSISTANT_MESSAGE, {"text": "", "tool_calls": [call]}),
                    NewEvent(
                        EventKind.TOOL_RESULT,
                        {
                            "tool_call_id": f"call_{i}",
                            "name": "shell",
                            "content": log_text(rng, args.kb * 1024),
                        },
                    ),
                ],
            )
        # A 128K-token budget makes the pressure real: twenty 200 KB logs are ~1M tokens.
        on = Settings(models={MODEL: ModelSettings(window=128_000)})
        off = replace(on, tools=replace(on.tools, oversized_tokens=10**12))
        route = make_route(MODEL, "default")
        registry = default_registry()
        compilers = {
            name: ContextCompiler(store, settings, workdir=Path(tmp), clock=lambda: NOW, registry=registry)
            for name, settings in (("on", on), ("off", off))
        }
        first = {name: compiler.compile(session.id, route) for name, compiler in compilers.items()}
        timings: dict[str, list[float]] = {"on": [], "off": []}
        for i in range(args.rounds):
            store.append(session.id, [NewEvent(EventKind.USER_MESSAGE, {"text": f"and now {i}?"})])
            for name, compiler in compilers.items():
                started = time.perf_counter()
                compiler.compile(session.id, route)
                timings[name].append(time.perf_counter() - started)
        database.close()
    on_view, off_view = first["on"], first["off"]
    print(f"{args.results} tool results of {args.kb} KB each, {MODEL} with a 128,000-token window")
    print(f"  model-view tokens, shortening off : {off_view.layers.total:>12,}")
    print(
        f"  model-view tokens, shortening on  : {on_view.layers.total:>12,}"
        f"   ({len(on_view.shortened_seqs)} results shortened)"
    )
    print(f"  reduction                          : {off_view.layers.total / on_view.layers.total:>12.1f}x")
    on_ms, off_ms = statistics.median(timings["on"]) * 1000, statistics.median(timings["off"]) * 1000
    print(f"compile per step (median of {args.rounds} alternating rounds)")
    print(f"  shortening on  : {on_ms:8.2f} ms")
    print(f"  shortening off : {off_ms:8.2f} ms")
    print(f"  on / off       : {on_ms / off_ms:8.2f}x")


if __name__ == "__main__":
    main()

"""Provides a benchmark of the context compiler's per-step cost at 1,000, 10,000 and 100,000 events.

Run: `python tests/bench/bench_compiler.py [--sizes 1000,10000,100000] [--steps 30]`.
Each session is a realistic mix: user messages, assistant replies with tool calls, tool results of
varied size (some large), and usage records. A step = append one user message, compile. The
first compile of a session reads all of it (reported separately); later steps must cost about
the same whatever the history length (target: 100k/1k <= 2, and under 50 ms at 100k).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path

from foya_tui.runtime.context.compiler import ContextCompiler
from foya_tui.runtime.model import EventKind, NewEvent
from foya_tui.runtime.providers.routes import make_route
from foya_tui.runtime.store import EventStore, open_database
from foya_tui.runtime.tokens import counter_for_model
from foya_tui.settings import Settings

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
WORDS = [
    "the",
    "build",
    "fails",
    "because",
    "the",
    "cache",
    "key",
    "ignores",
    "the",
    "lock",
    "file",
    "so",
    "stale",
    "wheels",
    "are",
    "reused",
]


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def realistic_events(count: int, route_id: str, seed: int = 7) -> list[NewEvent]:
    """About 1 user message per 10 events; the rest tool steps and usage records."""
    rng = random.Random(seed)
    events: list[NewEvent] = []
    call = 0
    while len(events) < count:
        events.append(NewEvent(EventKind.USER_MESSAGE, {"text": text(rng, rng.randint(5, 60))}))
        for _ in range(rng.randint(1, 3)):
            call += 1
            call_id = f"call_{call}"
            arguments = json.dumps({"path": f"src/module_{rng.randint(1, 400)}.py"})
            events.append(
                NewEvent(
                    EventKind.ASSISTANT_MESSAGE,
                    {
                        "text": "",
                        "tool_calls": [{"id": call_id, "name": "read_file", "arguments": arguments}],
                    },
                )
            )
            size = rng.choice((20, 80, 300, 300, 2_000))  # words; a few large results
            events.append(
                NewEvent(
                    EventKind.TOOL_RESULT,
                    {"tool_call_id": call_id, "name": "read_file", "content": text(rng, size)},
                )
            )
        events.append(NewEvent(EventKind.ASSISTANT_MESSAGE, {"text": text(rng, rng.randint(20, 150))}))
        events.append(
            NewEvent(
                EventKind.PROVIDER_USAGE,
                {"route_id": route_id, "through_seq": 0, "usage": None},  # unknown usage: full estimates
            )
        )
    return events[:count]


def measure(size: int, steps: int, folder: Path) -> tuple[float, float, float, float]:
    database = open_database(folder / f"s{size}.sqlite3")
    store = EventStore(database)
    route = make_route("foya-sim/large", "default")
    session = store.create_session()
    batch = realistic_events(size, route.id)
    for start in range(0, len(batch), 5_000):
        store.append(session.id, batch[start : start + 5_000])
    compiler = ContextCompiler(store, Settings(), workdir=folder, clock=lambda: NOW)
    counter_for_model(route.model).count("load the tokenizer before timing")
    tracemalloc.start()
    started = time.perf_counter()
    compiler.compile(session.id, route)
    first = time.perf_counter() - started
    memory = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    timings = []
    for i in range(steps):
        store.append(session.id, [NewEvent(EventKind.USER_MESSAGE, {"text": f"step {i}: what next?"})])
        started = time.perf_counter()
        view = compiler.compile(session.id, route)
        timings.append(time.perf_counter() - started)
    assert view.through_seq == size + steps
    database.close()
    return first, statistics.median(timings), min(timings), memory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            results[size] = measure(size, args.steps, Path(tmp))
    print(f"{'events':>8} {'first compile':>14} {'per step (median)':>18} {'min':>9} {'peak MB (first)':>16}")
    for size, (first, median, low, memory) in results.items():
        timing = f"{first * 1000:>11.1f} ms {median * 1000:>15.2f} ms {low * 1000:>6.2f} ms"
        print(f"{size:>8,} {timing} {memory:>13.1f}")
    smallest, largest = min(sizes), max(sizes)
    ratio = results[largest][1] / results[smallest][1]
    print(f"per-step {largest:,}/{smallest:,} ratio: {ratio:.2f}x (target <= 2)")
    print(f"per-step at {largest:,}: {results[largest][1] * 1000:.2f} ms (target < 50 ms)")


if __name__ == "__main__":
    main()

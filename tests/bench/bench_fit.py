"""Provides a benchmark of "every request fits" (SPEC T-4, C-12 extended): the loopback scenario's
numbers with the elastic step and without it, side by side in one run, and what the elastic step
costs per model call at 1,000 and 100,000 events.

Run: `python tests/bench/bench_fit.py [--calls 6,8,10] [--sizes 1000,100000] [--rounds 15]`.

(a) 16,000-token window, N parallel reads of ~15,000 characters per step, 10 steps, on the loopback
OpenAI-compatible server through LiteLLM (`tests/fakes/fit.py`): requests, compactions, the largest
request as a share of the window (the server's own count), refused requests, finished steps, and
the largest sent estimate as a share of its compaction line (target: at most 100%). Beside it the
same run with the elastic step switched off (the fixed 3,000 + 1,500-character form only).
(b) One compile of a session whose latest step holds 8 results of 15,000 characters over the line,
after 1k or 100k events of history, with the elastic step and without it, sizes alternating in
one process; the elastic forms' cache is emptied before each call, as a new step's sizes are new.
Target: the difference under 5 ms and independent of history length.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from foya_tui.runtime.context import compiler as compiler_module
from foya_tui.runtime.context.compiler import ContextCompiler
from foya_tui.runtime.model import EventKind, NewEvent
from foya_tui.runtime.providers.routes import make_route
from foya_tui.runtime.store import EventStore, open_database
from foya_tui.settings import ModelSettings, Settings
from tests.bench.bench_compiler import NOW, realistic_events
from tests.fakes.fit import RESULT_CHARS, FitRun, run_fit


@contextmanager
def elastic(enabled: bool) -> Iterator[None]:
    """The compiler with its elastic step on (the default) or off (fixed T-1 forms only)."""
    passes = compiler_module.ELASTIC_PASSES
    compiler_module.ELASTIC_PASSES = passes if enabled else 0
    try:
        yield
    finally:
        compiler_module.ELASTIC_PASSES = passes


def _row(label: str, run: FitRun) -> str:
    return (
        f"  {label:<9} {run.calls:>5} {run.requests:>8} {run.compactions:>11} {run.largest_share:>9.0%} "
        f"{run.refused:>8} {run.steps_finished:>6}/10 {run.largest_line_share:>10.0%} {len(run.failures):>8}"
    )


def bench_scenario(calls: list[int]) -> None:
    print("(a) 16,000-token window, parallel reads of 15,000 characters, 10 steps (loopback server)")
    print(
        f"  {'':<9} {'calls':>5} {'requests':>8} {'compactions':>11} {'largest':>9} {'refused':>8} "
        f"{'steps':>9} {'vs line':>10} {'failures':>8}"
    )
    os.environ.setdefault("FOYA_TEST_KEY", "sk-bench-fit")
    for count in calls:
        runs = {}
        for label, enabled in (("elastic", True), ("fixed", False)):
            with tempfile.TemporaryDirectory() as folder, elastic(enabled):
                runs[label] = run_fit(Path(folder), count)
            print(_row(label, runs[label]))
        on, off = runs["elastic"], runs["fixed"]
        ratio = on.largest_line_share / max(0.01, off.largest_line_share)
        print(
            f"  ratio elastic / fixed: largest sent vs line {on.largest_line_share:.2f} / "
            f"{off.largest_line_share:.2f} = {ratio:.2f}x, refused {on.refused}/{off.refused}"
        )


def _session(root: Path, size: int) -> tuple[ContextCompiler, str]:
    store = EventStore(open_database(root / f"fit{size}.sqlite3"))
    settings = Settings(models={"bench/fit": ModelSettings(window=16_000)})
    route = make_route("bench/fit", "default", None)
    info = store.create_session(title="bench", workspace=str(root))
    batch = realistic_events(size, route.id)
    batch.append(NewEvent(EventKind.USER_MESSAGE, {"text": "read the eight data files"}))
    calls = [
        {"id": f"fit_{n}", "name": "read_file", "arguments": json.dumps({"path": f"d{n}.txt"})}
        for n in range(8)
    ]
    batch.append(NewEvent(EventKind.ASSISTANT_MESSAGE, {"text": "", "tool_calls": calls}))
    for n in range(8):
        content = "".join(f"{n}-{i}: value {i * 7 % 1000} ok\n" for i in range(RESULT_CHARS // 20))
        batch.append(
            NewEvent(
                EventKind.TOOL_RESULT, {"tool_call_id": f"fit_{n}", "name": "read_file", "content": content}
            )
        )
    for start in range(0, len(batch), 5_000):
        store.append(info.id, batch[start : start + 5_000])
    compiler = ContextCompiler(store, settings, workdir=root, clock=lambda: NOW)
    compiler.compile(info.id, route)  # the first read of a session is not a step's cost
    return compiler, info.id


def _timed(compiler: ContextCompiler, session_id: str, enabled: bool) -> tuple[float, int]:
    route = make_route("bench/fit", "default", None)
    for column in compiler._state(session_id).columns.values():
        column.cut_forms.clear()  # a new step's sizes are new: no cached form
    # A collection owed by the bench's own setup would land on whichever call comes next; the
    # young generations are collected first so that both modes start even.
    gc.collect(1)
    with elastic(enabled):
        started = time.perf_counter()
        view = compiler.compile(session_id, route)
        return time.perf_counter() - started, len(view.shortened_seqs)


def bench_cost(sizes: list[int], rounds: int) -> None:
    print("\n(b) one compile with and without the elastic step, latest step 8 × 15,000 characters")
    with tempfile.TemporaryDirectory() as folder:
        sessions = {size: _session(Path(folder), size) for size in sizes}
        times: dict[tuple[int, bool], list[float]] = {
            (size, on): [] for size in sizes for on in (True, False)
        }
        for _ in range(rounds):
            for size in sizes:  # alternating sizes and modes in one process
                for on in (True, False):
                    seconds, _ = _timed(*sessions[size], on)
                    times[(size, on)].append(seconds)
        costs = {}
        for size in sizes:
            with_step = statistics.median(times[(size, True)]) * 1000
            without = statistics.median(times[(size, False)]) * 1000
            costs[size] = with_step - without
            print(
                f"  {size:>7,} events: compile {with_step:7.2f} ms with, {without:7.2f} ms without: "
                f"elastic step {costs[size]:5.2f} ms"
            )
        if len(sizes) > 1:
            low, high = sizes[0], sizes[-1]
            print(
                f"  ratio elastic step {high:,} / {low:,} events: {costs[high]:.2f} / {costs[low]:.2f} ms = "
                f"{costs[high] / max(0.01, costs[low]):.2f}x"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", default="6,8,10")
    parser.add_argument("--sizes", default="1000,100000")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    bench_scenario([int(n) for n in args.calls.split(",")])
    bench_cost([int(n) for n in args.sizes.split(",")], args.rounds)


if __name__ == "__main__":
    main()

"""Provides a benchmark of the evidence ledger (SPEC K-12): what survives compaction, and what its
extraction costs.

Run: `python tests/bench/bench_ledger.py [--sizes 10000,100000] [--new 1000] [--rounds 5] [--skip-routes]`.

(a) Per synthetic agent transcript (`tests/agent_transcripts.py`: Claude-Code-like, OpenHands-like,
mini-swe-agent-like, aider-like, each ≥ 500 messages) and simulator route (foya-sim/small, 8K;
foya-sim/large, 32K): imported, compacted once through the real summary path, the projection the
model would see exported; then how many of the transcript's modified paths, read paths and user
rules appear in it verbatim, how many of the paths the ledger itself shows, and the rendered
ledger's tokens as a share of the window.
(b) Extraction time at N events (imported OpenAI-format messages of the Claude-Code shape, built in
memory): `full` reads all N events; `incremental` extends the ledger of the first N − new events
(made once, untimed) with the last `new` events, as a checkpoint that builds on the previous one
does. Median of R rounds, measured side by side in one run; the ratio incremental / full and
incremental at the largest size / at the smallest show whether the cost follows the newly covered
events only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from foya_tui.paths import FoyaPaths
from foya_tui.runtime.model import Event, EventKind
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.tokens import counter_for_model
from foya_tui.runtime.view.ledger import extract_ledger, ledger_budget_chars
from foya_tui.settings import Settings
from tests.agent_transcripts import AGENTS, claude_code

ROUTES = {"foya-sim/small": 8_192, "foya-sim/large": 32_768}


def survival(folder: Path) -> None:
    print("(a) what survives one compaction, per transcript and route")
    header = f"{'transcript':<15} {'route':<15} {'msgs':>5}  {'modified':>9} {'read':>9} {'rules':>6}"
    print(f"{header}  {'in ledger (mod/read)':>20}  {'ledger tok/window':>17}")
    for name, make in AGENTS.items():
        transcript = make()
        for model, window in ROUTES.items():
            paths = FoyaPaths(folder, folder, folder / f"{name}-{window}.sqlite3")
            with Runtime(Settings(retry_backoff=0.0), paths) as runtime:
                body = json.dumps(list(transcript.messages)).encode()
                session = runtime.import_transcript(body, "t.json").id
                route = runtime.route_for(model)
                result = runtime.compact(session, route)
                if result.checkpoint is None:
                    print(f"{name:<15} {model:<15} compaction {result.outcome}: {result.reason}")
                    continue
                projection = "\n".join(
                    str(message.get("content"))
                    for message in runtime.export(session, projection=True, route=route)
                )
                ledger = result.checkpoint.ledger
                rendered = ledger.render()
                modified = sum(path in projection for path in transcript.modified)
                read = sum(path in projection for path in transcript.read)
                rules = sum(rule in projection for rule in transcript.rules)
                shown_mod = sum(path in rendered for path in transcript.modified)
                shown_read = sum(path in rendered for path in transcript.read)
                tokens = counter_for_model(model).count(rendered)
                print(
                    f"{name:<15} {model:<15} {len(transcript.messages):>5}  "
                    f"{modified:>4}/{len(transcript.modified):<4} {read:>4}/{len(transcript.read):<4} "
                    f"{rules:>2}/{len(transcript.rules):<3}  "
                    f"{shown_mod:>9}/{shown_read:<10}  {tokens:>6}/{window} = {tokens / window:5.1%}"
                )


def events_of(count: int) -> list[Event]:
    """`count` imported events of the Claude-Code shape (the transcript repeated, seqs unique)."""
    pattern = claude_code().messages
    events = []
    for seq in range(1, count + 1):
        message = dict(pattern[(seq - 1) % len(pattern)])
        if message.get("tool_calls"):
            message["tool_calls"] = [
                {**call, "id": f"{call['id']}-{seq // len(pattern)}"} for call in message["tool_calls"]
            ]
        if message.get("tool_call_id"):
            message["tool_call_id"] = f"{message['tool_call_id']}-{seq // len(pattern)}"
        events.append(Event("bench", seq, EventKind.IMPORTED_MESSAGE, message, "t"))
    return events


def extraction(sizes: list[int], new: int, rounds: int) -> None:
    budget = ledger_budget_chars(32_768, Settings().compaction.ledger_chars)
    print(f"\n(b) extraction time (budget {budget:,} characters, median of {rounds}, {new:,} newly covered)")
    print(f"{'events':>8} {'full ms':>9} {'incremental ms':>15} {'incr/full':>10}")
    incremental_by_size: dict[int, float] = {}
    for size in sizes:
        events = events_of(size)
        # a cut between whole units: never between a call and its result
        cut = size - new
        while events[cut].payload.get("role") == "tool":
            cut += 1
        earlier = extract_ledger(events[:cut], budget)
        full, incremental = [], []
        for _ in range(rounds):
            started = time.perf_counter()
            extract_ledger(events, budget)
            full.append(time.perf_counter() - started)
            started = time.perf_counter()
            extract_ledger(events[cut:], budget, earlier=earlier)
            incremental.append(time.perf_counter() - started)
        full_ms, incremental_ms = statistics.median(full) * 1e3, statistics.median(incremental) * 1e3
        incremental_by_size[size] = incremental_ms
        print(f"{size:>8,} {full_ms:>9.1f} {incremental_ms:>15.2f} {incremental_ms / full_ms:>10.3f}")
    smallest, largest = min(incremental_by_size), max(incremental_by_size)
    ratio = incremental_by_size[largest] / incremental_by_size[smallest]
    print(
        f"incremental at {largest:,} / at {smallest:,} events: {ratio:.2f}"
        " (1.0: the length of the history costs nothing)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--new", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--skip-routes", action="store_true", help="only the extraction timings")
    args = parser.parse_args()
    if not args.skip_routes:
        with tempfile.TemporaryDirectory() as folder:
            survival(Path(folder))
    extraction([int(size) for size in args.sizes.split(",")], args.new, args.rounds)


if __name__ == "__main__":
    main()

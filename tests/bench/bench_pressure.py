"""Provides a benchmark of the working-set pressure pipeline (SPEC K-1..K-11) on the offline
simulator through LiteLLM: the issue's numbers, each beside a variant run in the same process.

Run: `python tests/bench/bench_pressure.py [--steps 50] [--turns 4]`.

(a) The 200-step exploration on foya-sim/small (8K window), and (a2) on foya-sim/large (32K): a
first turn that states two rules, then `turns` turns of `explore N steps` over a project of real
files. Reported: steps, compactions by trigger/outcome/producer, provider requests spent on
compaction, snips and tokens they saved,
handoff reminders, the peak request as a share of the window, overflows that reached the user,
and how many of the first turn's rules are still verbatim in the final projection. Side by side:
the same session with micro/snip switched off (every tool turn in the recent window), so the
ratio shows what snip saves in compactions and summary requests.
(b) A summariser that always fails (`FOYA_SIM_FAULTS=summary-sections`), 60 steps: with the
circuit breaker (3 failures) against a breaker that never opens; summary requests spent.
(c) Local cost of the pre-step pipeline: `snip_candidates` on a session of N tool turns (what a
cold cache or a step over the compaction line pays), first call and warm; then the same session
once a checkpoint covers those turns and 100 new ones follow (issue 17 item 4: planning reads only
what the checkpoint does not cover).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from foya_tui.paths import FoyaPaths
from foya_tui.runtime.context import floor
from foya_tui.runtime.model import EventKind, NewEvent
from foya_tui.runtime.runtime import Runtime
from foya_tui.settings import CompactionSettings, Settings, ToolSettings
from tests.fakes.exploration import RULES, ScenarioTally, exploration_project, explore, rules_in_projection


def _runtime(root: Path, model: str = "foya-sim/small", **compaction: Any) -> Runtime:
    project = exploration_project(root / "project")
    settings = Settings(
        model=model,
        retry_backoff=0.0,
        approval_mode="read-only",
        tools=ToolSettings(max_steps=80),
        compaction=CompactionSettings(**compaction),
    )
    paths = FoyaPaths(data_dir=root / "data", config_dir=root / "config", database=root / "data" / "foya.db")
    return Runtime(settings, paths, workdir=project)


def _exploration(
    root: Path, turns: int, steps: int, model: str = "foya-sim/small", **compaction: Any
) -> tuple[ScenarioTally, int, float]:
    with _runtime(root, model, **compaction) as runtime:
        session = runtime.new_session()
        started = time.perf_counter()
        tally = explore(session, turns=turns, steps_per_turn=steps)
        elapsed = time.perf_counter() - started
        return tally, rules_in_projection(session), elapsed


def _print_tally(label: str, tally: ScenarioTally, rules: int, elapsed: float) -> None:
    print(f"  {label}")
    print(f"    steps {tally.steps}, turns finished {tally.turns_finished}, failures {len(tally.failures)}")
    print(f"    overflows that reached the user: {tally.overflows_seen_by_user}")
    kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(tally.compactions.items())) or "none"
    print(f"    compactions: {sum(tally.compactions.values())} ({kinds})")
    print(f"    provider requests spent on compaction: {tally.compaction_requests}")
    print(
        f"    snips: {dict(tally.snips) or 'none'}, tokens kept out of requests: {tally.snip_tokens_saved:,}"
    )
    print(f"    handoff reminders: {tally.handoffs}")
    print(f"    peak request / window: {tally.peak_share:.0%}")
    print(f"    reactive recoveries per turn (max): {max(tally.reactive_per_turn)}")
    print(f"    first-turn rules verbatim in the final projection: {rules} of {len(RULES)}")
    print(f"    wall time: {elapsed:.1f} s")


def bench_exploration(turns: int, steps: int) -> None:
    for label, model in (("(a)", "foya-sim/small"), ("(a2)", "foya-sim/large")):
        print(f"{label} {turns * steps} exploration steps on {model}")
        with tempfile.TemporaryDirectory() as folder:
            full = _exploration(Path(folder) / "full", turns, steps, model)
            # Every tool turn recent: the setting out of reach, and no share of the budget to fit.
            share, floor.RECENT_TOOL_SHARE = floor.RECENT_TOOL_SHARE, math.inf
            try:
                no_snip = _exploration(
                    Path(folder) / "nosnip", turns, steps, model, recent_tool_turns=1_000_000
                )
            finally:
                floor.RECENT_TOOL_SHARE = share
        _print_tally("full pipeline (micro, snip, handoff, LLM compaction, fallback)", *full)
        _print_tally("micro/snip off (every tool turn counts as recent)", *no_snip)
        compactions = sum(full[0].compactions.values()), sum(no_snip[0].compactions.values())
        requests = full[0].compaction_requests, no_snip[0].compaction_requests
        print(
            f"  ratio full / snip off: compactions {compactions[0]}/{compactions[1]} = "
            f"{compactions[0] / max(1, compactions[1]):.2f}x, summary requests {requests[0]}/{requests[1]} = "
            f"{requests[0] / max(1, requests[1]):.2f}x\n"
        )


def bench_breaker(steps: int) -> None:
    print(f"\n(b) a summariser that always fails, {steps} steps on foya-sim/small")
    os.environ["FOYA_SIM_FAULTS"] = "summary-sections"
    try:
        with tempfile.TemporaryDirectory() as folder:
            tripped = _exploration(Path(folder) / "breaker", 1, steps)
            never = _exploration(Path(folder) / "never", 1, steps, breaker_threshold=1_000_000)
    finally:
        del os.environ["FOYA_SIM_FAULTS"]
    for label, (tally, rules, elapsed) in (
        ("breaker at 3 failures", tripped),
        ("breaker never opens", never),
    ):
        producers = sum(count for kind, count in tally.compactions.items() if kind.endswith("/fallback"))
        print(
            f"  {label}: {sum(tally.compactions.values())} compactions ({producers} by the fallback), "
            f"{tally.compaction_requests} summary requests, failures {len(tally.failures)}, "
            f"rules kept {rules}/{len(RULES)}, {elapsed:.1f} s"
        )
    spent, unbounded = tripped[0].compaction_requests, never[0].compaction_requests
    print(f"  ratio summary requests breaker / none: {spent}/{unbounded} = {spent / max(1, unbounded):.2f}x")


def bench_candidates(sizes: list[int], rounds: int) -> None:
    print("\n(c) snip_candidates (K-3/K-4 planning input) per call, by tool turns in the session")

    def tool_turns(first: int, count: int) -> list[NewEvent]:
        batch: list[NewEvent] = []
        for n in range(first, first + count):
            call = {"id": f"c{n}", "name": "read_file", "arguments": '{"path": "src/x.py"}'}
            batch.append(NewEvent(EventKind.ASSISTANT_MESSAGE, {"text": "", "tool_calls": [call]}))
            content = f"def f{n}(x):\n" + "    return x\n" * 60
            result = {"tool_call_id": f"c{n}", "name": "read_file", "content": content}
            batch.append(NewEvent(EventKind.TOOL_RESULT, result))
        return batch

    def timed(runtime: Runtime, session: Any, label: str) -> None:
        session.context()  # the compiler's read of what is new is not counted here
        started = time.perf_counter()
        candidates = runtime.parts.compiler.snip_candidates(session.id, session.route)
        first = time.perf_counter() - started
        warm = []
        for _ in range(rounds):
            started = time.perf_counter()
            runtime.parts.compiler.snip_candidates(session.id, session.route)
            warm.append(time.perf_counter() - started)
        print(
            f"  {label}: first {first * 1000:8.1f} ms, warm "
            f"{statistics.median(warm) * 1000:7.1f} ms, {len(candidates):,} candidates"
        )

    for turns in sizes:
        with tempfile.TemporaryDirectory() as folder, _runtime(Path(folder)) as runtime:
            session = runtime.new_session()
            user = NewEvent(EventKind.USER_MESSAGE, {"text": "explore"})
            runtime.parts.store.append(session.id, [user, *tool_turns(0, turns)])
            timed(runtime, session, f"{turns:>7,} tool turns, no checkpoint")
            # A checkpoint covers them; planning then reads only the turns after it.
            result = runtime.compact(session.id, use_model=False)
            assert result.checkpoint is not None, result.reason
            runtime.parts.store.append(session.id, tool_turns(turns, 100))
            timed(runtime, session, f"{turns:>7,} covered by a checkpoint, then 100 new")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--steps", type=int, default=50, help="steps per exploration turn")
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--sizes", default="1000,10000,30000")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    bench_exploration(args.turns, args.steps)
    bench_breaker(60)
    bench_candidates([int(size) for size in args.sizes.split(",")], args.rounds)


if __name__ == "__main__":
    main()

"""Provides the "every request fits" scenario on the loopback server (SPEC T-4, C-12): a 16,000-token
window, `calls` parallel reads of ~15,000 characters per step, 10 steps, and what it did — for the
tests (`tests/runtime/test_fit.py`) and the bench (`tests/bench/bench_fit.py`).

Every request that was sent is read back from the store (its usage record carries the estimate the
compiler made), and its compaction line is recomputed the way the budget does (SPEC B-2, B-4), so
the check is of what was sent, not of a report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from foya_tui.runtime.context.budget import compute_budget
from foya_tui.runtime.model import EventKind
from foya_tui.runtime.runtime import Runtime
from foya_tui.settings import BudgetSettings, ModelSettings, ToolSettings
from tests.conftest import FIXED_NOW, fake_settings, make_paths
from tests.fakes.exploration import ScenarioTally
from tests.fakes.openai_server import FakeOpenAIServer

WINDOW = 16_000
RESULT_CHARS = 15_000
STEPS = 10
REQUEST = "Read every data file in parallel, ten times over, and tell me what changed."


@dataclass(frozen=True)
class FitRun:
    """One run of the scenario, counted."""

    calls: int
    steps_finished: int
    tool_calls: int
    requests: int
    compactions: int
    refused: int
    largest_share: float
    """The largest request the server received, by its own count, as a share of the window."""
    over_line: int
    """Requests whose estimate was above their compaction line when sent."""
    largest_line_share: float
    """The largest sent estimate as a share of its own compaction line."""
    failures: tuple[str, ...]


def data_files(project: Path, calls: int) -> tuple[str, ...]:
    project.mkdir(parents=True, exist_ok=True)
    names = []
    for index in range(calls):
        name = f"data_{index}.txt"
        lines, size, n = [], 0, 0
        while size < RESULT_CHARS - 200:  # read_file adds a line number to each line
            line = f"record {index}-{n}: value {n * 7 % 1000} status ok\n"
            lines.append(line)
            size += len(line) + 8
            n += 1
        (project / name).write_text("".join(lines), encoding="utf-8")
        names.append(name)
    return tuple(names)


def run_fit(root: Path, calls: int) -> FitRun:
    """The scenario with `calls` parallel reads per step (needs FOYA_TEST_KEY set)."""
    paths = data_files(root / "project", calls)
    with FakeOpenAIServer(window=WINDOW, parallel_paths=paths, parallel_steps=STEPS) as server:
        settings = fake_settings(
            server.base_url,
            model="openai/parallel",
            approval_mode="read-only",
            models={"openai/parallel": ModelSettings(window=WINDOW)},
            tools=ToolSettings(max_steps=STEPS + 5),
        )
        with Runtime(
            settings, make_paths(root), workdir=root / "project", clock=lambda: FIXED_NOW
        ) as runtime:
            session = runtime.new_session()
            tally = ScenarioTally()
            tally.run(session, REQUEST)
            events = runtime.parts.store.events(session.id)
        chats = [r for r in server.chat_requests if not r.compaction]
        usage = [e.payload for e in events if e.kind is EventKind.PROVIDER_USAGE]
        over, share, last_output = 0, 0.0, None
        for record in usage:
            line = compute_budget(WINDOW, None, last_output, BudgetSettings()).high_water
            over += record["estimate"] > line
            share = max(share, record["estimate"] / line)
            reply = record.get("usage") or {}
            last_output = reply.get("output_tokens") if isinstance(reply, dict) else None
        return FitRun(
            calls=calls,
            steps_finished=tally.steps // calls if calls else 0,
            tool_calls=tally.steps,
            requests=len(chats),
            compactions=sum(tally.compactions.values()),
            refused=sum(r.overflow for r in server.chat_requests),
            largest_share=max((r.prompt_tokens for r in chats), default=0) / WINDOW,
            over_line=over,
            largest_line_share=share,
            failures=tuple(tally.failures),
        )

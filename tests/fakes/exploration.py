"""Provides the long-exploration scenario shared by the scenario tests and `bench_pressure.py`: a
project of real files, a first turn that states the user's rules, then turns of "explore N steps"
on the simulator, with every runtime update tallied (SPEC K-1..K-11, the issue's numbers).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from foya_tui.runtime.session import Session
from foya_tui.runtime.updates import (
    CompactionFinished,
    ContextSnipped,
    ContextUpdated,
    HandoffRecorded,
    ToolCallFinished,
    TurnFailed,
    TurnFinished,
)

RULES = (
    "Always keep the public API of src/ stable.",
    "Never edit files under generated/.",
)
FIRST_TURN = f"{RULES[0]} {RULES[1]} First, list the files here."


def exploration_project(root: Path, files: int = 24, seed: int = 7) -> Path:
    """Python modules of 1–9 KB (about 300–2,300 tokens each) and a README: real files to read."""
    rng = random.Random(seed)
    (root / "src").mkdir(parents=True, exist_ok=True)
    for index in range(files):
        lines = [
            f"def function_{index}_{n}(x):\n    return x * {n}  # TODO check {n}\n"
            for n in range(rng.randint(20, 160))
        ]
        (root / "src" / f"module_{index:02}.py").write_text("".join(lines), encoding="utf-8")
    (root / "README.md").write_text("# Demo\n\nA project to explore.\n", encoding="utf-8")
    return root


@dataclass
class ScenarioTally:
    """What a scenario did, counted from the updates the session emitted."""

    steps: int = 0
    turns_finished: int = 0
    failures: list[str] = field(default_factory=list)
    overflows_seen_by_user: int = 0
    compactions: Counter[str] = field(default_factory=Counter)
    """By "trigger/outcome/producer"."""
    compaction_requests: int = 0
    reactive_per_turn: list[int] = field(default_factory=list)
    compactions_per_turn: list[int] = field(default_factory=list)
    snips: Counter[str] = field(default_factory=Counter)
    snip_tokens_saved: int = 0
    handoffs: int = 0
    peak_share: float = 0.0
    """The largest request actually sent, as a share of the window."""

    def run(self, session: Session, text: str) -> None:
        reactive = compactions = 0
        for update in session.send(text):
            if isinstance(update, ToolCallFinished):
                self.steps += 1
            elif isinstance(update, CompactionFinished):
                result = update.result
                self.compactions[f"{result.trigger}/{result.outcome}/{result.producer}"] += 1
                self.compaction_requests += result.requests
                compactions += 1
                reactive += result.trigger == "provider"
            elif isinstance(update, ContextSnipped):
                self.snips[update.mode] += 1
                self.snip_tokens_saved += update.tokens_saved
            elif isinstance(update, HandoffRecorded):
                self.handoffs += 1
            elif isinstance(update, ContextUpdated) and update.report.window:
                share = update.report.estimate.total / update.report.window
                self.peak_share = max(self.peak_share, share)
            elif isinstance(update, TurnFinished):
                self.turns_finished += 1
            elif isinstance(update, TurnFailed):
                self.failures.append(update.reason)
                self.overflows_seen_by_user += update.kind == "input_overflow"
        self.reactive_per_turn.append(reactive)
        self.compactions_per_turn.append(compactions)


def explore(session: Session, turns: int, steps_per_turn: int) -> ScenarioTally:
    """The first turn states the rules; then `turns` turns of `explore N steps`."""
    tally = ScenarioTally()
    tally.run(session, FIRST_TURN)
    for _ in range(turns):
        tally.run(session, f"explore {steps_per_turn} steps")
    return tally


def rules_in_projection(session: Session) -> int:
    """How many of the first turn's rules the model still sees, verbatim, in the next request."""
    sent = json.dumps(list(session.context().messages), ensure_ascii=False)
    return sum(rule in sent for rule in RULES)

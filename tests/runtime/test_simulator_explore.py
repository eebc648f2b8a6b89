"""Tests the simulator's exploration mode ("explore N steps") and its answer to the hidden handoff
reminder: one read-only step per request, continued from the ids the request still shows (so a
mid-turn compaction does not restart the work), the reminder and a checkpoint's message never
taken for the user's request (SPEC C-3, K-1, K-10)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from foya_tui.runtime.model import EventKind, ToolCall
from foya_tui.runtime.providers.client import CancelToken, ProviderRequest, StreamFinished
from foya_tui.runtime.providers.litellm_client import LiteLLMClient
from foya_tui.runtime.providers.routes import make_route
from foya_tui.runtime.providers.simulator import (
    EXPLORE_GREP_PATTERN,
    Simulator,
    explored_steps,
)
from foya_tui.runtime.providers.summary_format import HANDOFF_MARKER
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.updates import TurnFinished
from foya_tui.runtime.view.history import valid_events
from foya_tui.runtime.view.ledger import Ledger
from foya_tui.runtime.view.projection import checkpoint_message_text
from foya_tui.settings import Settings
from tests.conftest import FIXED_NOW, make_paths

LARGE = "foya-sim/large"
SYSTEM = {"role": "system", "content": "You are Foya."}
REMINDER = {"role": "user", "content": f"{HANDOFF_MARKER} Record your execution frontier; explore 99 steps."}
TOOLS = tuple(
    {"type": "function", "function": {"name": name, "description": name, "parameters": {"type": "object"}}}
    for name in ("read_file", "list_dir", "grep", "write_file")
)
FILES = ("README.md", "docs/guide.md", "src/app.py", "src/util.py", "tests/test_app.py")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "explored"
    for index, name in enumerate(FILES):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        body = "\n".join(f"line {line} of {name}: value = {index * 100 + line}" for line in range(1, 40))
        path.write_text(f"# {name}\n{body}\n# TODO: tidy {name}\n", encoding="utf-8")
    (root / ".hidden").write_text("never read", encoding="utf-8")
    return root


def step(call: ToolCall, content: str = "result") -> list[dict[str, Any]]:
    """One exploration step as the request shows it: the call, then its result."""
    openai_call = {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }
    return [
        {"role": "assistant", "content": None, "tool_calls": [openai_call]},
        {"role": "tool", "tool_call_id": call.id, "content": content},
    ]


def explore(simulator: Simulator, messages: list[dict[str, Any]], steps: int) -> list[ToolCall]:
    """Answer `steps` requests, appending each step; the calls made."""
    calls = []
    for _ in range(steps):
        reply = simulator.reply(LARGE, messages, TOOLS)
        (call,) = reply.tool_calls
        calls.append(call)
        messages += step(call)
    return calls


def checkpoint(text: str = "## Goal\nThe user asked: “explore 9 steps” [seq 2]") -> dict[str, Any]:
    """A checkpoint's message, built as the compiler builds it."""
    return {"role": "user", "content": checkpoint_message_text([(1, 20, text)], Ledger(), "c" * 64, 20)}


# -- the schedule ----------------------------------------------------------------------------------


def test_each_step_is_one_read_only_call_cycling_through_the_files_in_order(project: Path) -> None:
    simulator = Simulator(workdir=project)
    messages = [SYSTEM, {"role": "user", "content": "Please explore 26 steps of this repo"}]
    calls = explore(simulator, messages, 26)
    assert [call.id for call in calls] == [f"sim_explore_{k}" for k in range(1, 27)]
    assert [c.name for c in calls if c.name != "read_file"] == [
        "list_dir",
        "grep",
        "list_dir",
        "grep",
        "list_dir",
    ]
    assert json.loads(calls[6].arguments) == {"pattern": EXPLORE_GREP_PATTERN, "path": "."}
    reads = [json.loads(call.arguments)["path"] for call in calls if call.name == "read_file"]
    # Sorted, hidden files skipped, one after another, then again from the first.
    assert reads == [FILES[index % len(FILES)] for index in range(21)]
    assert set(reads) == set(FILES) and ".hidden" not in reads
    final = simulator.reply(LARGE, messages, TOOLS)
    assert final.tool_calls == () and final.finish_reason == "stop"
    assert final.text.startswith("Explored 26 steps: read 21 files (5 distinct: `README.md`")
    assert "listed the directory 3 times and searched 2 times" in final.text


def test_a_new_request_starts_afresh_and_earlier_turns_ids_do_not_count(project: Path) -> None:
    simulator = Simulator(workdir=project)
    messages = [SYSTEM, {"role": "user", "content": "explore 2 steps"}]
    explore(simulator, messages, 2)
    messages += [
        {"role": "assistant", "content": "Explored 2 steps."},
        {"role": "user", "content": "explore 3 steps"},
    ]
    assert [call.id for call in explore(simulator, messages, 3)] == [
        "sim_explore_1",
        "sim_explore_2",
        "sim_explore_3",
    ]
    assert simulator.reply(LARGE, messages, TOOLS).text.startswith("Explored 3 steps")


def test_without_read_only_tools_the_request_is_answered_in_text(project: Path) -> None:
    reply = Simulator(workdir=project).reply(LARGE, [SYSTEM, {"role": "user", "content": "explore 5 steps"}])
    assert reply.tool_calls == () and "offline simulator" in reply.text


# -- stateless continuation after compaction (SPEC C-3, K-10) ---------------------------------------


def test_after_a_mid_turn_compaction_it_continues_from_the_latest_visible_step(project: Path) -> None:
    simulator = Simulator(workdir=project)
    messages = [SYSTEM, {"role": "user", "content": "explore 9 steps"}]
    explore(simulator, messages, 7)
    # Mid-turn: the checkpoint, the request re-inserted verbatim, the latest complete step.
    compacted = [SYSTEM, checkpoint(), messages[1], *messages[-2:]]
    assert explored_steps(compacted) == 7
    (next_call,) = simulator.reply(LARGE, compacted, TOOLS).tool_calls
    assert next_call.id == "sim_explore_8"
    assert next_call == simulator.reply(LARGE, messages, TOOLS).tool_calls[0]
    # A fallback checkpoint keeps the request in its place before the newest units (K-10).
    fallback = [SYSTEM, checkpoint(), messages[1], *messages[-4:]]
    assert simulator.reply(LARGE, fallback, TOOLS).tool_calls[0].id == "sim_explore_8"
    # Steps of an earlier turn before a new request are not this request's: it starts at 1.
    later = [SYSTEM, checkpoint(), *messages[-4:], {"role": "user", "content": "explore 3 steps"}]
    assert simulator.reply(LARGE, later, TOOLS).tool_calls[0].id == "sim_explore_1"


def test_the_checkpoint_message_is_never_the_request(project: Path) -> None:
    simulator = Simulator(workdir=project)
    # The checkpoint quotes an exploration request; the user's request is the greeting after it.
    reply = simulator.reply(LARGE, [SYSTEM, checkpoint(), {"role": "user", "content": "hello"}], TOOLS)
    assert reply.tool_calls == () and reply.text.startswith("Hello!")


# -- the hidden handoff reminder (SPEC K-1) ---------------------------------------------------------


def test_the_reminder_gets_the_frontier_and_the_next_step_in_one_reply(project: Path) -> None:
    simulator = Simulator(workdir=project)
    messages = [SYSTEM, {"role": "user", "content": "explore 5 steps"}]
    explore(simulator, messages, 2)
    reply = simulator.reply(LARGE, [*messages, REMINDER], TOOLS)
    assert reply.finish_reason == "tool_calls"
    assert reply.text == (
        "Execution frontier: goal “explore 5 steps”; done 2 of 5 exploration steps; in flight nothing; "
        'next `read_file` {"path": "docs/guide.md"}.'
    )
    (call,) = reply.tool_calls
    assert call.id == "sim_explore_3"
    # The reminder stays in later requests; it is never the request, and it asks for nothing.
    messages += [REMINDER, *step(call)[1:]]
    messages[-2] = {**step(call)[0], "content": reply.text}
    assert [c.id for c in explore(simulator, messages, 2)] == ["sim_explore_4", "sim_explore_5"]
    assert simulator.reply(LARGE, messages, TOOLS).text.startswith("Explored 5 steps")


def test_the_reminder_after_the_last_step_gets_the_frontier_then_the_report(project: Path) -> None:
    simulator = Simulator(workdir=project)
    messages = [SYSTEM, {"role": "user", "content": "explore 2 steps"}]
    explore(simulator, messages, 2)
    reply = simulator.reply(LARGE, [*messages, REMINDER], TOOLS)
    assert reply.tool_calls == () and reply.finish_reason == "stop"
    frontier, report = reply.text.split("\n\n", 1)
    assert frontier.endswith("done 2 of 2 exploration steps; in flight nothing; next report the exploration.")
    assert report.startswith("Explored 2 steps")


def test_outside_exploration_the_reminder_gets_the_frontier_then_the_usual_work(project: Path) -> None:
    simulator = Simulator(workdir=project)
    greeting = simulator.reply(LARGE, [SYSTEM, {"role": "user", "content": "hello"}, REMINDER], TOOLS)
    assert greeting.text.startswith(
        "Execution frontier: goal “hello”; done no tool calls yet this turn; in flight nothing; "
        "next answer the request.\n\nHello!"
    )
    # A request that plans tools keeps its plan: the frontier, then the call it would have made.
    listing = simulator.reply(
        LARGE, [SYSTEM, {"role": "user", "content": "what files are here?"}, REMINDER], TOOLS
    )
    assert listing.tool_calls[0].name == "list_dir" and "next `list_dir`" in listing.text
    # And the reminder is not counted as something the user said.
    history = [
        SYSTEM,
        {"role": "user", "content": "hi"},
        REMINDER,
        {"role": "user", "content": "what did we say so far?"},
    ]
    assert "holds 2 user messages" in simulator.reply(LARGE, history, TOOLS).text


def test_text_and_the_next_call_arrive_together_through_litellm(project: Path) -> None:
    """The real custom-provider path, streamed and not: one reply carries the frontier and the call."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": f"working directory: {project}"},
        {"role": "user", "content": "explore 4 steps"},
    ]
    explore(Simulator(workdir=project), messages, 1)
    request = ProviderRequest(make_route(LARGE, "default"), (*messages, REMINDER), tools=TOOLS)
    client = LiteLLMClient(Settings(retry_backoff=0.0))
    *_, finished = client.stream(request, CancelToken())
    assert isinstance(finished, StreamFinished)
    assert finished.text.startswith("Execution frontier: goal “explore 4 steps”; done 1 of 4")
    assert [call.id for call in finished.tool_calls] == ["sim_explore_2"]
    assert finished.finish_reason == "tool_calls"


# -- a whole turn through the runtime -----------------------------------------------------------


def run_turn(runtime: Runtime, model: str, prompt: str) -> tuple[str, Iterator[Any]]:
    session = runtime.new_session(runtime.route_for(model))
    updates = list(session.send(prompt))
    assert isinstance(updates[-1], TurnFinished), updates[-1]
    return session.id, iter(updates)


def explore_ids(runtime: Runtime, session_id: str) -> list[str]:
    events = valid_events(runtime.parts.store.events(session_id))
    return [str(e.payload["tool_call_id"]) for e in events if e.kind is EventKind.TOOL_RESULT]


def final_text(runtime: Runtime, session_id: str) -> str:
    reply = runtime.parts.store.last_event(session_id, EventKind.ASSISTANT_MESSAGE)
    assert reply is not None
    return str(reply.payload.get("text"))


def test_a_whole_exploration_turn_runs_real_tools(tmp_path: Path, project: Path) -> None:
    settings = Settings(retry_backoff=0.0)
    settings = replace(settings, tools=replace(settings.tools, max_steps=40))
    with Runtime(settings, make_paths(tmp_path), workdir=project, clock=lambda: FIXED_NOW) as runtime:
        session_id, _ = run_turn(runtime, LARGE, "explore 30 steps")
        assert explore_ids(runtime, session_id) == [f"sim_explore_{k}" for k in range(1, 31)]
        events = runtime.parts.store.events(session_id)
        results = [e.payload for e in events if e.kind is EventKind.TOOL_RESULT]
        assert not any(result["is_error"] for result in results)
        assert "line 1 of README.md" in results[1]["content"]  # step 2 really read the file
        assert final_text(runtime, session_id).startswith("Explored 30 steps")


def test_a_long_exploration_survives_mid_turn_compaction_without_restarting(
    tmp_path: Path, project: Path
) -> None:
    """On foya-sim/small (8K) forty steps of ~600-token reads cannot fit: the turn compacts mid-way,
    and the steps still run 1..40 exactly once each."""
    settings = Settings(retry_backoff=0.0)
    settings = replace(settings, tools=replace(settings.tools, max_steps=60))
    with Runtime(settings, make_paths(tmp_path), workdir=project, clock=lambda: FIXED_NOW) as runtime:
        session_id, _ = run_turn(runtime, "foya-sim/small", "explore 40 steps")
        kinds = [event.kind for event in runtime.parts.store.events(session_id)]
        assert EventKind.COMPACTION_COMPLETED in kinds
        assert explore_ids(runtime, session_id) == [f"sim_explore_{k}" for k in range(1, 41)]
        assert final_text(runtime, session_id).startswith("Explored 40 steps")

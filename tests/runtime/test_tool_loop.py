"""Tests the session's tool loop: batches, approval, cancellation and limits (issue: tools)."""

from __future__ import annotations

import json
import os
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from foya_tui.cli import main
from foya_tui.runtime.model import EventKind, ToolCall
from foya_tui.runtime.providers.client import CancelToken, ProviderRequest
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.tools.approval import ApprovalRequest, Decision
from foya_tui.runtime.tools.registry import ToolContext, ToolResult, ToolSpec, Visibility
from foya_tui.runtime.updates import StepStarted, ToolCallFinished, ToolCallStarted, TurnFailed, TurnFinished
from foya_tui.settings import Settings, ToolSettings
from tests.conftest import FIXED_NOW, fake_settings, make_paths
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.scripted import ScriptedClient


def call(call_id: str, name: str, **arguments: object) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=json.dumps(arguments))


def runtime_with(tmp_path: Path, workdir: Path, client, **options) -> Runtime:
    settings = options.pop("settings", Settings(retry_backoff=0.0))
    return Runtime(
        settings, make_paths(tmp_path), client=client, workdir=workdir, clock=lambda: FIXED_NOW, **options
    )


def tool_results(runtime: Runtime, session_id: str) -> list[dict]:
    return [
        dict(e.payload) for e in runtime.parts.store.events(session_id) if e.kind is EventKind.TOOL_RESULT
    ]


def test_the_simulator_explores_with_real_tools(runtime: Runtime) -> None:
    session = runtime.new_session()
    updates = list(session.send("what files are in this project?"))
    started = [u.name for u in updates if isinstance(u, ToolCallStarted)]
    assert started == ["list_dir", "read_file"]
    finished = updates[-1]
    assert isinstance(finished, TurnFinished) and "Demo project" in finished.text and "src/" in finished.text
    kinds = [e.kind for e in runtime.parts.store.events(session.id)]
    assert kinds.count(EventKind.TOOL_RESULT) == 2 and kinds[-1] is EventKind.PROVIDER_USAGE


def test_a_batch_runs_and_records_results_in_call_order(tmp_path: Path, workdir: Path) -> None:
    batch = (
        call("a", "list_dir", path="."),
        call("b", "read_file", path="README.md"),
        call("c", "glob", pattern="**/*.py"),
    )
    with runtime_with(tmp_path, workdir, ScriptedClient(batch)) as rt:
        session = rt.new_session()
        updates = list(session.send("look around"))
        assert [u.call_id for u in updates if isinstance(u, ToolCallFinished)] == ["a", "b", "c"]
        results = tool_results(rt, session.id)
        assert [r["tool_call_id"] for r in results] == ["a", "b", "c"]
        assert "src/main.py" in results[2]["content"] and not any(r["is_error"] for r in results)
        assert isinstance(updates[-1], TurnFinished)


def test_model_mistakes_are_results_and_the_turn_goes_on(tmp_path: Path, workdir: Path) -> None:
    bad = (
        ToolCall("x", "read_file", "{not json"),
        ToolCall("y", "rm_rf", "{}"),
        call("z", "read_file", path="../etc"),
    )
    with runtime_with(tmp_path, workdir, ScriptedClient(bad)) as rt:
        session = rt.new_session()
        updates = list(session.send("go"))
        results = tool_results(rt, session.id)
        assert all(r["is_error"] for r in results)
        assert "not valid JSON" in results[0]["content"] and "unknown tool 'rm_rf'" in results[1]["content"]
        assert "escapes the workspace" in results[2]["content"]
        assert isinstance(updates[-1], TurnFinished)


@pytest.mark.parametrize(
    ("mode", "allowed", "fragment"),
    [
        ("read-only", False, "approval mode is read-only"),
        ("ask", False, "headless run cannot ask"),
        ("auto", True, ""),
    ],
)
def test_approval_modes_for_writes(
    tmp_path: Path, workdir: Path, mode: str, allowed: bool, fragment: str
) -> None:
    write = (call("w", "write_file", path="notes.txt", content="hi"),)
    with runtime_with(tmp_path, workdir, ScriptedClient(write), approval_mode=mode) as rt:
        session = rt.new_session()
        list(session.send("write a note"))
        (result,) = tool_results(rt, session.id)
        assert (workdir / "notes.txt").exists() is allowed
        assert result["is_error"] is not allowed and fragment in result["content"]


class RecordingApprover:
    def __init__(self, *decisions: Decision) -> None:
        self.decisions = list(decisions)
        self.asked: list[ApprovalRequest] = []

    def decide(self, request: ApprovalRequest, cancel: CancelToken) -> Decision:
        self.asked.append(request)
        return self.decisions.pop(0)


def test_allow_for_the_session_is_remembered_and_deny_is_told(tmp_path: Path, workdir: Path) -> None:
    steps = [
        (call("1", "write_file", path="a.txt", content="a"),),
        (call("2", "write_file", path="b.txt", content="b"),),
        (call("3", "edit_file", path="a.txt", old_string="a", new_string="c"),),
    ]
    approver = RecordingApprover(Decision.ALLOW_SESSION, Decision.DENY)
    with runtime_with(tmp_path, workdir, ScriptedClient(*steps), approver=approver) as rt:
        session = rt.new_session()
        list(session.send("write"))
        results = tool_results(rt, session.id)
        assert [r["is_error"] for r in results] == [False, False, True]
        assert [a.call.name for a in approver.asked] == ["write_file", "edit_file"]  # write_file asked once
        assert results[2]["content"] == "refused: the user denied edit_file"
        assert (workdir / "a.txt").read_text() == "a"


def test_cancel_during_a_batch_closes_every_open_call(tmp_path: Path, workdir: Path) -> None:
    batch = (call("s", "shell", command="sleep 30"), call("t", "shell", command="echo never"))
    with runtime_with(tmp_path, workdir, ScriptedClient(batch), approval_mode="auto") as rt:
        session = rt.new_session()
        cancel = CancelToken()
        threading.Timer(0.5, cancel.cancel).start()
        updates = list(session.send("run it", cancel))
        assert isinstance(updates[-1], TurnFailed) and updates[-1].kind == "cancelled"
        results = tool_results(rt, session.id)
        assert [r["tool_call_id"] for r in results] == ["s", "t"]  # no incomplete tool group
        assert "cancelled" in results[1]["content"]
        view = session.context()
        assert [m["role"] for m in view.messages][-3:] == ["assistant", "tool", "tool"]


def test_a_runaway_loop_stops_at_the_step_limit(
    fake_openai: FakeOpenAIServer, tmp_path: Path, workdir: Path
) -> None:
    """The loopback server always answers with a tool call: the real HTTP path loops until the limit."""
    (workdir / "README.md").write_text("# Demo\n")
    settings = fake_settings(fake_openai.base_url, model="openai/tools")
    settings = replace(settings, tools=ToolSettings(max_steps=3))
    with Runtime(settings, make_paths(tmp_path), workdir=workdir, clock=lambda: FIXED_NOW) as rt:
        session = rt.new_session()
        updates = list(session.send("read the readme forever"))
        assert isinstance(updates[-1], TurnFailed) and updates[-1].kind == "step_limit"
        # The message says how to go on: send a message, or raise the setting that stopped it.
        assert "[tools] max_steps" in updates[-1].reason and "3 model calls" in updates[-1].reason
        assert [u.number for u in updates if isinstance(u, StepStarted)] == [1, 2, 3]
        assert {u.max_steps for u in updates if isinstance(u, StepStarted)} == {3}
        assert len(fake_openai.requests) == 3 and len(tool_results(rt, session.id)) == 3
        sent_tools = [tool["function"]["name"] for tool in fake_openai.requests[0].body["tools"]]
        assert "read_file" in sent_tools and "history_read_tool_result" not in sent_tools


LONG_TASK_STEPS = 120


def write_parallel_config(home: Path, base_url: str, tools: str = "") -> None:
    """A config whose default route is the loopback server's `parallel` scenario; `tools` is the
    body of a `[tools]` table (empty: the defaults)."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        'model = "openai/parallel"\nconnection = "fake"\n'
        f'[connections.fake]\napi_base = "{base_url}"\napi_key_env = "FOYA_TEST_KEY"\n'
        + (f"[tools]\n{tools}\n" if tools else ""),
        encoding="utf-8",
    )


def test_a_120_step_headless_task_finishes_on_the_default_settings(
    tmp_path: Path, workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`foya run` over LiteLLM's real HTTP path: 120 steps of one read each, then the answer, with
    no `[tools]` table at all; then the same task under a low limit stops with a message that
    names the setting to raise."""
    (workdir / "notes.txt").write_text("a note\n", encoding="utf-8")
    monkeypatch.chdir(workdir)
    home = Path(os.environ["FOYA_HOME"])
    with FakeOpenAIServer(parallel_paths=("notes.txt",), parallel_steps=LONG_TASK_STEPS) as server:
        write_parallel_config(home, server.base_url)
        assert main(["run", "read the notes, again and again", "--json"]) == 0
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
        assert lines[-1]["type"] == "turn_finished"
        steps = [line for line in lines if line["type"] == "step"]
        assert [line["number"] for line in steps] == list(range(1, LONG_TASK_STEPS + 2))
        assert {line["max_steps"] for line in steps} == {ToolSettings().max_steps}
        results = [line for line in lines if line["type"] == "tool_result"]
        assert len(results) == LONG_TASK_STEPS and not any(r["is_error"] for r in results)
        assert len(server.chat_requests) == LONG_TASK_STEPS + 1

        write_parallel_config(home, server.base_url, tools="max_steps = 5")
        assert main(["run", "read the notes once more"]) == 1
        err = capsys.readouterr().err
        assert "stopped after 5 model calls" in err and "raise [tools] max_steps in config.toml" in err


class Weather:
    """A deferred tool: listed by name only until tool_search activates it (SPEC X-9)."""

    spec = ToolSpec(
        name="weather",
        description="Current weather for a city.",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        visibility=Visibility.DEFERRED,
    )

    def run(self, arguments: dict, context: ToolContext) -> ToolResult:
        return ToolResult(content=f"sunny in {arguments['city']}")


def test_tool_search_activates_a_deferred_tool_for_the_current_turn_only(
    tmp_path: Path, workdir: Path
) -> None:
    steps = [(call("q", "tool_search", query="weather"),), (call("w", "weather", city="Oslo"),)]
    client = ScriptedClient(*steps)
    with runtime_with(tmp_path, workdir, client) as rt:
        rt.parts.registry.register(Weather())
        session = rt.new_session()
        list(session.send("how is the weather?"))

        def offered(request: ProviderRequest) -> list[str]:
            return [tool["function"]["name"] for tool in request.tools]

        assert "weather" not in offered(client.requests[0]) and "tool_search" in offered(client.requests[0])
        assert "weather" in offered(client.requests[1])  # from the next step on
        assert tool_results(rt, session.id)[1]["content"] == "sunny in Oslo"
        assert (
            rt.parts.registry.get("weather").spec.visibility.value == "deferred"
        )  # the registry is unchanged
        list(session.send("and tomorrow?"))
        assert "weather" not in offered(client.requests[-1])  # a new turn starts without it


def test_every_call_of_a_cancelled_batch_is_announced_once_and_closed(tmp_path: Path, workdir: Path) -> None:
    batch = (call("s", "shell", command="sleep 30"), call("t", "shell", command="echo never"))
    with runtime_with(tmp_path, workdir, ScriptedClient(batch), approval_mode="auto") as rt:
        cancel = CancelToken()
        threading.Timer(0.5, cancel.cancel).start()
        updates = list(rt.new_session().send("run it", cancel))
        assert [u.call_id for u in updates if isinstance(u, ToolCallStarted)] == ["s", "t"]
        assert [u.call_id for u in updates if isinstance(u, ToolCallFinished)] == ["s", "t"]

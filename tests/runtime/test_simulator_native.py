"""Tests `foya-sim/native`: provider-native compaction through LiteLLM's real custom-provider path,
its state carried back on the route that made it, refused on every other route, and the
`native-*` fault knobs (SPEC C-11, R-2)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from foya_tui.runtime.providers.client import CancelToken, Completion, ProviderRequest, StreamFinished
from foya_tui.runtime.providers.errors import FailureKind, ProviderError, ProviderFailure
from foya_tui.runtime.providers.litellm_client import LiteLLMClient
from foya_tui.runtime.providers.routes import make_route
from foya_tui.runtime.providers.simulator import (
    FAULTS_ENV,
    NATIVE_INVALID_TEXT,
    NATIVE_STATE_FORMAT,
    NATIVE_SUMMARY_CHARS,
    FaultPlan,
    Simulator,
    SimulatorFault,
    native_state_of,
)
from foya_tui.runtime.providers.summary_format import HANDOFF_MARKER
from foya_tui.runtime.tokens import count_messages, default_counter
from foya_tui.settings import Settings
from tests.runtime.test_simulator_summary import compaction_messages

NATIVE = "foya-sim/native"
OTHER_SIMULATORS = ("foya-sim/small", "foya-sim/large")


def call(call_id: str, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def long_conversation() -> list[dict[str, Any]]:
    """A context worth compacting: requests, tool calls on files, large results and one error."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for index in range(6):
        messages.append({"role": "user", "content": f"step {index}: please look at module_{index}.py"})
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call(f"c{index}", "read_file", {"path": f"module_{index}.py"})],
            }
        )
        body = "\n".join(f"{line:>6}→value_{index}_{line} = compute({line})" for line in range(1, 60))
        messages.append(
            {"role": "tool", "tool_call_id": f"c{index}", "content": f"module_{index}.py: lines 1–59\n{body}"}
        )
        messages.append({"role": "assistant", "content": f"module_{index}.py computes 59 values."})
    messages.append(
        {"role": "assistant", "content": None, "tool_calls": [call("c9", "shell", {"command": "pytest -q"})]}
    )
    messages.append(
        {"role": "tool", "tool_call_id": "c9", "content": "FAILED test_values.py::test_one\n[exit code 1]"}
    )
    return messages


def client() -> LiteLLMClient:
    return LiteLLMClient(Settings(retry_backoff=0.0))


def complete(model: str, messages: Sequence[Mapping[str, Any]], **native: Any) -> Completion:
    request = ProviderRequest(make_route(model, "default"), tuple(messages), **native)
    return client().complete(request, CancelToken())


def stream(model: str, messages: Sequence[Mapping[str, Any]], **native: Any) -> StreamFinished:
    request = ProviderRequest(make_route(model, "default"), tuple(messages), **native)
    *_, finished = client().stream(request, CancelToken())
    assert isinstance(finished, StreamFinished)
    return finished


def failure_of(
    model: str, messages: Sequence[Mapping[str, Any]], *, streamed: bool = False, **native: Any
) -> ProviderFailure:
    with pytest.raises(ProviderError) as caught:
        if streamed:
            stream(model, messages, **native)
        else:
            complete(model, messages, **native)
    return caught.value.failure


def state_of(messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    completion = complete(NATIVE, messages, native_compaction=True)
    return json.loads(completion.text)


# -- an ordinary chat ----------------------------------------------------------------------------


def test_an_ordinary_chat_on_native_behaves_like_small_with_its_own_window() -> None:
    hello = [{"role": "user", "content": "hello"}]
    native, small = complete(NATIVE, hello), complete("foya-sim/small", hello)
    assert "offline simulator" in native.text and native.finish_reason == "stop"
    assert "the window is 16,384" in native.text  # the catalog's window for foya-sim/native
    assert native.usage == small.usage
    assert native.text.replace("16,384", "8,192") == small.text


# -- native compaction (SPEC C-11) -----------------------------------------------------------------


def test_native_compaction_answers_a_compact_json_state_of_the_messages_given() -> None:
    messages = long_conversation()
    completion = complete(NATIVE, messages, native_compaction=True)
    assert completion.finish_reason == "stop"
    assert completion.text == json.dumps(
        json.loads(completion.text), ensure_ascii=False, separators=(",", ":")
    )
    state = json.loads(completion.text)
    # The canonical JSON leaves null fields out (LiteLLM does not send an assistant's null content).
    without_nulls = [{key: value for key, value in m.items() if value is not None} for m in messages]
    canonical = json.dumps(without_nulls, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert state["format"] == NATIVE_STATE_FORMAT and state["model"] == NATIVE
    assert state["digest"] == hashlib.sha256(canonical.encode()).hexdigest()
    assert state["messages"] == len(messages)
    summary = state["summary"]
    # The user's requests verbatim (the latest ones), the tools, the files touched, the error.
    assert (
        "3 earlier, then “step 3: please look at module_3.py”" in summary
        and "“step 5: please look at module_5.py”" in summary
    )
    assert "read_file×6" in summary and "shell×1" in summary
    assert "module_5.py" in summary and "FAILED test_values.py::test_one" in summary
    assert len(summary) <= NATIVE_SUMMARY_CHARS
    # Much smaller than what it stands for, and usage reported as for any request.
    counter = default_counter()
    assert counter.count(completion.text) * 5 < count_messages(messages)
    assert completion.usage is not None
    assert completion.usage.input_tokens == count_messages(messages)
    assert completion.usage.output_tokens == counter.count(completion.text)


def test_native_compaction_is_deterministic_and_also_streams() -> None:
    messages = long_conversation()
    first = complete(NATIVE, messages, native_compaction=True)
    assert complete(NATIVE, messages, native_compaction=True).text == first.text
    streamed = stream(NATIVE, messages, native_compaction=True)
    assert streamed.text == first.text and streamed.tool_calls == ()
    assert streamed.usage == first.usage
    # A different context is a different state.
    assert complete(NATIVE, messages[:-2], native_compaction=True).text != first.text


def test_the_hidden_reminder_is_no_request_in_the_state() -> None:
    messages = [
        {"role": "user", "content": "refactor the parser"},
        {"role": "user", "content": f"{HANDOFF_MARKER} record your execution frontier"},
    ]
    summary = native_state_of(NATIVE, messages)["summary"]
    assert "refactor the parser" in summary and HANDOFF_MARKER not in summary


def test_a_state_compacted_again_keeps_the_earlier_summary_first() -> None:
    earlier = state_of(long_conversation())
    later = [{"role": "user", "content": "now write the docs"}]
    state = json.loads(complete(NATIVE, later, native_compaction=True, native_state=earlier).text)
    assert state["summary"].startswith("earlier: requests:") and "now write the docs" in state["summary"]
    assert state["messages"] == 1


# -- the state carried back on its own route ---------------------------------------------------


def test_a_chat_with_the_state_counts_its_summary_and_describes_it() -> None:
    state = state_of(long_conversation())
    question = [{"role": "user", "content": "what did we do so far?"}]
    completion = complete(NATIVE, question, native_state=state)
    plain = complete(NATIVE, question)
    assert completion.usage is not None and plain.usage is not None
    assert completion.usage.input_tokens == plain.usage.input_tokens + default_counter().count(
        state["summary"]
    )
    assert (
        "native context state" in completion.text and "step 5: please look at module_5.py" in completion.text
    )
    streamed = stream(NATIVE, question, native_state=state)
    assert streamed.text == completion.text


def test_the_state_counts_toward_the_window() -> None:
    huge = {**native_state_of(NATIVE, [{"role": "user", "content": "x"}]), "summary": "word " * 17_000}
    failure = failure_of(NATIVE, [{"role": "user", "content": "hello"}], native_state=huge)
    assert failure.kind is FailureKind.INPUT_OVERFLOW


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"format": "someone-else/9"}, "format 'someone-else/9'"),
        ({"model": "foya-sim/large"}, "made by 'foya-sim/large'"),
        ({"summary": None}, "no summary"),
    ],
)
def test_an_invalid_state_is_a_bad_request(change: dict[str, Any], reason: str) -> None:
    state = {**native_state_of(NATIVE, [{"role": "user", "content": "x"}]), **change}
    failure = failure_of(NATIVE, [{"role": "user", "content": "hello"}], native_state=state)
    assert failure.kind is FailureKind.OTHER
    assert "invalid native state" in failure.message and reason in failure.message


@pytest.mark.parametrize("model", OTHER_SIMULATORS)
@pytest.mark.parametrize("streamed", [False, True])
def test_every_other_route_refuses_the_state_loudly(model: str, streamed: bool) -> None:
    """SPEC R-2: a native state never crosses routes; if the runtime leaked one, this is how it shows."""
    state = state_of(long_conversation())
    failure = failure_of(model, [{"role": "user", "content": "hello"}], streamed=streamed, native_state=state)
    assert failure.kind is FailureKind.OTHER
    assert f"{model} does not accept native state from another route" in failure.message


@pytest.mark.parametrize("model", OTHER_SIMULATORS)
def test_other_models_offer_no_native_compaction(model: str) -> None:
    failure = failure_of(model, long_conversation(), native_compaction=True)
    assert failure.kind is FailureKind.OTHER and "does not offer native compaction" in failure.message


# -- fault knobs ---------------------------------------------------------------------------------


def test_native_invalid_answers_text_that_is_not_json_then_recovers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULTS_ENV, "native-invalidx1")
    first = complete(NATIVE, long_conversation(), native_compaction=True)
    assert first.text == NATIVE_INVALID_TEXT and first.finish_reason == "stop"
    with pytest.raises(ValueError):
        json.loads(first.text)
    assert json.loads(complete(NATIVE, long_conversation(), native_compaction=True).text)["format"]


def test_native_unsupported_is_a_bad_request_counted_like_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULTS_ENV, "native-unsupportedx2")
    for _ in range(2):
        failure = failure_of(NATIVE, long_conversation(), native_compaction=True)
        assert failure.kind is FailureKind.OTHER and "native compaction is unsupported" in failure.message
    assert complete(NATIVE, long_conversation(), native_compaction=True).text.startswith("{")


def test_native_knobs_are_not_used_up_by_other_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """An ordinary reply or a text summary could not show a native defect, so it must not spend one;
    and a native compaction must not spend a text summary's knob."""
    monkeypatch.setenv(FAULTS_ENV, "native-invalidx1,summary-sectionsx1")
    simulator = Simulator()
    assert "offline simulator" in simulator.reply(NATIVE, [{"role": "user", "content": "hello"}]).text
    native = simulator.reply(NATIVE, long_conversation(), native_compaction=True)
    assert native.text == NATIVE_INVALID_TEXT
    assert json.loads(simulator.reply(NATIVE, long_conversation(), native_compaction=True).text)
    summary = simulator.reply(NATIVE, compaction_messages(("[seq 1] user: fix it",)))
    assert "## Key Decisions" not in summary.text  # the summary knob was still there to fire


def test_the_general_knobs_fire_on_native_compaction_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULTS_ENV, "truncatex1")
    truncated = complete(NATIVE, long_conversation(), native_compaction=True)
    assert truncated.finish_reason == "length"
    with pytest.raises(ValueError):
        json.loads(truncated.text)
    monkeypatch.setenv(FAULTS_ENV, "overflowx1")
    assert failure_of(NATIVE, long_conversation(), native_compaction=True).kind is FailureKind.INPUT_OVERFLOW


def test_the_knob_names_parse_and_a_state_check_comes_before_any_knob(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan = FaultPlan.parse("native-invalid, native-unsupportedx3")
    assert plan.faults == (("native-invalid", None), ("native-unsupported", 3))
    monkeypatch.setenv(FAULTS_ENV, "429x1")
    state = native_state_of(NATIVE, [{"role": "user", "content": "x"}])
    simulator = Simulator()
    with pytest.raises(SimulatorFault) as caught:
        simulator.reply("foya-sim/small", [{"role": "user", "content": "hi"}], native_state=state)
    assert caught.value.kind == "bad_request"
    with pytest.raises(SimulatorFault) as limited:  # the 429 was not spent by the refused request
        simulator.reply("foya-sim/small", [{"role": "user", "content": "hi"}])
    assert limited.value.kind == "429"

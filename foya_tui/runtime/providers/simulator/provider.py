"""Provides `Simulator`, the simulator's entry point: one request in, one deterministic reply out.

LiteLLM's custom provider (the adapter in `litellm_client.py`) calls `Simulator.reply`, which
checks the request (model, native state, context window), lets a fault knob fire, and hands the
request to the behaviour it asks for: a native compaction (`native.py`), a compaction summary
(`summary.py`), an exploration (`explore.py`) or an ordinary chat turn (`chat.py`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from foya_tui.runtime.providers.catalog import SIMULATOR_MODELS
from foya_tui.runtime.providers.simulator.chat import compose, plan_tool_calls
from foya_tui.runtime.providers.simulator.explore import exploration_of, frontier
from foya_tui.runtime.providers.simulator.faults import CHAT_FAULT_NAMES, FaultBudget, SimulatorFault
from foya_tui.runtime.providers.simulator.messages import is_handoff
from foya_tui.runtime.providers.simulator.native import checked_native_state, native_reply
from foya_tui.runtime.providers.simulator.reply import SimulatedReply
from foya_tui.runtime.providers.simulator.summary import is_compaction_request, summary_reply
from foya_tui.runtime.tokens import TokenCounter, count_messages, count_tools, default_counter


def _tool_names(tools: Sequence[Mapping[str, Any]]) -> frozenset[str]:
    names = set()
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            names.add(function["name"])
    return frozenset(names)


class Simulator:
    """Answers chat requests deterministically from what it can observe."""

    def __init__(self, workdir: Path | None = None, counter: TokenCounter | None = None) -> None:
        self._workdir = workdir
        self._counter = counter
        self._faults = FaultBudget()

    @property
    def counter(self) -> TokenCounter:
        return self._counter or default_counter()

    def reply(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] = (),
        *,
        native_state: Mapping[str, Any] | None = None,
        native_compaction: bool = False,
    ) -> SimulatedReply:
        """Answer one request. `native_compaction` asks for a native state of `messages` instead of a
        reply; `native_state` is a state an earlier native compaction returned (SPEC C-11, R-2)."""
        info = SIMULATOR_MODELS.get(model)
        if info is None:
            raise SimulatorFault("unknown", f"the simulator has no model {model!r}")
        # Checked before any fault knob: a request that crosses routes is wrong whatever else happens.
        state_summary = checked_native_state(model, native_state, native_compaction)
        window = info.window or 0
        # Counted as Foya's compiler counts a request: messages, plus the tool schemas, plus the
        # native state the provider holds for it.
        prompt_tokens = count_messages(messages, self.counter) + (
            count_tools(tools, self.counter) if tools else 0
        )
        if state_summary is not None:
            prompt_tokens += self.counter.count(state_summary)
        compaction = not native_compaction and is_compaction_request(messages)
        fault = self._faults.take(compaction, native=native_compaction)
        if fault == "429":
            raise SimulatorFault("429", "Rate limit reached for requests (simulated)")
        if fault == "quota":
            raise SimulatorFault("quota", "You exceeded your current quota (simulated insufficient_quota)")
        if fault == "overflow" or prompt_tokens > window:
            raise SimulatorFault(
                "overflow",
                f"This model's maximum context length is {window} tokens. However, your messages "
                f"resulted in {max(prompt_tokens, window + 1)} tokens. "
                "Please reduce the length of the messages.",
            )
        if fault == "native-unsupported":
            raise SimulatorFault("bad_request", f"{model}: native compaction is unsupported here (simulated)")
        if native_compaction:
            return native_reply(model, messages, state_summary, fault, prompt_tokens, self.counter)
        if compaction:  # never a tool call: the summariser offers no tools and wants text
            return summary_reply(messages, fault, prompt_tokens, self.counter)
        available = _tool_names(tools)
        # The hidden reminder asks for the frontier, then the work goes on as if it were not there.
        handoff = bool(messages) and is_handoff(messages[-1])
        work = list(messages[:-1]) if handoff else list(messages)
        exploration = exploration_of(work, available, self._workdir)
        calls = exploration.next_calls if exploration is not None else plan_tool_calls(work, available)
        lead = frontier(work, exploration, calls) if handoff else ""
        if calls:
            arguments = "".join(call.name + call.arguments for call in calls)
            return SimulatedReply(
                text=lead,
                finish_reason="tool_calls",
                prompt_tokens=prompt_tokens,
                completion_tokens=self.counter.count(lead + arguments),
                tool_calls=calls,
            )
        if exploration is not None:
            body = exploration.report(window, prompt_tokens)
        else:
            body = compose(work, window, prompt_tokens, state_summary, self._workdir)
        text = f"{lead}\n\n{body}" if lead else body
        finish_reason = "stop"
        if fault == "truncate":
            text, finish_reason = text[: max(1, len(text) // 2)], "length"
        return SimulatedReply(
            text=text,
            finish_reason=finish_reason,
            prompt_tokens=prompt_tokens,
            completion_tokens=self.counter.count(text),
            overflow_after_output=self._faults.take(False, only=CHAT_FAULT_NAMES) == "overflow-midstream",
        )

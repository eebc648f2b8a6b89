"""Provides `SimulatedReply`, what the simulator answers one request with."""

from __future__ import annotations

from dataclasses import dataclass

from foya_tui.runtime.model import ToolCall


@dataclass(frozen=True)
class SimulatedReply:
    text: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    tool_calls: tuple[ToolCall, ...] = ()
    overflow_after_output: bool = False
    """The `overflow-midstream` knob: the stream delivers some text, then the provider rejects the
    context (SPEC K-6: past the output boundary nothing may be replayed). It fires on a reply in
    text, not on one that only calls tools."""


def context_note(prompt_tokens: int, window: int) -> str:
    """The line that ends each text reply: what the provider counted and its window, in tokens.
    No percentage: Foya's meter gives the one percentage there is (of the input budget, which a
    provider does not know), so the reply and the meter never show two different shares."""
    return f"_Context: {prompt_tokens:,} tokens in this request; the window is {window:,}._"

"""Provides ScriptedClient: a provider client that answers each model call from a script.

Tests of the tool loop and of tool blocks need exact tool calls in a fixed order, which no model
gives; the HTTP path itself is covered by the loopback server (`openai_server.py`).
"""

from __future__ import annotations

from collections.abc import Iterator

from foya_tui.runtime.model import ToolCall
from foya_tui.runtime.providers.client import (
    CancelToken,
    ProviderRequest,
    StreamEvent,
    StreamFinished,
    TextDelta,
)


class ScriptedClient:
    """Each step is a batch of tool calls or a text reply; after the script, it answers "done"."""

    def __init__(self, *steps: tuple[ToolCall, ...] | str) -> None:
        self.steps = list(steps)
        self.requests: list[ProviderRequest] = []

    def stream(self, request: ProviderRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        self.requests.append(request)
        step = self.steps.pop(0) if self.steps else "done"
        if isinstance(step, str):
            yield TextDelta(step)
            yield StreamFinished(text=step, reasoning="", tool_calls=(), finish_reason="stop", usage=None)
        else:
            yield StreamFinished(
                text="", reasoning="", tool_calls=step, finish_reason="tool_calls", usage=None
            )

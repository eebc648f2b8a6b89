"""Provides ScriptedClient: a provider client that answers each model call from a script.

Tests of the tool loop and of tool blocks need exact tool calls in a fixed order, which no model
gives; the HTTP path itself is covered by the loopback server (`openai_server.py`). Compaction
requests (`complete()`, SPEC C-11) answer from a separate script of summaries.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

from foya_tui.runtime.model import ToolCall
from foya_tui.runtime.providers.client import (
    CANCELLED_COMPLETION,
    CancelToken,
    Completion,
    ProviderRequest,
    StreamEvent,
    StreamFinished,
    TextDelta,
)
from foya_tui.runtime.providers.summary_format import SECTION_TITLES

GENERIC_SUMMARY = "\n\n".join(
    f"## {title}\nScripted {title.lower()}: this generic summary stands in for a model's."
    for title in SECTION_TITLES
)
"""What complete() answers once its script has run out: valid by SPEC C-8, so tests that do not
care about the summary still compact."""


class ScriptedClient:
    """Each step is a batch of tool calls or a text reply; after the script, it answers "done".

    `summaries` scripts complete(): a str is a summary that stopped normally, a Completion is
    returned as given, an Exception instance is raised; after the script, GENERIC_SUMMARY. Requests
    that reach complete() are recorded in `summary_requests`.
    """

    def __init__(
        self,
        *steps: tuple[ToolCall, ...] | str,
        summaries: Sequence[str | Completion | Exception] = (),
    ) -> None:
        self.steps = list(steps)
        self.requests: list[ProviderRequest] = []
        self.summaries = list(summaries)
        self.summary_requests: list[ProviderRequest] = []

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

    def complete(self, request: ProviderRequest, cancel: CancelToken) -> Completion:
        if cancel.cancelled:  # as the protocol says: nothing is sent, nothing of the script used
            return CANCELLED_COMPLETION
        self.summary_requests.append(request)
        answer = self.summaries.pop(0) if self.summaries else GENERIC_SUMMARY
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, str):
            return Completion(text=answer, finish_reason="stop", usage=None)
        return answer


class WaitingSummaries(ScriptedClient):
    """Replies from a script; a compaction request waits until it is cancelled (as a slow provider
    would), so a test can press esc while the compaction runs."""

    def __init__(self, *steps: str) -> None:
        super().__init__(*steps)
        self.asked = threading.Event()

    def complete(self, request: ProviderRequest, cancel: CancelToken) -> Completion:
        self.asked.set()
        while not cancel.cancelled:
            cancel._event.wait(0.01)
        return CANCELLED_COMPLETION

"""Provides the provider-client interface: a request, the stream of events it yields, a one-shot
completion, cancellation."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from foya_tui.runtime.model import ToolCall, Usage
from foya_tui.runtime.providers.routes import Route


@dataclass(frozen=True)
class ProviderRequest:
    """What is sent to a provider: OpenAI-shaped messages and tools for one route."""

    route: Route
    messages: tuple[Mapping[str, Any], ...]
    tools: tuple[Mapping[str, Any], ...] = ()
    max_output_tokens: int | None = None
    native_state: Mapping[str, Any] | None = None
    """Opaque provider-native context state (SPEC C-11), only ever for the route that made it (R-2)."""
    native_compaction: bool = False
    """Ask the provider for a native context state of `messages` instead of a reply (SPEC C-11)."""


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True)
class ToolCallDelta:
    """A tool call has started or grown; the full calls arrive in StreamFinished."""

    index: int
    name: str


@dataclass(frozen=True)
class StreamFinished:
    text: str
    reasoning: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str
    usage: Usage | None
    """None when the provider reported nothing (or 0/0/0): unknown, not zero."""


StreamEvent = TextDelta | ReasoningDelta | ToolCallDelta | StreamFinished


@dataclass(frozen=True)
class Completion:
    """The whole answer to one non-streamed request (SPEC C-11: summary, finish reason, usage)."""

    text: str
    finish_reason: str
    """As the provider said ("stop", "length", …), or "cancelled" when the caller gave up."""
    usage: Usage | None
    """None when the provider reported nothing (or 0/0/0): unknown, not zero."""


CANCELLED_COMPLETION = Completion(text="", finish_reason="cancelled", usage=None)


@dataclass
class CancelToken:
    """Set from any thread to stop a stream between chunks."""

    _event: threading.Event = field(default_factory=threading.Event)

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


class ProviderClient(Protocol):
    """Sends requests to one provider; every failure is a classified ProviderError."""

    def stream(self, request: ProviderRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        """Streams one request. Raises ProviderError (classified) on failure; ends with StreamFinished."""
        ...

    def complete(self, request: ProviderRequest, cancel: CancelToken) -> Completion:
        """Sends one NON-streaming request and returns the whole answer.

        The text compactor needs the summary, its finish reason and usage, not deltas (SPEC C-11).
        Raises ProviderError (classified, secrets redacted) on failure and never retries: the
        caller decides. When `cancel` is set before the request is sent, or by the time the answer
        arrives, returns `CANCELLED_COMPLETION` (empty text, finish reason "cancelled", no usage)
        instead of raising.
        """
        ...

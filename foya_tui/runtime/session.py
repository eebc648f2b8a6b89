"""Provides the Session: the turn loop over one conversation's event log.

A turn appends the user message (one transaction), builds the request from valid history,
streams the reply and appends the assistant message with its usage (one transaction). Every
step is reported as a RuntimeUpdate. Provider failures are classified; only rate limits and
connection errors that happen before any output are retried, with Foya's own backoff.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from foya_tui.runtime.context.compiler import ContextCompiler, RequestView
from foya_tui.runtime.model import EventKind, NewEvent, SessionInfo, ToolCall, Usage
from foya_tui.runtime.providers.client import (
    CancelToken,
    ProviderClient,
    ProviderRequest,
    ReasoningDelta,
    StreamFinished,
    TextDelta,
    ToolCallDelta,
)
from foya_tui.runtime.providers.errors import FailureKind, ProviderError, output_limit_failure
from foya_tui.runtime.providers.litellm_client import retry_delay, sleep_unless_cancelled
from foya_tui.runtime.providers.routes import Route
from foya_tui.runtime.store import EventStore
from foya_tui.runtime.text import clean_user_text
from foya_tui.runtime.updates import (
    ContextUpdated,
    ReplyDelta,
    RetryScheduled,
    RuntimeUpdate,
    TurnFailed,
    TurnFinished,
    TurnStarted,
)

TITLE_LENGTH = 60


class EmptyMessageError(ValueError):
    """The user tried to send nothing."""


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 2
    backoff_seconds: float = 1.0


@dataclass
class _Attempt:
    text: list[str]
    output_started: bool = False


class Session:
    """One conversation: its store, its route and the turn loop."""

    def __init__(
        self,
        store: EventStore,
        info: SessionInfo,
        route: Route,
        client: ProviderClient,
        compiler: ContextCompiler,
        *,
        retry: RetryPolicy = RetryPolicy(),
    ) -> None:
        self.store = store
        self.info = info
        self.route = route
        self._client = client
        self._compiler = compiler
        self._retry = retry

    @property
    def id(self) -> str:
        return self.info.id

    def switch_route(self, route: Route) -> None:
        """Use another route from the next step on. Its own baseline applies (SPEC R-2); a switch
        alone never compacts, the next compile pre-flights the request against the new window."""
        self.route = route

    def context(self) -> RequestView:
        """Compile the next request without sending it (what `foya context` shows)."""
        return self._compiler.compile(self.id, self.route)

    def send(self, text: str, cancel: CancelToken | None = None) -> Iterator[RuntimeUpdate]:
        """Run one turn. The generator always ends with TurnFinished or TurnFailed."""
        cancel = cancel or CancelToken()
        cleaned = clean_user_text(text)
        if not cleaned:
            raise EmptyMessageError("the message is empty")
        (user_event,) = self.store.append(self.id, [NewEvent(EventKind.USER_MESSAGE, {"text": cleaned})])
        if not self.info.title:
            title = " ".join(cleaned.split())[:TITLE_LENGTH]
            self.store.set_title(self.id, title)
        self.info = self.store.get_session(self.id)
        yield TurnStarted(self.id, user_event.seq, self.route.id, self.route.model)
        yield from self._step(cancel)

    def _step(self, cancel: CancelToken) -> Iterator[RuntimeUpdate]:
        view = self.context()
        yield ContextUpdated(self.id, view.report())
        request = view.provider_request()
        attempt = 0
        while True:
            attempt += 1
            progress = _Attempt(text=[])
            try:
                finished = yield from self._stream(request, cancel, progress)
            except ProviderError as error:
                failure = error.failure
                if failure.retryable and not progress.output_started and attempt <= self._retry.max_retries:
                    delay = retry_delay(failure, attempt, self._retry.backoff_seconds)
                    yield RetryScheduled(self.id, failure.message, attempt, delay)
                    if sleep_unless_cancelled(delay, cancel):
                        continue
                    yield TurnFailed(self.id, "cancelled by the user", "cancelled")
                    return
                # Whatever already streamed was seen by the user: keep it in history.
                self._append_reply("".join(progress.text), "", (), "error", None, view)
                yield TurnFailed(self.id, failure.message, str(failure.kind))
                return
            if finished is None:  # cancelled mid-stream
                self._append_reply("".join(progress.text), "", (), "cancelled", None, view)
                yield TurnFailed(self.id, "cancelled by the user", "cancelled")
                return
            seq = self._append_reply(
                finished.text,
                finished.reasoning,
                finished.tool_calls,
                finished.finish_reason,
                finished.usage,
                view,
            )
            yield ContextUpdated(self.id, self.context().report())
            notice = output_limit_failure().message if finished.finish_reason == "length" else None
            yield TurnFinished(
                self.id,
                seq or view.through_seq,
                finished.text,
                finished.finish_reason,
                finished.usage,
                notice,
            )
            return

    def _stream(
        self, request: ProviderRequest, cancel: CancelToken, progress: _Attempt
    ) -> Iterator[RuntimeUpdate]:
        for event in self._client.stream(request, cancel):
            if isinstance(event, TextDelta):
                progress.output_started = True
                progress.text.append(event.text)
                yield ReplyDelta(self.id, event.text)
            elif isinstance(event, (ReasoningDelta, ToolCallDelta)):
                progress.output_started = True
            elif isinstance(event, StreamFinished):
                if event.finish_reason == "cancelled":
                    return None
                return event
        return None

    def _append_reply(
        self,
        text: str,
        reasoning: str,
        tool_calls: tuple[ToolCall, ...],
        finish_reason: str,
        usage: Usage | None,
        view: RequestView,
    ) -> int | None:
        """Append the assistant message and the usage record in one transaction (SPEC H-5)."""
        if finish_reason in ("error", "cancelled") and not text:
            return None
        assistant = {
            "text": text,
            "tool_calls": [call.to_payload() for call in tool_calls],
            "finish_reason": finish_reason,
            "route_id": view.route.id,
            "model": view.route.model,
        }
        if reasoning:
            assistant["reasoning"] = reasoning
        batch = [NewEvent(EventKind.ASSISTANT_MESSAGE, assistant)]
        if finish_reason not in ("error", "cancelled"):
            batch.append(
                NewEvent(
                    EventKind.PROVIDER_USAGE,
                    {
                        "route_id": view.route.id,
                        "model": view.route.model,
                        "through_seq": view.through_seq,
                        "revision": view.revision,
                        "fixed_tokens": view.layers.fixed,
                        "estimate": view.estimate.total,
                        "usage": usage.to_payload() if usage else None,
                    },
                )
            )
        appended = self.store.append(self.id, batch)
        self.info = self.store.get_session(self.id)
        return appended[0].seq


__all__ = ["EmptyMessageError", "FailureKind", "RetryPolicy", "Session"]

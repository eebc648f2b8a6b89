"""Provides the messages the bridge posts from its workers; names say what already happened."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:
    from foya_tui.runtime.model import Event
    from foya_tui.runtime.providers.routes import Route
    from foya_tui.runtime.runtime import RouteOption
    from foya_tui.runtime.session import Session
    from foya_tui.runtime.tools.approval import ApprovalRequest
    from foya_tui.runtime.updates import RuntimeUpdate, ToolCallFinished
    from foya_tui.ui.approval import ApprovalAnswer
    from foya_tui.ui.screens.tool_output import PreparedText
    from foya_tui.ui.widgets.message_list import HistoryItem
    from foya_tui.ui.widgets.tool_block import ToolOutcome


class RouteResolved(Message):
    """A new conversation is ready to start on this route (its session is created on the first send)."""

    def __init__(self, route: Route) -> None:
        super().__init__()
        self.route = route


class SessionOpened(Message):
    """An existing session was opened; `events` is its whole stored history and `items` what the
    conversation shows of it (built in the worker: tool results are summarised there)."""

    def __init__(self, session: Session, events: list[Event], items: list[HistoryItem]) -> None:
        super().__init__()
        self.session = session
        self.events = events
        self.items = items


class SessionCreated(Message):
    """The first message of a new conversation created its session in the store."""

    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session


class RuntimeUpdated(Message):
    """A running turn reported progress (started, a reply fragment, a retry, finished, failed)."""

    def __init__(self, update: RuntimeUpdate) -> None:
        super().__init__()
        self.update = update


class ToolResultRecorded(Message):
    """A tool call of the running turn finished and its result was stored; `outcome` is its bounded
    preview and digest, prepared in the worker (the runtime's `ToolCallFinished` is in `update`)."""

    def __init__(self, update: ToolCallFinished, outcome: ToolOutcome) -> None:
        super().__init__()
        self.update = update
        self.outcome = outcome


class ApprovalRequested(Message):
    """The running turn waits for the user to allow or deny a tool call; the dialog answers through
    `answer` (the turn's thread is blocked until then, or until the turn is cancelled)."""

    def __init__(self, request: ApprovalRequest, answer: ApprovalAnswer) -> None:
        super().__init__()
        self.request = request
        self.answer = answer


class ToolResultRead(Message):
    """The full text of a stored tool result was read from history and prepared for viewing."""

    def __init__(self, seq: int, name: str, facts: str, prepared: PreparedText) -> None:
        super().__init__()
        self.seq = seq
        self.name = name
        self.facts = facts
        self.prepared = prepared


class BridgeFailed(Message):
    """A worker failed outside the turn protocol (store, settings); `reason` is one line."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason


class ContextReported(Message):
    """The next request was compiled without sending it: a new conversation's preview, a resumed
    session's next request, or the request after a route switch. `report` is
    `RequestView.report()`; `steps` (input tokens per earlier step) replaces the meter's steps,
    None keeps them."""

    def __init__(self, report: Mapping[str, Any], steps: tuple[int, ...] | None = None) -> None:
        super().__init__()
        self.report = report
        self.steps = steps


class RoutesListed(Message):
    """The routes the switcher offers, and the id of the one in use."""

    def __init__(self, options: list[RouteOption], current_id: str | None) -> None:
        super().__init__()
        self.options = options
        self.current_id = current_id


class RouteSwitched(Message):
    """The session (or, before its first message, the new conversation) now uses `route`."""

    def __init__(self, route: Route) -> None:
        super().__init__()
        self.route = route


class StepsRecorded(Message):
    """Model calls of the running turn finished and their usage was stored; `steps` are their input
    tokens, oldest first (calls without reported usage are left out)."""

    def __init__(self, steps: tuple[int, ...]) -> None:
        super().__init__()
        self.steps = steps

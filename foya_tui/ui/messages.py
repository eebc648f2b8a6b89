"""Provides the messages the bridge posts from its workers; names say what already happened."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from foya_tui.runtime.model import Event
    from foya_tui.runtime.providers.routes import Route
    from foya_tui.runtime.session import Session
    from foya_tui.runtime.updates import RuntimeUpdate


class RouteResolved(Message):
    """A new conversation is ready to start on this route (its session is created on the first send)."""

    def __init__(self, route: Route) -> None:
        super().__init__()
        self.route = route


class SessionOpened(Message):
    """An existing session was opened; `events` is its whole stored history."""

    def __init__(self, session: Session, events: list[Event]) -> None:
        super().__init__()
        self.session = session
        self.events = events


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


class BridgeFailed(Message):
    """A worker failed outside the turn protocol (store, settings); `reason` is one line."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason

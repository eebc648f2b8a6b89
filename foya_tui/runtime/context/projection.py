"""Provides the model projection of a session: what one request carries (SPEC V, X-6).

Without a checkpoint the projection is every valid message of canonical history, with
interrupted tool groups closed so the provider accepts it.
"""

from __future__ import annotations

from collections.abc import Sequence

from foya_tui.runtime.history import history_messages
from foya_tui.runtime.model import Event, Message, Role
from foya_tui.runtime.providers.client import ProviderRequest
from foya_tui.runtime.providers.routes import Route


def projection_messages(events: Sequence[Event], system_text: str) -> list[Message]:
    return [Message(role=Role.SYSTEM, content=system_text), *history_messages(events)]


def build_request(events: Sequence[Event], route: Route, system_text: str) -> ProviderRequest:
    messages = projection_messages(events, system_text)
    return ProviderRequest(route=route, messages=tuple(message.to_openai() for message in messages))

"""Provides approval of tool calls: the modes `read-only`, `ask` and `auto`, and the Approver that
asks the user (the TUI's dialog; nobody in a headless run).

A refusal is not an error of Foya's: it becomes the tool's result, so the model learns why and
the user sees it in the conversation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from foya_tui.runtime.model import ToolCall
from foya_tui.runtime.providers.client import CancelToken
from foya_tui.runtime.tools.registry import Effect


class Decision(StrEnum):
    ALLOW_ONCE = "allow_once"
    ALLOW_SESSION = "allow_session"
    """Allow this tool for the rest of the session without asking again."""
    DENY = "deny"


@dataclass(frozen=True)
class ApprovalRequest:
    session_id: str
    call: ToolCall
    effect: Effect


class Approver(Protocol):
    """Asks the user; blocks the calling (worker) thread until answered or cancelled."""

    def decide(self, request: ApprovalRequest, cancel: CancelToken) -> Decision: ...


@dataclass
class ApprovalPolicy:
    """The approval mode of a session plus what the user allowed for the session."""

    mode: str
    approver: Approver | None = None
    allowed_for_session: set[str] = field(default_factory=set)

    def refusal(self, request: ApprovalRequest, cancel: CancelToken) -> str | None:
        """None when the call may run; otherwise the one-line reason given to the model."""
        if request.effect is Effect.READ_ONLY or self.mode == "auto":
            return None
        kind = "shell commands" if request.effect is Effect.SHELL else "file writes"
        if self.mode == "read-only":
            return f"refused: the approval mode is read-only, so {kind} are not allowed in this session"
        if request.call.name in self.allowed_for_session:
            return None
        if self.approver is None:
            return (
                f"refused: {request.call.name} needs the user's approval (approval mode 'ask'), and a "
                "headless run cannot ask; the user can rerun with --approval auto to allow it"
            )
        decision = self.approver.decide(request, cancel)
        if decision is Decision.ALLOW_SESSION:
            self.allowed_for_session.add(request.call.name)
            return None
        if decision is Decision.ALLOW_ONCE:
            return None
        return f"refused: the user denied {request.call.name}"

"""Provides BridgeApprover: the runtime's Approver for the TUI, which asks the user in a dialog.

The runtime asks from the turn's worker thread and must wait for the answer there; the UI thread
must never wait. So the approver posts `ApprovalRequested` (carrying a one-shot `ApprovalAnswer`)
and blocks its own thread on a `threading.Event`, waking every POLL_SECONDS to notice a cancelled
turn. The dialog answers from the UI thread through `ApprovalAnswer.give`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from foya_tui.ui.messages import ApprovalRequested

if TYPE_CHECKING:
    from textual.message import Message

    from foya_tui.runtime.providers.client import CancelToken
    from foya_tui.runtime.tools.approval import ApprovalRequest, Decision

POLL_SECONDS = 0.1


class ApprovalAnswer:
    """A one-shot answer: the first `give` counts; later ones (a late click) are ignored."""

    def __init__(self) -> None:
        self._given = threading.Event()
        self._lock = threading.Lock()
        self.decision: Decision | None = None

    @property
    def given(self) -> bool:
        return self._given.is_set()

    def give(self, decision: Decision) -> None:
        with self._lock:
            if self._given.is_set():
                return
            self.decision = decision
            self._given.set()

    def wait(self, cancel: CancelToken, poll: float = POLL_SECONDS) -> Decision:
        """Block until answered; a cancelled turn is a denial (and ends the wait within `poll`)."""
        from foya_tui.runtime.tools.approval import Decision

        while not self._given.wait(poll):
            if cancel.cancelled:
                self.give(Decision.DENY)
        assert self.decision is not None
        return self.decision


class BridgeApprover:
    """Asks the user through the UI; `post` is the Bridge's thread-safe `post_message`."""

    def __init__(self, post: Callable[[Message], object]) -> None:
        self._post = post

    def decide(self, request: ApprovalRequest, cancel: CancelToken) -> Decision:
        # Imported here: the tools' modules (and the store under them) are not needed before a
        # tool runs, and the UI imports this module before its first frame.
        from foya_tui.runtime.tools.approval import Decision

        if cancel.cancelled:
            return Decision.DENY
        answer = ApprovalAnswer()
        self._post(ApprovalRequested(request, answer))
        return answer.wait(cancel)

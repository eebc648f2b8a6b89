"""Provides what the conversation screen is busy with, and the rules that refuse an action meanwhile.

The screen runs one thing at a time: opening the session, a reply, a route switch, a manual
compaction (making its candidate, then waiting for the answer and committing or declining it),
an undo, a rewind or a fork. `Activity` names it, and its value is the line the prompt shows
instead of its placeholder. `ConversationState` holds it and says, for each action the user can
ask for, whether it is refused now and with which one-line notification. It knows nothing of
Textual, so the rules are tested without an app (tests/ui/test_conversation_state.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Literal


class Activity(Enum):
    """What the screen waits for; the value is the prompt's line while it runs."""

    OPENING = "opening the session…"
    REPLYING = "a reply is being written · esc cancel · you can type your next message"
    SWITCHING = "switching the route…"
    COMPACTING = "compacting the context · esc cancel · you can type your next message"
    """A manual compaction makes its candidate (esc cancels it)."""
    DECIDING = "a compaction waits for your answer"
    """The candidate is shown; then it is committed or declined (no longer cancellable)."""
    UNDOING = "undoing the checkpoint…"
    REWINDING = "rewinding…"
    FORKING = "forking a new session…"


SEND_REFUSED = "Wait for the reply to finish, or press esc to cancel it."
SWITCH_REFUSED = "The route cannot change while a reply is being written; wait for it or press esc."
NEW_REFUSED = "Cancel the running reply first (esc)."
APPROVAL_REFUSED = "The approval mode changes between replies; wait for this one or press esc."
TURN_REFUSED = "Cannot {} while a reply is being written; wait for it or press esc."
NOT_YET = "Not yet: {}"
NO_SESSION = "Nothing to {} yet: send a message first."


@dataclass(frozen=True)
class Refusal:
    """Why an action does not start now: the notification's one line, and how it is shown."""

    reason: str
    severity: Literal["information", "warning"] = "information"
    timeout: float | None = None
    """Seconds on screen (None: the app's default, as warnings have)."""


def _not_yet(activity: Activity) -> Refusal:
    return Refusal(NOT_YET.format(activity.value), timeout=3)


@dataclass(frozen=True)
class ConversationState:
    """The activity running now (None: the screen is idle and Enter sends)."""

    activity: Activity | None = Activity.OPENING
    step: tuple[int, int] | None = None
    """The running turn's model call and the turn's step limit, once its first step began."""

    @property
    def idle(self) -> bool:
        return self.activity is None

    def at_step(self, number: int, max_steps: int) -> ConversationState:
        """The same activity, now at model call `number` of at most `max_steps` (a reply only)."""
        return replace(self, step=(number, max_steps)) if self.turn_running else self

    @property
    def busy_line(self) -> str | None:
        """What the prompt shows instead of its placeholder (None: its placeholder); a reply says
        which model call of the turn runs, so a long tool loop shows that it moves."""
        if self.activity is None:
            return None
        if self.turn_running and self.step is not None:
            number, max_steps = self.step
            return f"step {number:,} of {max_steps:,} · {self.activity.value}"
        return self.activity.value

    @property
    def turn_running(self) -> bool:
        return self.activity is Activity.REPLYING

    @property
    def compacting(self) -> bool:
        """A manual compaction is under way (making its candidate, waiting for the answer, or
        committing or declining it); it always ends with its own CompactionEnded."""
        return self.activity in (Activity.COMPACTING, Activity.DECIDING)

    @property
    def proposing(self) -> bool:
        """The manual compaction still makes its candidate: esc cancels it."""
        return self.activity is Activity.COMPACTING

    def refuse_send(self) -> Refusal | None:
        """Enter sends only when nothing runs; typing goes on either way."""
        return Refusal(SEND_REFUSED, timeout=3) if self.activity is not None else None

    def refuse_switch(self) -> Refusal | None:
        """The route switcher opens, and a chosen route is applied, only when nothing runs."""
        if self.turn_running:
            return Refusal(SWITCH_REFUSED, "warning")
        return _not_yet(self.activity) if self.activity is not None else None

    def refuse_approval(self) -> Refusal | None:
        """The approval mode changes only when nothing runs (a running turn may be asking)."""
        if self.turn_running:
            return Refusal(APPROVAL_REFUSED, "warning")
        return _not_yet(self.activity) if self.activity is not None else None

    def refuse_new_conversation(self) -> Refusal | None:
        if self.turn_running:
            return Refusal(NEW_REFUSED, "warning")
        return _not_yet(self.activity) if self.activity is not None else None

    def refuse(self, action: str, *, has_session: bool) -> Refusal | None:
        """Whether `action` ("compact", "undo a checkpoint", "rewind", "fork") cannot start: they
        change how history is seen, so they wait for whatever runs, and need a session to act on."""
        if self.turn_running:
            return Refusal(TURN_REFUSED.format(action), "warning")
        if self.activity is not None:
            return _not_yet(self.activity)
        if not has_session:
            return Refusal(NO_SESSION.format(action), timeout=3)
        return None

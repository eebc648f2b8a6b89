"""Provides the approval dialog: a tool call that writes files or runs a command waits for a yes.

It shows what would run (tool, effect, arguments, a shell command as it would be typed) and
returns the user's Decision; None means Escape: deny *and* stop the turn, which the conversation
screen does. Arguments are model output, so they are cleaned and shown as plain Text.

Keys typed into the prompt just before the dialog appeared must not allow anything, so for
GRACE_SECONDS after it opens the dialog ignores its allow keys and buttons (denying is always safe).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from foya_tui.runtime.text import terminal_safe
from foya_tui.runtime.tools.approval import Decision
from foya_tui.runtime.tools.sandbox import shell_confinement
from foya_tui.ui.widgets.tool_block import ARGUMENT_CHARS, parse_arguments, pretty_arguments

if TYPE_CHECKING:
    from foya_tui.runtime.tools.approval import ApprovalRequest

EFFECTS = {"write": "writes files", "shell": "runs a shell command"}
HELP = "esc denies and stops the turn · d denies and lets the turn go on"


def effect_label(effect: str) -> str:
    return EFFECTS.get(str(effect), str(effect).replace("_", " "))


def arguments_text(name: str, arguments: str) -> str:
    """What the call would do: a shell command plainly (then any other argument as JSON), else
    the arguments as pretty JSON; cleaned and cut to ARGUMENT_CHARS."""
    parsed = parse_arguments(arguments)
    command = parsed.get("command") if isinstance(parsed, dict) else None
    if name != "shell" or not isinstance(command, str):
        return pretty_arguments(arguments)
    rest = {key: value for key, value in parsed.items() if key != "command"}
    text = terminal_safe(command)
    if len(text) > ARGUMENT_CHARS:
        text = f"{text[:ARGUMENT_CHARS]}\n… {len(text) - ARGUMENT_CHARS:,} more characters"
    if rest:
        text += "\n\n" + pretty_arguments(json.dumps(rest))
    return text


class ApprovalScreen(ModalScreen[Decision | None]):
    """Allow once, allow for the session, deny; Escape denies and stops the turn (None)."""

    CSS_PATH = "approval.tcss"
    GRACE_SECONDS: ClassVar[float] = 0.4
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "a", "answer('allow_once')", "allow once", id="approval.allow_once", tooltip="Run this call once"
        ),
        Binding(
            "s",
            "answer('allow_session')",
            "allow for session",
            id="approval.allow_session",
            tooltip="Run this call and let this tool run for the rest of the session without asking",
        ),
        Binding(
            "d",
            "answer('deny')",
            "deny",
            id="approval.deny",
            tooltip="Do not run it; the model is told that you denied it and the turn goes on",
        ),
        Binding(
            "escape",
            "stop_turn",
            "deny and stop",
            id="approval.stop",
            tooltip="Do not run it and stop the turn",
        ),
    ]

    def __init__(self, request: ApprovalRequest, mode: str = "ask") -> None:
        super().__init__()
        self.request = request
        self.mode = mode
        self._opened = time.monotonic()

    def compose(self) -> ComposeResult:
        call = self.request.call
        name = terminal_safe(call.name)
        with Vertical(id="approval-dialog") as dialog:
            dialog.border_title = "Approve a tool call?"
            dialog.border_subtitle = f"approval: {self.mode}"
            yield Static(
                Text.assemble((f"{name} ", "bold"), effect_label(self.request.effect)), id="approval-what"
            )
            if self.request.effect == "shell":
                # Plainly: without bubblewrap the command runs with the user's full rights.
                yield Static(Text(shell_confinement().reason), id="approval-confinement")
            with VerticalScroll(id="approval-arguments"):
                yield Static(Text(arguments_text(call.name, call.arguments)), id="approval-code")
            with Horizontal(id="approval-buttons"):
                yield Button("Allow once (a)", id="allow_once", variant="primary")
                yield Button("Allow for this session (s)", id="allow_session")
                yield Button("Deny (d)", id="deny", variant="error")
            yield Static(Text(HELP), id="approval-help")

    def on_mount(self) -> None:
        self._opened = time.monotonic()
        self.query_one("#deny", Button).focus()  # Enter right away denies rather than allows

    def _too_early(self) -> bool:
        return time.monotonic() - self._opened < self.GRACE_SECONDS

    def action_answer(self, decision: str) -> None:
        if decision != Decision.DENY and self._too_early():
            return
        self.dismiss(Decision(decision))

    def action_stop_turn(self) -> None:
        self.dismiss(None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id:
            self.action_answer(event.button.id)

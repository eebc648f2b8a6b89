"""Provides ConfirmScreen: a small yes/no question before an action that changes what history
shows (undo a checkpoint, rewind). It only answers; the caller acts. Texts are shown as plain Text."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

HELP = "y confirms · n or esc keeps everything as it is"


class ConfirmScreen(ModalScreen[bool]):
    """Dismisses with True (y, or the confirm button) or False (n, esc, or the other button)."""

    CSS_PATH = "confirm.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "yes", id="confirm.yes", tooltip="Do it"),
        Binding("n", "answer(False)", "no", id="confirm.no", tooltip="Do nothing"),
        Binding("escape", "answer(False)", "cancel", id="confirm.cancel", tooltip="Do nothing"),
    ]

    def __init__(self, title: str, body: str, confirm: str) -> None:
        """`confirm` labels the yes button, e.g. "Rewind"."""
        super().__init__()
        self.title_text = title
        self.body = body
        self.confirm = confirm

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-dialog") as dialog:
            dialog.border_title = self.title_text
            yield Static(Text(self.body), id="confirm-body")
            with Horizontal(id="confirm-buttons"):
                yield Button(f"{self.confirm} (y)", id="yes", variant="warning")
                yield Button("Keep (n)", id="no")
            yield Static(Text(HELP), id="confirm-help")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()  # Enter right away keeps everything as it is

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "yes")

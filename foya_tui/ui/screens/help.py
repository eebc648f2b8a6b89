"""Provides HelpScreen: every user action, grouped by what a user wants to do, with its key, its
command-palette title and its slash command. It is drawn from the table in ui/actions.py (the
same table that declares the bindings, the palette and the README's key table); keys remapped in
`[keys]` show as remapped. Esc, F1, ? or q close it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from foya_tui.ui.actions import ACTIONS, Intent, key_line, palette_line

FOOTNOTE = (
    "In the prompt, / starts a command (Tab completes it; // sends a message that starts with /). "
    "Outside the prompt, ? opens this help. Esc closes it."
)


def intent_table(intent: Intent, keymap: Mapping[str, str]) -> Table:
    """One group of the help: key · palette · slash · what it does."""
    table = Table(box=None, show_header=False, padding=(0, 2, 0, 0), expand=True)
    table.add_column("key", style="bold", ratio=3)
    table.add_column("palette", style="italic", ratio=3)
    table.add_column("slash", ratio=3)
    table.add_column("what", ratio=7)
    for action in ACTIONS:
        if action.intent is intent:
            table.add_row(
                Text(key_line(action, keymap.get(action.id))),
                Text(palette_line(action)),
                Text(action.slash.usage if action.slash else ""),
                Text(action.summary),
            )
    return table


class HelpScreen(ModalScreen[None]):
    """The help: one screen, grouped by intent, closed with Esc."""

    CSS_PATH = "help.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,f1,question_mark,q", "close", "close", id="help.close", tooltip="Close the help"),
    ]

    def __init__(self, keymap: Mapping[str, str] | None = None) -> None:
        """`keymap`: binding id → the keys `[keys]` gave it, shown instead of the defaults."""
        super().__init__()
        self.keymap = dict(keymap or {})

    def compose(self) -> ComposeResult:
        with Vertical(id="help-dialog") as dialog:
            dialog.border_title = "Help · keys, palette commands (ctrl+p) and slash commands"
            with VerticalScroll(id="help-body"):
                for intent in Intent:
                    yield Static(Text(intent.value), classes="help-intent")
                    yield Static(intent_table(intent, self.keymap), classes="help-table")
            yield Static(Text(FOOTNOTE), id="help-footnote")

    def on_mount(self) -> None:
        self.query_one("#help-body").focus()  # the arrow keys and page keys scroll it

    def action_close(self) -> None:
        self.dismiss(None)

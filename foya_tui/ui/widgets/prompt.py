"""Provides Prompt: the multi-line message editor (Enter sends, ctrl+j inserts a newline)."""

from __future__ import annotations

from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import TextArea

PLACEHOLDER = "type a message · Enter send · {newline} newline · / commands · {help} help"
"""The prompt's hint; the keys are the ones in force (`[keys]` may move them)."""


def placeholder(newline: str = "ctrl+j", help_key: str = "F1") -> str:
    return PLACEHOLDER.format(newline=newline, help=help_key)


class Prompt(TextArea):
    """A TextArea whose Enter submits. Whether a submission is sent is the screen's decision."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "ctrl+j,shift+enter",
            "newline",
            "newline",
            id="prompt.newline",
            tooltip="Insert a line break without sending",
            show=False,
        ),
    ]

    class Submitted(Message):
        """The user pressed Enter in the prompt with this text."""

        def __init__(self, prompt: Prompt, text: str) -> None:
            super().__init__()
            self.prompt = prompt
            self.text = text

        @property
        def control(self) -> Prompt:
            return self.prompt

    class MessagesWanted(Message):
        """The user moved up out of the prompt (↑ while it is empty, or alt+↑): the message
        cursor takes over at the newest message; what was typed stays."""

    def __init__(self, hint: str | None = None) -> None:
        self._hint = hint or placeholder()
        super().__init__(
            id="prompt",
            placeholder=self._hint,
            soft_wrap=True,
            show_line_numbers=False,
            highlight_cursor_line=False,
            tab_behavior="focus",
        )

    def on_mount(self) -> None:
        # A blinking cursor only helps on a real terminal; headless runs (tests, snapshots,
        # screenshots) must render the same frame every time.
        if self.app.is_headless:
            self.cursor_blink = False

    async def _on_key(self, event: events.Key) -> None:
        # TextArea inserts a newline on Enter; here Enter submits, and newlines use ctrl+j.
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self.post_message(self.Submitted(self, self.text))
            return
        if event.key == "alt+up" or (event.key == "up" and not self.text):
            event.stop()
            event.prevent_default()
            self.post_message(self.MessagesWanted())
            return
        await super()._on_key(event)

    def action_newline(self) -> None:
        start, end = self.selection
        self.replace("\n", start, end, maintain_selection_offset=False)

    def set_busy(self, why: str | None) -> None:
        """Show why Enter would not send now (None: it would); typing works either way."""
        self.set_class(why is not None, "-busy")
        self.placeholder = why or self._hint

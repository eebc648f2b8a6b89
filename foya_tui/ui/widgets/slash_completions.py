"""Provides SlashCompletions: the list of slash commands the prompt's text may become, shown above
the prompt while a `/word` is typed (from the table of user actions, ui/actions.py). Tab puts the
highlighted one into the prompt, ↑/↓ choose; the screen owns those keys (priority bindings that
apply only while the list shows)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from foya_tui.ui.actions import slash_completions


class SlashCompletions(OptionList):
    """The completions of the prompt's text; hidden when there are none."""

    DEFAULT_CSS = """
    SlashCompletions {
        display: none;
        height: auto;
        max-height: 10;
        margin: 0 1;
        border: round $primary;
        background: $surface;
        &.-open {
            display: block;
        }
    }
    """

    def __init__(self) -> None:
        super().__init__(id="slash-completions")
        self.can_focus = False  # the prompt keeps the focus; the screen moves the highlight
        self.forms: tuple[str, ...] = ()

    def follow(self, text: str) -> None:
        """Show the completions of `text` (none: hide the list)."""
        found = slash_completions(text)
        forms = tuple(form for form, _ in found)
        if forms == self.forms:
            return
        self.forms = forms
        self.clear_options()
        for form, action in found:
            line = Text.assemble((form, "bold"), "  ", (action.summary, "dim"))
            self.add_option(Option(line, id=form))
        self.set_class(bool(forms), "-open")
        if forms:
            self.highlighted = 0

    @property
    def open(self) -> bool:
        return bool(self.forms)

    @property
    def chosen(self) -> str | None:
        """The highlighted completion."""
        if not self.forms or self.highlighted is None:
            return None
        return self.forms[self.highlighted]

    def move(self, step: int) -> None:
        if self.forms:
            self.highlighted = ((self.highlighted or 0) + step) % len(self.forms)

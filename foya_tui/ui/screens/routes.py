"""Provides the route switcher: a modal list of routes with their windows and baselines.

It only shows what the Bridge listed and returns the chosen route; switching (and compiling the
next request for the meter) is the Bridge's job. Route labels are shown as plain text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from foya_tui.runtime.providers.routes import Route
from foya_tui.runtime.text import terminal_safe

if TYPE_CHECKING:
    from foya_tui.runtime.runtime import RouteOption

HELP = "enter switch · esc close · nothing is sent"


def option_content(option: RouteOption, current: bool) -> Content:
    """Two lines: the route's label (● for the one in use), then its window and whether a baseline
    exists; a third says why the route cannot be sent, when it cannot."""
    window = f"window {option.window:,}" if option.window else "window unknown"
    baseline = "baseline" if option.has_baseline else "no usage yet"
    label = " ".join(terminal_safe(option.route.label).split())
    parts: list[str | tuple[str, str]] = [
        "● " if current else "  ",
        (label, "bold" if current else ""),
        "\n  ",
        f"{window} · {baseline}",
    ]
    if option.problem:
        parts += ["\n  ", (f"✗ {terminal_safe(option.problem)}", "$error")]
    return Content.assemble(*parts)


class RouteSwitcher(ModalScreen[Route | None]):
    """Pick the route for the next message; dismisses with the chosen Route, or None on escape."""

    CSS_PATH = "routes.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "close", id="route.close", tooltip="Close without switching"),
    ]

    def __init__(self, options: list[RouteOption], current_id: str | None) -> None:
        super().__init__()
        self.options = options
        self.current_id = current_id

    def compose(self) -> ComposeResult:
        with Vertical(id="route-dialog") as dialog:
            dialog.border_title = "Switch route"
            yield OptionList(
                *(
                    Option(option_content(option, option.route.id == self.current_id), id=option.route.id)
                    for option in self.options
                ),
                id="route-list",
            )
            yield Static(HELP, id="route-help", markup=False)

    def on_mount(self) -> None:
        routes = self.query_one(OptionList)
        current = next((i for i, o in enumerate(self.options) if o.route.id == self.current_id), 0)
        routes.highlighted = current
        routes.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        option = self.options[event.option_index]
        if option.problem:
            # Same pre-flight as `foya run`: a route that cannot be sent is not switched to.
            self.query_one("#route-help", Static).update(f"✗ {terminal_safe(option.problem)}")
            return
        self.dismiss(option.route)

    def action_close(self) -> None:
        self.dismiss(None)

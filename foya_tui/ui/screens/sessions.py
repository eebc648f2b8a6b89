"""Provides the sessions browser: a modal list of every stored session (title, model, updated,
events, checkpoints, size, and whether it never got a reply or its last turn failed), filtered as
you type, from which a session is opened, renamed, deleted (after a question) or left for the
session it was forked from; and the small dialog that asks for a new title.

The screen only shows what the Bridge listed and says what the user chose: a rename or a delete
through the callbacks the conversation screen gives it (which hand them to the Bridge, whose new
list comes back through `show`), a session to open by dismissing with it. Nothing here reads the
store. Titles and models are shown as plain text, passed
through the one sanitiser. The open conversation is never deleted from here: deleting what is on
screen underneath the dialog would leave the conversation showing a session that no longer
exists, so the browser says to open another one first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from foya_tui.runtime.text import terminal_safe
from foya_tui.ui.widgets.checkpoint_tree import counted
from foya_tui.ui.widgets.tool_block import format_size

if TYPE_CHECKING:
    from foya_tui.runtime.runtime import SessionOverview

HELP = "enter open · F2 rename · del delete · ctrl+b back to the fork's origin · esc close"
OPEN_NOT_DELETED = "This is the open conversation: open another one (or /new) before deleting it."
NO_ORIGIN = "This session is not a fork of a session that still exists."
NOTHING_MATCHES = "No session matches the filter."


def clean(text: str) -> str:
    """One line of stored text, safe to show."""
    return " ".join(terminal_safe(text).split())


def matches(overview: SessionOverview, needle: str) -> bool:
    """Whether a typed filter (case-insensitive, every word) matches a session's title, id or model."""
    haystack = " ".join(
        (overview.info.title, overview.info.id, overview.stats.model or "", overview.status)
    ).lower()
    return all(word in haystack for word in needle.lower().split())


def facts_line(overview: SessionOverview) -> str:
    """The second line of a session: id, model, updated, events, checkpoints, size, origin, status."""
    info, stats = overview.info, overview.stats
    parts = [
        info.short_id,
        clean(stats.model) if stats.model else "no model yet",
        f"updated {info.updated_at[:16].replace('T', ' ')}",
        counted(info.event_count, "event", "events"),
        counted(stats.checkpoints, "checkpoint", "checkpoints"),
        format_size(stats.size_bytes),
    ]
    if overview.forked_from:
        parts.append(f"fork of {overview.forked_from[:6]}")
    if overview.status:
        parts.append(overview.status)
    return " · ".join(parts)


def option_content(overview: SessionOverview, is_open: bool) -> Content:
    """Two lines: the title (● for the open conversation), then the facts; a session that never got
    a reply, or whose last turn failed, shows its status in the warning colour."""
    title = clean(overview.info.title) or "untitled"
    status_style = "$warning" if overview.status else "$text-muted"
    return Content.assemble(
        "● " if is_open else "  ",
        (title, "bold" if is_open else ""),
        "\n  ",
        (facts_line(overview), status_style),
    )


@dataclass(frozen=True)
class Opened:
    """The browser's answer: open this session (its full id)."""

    session_id: str


class SessionsScreen(ModalScreen[Opened | None]):
    """Every stored session; dismisses with the session to open, or None on escape."""

    CSS_PATH = "sessions.tcss"
    # Priority: the filter has the focus, and these keys must reach the list through it.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "close", id="sessions.close", tooltip="Close the browser"),
        Binding("up", "move(-1)", show=False, priority=True, id="sessions.up", tooltip="Previous session"),
        Binding("down", "move(1)", show=False, priority=True, id="sessions.down", tooltip="Next session"),
        Binding("enter", "open", "open", priority=True, id="sessions.open", tooltip="Open this session"),
        Binding("f2", "rename", "rename", priority=True, id="sessions.rename", tooltip="Rename it"),
        Binding("delete", "delete", "delete", priority=True, id="sessions.delete", tooltip="Delete it"),
        Binding(
            "ctrl+b", "origin", "origin", priority=True, id="sessions.origin", tooltip="Its fork's origin"
        ),
    ]

    def __init__(
        self,
        overviews: Sequence[SessionOverview],
        open_id: str | None,
        *,
        rename: Callable[[str, str], object],
        delete: Callable[[str], object],
    ) -> None:
        """`rename(session_id, title)` and `delete(session_id)` ask for the change (the Bridge
        makes it, then the list comes back through `show`)."""
        super().__init__()
        self._rename, self._delete = rename, delete
        self.overviews = list(overviews)
        self.open_id = open_id
        self.shown: list[SessionOverview] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="sessions-dialog") as dialog:
            dialog.border_title = "Sessions"
            yield Input(placeholder="type to filter by title, id or model", id="sessions-filter")
            yield OptionList(id="sessions-list")
            yield Static(Text(HELP), id="sessions-help")

    def on_mount(self) -> None:
        self._fill()
        self.query_one(Input).focus()

    def show(self, overviews: Sequence[SessionOverview], open_id: str | None) -> None:
        """The list again (after a rename or a delete), keeping the filter and, if it is still
        there, the highlighted session."""
        self.overviews, self.open_id = list(overviews), open_id
        self._fill()

    def say(self, text: str) -> None:
        """A one-line answer in the help line (why an action was refused, what was done)."""
        self.query_one("#sessions-help", Static).update(Text(clean(text)))

    @property
    def highlighted(self) -> SessionOverview | None:
        index = self.query_one(OptionList).highlighted
        return self.shown[index] if index is not None and 0 <= index < len(self.shown) else None

    def _fill(self) -> None:
        sessions = self.query_one(OptionList)
        kept = self.highlighted
        needle = self.query_one(Input).value
        self.shown = [overview for overview in self.overviews if matches(overview, needle)]
        sessions.clear_options()
        sessions.add_options(
            Option(option_content(overview, overview.info.id == self.open_id), id=overview.info.id)
            for overview in self.shown
        )
        ids = [overview.info.id for overview in self.shown]
        if kept is not None and kept.info.id in ids:
            sessions.highlighted = ids.index(kept.info.id)
        elif ids:
            sessions.highlighted = 0
        self.dialog_title()

    def dialog_title(self) -> None:
        total, shown = len(self.overviews), len(self.shown)
        counts = f"{shown} of {total}" if shown != total else counted(total, "session", "sessions")
        self.query_one("#sessions-dialog").border_title = f"Sessions · {counts}"

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._fill()
        self.say(HELP if self.shown else NOTHING_MATCHES)

    def action_move(self, step: int) -> None:
        sessions = self.query_one(OptionList)
        if step < 0:
            sessions.action_cursor_up()
        else:
            sessions.action_cursor_down()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()  # a click, or Enter while the list has the focus
        self.action_open()

    def action_open(self) -> None:
        chosen = self.highlighted
        if chosen is None:
            self.say(NOTHING_MATCHES)
        elif chosen.info.id == self.open_id:
            self.dismiss(None)  # it is open already
        else:
            self.dismiss(Opened(chosen.info.id))

    def action_origin(self) -> None:
        chosen = self.highlighted
        if chosen is None or chosen.forked_from is None:
            self.say(NO_ORIGIN)
        elif chosen.forked_from == self.open_id:
            self.dismiss(None)
        else:
            self.dismiss(Opened(chosen.forked_from))

    def action_rename(self) -> None:
        chosen = self.highlighted
        if chosen is None:
            self.say(NOTHING_MATCHES)
            return

        def renamed(title: str | None) -> None:
            if title is not None:
                self.say(f"renaming {chosen.info.short_id}…")
                self._rename(chosen.info.id, title)

        self.app.push_screen(RenameScreen(clean(chosen.info.title)), renamed)

    def action_delete(self) -> None:
        from foya_tui.ui.screens.confirm import ConfirmScreen

        chosen = self.highlighted
        if chosen is None:
            self.say(NOTHING_MATCHES)
            return
        if chosen.info.id == self.open_id:
            self.say(OPEN_NOT_DELETED)
            return
        title = clean(chosen.info.title) or "untitled"
        body = (
            f"Delete session {chosen.info.short_id} ({title}): "
            f"{counted(chosen.info.event_count, 'event', 'events')}, "
            f"{counted(chosen.stats.checkpoints, 'checkpoint', 'checkpoints')}, "
            f"{format_size(chosen.stats.size_bytes)}? This cannot be undone."
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self.say(f"deleting {chosen.info.short_id}…")
                self._delete(chosen.info.id)

        self.app.push_screen(ConfirmScreen("Delete session", body, "Delete"), answered)

    def action_close(self) -> None:
        self.dismiss(None)


class RenameScreen(ModalScreen[str | None]):
    """Asks for a session's new title; dismisses with it (Enter), or None (Esc)."""

    CSS_PATH = "sessions.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "cancel", id="rename.cancel", tooltip="Keep the title"),
    ]

    def __init__(self, title: str) -> None:
        super().__init__()
        self.current = title

    def compose(self) -> ComposeResult:
        with Vertical(id="rename-dialog") as dialog:
            dialog.border_title = "Rename session"
            yield Input(value=self.current, placeholder="the new title", id="rename-title")
            yield Static(Text("enter rename · esc keep the title"), id="rename-help")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        title = clean(event.value)
        if not title:
            self.query_one("#rename-help", Static).update(Text("A title cannot be empty · esc keeps it"))
            return
        self.dismiss(title)

    def action_close(self) -> None:
        self.dismiss(None)

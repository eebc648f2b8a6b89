"""Provides the full-text view of a stored event (a tool result here; any message from the inspector,
in `history_event`): a modal, read-only, scrollable and searchable.

A result can be ten megabytes, so the text is prepared off the UI thread (`prepare_text`, called in
the Bridge's worker that reads it from history): cleaned of escapes, tabs expanded, split into
lines (very long lines cut into pieces so no single line costs much to draw) and measured. The
view then only draws the lines on screen (`TextView`, a ScrollView like Textual's Log), so
opening, scrolling and finding stay instant whatever the size. Text is never parsed as markup.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len, chop_cells
from rich.segment import Segment
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.geometry import Size
from textual.screen import ModalScreen
from textual.scroll_view import ScrollView
from textual.selection import Selection
from textual.strip import Strip
from textual.widgets import Input, Static

from foya_tui.runtime.digests import sha256_hex
from foya_tui.runtime.text import terminal_safe
from foya_tui.ui.widgets.tool_block import plural

PIECE_CHARS = 1_000
"""Lines longer than this are shown as several display lines (a minified file is one line)."""
CONTEXT_LINES = 3
"""A match is shown this many lines below the top of the view."""
HELP = "/ find · enter or n next match · esc close · the text is read from the session history"


@dataclass(frozen=True)
class PreparedText:
    """A text split into display lines, with where each starts in `text` (for find)."""

    text: str
    lines: list[str]
    starts: list[int]
    width: int
    """The widest display line, in cells."""


def prepare_text(content: str) -> PreparedText:
    """Clean, split and measure `content` for TextView; call it in a worker for big texts."""
    text = terminal_safe(content).expandtabs(4)
    lines: list[str] = []
    starts: list[int] = []
    offset = 0
    for line in text.split("\n"):
        if len(line) <= PIECE_CHARS:
            lines.append(line)
            starts.append(offset)
        else:
            for cut in range(0, len(line), PIECE_CHARS):
                lines.append(line[cut : cut + PIECE_CHARS])
                starts.append(offset + cut)
        offset += len(line) + 1
    if len(lines) > 1 and text.endswith("\n"):
        lines.pop()  # a final newline ends the last line; it does not start another
        starts.pop()
    if text.isascii():
        width = max(map(len, lines), default=0)  # one cell per character: measured in C
    else:
        width = max((cell_len(line) for line in lines), default=0)
    return PreparedText(text, lines, starts, width)


def text_facts(content: str) -> str:
    """`1,523 characters · 31 lines · sha256 …`: what the viewer's facts line says of any text (call it
    in the worker that reads the text: the digest of ten megabytes takes a while)."""
    lines = content.count("\n") + (0 if not content or content.endswith("\n") else 1)
    return f"{plural(len(content), 'character')} · {plural(lines, 'line')} · sha256 {sha256_hex(content)}"


@dataclass(frozen=True)
class Match:
    line: int
    start: int
    """Character offsets within the display line."""
    end: int
    offset: int
    """Character offset in the whole text (where the next search starts)."""


def find_next(prepared: PreparedText, query: str, after: int) -> Match | None:
    """The next case-insensitive match of `query` starting after `after` (wrapping round), or None."""
    if not query:
        return None
    pattern = re.compile(re.escape(query), re.IGNORECASE)
    found = pattern.search(prepared.text, after) or pattern.search(prepared.text, 0)
    if found is None:
        return None
    line = bisect_right(prepared.starts, found.start()) - 1
    start = found.start() - prepared.starts[line]
    end = min(found.end() - prepared.starts[line], len(prepared.lines[line]))
    return Match(line, start, end, found.start())


def wrapped_rows(prepared: PreparedText, width: int) -> list[tuple[int, int]]:
    """The display rows of `prepared` at `width` cells: (line index, first character) of each. A
    line wider than the view continues on the next row, so the view never scrolls sideways (where
    every shorter line would look blank)."""
    width = max(1, width)
    rows: list[tuple[int, int]] = []
    for index, line in enumerate(prepared.lines):
        if len(line) <= width and (line.isascii() or cell_len(line) <= width):
            rows.append((index, 0))
        elif line.isascii():
            rows.extend((index, start) for start in range(0, len(line), width))
        else:
            start = 0
            for piece in chop_cells(line, width):
                rows.append((index, start))
                start += len(piece)
    return rows


class TextView(ScrollView, can_focus=True):
    """Read-only lines drawn on demand, wrapped at the view's width; text can be selected; one
    match can be highlighted."""

    DEFAULT_CSS = """
    TextView {
        background: $surface;
        color: $foreground;
        overflow-x: hidden;
        overflow-y: scroll;
        & > .text-view--match {
            background: $warning 60%;
            color: $foreground;
            text-style: bold;
        }
    }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"text-view--match"}

    def __init__(self, prepared: PreparedText, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.prepared = prepared
        self.match: Match | None = None
        self._rows: list[tuple[int, int]] = [(index, 0) for index in range(len(prepared.lines))]
        self._wrapped_at = 0
        self.virtual_size = Size(0, len(self._rows))

    @property
    def allow_select(self) -> bool:
        return True

    def on_resize(self) -> None:
        self._wrap()

    def _wrap(self) -> None:
        """Lay the lines out again for the width the view has now (once per width)."""
        width = self.scrollable_content_region.width
        if width <= 0 or width == self._wrapped_at:
            return
        top = self._rows[self.scroll_offset.y] if self.scroll_offset.y < len(self._rows) else None
        self._wrapped_at = width
        self._rows = wrapped_rows(self.prepared, width)
        self.virtual_size = Size(width, len(self._rows))
        if top is not None:  # the line at the top stays at the top
            self.scroll_to(y=self._row_of(*top), animate=False, immediate=True)
        self.refresh()

    def _row_of(self, line: int, start: int) -> int:
        """The display row that shows character `start` of `line`."""
        return max(0, bisect_right(self._rows, (line, start)) - 1)

    def show_match(self, match: Match | None) -> None:
        """Highlight `match` and scroll it into view, a few rows below the top."""
        self._wrap()
        self.match = match
        if match is not None:
            row = self._row_of(match.line, match.start)
            self.scroll_to(y=max(0, row - CONTEXT_LINES), animate=False, immediate=True)
        self.refresh()

    def render_line(self, y: int) -> Strip:
        scroll_y = self.scroll_offset.y
        row = scroll_y + y
        width = self.size.width
        style = self.rich_style
        rows = self._rows
        if row >= len(rows):
            return Strip.blank(width, style)
        index, start = rows[row]
        line = self.prepared.lines[index]
        end = rows[row + 1][1] if row + 1 < len(rows) and rows[row + 1][0] == index else len(line)
        piece = line[start:end]
        text = Text(piece, no_wrap=True, end="")
        text.stylize(style)
        match = self.match
        if match is not None and match.line == index and match.start < end and match.end > start:
            text.stylize(
                self.get_component_rich_style("text-view--match"),
                max(0, match.start - start),
                min(len(piece), match.end - start),
            )
        selection = self.text_selection
        if selection is not None and (span := selection.get_span(index)) is not None:
            chosen_start, chosen_end = span
            chosen_end = len(line) if chosen_end == -1 else chosen_end
            if chosen_start < end and chosen_end > start:
                text.stylize(
                    self.screen.get_component_rich_style("screen--selection"),
                    max(0, chosen_start - start),
                    min(len(piece), chosen_end - start),
                )
        segments = list(text.render(self.app.console)) if piece else [Segment("", style)]
        strip = Strip(segments, cell_len(piece)).crop_extend(0, width, style)
        # Offsets in the line's own coordinates, so that a selection maps back to the text.
        return strip.apply_offsets(start, index)

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        return selection.extract("\n".join(self.prepared.lines)), "\n"

    def selection_updated(self, selection: Selection | None) -> None:
        self.refresh()


class ToolOutputScreen(ModalScreen[None]):
    """The full text of one tool result, from canonical history; `/` finds, Enter goes to the next.
    `note`, when given, is a line under the facts (the inspector says there what summarises the event)."""

    CSS_PATH = "tool_output.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "escape", "close", "close", id="output.close", tooltip="Close the full text (or the find box)"
        ),
        Binding(
            "slash,ctrl+f",
            "find",
            "find",
            id="output.find",
            tooltip="Find text in the result (case-insensitive); Enter jumps to the next match",
        ),
        Binding(
            "n,enter", "next_match", "next", id="output.next", tooltip="Jump to the next match", show=False
        ),
    ]

    def __init__(
        self,
        title: str,
        facts: str,
        prepared: PreparedText,
        *,
        note: Content | None = None,
        help_text: str = HELP,
    ) -> None:
        super().__init__()
        self.title_text = title
        self.facts = facts
        self.prepared = prepared
        self.note = note
        self.help_text = help_text
        self._query = ""
        self._match: Match | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="output-dialog") as dialog:
            dialog.border_title = self.title_text
            yield Static(Text(self.facts), id="output-facts")
            if self.note is not None:
                yield Static(self.note, id="output-note")
            yield TextView(self.prepared, id="output-text")
            yield Input(placeholder="find (case-insensitive) · enter next", id="output-find")
            yield Static(Text(self.help_text), id="output-help")

    def on_mount(self) -> None:
        self.query_one("#output-find", Input).display = False
        self.query_one(TextView).focus()

    @property
    def view(self) -> TextView:
        return self.query_one(TextView)

    def action_close(self) -> None:
        find = self.query_one("#output-find", Input)
        if find.display:
            find.display = False
            self.view.focus()
            return
        self.dismiss(None)

    def action_find(self) -> None:
        find = self.query_one("#output-find", Input)
        find.display = True
        find.focus()

    def action_next_match(self) -> None:
        self._jump()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.value != self._query:
            self._query = event.value
            self._match = None
        self._jump()
        if self._query:
            # The text takes the keys again: `n` (or Enter) goes to the next match instead of
            # being typed into the box, which stays open showing what is found; `/` edits it.
            self.view.focus()

    def _jump(self) -> None:
        if not self._query:
            self.action_find()
            return
        after = self._match.offset + 1 if self._match is not None else 0
        self._match = find_next(self.prepared, self._query, after)
        self.view.show_match(self._match)
        if self._match is None:
            self.notify(f"No match for {self._query!r}.", timeout=3, markup=False)

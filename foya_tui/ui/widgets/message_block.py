"""Provides MessageBlock: one user or assistant message, with a role label and a coloured bar.

User text is shown as plain text (never parsed as markup); model text is rendered as Markdown,
which does not parse Textual markup either. Both are cleaned of terminal escapes first.

An assistant block holds a whole turn: the text of each step and its tool calls (ToolBlocks), in
the order they happened; text that follows a tool call goes into a new Markdown segment below it.

What Foya did to the model's view during a turn shows inside its assistant block as a dim context
note (`ContextNote`), where it happened: a hidden handoff reminder stored (SPEC K-1; the reminder
itself is never shown as a user message), or old tool results cleared from the model's view by
micro-compaction or snip (K-3, K-4).

A block can take the focus (Tab, or a click); `r` then asks the screen to rewind the conversation
to it, and `f` to fork a new session that ends with it. A block knows the seqs of its first and
last events once they are stored (`seq`, `last_seq`), which is where a rewind goes (before a user
message, after a reply) and where a fork ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Label, Static

from foya_tui.runtime.text import split_escape_tail, terminal_safe

if TYPE_CHECKING:
    from textual.widgets import Markdown
    from textual.widgets.markdown import MarkdownStream

    from foya_tui.ui.widgets.tool_block import ToolBlock, ToolItem

ROLE_LABELS = {"user": "you", "assistant": "foya", "tool": "tool"}
SNIP_MODES = {"micro": "micro-compaction", "snip": "snip"}


@dataclass(frozen=True)
class ContextNote:
    """A dim line in a turn: something Foya did to the model's view, not something anyone said."""

    text: str


def handoff_note() -> ContextNote:
    """The line that stands for a stored handoff reminder, whose text the user never sees as theirs."""
    return ContextNote("context · handoff reminder stored for the model (hidden)")


def snip_note(mode: str, results: int, tokens_saved: int) -> ContextNote:
    """`context · micro-compaction: 12 old tool results cleared from the model's view (−3,400
    tokens) · history keeps them`."""
    what = SNIP_MODES.get(mode, "snip")
    noun = "old tool result" if results == 1 else "old tool results"
    return ContextNote(
        f"context · {what}: {results:,} {noun} cleared from the model's view "
        f"(−{tokens_saved:,} tokens) · history keeps them"
    )


AFTER_TOOLS = "body -after-tools"
"""Classes of a text segment that follows tool calls (a blank line sets it apart from them)."""


class MessageBlock(Vertical, can_focus=True):
    """A message in the conversation. Assistant blocks can stream their text in."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "up",
            "select(-1)",
            "previous message",
            id="message.previous",
            tooltip="Select the message above",
            show=False,
        ),
        Binding(
            "down",
            "select(1)",
            "next message",
            id="message.next",
            tooltip="Select the message below; past the newest, back to the prompt",
            show=False,
        ),
        Binding(
            "enter",
            "expand",
            "expand",
            id="message.expand",
            tooltip="Show or hide the arguments and output of this message's tool calls",
        ),
        Binding(
            "c",
            "copy",
            "copy",
            id="message.copy",
            tooltip="Copy this message as Markdown text",
        ),
        Binding(
            "r",
            "rewind",
            "rewind to here",
            id="message.rewind",
            tooltip="Go back to this message: later messages leave the conversation (the log keeps them)",
        ),
        Binding(
            "f",
            "fork",
            "fork from here",
            id="message.fork",
            tooltip="Start a new session whose conversation ends with this message; this one stays as it is",
        ),
    ]

    class RewindRequested(Message):
        """The user asked to rewind the conversation to this block (the screen confirms first)."""

        def __init__(self, block: MessageBlock) -> None:
            super().__init__()
            self.block = block

    class ForkRequested(Message):
        """The user asked to fork a new session that ends with this block's message."""

        def __init__(self, block: MessageBlock) -> None:
            super().__init__()
            self.block = block

    def __init__(
        self,
        role: str,
        text: str = "",
        *,
        notes: tuple[str, ...] = (),
        parts: Sequence[str | ToolItem | ContextNote] = (),
        seq: int | None = None,
        last_seq: int | None = None,
    ) -> None:
        """`parts` (stored history) are the text segments and tool calls of a turn, in order; when
        given, they are shown instead of `text`. `seq` and `last_seq` are the seqs of the message's
        first and last events (None until stored)."""
        super().__init__(classes=f"message -{role}")
        self.role = role
        self.seq = seq
        self.last_seq = last_seq
        self._text = terminal_safe(text)
        self._notes = notes
        self._parts = tuple(parts)
        self._stream: MarkdownStream | None = None
        self._held = ""

    def compose(self) -> ComposeResult:
        yield Label(ROLE_LABELS.get(self.role, self.role), classes="role")
        if self.role == "assistant":
            # Imported here: Markdown pulls in markdown-it, which an empty screen does not need
            # before its first frame (see tests/bench/bench_startup.py).
            from textual.widgets import Markdown

            from foya_tui.ui.widgets.tool_block import ToolBlock

            if not self._parts:
                yield Markdown(self._text, classes="body")
            after_tools = False
            for part in self._parts:
                if isinstance(part, str):
                    yield Markdown(terminal_safe(part), classes=AFTER_TOOLS if after_tools else "body")
                elif isinstance(part, ContextNote):
                    yield note_line(part)
                else:
                    yield ToolBlock.from_item(part)
                after_tools = not isinstance(part, str)
        elif self._parts:
            from foya_tui.ui.widgets.tool_block import ToolBlock

            for part in self._parts:
                if isinstance(part, ContextNote):
                    yield note_line(part)
                elif not isinstance(part, str):
                    yield ToolBlock.from_item(part)
        else:
            yield Static(Text(self._text), classes="body")
        for note in self._notes:
            yield Static(Text(terminal_safe(note)), classes="note")

    @property
    def text(self) -> str:
        """The text as displayed (cleaned); for assistant blocks, what has streamed so far (the
        segments of a turn with tool calls joined by a blank line)."""
        if self.role == "assistant":
            return "\n\n".join(source for markdown in self._markdowns() if (source := markdown.source))
        return self._text

    def action_rewind(self) -> None:
        self.post_message(self.RewindRequested(self))

    def action_select(self, step: int) -> None:
        """Move the message cursor `step` messages down (−1: up), from this one."""
        from foya_tui.ui.widgets.message_list import MessageList

        if isinstance(self.parent, MessageList):
            self.parent.move_cursor(self, step)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "expand":
            return bool(self.tools)  # nothing to show: Enter is not offered
        return True

    @property
    def expanded(self) -> bool:
        """Whether Enter opened this message's tool calls (they are focus stops while open)."""
        return self.has_class("-expanded")

    def action_expand(self) -> None:
        """Open or close every tool call of the message; open, each is a focus stop of its own."""
        expanded = not self.expanded
        self.set_class(expanded, "-expanded")
        for block in self.tools:
            block.expanded = expanded
            block.can_focus = expanded

    def action_copy(self) -> None:
        """Copy the message as Markdown text (its tool calls as one line each)."""
        text = self.markdown()
        self.app.copy_to_clipboard(text)
        noun = "character" if len(text) == 1 else "characters"
        self.notify(f"Copied the message ({len(text):,} {noun}).", timeout=3)

    def markdown(self) -> str:
        """The message as Markdown: its text segments and, in order, a line per tool call."""
        from textual.widgets import Markdown

        from foya_tui.ui.widgets.tool_block import ToolBlock, summarize_arguments

        if self.role != "assistant" and not self.tools:
            return self._text
        pieces: list[str] = []
        for child in self.children:
            if isinstance(child, Markdown) and child.source:
                pieces.append(child.source)
            elif isinstance(child, ToolBlock):
                summary = summarize_arguments(child.tool_name, child.arguments)
                pieces.append(f"- `{child.tool_name}` {summary} · {child.status}".rstrip())
        return "\n\n".join(pieces)

    def action_fork(self) -> None:
        self.post_message(self.ForkRequested(self))

    @property
    def notes(self) -> list[str]:
        """The context notes shown in this block, in order."""
        return [str(widget.content) for widget in self.query_children(".context-note").results(Static)]

    @property
    def tools(self) -> list[ToolBlock]:
        """The tool calls shown in this block, in order."""
        from foya_tui.ui.widgets.tool_block import ToolBlock

        return list(self.query_children(ToolBlock))

    def _markdowns(self) -> list[Markdown]:
        from textual.widgets import Markdown

        return list(self.query_children(Markdown))

    def _open_markdown(self) -> Markdown | None:
        """The Markdown that new text goes into: the last child, unless a tool call came after it."""
        from textual.widgets import Markdown

        last = self.children[-1] if self.children else None
        return last if isinstance(last, Markdown) else None

    async def add_tool(self, block: ToolBlock) -> ToolBlock:
        """Show a tool call of this turn below what has streamed so far; later text goes below it."""
        await self._end_stream()
        for markdown in self._markdowns():
            if not markdown.source:
                markdown.display = False  # a step that only called tools leaves no blank segment
        await self.mount(block)
        return block

    async def add_note(self, note: ContextNote) -> None:
        """Show a context note below what has streamed so far; later text goes below it."""
        await self._end_stream()
        for markdown in self._markdowns():
            if not markdown.source:
                markdown.display = False  # as for a tool call: no blank segment above the note
        await self.mount(note_line(note))

    def start_stream(self) -> None:
        """Mark the block as receiving a reply (assistant blocks only)."""
        self.add_class("-streaming")

    async def write(self, fragment: str) -> None:
        """Append a reply fragment: cleaned, appended to the Markdown via the stream (not re-rendered)."""
        if self._stream is None:
            # Created at the first fragment, not before: stopping a MarkdownStream whose task never
            # ran raises CancelledError in the caller (a turn that fails before any output).
            self.start_stream()
            from textual.widgets import Markdown

            markdown = self._open_markdown()
            if markdown is None:
                markdown = Markdown(classes=AFTER_TOOLS)
                await self.mount(markdown)
            self._stream = Markdown.get_stream(markdown)
        ready, self._held = split_escape_tail(self._held + fragment)
        await self._stream.write(terminal_safe(ready))

    async def finish(self) -> None:
        """End the stream, flushing any held tail (whatever remains of it is cleaned away)."""
        self.remove_class("-streaming")
        await self._end_stream()

    async def _end_stream(self) -> None:
        if self._stream is None:
            return
        if self._held:
            await self._stream.write(terminal_safe(self._held))
            self._held = ""
        await self._stream.stop()
        self._stream = None


def note_line(note: ContextNote) -> Static:
    # Plain Text: the note names counts and modes only, but nothing here is ever parsed as markup.
    return Static(Text(note.text), classes="context-note")

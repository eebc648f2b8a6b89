"""Provides ToolBlock: one tool call inside an assistant message, a one-line summary that expands.

Collapsed, a block is `▶ name  arguments   status`; expanded (Enter or a click on that line) it
shows the arguments as pretty JSON, the result's facts (seq, size, duration, exit code) and a
bounded preview of the output. The full text stays in canonical history: `o` (or the badge of a
result the model sees shortened) asks the screen to open it from there.

Tool output is untrusted: every text is cleaned with `terminal_safe` and shown as `rich.text.Text`,
so neither Textual markup nor terminal escapes in it can take effect. A result may be megabytes
long, so what a block holds is a `ToolOutcome` prepared off the UI thread (`outcome_of`, called in
the Bridge's workers): the preview is cut to PREVIEW_LINES / PREVIEW_CHARS and the digest is taken
there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import var
from textual.widget import Widget
from textual.widgets import Static

from foya_tui.runtime.text import terminal_safe

PREVIEW_LINES = 200
PREVIEW_CHARS = 20_000
"""The expanded view shows at most this much of a result; the rest opens from history."""
ARGUMENT_CHARS = 2_000
"""Arguments are shown up to this many characters (a write may carry a whole file)."""
SUMMARY_VALUE_CHARS = 40
"""Each argument value in the one-line summary is cut to this many characters."""
SUMMARY_CHARS = 200
"""The summary line is cut here too; CSS ends it with an ellipsis where the width runs out."""


@dataclass(frozen=True)
class ToolOutcome:
    """A recorded tool result as the conversation shows it (built off the UI thread)."""

    seq: int
    """The result's event seq in canonical history: where its full text is read from."""
    is_error: bool
    metadata: Mapping[str, Any] = field(default_factory=dict)
    preview: str = ""
    """The first PREVIEW_LINES lines / PREVIEW_CHARS characters, cleaned of escapes."""
    complete: bool = True
    """Whether the preview is the whole text."""
    characters: int = 0
    lines: int = 0
    size: int = 0
    """Bytes of the full text in UTF-8 (what the shortened badge reports)."""
    sha256: str = ""
    """Digest of the full text, as the model's shortened view quotes it (SPEC T-1)."""


@dataclass(frozen=True)
class ToolItem:
    """A tool call of stored history, with its result (None: the call was never answered)."""

    call_id: str
    name: str
    arguments: str
    outcome: ToolOutcome | None = None


def outcome_of(
    seq: int, content: str, is_error: bool, metadata: Mapping[str, Any] | None = None
) -> ToolOutcome:
    """Prepare a result for display: bounded cleaned preview, counts and digest.

    Call it in a worker: hashing and encoding a 10 MB result would stall the UI for a frame or two.
    """
    # Imported here: the digest helper is only needed once a tool has run.
    from foya_tui.runtime.digests import sha256_hex

    head = content[:PREVIEW_CHARS]
    cut_lines = head.split("\n")[:PREVIEW_LINES]
    preview = "\n".join(cut_lines)
    lines = content.count("\n") + (0 if not content or content.endswith("\n") else 1)
    data = content.encode("utf-8", "surrogatepass")
    return ToolOutcome(
        seq=seq,
        is_error=is_error,
        metadata=dict(metadata or {}),
        preview=terminal_safe(preview),
        complete=len(preview) == len(content),
        characters=len(content),
        lines=lines,
        size=len(data),
        sha256=sha256_hex(data),
    )


# -- formatting --------------------------------------------------------------------------------


def plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def format_duration(seconds: float) -> str:
    if seconds < 0.1:
        return "<0.1 s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"


def format_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(terminal_safe(text[: limit * 4]).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def parse_arguments(arguments: str) -> Any:
    """The arguments as JSON, or None when the model sent something else."""
    try:
        return json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return None


def summarize_arguments(name: str, arguments: str) -> str:
    """The arguments on one line: `key=value` pairs, a shell command as it would be typed."""
    parsed = parse_arguments(arguments)
    if not isinstance(parsed, dict):
        return _one_line(arguments, SUMMARY_CHARS)
    command = parsed.get("command")
    if name == "shell" and isinstance(command, str):
        return _one_line(command, SUMMARY_CHARS)
    parts = []
    for key, value in parsed.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        parts.append(f"{_one_line(str(key), SUMMARY_VALUE_CHARS)}={_one_line(shown, SUMMARY_VALUE_CHARS)}")
    text = "  ".join(parts)  # two spaces between arguments: values may contain single spaces
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


def pretty_arguments(arguments: str, limit: int = ARGUMENT_CHARS) -> str:
    """The arguments as indented JSON (or as sent, when not JSON), cleaned and cut to `limit`."""
    parsed = parse_arguments(arguments)
    text = arguments if parsed is None else json.dumps(parsed, indent=2, ensure_ascii=False)
    if len(text) > limit:
        text = f"{text[:limit]}\n… {len(text) - limit:,} more characters"
    return terminal_safe(text)


def status_of(outcome: ToolOutcome | None, running: bool) -> tuple[str, str]:
    """The status at the end of the summary line and its CSS class."""
    if outcome is None:
        # A call with no result that is not running was interrupted (history closes it later).
        return ("…", "-running") if running else ("✗ interrupted", "-error")
    meta = outcome.metadata
    exit_code = meta.get("exit_code")
    if meta.get("refused"):
        return "✗ refused", "-error"
    if meta.get("cancelled"):
        return "✗ cancelled", "-error"
    if meta.get("timed_out"):
        return "✗ timed out", "-error"
    if isinstance(exit_code, int) and not isinstance(exit_code, bool) and exit_code != 0:
        return f"✗ exit {exit_code}", "-error"
    if outcome.is_error:
        return "✗ error", "-error"
    duration = meta.get("duration")
    return ("✓ " + format_duration(duration) if isinstance(duration, (int, float)) else "✓"), "-ok"


def result_facts(outcome: ToolOutcome) -> str:
    """One line of facts about a result: seq, size, duration, exit code, tool-side truncation."""
    meta = outcome.metadata
    facts = [f"seq {outcome.seq}", plural(outcome.characters, "character"), plural(outcome.lines, "line")]
    duration = meta.get("duration")
    if isinstance(duration, (int, float)):
        facts.append(format_duration(duration))
    if isinstance(meta.get("exit_code"), int):
        facts.append(f"exit code {meta['exit_code']}")
    if meta.get("truncated"):
        facts.append("the tool cut its output")
    if outcome.is_error:
        facts.append("error")
    return " · ".join(facts)


def preview_note(outcome: ToolOutcome) -> str | None:
    """What the preview leaves out, and how to see it; None when it is the whole text."""
    if outcome.complete:
        return None
    shown = outcome.preview.count("\n") + 1 if outcome.preview else 0
    return f"… {shown:,} of {outcome.lines:,} lines shown · o opens the full text"


def badge_text(outcome: ToolOutcome) -> str:
    return f"↳ {format_size(outcome.size)} shortened · sha256 {outcome.sha256[:8]}… · open"


# -- widgets -------------------------------------------------------------------------------------


class ToolSummary(Widget):
    """The always-visible line, `▶ name  arguments … status`, drawn by one widget rather than a row
    of three (a long session mounts a window of hundreds of these); a click on it expands or
    collapses the block. The call takes the width the status leaves, cut with an ellipsis."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "tool-summary--call",
        "tool-summary--running",
        "tool-summary--ok",
        "tool-summary--error",
    }

    def __init__(self, call: Text, status: str, kind: str) -> None:
        super().__init__(classes="summary")
        self._call = call
        self._status = status
        self._kind = kind

    def show(self, *, call: Text | None = None, status: tuple[str, str] | None = None) -> None:
        """Draw a new call text or status (text and kind: `-running`, `-ok`, `-error`)."""
        if call is not None:
            self._call = call
        if status is not None:
            self._status, self._kind = status
        self.refresh()

    def render(self) -> Text:
        status = Text(self._status, style=self.get_component_rich_style(f"tool-summary-{self._kind}"))
        call = self._call.copy()
        call.stylize_before(self.get_component_rich_style("tool-summary--call"))
        # The status keeps its width and two spaces before it; the call gets the rest.
        call.truncate(max(0, self.content_size.width - status.cell_len - 2), overflow="ellipsis", pad=True)
        return Text.assemble(call, "  ", status, no_wrap=True, overflow="crop")

    def on_click(self, event: events.Click) -> None:
        event.stop()
        block = self.parent
        if isinstance(block, ToolBlock):
            block.focus()
            block.toggle()


class ShortenedBadge(Static):
    """Says that the model sees this result shortened; a click opens the full text."""

    def on_click(self, event: events.Click) -> None:
        event.stop()
        block = self.parent
        if isinstance(block, ToolBlock):
            block.action_open()


class ToolBlock(Vertical, can_focus=False):
    """One tool call: running (`…`), finished (`✓` / `✗ …`), collapsed or expanded.

    Not a focus stop of its own: the message cursor moves between messages, and a turn of seventy
    tool calls would otherwise be seventy Tab stops. A block becomes one while it is selected (a
    click, or `focus()`) and while Enter has opened its message's tool calls.
    """

    # Beside the widget rather than in a screen's .tcss: a block looks the same wherever it is.
    DEFAULT_CSS = """
    ToolBlock {
        height: auto;
        & > .summary {
            height: 1;
            & > .tool-summary--call { color: $text-muted; }
            & > .tool-summary--running { color: $text-muted; }
            & > .tool-summary--ok { color: $text-success; }
            & > .tool-summary--error { color: $text-error; }
        }
        &:focus > .summary {
            background: $accent 20%;
        }
        & > .badge {
            height: 1;
            padding: 0 0 0 2;
            color: $text-warning;
            text-wrap: nowrap;
            text-overflow: ellipsis;
        }
        & > .details {
            height: auto;
            padding: 0 0 0 2;
            margin: 0 0 1 0;
        }
        & > .details > .label, & > .details > .note {
            color: $text-muted;
        }
        & > .details > .code {
            padding: 0 1;
            background: $boost;
        }
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "enter",
            "toggle",
            "expand",
            id="tool.toggle",
            tooltip="Show or hide this tool call's arguments and output",
        ),
        Binding(
            "o",
            "open",
            "full text",
            id="tool.open",
            tooltip="Open this tool call's full result from the session history",
        ),
    ]

    expanded: var[bool] = var(False, init=False)
    shortened: var[bool] = var(False, init=False)
    """Whether the latest compiled request shows this result to the model shortened (SPEC T-1)."""

    class OpenRequested(Message):
        """The user asked for the full text of a result (it is read from canonical history)."""

        def __init__(self, block: ToolBlock, outcome: ToolOutcome) -> None:
            super().__init__()
            self.block = block
            self.name = block.tool_name
            self.call_id = block.call_id
            self.seq = outcome.seq

    def __init__(
        self,
        call_id: str,
        name: str,
        arguments: str,
        outcome: ToolOutcome | None = None,
        *,
        running: bool = True,
    ) -> None:
        super().__init__(classes="tool")
        self.call_id = call_id
        self.tool_name = name
        self.arguments = arguments
        self.outcome = outcome
        self.running = running and outcome is None
        self._details: Vertical | None = None
        # Made here, not in compose: a result may arrive before the block is mounted.
        self._summary = ToolSummary(self._call_text(), *status_of(outcome, self.running))
        self._badge: ShortenedBadge | None = None
        """Made the first time the model sees the result shortened (most never are)."""

    def compose(self) -> ComposeResult:
        yield self._summary
        if self._badge is not None:
            yield self._badge

    @classmethod
    def from_item(cls, item: ToolItem) -> ToolBlock:
        """A block for a call of stored history (never running: its turn is over)."""
        return cls(item.call_id, item.name, item.arguments, item.outcome, running=False)

    def focus(self, scroll_visible: bool = True) -> ToolBlock:
        self.can_focus = True  # selected: a stop until the focus leaves it
        super().focus(scroll_visible)
        return self

    def on_blur(self) -> None:
        from foya_tui.ui.widgets.message_block import MessageBlock

        message = self.parent
        self.can_focus = isinstance(message, MessageBlock) and message.expanded

    # -- state -------------------------------------------------------------------------------

    @property
    def seq(self) -> int | None:
        return self.outcome.seq if self.outcome is not None else None

    @property
    def status(self) -> str:
        """The status as shown at the end of the summary line."""
        return status_of(self.outcome, self.running)[0]

    def finish(self, outcome: ToolOutcome) -> None:
        """The call's result was recorded."""
        self.outcome = outcome
        self.running = False
        self._show_status()
        self._show_badge()
        if self._details is not None:
            self._fill_details()

    def stop(self) -> None:
        """The turn ended without a result for this call (the bridge failed)."""
        if self.outcome is None:
            self.running = False
            self._show_status()

    def toggle(self) -> None:
        self.expanded = not self.expanded

    # Shadows DOMNode's generic `toggle` action (an attribute name, async): this block's binding
    # takes no argument and expands or collapses it; renaming would change the binding's action.
    def action_toggle(self) -> None:  # type: ignore[override]
        self.toggle()

    def action_open(self) -> None:
        if self.outcome is None:
            self.notify("This call has no result yet.", timeout=3)
            return
        self.post_message(self.OpenRequested(self, self.outcome))

    # -- rendering ---------------------------------------------------------------------------

    def _call_text(self) -> Text:
        # ▶/▼ as Textual's Tree draws them; unlike ▸/▾ they are in DejaVu Sans Mono, a common
        # default monospace font (and the README screenshot's renderer has no fallback).
        arrow = "▼" if self.expanded else "▶"
        summary = summarize_arguments(self.tool_name, self.arguments)
        name = _one_line(self.tool_name, 60)
        # The spaces end the styled part: SVG renderers (snapshots, the README screenshot) drop the
        # leading spaces of a text run.
        return Text.assemble(f"{arrow} ", (f"{name}  ", "bold"), summary)

    def _show_status(self) -> None:
        self._summary.show(status=status_of(self.outcome, self.running))

    def _show_badge(self) -> None:
        if self.shortened and self.outcome is not None:
            text = Text(badge_text(self.outcome))
            if self._badge is None:
                self._badge = ShortenedBadge(text, classes="badge")
                if self.is_mounted:
                    self.mount(self._badge, after=self._summary)
            else:
                self._badge.update(text)
                self._badge.display = True
        elif self._badge is not None:
            self._badge.display = False

    def watch_shortened(self) -> None:
        self._show_badge()

    def watch_expanded(self, expanded: bool) -> None:
        self._summary.show(call=self._call_text())
        self.set_class(expanded, "-expanded")
        if expanded and self._details is None:
            # Built on first expand only: most blocks are never opened.
            self._fill_details()
        elif self._details is not None:
            self._details.display = expanded

    def _fill_details(self) -> None:
        """Mount the expanded view (again, when the result arrives while it is open)."""
        if self._details is not None:
            self._details.remove()
        self._details = Vertical(*self._detail_parts(), classes="details")
        self.mount(self._details)

    def _detail_parts(self) -> list[Static]:
        parts: list[Static] = [
            Static(Text("arguments"), classes="label"),
            Static(Text(pretty_arguments(self.arguments)), classes="code"),
        ]
        outcome = self.outcome
        if outcome is None:
            parts.append(
                Static(Text("running…" if self.running else "no result was recorded"), classes="label")
            )
        else:
            parts.append(Static(Text(f"result · {result_facts(outcome)}"), classes="label"))
            parts.append(Static(Text(outcome.preview or "(empty)"), classes="code"))
            note = preview_note(outcome)
            if note:
                parts.append(Static(Text(note), classes="note"))
        return parts

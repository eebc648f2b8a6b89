"""Provides a session's valid history as a readable Markdown transcript (`foya export --format md`,
`/export md`): each message under a heading, each tool call a collapsed `<details>` block with its
arguments and result, compactions and failed or cancelled turns marked where they happened.

The transcript is meant to be read in any Markdown viewer, so the text of the messages cannot
inject HTML: outside code blocks `&` and `<` are written as entities (Markdown still renders
emphasis, lists and headings), a code block the text leaves open is closed at the end of its
message (it would otherwise swallow what follows), and tool arguments and output sit in fences
longer than any run of backticks inside them. The only HTML is Foya's own `<details>` blocks.
Every character also passes `terminal_safe`: the transcript may be printed on a terminal.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from foya_tui.runtime.compaction.attempt import CompactionResult
from foya_tui.runtime.compaction.failures import Outcome
from foya_tui.runtime.model import Event, EventKind, Role, SessionInfo, ToolCall
from foya_tui.runtime.text import terminal_safe
from foya_tui.runtime.view.history import event_message, valid_events

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_BACKTICKS = re.compile(r"`+")
TRIGGERS = {
    "budget": "the context passed the compaction line",
    "provider": "the input was too long",
    "manual": "asked by the user",
}
"""Why a compaction ran, as the transcript says it."""
ROLE_HEADINGS = {Role.USER: "You", Role.ASSISTANT: "Assistant", Role.SYSTEM: "System", Role.TOOL: "Tool"}


def _entities(line: str) -> str:
    # `<` starts every tag and `&` every entity; `>` stays, so a quoted line still reads as one.
    return line.replace("&", "&amp;").replace("<", "&lt;")


def escape_text(text: str) -> str:
    """Message text as Markdown that holds no HTML: entities outside fenced code blocks, code
    blocks kept verbatim (a viewer shows them literally), a block left open closed at the end."""
    out: list[str] = []
    fence: str | None = None
    for line in terminal_safe(text).split("\n"):
        opened = _FENCE.match(line)
        if fence is None:
            if opened is not None:
                fence = opened.group(1)
                out.append(line)
            else:
                out.append(_entities(line))
        else:
            out.append(line)
            marker = line.strip()
            if marker and set(marker) == {fence[0]} and len(marker) >= len(fence):
                fence = None
    if fence is not None:
        out.append(fence)
    return "\n".join(out)


def fenced(text: str, info: str = "") -> str:
    """`text` in a code fence no line of it can close."""
    text = terminal_safe(text)
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def inline(text: str) -> str:
    """One line of text inside Foya's own markup (a summary, a heading, a note)."""
    return html.escape(" ".join(terminal_safe(text).split()), quote=True)


@dataclass
class _Call:
    call: ToolCall
    result: str | None = None
    is_error: bool = False


@dataclass
class _Block:
    """One thing the transcript shows: a message (with its tool calls) or a note."""

    seq: int
    role: Role | None
    text: str = ""
    model: str = ""
    calls: list[_Call] = field(default_factory=list)
    note: str = ""


def _compaction_line(event: Event) -> str | None:
    result = CompactionResult.from_diagnostic(event.payload)
    why = TRIGGERS.get(str(result.trigger), str(result.trigger))
    if result.outcome is Outcome.ACCEPTED:
        made_by = f", made by {result.producer}" if result.producer else ""
        after = result.tokens_after or 0
        return f"Context compacted ({why}): {result.tokens_before:,} → {after:,} tokens{made_by}."
    if result.outcome in (Outcome.FAILED, Outcome.REJECTED, Outcome.BLOCKED):
        return f"Compaction {result.outcome} ({why}): {result.reason}; the context was kept."
    return None


def _outcome_line(event: Event) -> str:
    if event.payload.get("outcome") == "cancelled":
        return "✗ Cancelled by the user."
    return f"✗ Failed: {event.payload.get('reason', 'the turn failed')}"


def _blocks(events: Iterable[Event]) -> list[_Block]:
    blocks: list[_Block] = []
    pending: dict[str, _Call] = {}  # unanswered calls of the latest assistant message, by id
    for event in valid_events(events):
        if event.kind is EventKind.COMPACTION_DIAGNOSTIC:
            line = _compaction_line(event)
            if line is not None:
                blocks.append(_Block(event.seq, None, note=line))
            continue
        if event.kind is EventKind.TURN_OUTCOME:
            blocks.append(_Block(event.seq, None, note=_outcome_line(event)))
            continue
        message = event_message(event)
        if message is None:
            continue  # usage, snips, handoff reminders (never shown as messages: SPEC K-1), rewinds
        if message.role is Role.TOOL:
            call = pending.pop(message.tool_call_id or "", None)
            if call is None:
                name = message.name or "tool"
                call = _Call(ToolCall(message.tool_call_id or "", name, ""))
                blocks.append(_Block(event.seq, Role.TOOL, calls=[call]))
            call.result = message.content or ""
            call.is_error = bool(event.payload.get("is_error", False))
            continue
        pending = {}
        model = str(event.payload.get("model", "")) if event.kind is EventKind.ASSISTANT_MESSAGE else ""
        block = _Block(event.seq, message.role, text=message.content or "", model=model)
        for tool_call in message.tool_calls:
            entry = _Call(tool_call)
            block.calls.append(entry)
            pending[tool_call.id] = entry
        blocks.append(block)
    return blocks


def _details(call: _Call) -> str:
    status = "no result recorded" if call.result is None else ("error" if call.is_error else "ok")
    parts = [f"<details><summary>tool call: {inline(call.call.name)} ({status})</summary>", ""]
    if call.call.arguments:
        parts += ["Arguments:", "", fenced(call.call.arguments, "json"), ""]
    if call.result is not None:
        parts += ["Result:", "", fenced(call.result, "text"), ""]
    parts.append("</details>")
    return "\n".join(parts)


def session_markdown(info: SessionInfo, events: Iterable[Event], *, exported_at: str) -> str:
    """The transcript of `info`'s valid history (rewound events left out, SPEC H-4)."""
    lines = [f"# {inline(info.title or 'Untitled session')}", ""]
    facts = [f"Session `{info.id}`", f"created {info.created_at[:19].replace('T', ' ')} UTC"]
    forked = info.metadata.get("forked_from")
    if isinstance(forked, dict) and isinstance(forked.get("session"), str):
        facts.append(f"forked from `{inline(forked['session'])}` at seq {forked.get('seq', '?')}")
    facts.append(f"exported {exported_at[:19].replace('T', ' ')} UTC")
    lines += [" · ".join(facts), ""]
    previous_role: Role | None = None
    for block in _blocks(events):
        if block.role is None:
            lines += [f"> *{inline(block.note)}*", ""]
            previous_role = None
            continue
        if block.role is not previous_role or block.role is not Role.ASSISTANT:
            heading = ROLE_HEADINGS[block.role]
            if block.model:
                heading += f" · {inline(block.model)}"
            lines += [f"## {heading}", ""]
        previous_role = block.role
        if block.text.strip():
            lines += [escape_text(block.text), ""]
        for call in block.calls:
            lines += [_details(call), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


__all__ = ["escape_text", "fenced", "session_markdown"]

"""Provides the deterministic fallback: a checkpoint made without any model (SPEC K-10, K-12).

When the summariser keeps failing (or the circuit breaker is open), the covered prefix is still
replaced, by rules alone and within a token budget, keeping four kinds of evidence apart (K-12):
the exact ledger and the active task come first; then whole message units from the newest end,
verbatim (a tool call never without its results); the one unit at the boundary may be cut (its
messages capped), never split; older units become one line each while the budget lasts, the rest
a count. Reasoning is never carried (the message form has none) and images become a placeholder.
The result is an ordinary V3 text checkpoint: it passes the same acceptance as a model's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from foya_tui.runtime.compaction.planner import Plan
from foya_tui.runtime.compaction.summary import FENCE, SEQ_REFERENCE
from foya_tui.runtime.model import Role
from foya_tui.runtime.providers.summary_format import IMAGE_PLACEHOLDER
from foya_tui.runtime.text import content_text
from foya_tui.runtime.tokens import TOKENS_PER_MESSAGE, TokenCounter, message_text
from foya_tui.runtime.view.groups import Unit
from foya_tui.runtime.view.history import LogEntry

TASK_CHARS = 1_200
LINE_CHARS = 160
MIN_CUT_CHARS = 400
"""A boundary unit whose messages cannot keep this much each is left out rather than kept as stubs."""
PREVIOUS_SHARE = 0.4
"""Share of the segment's budget an earlier model summary may keep (shortened, headings demoted)."""


@dataclass(frozen=True)
class FallbackResult:
    """The fallback's segment text and the messages it keeps verbatim after the checkpoint message."""

    text: str
    kept_messages: tuple[Mapping[str, Any], ...]


# What quoted text must not carry into the fallback's own segment, which passes the same C-9
# checks as a model's: bracketed truncation markers, a heading or a fence at the start of a line.
_MARKERS = re.compile(r"\[(truncated|…|\.\.\.)\]|<truncated>|\(truncated\)", re.IGNORECASE)
_LINE_START = re.compile(r"^(\s*)(#|```|~~~)", re.MULTILINE)


def _neutral(text: str) -> str:
    """Quoted words, made unable to fail the segment's validation: `[seq N]` becomes `(seq N)`, so
    the fallback cites only the seqs of its own lines, all inside its range (a rejected summary's
    reason quotes references outside it); markers and line-start headings or fences are defused."""
    text = SEQ_REFERENCE.sub(lambda match: f"({match.group(0)[1:-1]})", text)
    text = _MARKERS.sub(lambda match: match.group(0).strip("[]<>()"), text)
    return _LINE_START.sub(lambda match: f"{match.group(1)}'{match.group(2)}", text)


def _flat(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return _neutral(flat if len(flat) <= limit else flat[: limit - 1] + "…")


def _capped(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = (limit * 2) // 3
    tail = limit - head
    left_out = f"[… {len(text) - limit:,} characters left out; history_read has them all …]"
    return f"{text[:head]}\n{left_out}\n{text[-tail:]}"


def _kept_form(entry: LogEntry, chars: int | None) -> dict[str, Any]:
    """A message as the fallback keeps it: images replaced by a placeholder, optionally capped."""
    message = dict(entry.openai)
    text = content_text(message.get("content"))
    if entry.message.attachments:
        text = (text + " " if text else "") + IMAGE_PLACEHOLDER * len(entry.message.attachments)
    if chars is not None:
        text = _capped(text, chars)
    if message.get("content") is not None or entry.message.attachments:
        message["content"] = text
    return message


def _unit_form(
    entries: Sequence[LogEntry], unit: Unit, chars: int | None, counter: TokenCounter
) -> tuple[list[dict[str, Any]], int]:
    """A whole unit as the fallback keeps it (each message capped to `chars`), and its tokens."""
    messages = [_kept_form(entries[i], chars) for i in range(unit.first, unit.last + 1)]
    return messages, sum(TOKENS_PER_MESSAGE + counter.count(message_text(m)) for m in messages)


def _line(entries: Sequence[LogEntry], unit: Unit) -> str:
    """One line for a unit the fallback cannot keep: who spoke, or which tools ran and how."""
    head = entries[unit.first]
    span = str(unit.first_seq) if unit.first_seq == unit.last_seq else f"{unit.first_seq}–{unit.last_seq}"
    seqs = f"[seq {span}]"
    if head.message.role is Role.USER:
        return f"- {seqs} user: {_flat(content_text(head.openai.get('content')), LINE_CHARS)}"
    calls = [f"{call.name} {_flat(call.arguments, 60)}" for call in head.message.tool_calls]
    text = content_text(head.openai.get("content"))
    if not calls:
        return f"- {seqs} assistant: {_flat(text, LINE_CHARS)}"
    said = f" — {_flat(text, 60)}" if text.strip() else ""
    return f"- {seqs} assistant ran {'; '.join(calls)[:LINE_CHARS]}{said}"


def _demoted(text: str) -> str:
    """An earlier summary inside this one: its headings one level down, so the five sections of
    this segment stay the only `##` headings (SPEC C-9 checks them)."""
    return "\n".join("#" + line if line.startswith("## ") else line for line in text.strip().splitlines())


def fallback_summary(
    entries: Sequence[LogEntry],
    plan: Plan,
    *,
    active_task: LogEntry | None,
    previous_text: str,
    reason: str,
    counter: TokenCounter,
    budget_tokens: int,
    count_ledger: Callable[[], int],
) -> FallbackResult:
    """The segment text and kept messages for `plan`, within `budget_tokens` (SPEC K-10).

    `budget_tokens` covers everything the checkpoint adds to a request: this text, the ledger the
    checkpoint message renders (`count_ledger`), and the kept messages. `previous_text` is an
    earlier summary the new segment absorbs (empty when the segment is appended instead)."""
    task_text = content_text(active_task.openai.get("content")) if active_task is not None else ""
    task = _flat(task_text, TASK_CHARS) if task_text else "(no user request is visible in this range)"
    in_range = active_task is not None and plan.from_seq <= active_task.seq <= plan.through_seq
    task_ref = f" [seq {active_task.seq}]" if in_range and active_task is not None else ""
    head = [
        "## Goal",
        f"{task}{task_ref}",
        "## Progress",
        f"Deterministic fallback checkpoint of events {plan.from_seq}–{plan.through_seq}: no model "
        f"summary was used ({_flat(reason, 200)}). The most recent steps follow verbatim after this "
        "checkpoint; older ones are listed one per line.",
    ]
    tail = [
        "## Key Decisions",
        "- Decisions are not summarised by the fallback: the user's rules and the files touched are "
        "in the evidence ledger below, and history_search / history_read reach every covered event.",
        "## Next Steps",
        f"- Continue the active task: {_flat(task_text, 300) if task_text else 'ask the user what is next'}",
        "## Critical Context",
        "- Exact records (user rules verbatim, files modified and read, commands, errors) follow in "
        "the evidence ledger.",
    ]
    used = count_ledger() + counter.count("\n".join(head + tail)) + TOKENS_PER_MESSAGE

    if previous_text:
        room = int(budget_tokens * PREVIOUS_SHARE) - used
        previous = _demoted(previous_text)
        if room > 0 and counter.count(previous) > room:
            chars = len(previous) * room // max(1, counter.count(previous))
            previous = _capped(previous, max(MIN_CUT_CHARS, chars))
            if len(FENCE.findall(previous)) % 2:  # the cut fell inside a code block: close it
                previous += "\n```"
        if room > 0:
            head.append("Earlier summary (absorbed into this segment):\n" + previous)
            used += counter.count(previous) + 8

    # The active task itself, when this checkpoint covers it (mid_turn): kept verbatim ahead of the
    # steps, in its place in time, so the compiler does not re-insert it after them (SPEC C-3).
    units = list(plan.units)
    anchor_unit = next(
        (i for i, unit in enumerate(units) if active_task is not None and unit.first_seq == active_task.seq),
        None,
    )
    anchor_kept: list[dict[str, Any]] = []
    if anchor_unit is not None and active_task is not None:
        anchor_form = _kept_form(active_task, None)
        anchor_tokens = TOKENS_PER_MESSAGE + counter.count(message_text(anchor_form))
        # An anchor larger than half of this budget is not kept here: the compiler re-inserts it,
        # cut when it alone is over half of the input budget (SPEC T-4), and the rest still fits.
        if anchor_tokens <= budget_tokens // 2:
            anchor_kept = [anchor_form]
            used += anchor_tokens
    # The newest units first, whole; the one at the boundary may be capped; then stop.
    kept: list[list[dict[str, Any]]] = []
    index = len(units) - 1
    stop = anchor_unit if anchor_unit is not None else -1
    while index > stop:
        messages, tokens = _unit_form(entries, units[index], None, counter)
        cut = used + tokens > budget_tokens
        if cut:
            # The boundary unit: kept with every message capped, if that fits, else left out.
            room = budget_tokens - used - TOKENS_PER_MESSAGE * len(messages)
            per_message = int(room * 3 // max(1, len(messages)))  # ~3 characters a token, conservatively
            if per_message < MIN_CUT_CHARS:
                break
            messages, tokens = _unit_form(entries, units[index], per_message, counter)
            if used + tokens > budget_tokens:
                break
        kept.append(messages)
        used += tokens
        index -= 1
        if cut:
            break  # the boundary cuts at most one unit (K-10)
    listed: list[str] = []
    for position in range(index, -1, -1):
        if position == anchor_unit:
            continue
        line = _line(entries, units[position])
        tokens = counter.count(line) + 1
        if used + tokens > budget_tokens:
            break
        listed.append(line)
        used += tokens
    omitted = index + 1 - len(listed) - (1 if anchor_unit is not None else 0)
    progress = list(reversed(listed))
    if omitted:
        progress.insert(0, f"- ({omitted} older step(s) not listed; history_search finds them)")
    text = "\n".join(head + progress + tail)
    kept_messages = tuple(anchor_kept) + tuple(
        message for unit_messages in reversed(kept) for message in unit_messages
    )
    return FallbackResult(text, kept_messages)

"""Provides the simulator's answer to a compaction request: a valid five-section summary.

A compaction request (its system message starts with `COMPACTION_MARKER`, see
`summary_format.py`) gets a valid five-section summary extracted from its input (SPEC C-8, C-9),
never a tool call. A summary is extracted, never invented: every bullet quotes the transcript or
a previous summary and names the events it comes from, so a reader can check it against history.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from foya_tui.runtime.providers.simulator.messages import text_of
from foya_tui.runtime.providers.simulator.reply import SimulatedReply
from foya_tui.runtime.providers.summary_format import (
    ANCHOR_TAG,
    COMPACTION_MARKER,
    EARLIER_SUMMARY_TAG,
    MUST_MENTION_TAG,
    PREVIOUS_SUMMARY_TAG,
    REPAIR_TAG,
    SECTION_HEADINGS,
    SECTION_TITLES,
    TRANSCRIPT_TAG,
    blocks,
    requested_length,
)
from foya_tui.runtime.text import content_text
from foya_tui.runtime.tokens import TokenCounter

TRUNCATION_MARKER = "…[truncated]"
"""What the `summary-truncated` knob leaves at the cut: a marker SPEC C-9 rejects."""
SUMMARY_TOKEN_CAP = 1_500
"""A simulated summary never exceeds this, however large its input (a summary must shrink)."""


def is_compaction_request(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the request's (first) system message starts with the compaction marker."""
    for message in messages:
        if message.get("role") == "system":
            return text_of(message).startswith(COMPACTION_MARKER)
    return False


@dataclass(frozen=True)
class TranscriptEntry:
    """One `[seq N] …` transcript line (with any continuation lines), without its prefix."""

    seq: int
    text: str


@dataclass(frozen=True)
class CompactionInput:
    """What a compaction request carries, parsed from its tagged blocks."""

    entries: tuple[TranscriptEntry, ...] = ()
    previous: tuple[Mapping[str, str], ...] = ()
    """Each previous summary's sections (title → body), oldest first."""
    previous_ranges: tuple[tuple[int | None, int | None], ...] = ()
    must_mention: tuple[str, ...] = ()
    repair: bool = False
    anchor: TranscriptEntry | None = None
    """The user's request every request carries (`<user-request>`), whatever it summarises."""
    earlier: tuple[Mapping[str, str], ...] = ()
    """Read-only earlier segments' sections (title → body), oldest first: context, not input."""
    length: int | None = None
    """The length in tokens the request asks the summary to keep to (its LENGTH_LINE)."""


_SEQ_LINE = re.compile(r"^\[seq (\d+)\] ?(.*)$")
_USER_LINE = re.compile(r"^user: ?(.*)$", re.DOTALL)
_ASSISTANT_TEXT = re.compile(r"^assistant: ?(.*)$", re.DOTALL)
_ASSISTANT_CALL = re.compile(r"^assistant → (\S+) ?(.*)$", re.DOTALL)
_TOOL_RESULT = re.compile(r"^tool (\S+) \((ok|error)\): ?(.*)$", re.DOTALL)
_PROVENANCE = re.compile(r"\[seq (\d+)(?:[–-](\d+))?\]\s*$")
_SEQ_CITATION = re.compile(r"\s*\[seq \d+(?:[–-]\d+)?\]")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")
# What a reader (and the validator) takes for a truncation marker: never quoted into a summary.
_MARKER_LIKE = re.compile(
    r"\[\s*(?:…|\.\.\.)?\s*truncated\s*\]|\[\s*(?:…|\.\.\.)\s*\]|<\s*truncated\s*>|\(\s*truncated\s*\)",
    re.IGNORECASE,
)
_TRAILING_ELLIPSIS = re.compile(r"(…|\.\.\.)\s*$")
_FENCE = re.compile(r"`{3,}|~{3,}")


def _request_text(message: Mapping[str, Any]) -> str:
    # content parts keep their own lines: tagged blocks span lines
    return content_text(message.get("content"), separator="\n")


def _int_or_none(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


def _sections_of(summary: str) -> dict[str, str]:
    """A five-section summary's bodies by title; text before the first heading is dropped."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in summary.splitlines():
        heading = line.strip()
        if heading in SECTION_HEADINGS:
            current = sections.setdefault(heading[3:], [])
        elif current is not None:
            current.append(line)
    return {title: "\n".join(lines).strip() for title, lines in sections.items()}


def compaction_input(messages: Sequence[Mapping[str, Any]]) -> CompactionInput:
    """Parse a compaction request's user message(s) (format in `summary_format.py`)."""
    text = "\n".join(_request_text(m) for m in messages if m.get("role") == "user")
    entries: list[TranscriptEntry] = []
    previous: list[Mapping[str, str]] = []
    ranges: list[tuple[int | None, int | None]] = []
    must_mention: list[str] = []
    repair = False
    anchor: TranscriptEntry | None = None
    earlier: list[Mapping[str, str]] = []
    for tag, attributes, body in blocks(text):
        if tag == ANCHOR_TAG:
            anchor = TranscriptEntry(_int_or_none(attributes.get("seq")) or 0, body)
        elif tag == EARLIER_SUMMARY_TAG:
            earlier.append(_sections_of(body))
        elif tag == TRANSCRIPT_TAG:
            for line in body.splitlines():
                match = _SEQ_LINE.match(line)
                if match:
                    entries.append(TranscriptEntry(int(match.group(1)), match.group(2)))
                elif entries:  # a multi-line message continues its entry
                    last = entries[-1]
                    entries[-1] = TranscriptEntry(last.seq, f"{last.text}\n{line}")
        elif tag == PREVIOUS_SUMMARY_TAG:
            previous.append(_sections_of(body))
            span = (_int_or_none(attributes.get("from_seq")), _int_or_none(attributes.get("through_seq")))
            ranges.append(span)
        elif tag == MUST_MENTION_TAG:
            must_mention.extend(line.rstrip() for line in body.splitlines() if line.strip().startswith("- "))
        elif tag == REPAIR_TAG:
            repair = True
    return CompactionInput(
        tuple(entries),
        tuple(previous),
        tuple(ranges),
        tuple(must_mention),
        repair,
        anchor,
        tuple(earlier),
        requested_length(text),
    )


@dataclass(frozen=True)
class _Detail:
    """How much a summary keeps; later levels are shorter (a repair, or an oversized input)."""

    bullets: int
    decisions: int
    errors: int
    carried: int
    """Critical Context lines carried over from previous summaries."""
    quote: int
    """Characters per quoted piece."""
    goal: int


_DETAIL_LEVELS = (
    _Detail(bullets=8, decisions=5, errors=5, carried=8, quote=160, goal=240),
    _Detail(bullets=4, decisions=2, errors=3, carried=4, quote=100, goal=160),
    _Detail(bullets=2, decisions=1, errors=1, carried=2, quote=60, goal=100),
)
_REPAIR_LEVEL = 1


def _clean(text: str, limit: int) -> str:
    """One quoted line: flat, shortened, and unable to open a code fence or fake a truncation."""
    flat = _FENCE.sub("`", " ".join(text.split()))
    flat = _MARKER_LIKE.sub("(shortened)", flat)
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _seq_ref(first: int | None, last: int | None) -> str:
    if first is None:
        return ""
    return f" [seq {first}]" if last is None or last == first else f" [seq {first}–{last}]"


@dataclass(frozen=True)
class _Step:
    first: int | None
    last: int | None
    text: str

    def bullet(self) -> str:
        return f"- {self.text}{_seq_ref(self.first, self.last)}"


def _bullets(body: str) -> list[str]:
    return [line.strip()[2:].strip() for line in body.splitlines() if line.strip().startswith("- ")]


def _carried_step(line: str, span: tuple[int | None, int | None]) -> _Step:
    """A bullet of a previous summary, keeping its own provenance or else the summary's range."""
    match = _PROVENANCE.search(line)
    if match:
        last = int(match.group(2)) if match.group(2) else None
        return _Step(int(match.group(1)), last, line[: match.start()].rstrip())
    return _Step(span[0], span[1], line)


def _tool_steps(entries: Sequence[TranscriptEntry], limit: int) -> list[_Step]:
    """Each tool call with its result, as one step spanning both."""
    pending: list[tuple[int, str, str]] = []  # calls awaiting their result: seq, name, arguments
    steps: list[_Step] = []
    for entry in entries:
        if call := _ASSISTANT_CALL.match(entry.text):
            pending.append((entry.seq, call.group(1), call.group(2)))
        elif result := _TOOL_RESULT.match(entry.text):
            name, status, output = result.groups()
            index = next((i for i, (_, called, _) in enumerate(pending) if called == name), None)
            call_seq, arguments = entry.seq, ""
            if index is not None:
                call_seq, _, arguments = pending.pop(index)
            shown = f" {_clean(arguments, limit)}" if arguments else ""
            steps.append(_Step(call_seq, entry.seq, f"`{name}`{shown} → {status}: {_clean(output, limit)}"))
    for seq, name, arguments in pending:
        steps.append(_Step(seq, None, f"`{name}` {_clean(arguments, limit)} (no result recorded)"))
    return sorted(steps, key=lambda step: step.first or 0)


def _conversation_steps(entries: Sequence[TranscriptEntry], limit: int) -> list[_Step]:
    steps = []
    for entry in entries:
        if user := _USER_LINE.match(entry.text):
            steps.append(_Step(entry.seq, None, f"The user asked: “{_clean(user.group(1), limit)}”"))
        elif said := _ASSISTANT_TEXT.match(entry.text):
            steps.append(_Step(entry.seq, None, f"The assistant answered: “{_clean(said.group(1), limit)}”"))
    return steps


def _progress(data: CompactionInput, detail: _Detail) -> list[str]:
    steps: list[_Step] = []
    for sections, span in zip(data.previous, data.previous_ranges, strict=True):
        for line in _bullets(sections.get("Progress", "")):
            if not line.startswith("…"):  # an earlier "… and N more" line adds nothing to carry
                steps.append(_carried_step(_clean(line, detail.quote), span))
    # A conversation without tools: what was asked and answered is its progress.
    steps += _tool_steps(data.entries, detail.quote // 2) or _conversation_steps(data.entries, detail.quote)
    if not steps:
        return ["- No steps were recorded in the covered history."]
    if len(steps) <= detail.bullets:
        return [step.bullet() for step in steps]
    # The latest steps matter most to whoever continues; the earlier ones are counted and located.
    omitted, kept = steps[: -detail.bullets], steps[-detail.bullets :]
    seqs = [seq for step in omitted for seq in (step.first, step.last) if seq is not None]
    more = _Step(min(seqs, default=None), max(seqs, default=None), f"… and {len(omitted)} more earlier steps")
    return [more.bullet()] + [step.bullet() for step in kept]


def _goal(data: CompactionInput, detail: _Detail) -> tuple[str, str | None]:
    """The Goal text, and the request quoted for Next Steps (None when carried from a summary).

    The anchor the request carries comes first: it is the user's request even when the events
    summarised here are a later part of the turn; it is cited only when it is one of them."""
    if data.anchor is not None and data.anchor.text.strip():
        request = _clean(data.anchor.text, detail.goal)
        cited = any(entry.seq == data.anchor.seq for entry in data.entries)
        return f"The user asked: “{request}”{_seq_ref(data.anchor.seq if cited else None, None)}", request
    for entry in reversed(data.entries):
        if user := _USER_LINE.match(entry.text):
            request = _clean(user.group(1), detail.goal)
            return f"The user asked: “{request}”{_seq_ref(entry.seq, None)}", request
    for sections in reversed(data.previous):
        if sections.get("Goal"):
            return f"As summarised before: {_clean(sections['Goal'], detail.goal)}", None
    for sections in reversed(data.earlier):
        if sections.get("Goal"):  # read-only context: its events lie outside, so it is not cited
            goal = _SEQ_CITATION.sub("", sections["Goal"])
            return f"As summarised before: {_clean(goal, detail.goal)}", None
    return "Continue the work recorded in this history.", None


def _decisions(data: CompactionInput, detail: _Detail) -> list[str]:
    found: list[str] = []
    for sections in data.previous:
        found += [f"- {_clean(line, detail.quote)}" for line in _bullets(sections.get("Key Decisions", ""))]
    for entry in data.entries:
        if said := _ASSISTANT_TEXT.match(entry.text):
            flat = " ".join(said.group(1).split())
            sentence = _SENTENCE_END.split(flat, maxsplit=1)[0]
            if sentence:
                found.append(f"- “{_clean(sentence, detail.quote)}”{_seq_ref(entry.seq, None)}")
    unique = list(dict.fromkeys(found))[-detail.decisions :]
    return unique or ["No decisions were recorded in this part of the history."]


def _tool_results(data: CompactionInput) -> list[tuple[int, re.Match[str]]]:
    return [(entry.seq, match) for entry in data.entries if (match := _TOOL_RESULT.match(entry.text))]


def _next_steps(data: CompactionInput, request: str | None) -> list[str]:
    steps = []
    results = _tool_results(data)
    if results and results[-1][1].group(2) == "error":
        seq, match = results[-1]
        steps.append(f"- Resolve the last error first: `{match.group(1)}` failed{_seq_ref(seq, None)}.")
    if request is not None:
        steps.append(f"- Continue with the latest user request: “{request}”.")
    else:
        steps.append("- Continue toward the goal above from where the progress ends.")
    return steps


def _critical_context(data: CompactionInput, detail: _Detail) -> list[str]:
    # Every must-mention line verbatim: the validator looks for each path and directive.
    lines = list(dict.fromkeys(data.must_mention))
    carried: list[str] = []
    for sections in data.previous:
        for line in _bullets(sections.get("Critical Context", "")):
            bullet = f"- {line}" if len(line) <= detail.quote else f"- {_clean(line, detail.quote)}"
            if bullet not in lines and bullet not in carried:
                carried.append(bullet)
    errors = [
        f"- Error in `{match.group(1)}`{_seq_ref(seq, None)}: “{_clean(match.group(3), detail.quote)}”"
        for seq, match in _tool_results(data)
        if match.group(2) == "error"
    ]
    lines += carried[-detail.carried :] + errors[-detail.errors :]
    if not lines:
        return ["- No modified paths, user directives or errors were recorded."]
    if _TRAILING_ELLIPSIS.search(lines[-1]):  # a summary ending in "…" reads as cut off (SPEC C-9)
        lines.append("- Nothing further is critical.")
    return lines


def _render(data: CompactionInput, detail: _Detail) -> str:
    goal, request = _goal(data, detail)
    bodies = {
        "Goal": [goal],
        "Progress": _progress(data, detail),
        "Key Decisions": _decisions(data, detail),
        "Next Steps": _next_steps(data, request),
        "Critical Context": _critical_context(data, detail),
    }
    return "\n\n".join(f"## {title}\n" + "\n".join(bodies[title]) for title in SECTION_TITLES) + "\n"


def summarise(data: CompactionInput, counter: TokenCounter) -> str:
    """A valid five-section summary (SPEC C-8, C-9) of at most SUMMARY_TOKEN_CAP tokens, or of the
    length the request asks for when that is less (as a model keeps roughly to what it is asked).

    A repair request starts shorter. Must-mention lines are never dropped, so only a must-mention
    list near the cap by itself can make the summary exceed it.
    """
    cap = min(SUMMARY_TOKEN_CAP, data.length) if data.length else SUMMARY_TOKEN_CAP
    levels = _DETAIL_LEVELS[_REPAIR_LEVEL:] if data.repair else _DETAIL_LEVELS
    text = ""
    for detail in levels:
        text = _render(data, detail)
        if counter.count(text) <= cap:
            break
    return text


def _section_starts(text: str) -> dict[str, int]:
    return {heading: text.index(heading) for heading in SECTION_HEADINGS if heading in text}


def _cut_with_marker(text: str) -> str:
    """`summary-truncated`: stop half-way through Progress, as a model that ran dry mid-answer."""
    starts = _section_starts(text)
    start, end = starts["## Progress"], starts["## Key Decisions"]
    cut = start + max(len("## Progress\n") + 1, (end - start) // 2)
    return text[:cut].rstrip() + TRUNCATION_MARKER


def _misorder_sections(text: str) -> str:
    """`summary-sections`: Next Steps before Progress, and Key Decisions missing."""
    sections = _sections_of(text)
    order = ("Goal", "Next Steps", "Progress", "Critical Context")
    return "\n\n".join(f"## {title}\n{sections[title]}" for title in order) + "\n"


def _partial(text: str) -> str:
    """`summary-length`: the output limit struck inside Next Steps; Critical Context never came."""
    starts = _section_starts(text)
    start, end = starts["## Next Steps"], starts["## Critical Context"]
    return text[: start + (end - start) // 2]


def summary_reply(
    messages: Sequence[Mapping[str, Any]], fault: str | None, prompt_tokens: int, counter: TokenCounter
) -> SimulatedReply:
    """Answer a compaction request with a summary, or with the defect a fault knob asks for."""
    text = summarise(compaction_input(messages), counter)
    finish_reason = "stop"
    if fault == "summary-truncated":
        text = _cut_with_marker(text)
    elif fault == "summary-sections":
        text = _misorder_sections(text)
    elif fault == "summary-length":
        text, finish_reason = _partial(text), "length"
    elif fault == "truncate":  # the general knob keeps its meaning here too
        text, finish_reason = text[: max(1, len(text) // 2)], "length"
    return SimulatedReply(
        text=text,
        finish_reason=finish_reason,
        prompt_tokens=prompt_tokens,
        completion_tokens=counter.count(text),
    )

"""Provides text summaries: the compaction request (prompt and transcript), the validation of a
candidate (SPEC C-8, C-9) and the repair request. The checkpoint message the model then sees
is rendered by `view/projection.py`.

The summariser reads text: messages become `[seq N] role: …` lines, long ones capped per message
(the full text stays in canonical history), images a fixed placeholder (SPEC K-13).
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from foya_tui.runtime.model import Role
from foya_tui.runtime.providers.summary_format import (
    ANCHOR_OMISSION,
    ANCHOR_TAG,
    COMPACTION_MARKER,
    EARLIER_SUMMARY_TAG,
    IMAGE_PLACEHOLDER,
    LENGTH_LINE,
    MUST_MENTION_DIRECTIVE,
    MUST_MENTION_PATH,
    MUST_MENTION_READ,
    MUST_MENTION_TAG,
    PREVIOUS_SUMMARY_TAG,
    REPAIR_TAG,
    SECTION_HEADINGS,
    TRANSCRIPT_TAG,
    close_tag,
    open_tag,
)
from foya_tui.runtime.text import content_text
from foya_tui.runtime.tokens import TokenCounter
from foya_tui.runtime.view.history import LogEntry
from foya_tui.runtime.view.ledger import Ledger

SYSTEM_PROMPT = f"""{COMPACTION_MARKER}
You write the checkpoint of a long agent session: a summary that replaces the covered part of the
conversation in the model's context. The agent will continue the task from it alone, so it must
be faithful and specific. Answer with exactly these five Markdown sections, in this order, each
with real content, and nothing before or after them:

## Goal
The user's current goal, in their terms: the request in <user-request>.
## Progress
Work done and what was verified; each fact followed by its source like [seq 12] or [seq 12–15].
## Key Decisions
Decisions that shape what follows, and why.
## Next Steps
What is left to do, in order.
## Critical Context
Exact paths, identifiers, commands, error messages, constraints and the user's rules, verbatim.

Rules: every item listed in <must-mention> must appear in your summary (paths and the user's rules
verbatim). <user-request> is the user's request, verbatim: the Goal states it in their words, even
when the history you summarise never shows it. An <earlier-summary> is the part of the checkpoint
that comes before what you summarise: read-only context, so that you know what the work is for and
what is already recorded; do not repeat it, and cite only events of <transcript> or
<previous-summary>. A <previous-summary> is earlier history already summarised: keep its facts
unless later history contradicts them. Close every code fence. Be concise: the summary must be much
shorter than what it replaces."""

REPAIR_INSTRUCTION = (
    "Your previous summary was rejected for the reasons in <repair>. Write it again, shorter, "
    "fixing every reason."
)
TRUNCATION_MARKERS = re.compile(
    r"(\[truncated\]|\[…\]|\[\.\.\.\]|<truncated>|\(truncated\)|…\s*$|\.\.\.\s*$)", re.IGNORECASE
)
FENCE = re.compile(r"^\s*(```|~~~)", re.MULTILINE)
_CLOSING_TAGS = re.compile(
    r"</("
    + "|".join(
        (ANCHOR_TAG, EARLIER_SUMMARY_TAG, TRANSCRIPT_TAG, PREVIOUS_SUMMARY_TAG, MUST_MENTION_TAG, REPAIR_TAG)
    )
    + ")>"
)
_WORD = re.compile(r"[^\W\d_]{3,}|\d+|[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]", re.UNICODE)
MENTION_WORD_SHARE = 0.7
"""A rule counts as mentioned when this share of its words appears in the summary (models rephrase)."""


def _escape(text: str) -> str:
    """Message text cannot close the request's own blocks."""
    return _CLOSING_TAGS.sub(lambda match: f"<\\/{match.group(1)}>", text)


def _capped(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = (limit * 2) // 3
    tail = limit - head
    return f"{text[:head]} […{len(text) - limit:,} characters left out of the summary input…] {text[-tail:]}"


REREADABLE_OMITTED = "[file content left out of the summary input: it can be read again]"


def transcript_lines(
    entries: Iterable[LogEntry],
    message_chars: int,
    error_seqs: frozenset[int] = frozenset(),
    omit_seqs: frozenset[int] = frozenset(),
) -> list[str]:
    """Covered messages as the summariser reads them: one `[seq N]` line each, capped in length.

    `error_seqs` are the tool results that reported an error (messages do not carry that flag);
    `omit_seqs` are results whose content is re-readable and left out (K-8). Hidden control
    messages (the handoff reminder, SPEC K-1) are not part of the conversation and never appear."""
    names: dict[str, str] = {}
    lines: list[str] = []
    for entry in entries:
        if entry.hidden:
            continue
        message = entry.message
        text = content_text(entry.openai.get("content"))
        images = IMAGE_PLACEHOLDER * len(message.attachments)
        if message.role is Role.TOOL:
            name = message.name or names.get(message.tool_call_id or "", "tool")
            status = "error" if entry.seq in error_seqs else "ok"
            shown = REREADABLE_OMITTED if entry.seq in omit_seqs else _capped(text, message_chars)
            lines.append(f"[seq {entry.seq}] tool {name} ({status}): {shown}")
            continue
        role = "user" if message.role is Role.USER else "assistant"
        if text or images or not message.tool_calls:
            lines.append(f"[seq {entry.seq}] {role}: {_capped(text, message_chars)}{images}")
        for call in message.tool_calls:
            names[call.id] = call.name
            lines.append(
                f"[seq {entry.seq}] {role} → {call.name} {_capped(call.arguments, message_chars // 4)}"
            )
    return [_escape(line) for line in lines]


@dataclass(frozen=True)
class PreviousSummary:
    """A segment being merged into a session-level summary (SPEC C-10)."""

    index: int
    from_seq: int
    through_seq: int
    level: int
    text: str


_MUST_MENTION_LABELS = {
    "path": MUST_MENTION_PATH,
    "directive": MUST_MENTION_DIRECTIVE,
    "read": MUST_MENTION_READ,
}


@dataclass(frozen=True)
class Anchor:
    """The user's request (the head anchor) as a summary request carries it."""

    seq: int
    text: str
    """Verbatim, or its head and tail around ANCHOR_OMISSION when it alone would not fit."""


@dataclass(frozen=True)
class SummaryContext:
    """What every summary request carries besides what it summarises (SPEC K-12): the anchor,
    and read-only the earlier segments of the checkpoint it extends, so that `## Goal` is grounded
    in the user's words whichever part of history the request covers."""

    anchor: Anchor | None = None
    earlier: tuple[PreviousSummary, ...] = ()
    digest: bool = False
    """The earlier segments are shortened to their Goal and Next Steps (the plan could not afford
    them whole)."""
    length: int | None = None
    """The summary's length in tokens the request asks for (`context/floor.py`); None: no line."""


TAG_TOKENS = 16
"""Tokens a block's opening and closing tags take (an estimate on the high side)."""
DIGEST_SECTIONS = ("## Goal", "## Next Steps")


def request_anchor(seq: int, text: str, counter: TokenCounter, room: int) -> Anchor:
    """The anchor verbatim when it fits `room` tokens; else its head and tail (two thirds from the
    start) with the omission said in words: history keeps it whole, `history_read` pages it."""
    if counter.count(text) + TAG_TOKENS <= room:
        return Anchor(seq, text)
    chars = len(text)
    while chars > 0:
        chars = chars * 3 // 4
        head = chars * 2 // 3
        omission = ANCHOR_OMISSION.format(count=len(text) - chars)
        shown = f"{text[:head]}\n{omission}\n{text[len(text) - (chars - head) :]}"
        if counter.count(shown) + TAG_TOKENS <= room:
            return Anchor(seq, shown)
    return Anchor(seq, ANCHOR_OMISSION.format(count=len(text)))


def _digest(text: str) -> str:
    """A segment's Goal and Next Steps: what the work is for and where it stood."""
    kept = []
    for heading in DIGEST_SECTIONS:
        match = re.search(rf"^{re.escape(heading)}[ \t]*$(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
        if match and match.group(1).strip():
            kept.append(f"{heading}\n{match.group(1).strip()}")
    return "\n".join(kept) or text


def _cut(text: str, tokens: int, counter: TokenCounter) -> str:
    """`text` cut at a line end (or a word) to about `tokens`; whole when it fits."""
    if counter.count(text) <= tokens:
        return text
    chars = len(text)
    while chars > 0:
        chars = chars * 3 // 4
        head = text[:chars]
        cut = head.rfind("\n")
        head = head[:cut] if cut > chars // 2 else head.rsplit(" ", 1)[0]
        if counter.count(head) <= tokens:
            return head.rstrip()
    return ""


def earlier_context(
    segments: Sequence[PreviousSummary], counter: TokenCounter, room: int
) -> tuple[tuple[PreviousSummary, ...], bool]:
    """The earlier segments a summary request carries read-only within `room` tokens: whole when
    they fit; else a digest of each (its Goal and Next Steps, shared fairly), newest kept first
    when even the digests do not fit. Returns (segments, whether they are a digest)."""
    whole = sum(counter.count(item.text) + TAG_TOKENS for item in segments)
    if whole <= room:
        return tuple(segments), False
    kept: list[PreviousSummary] = []
    for count in range(len(segments), 0, -1):
        share = room // count - TAG_TOKENS
        if share < 32:
            continue
        kept = [replace(item, text=_cut(_digest(item.text), share, counter)) for item in segments[-count:]]
        kept = [item for item in kept if item.text]
        if kept:
            break
    return tuple(kept), True


def context_tokens(context: SummaryContext, counter: TokenCounter) -> int:
    """What a request's context blocks cost (planned sizes include them)."""
    anchor = counter.count(context.anchor.text) + TAG_TOKENS if context.anchor is not None else 0
    return anchor + sum(counter.count(item.text) + TAG_TOKENS for item in context.earlier)


def request_messages(
    *,
    from_seq: int,
    through_seq: int,
    transcript: Sequence[str],
    previous: Sequence[PreviousSummary],
    ledger: Ledger,
    repair_reasons: Sequence[str] = (),
    context: SummaryContext = SummaryContext(),
) -> tuple[dict[str, Any], ...]:
    """The messages of one compaction request (non-streamed; the provider answers with text)."""
    parts: list[str] = []
    if context.anchor is not None:
        parts.append(open_tag(ANCHOR_TAG, seq=context.anchor.seq))
        parts.append(_escape(context.anchor.text))
        parts.append(close_tag(ANCHOR_TAG))
    for summary in context.earlier:
        attributes: dict[str, object] = {
            "index": summary.index,
            "from_seq": summary.from_seq,
            "through_seq": summary.through_seq,
            "level": summary.level,
        }
        if context.digest:
            attributes["digest"] = "true"
        parts.append(open_tag(EARLIER_SUMMARY_TAG, **attributes))
        parts.append(_escape(summary.text))
        parts.append(close_tag(EARLIER_SUMMARY_TAG))
    for summary in previous:
        parts.append(
            open_tag(
                PREVIOUS_SUMMARY_TAG,
                index=summary.index,
                from_seq=summary.from_seq,
                through_seq=summary.through_seq,
                level=summary.level,
            )
        )
        parts.append(_escape(summary.text))
        parts.append(close_tag(PREVIOUS_SUMMARY_TAG))
    if transcript:
        parts.append(open_tag(TRANSCRIPT_TAG, from_seq=from_seq, through_seq=through_seq))
        parts.extend(transcript)
        parts.append(close_tag(TRANSCRIPT_TAG))
    mentions = ledger.must_mention()
    if mentions:
        parts.append(open_tag(MUST_MENTION_TAG))
        for kind, text in mentions:
            label = _MUST_MENTION_LABELS[kind]
            parts.append(_escape(f"- {label}: {' '.join(text.split())}"))
        parts.append(close_tag(MUST_MENTION_TAG))
    if repair_reasons:
        parts.append(open_tag(REPAIR_TAG))
        parts.extend(_escape(f"- {reason}") for reason in repair_reasons)
        parts.append(close_tag(REPAIR_TAG))
        parts.append(REPAIR_INSTRUCTION)
    else:
        parts.append("Write the checkpoint summary of the history above now.")
    if context.length is not None:
        parts.append(LENGTH_LINE.format(tokens=context.length))
    return (
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "\n".join(parts)},
    )


SEQ_REFERENCE = re.compile(r"\[seq\s+(\d+)(?:\s*[–—-]\s*(\d+))?\]", re.IGNORECASE)


def out_of_range_references(text: str, seq_range: tuple[int, int]) -> list[str]:
    """`[seq a–b]` references that point outside the events a summary covers (provenance)."""
    first, last = seq_range
    wrong = []
    for match in SEQ_REFERENCE.finditer(text):
        start = int(match.group(1))
        end = int(match.group(2)) if match.group(2) else start
        if start < first or end > last or end < start:
            wrong.append(match.group(0))
    return wrong


def summary_problems(text: str, finish_reason: str, seq_range: tuple[int, int] | None = None) -> list[str]:
    """Why a candidate summary fails SPEC C-9 (empty when it passes); with `seq_range`, also its
    `[seq a–b]` references that fall outside the events it summarises."""
    problems: list[str] = []
    if seq_range is not None:
        wrong = out_of_range_references(text, seq_range)
        if wrong:
            problems.append(
                f"references outside the summarised events {seq_range[0]}–{seq_range[1]}: "
                + ", ".join(dict.fromkeys(wrong))
            )
    if finish_reason == "length":
        problems.append("the provider stopped at its output length limit (finish_reason=length)")
    positions = []
    for heading in SECTION_HEADINGS:
        match = re.search(rf"^{re.escape(heading)}[ \t]*$", text, re.MULTILINE)
        positions.append(match.start() if match else None)
    missing = [
        heading for heading, position in zip(SECTION_HEADINGS, positions, strict=True) if position is None
    ]
    if missing:
        problems.append(f"missing section(s): {', '.join(missing)}")
    headings = _headings(text)
    extra = [heading for heading in headings if heading not in SECTION_HEADINGS]
    if extra:
        listed = ", ".join(dict.fromkeys(extra))
        problems.append(
            f"section(s) other than the five: {listed} (use exactly {', '.join(SECTION_HEADINGS)})"
        )
    repeated = [heading for heading in SECTION_HEADINGS if headings.count(heading) > 1]
    if repeated:
        problems.append(f"repeated section(s): {', '.join(repeated)} (each appears exactly once)")
    found = [position for position in positions if position is not None]
    if found != sorted(found):
        problems.append("the sections are not in the order " + ", ".join(SECTION_HEADINGS))
    if not missing and found == sorted(found):
        if text[: found[0]].strip():
            problems.append("there is text before ## Goal")
        bounds = [*found, len(text)]
        for index, heading in enumerate(SECTION_HEADINGS):
            body = text[bounds[index] + len(heading) : bounds[index + 1]]
            if not re.search(r"\w", body):
                problems.append(f"section {heading} has no content")
    if len(FENCE.findall(text)) % 2:
        problems.append("a code fence is not closed")
    if TRUNCATION_MARKERS.search(text.rstrip()):
        problems.append("the summary ends with or contains a truncation marker")
    return problems


_HEADING = re.compile(r"^##[ \t]+\S.*$")


def _headings(text: str) -> list[str]:
    """The level-2 headings of a summary outside code fences, as written (trailing space dropped):
    SPEC C-8 allows exactly the five sections, each once."""
    headings = []
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and _HEADING.match(line):
            headings.append(line.rstrip())
    return headings


def _words(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def mentioned(item: str, summary: str, summary_words: frozenset[str] | None = None) -> bool:
    """Whether a summary mentions a ledger item: verbatim (case-folded, spaces collapsed), or, for
    a rule the model rephrased, most of its words."""
    flat_summary = " ".join(unicodedata.normalize("NFKC", summary).casefold().split())
    flat_item = " ".join(unicodedata.normalize("NFKC", item).casefold().split())
    if flat_item in flat_summary:
        return True
    words = set(_words(item))
    if not words:
        return False
    present = summary_words if summary_words is not None else frozenset(_words(summary))
    return len(words & present) / len(words) >= MENTION_WORD_SHARE


def missing_mentions(summary: str, ledger: Ledger) -> list[str]:
    """Repair reasons for what the summary does not name of the ledger's complete lists (SPEC
    K-12): a modified path verbatim, a path read at least by its file name, each user rule."""
    words = frozenset(_words(summary))
    folded = summary.casefold()
    reasons = []
    unread: list[str] = []
    for kind, item in ledger.must_mention():
        if kind == "path":
            if " ".join(item.split()).casefold() not in folded:
                reasons.append(f"it does not mention the modified path {item}")
        elif kind == "read":
            if posixpath.basename(item.rstrip("/")).casefold() not in folded:
                unread.append(item)
        elif not mentioned(item, summary, words):
            reasons.append(f"it does not state the user's rule: {' '.join(item.split())[:300]}")
    if unread:
        reasons.append(f"it does not name these files read: {', '.join(unread)}")
    return reasons

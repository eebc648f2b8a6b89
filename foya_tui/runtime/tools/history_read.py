"""Provides `history_read_tool_result`: inspect, page through and search a stored tool result (SPEC T-2, T-3).

The model sees a large tool result shortened (T-1) with a reference: event seq, tool call id,
SHA-256. This tool reads the full content back from canonical history, after checking that the
reference still points to exactly that result in this session (T-3).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from foya_tui.errors import FoyaError
from foya_tui.runtime.digests import sha256_hex
from foya_tui.runtime.model import Event, Role
from foya_tui.runtime.tokens import default_counter
from foya_tui.runtime.tools.registry import HISTORY_READ_TOOL, ToolContext, ToolResult, ToolSpec, error
from foya_tui.runtime.view.history import message_role, rewound

READ_DEFAULT_CHARS = 8_000
READ_MAX_CHARS = 32_000
SEARCH_DEFAULT_MATCHES = 50
SEARCH_MAX_MATCHES = 500
LINE_MAX_CHARS = 500
PREVIEW_LINES = 5
"""inspect shows this many lines from the start and from the end."""

OPERATIONS = ("inspect", "read", "search")


class HistoryReadError(FoyaError):
    """A bad request or a reference that does not (or no longer) name a result of this session;
    the message says which, in a sentence the model can act on."""


def load_valid_event(context: ToolContext, seq: int) -> Event:
    """Event `seq` of this session, readable and not rewound (SPEC T-3), or HistoryReadError.

    Only the event itself and the rewinds after it are read: a rewind invalidates events *before*
    it, so only a later rewind can have invalidated this one.
    """
    if context.store is None:
        raise HistoryReadError("no event store is available to read from")
    event = context.store.event(context.session_id, seq)
    if event is None:
        raise HistoryReadError(f"there is no event {seq} in this session")
    if event.problem is not None:
        raise HistoryReadError(f"event {seq} is unreadable ({event.problem})")
    if rewound(seq, context.store.rewinds_after(context.session_id, seq)):
        raise HistoryReadError(f"event {seq} was rewound and is no longer part of this session")
    return event


def load_result(context: ToolContext, seq: int, tool_call_id: str, sha256: str | None) -> Event:
    """The tool-result event the reference names, verified as SPEC T-3 asks."""
    event = load_valid_event(context, seq)
    # Imported transcripts carry tool messages too (`foya import`); the compiler shortens any
    # tool-role message, so both kinds can be referenced.
    if message_role(event) is not Role.TOOL:
        raise HistoryReadError(f"event {seq} is not a tool result (its kind is {event.kind})")
    stored_id = event.payload.get("tool_call_id")
    if stored_id != tool_call_id:
        raise HistoryReadError(
            f"tool_call_id mismatch: the result at seq {seq} answers {stored_id!r}, not {tool_call_id!r}"
        )
    content = event.payload.get("content")
    if not isinstance(content, str):
        raise HistoryReadError(f"the result at seq {seq} has no text content")
    if sha256 and sha256_hex(content) != sha256.strip().lower():
        raise HistoryReadError(f"sha256 mismatch: the result at seq {seq} is not the one referenced")
    return event


def cut(text: str, limit: int = LINE_MAX_CHARS) -> str:
    return text if len(text) <= limit else f"{text[:limit]} … [line cut: {len(text):,} characters]"


def line_count(content: str) -> int:
    """Lines are separated by "\\n" (what read and search number); a final newline adds no line."""
    if not content:
        return 0
    return content.count("\n") + (0 if content.endswith("\n") else 1)


def inspect(content: str, event: Event) -> ToolResult:
    lines = line_count(content)
    digest = sha256_hex(content)
    tokens = default_counter().count(content)
    payload = event.payload
    summary = [
        f"tool result at seq {event.seq} ({payload.get('name', '?')}, call {payload.get('tool_call_id')}"
        f"{', error' if payload.get('is_error') else ''})",
        f"length: {len(content):,} characters, {tokens:,} tokens, {lines:,} lines",
        f"sha256: {digest}",
    ]
    # Split only the ends: a 10 MB result has no need to be split whole for ten lines.
    head = content[: LINE_MAX_CHARS * PREVIEW_LINES * 2].split("\n")[:PREVIEW_LINES]
    summary.append(f"first {len(head)} line(s):")
    summary.extend(f"  {number}: {cut(text)}" for number, text in enumerate(head, 1))
    if lines > PREVIEW_LINES:
        body = content[:-1] if content.endswith("\n") else content
        tail = body[-LINE_MAX_CHARS * PREVIEW_LINES * 2 :].split("\n")[-PREVIEW_LINES:]
        first = lines - len(tail) + 1
        summary.append(f"last {len(tail)} line(s):")
        summary.extend(f"  {first + i}: {cut(text)}" for i, text in enumerate(tail))
    summary.append("use op=read (offset, length) to page through it or op=search (query) to find lines")
    return ToolResult(
        content="\n".join(summary),
        metadata={"characters": len(content), "tokens": tokens, "lines": lines, "sha256": digest},
    )


def read(content: str, seq: int, offset: int, length: int) -> ToolResult:
    total = len(content)
    if offset > total or (offset == total and total > 0):
        return error(f"offset {offset} is past the end: the result at seq {seq} has {total:,} characters")
    end = min(offset + length, total)
    header = f"characters {offset:,}–{end:,} of {total:,} (seq {seq})"
    more = end < total
    header += f"; to continue, call with op=read offset={end}" if more else "; this is the end"
    # The content goes back verbatim: offsets must mean the same thing on every call.
    return ToolResult(
        content=f"{header}\n{content[offset:end]}",
        metadata={"offset": offset, "end": end, "characters": total, "truncated": more},
    )


DENSE_OCCURRENCES = 1_000
"""Above this many remaining occurrences, counting matching lines by splitting is cheaper."""


def count_matching_lines(lowered: str, needle: str, start: int) -> int:
    """How many lines from offset `start` (a line start) contain `needle`."""
    if lowered.count(needle, start) > DENSE_OCCURRENCES:
        return sum(needle in line for line in lowered[start:].split("\n"))
    total, position = 0, lowered.find(needle, start)
    while position != -1:
        total += 1
        end = lowered.find("\n", position)
        position = -1 if end == -1 else lowered.find(needle, end + 1)
    return total


def search(content: str, seq: int, query: str, max_matches: int) -> ToolResult:
    """Case-insensitive plain-text search; returns matching lines with line numbers (SPEC T-2).

    The text is lowered once and scanned with `str.find`, so finding the shown lines costs one
    C-speed pass plus Python work per *shown* line. The matches beyond those are only counted,
    by whichever is cheaper: a few more `find`s when they are rare, one split when they are
    dense. `str.lower` can change a string's length (e.g. "İ"); then positions in the lowered
    text no longer map to the original, and the search compares line by line instead.
    """
    needle = query.lower()
    lowered = content.lower()
    hits: list[tuple[int, int, str]] = []  # (line number, offset of the line, line text)
    total = 0
    if len(lowered) == len(content):
        line_number, counted_to, size = 1, 0, len(lowered)
        position = lowered.find(needle)
        while position != -1 and len(hits) < max_matches:
            start = lowered.rfind("\n", 0, position) + 1
            end = lowered.find("\n", position)
            end = size if end == -1 else end
            line_number += lowered.count("\n", counted_to, start)
            counted_to = start
            hits.append((line_number, start, content[start:end]))
            position = lowered.find(needle, end + 1) if end < size else -1
        total = len(hits)
        if position != -1:
            total += count_matching_lines(lowered, needle, lowered.rfind("\n", 0, position) + 1)
    else:
        start = 0
        for number, (line, low) in enumerate(zip(content.split("\n"), lowered.split("\n"), strict=True), 1):
            if needle in low:
                total += 1
                if len(hits) < max_matches:
                    hits.append((number, start, line))
            start += len(line) + 1
    if total == 0:
        return ToolResult(
            content=f"no lines match {query!r} in the result at seq {seq} ({line_count(content):,} lines)",
            metadata={"matches": 0},
        )
    lines = [f"{total:,} matching line(s) for {query!r} in the result at seq {seq}:"]
    lines.extend(f"{number}: (char {start:,}) {cut(text.rstrip(chr(13)))}" for number, start, text in hits)
    if total > len(hits):
        lines.append(f"… {total - len(hits):,} more matches; refine the query or raise max_matches")
    return ToolResult(content="\n".join(lines), metadata={"matches": total, "truncated": total > len(hits)})


class HistoryReadTool:
    """`history_read_tool_result` (SPEC T-2, T-3); shown to the model only when the projection
    holds a shortened result (X-9)."""

    spec = ToolSpec(
        name=HISTORY_READ_TOOL,
        description=(
            "Read a tool result that was shortened in the conversation, from the full copy kept in "
            "history. Give the seq, tool_call_id and sha256 shown in the shortened result. "
            "op=inspect: length, tokens, lines, first and last lines. op=read: a page of characters "
            f"from `offset` (default length {READ_DEFAULT_CHARS:,}, at most {READ_MAX_CHARS:,}). "
            "op=search: lines containing `query` (case-insensitive) with line numbers."
        ),
        parameters={
            "type": "object",
            "properties": {
                "op": {"type": "string", "enum": list(OPERATIONS), "description": "inspect, read or search"},
                "seq": {"type": "integer", "description": "Event seq of the result."},
                "tool_call_id": {"type": "string", "description": "Tool call id of the result."},
                "sha256": {"type": "string", "description": "SHA-256 of the full result, to verify it."},
                "offset": {"type": "integer", "description": "read: first character (0-based)."},
                "length": {"type": "integer", "description": "read: number of characters."},
                "query": {"type": "string", "description": "search: text to find."},
                "max_matches": {"type": "integer", "description": "search: most lines to return."},
            },
            "required": ["op", "seq", "tool_call_id"],
        },
    )

    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        try:
            return self._run(arguments, context)
        except HistoryReadError as exc:
            return error(str(exc))

    def _run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        op = arguments.get("op")
        if op not in OPERATIONS:
            raise HistoryReadError(f"op must be one of {', '.join(OPERATIONS)}, got {op!r}")
        seq = integer_argument(arguments, "seq", 0)
        tool_call_id = arguments.get("tool_call_id")
        if seq < 1:
            raise HistoryReadError(f"seq must be a positive integer, got {seq}")
        if not isinstance(tool_call_id, str):
            raise HistoryReadError("tool_call_id must be a string")
        sha256 = arguments.get("sha256")
        event = load_result(context, seq, tool_call_id, sha256 if isinstance(sha256, str) else None)
        content: str = event.payload["content"]
        if op == "inspect":
            return inspect(content, event)
        if op == "read":
            offset = integer_argument(arguments, "offset", 0)
            length = integer_argument(arguments, "length", READ_DEFAULT_CHARS)
            if offset < 0 or length < 1:
                raise HistoryReadError("offset must be 0 or more and length at least 1")
            return read(content, seq, offset, min(length, READ_MAX_CHARS))
        query = arguments.get("query")
        if not isinstance(query, str) or not query:
            raise HistoryReadError("op=search needs a non-empty query")
        if "\n" in query:
            raise HistoryReadError("query must be a single line: search matches within lines")
        max_matches = integer_argument(arguments, "max_matches", SEARCH_DEFAULT_MATCHES)
        return search(content, seq, query, max(1, min(max_matches, SEARCH_MAX_MATCHES)))


def integer_argument(arguments: Mapping[str, Any], key: str, default: int) -> int:
    """An integer argument (raises HistoryReadError with the argument's name otherwise)."""
    value = arguments.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise HistoryReadError(f"{key} must be an integer, got {value!r}")
    return value

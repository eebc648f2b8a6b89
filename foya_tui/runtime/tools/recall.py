"""Provides recall for the model: `history_search` and `history_read` over canonical history.

A checkpoint summarises; history keeps every word. Once a checkpoint covers part of a session the
model gets these two tools (X-9): search finds events by text (phrases, prefixes, any script),
restricted by default to the range the checkpoint summarises (the rest is in its context
verbatim); read returns one event's text by seq, paged by character offset, after the checks of
SPEC T-3 (this session, not rewound, and the SHA-256 when given).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from foya_tui.runtime.digests import sha256_hex
from foya_tui.runtime.model import Event
from foya_tui.runtime.store import SearchError
from foya_tui.runtime.store.search import message_body
from foya_tui.runtime.tools.history_read import (
    READ_DEFAULT_CHARS,
    READ_MAX_CHARS,
    HistoryReadError,
    integer_argument,
    load_valid_event,
    read,
)
from foya_tui.runtime.tools.registry import (
    HISTORY_EVENT_TOOL,
    HISTORY_SEARCH_TOOL,
    ToolContext,
    ToolResult,
    ToolSpec,
    error,
)

SEARCH_DEFAULT_HITS = 10
SEARCH_MAX_HITS = 50
SCOPES = ("covered", "all")


def event_text(event: Event) -> tuple[str, str]:
    """(role, full text) of a message event: what search indexes, without the index's cap."""
    found = message_body(str(event.kind), event.payload)
    if found is None:
        raise HistoryReadError(f"event {event.seq} is a {event.kind} event, not a message")
    return found


def load_event(context: ToolContext, seq: int, sha256: str | None) -> Event:
    """The event at `seq`, verified like a tool-result reference (SPEC T-3)."""
    event = load_valid_event(context, seq)
    if sha256 and sha256_hex(event_text(event)[1]) != sha256.strip().lower():
        raise HistoryReadError(f"sha256 mismatch: event {seq} is not the one referenced")
    return event


class HistorySearchTool:
    """`history_search`: find events of this session by text (recall beyond the summary)."""

    spec = ToolSpec(
        name=HISTORY_SEARCH_TOOL,
        description=(
            "Search this session's full history (a checkpoint summary replaced part of it in your "
            "context; nothing was deleted). Returns matching events, newest first, with seq, kind, "
            'role and a snippet. Query: words (all must match, any language, case-insensitive), "exact '
            'phrases" in quotes; words match inside longer words. scope=covered (default) searches the '
            "summarised range, scope=all everything. Read a hit in full with history_read."
        ),
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": 'Words and "phrases" to find.'},
                "scope": {"type": "string", "enum": list(SCOPES), "description": "covered (default) or all"},
                "max_hits": {
                    "type": "integer",
                    "description": f"At most this many (default {SEARCH_DEFAULT_HITS}).",
                },
            },
            "required": ["query"],
        },
    )

    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        query = arguments.get("query")
        if not isinstance(query, str):
            return error("query must be a string")
        scope = arguments.get("scope", "covered")
        if scope not in SCOPES:
            return error(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}")
        max_hits = arguments.get("max_hits", SEARCH_DEFAULT_HITS)
        if not isinstance(max_hits, int) or isinstance(max_hits, bool) or max_hits < 1:
            return error("max_hits must be a positive integer")
        if context.store is None:
            return error("no event store is available to search")
        covered = context.covered if scope == "covered" else None
        try:
            hits = context.store.search(
                context.session_id,
                query,
                from_seq=covered[0] if covered else None,
                through_seq=covered[1] if covered else None,
                limit=min(max_hits, SEARCH_MAX_HITS),
            )
        except SearchError as exc:
            return error(str(exc))
        where = f"events {covered[0]}–{covered[1]} (the summarised range)" if covered else "the whole history"
        if not hits:
            hint = "; try scope=all" if covered else ""
            return ToolResult(content=f"no events in {where} match {query!r}{hint}", metadata={"hits": 0})
        lines = [f"{len(hits)} event(s) in {where} match {query!r}, newest first:"]
        lines += [f"[seq {hit.seq}] {hit.role or hit.kind}: {hit.snippet}" for hit in hits]
        lines.append("read one in full with history_read(seq=…)")
        return ToolResult(content="\n".join(lines), metadata={"hits": len(hits)})


class HistoryEventTool:
    """`history_read`: one event's full text by seq, paged (SPEC T-3 checks)."""

    spec = ToolSpec(
        name=HISTORY_EVENT_TOOL,
        description=(
            "Read one event of this session's history in full by its seq (from a summary's [seq N] "
            f"reference or history_search), paged by character offset (default {READ_DEFAULT_CHARS:,}, "
            f"at most {READ_MAX_CHARS:,} characters). Give sha256 to verify it is the event you expect."
        ),
        parameters={
            "type": "object",
            "properties": {
                "seq": {"type": "integer", "description": "Event seq."},
                "offset": {"type": "integer", "description": "First character (0-based)."},
                "length": {"type": "integer", "description": "Number of characters."},
                "sha256": {"type": "string", "description": "SHA-256 of the event's full text."},
            },
            "required": ["seq"],
        },
    )

    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        try:
            seq = integer_argument(arguments, "seq", 0)
            offset = integer_argument(arguments, "offset", 0)
            length = integer_argument(arguments, "length", READ_DEFAULT_CHARS)
            if seq < 1:
                raise HistoryReadError(f"seq must be a positive integer, got {seq}")
            if offset < 0 or length < 1:
                raise HistoryReadError("offset must be 0 or more and length at least 1")
            sha256 = arguments.get("sha256")
            event = load_event(context, seq, sha256 if isinstance(sha256, str) else None)
            role, text = event_text(event)
        except HistoryReadError as exc:
            return error(str(exc))
        if not text:
            return ToolResult(
                content=f"event {seq} ({role or event.kind}) has no text", metadata={"characters": 0}
            )
        page = read(text, seq, offset, min(length, READ_MAX_CHARS))
        if page.is_error:
            return page
        header = (
            f"event {seq} · {event.kind} · {role or '-'} · {event.created_at} · sha256 {sha256_hex(text)}"
        )
        return ToolResult(
            content=f"{header}\n{page.content}", metadata={**page.metadata, "sha256": sha256_hex(text)}
        )

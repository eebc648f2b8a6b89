"""Provides full-text search over canonical history: an FTS5 index kept in step with appends, in the
same transaction, without the events a rewind invalidated (issue "Recall"; SPEC H-2, H-4).

Tokenizer: `trigram`. `unicode61` splits text at spaces and punctuation only, so Chinese or
Japanese text (no spaces) becomes one token per sentence and a word inside it cannot be found.
Trigram indexes every three-character sequence, so any substring of three or more characters is
found in any script, case-insensitively; identifiers, paths and error strings (`KeyError:
'user_id'`) match exactly as written. Shorter terms (a two-character Chinese word such as 目录)
fall back to a LIKE scan of the session's indexed text. The price is index size (measured in
`tests/bench/bench_search.py`).

The index is derived data: deleting rows of rewound events from it never touches history.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import peewee

from foya_tui.errors import InputError
from foya_tui.runtime.model import Event, EventKind
from foya_tui.runtime.text import content_text

INDEXED_CHARS = 1_000_000
"""Characters of one event that are indexed (a 10 MB tool result is searched in its first 1 MB;
`history_read_tool_result` searches all of it)."""
MIN_TRIGRAM_CHARS = 3
SNIPPET_CHARS = 160
MAX_HITS = 200
_MESSAGE_KINDS = {
    str(EventKind.USER_MESSAGE): "user",
    str(EventKind.ASSISTANT_MESSAGE): "assistant",
    str(EventKind.TOOL_RESULT): "tool",
    str(EventKind.IMPORTED_MESSAGE): "",
}
_TERM = re.compile(r'"([^"]*)"|(\S+)')

ProgressCallback = Callable[[int, int], None]
"""(events indexed so far, events to index) while an existing database is indexed."""


class SearchError(InputError):
    """A search query that cannot be run, in one sentence the user or the model can act on."""


@dataclass(frozen=True)
class SearchHit:
    seq: int
    kind: str
    role: str
    snippet: str


def message_body(kind: str, payload: Mapping[str, Any]) -> tuple[str, str] | None:
    """(role, full text) of a stored message event: its words, and its tool calls' names and
    arguments; None for events that are not messages."""
    role = _MESSAGE_KINDS.get(kind)
    if role is None:
        return None
    own_message = kind in (str(EventKind.USER_MESSAGE), str(EventKind.ASSISTANT_MESSAGE))
    parts = [content_text(payload.get("text") if own_message else payload.get("content"))]
    calls = payload.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        if isinstance(call, Mapping):
            inner = call.get("function")
            function = inner if isinstance(inner, Mapping) else call
            parts.append(f"{function.get('name', '')} {function.get('arguments') or ''}")
    if kind == str(EventKind.IMPORTED_MESSAGE):
        role = str(payload.get("role", ""))
    return role, "\n".join(part for part in parts if part)


def indexed_text(kind: str, payload: Mapping[str, Any]) -> tuple[str, str] | None:
    """(role, text) to index for one stored event (capped), or None when there is nothing to find."""
    found = message_body(kind, payload)
    if found is None or not found[1]:
        return None
    text = found[1][:INDEXED_CHARS]
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates (undecodable bytes) are kept in history, not here
        text = text.encode("utf-8", "replace").decode("utf-8")
    return found[0], text


def create_index(database: peewee.Database) -> None:
    database.execute_sql(
        "CREATE VIRTUAL TABLE IF NOT EXISTS event_fts USING fts5("
        "body, session_id UNINDEXED, seq UNINDEXED, kind UNINDEXED, role UNINDEXED, tokenize='trigram')"
    )


_INSERT = "INSERT INTO event_fts (rowid, body, session_id, seq, kind, role) VALUES (?, ?, ?, ?, ?, ?)"
FLUSH_ROWS = 2_000
"""Rows held in memory before they are written, when a whole database is indexed."""


def _unindex_rewound(database: peewee.Database, session_id: str, to_seq: int, rewind_seq: int) -> None:
    # By rowid (= the event's id): the event table's (session, seq) index finds them, where a
    # filter on the index's own unindexed columns would read every row of the session.
    database.execute_sql(
        "DELETE FROM event_fts WHERE rowid IN "
        "(SELECT id FROM event WHERE session_id = ? AND seq > ? AND seq < ?)",
        (session_id, to_seq, rewind_seq),
    )


def index_events(
    database: peewee.Database, session_id: str, events: Sequence[Event], first_event_id: int
) -> None:
    """Index appended events inside the caller's transaction; a rewind drops what it invalidates.

    `first_event_id` is the event table id of `events[0]` (the batch was inserted in order, so
    ids are consecutive). Each row's rowid is its event's id: rows sort in history order and a
    rewind finds its rows through the event table's index. Rows before a rewind in the same batch
    are written before the rewind deletes, so the rewind sees them too."""
    rows: list[tuple[Any, ...]] = []
    for offset, event in enumerate(events):
        if event.kind is EventKind.REWIND:
            to_seq = event.payload.get("to_seq")
            if isinstance(to_seq, int):
                database.cursor().executemany(_INSERT, rows)
                rows = []
                _unindex_rewound(database, session_id, to_seq, event.seq)
            continue
        found = indexed_text(str(event.kind), event.payload)
        if found is not None:
            rows.append((first_event_id + offset, found[1], session_id, event.seq, str(event.kind), found[0]))
    if rows:
        database.cursor().executemany(_INSERT, rows)


def index_existing(database: peewee.Database, progress: ProgressCallback | None = None) -> int:
    """Index every valid message event already stored (the migration that adds the index). The
    index is rebuilt from scratch, so running it again (an interrupted migration) is harmless."""
    database.execute_sql("DELETE FROM event_fts")
    total: int = database.execute_sql("SELECT COUNT(*) FROM event").fetchone()[0]
    done = 0
    sessions = [row[0] for row in database.execute_sql("SELECT id FROM session ORDER BY id").fetchall()]
    for session_id in sessions:
        cuts = []
        for seq, payload in database.execute_sql(
            "SELECT seq, payload FROM event WHERE session_id = ? AND kind = ?",
            (session_id, str(EventKind.REWIND)),
        ).fetchall():
            try:
                to_seq = json.loads(payload).get("to_seq")
            except (ValueError, AttributeError):
                continue
            if isinstance(to_seq, int):
                cuts.append((to_seq, seq))
        rows: list[tuple[Any, ...]] = []
        cursor = database.execute_sql(
            "SELECT id, seq, kind, payload FROM event WHERE session_id = ? ORDER BY seq", (session_id,)
        )
        for event_id, seq, kind, payload in cursor:
            done += 1
            if progress is not None and done % 5_000 == 0:
                progress(done, total)
            if kind not in _MESSAGE_KINDS or any(to_seq < seq < rewind for to_seq, rewind in cuts):
                continue
            try:
                decoded = json.loads(payload)
            except ValueError:
                continue  # an unreadable row is skipped by history too
            found = indexed_text(kind, decoded) if isinstance(decoded, dict) else None
            if found is not None:
                rows.append((event_id, found[1], session_id, seq, kind, found[0]))
            if len(rows) >= FLUSH_ROWS:
                database.cursor().executemany(_INSERT, rows)
                rows = []
        database.cursor().executemany(_INSERT, rows)
    if progress is not None:
        progress(total, total)
    return total


def parse_query(query: str) -> list[str]:
    """A query's terms: "quoted phrases" and bare words (a trailing `*` marks a prefix; with the
    trigram index every term matches inside words anyway). All terms must match."""
    text = query.strip()
    if not text:
        raise SearchError("the search query is empty")
    if text.count('"') % 2:
        raise SearchError('the search query has an unbalanced quote: close the "phrase"')
    terms = []
    for phrase, word in _TERM.findall(text):
        term = phrase if phrase else word.rstrip("*")
        if term.strip():
            terms.append(term)
    if not terms:
        raise SearchError("the search query has no words to look for")
    return terms


def _like(term: str) -> str:
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def search(
    database: peewee.Database,
    session_id: str,
    query: str,
    *,
    from_seq: int | None = None,
    through_seq: int | None = None,
    limit: int = 20,
) -> list[SearchHit]:
    """Matching valid events of one session, newest first, each with a snippet around a match."""
    terms = parse_query(query)
    long_terms = [term for term in terms if len(term) >= MIN_TRIGRAM_CHARS]
    short_terms = [term for term in terms if len(term) < MIN_TRIGRAM_CHARS]
    where = ["session_id = ?"]
    params: list[Any] = [session_id]
    if long_terms:
        where.append("event_fts MATCH ?")
        params.append(" AND ".join('"' + term.replace('"', '""') + '"' for term in long_terms))
    for term in short_terms:
        # The ESCAPE clause matters beyond escaping: without it SQLite hands the LIKE to the
        # trigram index, which has no trigram for a 1–2 character term and finds nothing (目录).
        where.append("body LIKE ? ESCAPE '\\'")
        params.append(_like(term))
    if from_seq is not None:
        where.append("seq >= ?")
        params.append(from_seq)
    if through_seq is not None:
        where.append("seq <= ?")
        params.append(through_seq)
    params.append(max(1, min(limit, MAX_HITS)))
    try:
        rows = database.execute_sql(
            f"SELECT seq, kind, role, body FROM event_fts WHERE {' AND '.join(where)} "
            "ORDER BY rowid DESC LIMIT ?",  # rowid = event id: newest first without sorting all matches
            params,
        ).fetchall()
    except peewee.OperationalError as exc:  # the query is built from quoted terms; say why anyway
        raise SearchError(f"the search query could not be run ({exc})") from None
    return [SearchHit(int(seq), kind, role, snippet(body, terms)) for seq, kind, role, body in rows]


def snippet(body: str, terms: Sequence[str]) -> str:
    """One line of text around the first match (whitespace flattened, no markup)."""
    lowered = body.casefold()
    positions = [position for term in terms if (position := lowered.find(term.casefold())) >= 0]
    start = min(positions) if positions else 0
    half = SNIPPET_CHARS // 2
    begin = max(0, start - half // 2)
    text = " ".join(body[begin : begin + SNIPPET_CHARS * 2].split())[:SNIPPET_CHARS]
    return ("…" if begin > 0 else "") + text + ("…" if begin + SNIPPET_CHARS < len(body) else "")

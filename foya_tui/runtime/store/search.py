"""Provides full-text search over canonical history: an FTS5 index kept in step with appends, in the
same transaction, without the events a rewind invalidated (issue "Recall"; SPEC H-2, H-4).

Tokenizer: `trigram`. `unicode61` splits text at spaces and punctuation only, so Chinese or
Japanese text (no spaces) becomes one token per sentence and a word inside it cannot be found.
Trigram indexes every three-character sequence, so any substring of three or more characters is
found in any script, case-insensitively; identifiers, paths and error strings (`KeyError:
'user_id'`) match exactly as written. Shorter terms (a two-character Chinese word such as 目录)
fall back to a LIKE scan of the session's indexed text. The price is index size (measured in
`tests/bench/bench_search.py`).

The index is derived data: deleting rows of rewound events from it never touches history, and no
write of history depends on it. Indexing runs in a savepoint inside the append's transaction; when
it fails (a damaged or missing index table), the savepoint is rolled back, the index is marked
stale in `store_state`, and the events commit all the same. A stale index is no longer written
to; searching it says so, and `foya verify --repair` rebuilds it (`rebuild_index`, in batches).
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import peewee

from foya_tui.errors import FoyaError, InputError
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


class SearchIndexDamaged(FoyaError):
    """The search index cannot answer (damaged, missing, or marked stale): exit 1, with the repair."""


REPAIR_HINT = "run `foya verify SESSION --repair` to rebuild it"
STALE_KEY = "search_index_stale"
"""`store_state` key: present (its value says why) while the index misses events or is damaged."""
_DATABASE_ERRORS = (peewee.DatabaseError, sqlite3.DatabaseError)


def index_stale_reason(database: peewee.Database) -> str | None:
    """Why the search index is marked stale, or None while it is in step with history."""
    try:
        row = database.execute_sql("SELECT value FROM store_state WHERE key = ?", (STALE_KEY,)).fetchone()
    except _DATABASE_ERRORS:
        return None  # no store_state table yet: a database being migrated
    return str(row[0]) if row is not None else None


def mark_index_stale(database: peewee.Database, reason: str) -> None:
    """Record (inside the caller's transaction) that the index can no longer be trusted."""
    database.execute_sql(
        "INSERT OR REPLACE INTO store_state (key, value) VALUES (?, ?)", (STALE_KEY, reason[:300])
    )


def clear_index_stale(database: peewee.Database) -> None:
    database.execute_sql("DELETE FROM store_state WHERE key = ?", (STALE_KEY,))


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
BATCH_PAUSE_SECONDS = 0.1
"""Pause after each committed batch of a long write (an import, an index rebuild). A waiting
writer's busy handler polls the lock at growing intervals of up to 100 ms; a batch that began again
at once after its commit would win every race and starve it (tests/bench/bench_locking.py measured
a 3 s wait without the pause)."""


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


def index_events_guarded(
    database: peewee.Database, session_id: str, events: Sequence[Event], first_event_id: int
) -> bool:
    """`index_events` that can never fail the caller's transaction (the index is derived data).

    Returns False when the events were not indexed: the index was already stale, or indexing
    failed now (it is then marked stale, with the reason). A failure that made SQLite abandon the
    whole transaction (the disk is full, the file is damaged) is not the index's to hide: it is
    raised, and the append fails as a whole (SPEC H-5)."""
    if index_stale_reason(database) is not None:
        return False
    database.execute_sql("SAVEPOINT foya_index")
    try:
        index_events(database, session_id, events, first_event_id)
        # FTS5 buffers rows and writes them when a savepoint opens (or at COMMIT). Opening one
        # here makes a damaged index fail now, while `foya_index` can still be rolled back: a
        # failing RELEASE would drop the savepoint and leave the rows to fail again at COMMIT.
        database.execute_sql("SAVEPOINT foya_index_flush")
        database.execute_sql("RELEASE foya_index_flush")
    except (*_DATABASE_ERRORS, MemoryError) as exc:
        # sqlite3 raises MemoryError for SQLITE_NOMEM, which a damaged FTS5 block can give by
        # claiming an absurd size: damage of the derived index, not of the machine.
        if not database.connection().in_transaction:
            raise
        database.execute_sql("ROLLBACK TO foya_index")
        database.execute_sql("RELEASE foya_index")
        mark_index_stale(database, f"indexing failed ({exc})")
        return False
    database.execute_sql("RELEASE foya_index")
    return True


def _rewind_cuts(database: peewee.Database, session_id: str) -> list[tuple[int, int]]:
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
    return cuts


def expected_rows(database: peewee.Database, session_id: str, after_id: int = 0) -> Iterator[tuple[Any, ...]]:
    """The index rows a session's history calls for (valid message events with text), in seq
    order: what a rebuild writes and what `foya verify` compares the index with."""
    cuts = _rewind_cuts(database, session_id)
    cursor = database.execute_sql(
        "SELECT id, seq, kind, payload FROM event WHERE session_id = ? AND id > ? ORDER BY seq",
        (session_id, after_id),
    )
    for event_id, seq, kind, payload in cursor:
        if kind not in _MESSAGE_KINDS or any(to_seq < seq < rewind for to_seq, rewind in cuts):
            continue
        try:
            decoded = json.loads(payload)
        except ValueError:
            continue  # an unreadable row is skipped by history too
        found = indexed_text(kind, decoded) if isinstance(decoded, dict) else None
        if found is not None:
            yield (event_id, found[1], session_id, seq, kind, found[0])


def drop_index(database: peewee.Database) -> None:
    """Remove the index whatever state it is in. A damaged FTS5 table cannot always be dropped
    (dropping runs its constructor, which fails on a damaged config or data table); then its
    schema entry is removed directly and its shadow tables dropped, which is what DROP does."""
    try:
        database.execute_sql("DROP TABLE IF EXISTS event_fts")
    except _DATABASE_ERRORS:
        database.execute_sql("PRAGMA writable_schema = ON")
        try:
            database.execute_sql("DELETE FROM sqlite_master WHERE type = 'table' AND name = 'event_fts'")
        finally:
            database.execute_sql("PRAGMA writable_schema = OFF")
    for shadow in ("data", "idx", "content", "docsize", "config"):
        database.execute_sql(f"DROP TABLE IF EXISTS event_fts_{shadow}")


def rebuild_index(
    database: peewee.Database, progress: ProgressCallback | None = None, batch_rows: int = FLUSH_ROWS
) -> int:
    """Rebuild the index from canonical history in bounded transactions; returns rows written.

    The first transaction replaces the index by an empty one marked stale (appends meanwhile skip
    it, so they never wait for the rebuild); each batch then commits on its own; the last one
    indexes what was appended during the rebuild and clears the mark."""
    with database.atomic():
        drop_index(database)
        mark_index_stale(database, "the index is being rebuilt")
    # The schema changed under the dropped table: a new connection sees the new schema cleanly.
    database.close()
    database.connect()
    with database.atomic():
        create_index(database)
        watermark = int(database.execute_sql("SELECT COALESCE(MAX(id), 0) FROM event").fetchone()[0])
    total = int(database.execute_sql("SELECT COUNT(*) FROM event WHERE id <= ?", (watermark,)).fetchone()[0])
    sessions = [row[0] for row in database.execute_sql("SELECT id FROM session ORDER BY id").fetchall()]
    written = 0
    for session_id in sessions:
        rows = [row for row in expected_rows(database, session_id) if row[0] <= watermark]
        for start in range(0, len(rows), batch_rows):
            with database.atomic():
                database.cursor().executemany(_INSERT, rows[start : start + batch_rows])
            written += len(rows[start : start + batch_rows])
            time.sleep(BATCH_PAUSE_SECONDS)
            if progress is not None:
                progress(min(written, total), total)
    with database.atomic():
        # Appended while the batches ran (they skipped the stale index): index them, and apply
        # any rewind among them to rows written earlier, then the index is in step again.
        for (session_id,) in database.execute_sql(
            "SELECT DISTINCT session_id FROM event WHERE id > ?", (watermark,)
        ).fetchall():
            for to_seq, rewind_seq in _rewind_cuts(database, session_id):
                _unindex_rewound(database, session_id, to_seq, rewind_seq)
            late = list(expected_rows(database, session_id, after_id=watermark))
            database.cursor().executemany(_INSERT, late)
            written += len(late)
        clear_index_stale(database)
    if progress is not None:
        progress(total, total)
    return written


def index_existing(database: peewee.Database, progress: ProgressCallback | None = None) -> int:
    """Index every valid message event already stored (the migration that adds the index). The
    index is rebuilt from scratch, so running it again (an interrupted migration) is harmless."""
    database.execute_sql("DELETE FROM event_fts")
    total: int = database.execute_sql("SELECT COUNT(*) FROM event").fetchone()[0]
    done = 0
    sessions = [row[0] for row in database.execute_sql("SELECT id FROM session ORDER BY id").fetchall()]
    for session_id in sessions:
        rows: list[tuple[Any, ...]] = []
        for row in expected_rows(database, session_id):
            rows.append(row)
            if len(rows) >= FLUSH_ROWS:
                database.cursor().executemany(_INSERT, rows)
                done += len(rows)
                rows = []
                if progress is not None:
                    progress(min(done, total), total)
        database.cursor().executemany(_INSERT, rows)
        done += len(rows)
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
    stale = index_stale_reason(database)
    if stale is not None:
        raise SearchIndexDamaged(f"the search index is out of date ({stale}); {REPAIR_HINT}")
    try:
        rows = database.execute_sql(
            f"SELECT seq, kind, role, body FROM event_fts WHERE {' AND '.join(where)} "
            "ORDER BY rowid DESC LIMIT ?",  # rowid = event id: newest first without sorting all matches
            params,
        ).fetchall()
    except _DATABASE_ERRORS as exc:
        if "syntax error" in str(exc) or "malformed MATCH" in str(exc):
            # The query is built from quoted terms; say why anyway.
            raise SearchError(f"the search query could not be run ({exc})") from None
        raise SearchIndexDamaged(f"the search index is damaged ({exc}); {REPAIR_HINT}") from None
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

"""Provides the running digest of a session's history: per event, the digest of the valid message
events up to it, chained to the one before and written with the event in its transaction, so the
source digest of any prefix is one indexed lookup (SPEC C-5, C-12, P-2).

An event's running digest covers the message events at or before it that are valid in the history
up to it (a rewind leaves out what it rewound: SPEC H-4). That value never changes afterwards: a
later rewind that reaches below an event makes the event itself invalid, and the digest of a prefix
is read at its newest *valid* event (`source_digest`). `foya verify` recomputes every running digest
from the stored bytes and compares (`check_chain`); `--repair` rewrites the rows that differ.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import peewee

from foya_tui.runtime.digests import CHAIN_START, chained_digest
from foya_tui.runtime.model import EventKind

MESSAGE_KINDS = (
    str(EventKind.USER_MESSAGE),
    str(EventKind.ASSISTANT_MESSAGE),
    str(EventKind.TOOL_RESULT),
    str(EventKind.IMPORTED_MESSAGE),
)
"""The kinds a source digest covers: what the model could have seen of the covered prefix."""
_MESSAGE_KINDS = frozenset(MESSAGE_KINDS)
_REWIND = str(EventKind.REWIND)
FLUSH_ROWS = 1_000
"""Running digests written per statement while a whole session is (re)computed."""

_INSERT = "INSERT OR REPLACE INTO event_digest (session_id, seq, chain) VALUES (?, ?, ?)"

Row = tuple[int, str, str]
"""(seq, kind, payload text) of a stored event."""


def rewind_target(kind: str, payload: str) -> int | None:
    """The seq a rewind event rewinds to, or None when it is not a readable rewind (an unreadable
    one invalidates nothing, as for valid history)."""
    if kind != _REWIND:
        return None
    try:
        decoded = json.loads(payload)
    except ValueError:
        return None
    to_seq = decoded.get("to_seq") if isinstance(decoded, dict) else None
    return to_seq if isinstance(to_seq, int) else None


def latest_valid(seq: int, ranges: Iterable[tuple[int, int]]) -> int:
    """The newest seq at or before `seq` that no rewind range (to_seq, rewind_seq) covers."""
    ranges = list(ranges)
    moved = True
    while moved and seq > 0:
        moved = False
        for to_seq, rewind_seq in ranges:
            if to_seq < seq < rewind_seq:
                seq, moved = to_seq, True
    return seq


def rewind_ranges(
    database: peewee.Database, session_id: str, before: int | None = None
) -> list[tuple[int, int]]:
    """(to_seq, rewind seq) of the session's readable rewinds (those before `before`, if given)."""
    sql = "SELECT seq, kind, payload FROM event WHERE session_id = ? AND kind = ?"
    params: list[object] = [session_id, _REWIND]
    if before is not None:
        sql += " AND seq < ?"
        params.append(before)
    ranges = []
    for seq, kind, payload in database.execute_sql(sql + " ORDER BY seq", params):
        to_seq = rewind_target(kind, payload)
        if to_seq is not None:
            ranges.append((to_seq, int(seq)))
    return ranges


def stored_chain(database: peewee.Database, session_id: str, seq: int) -> str:
    """The running digest stored for the newest event at or before `seq` (the start before any)."""
    if seq <= 0:
        return CHAIN_START
    row = database.execute_sql(
        "SELECT chain FROM event_digest WHERE session_id = ? AND seq <= ? ORDER BY seq DESC LIMIT 1",
        (session_id, seq),
    ).fetchone()
    return str(row[0]) if row is not None else CHAIN_START


def source_digest(database: peewee.Database, session_id: str, through_seq: int) -> str:
    """The digest of the valid message events 1..through_seq: the running digest of the newest
    valid event at or before it (rewinds are few; the rest is one indexed row)."""
    return stored_chain(database, session_id, latest_valid(through_seq, rewind_ranges(database, session_id)))


def append_chains(database: peewee.Database, session_id: str, rows: Sequence[Row]) -> None:
    """Write the running digests of rows being appended, inside the caller's transaction: each
    chained to the one before (the session's newest stored, then the batch's own)."""
    if not rows:
        return
    first_seq = rows[0][0]
    previous = stored_chain(database, session_id, first_seq - 1)
    chains: dict[int, str] = {}
    ranges: list[tuple[int, int]] | None = None
    out = []
    for seq, kind, payload in rows:
        if kind in _MESSAGE_KINDS:
            previous = chained_digest(previous, seq, kind, payload)
        elif (to_seq := rewind_target(kind, payload)) is not None:
            # After a rewind, valid history is what was valid at its target: continue from there.
            if ranges is None:
                ranges = rewind_ranges(database, session_id, before=first_seq)
            target = latest_valid(min(to_seq, seq - 1), ranges)
            previous = chains[target] if target in chains else stored_chain(database, session_id, target)
            ranges.append((to_seq, seq))
        chains[seq] = previous
        out.append((session_id, seq, previous))
    database.cursor().executemany(_INSERT, out)


@dataclass(frozen=True)
class _Rewinds:
    """What a pass over one session needs to follow its rewinds: each rewind's target, known first."""

    ranges: list[tuple[int, int]]
    targets: dict[int, int]
    """Rewind seq → the valid seq whose running digest it continues from."""

    @classmethod
    def of(cls, database: peewee.Database, session_id: str) -> _Rewinds:
        ranges = rewind_ranges(database, session_id)
        targets = {
            rewind_seq: latest_valid(min(to_seq, rewind_seq - 1), ranges[:position])
            for position, (to_seq, rewind_seq) in enumerate(ranges)
        }
        return cls(ranges, targets)


def recomputed(rows: Iterable[Row], rewinds: _Rewinds) -> Iterator[tuple[int, str]]:
    """(seq, running digest) of every event, recomputed from the stored bytes. Memory stays bounded:
    only the digests a later rewind continues from are remembered."""
    wanted = set(rewinds.targets.values())
    remembered: dict[int, str] = {}
    previous = CHAIN_START
    for seq, kind, payload in rows:
        if kind in _MESSAGE_KINDS:
            previous = chained_digest(previous, seq, kind, payload)
        elif seq in rewinds.targets:
            target = rewinds.targets[seq]
            previous = CHAIN_START if target <= 0 else remembered.get(target, CHAIN_START)
        if seq in wanted:
            remembered[seq] = previous
        yield seq, previous


def _event_rows(database: peewee.Database, session_id: str) -> Iterator[Row]:
    cursor = database.execute_sql(
        "SELECT seq, kind, payload FROM event WHERE session_id = ? ORDER BY seq", (session_id,)
    )
    for seq, kind, payload in cursor:
        yield int(seq), str(kind), str(payload)


def fill_chains(
    database: peewee.Database, session_id: str, written_so_far: Callable[[int], None] | None = None
) -> int:
    """(Re)write every running digest of a session from its stored events (the migration that adds
    them, and `--repair`) in batches; `written_so_far` hears after each. Returns how many."""
    batch: list[tuple[str, int, str]] = []
    written = 0
    for seq, chain in recomputed(_event_rows(database, session_id), _Rewinds.of(database, session_id)):
        batch.append((session_id, seq, chain))
        if len(batch) >= FLUSH_ROWS:
            database.cursor().executemany(_INSERT, batch)
            written += len(batch)
            batch = []
            if written_so_far is not None:
                written_so_far(written)
    database.cursor().executemany(_INSERT, batch)
    database.execute_sql(
        "DELETE FROM event_digest WHERE session_id = ? AND seq NOT IN "
        "(SELECT seq FROM event WHERE session_id = ?)",
        (session_id, session_id),
    )
    return written + len(batch)


@dataclass(frozen=True)
class ChainCheck:
    """What recomputing a session's running digests from its bytes found."""

    events: int
    wrong: int
    """Stored digests that differ from the recomputed one."""
    missing: int
    stray: int
    """Digest rows of seqs that hold no event."""
    first_bad_seq: int | None

    @property
    def ok(self) -> bool:
        return not (self.wrong or self.missing or self.stray)


def check_chain(database: peewee.Database, session_id: str) -> ChainCheck:
    """Recompute every running digest of a session from the stored event bytes and compare it with
    the stored one (streamed: memory does not grow with history)."""
    stored = database.execute_sql(
        "SELECT e.seq, d.chain FROM event e LEFT JOIN event_digest d "
        "ON d.session_id = e.session_id AND d.seq = e.seq WHERE e.session_id = ? ORDER BY e.seq",
        (session_id,),
    )
    events = wrong = missing = 0
    first_bad: int | None = None
    for (seq, chain), (stored_seq, stored_value) in zip(
        recomputed(_event_rows(database, session_id), _Rewinds.of(database, session_id)), stored, strict=True
    ):
        events += 1
        assert seq == stored_seq
        if stored_value is None:
            missing += 1
        elif stored_value != chain:
            wrong += 1
        else:
            continue
        first_bad = seq if first_bad is None else first_bad
    stray = int(
        database.execute_sql(
            "SELECT COUNT(*) FROM event_digest d WHERE d.session_id = ? AND NOT EXISTS "
            "(SELECT 1 FROM event e WHERE e.session_id = d.session_id AND e.seq = d.seq)",
            (session_id,),
        ).fetchone()[0]
    )
    return ChainCheck(events, wrong, missing, stray, first_bad)


__all__ = [
    "MESSAGE_KINDS",
    "ChainCheck",
    "append_chains",
    "check_chain",
    "fill_chains",
    "source_digest",
]

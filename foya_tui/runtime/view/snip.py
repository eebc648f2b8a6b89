"""Provides micro-compaction and snip: which old tool results the model stops seeing in full, and the
placeholder it sees instead (SPEC K-2, K-3, K-4, T-2).

Both work on *candidates*: recorded tool results of tool turns older than the recent window, not
covered by the checkpoint, not yet snipped, whose placeholder is smaller than what the model sees
now. Micro-compaction (the provider's prompt cache went cold, K-3) takes them all; snip (K-4)
takes only what frees the tokens asked for, read-only successes first, then writes, then errors,
because errors and side effects are the evidence worth keeping longest. A `context_snipped` event
records the result; the full content stays in canonical history (H-2), readable through
`history_read_tool_result` with the seq, tool call id and SHA-256 the placeholder names (T-2, T-3).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from itertools import pairwise
from typing import Any

from foya_tui.runtime.digests import sha256_hex
from foya_tui.runtime.model import EventKind, NewEvent
from foya_tui.runtime.view.history import HISTORY_READ_TOOL

SNIP_VERSION = 1


class SnipMode(StrEnum):
    MICRO = "micro"
    """The prompt cache is cold: only the recent window keeps its content (SPEC K-3)."""
    SNIP = "snip"
    """Old tool results removed in K-4 order until enough tokens are free."""


class CandidateKind(StrEnum):
    """The K-4 classes, in the order they are snipped."""

    READ = "read"
    WRITE = "write"
    ERROR = "error"


_ORDER = {CandidateKind.READ: 0, CandidateKind.WRITE: 1, CandidateKind.ERROR: 2}


@dataclass(frozen=True)
class SnipCandidate:
    seq: int
    tool_call_id: str
    name: str
    kind: CandidateKind
    tokens_saved: int
    """What the placeholder saves against the form the model sees now (full or shortened, T-1)."""


def k4_order(candidates: Iterable[SnipCandidate]) -> list[SnipCandidate]:
    """Read-only successes, then writes, then errors; oldest first within each (SPEC K-4)."""
    return sorted(candidates, key=lambda candidate: (_ORDER[candidate.kind], candidate.seq))


@dataclass(frozen=True)
class SnipPlan:
    mode: SnipMode
    seqs: tuple[int, ...]
    """The tool-result seqs to snip, ascending."""
    tokens_saved: int

    def event(self) -> NewEvent:
        return NewEvent(
            EventKind.CONTEXT_SNIPPED,
            {
                "version": SNIP_VERSION,
                "mode": str(self.mode),
                "seqs": list(self.seqs),
                "tokens_saved": self.tokens_saved,
            },
        )


def _plain_int(value: Any) -> bool:
    return type(value) is int  # bool is an int subclass and is no seq or count


def parse_snip(payload: Any) -> SnipPlan | None:
    """A strict v1 record, or None: exactly the keys version, mode, seqs and tokens_saved; seqs a
    non-empty, strictly ascending list of positive integers; tokens_saved an integer ≥ 0."""
    if not isinstance(payload, Mapping) or set(payload) != {"version", "mode", "seqs", "tokens_saved"}:
        return None
    if not _plain_int(payload["version"]) or payload["version"] != SNIP_VERSION:
        return None
    try:
        mode = SnipMode(payload["mode"])
    except ValueError:
        return None
    seqs, saved = payload["seqs"], payload["tokens_saved"]
    if not isinstance(seqs, list) or not seqs or not all(_plain_int(seq) and seq > 0 for seq in seqs):
        return None
    if any(later <= earlier for earlier, later in pairwise(seqs)):
        return None
    if not _plain_int(saved) or saved < 0:
        return None
    return SnipPlan(mode=mode, seqs=tuple(seqs), tokens_saved=saved)


def plan_micro(candidates: Sequence[SnipCandidate]) -> SnipPlan | None:
    """After a cold cache every candidate goes: only the recent window keeps its content (K-3)."""
    if not candidates:
        return None
    return SnipPlan(
        SnipMode.MICRO,
        tuple(sorted(candidate.seq for candidate in candidates)),
        sum(candidate.tokens_saved for candidate in candidates),
    )


def plan_snip(candidates: Sequence[SnipCandidate], tokens_to_free: int) -> SnipPlan | None:
    """Candidates in K-4 order until `tokens_to_free` is reached; when all of them are not enough,
    all of them (what snip cannot free is left to the LLM compaction that follows: K-2)."""
    if tokens_to_free <= 0 or not candidates:
        return None
    chosen: list[SnipCandidate] = []
    freed = 0
    for candidate in k4_order(candidates):
        if freed >= tokens_to_free:
            break
        chosen.append(candidate)
        freed += candidate.tokens_saved
    return SnipPlan(SnipMode.SNIP, tuple(sorted(candidate.seq for candidate in chosen)), freed)


def _parse_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def cache_is_cold(last_call_at: str | None, now: datetime, ttl_seconds: float) -> bool:
    """Whether more than `ttl_seconds` passed since the last provider call (SPEC K-3).

    `last_call_at` is the store's `created_at` of that call's usage record (ISO 8601, UTC). No call
    yet means no cache to lose: not cold. An unreadable time is not evidence of expiry either."""
    if last_call_at is None:
        return False
    then = _parse_time(last_call_at)
    if then is None:
        return False
    return now - then > timedelta(seconds=ttl_seconds)


def snipped_text(content: str, seq: int, tool_call_id: str, name: str) -> str:
    """The model-visible form of a snipped result: one paragraph naming what it was and how to read
    it back, with the SHA-256 that `history_read_tool_result` verifies (SPEC T-2, T-3)."""
    return (
        f"[Foya removed this tool result from the model's view to save context: the {name or 'tool'} "
        f"result at seq {seq}, {len(content):,} characters. The full text is kept in the session "
        f'history: call {HISTORY_READ_TOOL} with seq={seq}, tool_call_id="{tool_call_id}", '
        f'sha256="{sha256_hex(content)}" (op "inspect" summarises, "read" pages by character '
        'offset, "search" finds lines).]'
    )

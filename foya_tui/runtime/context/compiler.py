"""Provides the context compiler: before every model call, the request built fresh from history
in five layers, with a token budget and a verdict (SPEC X-1..X-8, B-1..B-9).

The compiler keeps, per session, an incrementally maintained message log and per-tokenizer prefix
sums, so a step reads only the events appended since the last one and costs the same at 100,000
events as at 1,000 (see `tests/bench/bench_compiler.py`). Canonical history is never changed:
snipped tool results (K-3, K-4), handoff records (K-1) and provider-native state (C-11, R-2) only
change what one request shows.
"""

from __future__ import annotations

import base64
import bisect
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from foya_tui.runtime.context.budget import Budget, Verdict, compute_budget
from foya_tui.runtime.context.report import handoff_state
from foya_tui.runtime.context.sources import load_sources
from foya_tui.runtime.context.tool_results import shortened_count, shortened_text
from foya_tui.runtime.context.tracker import Estimate, EstimateSource, estimate_request, latest_baseline
from foya_tui.runtime.digests import canonical_json, digest_of
from foya_tui.runtime.model import AttachmentRef, Event, EventKind, Message, Role
from foya_tui.runtime.providers.catalog import ModelInfo, model_info
from foya_tui.runtime.providers.client import ProviderRequest
from foya_tui.runtime.providers.routes import Route
from foya_tui.runtime.store import EventStore
from foya_tui.runtime.tokens import (
    TOKENS_PER_MESSAGE,
    TOKENS_PER_REPLY,
    TokenCounter,
    count_tools,
    counter_for_model,
    message_text,
)
from foya_tui.runtime.tools.registry import Effect, ToolRegistry
from foya_tui.runtime.view.checkpoint import Checkpoint, ProjectionKind
from foya_tui.runtime.view.handoff import NO_EPOCH, EpochStatus, HandoffTracker, epoch_of
from foya_tui.runtime.view.history import LogEntry, MessageLog, rewound, valid_events
from foya_tui.runtime.view.projection import checkpoint_head
from foya_tui.runtime.view.recovery import CheckpointReader, CheckpointState
from foya_tui.runtime.view.snip import CandidateKind, SnipCandidate, k4_order, parse_snip, snipped_text
from foya_tui.settings import Settings, ToolSettings

LAYER_NAMES = ("pinned", "history", "working_set", "tool_schema", "native_state")
# Tokens charged per image sent: providers bill roughly 765 (OpenAI, high detail) to ~1,600
# (Anthropic, ~1.1 megapixel); the larger keeps the estimate conservative.
IMAGE_TOKENS = 1_600
_DATA_URL_CACHE_SIZE = 8


@dataclass(frozen=True)
class LayerTokens:
    """Tokens per layer of SPEC X-7, counted locally. Layering is for diagnosis: it deletes nothing."""

    pinned: int
    history: int
    working_set: int
    tool_schema: int
    native_state: int

    @property
    def total(self) -> int:
        return self.pinned + self.history + self.working_set + self.tool_schema + self.native_state

    @property
    def fixed(self) -> int:
        """The context that is not conversation: its growth is added to a measured baseline (B-6)."""
        return self.pinned + self.tool_schema + self.native_state

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in LAYER_NAMES}


@dataclass(frozen=True)
class RequestView:
    """One compiled request, immutable (SPEC X-6)."""

    session_id: str
    route: Route
    model: ModelInfo
    messages: Sequence[Mapping[str, Any]]
    tools: tuple[Mapping[str, Any], ...]
    native_state: Mapping[str, Any] | None
    through_seq: int
    """The last event seq this request carries."""
    anchor_seq: int | None
    revision: str
    """Identifies the projection's shape (rewinds, checkpoint); a measured baseline is only reused
    for a request of the same revision (SPEC B-7)."""
    checkpoint: Checkpoint | None
    """The checkpoint this request's projection applies (SPEC V: Model Projection), if any."""
    layers: LayerTokens
    counter: str
    counted_exactly: bool
    """True when layers were counted with the model's own tokenizer, False for a char-weight estimate."""
    budget: Budget
    estimate: Estimate
    verdict: Verdict
    shortened_seqs: tuple[int, ...] = ()
    """Tool results shown shortened in this request (SPEC T-1)."""
    notices: tuple[str, ...] = ()
    handoff_epoch: str = NO_EPOCH
    """The compaction epoch (the current checkpoint) a handoff written now would belong to (SPEC K-1)."""
    handoff_status: EpochStatus = EpochStatus.NONE
    snipped_seqs: tuple[int, ...] = ()
    """Tool results of this request shown as a snip placeholder (SPEC K-3, K-4)."""
    snip_saved_tokens: int = 0
    """What those placeholders save against the form each result would have without any snip."""
    native_checkpoint: Checkpoint | None = None
    """The provider-native checkpoint in force (current, or the candidate), sent or not (SPEC R-2)."""

    @property
    def checkpoint_id(self) -> str | None:
        return self.checkpoint.id if self.checkpoint is not None else None

    @property
    def snapshot_known(self) -> bool:
        """Whether the token snapshot is known: the route's window, or a measured baseline. Without
        it micro-compaction and snip may run, LLM compaction and handoff may not (SPEC K-5)."""
        return self.model.window is not None or self.estimate.source is not EstimateSource.ESTIMATE

    def provider_request(self) -> ProviderRequest:
        return ProviderRequest(
            route=self.route, messages=tuple(self.messages), tools=self.tools, native_state=self.native_state
        )

    def _native_report(self) -> dict[str, Any] | None:
        native = self.native_checkpoint
        if native is None:
            return None
        return {
            "checkpoint_id": native.id,
            "bound_model": native.model,
            "sent": self.native_state is not None,
        }

    def report(self) -> dict[str, Any]:
        """The JSON shape of `foya context --json` and of `context` runtime updates."""
        return {
            "session": self.session_id,
            "route": {
                "id": self.route.id,
                "model": self.route.model,
                "connection": self.route.connection,
                "simulator": self.route.is_simulator,
            },
            "window": self.budget.window,
            "window_source": self.model.source,
            "max_input": self.budget.max_input,
            "output_reserve": self.budget.output_reserve,
            "reserve_basis": self.budget.reserve_basis,
            "input_budget": self.budget.input_budget,
            "handoff_at": self.budget.handoff_at,
            "high_water": self.budget.high_water,
            "estimate": {
                "total": self.estimate.total,
                "source": str(self.estimate.source),
                "reason": self.estimate.reason,
            },
            "layers": self.layers.as_dict(),
            "counter": self.counter,
            "counted_exactly": self.counted_exactly,
            "verdict": str(self.verdict),
            "through_seq": self.through_seq,
            "anchor_seq": self.anchor_seq,
            "checkpoint_id": self.checkpoint_id,
            "checkpoint": _checkpoint_summary(self.checkpoint),
            "messages": len(self.messages),
            "tools": [tool["function"]["name"] for tool in self.tools if "function" in tool],
            "shortened_seqs": list(self.shortened_seqs),
            "snipped": {"count": len(self.snipped_seqs), "tokens_saved": self.snip_saved_tokens},
            "snapshot_known": self.snapshot_known,
            "handoff": {
                "state": str(handoff_state(self.verdict)),
                "epoch": self.handoff_epoch,
                "status": str(self.handoff_status),
            },
            "native": self._native_report(),
            "notices": list(self.notices),
        }


ACTIVE_CONTENT_CHARS = 32_000


def _active_content(entries: Sequence[LogEntry], anchor: int | None) -> str:
    """The working set's recent text, which decides which path-matched rules are in force."""
    texts: list[str] = []
    size = 0
    for index in range(len(entries) - 1, (anchor or 0) - 1, -1):
        if entries[index].hidden:
            continue  # a handoff reminder is Foya's own text, not the work in hand
        text = message_text(entries[index].openai)
        texts.append(text[-(ACTIVE_CONTENT_CHARS - size) :])
        size += len(texts[-1])
        if size >= ACTIVE_CONTENT_CHARS:
            break
    return "\n".join(reversed(texts))


class MessageSequence(Sequence[Mapping[str, Any]]):
    """A request's messages as an immutable view over the session's log, without copying it.

    The log only ever grows (a rewind starts a new log), so a view that remembers its length
    keeps seeing exactly the messages of its own compile. Building the request is O(1) in the
    length of history; copying happens only when a provider request is actually sent.
    """

    __slots__ = ("_body", "_head", "_length", "_replaced", "_start", "_tail")

    def __init__(
        self,
        head: tuple[Mapping[str, Any], ...],
        body: Sequence[LogEntry],
        replaced: Callable[[int], Mapping[str, Any] | None],
        tail: tuple[Mapping[str, Any], ...],
        start: int = 0,
    ) -> None:
        """`replaced(i)` is the per-request form of log entry i (an image materialised, a large
        result shortened), or None when the cached form stands. Entries before `start` are covered
        by a checkpoint and not part of the request."""
        self._head = head
        self._body = body
        self._start = start
        self._length = len(body) - start
        self._replaced = replaced
        self._tail = tail

    def __len__(self) -> int:
        return len(self._head) + self._length + len(self._tail)

    def through(self, seq: int) -> tuple[Mapping[str, Any], ...]:
        """The request's messages up to the log entries of `seq` (its head included), in the form
        this request sends them: what the model sees of that prefix (native compaction's input)."""
        entries = self._body[self._start : self._start + self._length]
        count = bisect.bisect_right(entries, seq, key=lambda entry: entry.seq)
        return tuple(self._at(index) for index in range(len(self._head) + count))

    def _at(self, index: int) -> Mapping[str, Any]:
        if index < len(self._head):
            return self._head[index]
        index -= len(self._head)
        if index < self._length:
            index += self._start
            return self._replaced(index) or self._body[index].openai
        return self._tail[index - self._length]

    def __getitem__(self, index: int | slice) -> Any:  # type: ignore[override]
        if isinstance(index, slice):
            return tuple(self._at(i) for i in range(*index.indices(len(self))))
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("message index out of range")
        return self._at(index)

    def __iter__(self):  # type: ignore[override]
        return (self._at(i) for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"MessageSequence({len(self)} messages)"


def message_tokens(message: Mapping[str, Any], counter: TokenCounter) -> int:
    return TOKENS_PER_MESSAGE + counter.count(message_text(message))


@dataclass
class _TokenColumn:
    """Prefix sums of per-message tokens for one tokenizer, extended as the log grows; and the tool
    results too large to show in full under pressure (SPEC T-1), each with its shortened form and
    the running sum of what shortening saves, so a compile decides and accounts in O(log n)."""

    counter: TokenCounter
    policy: ToolSettings
    prefix: list[int] = field(default_factory=lambda: [0])
    large_indexes: list[int] = field(default_factory=list)
    large_seqs: list[int] = field(default_factory=list)
    shortened: dict[int, Mapping[str, Any]] = field(default_factory=dict)
    savings: list[int] = field(default_factory=lambda: [0])
    """savings[k]: tokens saved by shortening the first k large results."""
    placeholders: dict[int, tuple[Mapping[str, Any], int]] = field(default_factory=dict)
    """Snip placeholders (SPEC K-3, K-4) made so far, with their tokens, by entry index."""
    committed: _Visible | None = None
    """The column as seen with the committed snips (rebuilt from the first change when they change)."""
    committed_version: int = -1
    """The session's snip version `committed` reflects."""

    def extend(self, entries: Sequence[LogEntry]) -> None:
        for index in range(len(self.prefix) - 1, len(entries)):
            entry = entries[index]
            tokens = message_tokens(entry.openai, self.counter)
            self.prefix.append(self.prefix[-1] + tokens)
            message = entry.message
            if message.role is Role.TOOL and tokens > self.policy.oversized_tokens and message.content:
                call_id = message.tool_call_id or ""
                text = shortened_text(message.content, entry.seq, call_id, tokens, self.policy)
                short = {**entry.openai, "content": text}
                self.large_indexes.append(index)
                self.large_seqs.append(entry.seq)
                self.shortened[index] = short
                self.savings.append(self.savings[-1] + tokens - message_tokens(short, self.counter))

    def tokens_of(self, index: int) -> int:
        """Entry `index`'s tokens in full, from the prefix sums (never re-tokenized)."""
        return self.prefix[index + 1] - self.prefix[index]

    def shortened_tokens(self, index: int) -> int | None:
        """Tokens of entry `index` in its shortened form (T-1), or None when it is not large."""
        position = bisect.bisect_left(self.large_indexes, index)
        if position == len(self.large_indexes) or self.large_indexes[position] != index:
            return None
        return self.tokens_of(index) - (self.savings[position + 1] - self.savings[position])

    def placeholder(
        self, index: int, entry: LogEntry, name: Callable[[int], str]
    ) -> tuple[Mapping[str, Any], int]:
        """The snip placeholder of a tool result and its tokens (made once per entry and tokenizer).
        Role, tool_call_id and name stay, so the tool group stays valid."""
        made = self.placeholders.get(index)
        if made is None:
            message = entry.message
            text = snipped_text(message.content or "", entry.seq, message.tool_call_id or "", name(index))
            placeholder = {**entry.openai, "content": text}
            made = self.placeholders[index] = (placeholder, message_tokens(placeholder, self.counter))
        return made

    def base(self) -> _Visible:
        """The column with nothing snipped: a view over its own lists, which only ever grow."""
        return _Visible(
            self, [], frozenset(), [], [0], self.large_indexes, self.large_seqs, self.savings, [], 0, ""
        )


@dataclass
class _Visible:
    """A token column as the model sees it with a set of tool results snipped (SPEC K-3, K-4).

    A snipped entry counts as its placeholder, and only the others can be large and shortened
    (T-1), so shortening decisions see the snipped log. Per-entry prefix sums are the column's
    minus the cumulative cut of the snipped entries before an index: a query costs O(log n); a
    changed snip set rebuilds the cumulative lists from its first changed entry, from stored
    per-entry token counts (history is never re-tokenized).
    """

    column: _TokenColumn
    indexes: list[int]
    """Snipped entry indexes, ascending."""
    members: frozenset[int]
    """The same indexes, for O(1) membership."""
    seqs: list[int]
    cut: list[int]
    """cut[k]: tokens the placeholders of the first k snipped entries remove (full − placeholder)."""
    large_indexes: list[int]
    """The large results that are not snipped, with their seqs and cumulative shortening savings."""
    large_seqs: list[int]
    savings: list[int]
    large_cut: list[int]
    """Over the column's large results: large_cut[k] sums the savings of the snipped ones among the
    first k (what shortening would have saved on them without any snip)."""
    large_seen: int
    """How many of the column's large results this view took into account."""
    key: str
    """Identifies the snipped set (empty when nothing is snipped): part of the revision (B-7)."""
    _seqs_from: tuple[int, tuple[int, ...]] | None = None

    def prefix(self, index: int) -> int:
        if not self.indexes:
            return self.column.prefix[index]
        return self.column.prefix[index] - self.cut[bisect.bisect_left(self.indexes, index)]

    def cut_between(self, first: int, last: int) -> int:
        """Tokens the placeholders remove among entries first..last-1."""
        if not self.indexes:
            return 0
        return (
            self.cut[bisect.bisect_left(self.indexes, last)]
            - self.cut[bisect.bisect_left(self.indexes, first)]
        )

    def seqs_from(self, first: int) -> tuple[int, ...]:
        """Seqs of the snipped entries at or after index `first` (the last answer is kept: a
        session's steps ask the same committed view the same question, and it may be long)."""
        cached = self._seqs_from
        if cached is None or cached[0] != first:
            cached = self._seqs_from = (first, tuple(self.seqs[bisect.bisect_left(self.indexes, first) :]))
        return cached[1]

    def is_snipped(self, index: int) -> bool:
        return index in self.members

    def saved_between(self, first: int, last: int, shortened_count: int) -> int:
        """Tokens saved by shortening, among log entries first..last-1 (of the first N large results)."""
        low = min(bisect.bisect_left(self.large_indexes, first), shortened_count)
        high = min(bisect.bisect_left(self.large_indexes, last), shortened_count)
        return self.savings[high] - self.savings[low]

    def snipped_large_savings(self, low: int, high: int) -> int:
        """What shortening the column's large results low..high-1 saves on the snipped ones."""
        if not self.indexes:
            return 0
        return self.large_cut[high] - self.large_cut[low]

    def sync(self) -> None:
        """Take in the large results the column gained since (the log only grows between rebuilds)."""
        if self.indexes and self.large_seen < len(self.column.large_indexes):
            self._take_large(self.large_seen)

    def _take_large(self, start: int) -> None:
        column = self.column
        for position in range(start, len(column.large_indexes)):
            index = column.large_indexes[position]
            saving = column.savings[position + 1] - column.savings[position]
            if index in self.members:
                self.large_cut.append(self.large_cut[-1] + saving)
            else:
                self.large_cut.append(self.large_cut[-1])
                self.large_indexes.append(index)
                self.large_seqs.append(column.large_seqs[position])
                self.savings.append(self.savings[-1] + saving)
        self.large_seen = len(column.large_indexes)

    def with_snipped(
        self, indexes: Sequence[int], entries: Sequence[LogEntry], names: Callable[[int], str]
    ) -> _Visible:
        """This view with exactly `indexes` (ascending) snipped, rebuilt from the first entry where the
        sets differ; everything before it is copied, not recomputed."""
        if list(indexes) == self.indexes:
            return self
        column = self.column
        if not indexes:
            return column.base()
        snipped = frozenset(indexes)
        changed = min(snipped.symmetric_difference(self.indexes))
        keep = bisect.bisect_left(indexes, changed)
        cut = self.cut[: keep + 1]
        for index in indexes[keep:]:
            _, placeholder_tokens = column.placeholder(index, entries[index], names)
            cut.append(cut[-1] + column.tokens_of(index) - placeholder_tokens)
        kept_large = bisect.bisect_left(self.large_indexes, changed)
        from_large = bisect.bisect_left(column.large_indexes, changed)
        large_cut = self.large_cut[: from_large + 1] if self.indexes else [0] * (from_large + 1)
        view = _Visible(
            column=column,
            indexes=list(indexes),
            members=snipped,
            seqs=[entries[index].seq for index in indexes],
            cut=cut,
            large_indexes=self.large_indexes[:kept_large],
            large_seqs=self.large_seqs[:kept_large],
            savings=self.savings[: kept_large + 1],
            large_cut=large_cut,
            large_seen=from_large,
            key="",
        )
        view._take_large(from_large)
        view.key = digest_of(view.seqs)[:16]
        return view


class _SessionState:
    """What the compiler keeps between steps of one session."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.lock = threading.Lock()
        self.last_seq = 0
        self._reset()

    def _reset(self) -> None:
        self.log = MessageLog()
        self.seqs: list[int] = []
        self.roles: list[Role] = []
        self.usage_events: list[Event] = []
        self.rewinds: list[int] = []
        self.columns: dict[str, _TokenColumn] = {}
        self.with_attachments: list[int] = []
        """Indexes of log entries that carry images, materialised per request (SPEC I-1)."""
        self.activations: list[tuple[int, tuple[str, ...]]] = []
        """(seq, tool names) that tool_search results activated."""
        self.checkpoints: CheckpointState | None = None
        """The current checkpoint, re-read when a completion, undo or rewind event arrives."""
        self.checkpoint_heads: dict[str, tuple[Mapping[str, Any], ...]] = {}
        self.checkpoint_tokens: dict[tuple[str, str], int] = {}
        self.handoffs = HandoffTracker()
        self.logged_epochs: set[str] = set()
        """Epochs whose handoff record is in the log (a later duplicate forces a rebuild: K-1)."""
        self.turn_starts: list[int] = []
        """Log index of each assistant message with tool calls (a tool turn's head, ascending)."""
        self.turn_ends: list[int] = []
        """Log index of the last result of each tool turn (placeholders included)."""
        self.errors: set[int] = set()
        """Log indexes of tool results recorded as errors (snipped last: SPEC K-4)."""
        self.snipped: list[int] = []
        """Log indexes of the tool results committed `context_snipped` events took out (K-2..K-4)."""
        self.snipped_set: set[int] = set()
        self.snip_version = 0
        """Changes whenever `snipped` does (views built from it are rebuilt then)."""
        self.snip_notices: list[str] = []

    def refresh(self, store: EventStore) -> None:
        """Read the events appended since the last refresh; a rewind rebuilds from the store, and so
        does a handoff record that suppresses an epoch whose record the log already holds (K-1)."""
        new = store.events(self.session_id, after_seq=self.last_seq)
        if not new:
            return
        if any(event.kind in _CHECKPOINT_EVENTS for event in new):
            self.checkpoints = None
        self.last_seq = new[-1].seq
        if any(event.kind is EventKind.REWIND for event in new):
            self._rebuild(store)
            return
        for event in new:
            self.handoffs.observe(event)
        if any(self.handoffs.status(epoch) is EpochStatus.SUPPRESSED for epoch in self.logged_epochs):
            self._rebuild(store)
            return
        for event in new:
            if event.problem is None:
                self._add(event)

    def _rebuild(self, store: EventStore) -> None:
        """Start over from valid history, the way a rewind does (rare: a rewind or a duplicate handoff)."""
        self._reset()
        events = store.events(self.session_id)
        valid = valid_events(events)
        # An unreadable handoff row still counts against its epoch (a malformed record), unless rewound.
        rewinds = [event for event in events if event.kind is EventKind.REWIND]
        unreadable = [
            event
            for event in events
            if event.problem is not None
            and event.kind is EventKind.HANDOFF
            and not rewound(event.seq, [rewind for rewind in rewinds if rewind.seq > event.seq])
        ]
        for event in sorted([*valid, *unreadable], key=lambda event: event.seq) if unreadable else valid:
            self.handoffs.observe(event)
        for event in valid:
            self._add(event)

    def _add(self, event: Event) -> None:
        kind = event.kind
        if kind is EventKind.PROVIDER_USAGE:
            self.usage_events.append(event)
        elif kind is EventKind.TOOL_RESULT:
            metadata = event.payload.get("metadata")
            activated = metadata.get("activated") if isinstance(metadata, Mapping) else None
            if isinstance(activated, list):
                self.activations.append((event.seq, tuple(str(name) for name in activated)))
        elif kind is EventKind.REWIND:
            self.rewinds.append(event.seq)
        elif kind is EventKind.CONTEXT_SNIPPED:
            self._apply_snip(event)
            return
        before = len(self.log.entries)
        if kind is EventKind.HANDOFF:
            epoch = self.handoffs.epoch_at(event.seq)
            if epoch is None or self.handoffs.status(epoch) is not EpochStatus.RECORDED:
                return  # a suppressed epoch's records are never sent (SPEC K-1)
            self.log.add_hidden(event)
            self.logged_epochs.add(epoch)
        else:
            self.log.add(event)
        for entry in self.log.entries[before:]:
            index = len(self.seqs)
            message = entry.message
            if message.attachments:
                self.with_attachments.append(index)
            if message.role is Role.ASSISTANT and message.tool_calls:
                self.turn_starts.append(index)
                self.turn_ends.append(index)
            elif message.role is Role.TOOL and self.turn_ends:
                self.turn_ends[-1] = index  # a result always follows its own group (MessageLog)
                if entry.seq == event.seq and event.payload.get("is_error") is True:
                    self.errors.add(index)
            self.seqs.append(entry.seq)
            self.roles.append(message.role)

    def snippable(self, index: int) -> bool:
        """Whether log entry `index` is a recorded tool result a snip may replace: not the placeholder
        of an interrupted call (it carries its call's seq), and without images (I-1 keeps those)."""
        if not 0 <= index < len(self.seqs):
            return False
        entry = self.log.entries[index]
        if entry.message.role is not Role.TOOL or entry.message.attachments:
            return False
        first = bisect.bisect_left(self.seqs, entry.seq)
        return first == index  # a placeholder shares its seq with the assistant message before it

    def index_of(self, seq: int) -> int | None:
        """The log index of the recorded tool result at `seq`, if it may be snipped."""
        index = bisect.bisect_left(self.seqs, seq)
        if index < len(self.seqs) and self.seqs[index] == seq and self.snippable(index):
            return index
        return None

    def _apply_snip(self, event: Event) -> None:
        plan = parse_snip(event.payload)
        if plan is None:
            self.snip_notices.append(f"context_snipped event {event.seq} is malformed; ignored (SPEC K-2)")
            return
        unknown = []
        self.snip_version += 1
        for seq in plan.seqs:
            index = self.index_of(seq) if seq < event.seq else None
            if index is None:
                unknown.append(seq)
            elif index not in self.snipped_set:
                self.snipped_set.add(index)
                bisect.insort(self.snipped, index)
        if unknown:
            self.snip_notices.append(
                f"context_snipped event {event.seq} names seq(s) {', '.join(map(str, unknown[:5]))}"
                f"{' …' if len(unknown) > 5 else ''} that hold no recorded tool result; those are ignored"
            )

    def tool_name(self, index: int) -> str:
        """The tool a result answers: its own name, else the name its call gave."""
        message = self.log.entries[index].message
        if message.name:
            return message.name
        position = bisect.bisect_right(self.turn_starts, index) - 1
        if position >= 0:
            calls = self.log.entries[self.turn_starts[position]].message.tool_calls
            return next((call.name for call in calls if call.id == message.tool_call_id), "")
        return ""

    def visible(self, column: _TokenColumn, pending: Sequence[int] = ()) -> _Visible:
        """The column as the model sees it: the committed snips, plus `pending` for this compile only."""
        committed = column.committed
        if committed is None or column.committed_version != self.snip_version:
            committed = (committed or column.base()).with_snipped(
                self.snipped, self.log.entries, self.tool_name
            )
            column.committed, column.committed_version = committed, self.snip_version
        committed.sync()
        extra = [index for index in pending if not committed.is_snipped(index)]
        if not extra:
            return committed
        merged = sorted({*committed.indexes, *extra})
        return committed.with_snipped(merged, self.log.entries, self.tool_name)

    def checkpoint_state(self, reader: CheckpointReader | None) -> CheckpointState | None:
        if self.checkpoints is None and reader is not None and self.session_id:
            self.checkpoints = reader.state(self.session_id)
        return self.checkpoints

    def checkpoint_head(
        self, checkpoint: Checkpoint, counter: TokenCounter
    ) -> tuple[tuple[Mapping[str, Any], ...], int]:
        """The messages that stand for the covered prefix, and their tokens (cached per checkpoint):
        the checkpoint text and its kept messages; for native state only the kept messages, the
        state itself travels beside the messages (SPEC C-11)."""
        head = self.checkpoint_heads.get(checkpoint.id)
        if head is None:
            head = self.checkpoint_heads[checkpoint.id] = checkpoint_head(checkpoint)
        key = (checkpoint.id, counter.name)
        tokens = self.checkpoint_tokens.get(key)
        if tokens is None:
            tokens = self.checkpoint_tokens[key] = sum(message_tokens(message, counter) for message in head)
        return head, tokens

    def native_tokens(self, checkpoint: Checkpoint, counter: TokenCounter) -> int:
        """The native state's tokens: one message's framing plus its compact JSON (SPEC B-5)."""
        key = (f"native:{checkpoint.id}", counter.name)
        tokens = self.checkpoint_tokens.get(key)
        if tokens is None:
            tokens = self.checkpoint_tokens[key] = TOKENS_PER_MESSAGE + counter.count(
                canonical_json(checkpoint.native_state)
            )
        return tokens

    def revision(
        self,
        checkpoint_id: str | None,
        shortened: tuple[int, int] = (0, 0),
        snipped: str = "",
    ) -> str:
        """The projection's shape: a measured baseline only describes a request of equal revision.
        Snips and suppressed handoff epochs take part only when there are any, so a session without
        them keeps the revision it always had."""
        shape: dict[str, Any] = {
            "rewinds": self.rewinds,
            "checkpoint": checkpoint_id,
            "shortened": list(shortened),
        }
        if snipped:
            shape["snipped"] = snipped
        suppressed = self.handoffs.suppressed()
        if suppressed:
            shape["suppressed_handoffs"] = list(suppressed)
        return digest_of(shape)[:16]

    def column(self, counter: TokenCounter, policy: ToolSettings) -> _TokenColumn:
        column = self.columns.get(counter.name)
        if column is None:
            column = self.columns[counter.name] = _TokenColumn(counter, policy)
        column.extend(self.log.entries)
        return column

    def activated_since(self, anchor_seq: int | None) -> frozenset[str]:
        """Deferred tools that tool_search activated in the current turn (SPEC X-9): derived from
        the turn's own tool results, so the registry itself never changes."""
        if anchor_seq is None:
            return frozenset()
        return frozenset(name for seq, names in self.activations if seq > anchor_seq for name in names)


_CHECKPOINT_EVENTS = frozenset(
    {EventKind.COMPACTION_COMPLETED, EventKind.COMPACTION_UNDONE, EventKind.REWIND}
)


@dataclass(frozen=True)
class HistorySnapshot:
    """Valid history's messages at one moment, with what the planner needs to cut it safely."""

    session_id: str
    entries: tuple[LogEntry, ...]
    open_group_seq: int | None
    anchor_index: int | None
    checkpoints: CheckpointState | None
    checkpoint: Checkpoint | None
    """The checkpoint the snapshot's route applies (SPEC R-2): the planner plans from what that
    route actually sees. Without a route, the current checkpoint."""

    @property
    def current(self) -> Checkpoint | None:
        """The session's current checkpoint, whichever route applies it: a new one's parent."""
        return self.checkpoints.current if self.checkpoints is not None else None


def _checkpoint_summary(checkpoint: Checkpoint | None) -> dict[str, Any] | None:
    if checkpoint is None:
        return None
    return {
        "id": checkpoint.id,
        "level": checkpoint.level,
        "segments": len(checkpoint.segments),
        "through_seq": checkpoint.through_seq,
        "phase": str(checkpoint.phase),
        "producer": checkpoint.producer,
        "tokens_before": checkpoint.tokens_before,
        "tokens_after": checkpoint.tokens_after,
    }


class ContextCompiler:
    """Builds every model request (SPEC X-5: before every step, never cached across steps)."""

    def __init__(
        self,
        store: EventStore,
        settings: Settings,
        *,
        workdir: Path,
        clock: Callable[[], datetime],
        config_dir: Path | None = None,
        registry: ToolRegistry | None = None,
        checkpoints: CheckpointReader | None = None,
    ) -> None:
        """Without `checkpoints`, requests carry all valid history (no projection is applied)."""
        self._store = store
        self._checkpoints = checkpoints
        self._settings = settings
        self._workdir = workdir
        self._config_dir = config_dir
        self._clock = clock
        self._registry = registry
        self._sessions: dict[str, _SessionState] = {}
        self._sessions_lock = threading.Lock()
        self._data_urls: dict[str, str] = {}

    def _state(self, session_id: str) -> _SessionState:
        with self._sessions_lock:
            state = self._sessions.get(session_id)
            if state is None:
                state = self._sessions[session_id] = _SessionState(session_id)
            return state

    def measured_routes(self, session_id: str) -> frozenset[str]:
        """Ids of the routes this session has provider usage records for."""
        state = self._state(session_id)
        with state.lock:
            state.refresh(self._store)
            return frozenset(str(event.payload.get("route_id")) for event in state.usage_events)

    def preview(self, route: Route) -> RequestView:
        """The request a new conversation would start from on this route (no session yet): the
        pinned context and the route's budget, for the meter before the first message."""
        return self._compile(_SessionState(""), route)

    def first_budget(self, route: Route) -> Budget:
        """The budget of a route no usage was measured on yet: what `preview` starts from, without
        compiling a request (compaction reads it for a summary route: SPEC B-2, C-13)."""
        return self._budget(route, None)

    def _budget(self, route: Route, last_output_tokens: int | None) -> Budget:
        overrides = self._settings.model_settings(route.model)
        info = model_info(route.model, overrides)
        return compute_budget(info.window, overrides.max_input, last_output_tokens, self._settings.budget)

    def compile(
        self,
        session_id: str,
        route: Route,
        *,
        candidate: Checkpoint | None = None,
        snips: frozenset[int] = frozenset(),
    ) -> RequestView:
        """The next request. With `candidate`, the request as it would be if that checkpoint were
        current (acceptance measures a candidate against what the model sees now: SPEC C-12). With
        `snips`, as if those tool-result seqs were snipped too: for this compile only, nothing is
        written (SPEC K-2: snip results apply once a compaction succeeded or was not needed)."""
        state = self._state(session_id)
        with state.lock:
            state.refresh(self._store)
            state.checkpoint_state(self._checkpoints)
            return self._compile(state, route, candidate, snips)

    def checkpoint_state(self, session_id: str) -> CheckpointState | None:
        """The session's current checkpoint as the compiler applies it (re-validated on change)."""
        state = self._state(session_id)
        with state.lock:
            state.refresh(self._store)
            return state.checkpoint_state(self._checkpoints)

    def snapshot(self, session_id: str, route: Route | None = None) -> HistorySnapshot:
        """Valid history's messages as they are now, for the compaction planner; its checkpoint is
        the one `route` applies (SPEC R-2), the current one without a route."""
        state = self._state(session_id)
        with state.lock:
            state.refresh(self._store)
            current = state.checkpoint_state(self._checkpoints)
            if current is None:
                checkpoint = None
            else:
                checkpoint = current.current if route is None else current.for_route(route.id)
            return HistorySnapshot(
                session_id=session_id,
                entries=tuple(state.log.entries),
                open_group_seq=state.log.open_group_seq,
                anchor_index=state.log.anchor_index,
                checkpoints=current,
                checkpoint=checkpoint,
            )

    def last_provider_call(self, session_id: str) -> str | None:
        """When the last provider call of valid history was recorded (its usage event's created_at):
        the clock for the prompt cache's expiry (SPEC K-3). None before any call."""
        state = self._state(session_id)
        with state.lock:
            state.refresh(self._store)
            return state.usage_events[-1].created_at if state.usage_events else None

    def snip_candidates(self, session_id: str, route: Route) -> tuple[SnipCandidate, ...]:
        """The tool results micro-compaction or snip may take out of `route`'s next request, in K-4
        order (SPEC K-3, K-4): recorded results of tool turns older than the recent window, not
        covered by the checkpoint the route applies, not yet snipped, whose placeholder is smaller
        than what the model sees now (in full, or shortened by T-1)."""
        state = self._state(session_id)
        with state.lock:
            state.refresh(self._store)
            state.checkpoint_state(self._checkpoints)
            view = self._compile(state, route)
            column = state.column(counter_for_model(route.model), self._settings.tools)
            visible = state.visible(column)
            start = bisect.bisect_right(state.seqs, view.checkpoint.through_seq) if view.checkpoint else 0
            shortened = frozenset(view.shortened_seqs)
            entries = state.log.entries
            turns = len(state.turn_starts)
            open_seq = state.log.open_group_seq
            if turns and entries[state.turn_starts[-1]].seq == open_seq:
                turns -= 1  # calls still waiting: not a complete tool turn, and never touched
            older = max(0, turns - self._settings.compaction.recent_tool_turns)
            candidates: list[SnipCandidate] = []
            first_turn = max(0, bisect.bisect_right(state.turn_starts, start) - 1)
            for turn in range(first_turn, older):
                for index in range(max(state.turn_starts[turn] + 1, start), state.turn_ends[turn] + 1):
                    if visible.is_snipped(index) or not state.snippable(index):
                        continue
                    entry = entries[index]
                    placeholder_tokens = column.placeholder(index, entry, state.tool_name)[1]
                    seen = column.tokens_of(index)
                    if entry.seq in shortened:
                        seen = column.shortened_tokens(index) or seen
                    if placeholder_tokens >= seen:
                        continue
                    name = state.tool_name(index)
                    candidates.append(
                        SnipCandidate(
                            seq=entry.seq,
                            tool_call_id=entry.message.tool_call_id or "",
                            name=name,
                            kind=self._candidate_kind(state, index, name),
                            tokens_saved=seen - placeholder_tokens,
                        )
                    )
            return tuple(k4_order(candidates))

    def _candidate_kind(self, state: _SessionState, index: int, name: str) -> CandidateKind:
        """error, write (the tool may change something), else read; unknown tools count as read."""
        if index in state.errors:
            return CandidateKind.ERROR
        tool = self._registry.get(name) if self._registry is not None else None
        if tool is not None and tool.spec.effect is not Effect.READ_ONLY:
            return CandidateKind.WRITE
        return CandidateKind.READ

    def _data_url(self, session_id: str, ref: AttachmentRef) -> str | None:
        url = self._data_urls.get(ref.sha256)
        if url is None:
            data = self._store.artifact(session_id, ref.sha256)
            if data is None:
                return None
            url = f"data:{ref.mime};base64,{base64.b64encode(data).decode('ascii')}"
            if len(self._data_urls) >= _DATA_URL_CACHE_SIZE:
                self._data_urls.pop(next(iter(self._data_urls)))
            self._data_urls[ref.sha256] = url
        return url

    def _materialise(
        self,
        state: _SessionState,
        info: ModelInfo,
        counter: TokenCounter,
        in_request: Callable[[int], bool],
    ) -> tuple[dict[int, Mapping[str, Any]], dict[int, int]]:
        """Images of the request, newest first, as content parts or explicit notes (SPEC I-1).

        Returns replacement messages by entry index and the token change each one causes. Only
        entries `in_request` count (a checkpoint covers the others).
        """
        replaced: dict[int, Mapping[str, Any]] = {}
        deltas: dict[int, int] = {}
        sent_bytes = 0
        limit = self._settings.max_image_bytes
        for index in reversed(state.with_attachments):
            if not in_request(index):
                continue
            entry = state.log.entries[index]
            notes: list[str] = []
            images: list[dict[str, Any]] = []
            for ref in entry.message.attachments:
                label = f"{ref.mime}, {ref.size:,} bytes, sha256 {ref.sha256[:12]}"
                if not info.supports_images:
                    notes.append(f"[image omitted ({label}): {info.model} does not accept image input]")
                    continue
                if sent_bytes + ref.size > limit:
                    notes.append(
                        f"[image omitted ({label}): this request's image limit of {limit:,} bytes is reached]"
                    )
                    continue
                url = self._data_url(state.session_id, ref)
                if url is None:
                    notes.append(f"[image missing from the artifact store ({label})]")
                    continue
                sent_bytes += ref.size
                images.append({"type": "image_url", "image_url": {"url": url}})
            text = "\n".join(part for part in (entry.message.content or "", *notes) if part)
            message = dict(entry.openai)
            message["content"] = [{"type": "text", "text": text}, *images] if images else text
            replaced[index] = message
            deltas[index] = (
                message_tokens(message, counter)
                - message_tokens(entry.openai, counter)
                + IMAGE_TOKENS * len(images)
            )
        return replaced, deltas

    def _applied(
        self, state: _SessionState, route: Route, candidate: Checkpoint | None
    ) -> tuple[Checkpoint | None, Checkpoint | None, list[str]]:
        """The checkpoint this request applies, the native checkpoint in force (sent or not), and
        notices. Native state goes only to the route that made it; any other route uses the portable
        text checkpoint, or full history (SPEC C-11, R-2)."""
        current = state.checkpoints
        native: Checkpoint | None = None
        checkpoint = candidate
        if candidate is None:
            checkpoint = current.for_route(route.id) if current is not None else None
            if current is not None and current.current is not None:
                native = current.current if current.current.projection_kind is ProjectionKind.NATIVE else None
        elif candidate.projection_kind is ProjectionKind.NATIVE:
            native = candidate
            if candidate.route_id != route.id:
                checkpoint = current.for_route(route.id) if current is not None else None
        notices = []
        if native is not None and checkpoint is not native:
            notices.append(
                f"the native state of checkpoint {native.id[:12]} belongs to {native.model}; "
                "not sent (SPEC R-2)"
            )
        return checkpoint, native, notices

    def _compile(
        self,
        state: _SessionState,
        route: Route,
        candidate: Checkpoint | None = None,
        snips: frozenset[int] = frozenset(),
    ) -> RequestView:
        overrides = self._settings.model_settings(route.model)
        info = model_info(route.model, overrides)
        counter = counter_for_model(route.model)
        sources = load_sources(
            workdir=self._workdir,
            # The hour, not the minute: the environment block ends the system prompt, and a value
            # that changed every minute would void the provider's prompt cache for everything after.
            now=self._clock().replace(minute=0, second=0, microsecond=0),
            config_dir=self._config_dir,
            active_content=_active_content(state.log.entries, state.log.anchor_index),
            approval_mode=self._settings.approval_mode,
            kernel=self._settings.system_prompt,
        )
        system = Message(role=Role.SYSTEM, content=sources.text).to_openai()
        tail = state.log.tail()
        column = state.column(counter, self._settings.tools)
        entries = state.log.entries
        count = len(entries)
        anchor = state.log.anchor_index if state.log.anchor_index is not None else count
        baseline = latest_baseline(state.usage_events, route.id)
        budget = self._budget(route, baseline.output_tokens if baseline is not None and baseline.known else None)
        checkpoint, native, notices = self._applied(state, route, candidate)
        # Pending snips join the committed ones for this compile only (SPEC K-2).
        pending = [index for seq in sorted(snips) if (index := state.index_of(seq)) is not None]
        if len(pending) < len(snips):
            notices.append(f"{len(snips) - len(pending)} pending snip seq(s) name no recorded tool result")
        view = state.visible(column, pending)

        # The Model Projection (SPEC V): checkpoint + the anchor verbatim + what follows the
        # covered prefix; without a checkpoint, all valid messages. A native checkpoint stands for
        # the prefix as provider state beside the messages, not as a message (SPEC C-11).
        start = 0
        head: list[Mapping[str, Any]] = [system]
        covered_tokens = 0
        native_tokens = 0
        reinsert_anchor = False
        if checkpoint is not None:
            start = bisect.bisect_right(state.seqs, checkpoint.through_seq)
            messages, covered_tokens = state.checkpoint_head(checkpoint, counter)
            head += messages
            if checkpoint.projection_kind is ProjectionKind.NATIVE:
                native_tokens = state.native_tokens(checkpoint, counter)
            # mid_turn and standalone cover the anchor: it is re-inserted verbatim (SPEC C-3), unless
            # the checkpoint keeps it itself, in its place before the kept steps (the fallback, K-10).
            reinsert_anchor = anchor < start and entries[anchor].openai not in checkpoint.kept_messages
        # Images are materialised per request: few entries, each replaced and re-counted.
        images, image_deltas = self._materialise(
            state,
            info,
            counter,
            lambda index: (
                (index >= start and not view.is_snipped(index)) or (reinsert_anchor and index == anchor)
            ),
        )
        anchor_tokens = 0
        if reinsert_anchor:
            head.append(images.get(anchor) or entries[anchor].openai)
            anchor_tokens = message_tokens(entries[anchor].openai, counter) + image_deltas.pop(anchor, 0)
        working_from = max(anchor, start)
        tail_tokens = sum(message_tokens(entry.openai, counter) for entry in tail)
        pinned = message_tokens(system, counter) + TOKENS_PER_REPLY
        activated = state.activated_since(entries[anchor].seq if anchor < count else None)
        snipped_seqs = view.seqs_from(start)

        def tool_schemas(include_history_read: bool) -> tuple[Mapping[str, Any], ...]:
            if self._registry is None:
                return ()
            # Once a checkpoint summarises part of history, the model can search and read it all.
            schemas = self._registry.visible_schemas(
                activated, include_history_read=include_history_read, include_recall=checkpoint is not None
            )
            return tuple(schemas)

        local_total = (
            pinned
            + covered_tokens
            + native_tokens
            + anchor_tokens
            + view.prefix(count)
            - view.prefix(start)
            + tail_tokens
            + sum(image_deltas.values())
            + _tool_tokens(tool_schemas(False), counter)
        )
        first_large = bisect.bisect_left(view.large_indexes, start)
        shorten = shortened_count(view.savings, local_total, budget.handoff_at, first_large)
        # A shortened or a snipped result points to the reader, so the model is given it.
        tools = tool_schemas(shorten > 0 or bool(snipped_seqs))

        def delta_between(first: int, last: int) -> int:
            """Tokens this request adds (images) or saves (shortening) among entries first..last-1."""
            image = sum(delta for index, delta in image_deltas.items() if first <= index < last)
            return image - view.saved_between(first, last, shorten)

        def replaced(index: int) -> Mapping[str, Any] | None:
            if view.is_snipped(index):
                return column.placeholder(index, entries[index], state.tool_name)[0]
            position = bisect.bisect_left(view.large_indexes, index)
            if position < shorten and view.large_indexes[position] == index:
                return column.shortened[index]
            return images.get(index)

        layers = LayerTokens(
            pinned=pinned,
            history=covered_tokens
            + view.prefix(working_from)
            - view.prefix(start)
            + delta_between(start, working_from),
            working_set=anchor_tokens
            + view.prefix(count)
            - view.prefix(working_from)
            + tail_tokens
            + delta_between(working_from, count),
            tool_schema=_tool_tokens(tools, counter),
            native_state=native_tokens,
        )
        snip_saved = 0
        if snipped_seqs:
            # Against the request without any snip: each placeholder replaces the full result, or
            # its shortened form where that request (with its own, higher pressure) shortens it.
            removed = view.cut_between(start, count)
            base_first = bisect.bisect_left(column.large_indexes, start)
            base_shorten = shortened_count(
                column.savings, local_total + removed, budget.handoff_at, base_first
            )
            snip_saved = removed - view.snipped_large_savings(base_first, base_shorten)
        shortened_seqs = tuple(view.large_seqs[first_large:shorten])
        # The large results only ever grow between rewinds (which change the revision themselves),
        # so with the snipped set, how many are shortened and the last of them identify the set.
        revision = state.revision(
            checkpoint.id if checkpoint is not None else None,
            (shorten, shortened_seqs[-1] if shortened_seqs else 0),
            view.key,
        )
        estimate = estimate_request(
            baseline=baseline,
            revision=revision,
            fixed_tokens=layers.fixed,
            local_total=layers.total,
            entry_seqs=state.seqs,
            entry_roles=state.roles,
            tokens_from=lambda index: (
                view.prefix(count)
                - view.prefix(min(max(index, start), count))
                + tail_tokens
                + delta_between(max(index, start), count)
            ),
        )
        notices = [f"{notice.source}: {notice.message}" for notice in sources.notices] + notices
        if info.window is None:
            notices.append(f"{route.model}: context window unknown; using the default budget (SPEC B-3)")
        if shortened_seqs:
            notices.append(
                f"{len(shortened_seqs)} large tool result(s) shortened in the model's view (SPEC T-1)"
            )
        if snipped_seqs:
            notices.append(
                f"{len(snipped_seqs)} old tool result(s) snipped in the model's view (SPEC K-3, K-4)"
            )
        notices.extend(state.snip_notices)
        if state.checkpoints is not None:
            notices.extend(state.checkpoints.notices)
        messages = MessageSequence(
            tuple(head), entries, replaced, tuple(entry.openai for entry in tail), start
        )
        current = state.checkpoints.current if state.checkpoints is not None else None
        epoch = epoch_of(current.id if current is not None else None)
        return RequestView(
            session_id=state.session_id,
            route=route,
            model=info,
            messages=messages,
            tools=tools,
            native_state=checkpoint.native_state if native_tokens else None,
            through_seq=state.last_seq,
            anchor_seq=entries[anchor].seq if anchor < count else None,
            revision=revision,
            checkpoint=checkpoint,
            layers=layers,
            counter=counter.name,
            counted_exactly=counter.exact,
            budget=budget,
            estimate=estimate,
            verdict=budget.verdict(estimate.total),
            shortened_seqs=shortened_seqs,
            notices=tuple(notices),
            handoff_epoch=epoch,
            handoff_status=state.handoffs.status(epoch),
            snipped_seqs=snipped_seqs,
            snip_saved_tokens=snip_saved,
            native_checkpoint=native,
        )


def _tool_tokens(tools: Sequence[Mapping[str, Any]], counter: TokenCounter) -> int:
    return count_tools(tools, counter) if tools else 0

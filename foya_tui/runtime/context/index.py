"""Provides the compiler's incremental index of one session: the message log, per-tokenizer prefix
sums, the large results T-1 may shorten, snip accounting (K-2..K-4), handoff epochs (K-1) and the
current checkpoint, all extended from the events appended since the last compile.

A compile then decides and accounts in O(log n): history is read and tokenized once per process,
not once per step. A new process whose session has a checkpoint reads that checkpoint first and
then only the events after what it covers (`SessionIndex.base_seq`), plus the few kinds the layers
need from before (usage records, rewinds, handoff epochs, snips): the covered messages are never
decoded, so opening a compacted session costs what the model sees, not what history holds.
"""

from __future__ import annotations

import bisect
import gc
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from foya_tui.runtime.context.columns import TokenColumn, VisibleColumn
from foya_tui.runtime.context.tool_results import (
    shortened_count_key,
)
from foya_tui.runtime.context.tracker import calibration_sample, tool_charge_sample
from foya_tui.runtime.digests import canonical_json, digest_of
from foya_tui.runtime.model import Event, EventKind, Role
from foya_tui.runtime.store import EventStore
from foya_tui.runtime.tokens import (
    TOKENS_PER_MESSAGE,
    TokenCounter,
    message_tokens,
    stored_count_key,
)
from foya_tui.runtime.view.checkpoint import Checkpoint, ProjectionKind
from foya_tui.runtime.view.groups import UnitLog
from foya_tui.runtime.view.handoff import EpochStatus, HandoffTracker
from foya_tui.runtime.view.history import (
    MessageLog,
    event_message,
    message_role,
    rewound,
    valid_events,
)
from foya_tui.runtime.view.projection import checkpoint_head
from foya_tui.runtime.view.recovery import CheckpointReader, CheckpointState
from foya_tui.runtime.view.snip import parse_snip
from foya_tui.settings import ToolSettings

ANCHOR_BATCH = 256
"""Events read at a time backwards from a checkpoint that covers the head anchor (mid-turn)."""

PREFIX_KINDS = frozenset(
    {
        EventKind.PROVIDER_USAGE,
        EventKind.COMPACTION_DIAGNOSTIC,
        EventKind.REWIND,
        EventKind.HANDOFF,
        EventKind.COMPACTION_COMPLETED,
        EventKind.COMPACTION_UNDONE,
        EventKind.CONTEXT_SNIPPED,
    }
)
"""What the layers need from the covered prefix, read on the kind index: usage records (baseline,
calibration, the cache clock), rewinds (validity, revision), handoff epochs (K-1), snips (K-2)."""

READ_BATCH_EVENTS = 2_000
"""Events a full read takes from the store at a time (see `SessionIndex._rebuild`)."""
COLLECT_AFTER_EVENTS = 20_000
"""A full read of at least this many events ends with one full collection (see `_rebuild`)."""


class SessionIndex:
    """What the compiler keeps between steps of one session."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.lock = threading.Lock()
        self.last_seq = 0
        self.calibration_samples: dict[str, list[tuple[int, int]]] = {}
        self.tool_charge_samples: dict[str, list[tuple[int, int]]] = {}
        """Per route: (tokens the server charged for the tool definitions, their local count)."""
        self.tool_charge_probed: set[str] = set()
        """Routes this session probed for the tool charge, measured or not (one probe each)."""
        """Per route, (real input tokens, local estimate) of every recorded request, rewound ones
        included: what a tokenizer counts does not change when history is rewound. Never reset."""
        self._reset()

    def _reset(self) -> None:
        self.base_seq = 0
        """Events at or before this seq are not in the log: a checkpoint covers them (0: all read)."""
        self.log = MessageLog()
        self.units = UnitLog()
        """The log's atomic units, extended as it grows: what the compaction planner cuts."""
        self.seqs: list[int] = []
        self.roles: list[Role] = []
        self.usage_events: list[Event] = []
        self.rewinds: list[int] = []
        self.columns: dict[str, TokenColumn] = {}
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
        self.covered_results: dict[int, bool] = {}
        """Covered seqs a snip names, and whether each holds a recorded tool result (read by seq)."""

    def refresh(self, store: EventStore, reader: CheckpointReader | None = None) -> None:
        """Read the events appended since the last refresh; a rewind rebuilds from the store, and so
        does a handoff record that suppresses an epoch whose record the log already holds (K-1).

        With `reader`, the first refresh reads the current checkpoint first and then only what
        follows the prefix it covers (`base_seq`); a later checkpoint state that applies less (an
        undo, a rewind) makes the index read everything again."""
        if not (
            self.last_seq == 0
            and reader is not None
            and self.session_id
            and self._load_after_checkpoint(store, reader)
        ):
            self._refresh(store)
        # A completion, undo or rewind since (or while the first read ran): the state it leads to
        # may apply less of history than this index holds.
        if reader is not None and self.base_seq and self.checkpoints is None:
            self.checkpoint_state(reader)
            if covered_base(self.checkpoints) < self.base_seq:
                self._rebuild(store)

    def require(self, seq: int, store: EventStore) -> None:
        """Make sure the log holds every message after `seq` (a candidate checkpoint or a rewind
        reaching into the prefix this index did not read): read everything when it does not."""
        if seq < self.base_seq:
            self._rebuild(store)

    def _load_after_checkpoint(self, store: EventStore, reader: CheckpointReader) -> bool:
        """Fill a new index from the current checkpoint on; False when it must read everything (no
        checkpoint, no user message to anchor on, a log that does not start at a group boundary)."""
        checkpoints = reader.state(self.session_id)
        base = covered_base(checkpoints)
        if base <= 0:
            return False
        tail = store.events(self.session_id, after_seq=base)
        valid = valid_events(tail)
        # The head anchor is in the log even when the checkpoint covers it (mid-turn: SPEC C-3):
        # read back to it. A suffix of history that starts at a user message or after a whole group
        # is valid on its own (a rewind only invalidates events before it), and builds the same log.
        extended = False
        while not any(message_role(event) is Role.USER for event in valid):
            before = store.events_before(self.session_id, base + 1, ANCHOR_BATCH) if base > 0 else []
            if not before:
                return False  # no user message anywhere: the working set reaches back into history
            tail, base, extended = before + tail, before[0].seq - 1, True
            valid = valid_events(tail)
        if extended:
            anchor = next(event.seq for event in reversed(valid) if message_role(event) is Role.USER)
            base = anchor - 1
            tail = [event for event in tail if event.seq > base]
            valid = valid_events(tail)
        first = next((message for event in valid if (message := event_message(event)) is not None), None)
        if first is not None and first.role is Role.TOOL:
            return False  # a result whose call is covered: never cut there (C-4), so read it all
        prefix = store.events_of_kinds(self.session_id, PREFIX_KINDS, through_seq=base)
        everything = [*prefix, *tail]
        rewinds = [event for event in everything if event.kind is EventKind.REWIND and event.problem is None]

        def counts(event: Event) -> bool:
            # Valid, or an unreadable handoff row that still counts against its epoch, as in
            # `_rebuild`: unless a later rewind voided it (SPEC H-4, K-1).
            return (event.problem is None or event.kind is EventKind.HANDOFF) and not rewound(
                event.seq, [rewind for rewind in rewinds if rewind.seq > event.seq]
            )

        for event in everything:
            self._sample(event)
        self.base_seq = base
        self.last_seq = tail[-1].seq if tail else store.last_seq(self.session_id)
        kept = [event for event in prefix if counts(event)]
        for event in [*kept, *(event for event in tail if counts(event))]:
            self.handoffs.observe(event)
        covered = [event for event in kept if event.problem is None]
        self._check_covered(store, [*covered, *valid])
        for event in covered:
            self._add_covered(event)
        for event in valid:
            self._add(event)
        self.checkpoints = checkpoints
        if any(event.kind in _CHECKPOINT_EVENTS and event.seq > checkpoints.control_seq for event in tail):
            self.checkpoints = None  # written while this read: re-read (and re-checked) on demand
        return True

    def _add_covered(self, event: Event) -> None:
        """Take in an event of the covered prefix: only what the layers keep from there."""
        if event.kind is EventKind.PROVIDER_USAGE:
            self.usage_events.append(event)
        elif event.kind is EventKind.REWIND:
            self.rewinds.append(event.seq)
        elif event.kind is EventKind.CONTEXT_SNIPPED:
            self._apply_snip(event)

    def _check_covered(self, store: EventStore, events: Sequence[Event]) -> None:
        """Read the covered seqs these snip events name, to tell a recorded result from a wrong seq
        (the notice K-2 asks for) without reading the prefix around them."""
        if not self.base_seq:
            return
        wanted: set[int] = set()
        for event in events:
            plan = parse_snip(event.payload) if event.kind is EventKind.CONTEXT_SNIPPED else None
            if plan is not None:
                wanted.update(
                    seq for seq in plan.seqs if seq <= self.base_seq and seq not in self.covered_results
                )
        if not wanted:
            return
        found = {event.seq: event for event in store.events_at(self.session_id, wanted)}
        rewinds = store.rewinds_after(self.session_id, min(wanted))
        for seq in wanted:
            named = found.get(seq)
            message = event_message(named) if named is not None and named.problem is None else None
            self.covered_results[seq] = (
                message is not None
                and message.role is Role.TOOL
                and not message.attachments
                and not rewound(seq, [rewind for rewind in rewinds if rewind.seq > seq])
            )

    def _sample(self, event: Event) -> None:
        """A calibration sample of a recorded request (rewound ones too: tokenizers do not change)."""
        if event.problem is not None:
            return
        if event.kind is EventKind.PROVIDER_USAGE:
            records: Sequence[Any] = (event.payload,)
        elif event.kind is EventKind.COMPACTION_DIAGNOSTIC:
            records = event.payload.get("calibration") or ()  # summary replies (non-streamed)
        else:
            return
        for record in records:
            sample = calibration_sample(record) if isinstance(record, Mapping) else None
            route_id = record.get("route_id") if isinstance(record, Mapping) else None
            if sample is not None and isinstance(route_id, str):
                self.calibration_samples.setdefault(route_id, []).append(sample)
            if isinstance(record, Mapping) and "tool_charge" in record and isinstance(route_id, str):
                self.tool_charge_probed.add(route_id)
                charge = tool_charge_sample(record)
                if charge is not None:
                    self.tool_charge_samples.setdefault(route_id, []).append(charge)

    def _refresh(self, store: EventStore) -> None:
        if self.last_seq == 0:
            self._rebuild(store, first=True)  # a new index, and no checkpoint to start from
            return
        new = store.events(self.session_id, after_seq=self.last_seq)
        if not new:
            return
        for event in new:
            self._sample(event)
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
        self._check_covered(store, new)
        for event in new:
            if event.problem is None:
                self._add(event)

    def _rebuild(self, store: EventStore, *, first: bool = False) -> None:
        """Start over from valid history, the way a rewind does (rare: a rewind or a duplicate
        handoff); with `first`, the first read of a session no checkpoint covers (its usage
        records are sampled too, and `last_seq` is set).

        What decides validity and handoff epochs is read first, on the kind index; history then
        follows in batches, each taken into the log and let go, so memory holds the log and one
        batch, never every event at once (a session of 100,000 events that was never compacted:
        tests/bench/bench_tui_scale.py)."""
        self._reset()
        control = store.events_of_kinds(
            self.session_id, _EPOCH_EVENTS | (_SAMPLED_EVENTS if first else set())
        )
        voided = _voided_by(control)
        for event in control:
            if first:
                self._sample(event)  # rewound requests too: tokenizers do not change
            # An unreadable handoff row still counts against its epoch (a malformed record), unless
            # a later rewind voided it (SPEC H-4, K-1).
            if (
                event.kind in _EPOCH_EVENTS
                and (event.problem is None or event.kind is EventKind.HANDOFF)
                and not voided(event.seq)
            ):
                self.handoffs.observe(event)
        last = read = 0
        with collector_paused():
            for event in store.iter_events(self.session_id, batch=READ_BATCH_EVENTS):
                last = event.seq
                read += 1
                if event.problem is None and (voided is _nothing_voided or not voided(event.seq)):
                    self._add(event)
            if read >= COLLECT_AFTER_EVENTS:
                # One full pass now, in this thread, takes the new log to the oldest generation;
                # left to the automatic passes it would be walked three times over, mostly by
                # whichever thread allocates next (the TUI's own: a pause in its frames).
                gc.collect()
        if first:
            self.last_seq = last or store.last_seq(self.session_id)

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
        entries = self.log.entries
        for position in range(before, len(entries)):  # no slice: this runs once per event
            entry = entries[position]
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
            self.snip_notices.append(f"context_snipped event {event.seq} is malformed; ignored")  # SPEC K-2
            return
        unknown = []
        self.snip_version += 1
        for seq in plan.seqs:
            if seq <= self.base_seq:
                # Covered by the checkpoint this index starts from: never in the model's view, only
                # checked to be a recorded result (read by seq: `_check_covered`).
                if not (seq < event.seq and self.covered_results.get(seq, False)):
                    unknown.append(seq)
                continue
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

    def visible(self, column: TokenColumn, pending: Sequence[int] = ()) -> VisibleColumn:
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
        elastic: str = "",
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
        if elastic:
            shape["elastic"] = elastic
        suppressed = self.handoffs.suppressed()
        if suppressed:
            shape["suppressed_handoffs"] = list(suppressed)
        return digest_of(shape)[:16]

    def column(
        self, counter: TokenCounter, policy: ToolSettings, store: EventStore | None = None
    ) -> TokenColumn:
        """The column of `counter`, extended to the log. With `store`, counts persisted for the
        session are used instead of tokenizing, and the counts made here are persisted (once per
        event and tokenizer: a new process then never tokenizes this history again)."""
        column = self.columns.get(counter.name)
        if column is None:
            column = self.columns[counter.name] = TokenColumn(counter, policy)
        start = len(column.prefix) - 1
        if start >= len(self.log.entries):
            return column
        if store is None or not self.session_id:
            column.extend(self.log.entries)
            return column
        key, shortened_key = stored_count_key(counter), shortened_count_key(counter, policy)
        after = self.log.entries[start].seq - 1
        made, made_shortened = column.extend(
            self.log.entries,
            store.token_counts(self.session_id, key, after_seq=after),
            store.token_counts(self.session_id, shortened_key, after_seq=after),
        )
        store.put_token_counts(self.session_id, key, made)
        store.put_token_counts(self.session_id, shortened_key, made_shortened)
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
_EPOCH_EVENTS = _CHECKPOINT_EVENTS | {EventKind.HANDOFF}
"""What decides which events are valid (rewinds) and each handoff record's epoch (SPEC H-4, K-1)."""
_SAMPLED_EVENTS = frozenset({EventKind.PROVIDER_USAGE, EventKind.COMPACTION_DIAGNOSTIC})
"""What `_sample` learns calibration from (read on the kind index, not picked out of a full read)."""


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic collector off while a full read fills the log: its entries hold no cycles,
    yet every full collection meanwhile would walk all of them again (about a fifth of the read on
    a session of 100,000 events). Whatever cycles others make meanwhile are collected afterwards."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _voided_by(events: Sequence[Event]) -> Callable[[int], bool]:
    """Whether a later rewind among `events` voided the event at a seq (`view.history.rewound`'s
    rule, asked once per event of a full read: a session's few rewinds as intervals)."""
    spans = [
        (to_seq, event.seq)
        for event in events
        if event.kind is EventKind.REWIND
        and event.problem is None
        and isinstance(to_seq := event.payload.get("to_seq"), int)
    ]
    if not spans:
        return _nothing_voided
    return lambda seq: any(to_seq < seq < rewind_seq for to_seq, rewind_seq in spans)


def _nothing_voided(seq: int) -> bool:
    """No rewind voids anything (the usual case: `_rebuild` then skips the call)."""
    return False


def covered_base(checkpoints: CheckpointState | None) -> int:
    """The seq through which every checkpoint a route may apply covers history: the current one,
    and its portable text ancestor when the current one is native (other routes apply that, or
    all of history: SPEC C-11, R-2). 0 when some route sees all of history."""
    current = checkpoints.current if checkpoints is not None else None
    if checkpoints is None or current is None:
        return 0
    if current.projection_kind is ProjectionKind.TEXT:
        return current.through_seq
    portable = checkpoints.portable
    return min(current.through_seq, portable.through_seq) if portable is not None else 0

"""Provides the per-tokenizer columns of a session's message log: prefix sums of every message's
tokens (persisted once per event and tokenizer, never counted again), the large tool results T-1
may shorten with the tokens that saves, snip placeholders (K-3, K-4), the elastic and oversized
forms (T-4), and the check of the persisted counts that `foya verify` runs (`wrong_token_counts`).

`context/index.py` keeps one column per tokenizer for its log; the compiler reads them to decide
and account in O(log n).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from foya_tui.runtime.context.tool_results import (
    cut_message_text,
    cut_text,
    shortened_key_sizes,
    shortened_text,
)
from foya_tui.runtime.digests import digest_of
from foya_tui.runtime.model import Event, EventKind, Role
from foya_tui.runtime.store import EventStore
from foya_tui.runtime.tokens import TokenCounter, counter_for_stored_key, message_tokens
from foya_tui.runtime.view.handoff import EpochStatus, HandoffTracker
from foya_tui.runtime.view.history import LogEntry, MessageLog, rewound
from foya_tui.runtime.view.snip import snipped_text
from foya_tui.settings import ToolSettings

CUT_FORMS_KEPT = 512
"""Elastic forms kept per column: a few steps' worth of sizes for the results in the working set."""


@dataclass
class TokenColumn:
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
    committed: VisibleColumn | None = None
    """The column as seen with the committed snips (rebuilt from the first change when they change)."""
    committed_version: int = -1
    """The session's snip version `committed` reflects."""
    long_messages: list[int] = field(default_factory=list)
    """Indexes of non-tool messages above `oversized_tokens`: the ones that may alone take more
    than half of an input budget and then be shortened in the model's view (SPEC T-4)."""
    cut_forms: dict[tuple[int, int], tuple[Mapping[str, Any], int]] = field(default_factory=dict)
    """Elastic and oversized-message forms made so far, by (entry index, characters kept), with
    their tokens: the pre-step pipeline compiles several times with the same sizes."""

    own_seq: int = 0
    """The newest seq whose event's own message this column counted (placeholders of unanswered
    calls reuse an older seq; they are counted, never persisted: they are not the event's message)."""

    def extend(
        self,
        entries: Sequence[LogEntry],
        stored: Mapping[int, int] | None = None,
        stored_shortened: Mapping[int, int] | None = None,
    ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """Take in the entries added since; `stored` holds persisted counts by seq, and
        `stored_shortened` those of large results' shortened forms (neither is re-tokenized).
        Returns the (seq, tokens) counts made here of events' own messages and of shortened forms,
        for persisting."""
        made: list[tuple[int, int]] = []
        made_shortened: list[tuple[int, int]] = []
        for index in range(len(self.prefix) - 1, len(entries)):
            entry = entries[index]
            own = entry.seq > self.own_seq
            known = stored.get(entry.seq) if own and stored is not None else None
            if known is not None:
                tokens = known
            else:
                tokens = message_tokens(entry.openai, self.counter)
                if own:
                    made.append((entry.seq, tokens))
            if own:
                self.own_seq = entry.seq
            self.prefix.append(self.prefix[-1] + tokens)
            message = entry.message
            if message.role is Role.TOOL and tokens > self.policy.oversized_tokens and message.content:
                call_id = message.tool_call_id or ""
                text = shortened_text(message.content, entry.seq, call_id, tokens, self.policy)
                short = {**entry.openai, "content": text}
                self.large_indexes.append(index)
                self.large_seqs.append(entry.seq)
                self.shortened[index] = short
                short_tokens = (
                    stored_shortened.get(entry.seq) if own and stored_shortened is not None else None
                )
                if short_tokens is None:
                    short_tokens = message_tokens(short, self.counter)
                    if own:
                        made_shortened.append((entry.seq, short_tokens))
                self.savings.append(self.savings[-1] + tokens - short_tokens)
            elif (
                message.role is not Role.TOOL
                and tokens > self.policy.oversized_tokens
                and isinstance(entry.openai.get("content"), str)
                and not message.attachments
            ):
                self.long_messages.append(index)
        return made, made_shortened

    def tokens_of(self, index: int) -> int:
        """Entry `index`'s tokens in full, from the prefix sums (never re-tokenized)."""
        return self.prefix[index + 1] - self.prefix[index]

    def shortened_tokens(self, index: int) -> int | None:
        """Tokens of entry `index` in its shortened form (T-1), or None when it is not large."""
        position = bisect.bisect_left(self.large_indexes, index)
        if position == len(self.large_indexes) or self.large_indexes[position] != index:
            return None
        return self.tokens_of(index) - (self.savings[position + 1] - self.savings[position])

    def cut_form(
        self, index: int, entry: LogEntry, head_chars: int, tail_chars: int
    ) -> tuple[Mapping[str, Any], int]:
        """A large tool result cut to `head_chars` + `tail_chars` (the elastic step, SPEC T-4),
        with its tokens; made once per size."""
        key = (index, head_chars * 1_000_003 + tail_chars)
        made = self.cut_forms.get(key)
        if made is None:
            message = entry.message
            text = cut_text(
                message.content or "",
                entry.seq,
                message.tool_call_id or "",
                self.tokens_of(index),
                head_chars,
                tail_chars,
            )
            form = {**entry.openai, "content": text}
            made = self._keep(key, form)
        return made

    def long_message_form(
        self, index: int, entry: LogEntry, keep_chars: int
    ) -> tuple[Mapping[str, Any], int]:
        """A non-tool message too large to fit, cut to about `keep_chars` (SPEC T-4), with its tokens."""
        key = (index, -keep_chars)
        made = self.cut_forms.get(key)
        if made is None:
            content = entry.openai.get("content")
            text = cut_message_text(
                content if isinstance(content, str) else "",
                entry.seq,
                str(entry.message.role),
                self.tokens_of(index),
                keep_chars,
            )
            made = self._keep(key, {**entry.openai, "content": text})
        return made

    def _keep(self, key: tuple[int, int], form: Mapping[str, Any]) -> tuple[Mapping[str, Any], int]:
        if len(self.cut_forms) >= CUT_FORMS_KEPT:
            self.cut_forms.clear()  # sizes move with the budget: old ones are rarely asked again
        made = self.cut_forms[key] = (form, message_tokens(form, self.counter))
        return made

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

    def base(self) -> VisibleColumn:
        """The column with nothing snipped: a view over its own lists, which only ever grow."""
        return VisibleColumn(
            self, [], frozenset(), [], [0], self.large_indexes, self.large_seqs, self.savings, [], 0, ""
        )


@dataclass
class VisibleColumn:
    """A token column as the model sees it with a set of tool results snipped (SPEC K-3, K-4).

    A snipped entry counts as its placeholder, and only the others can be large and shortened
    (T-1), so shortening decisions see the snipped log. Per-entry prefix sums are the column's
    minus the cumulative cut of the snipped entries before an index: a query costs O(log n); a
    changed snip set rebuilds the cumulative lists from its first changed entry, from stored
    per-entry token counts (history is never re-tokenized).
    """

    column: TokenColumn
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
    ) -> VisibleColumn:
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
        view = VisibleColumn(
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
        view.key = snipped_key(view.seqs)
        return view


def snipped_key(seqs: Sequence[int]) -> str:
    """Identifies a set of snipped seqs in a revision (empty when there are none: SPEC B-7)."""
    return digest_of(list(seqs))[:16] if seqs else ""


def wrong_token_counts(store: EventStore, session_id: str, policy: ToolSettings) -> dict[str, list[int]]:
    """Per tokenizer key, the seqs whose persisted count differs from a fresh count of the event's
    message (`foya verify`; `--repair` deletes them, so the next compile counts them again). Counts
    of tokenizers this process cannot load, and of events no longer in valid history, are skipped.

    History is streamed in batches through a message log that keeps no entries: memory holds the
    stored counts and one batch, never the session's messages. The log is the compiler's: valid
    events (a rewind voids what came before it), handoff records only where their epoch is
    recorded (K-1), placeholders never counted as an event's own message. A large result's
    shortened form (T-1) is recounted at the sizes its key names, around its full count."""
    keys = store.token_count_keys(session_id)
    counters = [(key, counter) for key in keys if (counter := counter_for_stored_key(key)) is not None]
    # Shortened forms: (key, counter, the settings of that form's sizes), for the tokenizers this
    # process can load.
    shortened: list[tuple[str, TokenCounter, ToolSettings]] = []
    for key in keys:
        form = shortened_key_sizes(key)
        counter = counter_for_stored_key(form[0]) if form is not None else None
        if form is not None and counter is not None:
            shortened.append((key, counter, replace(policy, head_chars=form[1], tail_chars=form[2])))
    if not counters and not shortened:
        return {}
    stored = {
        key: store.token_counts(session_id, key)
        for key in [k for k, _ in counters] + [k for k, _, _ in shortened]
    }
    control = store.events_of_kinds(
        session_id,
        (EventKind.REWIND, EventKind.HANDOFF, EventKind.COMPACTION_COMPLETED, EventKind.COMPACTION_UNDONE),
    )
    rewinds = [event for event in control if event.kind is EventKind.REWIND and event.problem is None]

    def valid(event: Event) -> bool:
        return not rewound(event.seq, [rewind for rewind in rewinds if rewind.seq > event.seq])

    handoffs = HandoffTracker()
    for event in control:
        if (event.problem is None or event.kind is EventKind.HANDOFF) and valid(event):
            handoffs.observe(event)
    log = MessageLog()
    own_seq = 0
    wrong: dict[str, list[int]] = {}
    for event in store.iter_events(session_id):
        if event.problem is not None or not valid(event):
            continue
        if event.kind is EventKind.HANDOFF:
            epoch = handoffs.epoch_at(event.seq)
            if epoch is not None and handoffs.status(epoch) is EpochStatus.RECORDED:
                log.add_hidden(event)
        else:
            log.add(event)
        for entry in log.entries:
            if entry.seq <= own_seq:
                continue  # a placeholder carries its call's seq: not that event's own message
            own_seq = entry.seq
            for key, counter in counters:
                known = stored[key].get(entry.seq)
                if known is not None and known != message_tokens(entry.openai, counter):
                    wrong.setdefault(key, []).append(entry.seq)
            for key, counter, form_policy in shortened:
                known = stored[key].get(entry.seq)
                message = entry.message
                if known is None or message.role is not Role.TOOL or not message.content:
                    continue
                full = message_tokens(entry.openai, counter)
                text = shortened_text(
                    message.content, entry.seq, message.tool_call_id or "", full, form_policy
                )
                if known != message_tokens({**entry.openai, "content": text}, counter):
                    wrong.setdefault(key, []).append(entry.seq)
        log.entries.clear()  # counted: the log only needs its open calls from here on
    return wrong

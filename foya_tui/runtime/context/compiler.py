"""Provides the context compiler: before every model call, the request built fresh from history
in five layers, with a token budget and a verdict (SPEC X-1..X-8, B-1..B-9).

The compiler keeps, per session, an incrementally maintained message log and per-tokenizer prefix
sums, so a step reads only the events appended since the last one and costs the same at 100,000
events as at 1,000 (see `tests/bench/bench_compiler.py`). Canonical history is never changed.
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

from foya_tui.runtime.compaction.checkpoint import Checkpoint
from foya_tui.runtime.compaction.recovery import CheckpointReader, CheckpointState
from foya_tui.runtime.compaction.summary import checkpoint_message_text
from foya_tui.runtime.context.budget import Budget, Verdict, compute_budget
from foya_tui.runtime.context.sources import load_sources
from foya_tui.runtime.context.tokens import (
    TOKENS_PER_MESSAGE,
    TOKENS_PER_REPLY,
    TokenCounter,
    count_tools,
    counter_for_model,
    message_text,
)
from foya_tui.runtime.context.tool_results import shortened_count, shortened_text
from foya_tui.runtime.context.tracker import Estimate, estimate_request, latest_baseline
from foya_tui.runtime.digests import digest_of
from foya_tui.runtime.history import LogEntry, MessageLog, valid_events
from foya_tui.runtime.model import AttachmentRef, Event, EventKind, Message, Role
from foya_tui.runtime.providers.catalog import ModelInfo, model_info
from foya_tui.runtime.providers.client import ProviderRequest
from foya_tui.runtime.providers.routes import Route
from foya_tui.runtime.store import EventStore
from foya_tui.runtime.tools.registry import ToolRegistry
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

    @property
    def checkpoint_id(self) -> str | None:
        return self.checkpoint.id if self.checkpoint is not None else None

    def provider_request(self) -> ProviderRequest:
        return ProviderRequest(route=self.route, messages=tuple(self.messages), tools=self.tools)

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
            "notices": list(self.notices),
        }


ACTIVE_CONTENT_CHARS = 32_000


def _active_content(entries: Sequence[LogEntry], anchor: int | None) -> str:
    """The working set's recent text, which decides which path-matched rules are in force."""
    texts: list[str] = []
    size = 0
    for index in range(len(entries) - 1, (anchor or 0) - 1, -1):
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

    def saved_between(self, first: int, last: int, shortened_count: int) -> int:
        """Tokens saved by shortening, among log entries first..last-1 (of the first N large results)."""
        low = min(bisect.bisect_left(self.large_indexes, first), shortened_count)
        high = min(bisect.bisect_left(self.large_indexes, last), shortened_count)
        return self.savings[high] - self.savings[low]


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
        self.checkpoint_messages: dict[str, Mapping[str, Any]] = {}
        self.checkpoint_tokens: dict[tuple[str, str], int] = {}

    def refresh(self, store: EventStore) -> None:
        """Read the events appended since the last refresh; a rewind rebuilds from the store."""
        new = store.events(self.session_id, after_seq=self.last_seq)
        if not new:
            return
        if any(event.kind in _CHECKPOINT_EVENTS for event in new):
            self.checkpoints = None
        if any(event.kind is EventKind.REWIND for event in new):
            self._reset()
            new = store.events(self.session_id)
            for event in valid_events(new):
                self._add(event)
        else:
            for event in new:
                if event.problem is None:
                    self._add(event)
        self.last_seq = new[-1].seq

    def _add(self, event: Event) -> None:
        if event.kind is EventKind.PROVIDER_USAGE:
            self.usage_events.append(event)
        elif event.kind is EventKind.TOOL_RESULT:
            metadata = event.payload.get("metadata")
            activated = metadata.get("activated") if isinstance(metadata, Mapping) else None
            if isinstance(activated, list):
                self.activations.append((event.seq, tuple(str(name) for name in activated)))
        elif event.kind is EventKind.REWIND:
            self.rewinds.append(event.seq)
        before = len(self.log.entries)
        self.log.add(event)
        for entry in self.log.entries[before:]:
            if entry.message.attachments:
                self.with_attachments.append(len(self.seqs))
            self.seqs.append(entry.seq)
            self.roles.append(entry.message.role)

    def checkpoint_state(self, reader: CheckpointReader | None) -> CheckpointState | None:
        if self.checkpoints is None and reader is not None and self.session_id:
            self.checkpoints = reader.state(self.session_id)
        return self.checkpoints

    def checkpoint_message(
        self, checkpoint: Checkpoint, counter: TokenCounter
    ) -> tuple[Mapping[str, Any], int]:
        """The message that stands for the covered prefix, and its tokens (cached per checkpoint)."""
        message = self.checkpoint_messages.get(checkpoint.id)
        if message is None:
            text = checkpoint_message_text(
                [(segment.from_seq, segment.through_seq, segment.text) for segment in checkpoint.segments],
                checkpoint.ledger,
                checkpoint.id,
                checkpoint.covered_messages,
            )
            message = Message(role=Role.USER, content=text).to_openai()
            self.checkpoint_messages[checkpoint.id] = message
        key = (checkpoint.id, counter.name)
        tokens = self.checkpoint_tokens.get(key)
        if tokens is None:
            tokens = self.checkpoint_tokens[key] = message_tokens(message, counter) + sum(
                message_tokens(kept, counter) for kept in checkpoint.kept_messages
            )
        return message, tokens

    def revision(self, checkpoint_id: str | None, shortened: tuple[int, int] = (0, 0)) -> str:
        """The projection's shape: a measured baseline only describes a request of equal revision."""
        return digest_of(
            {"rewinds": self.rewinds, "checkpoint": checkpoint_id, "shortened": list(shortened)}
        )[:16]

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

    @property
    def checkpoint(self) -> Checkpoint | None:
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

    def compile(self, session_id: str, route: Route, *, candidate: Checkpoint | None = None) -> RequestView:
        """The next request. With `candidate`, the request as it would be if that checkpoint were
        current (acceptance measures a candidate against what the model sees now: SPEC C-12)."""
        state = self._state(session_id)
        with state.lock:
            state.refresh(self._store)
            current = state.checkpoint_state(self._checkpoints)
            checkpoint = candidate or (current.current if current is not None else None)
            return self._compile(state, route, checkpoint)

    def checkpoint_state(self, session_id: str) -> CheckpointState | None:
        """The session's current checkpoint as the compiler applies it (re-validated on change)."""
        state = self._state(session_id)
        with state.lock:
            state.refresh(self._store)
            return state.checkpoint_state(self._checkpoints)

    def snapshot(self, session_id: str) -> HistorySnapshot:
        """Valid history's messages as they are now, for the compaction planner."""
        state = self._state(session_id)
        with state.lock:
            state.refresh(self._store)
            current = state.checkpoint_state(self._checkpoints)
            return HistorySnapshot(
                session_id=session_id,
                entries=tuple(state.log.entries),
                open_group_seq=state.log.open_group_seq,
                anchor_index=state.log.anchor_index,
                checkpoints=current,
            )

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

    def _compile(
        self, state: _SessionState, route: Route, checkpoint: Checkpoint | None = None
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
        budget = compute_budget(
            info.window,
            overrides.max_input,
            baseline.output_tokens if baseline is not None and baseline.known else None,
            self._settings.budget,
        )

        # The Model Projection (SPEC V): checkpoint + the anchor verbatim + what follows the
        # covered prefix; without a checkpoint, all valid messages.
        start = 0
        head: list[Mapping[str, Any]] = [system]
        covered_tokens = 0
        reinsert_anchor = False
        if checkpoint is not None:
            start = bisect.bisect_right(state.seqs, checkpoint.through_seq)
            message, covered_tokens = state.checkpoint_message(checkpoint, counter)
            head += [message, *checkpoint.kept_messages]
            # mid_turn and standalone cover the anchor: it is re-inserted verbatim (SPEC C-3).
            reinsert_anchor = anchor < start
        # Images are materialised per request: few entries, each replaced and re-counted.
        images, image_deltas = self._materialise(
            state, info, counter, lambda index: index >= start or (reinsert_anchor and index == anchor)
        )
        anchor_tokens = 0
        if reinsert_anchor:
            head.append(images.get(anchor) or entries[anchor].openai)
            anchor_tokens = message_tokens(entries[anchor].openai, counter) + image_deltas.pop(anchor, 0)
        working_from = max(anchor, start)
        tail_tokens = sum(message_tokens(entry.openai, counter) for entry in tail)
        pinned = message_tokens(system, counter) + TOKENS_PER_REPLY
        activated = state.activated_since(entries[anchor].seq if anchor < count else None)

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
            + anchor_tokens
            + column.prefix[count]
            - column.prefix[start]
            + tail_tokens
            + sum(image_deltas.values())
            + _tool_tokens(tool_schemas(False), counter)
        )
        first_large = bisect.bisect_left(column.large_indexes, start)
        shorten = shortened_count(column.savings, local_total, budget.handoff_at, first_large)
        tools = tool_schemas(shorten > 0)

        def delta_between(first: int, last: int) -> int:
            """Tokens this request adds (images) or saves (shortening) among entries first..last-1."""
            image = sum(delta for index, delta in image_deltas.items() if first <= index < last)
            return image - column.saved_between(first, last, shorten)

        def replaced(index: int) -> Mapping[str, Any] | None:
            position = bisect.bisect_left(column.large_indexes, index)
            if position < shorten and column.large_indexes[position] == index:
                return column.shortened[index]
            return images.get(index)

        layers = LayerTokens(
            pinned=pinned,
            history=covered_tokens
            + column.prefix[working_from]
            - column.prefix[start]
            + delta_between(start, working_from),
            working_set=anchor_tokens
            + column.prefix[count]
            - column.prefix[working_from]
            + tail_tokens
            + delta_between(working_from, count),
            tool_schema=_tool_tokens(tools, counter),
            native_state=0,
        )
        shortened_seqs = tuple(column.large_seqs[first_large:shorten])
        # The large results only ever grow between rewinds (which change the revision themselves),
        # so how many are shortened and the last of them identify the set.
        revision = state.revision(
            checkpoint.id if checkpoint is not None else None,
            (shorten, shortened_seqs[-1] if shortened_seqs else 0),
        )
        estimate = estimate_request(
            baseline=baseline,
            revision=revision,
            fixed_tokens=layers.fixed,
            local_total=layers.total,
            entry_seqs=state.seqs,
            entry_roles=state.roles,
            tokens_from=lambda index: (
                column.prefix[count]
                - column.prefix[min(max(index, start), count)]
                + tail_tokens
                + delta_between(max(index, start), count)
            ),
        )
        notices = [f"{notice.source}: {notice.message}" for notice in sources.notices]
        if info.window is None:
            notices.append(f"{route.model}: context window unknown; using the default budget (SPEC B-3)")
        if shortened_seqs:
            notices.append(
                f"{len(shortened_seqs)} large tool result(s) shortened in the model's view (SPEC T-1)"
            )
        if state.checkpoints is not None:
            notices.extend(state.checkpoints.notices)
        messages = MessageSequence(
            tuple(head), entries, replaced, tuple(entry.openai for entry in tail), start
        )
        return RequestView(
            session_id=state.session_id,
            route=route,
            model=info,
            messages=messages,
            tools=tools,
            native_state=None,
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
        )


def _tool_tokens(tools: Sequence[Mapping[str, Any]], counter: TokenCounter) -> int:
    return count_tools(tools, counter) if tools else 0

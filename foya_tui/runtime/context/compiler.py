"""Provides the context compiler: before every model call, the request built fresh from history
in five layers, with a token budget and a verdict (SPEC X-1..X-8, B-1..B-9).

The compiler keeps, per session, an incrementally maintained index (`context/index.py`: a message
log and per-tokenizer prefix sums), so a step reads only the events appended since the last one and
costs the same at 100,000 events as at 1,000 (see `tests/bench/bench_compiler.py`). Canonical
history is never changed: snipped tool results (K-3, K-4), handoff records (K-1) and
provider-native state (C-11, R-2) only change what one request shows.
"""

from __future__ import annotations

import base64
import bisect
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from foya_tui.runtime.context.budget import Budget, compute_budget
from foya_tui.runtime.context.columns import TokenColumn, VisibleColumn, snipped_key
from foya_tui.runtime.context.floor import brief_tool_schemas, recent_tool_turns
from foya_tui.runtime.context.index import SessionIndex
from foya_tui.runtime.context.report import LayerTokens
from foya_tui.runtime.context.request import MessageSequence, RequestView
from foya_tui.runtime.context.sources import load_sources
from foya_tui.runtime.context.tool_results import (
    FLOOR_HEAD_CHARS,
    FLOOR_TAIL_CHARS,
    NOTE_TOKENS,
    OVERSIZED_MESSAGE_SHARE,
    OVERSIZED_MESSAGE_TARGET,
    ElasticShare,
    chars_for,
    elastic_targets,
    shortened_count,
    split_chars,
)
from foya_tui.runtime.context.tracker import (
    NO_CALIBRATION,
    Estimate,
    calibration,
    estimate_request,
    latest_baseline,
)
from foya_tui.runtime.digests import digest_of
from foya_tui.runtime.model import AttachmentRef, Message, Role
from foya_tui.runtime.providers.catalog import ModelInfo, model_info
from foya_tui.runtime.providers.routes import Route
from foya_tui.runtime.store import EventStore
from foya_tui.runtime.tokens import (
    TOKENS_PER_REPLY,
    TokenCounter,
    count_tools,
    counter_for_model,
    message_text,
    message_tokens,
)
from foya_tui.runtime.tools.registry import Effect, ToolRegistry
from foya_tui.runtime.view.checkpoint import Checkpoint, ProjectionKind
from foya_tui.runtime.view.handoff import epoch_of
from foya_tui.runtime.view.history import LogEntry
from foya_tui.runtime.view.recovery import CheckpointReader, CheckpointState
from foya_tui.runtime.view.snapshot import HistorySnapshot
from foya_tui.runtime.view.snip import CandidateKind, SnipCandidate, k4_order
from foya_tui.settings import Settings

# Tokens charged per image sent: providers bill roughly 765 (OpenAI, high detail) to ~1,600
# (Anthropic, ~1.1 megapixel); the larger keeps the estimate conservative.
IMAGE_TOKENS = 1_600
_DATA_URL_CACHE_SIZE = 8


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


ELASTIC_AIM = 0.98
"""The elastic step aims at this share of the compaction line (SPEC T-4): an estimate is calibrated
from real usage, the local counts it resizes by are not, so it aims a little under."""
ELASTIC_PASSES = 2

MAX_OPEN_SESSIONS = 4
"""Per-session compiler indexes kept at once; a TUI works in one session, a few when switching."""


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
        max_sessions: int = MAX_OPEN_SESSIONS,
    ) -> None:
        """Without `checkpoints`, requests carry all valid history (no projection is applied).
        `max_sessions` bounds the per-session indexes kept (least recently used ones are dropped)."""
        self._store = store
        self._checkpoints = checkpoints
        self._settings = settings
        self.approval_mode = settings.approval_mode
        """The approval mode the system prompt states; the Runtime sets it (`--approval`, the TUI)."""
        self._workdir = workdir
        self._config_dir = config_dir
        self._clock = clock
        self._registry = registry
        self._sessions: OrderedDict[str, SessionIndex] = OrderedDict()
        self._sessions_lock = threading.Lock()
        self._max_sessions = max(1, max_sessions)
        self._data_urls: dict[str, str] = {}
        self._full_tool_tokens: dict[str, int] = {}
        """By encoding: what every tool schema a request may carry counts in full."""

    def _state(self, session_id: str) -> SessionIndex:
        with self._sessions_lock:
            state = self._sessions.get(session_id)
            if state is None:
                state = self._sessions[session_id] = SessionIndex(session_id)
            self._sessions.move_to_end(session_id)
            self._evict()
            return state

    def _evict(self) -> None:
        """Drop the least recently used indexes beyond the bound: nine 20k-event sessions took the
        process from 31 to 306 MB. An index is derived from the store, so a dropped one is rebuilt
        when its session is used again. One whose lock is held is in use and is never dropped."""
        excess = len(self._sessions) - self._max_sessions
        for session_id in list(self._sessions)[:-1]:
            if excess <= 0:
                break
            if not self._sessions[session_id].lock.locked():
                del self._sessions[session_id]
                excess -= 1

    @property
    def indexed_sessions(self) -> tuple[str, ...]:
        """The sessions whose index is kept now, least recently used first."""
        with self._sessions_lock:
            return tuple(self._sessions)

    def measured_routes(self, session_id: str) -> frozenset[str]:
        """Ids of the routes this session has provider usage records for."""
        state = self._state(session_id)
        with state.lock:
            state.refresh(self._store, self._checkpoints)
            return frozenset(str(event.payload.get("route_id")) for event in state.usage_events)

    def preview(self, route: Route) -> RequestView:
        """The request a new conversation would start from on this route (no session yet): the
        pinned context and the route's budget, for the meter before the first message."""
        return self._compile(SessionIndex(""), route)

    def first_budget(self, route: Route) -> Budget:
        """The budget of a route no usage was measured on yet: what `preview` starts from, without
        compiling a request (compaction reads it for a summary route: SPEC B-2, C-13)."""
        return self._budget(route, None)

    def _budget(self, route: Route, last_output_tokens: int | None) -> Budget:
        overrides = self._settings.model_settings(route.model)
        info = model_info(route.model, overrides)
        return compute_budget(info.window, overrides.max_input, last_output_tokens, self._settings.budget)

    def brief_tools(self, route: Route) -> bool:
        """Whether requests on `route` carry the small window's tool schemas (`context/floor.py`):
        decided by the window alone, so a route's tool definitions never change between steps
        (a change would void the provider's prompt cache)."""
        if self._registry is None:
            return False
        counter = counter_for_model(route.model)
        full = self._full_tool_tokens.get(counter.name)
        if full is None:
            schemas = self._registry.visible_schemas(include_history_read=True, include_recall=True)
            full = self._full_tool_tokens[counter.name] = _tool_tokens(schemas, counter)
        window = model_info(route.model, self._settings.model_settings(route.model)).window
        return brief_tool_schemas(full, window)

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
            state.refresh(self._store, self._checkpoints)
            if candidate is not None:
                state.require(candidate.through_seq, self._store)
            state.checkpoint_state(self._checkpoints)
            return self._compile(state, route, candidate, snips)

    def checkpoint_state(self, session_id: str) -> CheckpointState | None:
        """The session's current checkpoint as the compiler applies it (re-validated on change)."""
        state = self._state(session_id)
        with state.lock:
            state.refresh(self._store, self._checkpoints)
            return state.checkpoint_state(self._checkpoints)

    def snapshot(
        self, session_id: str, route: Route | None = None, *, after_seq: int | None = None
    ) -> HistorySnapshot:
        """Valid history's messages as they are now, for the compaction planner; its checkpoint is
        the one `route` applies (SPEC R-2), the current one without a route. Its entries start
        after the prefix the checkpoints cover (what a route may send), or, given `after_seq`, hold
        at least every message after that seq (a rewind's group check)."""
        state = self._state(session_id)
        with state.lock:
            state.refresh(self._store, self._checkpoints)
            if after_seq is not None:
                state.require(after_seq, self._store)
            current = state.checkpoint_state(self._checkpoints)
            if current is None:
                checkpoint = None
            else:
                checkpoint = current.current if route is None else current.for_route(route.id)
            open_group_seq = state.log.open_group_seq
            return HistorySnapshot(
                session_id=session_id,
                entries=tuple(state.log.entries),
                units=tuple(state.units.units(state.log.entries, open_group_seq)),
                open_group_seq=open_group_seq,
                anchor_index=state.log.anchor_index,
                checkpoints=current,
                checkpoint=checkpoint,
            )

    def last_provider_call(self, session_id: str) -> str | None:
        """When the last provider call of valid history was recorded (its usage event's created_at):
        the clock for the prompt cache's expiry (SPEC K-3). None before any call."""
        state = self._state(session_id)
        with state.lock:
            state.refresh(self._store, self._checkpoints)
            return state.usage_events[-1].created_at if state.usage_events else None

    def tool_charge_known(self, session_id: str, route_id: str) -> bool:
        """Whether this session already probed what `route_id`'s server charges for the tool
        definitions (a `tool_charge` record, see Session), measured or not: one probe per session
        and route."""
        state = self._state(session_id)
        with state.lock:
            state.refresh(self._store)
            return route_id in state.tool_charge_probed

    def snip_candidates(
        self, session_id: str, route: Route, current: RequestView | None = None
    ) -> tuple[SnipCandidate, ...]:
        """The tool results micro-compaction or snip may take out of `route`'s next request, in K-4
        order (SPEC K-3, K-4): recorded results of tool turns older than the recent window, not
        covered by the checkpoint the route applies, not yet snipped, whose placeholder is smaller
        than what the model sees now (in full, or shortened by T-1).

        `current` is that request as the caller just compiled it (no pending snips, nothing written
        since): given, it is not compiled again."""
        state = self._state(session_id)
        with state.lock:
            state.refresh(self._store, self._checkpoints)
            state.checkpoint_state(self._checkpoints)
            fresh = current is not None and current.through_seq == state.last_seq and current.route == route
            view = current if fresh and current is not None else self._compile(state, route)
            column = state.column(counter_for_model(route.model), self._settings.tools, self._store)
            visible = state.visible(column)
            start = bisect.bisect_right(state.seqs, view.checkpoint.through_seq) if view.checkpoint else 0
            shortened = frozenset(view.shortened_seqs)
            entries = state.log.entries
            turns = len(state.turn_starts)
            open_seq = state.log.open_group_seq
            if turns and entries[state.turn_starts[-1]].seq == open_seq:
                turns -= 1  # calls still waiting: not a complete tool turn, and never touched

            def seen_tokens(index: int) -> int:
                """What the result at `index` takes in the request now: in full, or shortened by T-1."""
                if entries[index].seq in shortened:
                    return column.shortened_tokens(index) or column.tokens_of(index)
                return column.tokens_of(index)

            def turn_tokens(turn: int) -> int:
                first, last = state.turn_starts[turn] + 1, state.turn_ends[turn]
                return sum(0 if visible.is_snipped(i) else seen_tokens(i) for i in range(first, last + 1))

            # The recent window holds the newest turns while they fit their share of the budget:
            # on a small window, one file read can be all of it (context/floor.py).
            recent = recent_tool_turns(
                (turn_tokens(turn) for turn in range(turns - 1, -1, -1)),
                view.budget.input_budget,
                self._settings.compaction.recent_tool_turns,
            )
            older = max(0, turns - recent)
            candidates: list[SnipCandidate] = []
            first_turn = max(0, bisect.bisect_right(state.turn_starts, start) - 1)
            for turn in range(first_turn, older):
                for index in range(max(state.turn_starts[turn] + 1, start), state.turn_ends[turn] + 1):
                    if visible.is_snipped(index) or not state.snippable(index):
                        continue
                    entry = entries[index]
                    placeholder_tokens = column.placeholder(index, entry, state.tool_name)[1]
                    seen = seen_tokens(index)
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

    def _candidate_kind(self, state: SessionIndex, index: int, name: str) -> CandidateKind:
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
        state: SessionIndex,
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
        self, state: SessionIndex, route: Route, candidate: Checkpoint | None
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
                f"the native state of checkpoint {native.id[:12]} belongs to {native.model}, "
                "another route: not sent"
            )
        return checkpoint, native, notices

    def _compile(
        self,
        state: SessionIndex,
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
            approval_mode=self.approval_mode,
            kernel=self._settings.system_prompt,
        )
        system = Message(role=Role.SYSTEM, content=sources.text).to_openai()
        tail = state.log.tail()
        column = state.column(counter, self._settings.tools, self._store)
        entries = state.log.entries
        count = len(entries)
        anchor = state.log.anchor_index if state.log.anchor_index is not None else count
        baseline = latest_baseline(state.usage_events, route.id)
        last_output = baseline.output_tokens if baseline is not None and baseline.known else None
        budget = self._budget(route, last_output)
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
            checkpoint_messages, covered_tokens = state.checkpoint_head(checkpoint, counter)
            head += checkpoint_messages
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
        # A non-tool message that alone takes more than half of the input budget is shown cut
        # around a pointer to history_read (SPEC T-4); its event is never changed (H-2).
        long_forms = _long_message_forms(
            state, column, start, anchor if reinsert_anchor else None, budget.input_budget
        )
        anchor_tokens = 0
        reinsert_long = False
        if reinsert_anchor:
            long_anchor = long_forms.pop(anchor, None)
            if long_anchor is not None:
                reinsert_long = True
                head.append(long_anchor[0])
                anchor_tokens = long_anchor[1]
            else:
                head.append(images.get(anchor) or entries[anchor].openai)
                anchor_tokens = message_tokens(entries[anchor].openai, counter) + image_deltas.pop(anchor, 0)
        form_deltas = dict(image_deltas)
        for index, (_, tokens) in long_forms.items():
            form_deltas[index] = tokens - column.tokens_of(index)
        working_from = max(anchor, start)
        tail_tokens = sum(message_tokens(entry.openai, counter) for entry in tail)
        pinned = message_tokens(system, counter) + TOKENS_PER_REPLY
        activated = state.activated_since(entries[anchor].seq if anchor < count else None)
        brief = self.brief_tools(route)
        snipped_seqs = view.seqs_from(start)

        def tool_schemas(include_history_read: bool) -> tuple[Mapping[str, Any], ...]:
            if self._registry is None:
                return ()
            # Once a checkpoint summarises part of history, the model can search and read it all;
            # a message shown cut points to history_read for the rest (SPEC T-4).
            schemas = self._registry.visible_schemas(
                activated,
                include_history_read=include_history_read,
                include_recall=checkpoint is not None or bool(long_forms) or reinsert_long,
                include_event_reader=bool(long_forms) or reinsert_long,
                brief=brief,
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
            + sum(form_deltas.values())
            + _tool_tokens(tool_schemas(False), counter)
        )
        first_large = bisect.bisect_left(view.large_indexes, start)
        shorten = shortened_count(view.savings, local_total, budget.handoff_at, first_large)
        # A shortened or a snipped result points to the reader, so the model is given it.
        tools = tool_schemas(shorten > 0 or bool(snipped_seqs))

        elastic: dict[int, tuple[Mapping[str, Any], int]] = {}
        """The elastic step's forms (SPEC T-4) by entry index, with their token change."""

        def delta_between(first: int, last: int) -> int:
            """Tokens this request adds (images) or saves (shortening) among entries first..last-1."""
            changed = sum(delta for index, delta in form_deltas.items() if first <= index < last)
            changed += sum(delta for index, (_, delta) in elastic.items() if first <= index < last)
            return changed - view.saved_between(first, last, shorten)

        def replaced(index: int) -> Mapping[str, Any] | None:
            if index in elastic:
                return elastic[index][0]
            if view.is_snipped(index):
                return column.placeholder(index, entries[index], state.tool_name)[0]
            position = bisect.bisect_left(view.large_indexes, index)
            if position < shorten and view.large_indexes[position] == index:
                return column.shortened[index]
            if index in long_forms:
                return long_forms[index][0]
            return images.get(index)

        def layer_tokens() -> LayerTokens:
            return LayerTokens(
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

        layers = layer_tokens()
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
        elastic_key = ""

        def estimated(layers: LayerTokens) -> tuple[str, Estimate]:
            # The large results only ever grow between rewinds (which change the revision
            # themselves), so with the snipped set, how many are shortened and the last of them
            # identify the set; the elastic sizes, when any, take part too.
            # Counted from the checkpoint on (what a covered prefix holds is not part of what
            # is sent), so a process that read only what follows the checkpoint names the same
            # revision as one that read all of history.
            revision = state.revision(
                checkpoint.id if checkpoint is not None else None,
                (max(0, shorten - first_large), shortened_seqs[-1] if shortened_seqs else 0),
                snipped_key(snipped_seqs),
                elastic_key,
            )
            return revision, estimate_request(
                baseline=baseline,
                revision=revision,
                fixed_tokens=layers.fixed,
                local_total=layers.total,
                entry_seqs=state.seqs,
                entry_roles=state.roles,
                # A model's own tokenizer needs no calibration: only char-weight estimates learn.
                calibration=(
                    NO_CALIBRATION
                    if counter.exact
                    else calibration(
                        state.calibration_samples.get(route.id, ()),
                        state.tool_charge_samples.get(route.id, ()),
                    )
                ),
                tool_tokens=layers.tool_schema,
                tokens_from=lambda index: (
                    view.prefix(count)
                    - view.prefix(min(max(index, start), count))
                    + tail_tokens
                    + delta_between(max(index, start), count)
                ),
            )

        revision, estimate = estimated(layers)
        # What snip and history compaction are judged by: the request before the elastic step.
        pressure, unshrunk = estimate.total, layers.total
        fixed_seqs = shortened_seqs
        overflow = 0
        for _ in range(ELASTIC_PASSES):
            if estimate.total <= budget.high_water:
                break
            # SPEC T-4: still over the compaction line with every earlier result in its fixed
            # form: the working set's oversized results share the room that is left, aimed a
            # little under the line (estimates are calibrated, local counts are not); a second
            # pass takes off what the first one still left over.
            scale = pressure / max(1, unshrunk)
            aim = int(budget.high_water * ELASTIC_AIM)
            if overflow == 0:
                overflow = unshrunk - int(aim / scale)
            else:
                overflow += int((estimate.total - aim) / scale) + 1
            elastic.clear()
            forms, at_floor = _elastic_forms(
                state, column, view, working_from, shorten, images, overflow=overflow
            )
            elastic.update(forms)
            if not elastic:
                break
            elastic_key = digest_of(
                sorted((entries[index].seq, delta) for index, (_, delta) in elastic.items())
            )[:16]
            cut = {
                entries[index].seq
                for index, (form, _) in elastic.items()
                if form is not entries[index].openai
            }
            restored = {entries[index].seq for index in elastic} - cut
            # Only the working set's part of the list changes: the earlier part is kept as it is,
            # so this stays O(results in the working set) however many a long session holds.
            split = (
                bisect.bisect_left(fixed_seqs, entries[working_from].seq)
                if working_from < count
                else len(fixed_seqs)
            )
            changed = sorted(({*fixed_seqs[split:]} - restored) | cut)
            shortened_seqs = fixed_seqs[:split] + tuple(changed)
            tools = tool_schemas(bool(shortened_seqs) or bool(snipped_seqs))
            layers = layer_tokens()
            revision, estimate = estimated(layers)
            if at_floor:
                break  # every result is at its floor: no smaller form exists (001: the provider judges)
        notices = [f"{notice.source}: {notice.message}" for notice in sources.notices] + notices
        if info.window is None:
            notices.append(f"{route.model}: context window unknown; using the default budget")  # SPEC B-3
        if shortened_seqs:
            notices.append(f"{len(shortened_seqs)} large tool result(s) shortened in the model's view")
        long_seqs = tuple(sorted(entries[index].seq for index in long_forms))
        if reinsert_long:
            long_seqs = (entries[anchor].seq, *long_seqs)
        for seq in long_seqs:
            notices.append(
                f"message {seq} alone is more than half of the input budget: the model sees its start "
                "and end and can read the rest with history_read"
            )
        if snipped_seqs:
            notices.append(f"{len(snipped_seqs)} old tool result(s) snipped in the model's view")
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
            native_state=checkpoint.native_state if native_tokens and checkpoint is not None else None,
            through_seq=state.last_seq,
            anchor_seq=entries[anchor].seq if anchor < count else None,
            revision=revision,
            checkpoint=checkpoint,
            layers=layers,
            counter=counter.name,
            counted_exactly=counter.exact,
            budget=budget,
            estimate=estimate,
            verdict=budget.verdict(pressure),
            pressure=pressure,
            unshrunk_tokens=unshrunk,
            shortened_seqs=shortened_seqs,
            shortened_messages=long_seqs,
            brief_tools=brief,
            anchor_tokens=column.tokens_of(anchor) if anchor < count else 0,
            notices=tuple(notices),
            handoff_epoch=epoch,
            handoff_status=state.handoffs.status(epoch),
            snipped_seqs=snipped_seqs,
            snip_saved_tokens=snip_saved,
            native_checkpoint=native,
        )


def _long_message_forms(
    state: SessionIndex, column: TokenColumn, start: int, reinserted: int | None, input_budget: int
) -> dict[int, tuple[Mapping[str, Any], int]]:
    """The non-tool messages of a request that alone take more than half of the input budget, cut
    to a quarter of it around a pointer to history_read (SPEC T-4), by entry index, with their
    tokens. Only messages above `oversized_tokens` are ever looked at, so this is O(log n)."""
    limit = int(input_budget * OVERSIZED_MESSAGE_SHARE)
    target = int(input_budget * OVERSIZED_MESSAGE_TARGET)
    candidates = column.long_messages[bisect.bisect_left(column.long_messages, start) :]
    if reinserted is not None:
        candidates = [reinserted, *candidates]
    forms = {}
    for index in candidates:
        tokens = column.tokens_of(index)
        if tokens <= limit:
            continue
        entry = state.log.entries[index]
        content = entry.openai.get("content")
        chars = len(content) if isinstance(content, str) else 0
        forms[index] = column.long_message_form(index, entry, chars_for(target, chars, tokens))
    return forms


def _elastic_forms(
    state: SessionIndex,
    column: TokenColumn,
    view: VisibleColumn,
    working_from: int,
    shorten: int,
    images: Mapping[int, Mapping[str, Any]],
    *,
    overflow: int,
) -> tuple[dict[int, tuple[Mapping[str, Any], int]], bool]:
    """SPEC T-4: the working set's oversized results resized so that together they take
    `overflow` tokens less than now (when they can): each one's form, and its token change against
    the form the fixed T-1 step gave it; and whether every one is at its floor (nothing smaller
    exists). Costs O(results in the working set), never O(history)."""
    entries = state.log.entries
    first = bisect.bisect_left(view.large_indexes, working_from)
    indexes = [index for index in view.large_indexes[first:] if index not in images]
    if not indexes or overflow <= 0:
        return {}, False
    current = []
    shares = []
    for position, index in enumerate(indexes, start=first):
        full = column.tokens_of(index)
        fixed = column.shortened_tokens(index) if position < shorten else None
        current.append(fixed if fixed is not None else full)
        chars = len(entries[index].message.content or "")
        floor = NOTE_TOKENS + (FLOOR_HEAD_CHARS + FLOOR_TAIL_CHARS) * full // max(1, chars)
        shares.append(ElasticShare(full_tokens=full, floor_tokens=min(full, floor)))
    room = sum(current) - overflow
    targets = elastic_targets(shares, room)
    forms: dict[int, tuple[Mapping[str, Any], int]] = {}
    for attempt in range(2):
        forms = {}
        for index, share, target, now in zip(indexes, shares, targets, current, strict=True):
            if target >= share.full_tokens:
                forms[index] = (entries[index].openai, share.full_tokens - now)
                continue
            chars = len(entries[index].message.content or "")
            head, tail = split_chars(chars_for(target, chars, share.full_tokens))
            # Sizes move in steps of 50 characters, so the pipeline's compiles of one step share forms.
            form, tokens = column.cut_form(index, entries[index], head - head % 50, tail - tail % 50)
            forms[index] = (form, tokens - now)
        used = sum(now + delta for now, (_, delta) in zip(current, forms.values(), strict=True))
        if used <= room or attempt:
            break
        # Characters per token vary inside a result: one correction, scaled to what it came to.
        targets = tuple(
            max(share.floor_tokens, target * room // max(1, used))
            for share, target in zip(shares, targets, strict=True)
        )
    at_floor = all(target <= share.floor_tokens for share, target in zip(shares, targets, strict=True))
    return {index: form for index, form in forms.items() if form[1] != 0}, at_floor


def _tool_tokens(tools: Sequence[Mapping[str, Any]], counter: TokenCounter) -> int:
    return count_tools(tools, counter) if tools else 0

"""Provides the compiled request: an immutable view of one model call's messages, tools and native
state, with its tokens per layer, budget and verdict (SPEC X-6, X-7).

`MessageSequence` lets a request reference the session's message log without copying it, so
building one is O(1) in the length of history.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from foya_tui.runtime.context.budget import Budget, Verdict
from foya_tui.runtime.context.report import (
    CheckpointSummary,
    ContextReport,
    HandoffSummary,
    LayerTokens,
    NativeSummary,
    RouteSummary,
    SnipSummary,
    handoff_state,
)
from foya_tui.runtime.context.tracker import Estimate, EstimateSource
from foya_tui.runtime.providers.catalog import ModelInfo
from foya_tui.runtime.providers.client import ProviderRequest
from foya_tui.runtime.providers.routes import Route
from foya_tui.runtime.view.checkpoint import Checkpoint
from foya_tui.runtime.view.handoff import NO_EPOCH, EpochStatus
from foya_tui.runtime.view.history import LogEntry


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
    """Judged on `pressure`: what snip and history compaction could still relieve (SPEC K-2)."""
    pressure: int = 0
    """The estimate before the elastic step (SPEC T-4): the working set's results in their fixed
    form. The request itself (`estimate`) is at or under the compaction line whenever it can be."""
    unshrunk_tokens: int = 0
    """The local count of that same form: acceptance compares candidates by it (SPEC C-12)."""
    shortened_seqs: tuple[int, ...] = ()
    """Tool results shown shortened in this request (SPEC T-1, T-4)."""
    shortened_messages: tuple[int, ...] = ()
    """Seqs of non-tool messages shown cut because each alone is over half the input budget (T-4)."""
    brief_tools: bool = False
    """The tool definitions are the small window's brief forms, the recall tools behind
    tool_search (`context/floor.py`)."""
    anchor_tokens: int = 0
    """The latest user message's own tokens, in full (what an overflow message names, C-12)."""
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

    @cached_property
    def payload_bytes(self) -> int:
        """The messages' size as UTF-8 JSON, measured once per request (SPEC C-13 records it)."""
        return len(json.dumps(list(self.messages), ensure_ascii=False).encode("utf-8", "surrogatepass"))

    @property
    def checkpoint_id(self) -> str | None:
        return self.checkpoint.id if self.checkpoint is not None else None

    @property
    def snapshot_known(self) -> bool:
        """Whether the token snapshot is known: the route's window, or a measured baseline. Without
        it micro-compaction and snip may run, LLM compaction and handoff may not (SPEC K-5)."""
        return self.model.window is not None or self.estimate.source is not EstimateSource.ESTIMATE

    @property
    def max_output_tokens(self) -> int:
        """The reply's cap sent as `max_tokens`: the output reserve the budget kept (SPEC B-1, B-2),
        never above the model's output limit. Without it a base model on a local server writes to
        the end of its window."""
        limit = self.model.max_output
        return min(self.budget.output_reserve, limit) if limit else self.budget.output_reserve

    def provider_request(self) -> ProviderRequest:
        return ProviderRequest(
            route=self.route,
            messages=tuple(self.messages),
            tools=self.tools,
            max_output_tokens=self.max_output_tokens,
            native_state=self.native_state,
        )

    def too_large(self) -> str:
        """One line on what makes this request too large for the model, for a turn the provider
        refused although nothing more could shrink (SPEC C-12 extended, 001)."""
        budget = f"the model's input budget is {self.budget.input_budget:,}"
        if self.anchor_tokens > self.budget.input_budget:
            return f"your message alone is {self.anchor_tokens:,} tokens; {budget}"
        fixed = self.layers.pinned + self.layers.tool_schema
        if fixed > self.budget.input_budget // 2:
            return f"the instructions and tool definitions alone are {fixed:,} tokens; {budget}"
        parts = {
            "the conversation before your latest message": self.layers.history,
            "your latest message and the work since": self.layers.working_set,
            "the instructions and tool definitions": fixed,
            "the provider's saved state": self.layers.native_state,
        }
        name, tokens = max(parts.items(), key=lambda item: item[1])
        return f"the request is ~{self.estimate.total:,} tokens, {name} {tokens:,} of them; {budget}"

    def report(self) -> ContextReport:
        """What this request says about itself to the faces (typed; the CLI makes it JSON)."""
        native = self.native_checkpoint
        return ContextReport(
            session=self.session_id,
            route=RouteSummary(
                id=self.route.id,
                model=self.route.model,
                connection=self.route.connection,
                simulator=self.route.is_simulator,
            ),
            window=self.budget.window,
            window_source=self.model.source,
            max_input=self.budget.max_input,
            output_reserve=self.budget.output_reserve,
            reserve_basis=self.budget.reserve_basis,
            input_budget=self.budget.input_budget,
            handoff_at=self.budget.handoff_at,
            high_water=self.budget.high_water,
            estimate=self.estimate,
            layers=self.layers,
            counter=self.counter,
            counted_exactly=self.counted_exactly,
            verdict=self.verdict,
            through_seq=self.through_seq,
            anchor_seq=self.anchor_seq,
            checkpoint_id=self.checkpoint_id,
            checkpoint=CheckpointSummary.of(self.checkpoint),
            messages=len(self.messages),
            tools=tuple(tool["function"]["name"] for tool in self.tools if "function" in tool),
            shortened_seqs=self.shortened_seqs,
            shortened_messages=self.shortened_messages,
            brief_tools=self.brief_tools,
            snipped=SnipSummary(len(self.snipped_seqs), self.snip_saved_tokens),
            snapshot_known=self.snapshot_known,
            handoff=HandoffSummary(handoff_state(self.verdict), self.handoff_epoch, self.handoff_status),
            native=None
            if native is None
            else NativeSummary(native.id, native.model, self.native_state is not None),
            notices=self.notices,
        )


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

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return tuple(self._at(i) for i in range(*index.indices(len(self))))
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("message index out of range")
        return self._at(index)

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        return (self._at(i) for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"MessageSequence({len(self)} messages)"

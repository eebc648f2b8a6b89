"""Provides the text compactor: one non-streamed summary request, validated, repaired at most once
(SPEC C-9, C-11), in at most three attempts (K-8).

The request is sent as is: no SDK retries, no retry of a rate limit here (the next trigger tries
again). A provider that says the request is too long gets the same summary asked again with a
strictly smaller input (K-8: re-readable file contents dropped, then the oldest unit, then a lower
per-message cap); when no smaller input is left, or the three attempts are spent, `RequestOverflow`
lets the service back its coverage off (SPEC C-13). Any other provider failure is a
non-deterministic failure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from foya_tui.errors import FoyaError
from foya_tui.runtime.compaction.summary import missing_mentions, summary_problems
from foya_tui.runtime.model import Usage
from foya_tui.runtime.providers.client import CancelToken, Completion, ProviderClient, ProviderRequest
from foya_tui.runtime.providers.errors import FailureKind, ProviderError
from foya_tui.runtime.providers.routes import Route
from foya_tui.runtime.tokens import count_messages, counter_for_model
from foya_tui.runtime.view.ledger import Ledger

RequestBuilder = Callable[[Sequence[str], int], tuple[Mapping[str, Any], ...] | None]
"""Builds a compaction request's messages: given repair reasons, the repair request; given a shrink
level above 0, a strictly smaller input (K-8), or None when nothing smaller is left."""
MAX_ATTEMPTS = 3
"""Provider requests one summary may take: first, repair and overflow retries together (SPEC K-8)."""


class CompactionCancelled(FoyaError):
    """The user cancelled; nothing was written."""


class RequestOverflow(FoyaError):
    """The provider rejected a compaction request as larger than its window (SPEC C-13 backs off)."""


class SummaryFailed(FoyaError):
    """No usable summary. `deterministic` failures get a fingerprint (SPEC C-14)."""

    def __init__(self, reason: str, *, deterministic: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.deterministic = deterministic


class RequestBudget:
    """Provider requests one compaction may spend, so no failure mode can loop (SPEC C-15)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.spent = 0
        self.calibration: list[tuple[str, int, int]] = []
        """(route id, real input tokens, local estimate) of each summary reply that reported usage:
        where streams carry no usage (llama.cpp's server), summaries still teach the route's
        tokenizer (recorded with the attempt's diagnostic, read by the context index)."""

    def spend(self) -> None:
        if self.spent >= self.limit:
            raise SummaryFailed(
                f"cannot reduce further within {self.limit} provider requests", deterministic=True
            )
        self.spent += 1


@dataclass(frozen=True)
class Summary:
    text: str
    repaired: bool
    usage: Usage | None


class Compactor(Protocol):
    """Makes one summary from a request (SPEC C-11); the text compactor is the portable one.
    `seq_range` is the events the summary covers: its `[seq a–b]` references must lie inside."""

    def summarise(
        self,
        route: Route,
        build: RequestBuilder,
        ledger: Ledger,
        seq_range: tuple[int, int],
        cancel: CancelToken,
        budget: RequestBudget,
    ) -> Summary: ...


class TextCompactor:
    """Summaries through the session's provider client, non-streamed."""

    def __init__(self, client: ProviderClient, max_output_tokens: int) -> None:
        self._client = client
        self._max_output_tokens = max_output_tokens

    def _ask(
        self,
        route: Route,
        messages: tuple[Mapping[str, Any], ...],
        cancel: CancelToken,
        budget: RequestBudget,
    ) -> Completion:
        budget.spend()
        request = ProviderRequest(route=route, messages=messages, max_output_tokens=self._max_output_tokens)
        try:
            completion = self._client.complete(request, cancel)
        except ProviderError as error:
            if error.failure.kind is FailureKind.INPUT_OVERFLOW:
                raise RequestOverflow(error.failure.message) from None
            raise SummaryFailed(
                f"the summary request failed: {error.failure.message}", deterministic=False
            ) from None
        if completion.finish_reason == "cancelled" or cancel.cancelled:
            raise CompactionCancelled()
        if completion.usage is not None and completion.usage.input_tokens:
            local = count_messages(messages, counter_for_model(route.model))
            budget.calibration.append((route.id, completion.usage.input_tokens, local))
        return completion

    def summarise(
        self,
        route: Route,
        build: RequestBuilder,
        ledger: Ledger,
        seq_range: tuple[int, int],
        cancel: CancelToken,
        budget: RequestBudget,
    ) -> Summary:
        """A summary that passes C-9, names every modified path and user rule of `ledger` and
        cites only events of `seq_range`; one shorter repair request when the first candidate
        fails, then abandon (deterministic); a smaller input after an overflow (K-8). At most
        MAX_ATTEMPTS requests in all."""
        reasons: Sequence[str] = ()
        shrink = 0
        messages = build(reasons, shrink)
        for attempt in range(1, MAX_ATTEMPTS + 1):
            assert messages is not None
            try:
                completion = self._ask(route, messages, cancel, budget)
            except RequestOverflow as overflow:
                smaller = build(reasons, shrink + 1) if attempt < MAX_ATTEMPTS else None
                if smaller is None:
                    raise RequestOverflow(
                        f"{overflow} (after {attempt} attempt(s), no smaller input left)"
                    ) from None
                shrink += 1
                messages = smaller
                continue
            problems = _problems(completion.text, completion.finish_reason, ledger, seq_range)
            if not problems:
                return Summary(completion.text.strip(), repaired=bool(reasons), usage=completion.usage)
            if reasons:
                raise SummaryFailed(
                    f"the summary was rejected twice: {'; '.join(problems[:3])}", deterministic=True
                )
            if attempt == MAX_ATTEMPTS:
                break
            reasons = problems
            messages = build(reasons, shrink)
        # K-8: at most MAX_ATTEMPTS requests.
        raise SummaryFailed(f"no acceptable summary within {MAX_ATTEMPTS} attempts", deterministic=True)


def _problems(text: str, finish_reason: str, ledger: Ledger, seq_range: tuple[int, int]) -> list[str]:
    return summary_problems(text, finish_reason, seq_range) + missing_mentions(text, ledger)

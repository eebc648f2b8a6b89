"""Provides the provider-baseline tracker: the real input tokens of the last request on a route,
plus an estimate of what was appended since (SPEC B-5..B-7, B-9).

It lives beside `tokens.py` (which counts text) because it reasons about *requests*: which
measurement still describes the current payload, and which does not.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from foya_tui.runtime.model import Event, EventKind, Role


class EstimateSource(StrEnum):
    MEASURED = "measured"
    """Exactly the provider's count for a payload that has not changed since."""
    MEASURED_PLUS_ESTIMATE = "measured+estimate"
    """The provider's count plus a local estimate of what was appended since."""
    ESTIMATE = "estimate"
    """A full local estimate (no usable measurement)."""


@dataclass(frozen=True)
class Estimate:
    total: int
    source: EstimateSource
    reason: str
    """One line saying where the number comes from (shown in the meter and `foya context`)."""


@dataclass(frozen=True)
class UsageBaseline:
    """A provider_usage record: what one request on one route really cost."""

    route_id: str
    through_seq: int
    """The last event seq that request carried."""
    input_tokens: int | None
    output_tokens: int | None
    total_tokens: int | None
    revision: str | None
    """The projection revision of that request (rewinds, checkpoint): a change means rewritten history."""
    fixed_tokens: int | None
    """Pinned + tool-schema + native-state tokens of that request, as counted locally then."""

    @property
    def known(self) -> bool:
        return self.input_tokens is not None

    @property
    def floor(self) -> int:
        """SPEC B-6: the baseline is max(total, prompt + completion)."""
        return max(self.total_tokens or 0, (self.input_tokens or 0) + (self.output_tokens or 0))

    @classmethod
    def from_event(cls, event: Event) -> UsageBaseline | None:
        payload: Mapping[str, Any] = event.payload
        usage = payload.get("usage")
        through = payload.get("through_seq")
        if not isinstance(through, int) or not isinstance(payload.get("route_id"), str):
            return None  # a malformed record is no baseline at all
        usage = usage if isinstance(usage, Mapping) else {}

        def number(key: str, source: Mapping[str, Any]) -> int | None:
            value = source.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

        return cls(
            route_id=payload["route_id"],
            through_seq=through,
            input_tokens=number("input_tokens", usage),
            output_tokens=number("output_tokens", usage),
            total_tokens=number("total_tokens", usage),
            revision=payload.get("revision") if isinstance(payload.get("revision"), str) else None,
            fixed_tokens=number("fixed_tokens", payload),
        )


def latest_baseline(usage_events: Sequence[Event], route_id: str) -> UsageBaseline | None:
    """The newest usage record of this route (SPEC B-9: never another route's)."""
    for event in reversed(usage_events):
        if event.kind is EventKind.PROVIDER_USAGE and event.payload.get("route_id") == route_id:
            return UsageBaseline.from_event(event)
    return None


def estimate_request(
    *,
    baseline: UsageBaseline | None,
    revision: str,
    fixed_tokens: int,
    local_total: int,
    entry_seqs: Sequence[int],
    entry_roles: Sequence[Role],
    tokens_from: Callable[[int], int],
) -> Estimate:
    """Estimate the next request's input tokens (SPEC B-5..B-7).

    `entry_seqs` and `entry_roles` describe the projection's messages in order (seqs
    non-decreasing); `tokens_from(i)` is the local token count of entries i.. to the end, which
    the caller answers from prefix sums, so this stays O(log n) however long the session is.
    """

    def local(reason: str) -> Estimate:
        return Estimate(total=local_total, source=EstimateSource.ESTIMATE, reason=reason)

    if baseline is None:
        return local("no usage on this route yet")
    if not baseline.known:
        return local("the last request on this route reported no usage")
    if baseline.revision != revision:
        return local("history was rewritten since the last measured request")
    first_after = bisect.bisect_right(entry_seqs, baseline.through_seq)
    if first_after < len(entry_roles) and entry_roles[first_after] is not Role.ASSISTANT:
        return local("the first message after the measured request is not its reply")
    # The reply the provider already counted as output is not added again (SPEC B-6).
    added = tokens_from(first_after + 1) if first_after < len(entry_roles) else 0
    growth = max(0, fixed_tokens - baseline.fixed_tokens) if baseline.fixed_tokens is not None else 0
    total = baseline.floor + added + growth
    if added == 0 and growth == 0:
        return Estimate(total, EstimateSource.MEASURED, "as measured by the provider")
    return Estimate(
        total,
        EstimateSource.MEASURED_PLUS_ESTIMATE,
        f"measured {baseline.floor:,} + {added + growth:,} estimated since",
    )

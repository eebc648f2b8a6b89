"""Provides the provider-baseline tracker: the real input tokens of the last request on a route,
plus an estimate of what was appended since (SPEC B-5..B-7, B-9).

It lives beside `tokens.py` (which counts text) because it reasons about *requests*: which
measurement still describes the current payload, and which does not.
"""

from __future__ import annotations

import bisect
import math
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


CALIBRATION_BOUNDS = (0.5, 3.0)
"""A calibration factor never leaves this range: one odd usage figure must not wreck the budget."""
CALIBRATION_SMOOTHING = 0.5
"""Weight of the newest sample in the running factor (exponential smoothing)."""


TOOL_CHARGE_BOUNDS = (0.0, 3.0)
"""A server may not charge for tool definitions at all (a chat template without tools drops them):
the tool factor may fall to 0, never above 3."""


@dataclass(frozen=True)
class Calibration:
    """How far a route's real tokenizer is from the local count: real input tokens / the local
    estimate of the same request, smoothed over the route's requests (issue 18). Local counts
    are estimates for every model without a bundled tokenizer (Gemma, Llama, Claude, …).

    `tool_factor` is measured apart, when known: what the server charges for the tool definitions
    / their local count. llama.cpp's server with a template that has no tools charges nothing for
    them (the model never sees them), which a factor of the whole request cannot learn from summary
    requests, which carry no tools."""

    factor: float = 1.0
    samples: int = 0
    tool_factor: float | None = None

    def apply(self, tokens: int, tool_tokens: int = 0) -> int:
        """`tokens` as the route counts them; `tool_tokens` of them are tool definitions."""
        factor = self.factor if self.samples else 1.0
        if self.tool_factor is None:
            return math.ceil(tokens * factor) if self.samples else tokens
        tool_tokens = min(tool_tokens, tokens)
        return math.ceil((tokens - tool_tokens) * factor + tool_tokens * self.tool_factor)

    @property
    def learned(self) -> bool:
        return bool(self.samples) or self.tool_factor is not None

    @property
    def note(self) -> str:
        parts = []
        if self.samples:
            parts.append(f"calibrated on {self.samples} request{'s' if self.samples != 1 else ''}")
        if self.tool_factor is not None:
            parts.append(f"tool definitions measured at {self.tool_factor:.0%} of their count")
        return "; ".join(parts)


NO_CALIBRATION = Calibration()


def calibration_sample(payload: Mapping[str, Any]) -> tuple[int, int] | None:
    """(real input tokens, local estimate) of one recorded request, when both are known: a
    provider_usage payload (`usage.input_tokens`) or a summary's record (`input_tokens`)."""
    usage = payload.get("usage")
    local = payload.get("local_tokens")
    real = usage.get("input_tokens") if isinstance(usage, Mapping) else payload.get("input_tokens")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (local, real)):
        return None
    return real, local  # type: ignore[return-value]


def tool_charge_sample(payload: Mapping[str, Any]) -> tuple[int, int] | None:
    """(tokens the server charged for the tool definitions, their local count) of a provider_usage
    payload whose `tool_charge` a probe measured (session.py); None without one."""
    charge = payload.get("tool_charge")
    if not isinstance(charge, Mapping):
        return None
    real, local = charge.get("real"), charge.get("local")
    if not (isinstance(real, int) and not isinstance(real, bool) and real >= 0):
        return None
    if not (isinstance(local, int) and not isinstance(local, bool) and local > 0):
        return None
    return real, local


def _smoothed(samples: Sequence[tuple[int, int]], low: float, high: float) -> float | None:
    factor: float | None = None
    for real, local in samples:
        ratio = min(high, max(low, real / local))
        factor = ratio if factor is None else factor + CALIBRATION_SMOOTHING * (ratio - factor)
    return round(factor, 4) if factor is not None else None


def calibration(
    samples: Sequence[tuple[int, int]], tool_samples: Sequence[tuple[int, int]] = ()
) -> Calibration:
    """The smoothed, bounded factors of a route's (real, local) samples, oldest first."""
    factor = _smoothed(samples, *CALIBRATION_BOUNDS)
    tool_factor = _smoothed(tool_samples, *TOOL_CHARGE_BOUNDS)
    if factor is None and tool_factor is None:
        return NO_CALIBRATION
    return Calibration(
        factor=factor if factor is not None else 1.0, samples=len(samples), tool_factor=tool_factor
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
    calibration: Calibration = NO_CALIBRATION,
    tool_tokens: int = 0,
) -> Estimate:
    """Estimate the next request's input tokens (SPEC B-5..B-7).

    `entry_seqs` and `entry_roles` describe the projection's messages in order (seqs
    non-decreasing); `tokens_from(i)` is the local token count of entries i.. to the end, which
    the caller answers from prefix sums, so this stays O(log n) however long the session is.
    """

    def local(reason: str) -> Estimate:
        if calibration.learned:
            reason = f"{calibration.note}; {reason}"
        total = calibration.apply(local_total, tool_tokens)
        return Estimate(total, source=EstimateSource.ESTIMATE, reason=reason)

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
    total = baseline.floor + calibration.apply(added + growth)
    if added == 0 and growth == 0:
        return Estimate(total, EstimateSource.MEASURED, "as measured by the provider")
    reason = f"measured {baseline.floor:,} + {total - baseline.floor:,} estimated since"
    if calibration.learned:
        reason += f" ({calibration.note})"
    return Estimate(total, EstimateSource.MEASURED_PLUS_ESTIMATE, reason)

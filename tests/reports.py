"""Provides one builder of typed context reports for the UI and snapshot tests.

`context_report` starts from a foya-sim/small request after a few measured steps; each keyword
replaces a field of `ContextReport`. Nested parts may be given in the JSON form `foya context --json`
prints (a dict), which reads best in a test table; they are turned into the typed parts here, so
the report's shape is written down once, in `runtime/context/report.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace
from typing import Any

from foya_tui.runtime.context.budget import Verdict
from foya_tui.runtime.context.report import (
    CheckpointSummary,
    ContextReport,
    HandoffState,
    HandoffSummary,
    LayerTokens,
    NativeSummary,
    RouteSummary,
    SnipSummary,
)
from foya_tui.runtime.context.tracker import Estimate, EstimateSource
from foya_tui.runtime.view.handoff import EpochStatus

BASE = ContextReport(
    session="3f2a9c",
    route=RouteSummary(id="r1", model="foya-sim/small", connection="default", simulator=True),
    window=8192,
    window_source="simulator",
    max_input=None,
    output_reserve=2048,
    reserve_basis="first request",
    input_budget=6144,
    handoff_at=4300,
    high_water=4915,
    estimate=Estimate(total=3000, source=EstimateSource.MEASURED, reason="as measured by the provider"),
    layers=LayerTokens(pinned=900, history=1200, working_set=600, tool_schema=300, native_state=0),
    counter="o200k_base",
    counted_exactly=True,
    verdict=Verdict.OK,
    through_seq=12,
    anchor_seq=9,
    checkpoint_id=None,
    checkpoint=None,
    messages=8,
    tools=(),
    shortened_seqs=(),
    snipped=SnipSummary(count=0, tokens_saved=0),
    snapshot_known=True,
    handoff=HandoffSummary(state=HandoffState.BELOW_HANDOFF, epoch="none", status=EpochStatus.NONE),
    native=None,
    notices=(),
)


def _typed(name: str, value: Any, base: ContextReport) -> Any:
    """One field's value as `ContextReport` holds it; dicts and strings are the JSON form."""
    if not isinstance(value, Mapping):
        if name == "verdict":
            return Verdict(value)
        if name in ("notices", "tools", "shortened_seqs"):
            return tuple(value)
        return value
    if name == "route":
        return replace(base.route, **value)
    if name == "estimate":
        merged = {"total": base.estimate.total, "source": base.estimate.source, "reason": ""} | dict(value)
        return Estimate(merged["total"], EstimateSource(merged["source"]), merged["reason"])
    if name == "layers":
        return replace(base.layers, **value)
    if name == "checkpoint":
        defaults = {"level": 1, "segments": 1, "through_seq": 0, "phase": "pre_turn", "producer": ""}
        merged = defaults | {"tokens_before": 0, "tokens_after": 0} | dict(value)
        return CheckpointSummary(**{f.name: merged[f.name] for f in fields(CheckpointSummary)})
    if name == "snipped":
        return SnipSummary(**({"count": 0, "tokens_saved": 0} | dict(value)))
    if name == "handoff":
        merged = {"state": "below_handoff", "epoch": "none", "status": "none"} | dict(value)
        return HandoffSummary(HandoffState(merged["state"]), merged["epoch"], EpochStatus(merged["status"]))
    if name == "native":
        return NativeSummary(**({"bound_model": ""} | dict(value)))
    raise TypeError(f"{name} takes no mapping")


def context_report(base: ContextReport = BASE, **changes: Any) -> ContextReport:
    """`base` with `changes` (typed values, or the JSON form of nested parts) replacing its fields."""
    return replace(base, **{name: _typed(name, value, base) for name, value in changes.items()})

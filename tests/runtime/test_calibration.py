"""Tests the per-route calibration of local token estimates from real usage (issue 18): the
factor learns a tokenizer finer than Foya's estimate, stays bounded, survives a restart, is
never shared across routes, and is said in the estimate's reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from foya_tui.runtime.context.tracker import (
    CALIBRATION_BOUNDS,
    EstimateSource,
    calibration,
)
from foya_tui.runtime.model import EventKind, NewEvent
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.updates import ContextUpdated, TurnFinished
from foya_tui.ui.widgets.budget_meter import badge_text, read_report
from tests.conftest import FIXED_NOW, fake_settings, make_paths
from tests.fakes.openai_server import FakeOpenAIServer

# Number-heavy turns: what a SentencePiece tokenizer splits much finer than o200k-style BPE.
PROMPTS = [
    "compare these readings: 3.1415, 2.7182, 1.4142, 1.7320 and 0.5772, please",
    "and these: 6.0221, 1.6021, 9.1093, 6.6260, 1.3806 (units later)",
    "last batch 2.9979, 8.3144, 5.6703, 1.0545 then summarise the differences",
    "one more question about the series above, in plain words this time",
]


def test_the_factor_is_smoothed_and_bounded() -> None:
    assert calibration([]).samples == 0 and calibration([]).apply(100) == 100
    one = calibration([(200, 100)])
    assert (one.factor, one.samples, one.apply(100)) == (2.0, 1, 200)
    # Exponential smoothing: the newest sample moves the factor half-way.
    assert calibration([(200, 100), (100, 100)]).factor == 1.5
    low, high = CALIBRATION_BOUNDS
    assert calibration([(10_000, 1)]).factor == high and calibration([(1, 10_000)]).factor == low


def open_runtime(tmp_path: Path, workdir: Path, base_url: str) -> Runtime:
    settings = fake_settings(base_url, model="openai/ok")
    return Runtime(settings, make_paths(tmp_path), workdir=workdir, clock=lambda: FIXED_NOW)


def test_a_finer_tokenizer_is_learned_and_the_estimate_lands_within_15_percent(
    fake_openai: FakeOpenAIServer, tmp_path: Path, workdir: Path
) -> None:
    fake_openai.token_scale = 2.2  # the server's tokenizer counts 2.2× the fake's base count
    with open_runtime(tmp_path, workdir, fake_openai.base_url) as rt:
        session = rt.new_session()
        first = session.context()
        assert first.estimate.source is EstimateSource.ESTIMATE and "calibrated" not in first.estimate.reason
        for prompt in PROMPTS[:3]:
            assert isinstance(list(session.send(prompt))[-1], TurnFinished)
        session_id = session.id
        # Rewind to the first reply: history was rewritten, so the next figure is a full local
        # estimate (SPEC B-7), calibrated by what the three requests taught.
        reply_seq = next(
            e.seq for e in rt.parts.store.events(session_id) if e.kind is EventKind.ASSISTANT_MESSAGE
        )
        session.rewind(reply_seq)
    # A restart: the factor comes back from the usage records in the event log.
    with open_runtime(tmp_path, workdir, fake_openai.base_url) as rt:
        session = rt.open_session(session_id)
        view = session.context()
        assert view.estimate.source is EstimateSource.ESTIMATE
        assert view.estimate.reason.startswith("calibrated on 3 requests"), view.estimate.reason
        # The factor was applied (this fake counts neither tool schemas nor framing: it learns that too).
        assert view.estimate.total != view.layers.total
        reading = read_report(view.report())
        assert badge_text(reading).startswith("estimate (calibrated on 3 requests")
        fake_openai.reset()
        updates = list(session.send(PROMPTS[3]))
    # What the meter showed for exactly the request that went out, against the server's count.
    predicted = next(u for u in updates if isinstance(u, ContextUpdated)).report.estimate.total
    real = fake_openai.chat_requests[0].prompt_tokens
    assert real is not None
    assert abs(predicted - real) / real <= 0.15, (predicted, real)


def test_deltas_are_calibrated_and_other_routes_learn_nothing(
    fake_openai: FakeOpenAIServer, tmp_path: Path, workdir: Path
) -> None:
    fake_openai.token_scale = 2.0
    with open_runtime(tmp_path, workdir, fake_openai.base_url) as rt:
        session = rt.new_session()
        for prompt in PROMPTS[:2]:
            list(session.send(prompt))
        view = session.context()
        assert view.estimate.source is EstimateSource.MEASURED
        assert "calibrated on 2 requests" not in view.estimate.reason  # nothing estimated on top
        other = rt.route_for("openai/nousage")
        session_id = session.id
        assert "calibrated" not in rt.context(session_id, other).estimate.reason
        # A pending message is estimated on top of the measurement, through the factor.
        rt.parts.store.append(session_id, [NewEvent(EventKind.USER_MESSAGE, {"text": PROMPTS[2]})])
        grown = rt.context(session_id).estimate
        assert grown.source is EstimateSource.MEASURED_PLUS_ESTIMATE
        assert grown.reason.endswith("(calibrated on 2 requests)")


@pytest.mark.parametrize("scale", [0.2, 10.0])
def test_a_wild_tokenizer_is_held_inside_the_bounds(
    scale: float, fake_openai: FakeOpenAIServer, tmp_path: Path, workdir: Path
) -> None:
    fake_openai.token_scale = scale
    with open_runtime(tmp_path, workdir, fake_openai.base_url) as rt:
        session = rt.new_session()
        list(session.send(PROMPTS[0]))
        session.rewind(0)
        view = session.context()
    low, high = CALIBRATION_BOUNDS
    assert low * view.layers.total - 1 <= view.estimate.total <= high * view.layers.total + 1


def test_summary_replies_calibrate_a_route_whose_streams_carry_no_usage(
    fake_openai: FakeOpenAIServer, tmp_path: Path, workdir: Path
) -> None:
    """llama.cpp's server sends no usage on streams, but its non-streamed summary replies carry
    it: those calibrate the route (recorded with the compaction's diagnostic)."""
    fake_openai.token_scale = 2.0
    settings = fake_settings(fake_openai.base_url, model="openai/nousage")
    with Runtime(settings, make_paths(tmp_path), workdir=workdir, clock=lambda: FIXED_NOW) as rt:
        session = rt.new_session()
        for prompt in PROMPTS:
            list(session.send(prompt))
        assert "calibrated" not in session.context().estimate.reason
        # The summary route answers with usage (the `summary` scenario), streams never do.
        # Accepted or not (this short history may not shrink), the reply's usage is recorded.
        assert rt.compact(session.id, rt.route_for("openai/summary")).requests == 1
        summary_route = rt.route_for("openai/summary")
        reason = rt.context(session.id, summary_route).estimate.reason
        assert "calibrated on 1 request" in reason, reason
        # A summary that would not shrink this short history is followed by the fallback's smaller
        # checkpoint (two diagnostics): the reply's sample is recorded once all the same.
        (sample,) = [s for d in rt.inspect(session.id).diagnostics for s in d.payload.get("calibration", ())]
        assert sample["route_id"] == summary_route.id and sample["input_tokens"] > 0


# -- what the server charges for the tool definitions ------------------------------------------------


def probes(server: FakeOpenAIServer) -> list[object]:
    """The one-token probe requests (max_tokens 1, one '.' message) the server received."""
    return [
        r
        for r in server.requests
        if r.body.get("max_tokens") == 1 and r.body.get("messages") == [{"role": "user", "content": "."}]
    ]


def test_tool_definitions_a_server_drops_are_learned_and_no_longer_counted(
    fake_openai: FakeOpenAIServer, tmp_path: Path, workdir: Path
) -> None:
    """llama.cpp's server with a chat template without tools: no usage on streams, and the tool
    definitions cost it nothing (this fake counts messages only). One probe per route learns it,
    and the estimate stops charging ~900 tokens the server never sees."""
    fake_openai.stream_usage = False
    with open_runtime(tmp_path, workdir, fake_openai.base_url) as rt:
        session = rt.new_session()
        before = session.context()
        assert before.layers.tool_schema > 500
        for prompt in PROMPTS[:2]:
            assert isinstance(list(session.send(prompt))[-1], TurnFinished)
        assert len(probes(fake_openai)) == 2  # once, with and without the tools: not every turn
        (charge,) = [
            e.payload["tool_charge"] for e in rt.parts.store.events(session.id) if "tool_charge" in e.payload
        ]
        assert charge["real"] == 0 and charge["local"] == before.layers.tool_schema
        session_id = session.id
    with open_runtime(tmp_path, workdir, fake_openai.base_url) as rt:  # it survives a restart
        view = rt.open_session(session_id).context()
        assert "tool definitions measured at 0%" in view.estimate.reason, view.estimate.reason
        assert view.estimate.total <= view.layers.total - view.layers.tool_schema + 5
        fake_openai.reset()
        updates = list(rt.open_session(session_id).send(PROMPTS[2]))
    report = next(u for u in updates if isinstance(u, ContextUpdated)).report
    real = fake_openai.chat_requests[0].prompt_tokens
    assert real is not None
    # The text is still uncalibrated here (no summary taught it), but the tools no longer count:
    # the error is less than half of what charging them would make it.
    uncalibrated = report.layers.total
    assert abs(report.estimate.total - real) < abs(uncalibrated - real) / 2, (report.estimate, real)
    assert probes(fake_openai) == []  # measured already


def test_a_server_that_counts_the_tools_keeps_them_counted(
    fake_openai: FakeOpenAIServer, tmp_path: Path, workdir: Path
) -> None:
    fake_openai.stream_usage = False
    fake_openai.token_scale = 1.0  # the whole request, tool schemas included
    with open_runtime(tmp_path, workdir, fake_openai.base_url) as rt:
        session = rt.new_session()
        list(session.send(PROMPTS[0]))
        (charge,) = [
            e.payload["tool_charge"] for e in rt.parts.store.events(session.id) if "tool_charge" in e.payload
        ]
        assert charge["real"] > charge["local"] * 0.5
        view = session.context()
        assert view.estimate.total > view.layers.total - view.layers.tool_schema + charge["real"] // 2


def test_no_probe_when_streams_report_usage_or_the_server_reports_none(
    fake_openai: FakeOpenAIServer, tmp_path: Path, workdir: Path
) -> None:
    with open_runtime(tmp_path, workdir, fake_openai.base_url) as rt:  # usage on streams
        session = rt.new_session()
        list(session.send(PROMPTS[0]))
        assert probes(fake_openai) == []
    settings = fake_settings(fake_openai.base_url, model="openai/nousage")
    with Runtime(settings, make_paths(tmp_path / "b"), workdir=workdir, clock=lambda: FIXED_NOW) as rt:
        session = rt.new_session()
        for prompt in PROMPTS[:3]:
            assert isinstance(list(session.send(prompt))[-1], TurnFinished)
        # No usage anywhere: one attempt (recorded as not measured), never again this session.
        assert len(probes(fake_openai)) == 1
        (charge,) = [
            e.payload["tool_charge"] for e in rt.parts.store.events(session.id) if "tool_charge" in e.payload
        ]
        assert charge["real"] is None
        assert "tool definitions" not in session.context().estimate.reason

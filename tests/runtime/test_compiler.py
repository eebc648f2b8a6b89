"""Tests the context compiler: layers, baselines and route isolation (SPEC X-5..X-8, B-5..B-9, R-2)."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, replace
from pathlib import Path

import pytest

from foya_tui.runtime.context.compiler import ContextCompiler
from foya_tui.runtime.context.tracker import EstimateSource
from foya_tui.runtime.model import EventKind, NewEvent
from foya_tui.runtime.runtime import Runtime
from foya_tui.settings import ModelSettings, Settings
from tests.conftest import FIXED_NOW


def turn(session, text: str) -> list:
    return list(session.send(text))


def append(runtime: Runtime, session_id: str, kind: EventKind, **payload) -> int:
    return runtime.parts.store.append(session_id, [NewEvent(kind, payload)])[0].seq


def test_first_request_is_a_full_estimate_split_into_layers(runtime: Runtime) -> None:
    session = runtime.new_session()
    append(runtime, session.id, EventKind.USER_MESSAGE, text="first question")
    append(runtime, session.id, EventKind.ASSISTANT_MESSAGE, text="first answer", reasoning="hidden thoughts")
    append(runtime, session.id, EventKind.USER_MESSAGE, text="second question")
    view = session.context()
    assert view.messages[0]["role"] == "system"
    assert [m["content"] for m in view.messages[1:]] == ["first question", "first answer", "second question"]
    assert "hidden thoughts" not in str(view.messages)  # SPEC X-8
    assert view.anchor_seq == 3 and view.through_seq == 3
    assert view.layers.history > 0 and view.layers.working_set > 0 and view.layers.pinned > 0
    assert view.layers.tool_schema > 0 and view.layers.native_state == 0  # the direct tools (SPEC X-9)
    assert "read_file" in [tool["function"]["name"] for tool in view.tools]
    assert view.estimate.source is EstimateSource.ESTIMATE
    assert view.estimate.total == view.layers.total
    with pytest.raises(FrozenInstanceError):
        view.through_seq = 0  # type: ignore[misc]


def test_simulator_usage_matches_the_local_count(runtime: Runtime) -> None:
    session = runtime.new_session()
    before = session.context()  # nothing yet: pinned only
    updates = turn(session, "hello")
    first_context = next(u for u in updates if type(u).__name__ == "ContextUpdated")
    finished = updates[-1]
    assert first_context.report.estimate.total == finished.usage.input_tokens
    assert before.layers.working_set == 0


def test_after_a_reply_the_figure_is_measured(runtime: Runtime) -> None:
    session = runtime.new_session()
    finished = turn(session, "hello")[-1]
    view = session.context()
    assert view.estimate.source is EstimateSource.MEASURED
    assert view.estimate.total == finished.usage.total_tokens


def test_new_messages_are_estimated_on_top_of_the_measurement(runtime: Runtime) -> None:
    session = runtime.new_session()
    finished = turn(session, "hello")[-1]
    append(runtime, session.id, EventKind.USER_MESSAGE, text="a follow-up question with several words")
    view = session.context()
    assert view.estimate.source is EstimateSource.MEASURED_PLUS_ESTIMATE
    added = view.estimate.total - finished.usage.total_tokens
    assert 5 < added < 20
    # And the provider agrees within a few tokens when the request is really sent.
    real = turn(session, "another")  # sends (follow-up + another): compare its own first compile
    context = next(u for u in real if type(u).__name__ == "ContextUpdated")
    assert abs(context.report.estimate.total - real[-1].usage.input_tokens) <= 8


def test_b6_floor_uses_prompt_plus_completion(runtime: Runtime) -> None:
    session = runtime.new_session()
    user = append(runtime, session.id, EventKind.USER_MESSAGE, text="q")
    append(runtime, session.id, EventKind.ASSISTANT_MESSAGE, text="a")
    view = session.context()
    append(
        runtime,
        session.id,
        EventKind.PROVIDER_USAGE,
        route_id=session.route.id,
        through_seq=user,
        revision=view.revision,
        fixed_tokens=view.layers.fixed,
        usage={"input_tokens": 1000, "output_tokens": 50, "total_tokens": 900},  # a provider's odd total
    )
    assert session.context().estimate.total == 1050


def test_missing_usage_falls_back_to_a_full_estimate(runtime: Runtime) -> None:
    session = runtime.new_session()
    user = append(runtime, session.id, EventKind.USER_MESSAGE, text="q")
    append(runtime, session.id, EventKind.ASSISTANT_MESSAGE, text="a")
    append(
        runtime, session.id, EventKind.PROVIDER_USAGE, route_id=session.route.id, through_seq=user, usage=None
    )
    view = session.context()
    assert view.estimate.source is EstimateSource.ESTIMATE and "no usage" in view.estimate.reason


def test_first_item_after_the_baseline_must_be_the_reply(runtime: Runtime) -> None:
    session = runtime.new_session()
    turn(session, "hello")
    baseline = session.context()
    # Simulate a request whose reply never arrived: usage recorded, then a user message.
    append(
        runtime,
        session.id,
        EventKind.PROVIDER_USAGE,
        route_id=session.route.id,
        through_seq=baseline.through_seq,
        revision=baseline.revision,
        fixed_tokens=baseline.layers.fixed,
        usage={"input_tokens": 10, "output_tokens": 1, "total_tokens": 11},
    )
    append(runtime, session.id, EventKind.USER_MESSAGE, text="next")
    view = session.context()
    assert view.estimate.source is EstimateSource.ESTIMATE and "not its reply" in view.estimate.reason


def test_rewind_invalidates_the_baseline_and_the_messages(runtime: Runtime) -> None:
    session = runtime.new_session()
    turn(session, "first")
    kept = session.context().through_seq
    turn(session, "second")
    assert session.context().estimate.source is EstimateSource.MEASURED
    append(runtime, session.id, EventKind.REWIND, to_seq=kept)
    view = session.context()
    assert [m["content"] for m in view.messages if m["role"] == "user"] == ["first"]
    assert view.estimate.source is EstimateSource.ESTIMATE and "rewritten" in view.estimate.reason


def test_route_switch_never_reuses_the_old_baseline(runtime: Runtime) -> None:
    """SPEC R-2 / B-9: after a switch the meter restarts from an estimate; switching back restores it."""
    session = runtime.new_session()
    turn(session, "hello")
    small = session.route
    session.switch_route(runtime.route_for("foya-sim/large"))
    view = session.context()
    assert (
        view.estimate.source is EstimateSource.ESTIMATE and "no usage on this route" in view.estimate.reason
    )
    assert view.budget.window == 32_768 and view.budget.reserve_basis == "first request"
    session.switch_route(small)
    assert session.context().estimate.source is EstimateSource.MEASURED


def test_a_smaller_window_is_preflighted_without_compacting(runtime: Runtime) -> None:
    session = runtime.new_session(runtime.route_for("foya-sim/large"))
    append(runtime, session.id, EventKind.USER_MESSAGE, text="word " * 7000)
    session.switch_route(runtime.route_for("foya-sim/small"))
    view = session.context()
    # SPEC T-4: the message alone is over half of the small route's input budget, so the model
    # sees it cut (not the whole 7,000 words) and the request fits without compacting anything.
    (event,) = runtime.parts.store.events(session.id)
    assert view.shortened_messages == (event.seq,) and view.verdict == "ok"
    assert view.estimate.total <= view.budget.high_water
    assert event.kind is EventKind.USER_MESSAGE  # nothing else written


def test_fixed_context_growth_is_added_to_the_measurement(
    tmp_path: Path, workdir: Path, runtime: Runtime
) -> None:
    session = runtime.new_session()
    finished = turn(session, "hello")[-1]
    grown = Settings(retry_backoff=0.0, system_prompt="You are Foya. " * 50)
    compiler = ContextCompiler(
        runtime.parts.store, grown, workdir=workdir, clock=lambda: FIXED_NOW, registry=runtime.parts.registry
    )
    view = compiler.compile(session.id, session.route)
    assert view.estimate.source is EstimateSource.MEASURED_PLUS_ESTIMATE
    assert view.estimate.total > finished.usage.total_tokens + 100


def test_model_overrides_and_unknown_windows(workdir: Path, runtime: Runtime) -> None:
    settings = Settings(models={"acme/brainy": ModelSettings(window=50_000, max_input=20_000)})
    compiler = ContextCompiler(runtime.parts.store, settings, workdir=workdir, clock=lambda: FIXED_NOW)
    session = runtime.new_session()
    known = compiler.compile(session.id, replace(session.route, model="acme/brainy", protocol="acme"))
    assert known.budget.window == 50_000 and known.budget.input_budget == 20_000 and not known.notices
    unknown = compiler.compile(session.id, replace(session.route, model="acme/mystery", protocol="acme"))
    assert unknown.budget.window is None and unknown.budget.high_water == 32_768
    assert "window unknown" in unknown.notices[0]


def test_incremental_compiles_equal_a_fresh_compile(workdir: Path, runtime: Runtime) -> None:
    session = runtime.new_session()
    for i in range(3):
        turn(session, f"message {i}")
        append(
            runtime,
            session.id,
            EventKind.ASSISTANT_MESSAGE,
            text="",
            tool_calls=[{"id": "c1", "name": "read_file", "arguments": "{}"}],
        )
        session.context()  # warm the incremental state at every step
    fresh = ContextCompiler(
        runtime.parts.store,
        runtime.settings,
        workdir=workdir,
        clock=lambda: FIXED_NOW,
        registry=runtime.parts.registry,
    )
    warm_view = session.context()
    fresh_view = fresh.compile(session.id, session.route)
    assert warm_view.messages == fresh_view.messages
    assert warm_view.layers == fresh_view.layers and warm_view.estimate == fresh_view.estimate
    # The trailing unanswered call got a placeholder, never a dangling call.
    assert warm_view.messages[-1]["role"] == "tool"


def test_export_projection_is_the_compiled_request(runtime: Runtime) -> None:
    session = runtime.new_session()
    turn(session, "hello")
    assert tuple(runtime.export(session.id, projection=True)) == session.context().messages


PNG = bytes.fromhex("89504e470d0a1a0a") + b"fake image body" * 10


def image_transcript(count: int = 1) -> bytes:
    import base64
    import json

    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    parts = [{"type": "text", "text": "what is in this picture?"}]
    parts += [{"type": "image_url", "image_url": {"url": url}}] * count
    return json.dumps([{"role": "user", "content": parts}]).encode()


def test_images_are_stored_as_artifacts_and_referenced(runtime: Runtime) -> None:
    info = runtime.import_transcript(image_transcript(), "pic.json")
    (event,) = runtime.parts.store.events(info.id)
    (ref,) = event.payload["attachments"]
    assert "base64" not in str(event.payload)  # SPEC H-3: no bytes in events
    assert runtime.parts.store.artifact(info.id, ref["sha256"]) == PNG and ref["size"] == len(PNG)


def test_a_model_without_image_input_gets_an_explicit_note(runtime: Runtime) -> None:
    info = runtime.import_transcript(image_transcript(), "pic.json")
    view = runtime.context(info.id)  # the simulator declares no image input
    content = view.messages[1]["content"]
    assert isinstance(content, str) and "what is in this picture?" in content
    assert "does not accept image input" in content


def test_images_are_materialised_for_a_vision_model(workdir: Path, runtime: Runtime) -> None:
    info = runtime.import_transcript(image_transcript(), "pic.json")
    settings = Settings(models={"acme/vision": ModelSettings(window=100_000, supports_images=True)})
    compiler = ContextCompiler(runtime.parts.store, settings, workdir=workdir, clock=lambda: FIXED_NOW)
    route = runtime.route_for("acme/vision")
    view = compiler.compile(info.id, route)
    text_part, image_part = view.messages[1]["content"]
    assert text_part == {"type": "text", "text": "what is in this picture?"}
    assert image_part["image_url"]["url"].startswith("data:image/png;base64,")
    without = ContextCompiler(runtime.parts.store, Settings(), workdir=workdir, clock=lambda: FIXED_NOW)
    assert view.layers.working_set > without.compile(info.id, route).layers.working_set + 1_000


def test_the_per_request_image_limit_keeps_the_newest(workdir: Path, runtime: Runtime) -> None:
    info = runtime.import_transcript(image_transcript(), "a.json")
    runtime.parts.store.append(info.id, [NewEvent(EventKind.ASSISTANT_MESSAGE, {"text": "ok"})])
    second = runtime.import_transcript(image_transcript(), "b.json")
    events = runtime.parts.store.events(second.id)
    runtime.parts.store.append(info.id, [NewEvent(EventKind.IMPORTED_MESSAGE, dict(events[0].payload))])
    limit = len(PNG)  # room for exactly one image
    settings = Settings(max_image_bytes=limit, models={"acme/vision": ModelSettings(supports_images=True)})
    compiler = ContextCompiler(runtime.parts.store, settings, workdir=workdir, clock=lambda: FIXED_NOW)
    view = compiler.compile(info.id, runtime.route_for("acme/vision"))
    oldest, newest = view.messages[1]["content"], view.messages[3]["content"]
    assert "image limit" in oldest and isinstance(newest, list)


def test_a_missing_artifact_becomes_a_note(runtime: Runtime, workdir: Path) -> None:
    session = runtime.new_session()
    ref = {"sha256": "0" * 64, "mime": "image/png", "size": 10}
    append(runtime, session.id, EventKind.USER_MESSAGE, text="look", attachments=[ref])
    settings = Settings(models={"acme/vision": ModelSettings(supports_images=True)})
    compiler = ContextCompiler(runtime.parts.store, settings, workdir=workdir, clock=lambda: FIXED_NOW)
    content = compiler.compile(session.id, runtime.route_for("acme/vision")).messages[1]["content"]
    assert "missing from the artifact store" in content


def test_remote_image_urls_are_kept_as_notes_not_fetched(runtime: Runtime) -> None:
    import json

    message = {
        "role": "user",
        "content": [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}],
    }
    info = runtime.import_transcript(json.dumps([message]).encode(), "remote.json")
    content = runtime.parts.store.events(info.id)[0].payload["content"]
    assert "https://example.com/a.png" in content and "does not fetch" in content


def test_route_options_list_simulators_configured_models_and_baselines(tmp_path: Path, workdir: Path) -> None:
    from tests.conftest import make_paths

    settings = Settings(models={"openai/gpt-4.1": ModelSettings(window=1_000_000)})
    with Runtime(settings, make_paths(tmp_path), workdir=workdir, clock=lambda: FIXED_NOW) as rt:
        session = rt.new_session()
        turn(session, "hello")
        options = {option.route.model: option for option in rt.routes(session.id)}
        assert list(options) == ["foya-sim/small", "openai/gpt-4.1", "foya-sim/large", "foya-sim/native"]
        assert options["foya-sim/small"].has_baseline and not options["foya-sim/large"].has_baseline
        assert options["openai/gpt-4.1"].window == 1_000_000 and options["foya-sim/large"].window == 32_768


def test_preview_of_a_new_conversation_has_only_pinned_context(runtime: Runtime) -> None:
    view = runtime.preview_context(runtime.route_for("foya-sim/small"))
    assert view.layers.history == view.layers.working_set == 0 and view.layers.pinned > 0
    assert len(view.messages) == 1 and view.budget.input_budget == 6_144
    assert view.estimate.source is EstimateSource.ESTIMATE
    assert runtime.list_sessions() == []  # previewing creates nothing


def tool_step(runtime: Runtime, session_id: str, call_id: str, content: str) -> int:
    """Append an assistant tool call and its result; returns the result's seq."""
    call = {"id": call_id, "name": "read_file", "arguments": "{}"}
    append(runtime, session_id, EventKind.ASSISTANT_MESSAGE, text="", tool_calls=[call])
    return append(
        runtime, session_id, EventKind.TOOL_RESULT, tool_call_id=call_id, name="read_file", content=content
    )


def big(tag: str, words: int = 3_000) -> str:
    return f"BEGIN {tag}\n" + " ".join(f"{tag}{i}" for i in range(words)) + f"\nEND {tag}"


def test_large_results_are_shortened_earlier_first_newest_kept(runtime: Runtime) -> None:
    """SPEC T-1: under pressure the earlier large results shrink; the newest stays verbatim."""
    session = runtime.new_session(runtime.route_for("foya-sim/large"))
    append(runtime, session.id, EventKind.USER_MESSAGE, text="read the logs")
    seqs = [tool_step(runtime, session.id, f"call_{i}", big(f"log{i}")) for i in range(3)]
    view = session.context()
    results = [m for m in view.messages if m["role"] == "tool"]
    assert view.shortened_seqs == tuple(seqs[:2])
    for message, seq in zip(results[:2], seqs, strict=False):
        text = message["content"]
        assert text.startswith("BEGIN") and text.rstrip().endswith(message["content"].split()[-1])
        assert f"seq={seq}" in text and f'tool_call_id="{message["tool_call_id"]}"' in text
        assert 'sha256="' in text and "history_read_tool_result" in text
    assert results[2]["content"] == big("log2")  # the newest, verbatim
    assert "history_read_tool_result" in [tool["function"]["name"] for tool in view.tools]  # SPEC X-9
    stored = [e for e in runtime.parts.store.events(session.id) if e.kind is EventKind.TOOL_RESULT]
    assert [e.payload["content"] for e in stored] == [big(f"log{i}") for i in range(3)]  # SPEC H-2
    assert view.layers.total < 0.8 * view.budget.input_budget


def test_the_newest_result_is_capped_too_when_it_alone_is_too_big(runtime: Runtime) -> None:
    session = runtime.new_session()  # foya-sim/small: handoff at 4,300 tokens
    append(runtime, session.id, EventKind.USER_MESSAGE, text="read it")
    seq = tool_step(runtime, session.id, "call_x", big("huge", 6_000))
    view = session.context()
    assert view.shortened_seqs == (seq,)
    assert view.verdict == "ok" and "shortened" in view.notices[-1]


def test_nothing_is_shortened_without_pressure(runtime: Runtime) -> None:
    session = runtime.new_session(runtime.route_for("foya-sim/large"))
    append(runtime, session.id, EventKind.USER_MESSAGE, text="read it")
    tool_step(runtime, session.id, "call_1", big("small", 2_500))
    view = session.context()
    assert view.shortened_seqs == ()
    assert "history_read_tool_result" not in [tool["function"]["name"] for tool in view.tools]


def test_shortening_changes_the_revision_so_baselines_fall_back(runtime: Runtime) -> None:
    session = runtime.new_session()
    append(runtime, session.id, EventKind.USER_MESSAGE, text="read it")
    tool_step(runtime, session.id, "call_1", big("mid", 1_100))
    before = session.context()
    tool_step(runtime, session.id, "call_2", big("more", 1_100))
    after = session.context()
    assert before.shortened_seqs == () and after.shortened_seqs != ()
    assert before.revision != after.revision

"""Tests the small window's floor (issue 17 item 5): brief tool schemas with the recall tools
deferred behind tool_search (SPEC X-9), a recent window that fits the budget (K-3, K-4), and a
summary asked for a length that scales with the window (C-12 judges it). A large window keeps
everything as it was."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from foya_tui.cli import format_context
from foya_tui.runtime.compaction.summary import SummaryContext, request_messages
from foya_tui.runtime.context.floor import brief_tool_schemas, recent_tool_turns, summary_target_tokens
from foya_tui.runtime.model import EventKind
from foya_tui.runtime.providers.simulator.summary import compaction_input, summarise
from foya_tui.runtime.providers.summary_format import requested_length
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.tokens import count_tools, counter_for_model
from foya_tui.runtime.tools import TOOL_SEARCH, ToolContext, default_registry
from foya_tui.runtime.tools.registry import HISTORY_EVENT_TOOL, HISTORY_SEARCH_TOOL
from foya_tui.runtime.view.ledger import Ledger
from tests.runtime.test_native_projection import commit_checkpoint, make_checkpoint
from tests.runtime.test_snip import append, body, tool_names, tool_step

SMALL, LARGE = "foya-sim/small", "foya-sim/large"


def names(schemas: list[dict[str, Any]]) -> list[str]:
    return [schema["function"]["name"] for schema in schemas]


# -- the rules (pure) ------------------------------------------------------------------------------


def test_full_schemas_stay_on_a_large_or_unknown_window_and_shrink_on_a_small_one() -> None:
    assert brief_tool_schemas(1_800, 8_192)
    assert not brief_tool_schemas(1_800, 32_768)
    assert not brief_tool_schemas(1_800, None)


def test_the_recent_window_keeps_the_newest_turn_and_older_ones_while_they_fit() -> None:
    """K-3/K-4's recent window on a 7,168-token budget: a quarter of it is 1,792 tokens."""
    assert recent_tool_turns([1_300, 1_300, 1_300], 7_168, 3) == 1
    assert recent_tool_turns([40, 50, 60, 70], 7_168, 3) == 3  # never more than the setting
    assert recent_tool_turns([5_000, 10], 7_168, 3) == 1  # the newest always, however large
    assert recent_tool_turns([1_300, 1_300, 1_300], 28_000, 3) == 3
    assert recent_tool_turns([], 7_168, 3) == 0


def test_the_summary_length_asked_for_scales_with_the_window() -> None:
    assert summary_target_tokens(8_192, 2_048) == 491
    assert summary_target_tokens(32_768, 2_048) == 1_966
    assert summary_target_tokens(131_072, 2_048) == 2_048
    assert summary_target_tokens(None, 2_048) == 2_048
    assert summary_target_tokens(2_048, 2_048) == 300  # five sections need some room


# -- brief tool schemas (X-9) -----------------------------------------------------------------------


def test_brief_schemas_keep_what_a_call_is_checked_against_and_cost_far_less() -> None:
    registry = default_registry()
    counter = counter_for_model(SMALL)
    full = registry.visible_schemas(include_history_read=True, include_recall=True)
    brief = registry.visible_schemas(include_history_read=True, include_recall=True, brief=True)
    by_name = {schema["function"]["name"]: schema["function"] for schema in brief}
    for schema in full:
        spec = schema["function"]
        if spec["name"] not in by_name:
            continue
        short = by_name[spec["name"]]
        assert len(short["description"]) < len(spec["description"])
        assert short["parameters"]["required"] == spec["parameters"]["required"]
        for name, parameter in spec["parameters"]["properties"].items():
            kept = short["parameters"]["properties"][name]
            assert "description" not in kept
            assert kept == {key: value for key, value in parameter.items() if key != "description"}
    assert count_tools(brief, counter) < count_tools(full, counter) * 0.5


def test_a_small_window_defers_the_recall_tools_until_tool_search_loads_them(tmp_path: Path) -> None:
    registry = default_registry()
    context = ToolContext(workdir=tmp_path, session_id="s1", store=None)
    shown = names(registry.visible_schemas(include_recall=True, brief=True))
    assert HISTORY_SEARCH_TOOL not in shown and HISTORY_EVENT_TOOL not in shown
    assert shown[-1] == TOOL_SEARCH
    found = registry.call(TOOL_SEARCH, '{"query": "history"}', context)
    assert set(found.metadata["activated"]) == {HISTORY_SEARCH_TOOL, HISTORY_EVENT_TOOL}
    loaded = names(registry.visible_schemas(found.metadata["activated"], include_recall=True, brief=True))
    assert HISTORY_SEARCH_TOOL in loaded and HISTORY_EVENT_TOOL in loaded
    # Full schemas show the recall tools at once, and with no deferred tool there is no tool_search.
    full = names(registry.visible_schemas(include_recall=True))
    assert HISTORY_SEARCH_TOOL in full and TOOL_SEARCH not in full
    # Without a checkpoint there is nothing to recall, so nothing waits for tool_search either.
    assert TOOL_SEARCH not in names(registry.visible_schemas(brief=True))


def test_requests_on_a_small_route_carry_brief_schemas_and_a_large_route_full_ones(runtime: Runtime) -> None:
    """After a checkpoint (the recall tools are due): foya-sim/small sends tool_search in their
    place and short descriptions; foya-sim/large sends everything in full, as before."""
    seen: dict[str, list[str]] = {}
    for model in (SMALL, LARGE):
        route = runtime.route_for(model)
        session = runtime.new_session(route)
        append(runtime, session.id, EventKind.USER_MESSAGE, text="look around")
        tool_step(runtime, session.id, f"c_{model[-5:]}", body("read"))
        append(runtime, session.id, EventKind.USER_MESSAGE, text="go on")
        checkpoint = make_checkpoint(runtime, session.id, route, through_seq=3, anchor_seq=4)
        commit_checkpoint(runtime, checkpoint)
        view = runtime.parts.compiler.compile(session.id, route)
        seen[model] = tool_names(view)
        assert runtime.parts.compiler.brief_tools(route) is (model == SMALL)
        read_file = next(tool for tool in view.tools if tool["function"]["name"] == "read_file")
        described = "description" in read_file["function"]["parameters"]["properties"]["path"]
        assert described is (model == LARGE)
    assert TOOL_SEARCH in seen[SMALL] and HISTORY_SEARCH_TOOL not in seen[SMALL]
    assert HISTORY_SEARCH_TOOL in seen[LARGE] and TOOL_SEARCH not in seen[LARGE]


# -- the recent window (K-3, K-4) ------------------------------------------------------------------


def test_on_a_small_window_snip_may_take_every_turn_but_the_newest_large_one(runtime: Runtime) -> None:
    """Four reads of ~1,500 tokens each: on 8K the recent window is the newest turn alone, so the
    three before it are candidates; on 32K the three newest stay recent, as the setting says."""
    found, reads = {}, {}
    for model in (SMALL, LARGE):
        route = runtime.route_for(model)
        session = runtime.new_session(route)
        append(runtime, session.id, EventKind.USER_MESSAGE, text="read four files")
        reads[model] = [tool_step(runtime, session.id, f"c{n}", body(f"r{n}", 700)) for n in range(4)]
        found[model] = sorted(c.seq for c in runtime.parts.compiler.snip_candidates(session.id, route))
    assert found[SMALL] == reads[SMALL][:3]
    assert found[LARGE] == reads[LARGE][:1]


# -- the summary's length (C-12) --------------------------------------------------------------------


def test_a_summary_request_states_its_length_and_the_simulator_keeps_to_it() -> None:
    transcript = [
        f'[seq {n}] assistant → read_file {{"path": "src/module_{n}.py"}}' for n in range(1, 200, 2)
    ] + [f"[seq {n}] tool read_file (ok): {'def f(x): return x ' * 20}" for n in range(2, 201, 2)]
    transcript.sort(key=lambda line: int(line.split()[1].rstrip("]")))
    counter = counter_for_model(SMALL)
    sizes = {}
    for length in (None, 300):
        messages = request_messages(
            from_seq=1,
            through_seq=200,
            transcript=transcript,
            previous=(),
            ledger=Ledger(),
            context=SummaryContext(length=length),
        )
        assert requested_length(messages[-1]["content"]) == length
        sizes[length] = counter.count(summarise(compaction_input(messages), counter))
    assert sizes[300] <= 300 < sizes[None]


def test_a_message_shown_cut_keeps_its_reader_on_a_small_window() -> None:
    """SPEC T-4: a message cut around a pointer to history_read comes with that tool, never deferred;
    history_search, which no pointer names, still waits for tool_search."""
    registry = default_registry()
    shown = names(registry.visible_schemas(include_recall=True, include_event_reader=True, brief=True))
    assert HISTORY_EVENT_TOOL in shown and HISTORY_SEARCH_TOOL not in shown and TOOL_SEARCH in shown


def test_foya_context_says_when_the_tool_definitions_are_brief(runtime: Runtime) -> None:
    for model in (SMALL, LARGE):
        report = runtime.new_session(runtime.route_for(model)).context().report()
        assert report.brief_tools is (model == SMALL)
        said = "brief descriptions: the window is small" in format_context(report)
        assert said is (model == SMALL)

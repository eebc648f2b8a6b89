"""Tests compaction end to end: planner boundaries (C-3, C-4), Checkpoint V3 (C-5..C-7), summary
validation and repair (C-8, C-9), the ledger (K-12), segments (C-10), requests that never overflow
(C-13), acceptance (C-12), fingerprints and diagnostics (C-14, C-15), triggers (C-2), undo, rewind
(H-4, P-6) and the CLI."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from foya_tui.cli import main
from foya_tui.cli_json import inspect_json
from foya_tui.runtime.compaction.attempt import CompactionError, Proposal
from foya_tui.runtime.compaction.failures import Outcome, Trigger
from foya_tui.runtime.compaction.planner import NothingToCompact, Plan, plan_compaction
from foya_tui.runtime.compaction.summary import missing_mentions, summary_problems
from foya_tui.runtime.model import Event, EventKind, NewEvent
from foya_tui.runtime.providers.catalog import SIMULATOR_MODELS
from foya_tui.runtime.providers.client import CANCELLED_COMPLETION, CancelToken, Completion, ProviderRequest
from foya_tui.runtime.providers.errors import FailureKind, ProviderError, ProviderFailure
from foya_tui.runtime.providers.summary_format import IMAGE_PLACEHOLDER, SECTION_HEADINGS
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.session import RewindError
from foya_tui.runtime.tokens import count_messages
from foya_tui.runtime.updates import CompactionFinished, CompactionProgressed, TurnFailed, TurnFinished
from foya_tui.runtime.view.checkpoint import (
    MAX_MESSAGES,
    Checkpoint,
    CheckpointError,
    Phase,
    parse_checkpoint,
)
from foya_tui.runtime.view.groups import units_of
from foya_tui.runtime.view.history import MessageLog
from foya_tui.runtime.view.ledger import extract_ledger, is_directive
from foya_tui.settings import CompactionSettings, Settings
from tests.conftest import FIXED_NOW, make_paths
from tests.fakes.scripted import ScriptedClient

# -- helpers -----------------------------------------------------------------------------------


def summary(goal: str = "Fix the build.", critical: str = "Paths: none.") -> str:
    bodies = [goal, "- Read the code [seq 1]", "- None recorded.", "- Continue.", critical]
    return "\n\n".join(f"{heading}\n{body}" for heading, body in zip(SECTION_HEADINGS, bodies, strict=True))


def tool_turn(index: int, size: int = 1200, call_id: str | None = None) -> list[dict[str, Any]]:
    """One user request answered by a tool group and a reply (an OpenAI-format transcript piece)."""
    call = call_id or f"call_{index}"
    return [
        {"role": "user", "content": f"request {index}: look at module_{index}.py"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call,
                    "type": "function",
                    "function": {
                        "name": "read_file",
                        "arguments": json.dumps({"path": f"module_{index}.py"}),
                    },
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": call,
            "content": f"def f{index}():\n" + "    x = 1\n" * (size // 10),
        },
        {"role": "assistant", "content": f"module_{index}.py defines f{index}."},
    ]


def import_session(runtime: Runtime, messages: Sequence[dict[str, Any]]) -> str:
    return runtime.import_transcript(json.dumps(list(messages)).encode(), "t.json").id


def append_turn(runtime: Runtime, session_id: str, index: int) -> None:
    """A whole turn, as the session loop records it: enough new history for a checkpoint to shrink."""
    call = {"id": f"later_{index}", "name": "read_file", "arguments": json.dumps({"path": f"m{index}.py"})}
    runtime.parts.store.append(
        session_id,
        [
            NewEvent(EventKind.USER_MESSAGE, {"text": f"request {index}: look at m{index}.py"}),
            NewEvent(EventKind.ASSISTANT_MESSAGE, {"text": "", "tool_calls": [call]}),
            NewEvent(
                EventKind.TOOL_RESULT,
                {"tool_call_id": call["id"], "name": "read_file", "content": "    y = 2\n" * 60},
            ),
            NewEvent(EventKind.ASSISTANT_MESSAGE, {"text": f"m{index}.py assigns y."}),
        ],
    )


def scripted_runtime(tmp_path: Path, workdir: Path, client: ScriptedClient, **compaction: Any) -> Runtime:
    settings = Settings(retry_backoff=0.0, compaction=CompactionSettings(**compaction))
    return Runtime(settings, make_paths(tmp_path), client=client, workdir=workdir, clock=lambda: FIXED_NOW)


def raw_rows(runtime: Runtime, session_id: str) -> list[tuple]:
    return runtime.parts.store._sql.execute_sql(
        "SELECT seq, kind, payload, created_at FROM event WHERE session_id = ? ORDER BY seq", (session_id,)
    ).fetchall()


def projection_is_well_formed(messages: Sequence[Any]) -> bool:
    """Every assistant tool call is answered right after it, and no result is orphaned (C-4)."""
    pending: list[str] = []
    for message in messages:
        if message["role"] == "tool":
            if message.get("tool_call_id") not in pending:
                return False
            pending.remove(message["tool_call_id"])
            continue
        if pending:
            return False
        pending = [call["id"] for call in message.get("tool_calls") or ()]
    return not pending


@pytest.fixture
def big_readme(workdir: Path) -> Path:
    """A README the simulator reads in full: each turn then costs ~1,500 tokens of context."""
    lines = [f"Line {n}: the parser handles case {n} by normalising its input first." for n in range(120)]
    (workdir / "README.md").write_text("# Demo project\n\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return workdir


@pytest.fixture
def client() -> ScriptedClient:
    return ScriptedClient()


@pytest.fixture
def scripted(tmp_path: Path, workdir: Path, client: ScriptedClient) -> Iterator[Runtime]:
    with scripted_runtime(tmp_path, workdir, client) as runtime:
        yield runtime


# -- planner (C-3, C-4) --------------------------------------------------------------------------


def _log(messages: Sequence[dict[str, Any]]) -> MessageLog:
    log = MessageLog()
    for seq, message in enumerate(messages, start=1):
        log.add(Event("s", seq, EventKind.IMPORTED_MESSAGE, _imported(message), "t"))
    return log


def _imported(message: dict[str, Any]) -> dict[str, Any]:
    payload = dict(message)
    calls = payload.pop("tool_calls", None)
    if calls:
        payload["tool_calls"] = [
            {"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
            for c in calls
        ]
    return payload


def test_units_keep_parallel_batches_and_repeated_ids_whole() -> None:
    parallel = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "grep", "arguments": "{}"}},
        ],
    }
    messages = [
        *tool_turn(1, call_id="dup"),
        *tool_turn(2, call_id="dup"),  # a transcript that reuses a call id
        {"role": "user", "content": "now both"},
        parallel,
        {"role": "tool", "tool_call_id": "b", "content": "B"},
        {"role": "tool", "tool_call_id": "a", "content": "A"},
        {"role": "assistant", "content": "done"},
    ]
    log = _log(messages)
    units = units_of(log.entries)
    group = next(unit for unit in units if unit.first_seq == 10)
    assert (group.first_seq, group.last_seq) == (10, 12)  # the batch and both results, one unit
    assert [(u.first_seq, u.last_seq) for u in units[:4]] == [(1, 1), (2, 3), (4, 4), (5, 5)]
    assert [(u.first_seq, u.last_seq) for u in units[4:7]] == [(6, 7), (8, 8), (9, 9)]


def _anchor_seq(log: MessageLog) -> int:
    assert log.anchor_index is not None
    return log.entries[log.anchor_index].seq


def test_an_open_group_never_enters_the_prefix() -> None:
    messages = [*tool_turn(1), {"role": "user", "content": "go"}, *tool_turn(2)[1:2]]  # calls, no result
    log = _log(messages)
    assert log.open_group_seq == 6
    plan = plan_compaction(
        units_of(log.entries, 6), anchor_seq=_anchor_seq(log), covered_through=0,
        phase=Phase.STANDALONE, mid_turn_min_steps=3,
    )  # fmt: skip
    assert isinstance(plan, Plan) and plan.through_seq < 6


def test_pre_turn_stops_before_the_anchor_and_mid_turn_keeps_the_latest_step() -> None:
    messages = [*tool_turn(1), *tool_turn(2)]
    for step in range(3, 7):
        messages += tool_turn(step)[1:3]
    log = _log(messages)
    anchor = log.entries[log.anchor_index].seq
    pre = plan_compaction(
        units_of(log.entries), anchor_seq=anchor, covered_through=0,
        phase=Phase.PRE_TURN, mid_turn_min_steps=3,
    )  # fmt: skip
    assert isinstance(pre, Plan) and pre.through_seq == anchor - 1
    mid = plan_compaction(
        units_of(log.entries), anchor_seq=anchor, covered_through=0,
        phase=None, mid_turn_min_steps=3,
    )  # fmt: skip
    assert isinstance(mid, Plan) and mid.phase is Phase.MID_TURN
    last_step = units_of(log.entries)[-1]
    assert mid.through_seq == last_step.first_seq - 1  # the latest complete step stays verbatim
    assert mid.anchor_seq == anchor
    too_few = plan_compaction(
        units_of(log.entries), anchor_seq=anchor, covered_through=0,
        phase=Phase.MID_TURN, mid_turn_min_steps=9,
    )  # fmt: skip
    assert isinstance(too_few, NothingToCompact) and "9 complete steps" in too_few.reason
    covered = plan_compaction(
        units_of(log.entries), anchor_seq=anchor, covered_through=mid.through_seq,
        phase=None, mid_turn_min_steps=3,
    )  # fmt: skip
    assert isinstance(covered, NothingToCompact)


# -- Checkpoint V3 (C-5..C-7, P-4) -----------------------------------------------------------------


def _checkpoint(runtime: Runtime, client: ScriptedClient) -> Checkpoint:
    session_id = import_session(runtime, [*tool_turn(1), *tool_turn(2), *tool_turn(3)])
    result = runtime.compact(session_id)
    assert result.outcome is Outcome.ACCEPTED, result.reason
    assert result.checkpoint is not None
    return result.checkpoint


def test_checkpoint_id_covers_every_key_field_and_parsing_is_strict(
    scripted: Runtime, client: ScriptedClient
) -> None:
    checkpoint = _checkpoint(scripted, client)
    assert parse_checkpoint(checkpoint.serialised()) == checkpoint
    for changed in (
        replace(checkpoint, model="other/model"),
        replace(checkpoint, route_id="elsewhere"),
        replace(checkpoint, previous_id="0" * 64),
        replace(checkpoint, source_digest="f" * 64),
        replace(checkpoint, through_seq=checkpoint.through_seq - 1),
    ):
        assert changed.with_id().id != checkpoint.id
        with pytest.raises(CheckpointError):
            parse_checkpoint(changed.to_payload())  # the old id no longer matches (C-6)
    payload = checkpoint.to_payload()
    for key in ("version", "id", "model", "created_at", "projection_kind"):
        broken = {k: v for k, v in payload.items() if k != key}
        with pytest.raises(CheckpointError):
            parse_checkpoint(broken)
    with pytest.raises(CheckpointError, match="older formats are not migrated"):
        parse_checkpoint({**payload, "version": 2})
    with pytest.raises(CheckpointError, match="at least one segment"):
        parse_checkpoint(replace(checkpoint, segments=()).with_id().to_payload())
    many = replace(checkpoint, kept_messages=({"role": "user", "content": "x"},) * MAX_MESSAGES).with_id()
    with pytest.raises(CheckpointError, match="4096"):
        parse_checkpoint(many.to_payload())


# -- summaries (C-8, C-9) and the ledger (K-12) -----------------------------------------------------


def test_summary_validation_names_every_problem() -> None:
    assert summary_problems(summary(), "stop") == []
    assert any("length" in p for p in summary_problems(summary(), "length"))
    swapped = (
        summary().replace("## Goal", "## X").replace("## Progress", "## Goal").replace("## X", "## Progress")
    )
    assert any("order" in p for p in summary_problems(swapped, "stop"))
    assert any("missing" in p for p in summary_problems(summary().replace("## Next Steps", ""), "stop"))
    empty = summary().replace("- Continue.", "")
    assert any("Next Steps has no content" in p for p in summary_problems(empty, "stop"))
    assert any("fence" in p for p in summary_problems(summary(critical="```py\nx = 1"), "stop"))
    assert any("truncation" in p for p in summary_problems(summary(critical="and then…"), "stop"))
    assert any("before ## Goal" in p for p in summary_problems("Sure!\n" + summary(), "stop"))


def test_a_summary_has_exactly_the_five_sections() -> None:
    """SPEC C-8: an extra section or a repeated one fails validation, wherever it stands; a
    sub-heading, or a heading inside a code fence, is content."""
    extra = summary() + "\n\n## Open Questions\n- none"
    assert summary_problems(extra, "stop") == [
        "section(s) other than the five: ## Open Questions (use exactly " + ", ".join(SECTION_HEADINGS) + ")"
    ]
    early = summary().replace("## Progress", "## Notes\n- a note\n\n## Progress")
    assert any("## Notes" in p for p in summary_problems(early, "stop"))
    repeated = summary() + "\n\n## Progress\n- more progress [seq 1]"
    assert summary_problems(repeated, "stop") == [
        "repeated section(s): ## Progress (each appears exactly once)"
    ]
    twice = summary().replace("## Key Decisions", "## Goal\nagain\n\n## Key Decisions")
    assert any("repeated section(s): ## Goal" in p for p in summary_problems(twice, "stop"))
    fenced = summary(critical="```md\n## Not a section\n```")
    nested = summary(critical="### Paths\n- src/app.py")
    assert summary_problems(fenced, "stop") == [] and summary_problems(nested, "stop") == []


def test_a_summary_with_an_extra_section_is_repaired(tmp_path: Path, workdir: Path) -> None:
    client = ScriptedClient(summaries=[summary() + "\n\n## Summary\nAll fine.", summary()])
    with scripted_runtime(tmp_path, workdir, client) as runtime:
        session_id = import_session(runtime, [*tool_turn(1), *tool_turn(2), *tool_turn(3)])
        result = runtime.compact(session_id)
        assert result.outcome is Outcome.ACCEPTED and result.checkpoint is not None
        assert (
            result.checkpoint.producer == "repaired"
            and "## Summary" not in result.checkpoint.segments[0].text
        )
        repair = client.summary_requests[1].messages[1]["content"]
        assert "section(s) other than the five: ## Summary" in repair


def _events(messages: Sequence[dict[str, Any]]) -> list[Event]:
    return [
        Event("s", seq, EventKind.IMPORTED_MESSAGE, _imported(m), "t") for seq, m in enumerate(messages, 1)
    ]


def test_the_ledger_keeps_the_users_words_files_commands_and_errors() -> None:
    write = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "w",
                "type": "function",
                "function": {"name": "write_file", "arguments": '{"path": "src/a.py"}'},
            },
            {
                "id": "s",
                "type": "function",
                "function": {"name": "shell", "arguments": '{"command": "pytest -x"}'},
            },
        ],
    }
    messages = [
        {"role": "user", "content": "Always run the tests before you commit."},
        {"role": "user", "content": "以后不要修改 vendor 目录"},
        {"role": "user", "content": "Bitte niemals force-push."},
        {"role": "user", "content": "look at the parser"},
        write,
        {"role": "tool", "tool_call_id": "w", "content": "wrote 10 bytes"},
        {"role": "tool", "tool_call_id": "s", "content": "FAILED test_x\n[exit code 1]"},
        {"role": "user", "content": "then fix the lexer"},
    ]
    events = _events(messages)
    # imported tool results carry no is_error flag; mark the shell result failed as Foya records it
    events[6] = replace(
        events[6], payload={**events[6].payload, "is_error": True, "metadata": {"exit_code": 1}}
    )
    ledger = extract_ledger(events, 10_000)
    assert [item.text for item in ledger.directives] == [
        "Always run the tests before you commit.",
        "以后不要修改 vendor 目录",
        "Bitte niemals force-push.",
    ]
    assert [item.text for item in ledger.requests] == [
        "then fix the lexer",
        "look at the parser",
    ]  # newest first
    assert [item.text for item in ledger.files_modified] == ["src/a.py"]
    assert [item.text for item in ledger.commands] == ["pytest -x → exit 1"]
    assert ledger.errors[0].text.startswith("shell: FAILED test_x")
    assert not is_directive("look at the parser")
    # a tight budget shortens free text before dropping anything, and counts what it drops
    tight = extract_ledger(_events([{"role": "user", "content": "word " * 400}] * 6), 900)
    assert all(len(item.text) <= 600 for item in tight.requests) and tight.dropped > 0
    assert len(tight.requests) >= 2
    # incremental: a later range extends the earlier ledger
    later = extract_ledger(_events([{"role": "user", "content": "never use tabs"}]), 10_000, earlier=ledger)
    assert [item.text for item in later.directives][-1] == "never use tabs" and len(later.directives) == 4


def test_a_summary_must_mention_modified_paths_and_user_rules() -> None:
    ledger = extract_ledger(
        _events(
            [
                {"role": "user", "content": "Always keep the public API stable."},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "e",
                            "type": "function",
                            "function": {"name": "edit_file", "arguments": '{"path": "lib/api.py"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "e", "content": "1 replacement"},
            ]
        ),
        10_000,
    )
    reasons = missing_mentions(summary(), ledger)
    assert any("lib/api.py" in r for r in reasons) and any("public API stable" in r for r in reasons)
    rephrased = summary(critical="Edited lib/api.py. The user said: always keep the public API stable!")
    assert missing_mentions(rephrased, ledger) == []


# -- the service with a scripted summariser ----------------------------------------------------------


def test_an_invalid_summary_is_repaired_once_then_accepted(tmp_path: Path, workdir: Path) -> None:
    client = ScriptedClient(summaries=["## Goal\nonly a goal", summary()])
    with scripted_runtime(tmp_path, workdir, client) as runtime:
        session_id = import_session(runtime, [*tool_turn(1), *tool_turn(2), *tool_turn(3)])
        result = runtime.compact(session_id)
        assert result.outcome is Outcome.ACCEPTED and result.requests == 2
        assert result.checkpoint is not None and result.checkpoint.producer == "repaired"
        repair = client.summary_requests[1].messages[1]["content"]
        assert "<repair>" in repair and "missing section" in repair


def test_twice_invalid_fails_open_with_a_fingerprint_that_suppresses_the_next_attempt(
    tmp_path: Path, workdir: Path
) -> None:
    client = ScriptedClient(summaries=["nonsense", Completion(summary(), "length", None)])
    with scripted_runtime(tmp_path, workdir, client) as runtime:
        session_id = import_session(runtime, [*tool_turn(1), *tool_turn(2), *tool_turn(3)])
        before = raw_rows(runtime, session_id)
        failed = runtime.compact(session_id)
        assert failed.outcome is Outcome.FAILED and "rejected twice" in failed.reason
        assert runtime.parts.compiler.checkpoint_state(session_id).current is None  # fail-open (C-14)
        report = runtime.inspect(session_id)
        assert len(report.fingerprints) == 1
        (diagnostic,) = report.diagnostics
        assert diagnostic.payload["stage"] == "summarising" and diagnostic.payload["requests"] == 2
        assert diagnostic.payload["fingerprint"] == report.fingerprints[0].fingerprint
        requests = len(client.summary_requests)
        suppressed = runtime.compact(session_id)
        assert suppressed.outcome is Outcome.SUPPRESSED and len(client.summary_requests) == requests
        assert "cannot reduce further" in suppressed.reason
        # every attempt left a diagnostic (C-15); nothing else was written
        after = raw_rows(runtime, session_id)
        assert after[: len(before)] == before
        assert {row[1] for row in after[len(before) :]} == {"compaction_diagnostic"}
        # new history changes the source: the next attempt runs, succeeds and clears fingerprints
        runtime.parts.store.append(session_id, [NewEvent(EventKind.USER_MESSAGE, {"text": "and module 4?"})])
        assert runtime.compact(session_id).outcome is Outcome.ACCEPTED
        assert runtime.inspect(session_id).fingerprints == ()


def test_at_most_sixteen_fingerprints_per_session(scripted: Runtime) -> None:
    session_id = import_session(scripted, tool_turn(1))
    for index in range(20):
        scripted.parts.compaction_store.add_fingerprint(session_id, f"fp{index:02}", "r", 16)
    kept = [f.fingerprint for f in scripted.parts.compaction_store.fingerprints(session_id)]
    assert len(kept) == 16 and "fp19" in kept and "fp00" not in kept


def test_a_rate_limited_summary_fails_without_a_fingerprint(tmp_path: Path, workdir: Path) -> None:
    limited = ProviderError(ProviderFailure(kind=FailureKind.RATE_LIMIT, detail="slow down"))
    client = ScriptedClient(summaries=[limited])
    with scripted_runtime(tmp_path, workdir, client) as runtime:
        session_id = import_session(runtime, [*tool_turn(1), *tool_turn(2)])
        result = runtime.compact(session_id)
        assert result.outcome is Outcome.FAILED and runtime.inspect(session_id).fingerprints == ()


def test_a_summary_that_does_not_shrink_the_projection_is_rejected(tmp_path: Path, workdir: Path) -> None:
    client = ScriptedClient(summaries=[summary(critical="padding " * 3000)])
    with scripted_runtime(tmp_path, workdir, client) as runtime:
        session_id = import_session(runtime, [*tool_turn(1, size=100), *tool_turn(2, size=100)])
        result = runtime.compact(session_id)
        assert result.outcome is Outcome.REJECTED and "would not shrink" in result.reason
        assert runtime.inspect(session_id).diagnostics[-1].payload["stage"] == "validating"
        assert result.tokens_after is not None and result.tokens_after >= result.tokens_before


def test_the_summariser_gets_a_placeholder_never_image_bytes(
    scripted: Runtime, client: ScriptedClient
) -> None:
    pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    image = {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is in this picture?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{pixel}"}},
        ],
    }
    session_id = import_session(scripted, [image, {"role": "assistant", "content": "a pixel"}, *tool_turn(2)])
    assert scripted.compact(session_id).outcome is Outcome.ACCEPTED
    sent = client.summary_requests[0].messages[1]["content"]
    assert IMAGE_PLACEHOLDER in sent and pixel[:20] not in sent


def test_compaction_only_appends_its_own_events(scripted: Runtime) -> None:
    session_id = import_session(scripted, [*tool_turn(1), *tool_turn(2), *tool_turn(3)])
    before = raw_rows(scripted, session_id)
    assert scripted.compact(session_id).outcome is Outcome.ACCEPTED
    after = raw_rows(scripted, session_id)
    assert after[: len(before)] == before  # byte-identical (H-2)
    assert [row[1] for row in after[len(before) :]] == ["compaction_completed", "compaction_diagnostic"]


# -- segments (C-10) -----------------------------------------------------------------------------------


def test_segments_append_under_one_anchor_then_merge_at_four(scripted: Runtime) -> None:
    session = scripted.new_session()
    scripted.parts.store.append(
        session.id, [NewEvent(EventKind.USER_MESSAGE, {"text": "explore everything"})]
    )
    levels = []
    for step in range(1, 7):
        for index in range(3):
            n = step * 10 + index
            scripted.parts.store.append(
                session.id,
                [
                    NewEvent(
                        EventKind.ASSISTANT_MESSAGE,
                        {"text": "", "tool_calls": [{"id": f"c{n}", "name": "read_file", "arguments": "{}"}]},
                    ),
                    NewEvent(
                        EventKind.TOOL_RESULT,
                        {"tool_call_id": f"c{n}", "name": "read_file", "content": "x " * 300},
                    ),
                ],
            )
        result = scripted.parts.compaction.compact(
            session.id, session.route, Trigger.BUDGET, phase=Phase.MID_TURN
        )
        assert result.outcome is Outcome.ACCEPTED, result.reason
        checkpoint = result.checkpoint
        assert checkpoint is not None
        levels.append((len(checkpoint.segments), checkpoint.level))
    # steps 1..4 append a segment each under the same anchor; the 5th would be one too many (C-10)
    assert levels[:4] == [(1, 0), (2, 0), (3, 0), (4, 0)]
    assert levels[4] == (1, 1) and levels[5] == (2, 1)
    view = session.context()
    assert view.checkpoint is not None and projection_is_well_formed(list(view.messages)[1:])
    # mid_turn re-inserts the anchor verbatim right after the checkpoint message (C-3)
    assert view.messages[2] == {"role": "user", "content": "explore everything"}


def test_an_anchor_change_writes_one_session_level_summary(scripted: Runtime) -> None:
    session_id = import_session(scripted, [*tool_turn(1), *tool_turn(2), *tool_turn(3)])
    first = scripted.compact(session_id).checkpoint
    append_turn(scripted, session_id, 4)
    second = scripted.compact(session_id).checkpoint
    assert first is not None and second is not None
    assert second.previous_id == first.id and len(second.segments) == 1
    assert second.level == first.level + 1 and second.segments[0].from_seq == 1


# -- requests never overflow (C-13, issue item 6) ------------------------------------------------------


def test_a_prefix_larger_than_the_window_is_summarised_in_chunks_that_fit(
    tmp_path: Path, workdir: Path
) -> None:
    client = ScriptedClient()
    with scripted_runtime(tmp_path, workdir, client) as runtime:
        messages = [message for index in range(40) for message in tool_turn(index, size=1500)]
        session_id = import_session(runtime, messages)
        window = SIMULATOR_MODELS["foya-sim/small"].window
        assert window is not None
        result = runtime.compact(session_id)
        assert result.outcome is Outcome.ACCEPTED, result.reason
        sizes = [count_messages(request.messages) for request in client.summary_requests]
        assert len(sizes) > 2 and max(sizes) <= window - runtime.settings.compaction.summary_max_tokens
        assert result.checkpoint is not None and len(result.checkpoint.segments) <= 4
        assert projection_is_well_formed(list(runtime.context(session_id).messages)[1:])


def test_an_overflowing_summary_request_backs_off_to_the_accepted_boundary(
    tmp_path: Path, workdir: Path
) -> None:
    """K-8 first (three attempts, each smaller), then C-13: coverage backs off to the boundary."""
    overflow = ProviderError(ProviderFailure(kind=FailureKind.INPUT_OVERFLOW, detail="too long"))
    client = ScriptedClient(summaries=[overflow] * 3)
    with scripted_runtime(tmp_path, workdir, client) as runtime:
        session_id = import_session(runtime, [m for i in range(6) for m in tool_turn(i)])
        route = runtime.route_for()
        runtime.parts.compaction_store.record_boundary(session_id, route.id, 8, 900, 10, 4000)
        result = runtime.compact(session_id)
        assert result.outcome is Outcome.ACCEPTED and result.requests == 4
        assert result.checkpoint is not None and result.checkpoint.through_seq == 8


def test_compaction_never_loops_when_every_request_overflows(tmp_path: Path, workdir: Path) -> None:
    overflow = ProviderError(ProviderFailure(kind=FailureKind.INPUT_OVERFLOW, detail="too long"))
    client = ScriptedClient(summaries=[overflow] * 50)
    with scripted_runtime(tmp_path, workdir, client, max_requests=5) as runtime:
        session_id = import_session(runtime, [m for i in range(30) for m in tool_turn(i)])
        result = runtime.compact(session_id)
        assert result.outcome is Outcome.FAILED and "cannot reduce further" in result.reason
        # bounded: max_requests plus one per chunk of the last, smallest plan
        assert len(client.summary_requests) <= 5 + 2


# -- lineage, undo, rewind (C-12, P-6, H-4) -------------------------------------------------------------


def test_a_stale_proposal_is_rejected_at_commit(scripted: Runtime) -> None:
    session_id = import_session(scripted, [*tool_turn(1), *tool_turn(2), *tool_turn(3)])
    proposal = scripted.propose_compaction(session_id)
    assert isinstance(proposal, Proposal)
    assert scripted.compact(session_id).outcome is Outcome.ACCEPTED  # another checkpoint meanwhile
    stale = scripted.commit_compaction(proposal)
    assert stale.outcome is Outcome.REJECTED and "stale" in stale.reason


def test_undo_makes_the_previous_checkpoint_current_by_a_new_event(scripted: Runtime) -> None:
    session_id = import_session(scripted, [*tool_turn(1), *tool_turn(2), *tool_turn(3)])
    first = scripted.compact(session_id).checkpoint
    append_turn(scripted, session_id, 4)
    second = scripted.compact(session_id).checkpoint
    assert first is not None and second is not None
    count = len(raw_rows(scripted, session_id))
    assert scripted.undo_compaction(session_id) == (second.id, first.id)
    assert scripted.context(session_id).checkpoint_id == first.id
    statuses = [c["status"] for c in inspect_json(scripted.inspect(session_id))["checkpoints"]]
    assert statuses == ["current", "undone"]
    assert scripted.undo_compaction(session_id) == (first.id, None)
    assert scripted.context(session_id).checkpoint_id is None
    with pytest.raises(CompactionError):
        scripted.undo_compaction(session_id)
    rows = raw_rows(scripted, session_id)
    assert len(rows) == count + 2 and all(row[1] == "compaction_undone" for row in rows[count:])


def test_after_a_rewind_earlier_checkpoints_stop_counting(scripted: Runtime) -> None:
    session_id = import_session(scripted, [*tool_turn(1), *tool_turn(2), *tool_turn(3)])
    checkpoint = scripted.compact(session_id).checkpoint
    assert checkpoint is not None
    with pytest.raises(RewindError, match="separate tool calls"):
        scripted.rewind(session_id, 2)
    scripted.rewind(session_id, 4)
    view = scripted.context(session_id)
    assert view.checkpoint_id is None and len(view.messages) == 5  # system + 4 valid messages
    assert scripted.verify(session_id).ok  # a voided checkpoint is not a problem (P-6)
    assert scripted.compact(session_id).outcome is Outcome.ACCEPTED
    assert scripted.context(session_id).checkpoint.previous_id is None  # no lineage across the rewind


# -- triggers in the loop (C-2) -------------------------------------------------------------------------


@pytest.mark.usefixtures("big_readme")
def test_the_budget_trigger_compacts_before_a_step_and_the_session_continues(runtime: Runtime) -> None:
    session = runtime.new_session()
    finished = []
    compactions = []
    for index in range(6):
        updates = list(session.send(f"please read README.md ({index})"))
        finished.append(isinstance(updates[-1], TurnFinished))
        compactions += [u.result for u in updates if isinstance(u, CompactionFinished)]
    assert all(finished)
    assert any(result.outcome == "accepted" and result.trigger == "budget" for result in compactions)
    assert session.context().checkpoint_id is not None
    assert runtime.verify(session.id).ok


@pytest.mark.usefixtures("big_readme")
def test_a_provider_overflow_compacts_once_per_turn(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The large route: history worth compacting, yet under the budget, so only the provider triggers.
    session = runtime.new_session(runtime.route_for("foya-sim/large"))
    for index in range(2):
        list(session.send(f"please read README.md ({index})"))
    assert session.context().verdict == "ok"
    monkeypatch.setenv("FOYA_SIM_FAULTS", "overflowx1")
    updates = list(session.send("and once more"))
    reports = [u.result for u in updates if isinstance(u, CompactionFinished)]
    assert isinstance(updates[-1], TurnFinished)
    assert [r.trigger for r in reports].count("provider") == 1 and reports[-1].outcome == "accepted"
    # The chat request and two summary requests overflow: K-8 asks the summary again, smaller each
    # time, and the third attempt makes the one recovery this turn needs.
    monkeypatch.setenv("FOYA_SIM_FAULTS", "overflowx3")
    updates = list(session.send("and again"))
    assert isinstance(updates[-1], TurnFinished)
    reports = [u.result for u in updates if isinstance(u, CompactionFinished)]
    assert [(r.trigger, r.outcome, r.requests) for r in reports] == [("provider", "accepted", 3)]


def test_rate_limits_and_quota_never_compact(runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    session = runtime.new_session()
    list(session.send("please read README.md"))
    for fault in ("429x9", "quotax9"):
        monkeypatch.setenv("FOYA_SIM_FAULTS", fault)
        updates = list(session.send("hello"))
        assert isinstance(updates[-1], TurnFailed)
        assert not any(isinstance(u, CompactionFinished) for u in updates)


def test_simulator_summaries_that_are_truncated_are_repaired(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = import_session(runtime, [m for i in range(4) for m in tool_turn(i)])
    for index, fault in enumerate(("summary-truncatedx1", "summary-sectionsx1")):
        monkeypatch.setenv("FOYA_SIM_FAULTS", fault)
        result = runtime.compact(session_id)
        assert result.outcome is Outcome.ACCEPTED and result.checkpoint.producer == "repaired"
        assert result.requests == 2  # repaired at most once (C-9)
        append_turn(runtime, session_id, 10 + index)
    monkeypatch.setenv("FOYA_SIM_FAULTS", "summary-lengthx2")
    append_turn(runtime, session_id, 20)
    assert runtime.compact(session_id).outcome is Outcome.FAILED


# -- CLI ----------------------------------------------------------------------------------------------------


def test_cli_compact_inspect_verify_rewind(
    runtime: Runtime, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    session_id = import_session(runtime, [m for i in range(4) for m in tool_turn(i)])
    database = str(runtime.parts.store.path)
    assert main(["--db", database, "compact", session_id, "--json"]) == 0
    compacted = json.loads(capsys.readouterr().out)
    assert compacted["outcome"] == "accepted" and compacted["tokens_after"] < compacted["tokens_before"]
    assert set(compacted) >= {"outcome", "checkpoint_id", "tokens_before", "tokens_after", "reason"}
    assert main(["--db", database, "inspect", session_id[:8], "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (checkpoint,) = report["checkpoints"]
    assert checkpoint["id"] == compacted["checkpoint_id"] and checkpoint["current"] and checkpoint["valid"]
    assert set(checkpoint) >= {
        *("id", "previous_id", "through_seq", "source_digest", "head_anchor_seq", "phase", "projection_kind"),
        *("level", "route", "model", "created_at", "tokens_before", "tokens_after", "valid", "current"),
        "segments",
    }
    assert set(checkpoint["segments"][0]) == {"index", "from_seq", "through_seq", "level", "tokens", "text"}
    assert set(report) >= {"checkpoints", "diagnostics", "fingerprints", "accepted_boundaries"}
    assert main(["--db", database, "verify", session_id]) == 0
    assert "no problems" in capsys.readouterr().out
    assert main(["--db", database, "context", session_id]) == 0
    assert f"checkpoint    {compacted['checkpoint_id'][:12]}" in capsys.readouterr().out
    assert main(["--db", database, "rewind", session_id, "2"]) == 2
    assert "separate tool calls" in capsys.readouterr().err
    assert main(["--db", database, "rewind", session_id, "4"]) == 0
    assert main(["--db", database, "compact", session_id]) == 0
    assert main(["--db", database, "inspect", session_id]) == 0
    text = capsys.readouterr().out
    assert "rewound ranges" in text and "void" in text


# -- the real HTTP path (loopback OpenAI-compatible server) ----------------------------------------------


def test_compaction_over_http_never_sends_a_request_the_provider_rejects(
    tmp_path: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 6,000-token window and a transcript several times larger: chunked summary requests that each
    fit, merged into one checkpoint; the server never answers `context_length_exceeded`."""
    from foya_tui.settings import ModelSettings
    from tests.conftest import fake_settings
    from tests.fakes.openai_server import FakeOpenAIServer, count_prompt_tokens

    monkeypatch.setenv("FOYA_TEST_KEY", "sk-test-compaction")
    with FakeOpenAIServer(window=6_000) as server:
        settings = fake_settings(
            server.base_url,
            model="openai/summary",
            models={"openai/summary": ModelSettings(window=6_000)},
        )
        with Runtime(settings, make_paths(tmp_path), workdir=workdir, clock=lambda: FIXED_NOW) as runtime:
            session_id = import_session(runtime, [m for i in range(30) for m in tool_turn(i, size=1200)])
            result = runtime.compact(session_id)
            assert result.outcome is Outcome.ACCEPTED, result.reason
            assert result.requests >= 3  # chunks, then a merge
            sizes = [count_prompt_tokens(tuple(r.body["messages"])) for r in server.requests]
            assert max(sizes) <= 6_000 and all(r.body.get("stream") is not True for r in server.requests)
            assert runtime.verify(session_id).ok


def test_the_progress_counter_counts_on_through_the_merge_and_never_falls(
    tmp_path: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many chunks, then the merge of their summaries: the counter goes 1/N … N/N, then on to the
    merge requests (N+1/N+1), never back to 1/N (a drop from 143/174 to 1/174 was the symptom)."""
    from foya_tui.settings import ModelSettings
    from tests.conftest import fake_settings
    from tests.fakes.openai_server import FakeOpenAIServer

    monkeypatch.setenv("FOYA_TEST_KEY", "sk-test-compaction")
    with FakeOpenAIServer(window=6_000) as server:
        settings = fake_settings(
            server.base_url, model="openai/summary", models={"openai/summary": ModelSettings(window=6_000)}
        )
        with Runtime(settings, make_paths(tmp_path), workdir=workdir, clock=lambda: FIXED_NOW) as runtime:
            session_id = import_session(runtime, [m for i in range(30) for m in tool_turn(i, size=1200)])
            seen: list[tuple[str, str]] = []
            result = runtime.compact(session_id, progress=lambda stage, detail: seen.append((stage, detail)))
            assert result.outcome is Outcome.ACCEPTED, result.reason
    counts = [detail.split("/") for stage, detail in seen if stage == "summarising" and "/" in detail]
    done = [int(first) for first, _ in counts]
    planned = [int(second) for _, second in counts]
    assert len(done) >= 3 and done == list(range(1, len(done) + 1))  # one step per request, never back
    assert planned == sorted(planned) and done[-1] == planned[-1]
    assert planned[-1] > planned[0]  # the merge requests were counted on top of the chunks


class _WaitsForCancel(ScriptedClient):
    """A summariser that answers only when the user cancels: the cancel lands mid-request."""

    def complete(self, request: ProviderRequest, cancel: CancelToken) -> Completion:
        self.summary_requests.append(request)
        for _ in range(500):
            if cancel.cancelled:
                break
            time.sleep(0.01)
        return CANCELLED_COMPLETION


def test_cancelling_during_a_budget_compaction_ends_the_turn_and_writes_no_checkpoint(
    tmp_path: Path, workdir: Path
) -> None:
    client = _WaitsForCancel()
    with scripted_runtime(tmp_path, workdir, client) as runtime:
        # Enough turns that snipping the old results (their placeholders stay) cannot make room.
        session_id = import_session(runtime, [m for i in range(40) for m in tool_turn(i, size=1500)])
        session = runtime.open_session(session_id)
        assert session.context().verdict == "compact"
        cancel = CancelToken()
        updates = []
        for update in session.send("and now?", cancel):
            updates.append(update)
            if isinstance(update, CompactionProgressed) and update.stage == "summarising":
                cancel.cancel()
        assert isinstance(updates[-1], TurnFailed) and updates[-1].kind == "cancelled"
        (finished,) = [u.result for u in updates if isinstance(u, CompactionFinished)]
        assert finished.outcome == "cancelled" and client.requests == []  # nothing was sent after
        assert session.context().checkpoint_id is None
        assert runtime.verify(session_id).ok

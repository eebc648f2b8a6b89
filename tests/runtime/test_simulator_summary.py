"""Tests the simulator's answers to compaction requests: valid, extracted, bounded summaries and the
summary fault knobs (SPEC C-8, C-9, C-11, K-13)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from foya_tui.runtime.providers.simulator import (
    FAULTS_ENV,
    SUMMARY_TOKEN_CAP,
    TRUNCATION_MARKER,
    FaultPlan,
    Simulator,
    SimulatorFault,
    is_compaction_request,
)
from foya_tui.runtime.providers.summary_format import (
    COMPACTION_MARKER,
    MUST_MENTION_TAG,
    PREVIOUS_SUMMARY_TAG,
    REPAIR_TAG,
    SECTION_HEADINGS,
    TRANSCRIPT_TAG,
    close_tag,
    open_tag,
)
from foya_tui.runtime.tokens import count_messages, default_counter

SMALL = "foya-sim/small"
LARGE = "foya-sim/large"

TRANSCRIPT = (
    "[seq 141] user: fix the flaky test",
    "[seq 142] assistant: I will read it first. Then I will run it.",
    '[seq 142] assistant → read_file {"path": "tests/test_io.py"}',
    "[seq 143] tool read_file (ok): 1→import io",
    "2→def test_io(): ...",
    '[seq 144] assistant → shell {"command": "pytest tests/test_io.py"}',
    "[seq 145] tool shell (error): exit 1 FAILED tests/test_io.py::test_io - AssertionError",
)
MUST_MENTION = (
    "- path: tests/test_io.py",
    "- path: docs/Notes with spaces/ünïcode.md",
    "- directive: always run the tests before committing (never skip them!)",
)
PREVIOUS = """## Goal
The user asked: “set up the project” [seq 2]

## Progress
- `list_dir` {"path": "."} → ok: 3 entries [seq 3–4]
- Wrote the configuration file

## Key Decisions
- Use SQLite for the store [seq 5]

## Next Steps
- Continue with the setup.

## Critical Context
- path: setup.cfg
- Python 3.11 is required"""


def compaction_messages(
    transcript: Sequence[str] = (),
    *,
    previous: Sequence[tuple[str, int, int]] = (),
    must_mention: Sequence[str] = (),
    repair: Sequence[str] = (),
) -> tuple[Mapping[str, Any], ...]:
    """A compaction request in the wire format of `summary_format.py`."""
    parts: list[str] = []
    for index, (summary, first, last) in enumerate(previous, start=1):
        opening = open_tag(PREVIOUS_SUMMARY_TAG, index=index, from_seq=first, through_seq=last, level=0)
        parts += [opening, summary, close_tag(PREVIOUS_SUMMARY_TAG)]
    if transcript:
        first = re.match(r"\[seq (\d+)\]", transcript[0])
        last = re.match(r"\[seq (\d+)\]", [line for line in transcript if line.startswith("[seq")][-1])
        assert first and last
        parts += [
            open_tag(TRANSCRIPT_TAG, from_seq=first.group(1), through_seq=last.group(1)),
            *transcript,
            close_tag(TRANSCRIPT_TAG),
        ]
    for tag, lines in ((MUST_MENTION_TAG, must_mention), (REPAIR_TAG, repair)):
        if lines:
            parts += [open_tag(tag), *lines, close_tag(tag)]
    return (
        {"role": "system", "content": f"{COMPACTION_MARKER}\nSummarise the history in five sections."},
        {"role": "user", "content": "\n".join(parts)},
    )


def sections_of(text: str) -> dict[str, str]:
    """Check SPEC C-8/C-9 as the validator will: five headings in order, each with content, fences
    closed, no truncation marker. Returns the bodies by heading."""
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert headings == list(SECTION_HEADINGS), headings
    bodies = dict(zip(SECTION_HEADINGS, re.split(r"^## .*$", text, flags=re.MULTILINE)[1:], strict=True))
    assert all(body.strip() for body in bodies.values()), bodies
    assert text.count("```") % 2 == 0
    assert not re.search(r"\[truncated\]|\[…\]|\[\.\.\.\]|<truncated>|\(truncated\)", text, re.IGNORECASE)
    assert not re.search(r"(…|\.\.\.)$", text.rstrip()), "a summary ending in an ellipsis reads as cut off"
    return {heading: body.strip() for heading, body in bodies.items()}


def bullets(body: str) -> list[str]:
    return [line for line in body.splitlines() if line.startswith("- ")]


def many_tool_steps(count: int, first_seq: int = 10) -> list[str]:
    lines = ["[seq 9] user: tidy every module"]
    for step in range(count):
        seq = first_seq + 2 * step
        lines += [
            f'[seq {seq}] assistant → read_file {{"path": "src/module_{step}.py"}}',
            f"[seq {seq + 1}] tool read_file (ok): 1→def function_{step}(): return {step}",
        ]
    return lines


@pytest.fixture
def simulator() -> Simulator:
    return Simulator()


def test_a_compaction_request_gets_five_valid_sections_and_no_tool_call(simulator: Simulator) -> None:
    """C-8, C-9; a summariser offers no tools, and even when offered the simulator must not call one."""
    transcript = (*TRANSCRIPT, "[seq 146] user: read the file README.md")
    read_file = {"type": "function", "function": {"name": "read_file", "parameters": {}}}
    reply = simulator.reply(SMALL, compaction_messages(transcript, must_mention=MUST_MENTION), [read_file])
    assert reply.tool_calls == () and reply.finish_reason == "stop"
    sections_of(reply.text)


def test_usage_is_counted_like_an_ordinary_reply(simulator: Simulator) -> None:
    messages = compaction_messages(TRANSCRIPT, must_mention=MUST_MENTION)
    reply = simulator.reply(SMALL, messages)
    assert reply.prompt_tokens == count_messages(messages)
    assert reply.completion_tokens == default_counter().count(reply.text) > 0


def test_only_a_marked_system_message_makes_a_compaction_request(simulator: Simulator) -> None:
    marked = compaction_messages(TRANSCRIPT)
    assert is_compaction_request(marked)
    unmarked = ({"role": "system", "content": "You are helpful."}, marked[1])
    assert not is_compaction_request(unmarked)
    assert "## Goal" not in simulator.reply(SMALL, unmarked).text


def test_summary_is_deterministic(simulator: Simulator) -> None:
    messages = compaction_messages(TRANSCRIPT, previous=[(PREVIOUS, 1, 140)], must_mention=MUST_MENTION)
    assert simulator.reply(SMALL, messages).text == Simulator().reply(SMALL, messages).text


def test_every_must_mention_line_is_copied_verbatim(simulator: Simulator) -> None:
    """The validator checks that every modified path and user directive is named (SPEC C-12)."""
    text = simulator.reply(SMALL, compaction_messages(TRANSCRIPT, must_mention=MUST_MENTION)).text
    critical = sections_of(text)["## Critical Context"].splitlines()
    for line in MUST_MENTION:
        assert line in critical


def test_must_mention_survives_a_huge_input_and_a_repair(simulator: Simulator) -> None:
    messages = compaction_messages(
        many_tool_steps(300), must_mention=MUST_MENTION, repair=['- section "## Progress" is empty']
    )
    critical = sections_of(simulator.reply(LARGE, messages).text)["## Critical Context"].splitlines()
    assert all(line in critical for line in MUST_MENTION)


def test_goal_is_the_latest_user_request(simulator: Simulator) -> None:
    transcript = (*TRANSCRIPT, "[seq 146] user: now also update the changelog")
    sections = sections_of(simulator.reply(SMALL, compaction_messages(transcript)).text)
    assert "now also update the changelog" in sections["## Goal"] and "[seq 146]" in sections["## Goal"]
    assert "fix the flaky test" not in sections["## Goal"]
    assert "now also update the changelog" in sections["## Next Steps"]


def test_without_a_user_request_the_goal_comes_from_the_last_previous_summary(simulator: Simulator) -> None:
    later = PREVIOUS.replace("set up the project", "ship release 2.0")
    messages = compaction_messages(previous=[(PREVIOUS, 1, 140), (later, 141, 200)])
    goal = sections_of(simulator.reply(SMALL, messages).text)["## Goal"]
    assert "ship release 2.0" in goal and "set up the project" not in goal


def test_progress_pairs_calls_with_results_and_cites_seqs(simulator: Simulator) -> None:
    progress = bullets(
        sections_of(simulator.reply(SMALL, compaction_messages(TRANSCRIPT)).text)["## Progress"]
    )
    assert progress == [
        '- `read_file` {"path": "tests/test_io.py"} → ok: 1→import io 2→def test_io(): ... [seq 142–143]',
        '- `shell` {"command": "pytest tests/test_io.py"} → error: exit 1 FAILED tests/test_io.py::test_io'
        " - AssertionError [seq 144–145]",
    ]


def test_progress_is_bounded_and_counts_what_it_leaves_out(simulator: Simulator) -> None:
    progress = bullets(
        sections_of(simulator.reply(LARGE, compaction_messages(many_tool_steps(20))).text)["## Progress"]
    )
    assert len(progress) == 9  # eight steps and the line that counts the rest
    assert progress[0] == "- … and 12 more earlier steps [seq 10–33]"
    assert "module_19.py" in progress[-1] and "module_12.py" in progress[1]
    assert all(re.search(r"\[seq \d+(–\d+)?\]$", line) for line in progress)


def test_a_conversation_without_tools_still_has_progress(simulator: Simulator) -> None:
    transcript = ("[seq 1] user: what is a monad?", "[seq 2] assistant: A monoid in a category. Roughly.")
    progress = bullets(
        sections_of(simulator.reply(SMALL, compaction_messages(transcript)).text)["## Progress"]
    )
    assert progress == [
        "- The user asked: “what is a monad?” [seq 1]",
        "- The assistant answered: “A monoid in a category. Roughly.” [seq 2]",
    ]


def test_key_decisions_are_first_sentences_of_assistant_text(simulator: Simulator) -> None:
    decisions = sections_of(simulator.reply(SMALL, compaction_messages(TRANSCRIPT)).text)["## Key Decisions"]
    assert bullets(decisions) == ["- “I will read it first.” [seq 142]"]


def test_no_assistant_text_says_no_decisions_were_recorded(simulator: Simulator) -> None:
    decisions = sections_of(simulator.reply(SMALL, compaction_messages(many_tool_steps(2))).text)[
        "## Key Decisions"
    ]
    assert decisions == "No decisions were recorded in this part of the history."


def test_errors_reach_critical_context_and_next_steps(simulator: Simulator) -> None:
    sections = sections_of(simulator.reply(SMALL, compaction_messages(TRANSCRIPT)).text)
    assert "- Error in `shell` [seq 145]: “exit 1 FAILED tests/test_io.py::test_io - AssertionError”" in (
        sections["## Critical Context"].splitlines()
    )
    assert "Resolve the last error first: `shell` failed [seq 145]" in sections["## Next Steps"]


def test_merging_previous_summaries_keeps_their_critical_context(simulator: Simulator) -> None:
    messages = compaction_messages(TRANSCRIPT, previous=[(PREVIOUS, 1, 140)], must_mention=MUST_MENTION)
    sections = sections_of(simulator.reply(SMALL, messages).text)
    critical = sections["## Critical Context"].splitlines()
    assert "- path: setup.cfg" in critical and "- Python 3.11 is required" in critical
    # A carried bullet keeps its own provenance, or gets the previous summary's range.
    assert '- `list_dir` {"path": "."} → ok: 3 entries [seq 3–4]' in sections["## Progress"]
    assert "- Wrote the configuration file [seq 1–140]" in sections["## Progress"]
    assert "- Use SQLite for the store [seq 5]" in sections["## Key Decisions"]


def test_quoted_input_cannot_break_the_summary(simulator: Simulator) -> None:
    """A quoted fence or truncation marker would fail C-9 although the summary is whole."""
    transcript = (
        "[seq 1] user: why does ```python fail [truncated] (truncated) <truncated>",
        "[seq 2] assistant: ```python fenced …[truncated] [...] […]",
        '[seq 2] assistant → shell {"command": "make"}',
        "[seq 3] tool shell (error): " + "x " * 200 + "…",
    )
    sections_of(simulator.reply(SMALL, compaction_messages(transcript)).text)


def test_the_summary_never_ends_in_an_ellipsis(simulator: Simulator) -> None:
    """A carried line shortened at the very end would look cut off to the validator (SPEC C-9)."""
    long_rule = "- The deployment needs " + "every service restarted in order, " * 10
    previous = PREVIOUS.replace("- Python 3.11 is required", long_rule)
    text = simulator.reply(SMALL, compaction_messages(previous=[(PREVIOUS, 1, 9), (previous, 10, 20)])).text
    critical = sections_of(text)["## Critical Context"].splitlines()
    assert critical[-2].endswith("…") and critical[-1] == "- Nothing further is critical."


def test_a_large_transcript_gives_a_small_summary(simulator: Simulator) -> None:
    """A summary must shrink what it covers: a 20,000-token transcript gives < 1,500 tokens."""
    filler = "the parser reads each record, checks its header and stores the decoded fields"
    transcript = [f"[seq 1] user: {filler}"]
    for seq in range(2, 362, 2):  # about 26,000 tokens: inside foya-sim/large's window
        transcript += [
            f"[seq {seq}] assistant: Next I look at record {seq}. {filler}. {filler}.",
            f'[seq {seq}] assistant → read_file {{"path": "data/record_{seq}.txt"}}',
            f"[seq {seq + 1}] tool read_file (ok): " + f"{filler}. " * 3,
        ]
    counter = default_counter()
    messages = compaction_messages(transcript, must_mention=MUST_MENTION)
    reply = simulator.reply(LARGE, messages)
    assert reply.prompt_tokens >= 20_000
    assert reply.completion_tokens < SUMMARY_TOKEN_CAP and reply.completion_tokens * 20 < reply.prompt_tokens
    assert counter.count(reply.text) == reply.completion_tokens
    sections_of(reply.text)


def test_dense_text_still_fits_the_cap(simulator: Simulator) -> None:
    """Chinese costs about a token a character: the full level would pass the cap, a shorter one fits."""
    dense = "读取配置文件并检查每一个字段的类型与默认值是否一致" * 12
    transcript = [f"[seq 1] user: {dense}"]
    for seq in range(2, 40, 2):
        transcript += [
            f"[seq {seq}] assistant: {dense}",
            f'[seq {seq}] assistant → read_file {{"path": "{dense}"}}',
            f"[seq {seq + 1}] tool read_file (error): {dense}",
        ]
    reply = simulator.reply(LARGE, compaction_messages(transcript))
    assert reply.completion_tokens <= SUMMARY_TOKEN_CAP
    assert len(bullets(sections_of(reply.text)["## Progress"])) < 9  # a shorter level was chosen


def test_a_compaction_request_beyond_the_window_overflows(simulator: Simulator) -> None:
    """The window check applies to compaction requests as to any other (SPEC C-13 backs off then)."""
    messages = compaction_messages(many_tool_steps(400))
    assert count_messages(messages) > 8_192
    with pytest.raises(SimulatorFault) as caught:
        simulator.reply(SMALL, messages)
    assert caught.value.kind == "overflow"


def test_a_repair_request_gets_a_shorter_valid_summary(simulator: Simulator) -> None:
    """C-9: one shorter repair request may follow a failing first candidate."""
    transcript = [*many_tool_steps(12), *TRANSCRIPT]
    first = simulator.reply(LARGE, compaction_messages(transcript, must_mention=MUST_MENTION))
    repaired = simulator.reply(
        LARGE,
        compaction_messages(
            transcript, must_mention=MUST_MENTION, repair=['- section "## Next Steps" is empty']
        ),
    )
    first_progress = bullets(sections_of(first.text)["## Progress"])
    repaired_progress = bullets(sections_of(repaired.text)["## Progress"])
    assert len(repaired_progress) < len(first_progress)
    assert repaired.completion_tokens < first.completion_tokens


# -- fault knobs --------------------------------------------------------------------------------


def assert_truncated(text: str, finish_reason: str) -> None:
    assert finish_reason == "stop"
    assert text.endswith(TRUNCATION_MARKER)
    assert "## Goal" in text and "## Critical Context" not in text and "## Next Steps" not in text


def assert_misordered(text: str, finish_reason: str) -> None:
    assert finish_reason == "stop"
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert len(headings) == 4 and set(headings) < set(SECTION_HEADINGS)
    assert headings != [heading for heading in SECTION_HEADINGS if heading in headings]


def assert_cut_at_length(text: str, finish_reason: str) -> None:
    assert finish_reason == "length"
    assert "## Goal" in text and "## Critical Context" not in text


@pytest.mark.parametrize(
    ("knob", "check"),
    [
        ("summary-truncated", assert_truncated),
        ("summary-sections", assert_misordered),
        ("summary-length", assert_cut_at_length),
    ],
)
def test_summary_knob_fires_once_then_the_summary_is_valid(
    simulator: Simulator, monkeypatch, knob: str, check
) -> None:
    monkeypatch.setenv(FAULTS_ENV, f"{knob}x1")
    messages = compaction_messages(TRANSCRIPT, must_mention=MUST_MENTION)
    defect = simulator.reply(SMALL, messages)
    check(defect.text, defect.finish_reason)
    assert defect.completion_tokens == default_counter().count(defect.text)
    valid = simulator.reply(SMALL, messages)
    assert valid.finish_reason == "stop"
    sections_of(valid.text)


def test_summary_knobs_without_a_count_fire_on_every_compaction_request(
    simulator: Simulator, monkeypatch
) -> None:
    monkeypatch.setenv(FAULTS_ENV, "summary-length")
    messages = compaction_messages(TRANSCRIPT)
    assert [simulator.reply(SMALL, messages).finish_reason for _ in range(3)] == ["length"] * 3


def test_ordinary_requests_do_not_use_up_summary_knobs(simulator: Simulator, monkeypatch) -> None:
    monkeypatch.setenv(FAULTS_ENV, "summary-sectionsx1,summary-truncatedx1")
    ordinary = ({"role": "user", "content": "hello"},)
    for _ in range(3):
        reply = simulator.reply(SMALL, ordinary)
        assert reply.finish_reason == "stop" and "offline simulator" in reply.text
    messages = compaction_messages(TRANSCRIPT)
    assert_misordered(*_text_and_reason(simulator.reply(SMALL, messages)))
    assert_truncated(*_text_and_reason(simulator.reply(SMALL, messages)))
    sections_of(simulator.reply(SMALL, messages).text)


def _text_and_reason(reply) -> tuple[str, str]:
    return reply.text, reply.finish_reason


def test_general_knobs_fire_on_compaction_requests_too(simulator: Simulator, monkeypatch) -> None:
    monkeypatch.setenv(FAULTS_ENV, "429x1,truncatex1")
    messages = compaction_messages(TRANSCRIPT)
    with pytest.raises(SimulatorFault) as caught:
        simulator.reply(SMALL, messages)
    assert caught.value.kind == "429"
    assert simulator.reply(SMALL, messages).finish_reason == "length"
    sections_of(simulator.reply(SMALL, messages).text)


def test_summary_knob_names_parse_and_unknown_names_still_fail() -> None:
    plan = FaultPlan.parse("summary-truncatedx2, summary-sections,summary-lengthx1")
    assert plan.faults == (("summary-truncated", 2), ("summary-sections", None), ("summary-length", 1))
    with pytest.raises(ValueError, match="summary-truncated"):  # the known names are listed
        FaultPlan.parse("summary-typo")

"""Hardening, part A, items 4 and 5: `foya import` is strict and bounded. Standard JSON only, a
size limit read no further than the limit, a nesting limit, duplicate call ids refused, and
unanswered calls kept (the model's view closes them with the "no result was recorded"
placeholder); each refusal one line, exit 2, nothing written (real subprocesses)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from foya_tui.runtime.transcripts import MAX_NESTING, TranscriptError, parse_transcript
from foya_tui.runtime.view.history import MISSING_TOOL_RESULT
from tests.runtime.cli_process import run_foya
from tests.runtime.test_store_faults import assert_one_line


def sessions(home: Path) -> list[dict]:
    return json.loads(run_foya(home, "sessions", "--json").stdout)["sessions"]


def call(call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "read_file", "arguments": "{}"}}


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b'[{"role": "user", "content": "x", "name": NaN}]', "NaN is not valid JSON"),
        (b'{"role": "user", "content": "x", "score": Infinity}', "Infinity is not valid JSON"),
        (b"[" * 50_000, f"nested more than {MAX_NESTING} levels"),
        (b'{"role": "user", "content": "x", "deep": ' + b"[" * 200 + b"]" * 200 + b"}", "nested more than"),
        (
            json.dumps(
                [{"role": "assistant", "content": None, "tool_calls": [call("a"), call("a")]}]
            ).encode(),
            "tool call id 'a' appears twice in one message",
        ),
    ],
    ids=["nan", "infinity", "deep-array", "deep-field", "duplicate-call-id"],
)
def test_refused_transcripts_are_one_line_and_write_nothing(
    tmp_path: Path, content: bytes, fragment: str
) -> None:
    transcript = tmp_path / "bad.json"
    transcript.write_bytes(content)
    result = run_foya(tmp_path, "import", str(transcript))
    assert_one_line(result, 2)
    assert fragment in result.stderr
    assert sessions(tmp_path) == []


def test_dev_zero_hits_the_size_limit_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("import_max_bytes = 1048576\n", encoding="utf-8")
    result = run_foya(tmp_path, "import", "/dev/zero")
    assert_one_line(result, 2)
    assert "larger than 1 MiB" in result.stderr and "import_max_bytes" in result.stderr


def test_the_default_size_limit_is_generous_and_stdin_is_bounded_too(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("import_max_bytes = 100\n", encoding="utf-8")
    result = run_foya(tmp_path, "import", "-", stdin=b'{"role": "user", "content": "' + b"x" * 200 + b'"}')
    assert_one_line(result, 2)
    assert "larger than 100 bytes" in result.stderr
    with pytest.raises(TranscriptError, match="larger than"):
        parse_transcript(b"x" * 11, "t", max_bytes=10)
    parse_transcript(b'{"role": "user", "content": "fits"}', "t")  # no limit given: none applied


def test_an_unanswered_call_is_kept_and_closed_in_the_model_view(tmp_path: Path) -> None:
    messages = [
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": None, "tool_calls": [call("c1"), call("c2")]},
        {"role": "tool", "tool_call_id": "c1", "content": "first result"},
        {"role": "user", "content": "never mind"},
    ]
    transcript = tmp_path / "open-call.json"
    transcript.write_text(json.dumps(messages), encoding="utf-8")
    result = run_foya(tmp_path, "import", str(transcript))
    assert result.code == 0, result.stderr
    session = result.stdout.strip()
    projection = [
        json.loads(line) for line in run_foya(tmp_path, "export", session, "--projection").stdout.splitlines()
    ]
    closing = [m for m in projection if m.get("role") == "tool" and m.get("tool_call_id") == "c2"]
    assert len(closing) == 1 and MISSING_TOOL_RESULT in json.dumps(closing[0]["content"])

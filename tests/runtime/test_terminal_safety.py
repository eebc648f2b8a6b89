"""Hardening, part A, item 1: no terminal escape from a provider, a transcript or a tool reaches the
terminal through `foya run`, `foya search` or `foya sessions` (real subprocesses, real SQLite)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from foya_tui.runtime.text import split_escape_tail, terminal_safe
from tests.fakes.openai_server import HOSTILE_TEXT, FakeOpenAIServer
from tests.runtime.cli_process import run_foya, write_fake_config

# Bytes a terminal obeys: ESC, the 8-bit C1 controls (U+0080..U+009F, UTF-8 C2 80..C2 9F), BEL,
# other C0 controls except newline and tab, DEL, and the bidi overrides and isolates.
_OBEYED = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def assert_terminal_safe(text: str) -> None:
    found = _OBEYED.search(text)
    assert found is None, f"{found.group()!r} reaches the terminal in {text!r}"


HOSTILE = (
    "a\x1b]0;title\x07b\x1b]52;c;aGk=\x1b\\c\x1b[2Jd\x9b31me\x9d0;t\x9cf\x1bPq#0\x1b\\g"
    "\x90dcs\x9ch\x1b_apc\x1b\\i\u202eevil\u202cj\u2066k\u2069\x00\x08\x7f\x85l\ud800m\tn\r\no"
)


def test_terminal_safe_removes_every_sequence_and_control_and_keeps_text() -> None:
    cleaned = terminal_safe(HOSTILE)
    assert_terminal_safe(cleaned)
    assert cleaned == "abcdefghievilj" + "kl\ufffdm\tn\no"


def test_terminal_safe_is_idempotent_and_leaves_plain_text_alone() -> None:
    plain = "héllo 世界 — tabs\tand\nnewlines, emoji 🙂, Arabic مرحبا"
    assert terminal_safe(plain) == plain
    assert terminal_safe(terminal_safe(HOSTILE)) == terminal_safe(HOSTILE)


def test_a_stream_split_inside_a_sequence_is_held_back() -> None:
    ready, held = split_escape_tail("text \x1b]0;ti")
    assert (ready, held) == ("text ", "\x1b]0;ti")
    ready, held = split_escape_tail(held + "tle\x07 more")
    assert terminal_safe(ready + held) == " more"


def _sessions_with_hostile_import(home: Path, tmp_path: Path) -> str:
    transcript = tmp_path / "hostile.jsonl"
    lines = [
        {"role": "user", "content": "please \x1b]0;owned\x07 look \x1b[2J at needle \x9b31m now"},
        {"role": "assistant", "content": "needle found \x1b]52;c;aGk=\x07 \u202eevil"},
    ]
    transcript.write_text("\n".join(json.dumps(line) for line in lines), encoding="utf-8")
    result = run_foya(home, "import", str(transcript))
    assert result.code == 0, result.stderr
    return result.stdout.strip()


def test_sessions_and_search_print_titles_and_snippets_safely(tmp_path: Path) -> None:
    home = tmp_path / "home"
    session = _sessions_with_hostile_import(home, tmp_path)
    listed = run_foya(home, "sessions")
    assert listed.code == 0 and "please" in listed.stdout and "needle" in listed.stdout
    assert_terminal_safe(listed.stdout)
    found = run_foya(home, "search", session, "needle")
    assert found.code == 0 and found.stdout.count("needle") >= 2
    assert_terminal_safe(found.stdout)


def test_json_output_carries_no_raw_escape_and_keeps_the_value(tmp_path: Path) -> None:
    """--json is for programs: the value survives (escaped), the bytes are terminal-safe too."""
    home = tmp_path / "home"
    session = _sessions_with_hostile_import(home, tmp_path)
    for argv in (("sessions", "--json"), ("search", session, "needle", "--json"), ("export", session)):
        result = run_foya(home, *argv)
        assert result.code == 0, result.stderr
        assert_terminal_safe(result.stdout)
        for line in result.stdout.splitlines():
            json.loads(line)
    exported = [json.loads(line) for line in run_foya(home, "export", session).stdout.splitlines()]
    # History keeps the text verbatim; JSON carries it escaped.
    assert exported[1]["payload"]["content"] == "needle found \x1b]52;c;aGk=\x07 \u202eevil"


@pytest.mark.parametrize("json_mode", [False, True])
def test_run_prints_a_hostile_reply_and_tool_call_safely(
    tmp_path: Path, fake_openai: FakeOpenAIServer, json_mode: bool
) -> None:
    home = tmp_path / "home"
    write_fake_config(home, fake_openai.base_url, "hostile")
    (home / "README.md").write_text("readme\n", encoding="utf-8")
    result = run_foya(home, "run", "hello", *(["--json"] if json_mode else []), cwd=home)
    assert result.code == 0, result.stderr
    assert_terminal_safe(result.stdout)
    assert_terminal_safe(result.stderr)
    if json_mode:
        deltas = "".join(
            record["text"]
            for line in result.stdout.splitlines()
            if (record := json.loads(line))["type"] == "delta"
        )
        assert deltas == HOSTILE_TEXT  # JSON escapes, it does not filter
    else:
        assert "title clip clear c1 dcs bidignp.exe bell end" in result.stdout
        # The tool line: a name carrying escapes matches no tool (it is kept with its escapes
        # written out, so nothing runs) and prints as that visible text, never as escapes.
        assert "read\\x1b]0;tool\\x07_file" in result.stderr

"""Tests the command line (DESIGN §5): headless turns, listing, import/export, and clear errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from foya_tui.cli import main


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def tool_call(call_id: str, arguments: object) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "read_file", "arguments": arguments}}


TRANSCRIPT = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "read two files"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [tool_call("call_0", '{"path": "a"}'), tool_call("call_1", {"path": "b"})],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "B"},
    {"role": "tool", "tool_call_id": "call_0", "content": "A"},
    {"role": "assistant", "content": "Both read."},
    {"role": "user", "content": [{"type": "text", "text": "again"}]},
    # Many exporters restart call ids every turn: call_0 appears again.
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [tool_call("call_0", '{"path": "a"}')],
    },
    {"role": "tool", "tool_call_id": "call_0", "content": "A2"},
    {"role": "assistant", "content": "中文也可以。"},
]


def normalised(message: dict) -> dict:
    """The OpenAI message as Foya stores it: text content, arguments as JSON text."""
    out = {"role": message["role"], "content": message.get("content")}
    if isinstance(out["content"], list):
        out["content"] = "\n".join(part["text"] for part in out["content"])
    if message.get("tool_calls"):
        out["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {
                    "name": call["function"]["name"],
                    "arguments": call["function"]["arguments"]
                    if isinstance(call["function"]["arguments"], str)
                    else json.dumps(call["function"]["arguments"], ensure_ascii=False),
                },
            }
            for call in message["tool_calls"]
        ]
    if "tool_call_id" in message:
        out["tool_call_id"] = message["tool_call_id"]
    return out


def test_run_json_then_sessions_then_export(capsys, workdir: Path, monkeypatch) -> None:
    monkeypatch.chdir(workdir)
    code, out, err = run_cli(capsys, "run", "hello", "--json")
    assert code == 0, err
    lines = json_lines(out)
    assert lines[0]["type"] == "turn_started" and lines[-1]["type"] == "turn_finished"
    assert {line["session"] for line in lines} == {lines[0]["session"]}
    assert any(line["type"] == "delta" and line["text"] for line in lines)
    session = lines[0]["session"]

    code, out, _ = run_cli(capsys, "sessions", "--json")
    (listed,) = json_lines(out)[0]["sessions"]
    assert listed["id"] == session and listed["title"] == "hello" and listed["events"] == 3

    code, out, _ = run_cli(capsys, "export", session[:6])
    kinds = [record["kind"] for record in json_lines(out)]
    assert kinds == ["user_message", "assistant_message", "provider_usage"]


def test_run_continues_a_session_in_plain_text(capsys, workdir: Path, monkeypatch) -> None:
    monkeypatch.chdir(workdir)
    _, out, _ = run_cli(capsys, "run", "remember: the port is 8123", "--json")
    session = json_lines(out)[0]["session"]
    code, out, _ = run_cli(capsys, "run", "what did I ask so far?", "--session", session[:8])
    assert code == 0 and "the port is 8123" in out


def test_run_provider_failure_exits_1_with_one_line(capsys, monkeypatch) -> None:
    monkeypatch.setenv("FOYA_SIM_FAULTS", "quota")
    code, out, err = run_cli(capsys, "run", "hello", "--json")
    assert code == 1
    assert json_lines(out)[-1] == {
        "type": "turn_failed",
        "session": json_lines(out)[0]["session"],
        "kind": "quota",
        "reason": json_lines(out)[-1]["reason"],
    }
    code, out, err = run_cli(capsys, "run", "hello")
    assert code == 1 and len(err.strip().splitlines()) == 1 and "quota" in err


def test_import_round_trips_through_export(capsys, tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(TRANSCRIPT, ensure_ascii=False), encoding="utf-8")
    code, out, err = run_cli(capsys, "import", str(path))
    assert code == 0, err
    session = out.strip()
    assert len(session) == 32 and "\n" not in session

    _, out, _ = run_cli(capsys, "export", session)
    records = json_lines(out)
    assert [r["kind"] for r in records] == ["imported_message"] * len(TRANSCRIPT)
    assert [r["seq"] for r in records] == list(range(1, len(TRANSCRIPT) + 1))

    _, out, _ = run_cli(capsys, "export", session, "--projection")
    projected = json_lines(out)
    assert projected[0]["role"] == "system" and "Foya" in projected[0]["content"]  # Foya's own prompt
    assert projected[1:] == [normalised(m) for m in TRANSCRIPT]


def test_import_jsonl_from_stdin(capsys, monkeypatch) -> None:
    import io

    lines = "\n".join(json.dumps(m) for m in TRANSCRIPT[:2]) + "\n\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(lines.encode())))
    code, out, _ = run_cli(capsys, "import", "-")
    assert code == 0
    code, out, _ = run_cli(capsys, "sessions", "--json")
    assert json_lines(out)[0]["sessions"][0]["title"] == "read two files"


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b'[{"role": "user", "content": "hi"}', "not valid JSON"),
        (b"", "no messages"),
        (b"\xff\xfe\x00garbage", "not valid UTF-8"),
        (b'{"role": "user", "content": "ok"}\n{"role": "wizard", "content": "x"}\n', "line 2: role must be"),
        (b'[{"role": "tool", "tool_call_id": "nope", "content": "x"}]', "message 1: tool_call_id 'nope'"),
        (b'[{"role": "assistant", "tool_calls": [{"id": "c"}]}]', "needs an id and a function"),
        (b'[{"role": "user", "content": 42}]', "content must be"),
        (b'["just a string"]', "must be a JSON object"),
    ],
)
def test_malformed_transcripts_write_nothing(capsys, tmp_path: Path, content: bytes, fragment: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    code, out, err = run_cli(capsys, "import", str(path))
    assert code == 2 and out == ""
    assert err.startswith("foya: ") and fragment in err and len(err.strip().splitlines()) == 1
    _, out, _ = run_cli(capsys, "sessions", "--json")
    assert json_lines(out)[0]["sessions"] == []


def test_images_in_transcripts_become_explicit_notes(capsys, tmp_path: Path) -> None:
    path = tmp_path / "img.json"
    parts = [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {}}]
    message = {"role": "user", "content": parts}
    path.write_text(json.dumps([message]))
    _, session, _ = run_cli(capsys, "import", str(path))
    _, out, _ = run_cli(capsys, "export", session.strip())
    assert "image not imported" in json_lines(out)[0]["payload"]["content"]


@pytest.mark.parametrize(
    "argv",
    [
        ["export", "0123456789"],
        ["export", "not-an-id"],
        ["run", "hello", "--session", "abcdef"],
        ["import", "/nonexistent/file.json"],
        ["--bogus"],
        ["run"],
        ["run", "   "],
    ],
)
def test_user_mistakes_are_one_line_exit_2(capsys, argv: list[str]) -> None:
    code, _, err = run_cli(capsys, *argv)
    assert code == 2
    assert err.startswith("foya: ") and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_bad_config_is_one_line_exit_2(capsys, isolated_home: Path) -> None:
    isolated_home.mkdir(parents=True, exist_ok=True)
    (isolated_home / "config.toml").write_text('[connections.x]\napi_key = "sk-secret"\n')
    code, _, err = run_cli(capsys, "sessions")
    assert code == 2 and "api_key_env" in err and "sk-secret" not in err
    (isolated_home / "config.toml").write_text("model = [unclosed")
    code, _, err = run_cli(capsys, "sessions")
    assert code == 2 and "not valid TOML" in err


def test_db_flag_overrides_the_location(capsys, tmp_path: Path) -> None:
    db = tmp_path / "elsewhere" / "mine.sqlite3"
    code, out, _ = run_cli(capsys, "--db", str(db), "run", "hello", "--json")
    assert code == 0 and db.exists()
    _, out, _ = run_cli(capsys, "sessions", "--json")
    assert json_lines(out)[0]["sessions"] == []  # the default database was not touched


def test_console_entry_point_end_to_end(tmp_path: Path, isolated_home: Path) -> None:
    """The installed `python -m foya_tui` path, in a fresh process, with no configuration."""
    env = {**os.environ, "FOYA_HOME": str(isolated_home)}
    result = subprocess.run(
        [sys.executable, "-m", "foya_tui", "run", "hello", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1])["type"] == "turn_finished"
    assert result.stderr == ""  # no LiteLLM noise on a clean run


CONTEXT_KEYS = {
    "session", "route", "window", "max_input", "output_reserve", "input_budget", "handoff_at",
    "high_water", "estimate", "layers", "verdict", "through_seq", "checkpoint_id", "messages",
}  # fmt: skip


def test_context_compiles_without_sending(capsys, workdir: Path, monkeypatch) -> None:
    monkeypatch.chdir(workdir)
    _, out, _ = run_cli(capsys, "run", "hello", "--json")
    session = json_lines(out)[0]["session"]
    code, out, _ = run_cli(capsys, "context", session[:6], "--json")
    assert code == 0
    (report,) = json_lines(out)
    assert set(report) >= CONTEXT_KEYS
    assert set(report["route"]) >= {"id", "model", "connection"}
    assert set(report["layers"]) == {"pinned", "history", "working_set", "tool_schema", "native_state"}
    assert report["estimate"]["source"] == "measured" and report["verdict"] == "ok"
    assert (report["window"], report["input_budget"]) == (8_192, 8_192 - report["output_reserve"])
    _, out, _ = run_cli(capsys, "export", session)
    assert len(json_lines(out)) == 3  # compiling wrote nothing

    code, out, _ = run_cli(capsys, "context", session[:6], "--model", "foya-sim/large")
    assert code == 0 and "estimate: no usage on this route yet" in out and "32,768" in out


def test_context_for_an_unknown_model_is_quiet_and_uses_b3(capsys, workdir: Path, monkeypatch) -> None:
    monkeypatch.chdir(workdir)
    _, out, _ = run_cli(capsys, "run", "hello", "--json")
    session = json_lines(out)[0]["session"]
    code, out, err = run_cli(capsys, "context", session, "--model", "acme/never-heard-of-it", "--json")
    report = json_lines(out)[0]
    assert code == 0 and err == ""
    assert report["window"] is None and report["high_water"] == 32_768


def test_tui_with_an_unknown_session_or_connection_is_one_line_exit_2(capsys, isolated_home: Path) -> None:
    code, _, err = run_cli(capsys, "--session", "abcdef")
    assert code == 2 and err.strip() == "foya: no session 'abcdef'"
    isolated_home.mkdir(parents=True, exist_ok=True)
    (isolated_home / "config.toml").write_text('[models."acme/x"]\nconnection = "default"\n')
    code, _, err = run_cli(capsys, "--model", "acme/x", "--session", "abc")
    assert code == 2 and len(err.strip().splitlines()) == 1

"""Tests `foya sessions rm/rename`, the listing's status of a session whose first message failed,
and `foya export --format md`: one-line errors with exit 2 on bad input, JSON with `--json`, and a
transcript whose model text cannot inject HTML."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from tests.runtime.test_cli import json_lines, run_cli


def new_session(capsys: pytest.CaptureFixture[str], text: str = "hello") -> str:
    code, out, err = run_cli(capsys, "run", text, "--json")
    assert code == 0, err
    return json_lines(out)[0]["session"]


def listed(capsys: pytest.CaptureFixture[str]) -> dict[str, dict]:
    code, out, _ = run_cli(capsys, "sessions", "--json")
    assert code == 0
    return {entry["id"]: entry for entry in json_lines(out)[0]["sessions"]}


@pytest.fixture(autouse=True)
def in_workdir(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(workdir)


def test_sessions_rm_deletes_one_and_the_others_verify(capsys, monkeypatch) -> None:
    doomed, kept = new_session(capsys), new_session(capsys, "another one")
    code, out, err = run_cli(capsys, "sessions", "rm", doomed[:6], "--yes", "--json")
    assert code == 0, err
    assert json_lines(out) == [{"deleted": doomed, "events": 3}]
    assert set(listed(capsys)) == {kept}
    code, out, err = run_cli(capsys, "verify", kept)
    assert code == 0, out + err
    code, _, err = run_cli(capsys, "export", doomed)
    assert code == 2 and err.count("\n") == 1 and "no session" in err


def test_sessions_rm_asks_first_and_refuses_without_a_terminal(capsys, monkeypatch) -> None:
    session = new_session(capsys)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # not a terminal
    code, out, err = run_cli(capsys, "sessions", "rm", session)
    assert code == 2 and out == "" and err.count("\n") == 1 and "--yes" in err
    assert session in listed(capsys)

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdin", Terminal("n\n"))
    code, _, err = run_cli(capsys, "sessions", "rm", session)
    assert code == 0 and "nothing was deleted" in err and session in listed(capsys)
    monkeypatch.setattr(sys, "stdin", Terminal("y\n"))
    code, out, err = run_cli(capsys, "sessions", "rm", session)
    assert code == 0 and f"Delete session {session[:6]} (hello), 3 events?" in err
    assert out == f"deleted session {session[:6]} (3 events)\n" and session not in listed(capsys)


def test_sessions_rm_of_an_unknown_session_is_one_line_and_exit_2(capsys) -> None:
    code, out, err = run_cli(capsys, "sessions", "rm", "abcdef", "--yes")
    assert code == 2 and out == "" and err == "foya: no session 'abcdef'\n"
    code, _, err = run_cli(capsys, "sessions", "rm")
    assert code == 2 and err.count("\n") == 1


def test_sessions_rename(capsys) -> None:
    session = new_session(capsys)
    code, out, err = run_cli(capsys, "sessions", "rename", session[:6], "the \x1b[1mparser\x1b[0m fix")
    assert code == 0, err
    assert out == f"session {session[:6]} is now titled: the parser fix\n"
    code, out, _ = run_cli(capsys, "sessions", "rename", session, "  port 8123  ", "--json")
    assert json_lines(out) == [{"id": session, "title": "port 8123"}]
    assert listed(capsys)[session]["title"] == "port 8123"
    code, out, err = run_cli(capsys, "sessions", "rename", session, "   ")
    assert code == 2 and out == "" and err == "foya: a session title cannot be empty\n"
    code, _, err = run_cli(capsys, "sessions", "rename", session)
    assert code == 2 and err.count("\n") == 1


def test_a_session_whose_first_message_failed_is_listed_as_such(capsys, monkeypatch) -> None:
    monkeypatch.setenv("FOYA_SIM_FAULTS", "quota")
    code, out, _ = run_cli(capsys, "run", "hello", "--json")
    assert code == 1
    session = json_lines(out)[0]["session"]
    entry = listed(capsys)[session]
    assert entry["replies"] == 0 and entry["events"] == 2
    assert entry["status"] == "no reply · last turn failed (quota)"
    monkeypatch.delenv("FOYA_SIM_FAULTS")
    code, out, _ = run_cli(capsys, "sessions")
    assert code == 0 and "hello  (no reply · last turn failed (quota))\n" in out
    ok = new_session(capsys)
    assert listed(capsys)[ok]["status"] == "" and listed(capsys)[ok]["replies"] == 1


def test_export_markdown(capsys, monkeypatch) -> None:
    session = new_session(capsys, "what files are here? <script>alert(1)</script>")
    monkeypatch.setenv("FOYA_SIM_FAULTS", "quota")
    run_cli(capsys, "run", "and now?", "--session", session)
    code, out, err = run_cli(capsys, "export", session[:6], "--format", "md")
    assert code == 0, err
    assert out.startswith("# what files are here? &lt;script&gt;alert(1)&lt;/script&gt;\n")
    assert "## You\n\nwhat files are here? &lt;script>alert(1)&lt;/script>\n" in out
    assert "<script" not in out
    assert "<details><summary>tool call: list_dir (ok)</summary>" in out
    assert out.count("<details>") == out.count("</details>") >= 1
    assert "## Assistant · foya-sim/small" in out
    assert "> *✗ Failed: " in out and "quota" in out.rsplit("## You", 1)[1]
    code, out, err = run_cli(capsys, "export", session, "--format", "md", "--projection")
    assert code == 2 and out == "" and err.count("\n") == 1
    code, out, err = run_cli(capsys, "export", session, "--format", "html")
    assert code == 2 and err.count("\n") == 1


def test_export_jsonl_keeps_the_turn_outcome(capsys, monkeypatch) -> None:
    monkeypatch.setenv("FOYA_SIM_FAULTS", "quota")
    _, out, _ = run_cli(capsys, "run", "hello", "--json")
    session = json_lines(out)[0]["session"]
    _, out, _ = run_cli(capsys, "export", session, "--format", "jsonl")
    records = json_lines(out)
    assert [r["kind"] for r in records] == ["user_message", "turn_outcome"]
    assert records[1]["payload"]["kind"] == "quota" and json.dumps(records[1]).count("outcome") >= 1


def test_turn_outcomes_survive_export_and_import(capsys, monkeypatch, tmp_path: Path) -> None:
    session = new_session(capsys, "what files are here?")  # a tool turn: calls, results, a reply
    monkeypatch.setenv("FOYA_SIM_FAULTS", "quota")
    run_cli(capsys, "run", "and now?", "--session", session)
    monkeypatch.delenv("FOYA_SIM_FAULTS")
    _, exported, _ = run_cli(capsys, "export", session)
    path = tmp_path / "export.jsonl"
    path.write_text(exported, encoding="utf-8")

    code, out, err = run_cli(capsys, "import", str(path))
    assert code == 0, err
    copy = out.strip()
    _, out, _ = run_cli(capsys, "export", copy)
    records = json_lines(out)
    kinds = [record["kind"] for record in records]
    assert kinds[-1] == "turn_outcome" and set(kinds) == {"imported_message", "turn_outcome"}
    original = [r for r in json_lines(exported) if r["kind"] == "turn_outcome"]
    assert records[-1]["payload"] == original[0]["payload"]
    # The imported session reads as the source did, and its model never sees the outcome.
    _, source_md, _ = run_cli(capsys, "export", session, "--format", "md")
    _, copy_md, _ = run_cli(capsys, "export", copy, "--format", "md")
    assert copy_md.split("## You", 1)[1] == source_md.split("## You", 1)[1].replace(
        "## Assistant · foya-sim/small", "## Assistant"
    )
    _, projected, _ = run_cli(capsys, "export", copy, "--projection")
    assert "quota" not in projected
    assert [m["role"] for m in json_lines(projected)][-1] == "user"

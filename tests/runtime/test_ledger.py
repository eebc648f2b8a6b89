"""Tests the evidence ledger (SPEC K-12): what counts as a modification (tools of Foya and of
imported agents, shell writes parsed with shlex), whose words are rules (observations of text-only
agents are tool output), budgets per kind scaled with the window (file lists shortened last, the
newest kept, what was left out counted and findable), incremental extraction, the summary check
over the complete lists, and four public agents' transcripts compacted on an 8K and a 32K route."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from foya_tui.cli import main
from foya_tui.runtime.compaction.summary import missing_mentions
from foya_tui.runtime.model import Event, EventKind, NewEvent
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.view.checkpoint import parse_checkpoint
from foya_tui.runtime.view.evidence import call_effects, observation_shape
from foya_tui.runtime.view.ledger import KIND_TITLES, Ledger, extract_ledger, ledger_budget_chars
from foya_tui.runtime.view.shell_effects import shell_effects
from foya_tui.settings import Settings
from tests.agent_transcripts import AGENTS, MIN_MESSAGES, OBSERVATION_RULES, AgentTranscript
from tests.conftest import FIXED_NOW, make_paths


def _events(messages: Sequence[dict[str, Any]], first_seq: int = 1) -> list[Event]:
    return [
        Event("s", seq, EventKind.IMPORTED_MESSAGE, dict(m), "t") for seq, m in enumerate(messages, first_seq)
    ]


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": "ok"},
    ]


# -- what counts as a modification ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "written"),
    [
        ("sed -i 's/a/b/' src/a.py", ["src/a.py"]),
        ("sed -i.bak -e 's/a/b/' -e 's/c/d/' src/b.py src/c.py", ["src/b.py", "src/c.py"]),
        ("echo x > out/a.txt", ["out/a.txt"]),
        ("cd repo && printf 'y' >> log/b.txt", ["log/b.txt"]),
        ("make 2>&1 | tee -a build.log", ["build.log"]),
        ("cat > src/new.py <<'EOF'\nx = '> not_a_file'\nEOF", ["src/new.py"]),
        ("cat <<-EOF > conf.ini\n\tkey = 1\n\tEOF\nls", ["conf.ini"]),
        ("mv src/old.py src/renamed.py", ["src/old.py", "src/renamed.py"]),
        ("cp src/a.py src/b.py lib/", ["lib/a.py", "lib/b.py"]),
        ("cp template.py src/c.py; rm -f src/tmp.py", ["src/c.py", "src/tmp.py"]),
        ("git apply <<'EOF'\n--- a/src/p.py\n+++ b/src/p.py\n@@ -1 +1 @@\n-a\n+b\nEOF", ["src/p.py"]),
        ("patch src/q.py < fix.diff", ["src/q.py"]),
        ("python - <<'PY'\nfrom pathlib import Path\nPath('src/w.py').write_text('x')\nPY", ["src/w.py"]),
        ("python3 - <<EOF\nwith open('data.csv', 'a') as f:\n    f.write('1')\nEOF", ["data.csv"]),
        ("python -c \"p = 'z.txt'\nopen(p, 'w').write('1')\"", ["z.txt"]),
        ("bash -lc 'echo 1 > inner.txt'", ["inner.txt"]),
        ("perl -pi -e 's/x/y/' src/perl.py", ["src/perl.py"]),
        ("touch src/__init__.py && git rm -q src/gone.py", ["src/__init__.py", "src/gone.py"]),
    ],
)
def test_each_shell_write_is_recorded_with_its_path(command: str, written: list[str]) -> None:
    assert list(shell_effects(command).written) == written
    ledger = extract_ledger(_events(_call("c", "shell", {"command": command})), 10_000)
    assert [item.text for item in ledger.files_modified] == written


@pytest.mark.parametrize(
    "command",
    [
        "cat src/a.py",
        "head -n 20 src/a.py | grep -n def",
        "grep -rn 'must' src/a.py",
        "sed -n '1,40p' src/a.py",
        "ls src && wc -l src/a.py",
        "python -m pytest -q 2>&1 | tail -5",
        "echo '> not a redirect' && git diff",
        "python - <<'EOF'\nprint(open('src/a.py').read())\nEOF",
    ],
)
def test_reading_commands_modify_nothing(command: str) -> None:
    effects = shell_effects(command)
    assert effects.written == ()
    assert set(effects.read) <= {"src/a.py"}


def test_a_patch_written_by_one_command_and_applied_by_the_next_names_its_files() -> None:
    messages = [
        *_call("w", "Bash", {"command": "cat > fix.patch <<'EOF'\n--- a/lib/x.py\n+++ b/lib/x.py\nEOF"}),
        *_call("a", "Bash", {"command": "git apply fix.patch"}),
    ]
    ledger = extract_ledger(_events(messages), 10_000)
    assert [item.text for item in ledger.files_modified] == ["fix.patch", "lib/x.py"]


@pytest.mark.parametrize("tool", ["str_replace_editor", "str_replace_based_edit_tool"])
def test_an_editor_view_is_a_read_and_its_other_commands_modify(tool: str) -> None:
    messages = [
        *_call("v", tool, {"command": "view", "path": "src/seen.py"}),
        *_call("c", tool, {"command": "create", "path": "src/made.py", "file_text": "x"}),
        *_call(
            "r", tool, {"command": "str_replace", "path": "src/changed.py", "old_str": "a", "new_str": "b"}
        ),
        *_call("i", tool, {"command": "insert", "path": "src/grown.py", "insert_line": 1, "new_str": "c"}),
    ]
    ledger = extract_ledger(_events(messages), 10_000)
    assert [item.text for item in ledger.files_read] == ["src/seen.py"]
    assert [item.text for item in ledger.files_modified] == ["src/made.py", "src/changed.py", "src/grown.py"]


def test_other_agents_write_and_read_tools_are_recognised() -> None:
    patch = "*** Begin Patch\n*** Update File: a/u.py\n@@\n-x\n+y\n*** Add File: a/new.py\n+z\n*** End Patch"
    assert call_effects("apply_patch", {"input": patch}, lambda _: None).written == ("a/u.py", "a/new.py")
    assert call_effects("Write", {"file_path": "w.py", "content": "x"}, lambda _: None).written == ("w.py",)
    assert call_effects("MultiEdit", {"file_path": "m.py", "edits": []}, lambda _: None).written == ("m.py",)
    assert call_effects("Read", {"file_path": "r.py"}, lambda _: None).read == ("r.py",)
    codex = call_effects("shell", {"command": ["bash", "-lc", "sed -i 's/a/b/' c.py"]}, lambda _: None)
    assert codex.written == ("c.py",) and codex.command == "sed -i 's/a/b/' c.py"
    assert call_effects("grep", {"pattern": "x", "path": "src"}, lambda _: None).read == ()


def test_aider_edit_blocks_modify_and_files_added_to_the_chat_are_read() -> None:
    messages = [
        {
            "role": "user",
            "content": "I added these files to the chat so you can go ahead.\n\nsrc/a.py\n```\nx = 1\n```",
        },
        {"role": "user", "content": "rename x"},
        {
            "role": "assistant",
            "content": "src/b.py\n```python\n<<<<<<< SEARCH\nx = 1\n=======\ny = 1\n>>>>>>> REPLACE\n```\n"
            "Try:\n```bash\nrm -rf build\n```",
        },
        {"role": "user", "content": "thanks"},  # the suggested command never ran
    ]
    ledger = extract_ledger(_events(messages), 10_000)
    assert [item.text for item in ledger.files_modified] == ["src/b.py"]
    assert [item.text for item in ledger.files_read] == ["src/a.py"]
    assert [item.text for item in ledger.requests] == ["thanks", "rename x"]


# -- whose rules --------------------------------------------------------------------------------------


def test_observations_in_user_role_are_tool_output_never_rules() -> None:
    messages = [
        {"role": "user", "content": "Always keep the changelog up to date."},
        {"role": "assistant", "content": "THOUGHT: read it\n\n```bash\ngrep -n must src/a.py\n```"},
        {
            "role": "user",
            "content": "<returncode>1</returncode>\n<output>\nsrc/a.py:3: x must never be 0\n</output>",
        },
        {"role": "assistant", "content": "THOUGHT: fix it\n\n```bash\nsed -i 's/0/1/' src/a.py\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\n</output>"},
        {"role": "user", "content": "OBSERVATION:\nYou must always call close()."},
        {"role": "user", "content": "Please always provide EXACTLY ONE action in triple backticks, found 2."},
        {"role": "user", "content": "EXECUTION RESULT of [execute_bash]:\nnever do this"},
    ]
    ledger = extract_ledger(_events(messages), 10_000)
    assert [item.text for item in ledger.directives] == ["Always keep the changelog up to date."]
    assert ledger.requests == ()
    assert [item.text for item in ledger.commands] == [
        "grep -n must src/a.py → exit 1",
        "sed -i 's/0/1/' src/a.py → exit 0",
    ][::-1]
    assert [item.text for item in ledger.files_modified] == ["src/a.py"]
    assert [item.text for item in ledger.errors] == ["command: src/a.py:3: x must never be 0"]
    # Foya's own user messages are typed by the user, whatever they look like
    typed = Event("s", 1, EventKind.USER_MESSAGE, {"text": "<output>always use tabs</output>"}, "t")
    assert [item.text for item in extract_ledger([typed], 10_000).directives] == [
        "<output>always use tabs</output>"
    ]
    for line in OBSERVATION_RULES:
        assert observation_shape(f"<returncode>0</returncode>\n<output>\n{line}\n</output>") is not None
    assert observation_shape("Never force-push, and run the tests.") is None


# -- budgets per kind ---------------------------------------------------------------------------------


def _busy_session(files: int, requests: int, request_chars: int = 400) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Never force-push to main."}]
    for index in range(max(files, requests)):
        if index < requests:
            messages.append(
                {"role": "user", "content": f"request {index}: " + "details " * (request_chars // 8)}
            )
        if index < files:
            messages += _call(f"e{index}", "edit_file", {"path": f"src/mod_{index:03d}.py"})
            messages += _call(f"r{index}", "read_file", {"path": f"docs/page_{index:03d}.md"})
            messages += _call(f"s{index}", "shell", {"command": f"pytest tests/test_{index}.py"})
    return messages


def test_older_requests_are_shortened_before_any_path_is_left_out() -> None:
    ledger = extract_ledger(_events(_busy_session(files=20, requests=20)), 4_000)
    assert ledger.left_out_of("files_modified") == 0 and ledger.left_out_of("files_read") == 0
    newest, *older = ledger.requests
    assert newest.full_chars == 0 and all(item.full_chars and len(item.text) <= 160 for item in older[2:])
    assert len(ledger.render()) <= 4_000


def test_file_lists_keep_the_most_recent_and_say_how_many_were_left_out() -> None:
    ledger = extract_ledger(_events(_busy_session(files=120, requests=40)), 3_000)
    kept = [item.text for item in ledger.files_modified]
    assert kept and kept[-1] == "src/mod_119.py"  # the newest touched is kept
    assert ledger.left_out_of("files_modified") == 120 - len(kept) > 0
    assert len(ledger.all_modified) == 120  # the complete list stays with the checkpoint
    rendered = ledger.render()
    assert f"({120 - len(kept)} older paths left out; history_search finds them" in rendered
    assert "src/mod_000.py" not in rendered and len(rendered) <= 3_000
    assert [item.text for item in ledger.directives] == ["Never force-push to main."]
    kinds = {kind.kind: kind for kind in ledger.kinds}
    assert kinds["files_modified"].left_out == ledger.left_out_of("files_modified")
    assert kinds["requests"].shortened > 0 and kinds["requests"].title == KIND_TITLES["requests"]
    # every kind keeps something: one kind cannot crowd out the others
    assert all(
        kinds[kind].kept for kind in ("directives", "requests", "files_modified", "files_read", "commands")
    )


def test_a_ledger_too_small_for_one_request_still_keeps_the_active_task() -> None:
    """SPEC K-12: the fallback's ledger on a small window may have less room for requests than one
    request takes; the newest (the active task) is then cut to the room, never left out."""
    events = _events(_busy_session(files=30, requests=6, request_chars=600))
    ledger = extract_ledger(events, 700)
    (active,) = ledger.requests
    assert active.text.startswith("request 5:") and active.full_chars > len(active.text)
    assert ledger.left_out_of("requests") == 5  # the older requests (the rule is a directive)


def test_the_budget_scales_with_the_window() -> None:
    small, large = ledger_budget_chars(8_192, 32_000), ledger_budget_chars(32_768, 32_000)
    assert small < large <= 32_000 and large == pytest.approx(4 * small, rel=0.01)
    assert ledger_budget_chars(None, 32_000) == 32_000 and ledger_budget_chars(1_000_000, 32_000) == 32_000
    events = _events(_busy_session(files=120, requests=40))
    assert len(extract_ledger(events, large).files_modified) > len(
        extract_ledger(events, small).files_modified
    )


def test_extraction_from_the_previous_ledger_keeps_every_path() -> None:
    events = _events(_busy_session(files=120, requests=40))
    # a cut between whole units, as the planner makes it (a call and its result stay together)
    half = next(i for i in range(len(events) // 2, len(events)) if events[i].payload["role"] != "tool")
    earlier = extract_ledger(events[:half], 3_000)
    later = extract_ledger(events[half:], 3_000, earlier=earlier)
    whole = extract_ledger(events, 3_000)
    assert [i.text for i in later.all_modified] == [i.text for i in whole.all_modified]
    assert [i.text for i in later.all_read] == [i.text for i in whole.all_read]
    # what an earlier ledger already left out of the free text stays out, so paths keep their room
    assert len(later.files_modified) >= len(whole.files_modified)
    assert later.files_modified[-1] == whole.files_modified[-1]
    assert later.left_out_of("requests") >= whole.left_out_of("requests") > 0


def test_ledger_payloads_round_trip_and_older_ones_keep_their_form() -> None:
    ledger = extract_ledger(_events(_busy_session(files=120, requests=40)), 3_000)
    assert Ledger.from_payload(json.loads(json.dumps(ledger.to_payload()))) == ledger
    older = {
        "directives": [[1, "never x"]],
        "requests": [],
        "files_modified": [[2, "a.py"]],
        "files_read": [],
        "commands": [],
        "errors": [],
        "dropped": 3,
    }
    parsed = Ledger.from_payload(older)
    assert parsed.to_payload() == older  # so an older checkpoint's id (its payload's digest) holds
    assert "3 older records left out" in parsed.render()
    with pytest.raises(ValueError):
        Ledger.from_payload({**older, "left_out": {"files_read": 2}})


def test_the_summary_must_name_every_modified_path_and_each_read_path_the_ledger_left_out() -> None:
    ledger = extract_ledger(_events(_busy_session(files=120, requests=40)), 3_000)
    assert ledger.read_left_out and ledger.modified_left_out
    everything = "\n".join(f"- {item.text}" for item in (*ledger.all_modified, *ledger.directives))
    by_name = "\n".join(item.text.rsplit("/", 1)[-1] for item in ledger.read_left_out)
    assert missing_mentions(everything + "\n" + by_name, ledger) == []
    reasons = missing_mentions(everything, ledger)
    assert len(reasons) == 1 and all(item.text in reasons[0] for item in ledger.read_left_out)
    oldest = ledger.modified_left_out[0].text
    assert any(oldest in reason for reason in missing_mentions(everything.replace(oldest, ""), ledger))


# -- four agents' transcripts, compacted on an 8K and a 32K route -----------------------------------


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err or out
    return out


def _rules_in(text: str) -> list[str]:
    lines = text.splitlines()
    if f"{KIND_TITLES['directives']}:" not in lines:
        return []
    start = lines.index(f"{KIND_TITLES['directives']}:") + 1
    rules = []
    for line in lines[start:]:
        if not line.startswith("- [seq "):
            break
        rules.append(line.split("] ", 1)[1])
    return rules


@pytest.mark.parametrize("model", ["foya-sim/small", "foya-sim/large"])
@pytest.mark.parametrize("agent", list(AGENTS))
def test_an_imported_agent_session_keeps_its_files_and_rules_through_compaction(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, agent: str, model: str
) -> None:
    transcript: AgentTranscript = AGENTS[agent]()
    assert len(transcript.messages) >= MIN_MESSAGES
    path = tmp_path / "session.json"
    path.write_text(json.dumps(list(transcript.messages)), encoding="utf-8")
    db = str(tmp_path / "foya.sqlite3")
    session = _cli(capsys, "--db", db, "import", str(path)).strip()
    result = json.loads(_cli(capsys, "--db", db, "compact", session, "--model", model, "--json"))
    assert result["outcome"] == "accepted", result["reason"]
    exported = _cli(capsys, "--db", db, "export", session, "--projection", "--model", model)
    projection = "\n".join(str(json.loads(line).get("content")) for line in exported.splitlines() if line)
    assert [p for p in transcript.modified if p not in projection] == []
    read_kept = [p for p in transcript.read if p in projection]
    assert len(read_kept) >= 0.9 * len(transcript.read)
    assert [rule for rule in transcript.rules if rule not in projection] == []
    report = json.loads(_cli(capsys, "--db", db, "inspect", session, "--json"))
    ledger = report["checkpoints"][-1]["ledger"]
    assert set(_rules_in(ledger["text"])) <= set(transcript.rules)
    assert {kind["kind"] for kind in ledger["kinds"]} == set(KIND_TITLES)


def test_a_later_checkpoint_keeps_the_earlier_ledger_whole(tmp_path: Path) -> None:
    """A session-level merge may drop carried-over prose, never the ledger (SPEC K-12, C-10)."""
    transcript = AGENTS["claude-code"]()
    settings = Settings(retry_backoff=0.0)
    with Runtime(settings, make_paths(tmp_path), clock=lambda: FIXED_NOW) as runtime:
        session = runtime.import_transcript(json.dumps(list(transcript.messages)).encode(), "t.json").id
        route = runtime.route_for("foya-sim/small")
        first = runtime.compact(session, route)
        assert first.checkpoint is not None
        for index in range(6):
            call = {
                "id": f"x{index}",
                "name": "shell",
                "arguments": json.dumps({"command": f"rm late_{index}.py"}),
            }
            runtime.parts.store.append(
                session,
                [
                    NewEvent(EventKind.USER_MESSAGE, {"text": f"remove late_{index}.py"}),
                    NewEvent(EventKind.ASSISTANT_MESSAGE, {"text": "", "tool_calls": [call]}),
                    NewEvent(
                        EventKind.TOOL_RESULT,
                        {
                            "tool_call_id": call["id"],
                            "name": "shell",
                            "content": "x\n" * 300,
                            "metadata": {"exit_code": 0},
                        },
                    ),
                    NewEvent(EventKind.ASSISTANT_MESSAGE, {"text": f"late_{index}.py is gone."}),
                ],
            )
        second = runtime.compact(session, route)
        assert second.checkpoint is not None, second.reason
        before, after = first.checkpoint.ledger, second.checkpoint.ledger
        assert {i.text for i in before.all_modified} < {i.text for i in after.all_modified}
        assert {f"late_{index}.py" for index in range(5)} <= {i.text for i in after.all_modified}
        assert {i.text for i in before.all_read} <= {i.text for i in after.all_read}
        assert before.directives == after.directives
        stored = parse_checkpoint(replace(second.checkpoint).to_payload())
        assert stored.ledger == after

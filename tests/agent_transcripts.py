"""Provides long synthetic transcripts in the shapes of four public coding agents, with the evidence
each one holds (files modified and read, the user's rules, observations that read like rules), for
the evidence-ledger tests and bench (SPEC K-12).

- `claude_code`: OpenAI-format tool calls of `str_replace_based_edit_tool` (view / str_replace /
  create) and `Bash`, writes through the shell among them.
- `openhands`: `str_replace_editor` and `execute_bash`, results in OpenHands' words.
- `mini_swe_agent`: text only: the action is a fenced `bash` block in the assistant's text, the
  observation a user message `<returncode>…</returncode><output>…</output>`.
- `aider`: files added to the chat as user messages, edits as `SEARCH`/`REPLACE` blocks.

Each has at least `MIN_MESSAGES` messages; paths are unique per transcript so that a path found
in the projection can only come from the ledger or a summary.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MIN_MESSAGES = 500
AREAS = ("core", "io", "cli", "net", "util", "store", "view", "tools")
RULES = (
    "Always run the unit tests before you say a change is done.",
    "Never touch the files under vendor/; they are generated.",
    "From now on, keep every public function's signature stable.",
    "Remember: commit messages must say why, not only what.",
)
OBSERVATION_RULES = (
    "ValueError: the timeout must be positive and never zero",
    "# Always call close() before the handle is dropped; never reuse it",
    "WARNING: you must not import this module directly",
)
"""Lines in tool output that read like rules: never a user rule (SPEC K-12)."""


@dataclass(frozen=True)
class AgentTranscript:
    name: str
    messages: tuple[dict[str, Any], ...]
    modified: tuple[str, ...]
    read: tuple[str, ...]
    rules: tuple[str, ...]


MODIFIED_POOL = 30
READ_POOL = 45
"""Distinct files a transcript modifies and reads (public sessions touch a few dozen, again and
again): episode i touches file i modulo the pool."""


def _path(agent: str, kind: str, index: int) -> str:
    pool = READ_POOL if kind == "read" else MODIFIED_POOL
    index %= pool
    return f"src/{AREAS[index % len(AREAS)]}/{agent}_{kind}_{index:03d}.py"


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def _tool_turn(call_id: str, name: str, arguments: dict[str, Any], result: str) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": None, "tool_calls": [_call(call_id, name, arguments)]},
        {"role": "tool", "tool_call_id": call_id, "content": result},
    ]


def _code(path: str, rule_line: str = "") -> str:
    body = "\n".join(f"    value_{n} = compute({n})" for n in range(6))
    return f"# {path}\n{rule_line}\ndef handler():\n{body}\n    return value_0\n"


def _shell_write(path: str, index: int) -> str:
    """One of the shell forms that write a file (sed -i, >, >>, tee, heredoc, cp, mv, python)."""
    forms = (
        f"sed -i 's/value_0/value_1/' {path}",
        f"printf 'X = 1\\n' >> {path}",
        f"echo 'generated' | tee {path} > /dev/null",
        f"cat > {path} <<'EOF'\nprint('rewritten')\nEOF",
        f"cp {path}.orig {path} && git diff --stat",
        f"python - <<'PY'\nfrom pathlib import Path\nPath('{path}').write_text('x = 2\\n')\nPY",
        f"mv {path}.new {path}",
    )
    return forms[index % len(forms)]


def _transcript(
    name: str, messages: list[dict[str, Any]], modified: list[str], read: list[str]
) -> AgentTranscript:
    """The transcript and its evidence: each path once; a path both read and modified counts as
    modified (what changed matters more than what was looked at)."""
    changed = tuple(dict.fromkeys(modified))
    looked = tuple(path for path in dict.fromkeys(read) if path not in changed)
    return AgentTranscript(name, tuple(messages), changed, looked, RULES)


def _episodes(count: int, build: Callable[[int], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for index in range(count):
        messages.extend(build(index))
    return messages


def claude_code(episodes: int = 70) -> AgentTranscript:
    modified: list[str] = []
    read: list[str] = []

    def episode(i: int) -> list[dict[str, Any]]:
        seen, edited, shelled = _path("cc", "read", i), _path("cc", "edit", i), _path("cc", "sh", i)
        read.append(seen)
        out: list[dict[str, Any]] = []
        if i % 15 == 0:
            out.append({"role": "user", "content": RULES[(i // 15) % len(RULES)]})
        out.append({"role": "user", "content": f"Step {i}: look at {seen} and fix what it calls."})
        rule_line = OBSERVATION_RULES[i % len(OBSERVATION_RULES)]
        view = {"command": "view", "path": seen}
        out += _tool_turn(f"v{i}", "str_replace_based_edit_tool", view, _code(seen, rule_line))
        if i % 2 == 0:
            modified.append(edited)
            edit = {"command": "str_replace", "path": edited, "old_str": "value_0", "new_str": "value_2"}
            out += _tool_turn(f"e{i}", "str_replace_based_edit_tool", edit, "The file has been edited.")
        else:
            modified.append(shelled)
            command = {"command": _shell_write(shelled, i)}
            out += _tool_turn(f"s{i}", "Bash", command, "")
        out += _tool_turn(
            f"t{i}", "Bash", {"command": "python -m pytest -q tests"}, f"{i} passed\n[exit code 0]"
        )
        out.append({"role": "assistant", "content": f"Done with step {i}; the tests pass."})
        return out

    messages = _episodes(episodes, episode)
    return _transcript("claude-code", messages, modified, read)


def openhands(episodes: int = 60) -> AgentTranscript:
    modified: list[str] = []
    read: list[str] = []

    def episode(i: int) -> list[dict[str, Any]]:
        seen, created = f"/workspace/{_path('oh', 'read', i)}", f"/workspace/{_path('oh', 'new', i)}"
        read.append(seen)
        modified.append(created)
        out: list[dict[str, Any]] = []
        if i % 15 == 7:
            out.append({"role": "user", "content": RULES[(i // 15) % len(RULES)]})
        out.append({"role": "user", "content": f"Task {i}: the handler in {seen} needs a sibling module."})
        listing = f"Here's the result of running `cat -n` on {seen}:\n{_code(seen, OBSERVATION_RULES[i % 3])}"
        out += _tool_turn(f"v{i}", "str_replace_editor", {"command": "view", "path": seen}, listing)
        create = {"command": "create", "path": created, "file_text": "x = 1\n"}
        out += _tool_turn(f"c{i}", "str_replace_editor", create, f"File created successfully at: {created}")
        if i % 4 == 0:
            patched = f"/workspace/{_path('oh', 'sed', i)}"
            modified.append(patched)
            out += _tool_turn(
                f"p{i}",
                "execute_bash",
                {"command": f"cd /workspace && {_shell_write(patched, i)}"},
                "\n[Command finished with exit code 0]",
            )
        out += _tool_turn(
            f"g{i}",
            "execute_bash",
            {"command": f"grep -n handler {seen}"},
            "3:def handler():\n[Command finished with exit code 0]",
        )
        out.append({"role": "assistant", "content": f"Created {created.rsplit('/', 1)[-1]}."})
        return out

    messages = _episodes(episodes, episode)
    return _transcript("openhands", messages, modified, read)


def mini_swe_agent(episodes: int = 170) -> AgentTranscript:
    modified: list[str] = []
    read: list[str] = []

    def action(thought: str, command: str) -> dict[str, Any]:
        return {"role": "assistant", "content": f"THOUGHT: {thought}\n\n```bash\n{command}\n```"}

    def observation(code: int, output: str) -> dict[str, Any]:
        return {"role": "user", "content": f"<returncode>{code}</returncode>\n<output>\n{output}\n</output>"}

    def episode(i: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if i % 30 == 3:
            out.append({"role": "user", "content": RULES[(i // 30) % len(RULES)]})
            out.append({"role": "assistant", "content": "Understood. THOUGHT: I will follow that."})
        seen = _path("mini", "read", i)
        read.append(seen)
        out.append(action(f"I need to read {seen}.", f"cat {seen}"))
        out.append(observation(0, _code(seen, OBSERVATION_RULES[i % 3])))
        if i % 2 == 0:
            written = _path("mini", "edit", i)
            modified.append(written)
            out.append(action("Now change it.", _shell_write(written, i)))
            out.append(observation(0, ""))
        if i % 10 == 5:
            out.append(
                {
                    "role": "assistant",
                    "content": "I will run two commands.\n```bash\nls\n```\n```bash\nls -la\n```",
                }
            )
            out.append(
                {
                    "role": "user",
                    "content": "Please always provide EXACTLY ONE action in triple backticks, found 2.",
                }
            )
        return out

    task = {"role": "user", "content": "<pr_description>\nFix the handler chain in src/.\n</pr_description>"}
    system = {"role": "system", "content": "You are a helpful assistant that can interact with a computer."}
    messages = [system, task, *_episodes(episodes, episode)]
    return _transcript("mini-swe-agent", messages, modified, read)


def aider(episodes: int = 130) -> AgentTranscript:
    modified: list[str] = []
    read: list[str] = []

    def episode(i: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if i % 30 == 11:
            out.append({"role": "user", "content": RULES[(i // 30) % len(RULES)]})
            out.append({"role": "assistant", "content": "Ok."})
        seen, edited = _path("aider", "read", i), _path("aider", "edit", i)
        read.append(seen)
        added = (
            "I added these files to the chat so you can go ahead and edit them.\n\n"
            f"{seen}\n```\n{_code(seen, OBSERVATION_RULES[i % 3])}```"
        )
        out.append({"role": "user", "content": added})
        out.append({"role": "assistant", "content": "Ok, any changes I propose will be to those files."})
        out.append({"role": "user", "content": f"Move the handler of {seen} into a new file."})
        if i % 3 != 2:
            modified.append(edited)
            block = (
                f"I will update the handler.\n\n{edited}\n```python\n<<<<<<< SEARCH\n    return value_0\n"
                "=======\n    return value_1\n>>>>>>> REPLACE\n```\n"
            )
            out.append({"role": "assistant", "content": block})
            out.append(
                {
                    "role": "user",
                    "content": f"I committed the changes with git hash a{i:05x} & commit msg: move",
                }
            )
        else:
            out.append(
                {"role": "assistant", "content": "You can check it with:\n```bash\nrm -rf build/\n```"}
            )
        return out

    messages = _episodes(episodes, episode)
    return _transcript("aider", messages, modified, read)


AGENTS: dict[str, Callable[[], AgentTranscript]] = {
    "claude-code": claude_code,
    "openhands": openhands,
    "mini-swe-agent": mini_swe_agent,
    "aider": aider,
}

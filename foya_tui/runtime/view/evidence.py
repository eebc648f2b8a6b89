"""Provides what one message says for the evidence ledger (SPEC K-12): the files a tool call reads or
modifies, the command it runs, an exit code in a result, and whether a user-role message is the
user's own words or an agent's observation.

Tool calls are read by their arguments, not their names alone: an editor tool's `view` command is a
read, its `create`/`str_replace`/`insert` commands are modifications; a shell command is parsed
(`shell_effects`). Imported transcripts of text-only agents carry commands as fenced `bash` blocks
in assistant text and their output as user messages; aider-style agents edit with
`SEARCH`/`REPLACE` blocks under a path line. Both are recognised by their shape (`OBSERVATION_SHAPES`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from foya_tui.runtime.view.shell_effects import shell_contents, shell_effects

_PATH_KEYS = (
    "path", "file_path", "filepath", "filename", "file", "target_file", "notebook_path",
    "absolute_path", "relative_path", "target",
)  # fmt: skip
_MOVE_KEYS = ("old_path", "new_path", "source", "destination", "src", "dst", "from", "to")
_LIST_KEYS = ("paths", "files", "file_paths")
_COMMAND_KEYS = ("command", "cmd", "script")
_PATCH_KEYS = ("input", "patch", "diff")
_EDITOR_READS = frozenset({"view", "read", "show", "cat", "open"})
"""Editor-tool commands (`str_replace_editor`, `str_replace_based_edit_tool`) that change nothing."""
_EDITOR_WRITES = frozenset(
    {"create", "str_replace", "insert", "undo_edit", "write", "edit", "append", "delete", "rename", "replace"}
)
_SHELL_TOOL = re.compile(r"shell|bash|exec|run|terminal|command|console|sh$|cmd$", re.IGNORECASE)
_SEARCH_TOOL = re.compile(r"grep|glob|search|find|list|ls$|tree", re.IGNORECASE)
_WRITE_TOOL = re.compile(
    r"write|edit|patch|create|replace|insert|delete|remove|move|rename|apply|save|append", re.IGNORECASE
)
_READ_TOOL = re.compile(r"read|view|open|cat$|show|get_file|fetch_file", re.IGNORECASE)
_DIFF_PATH = re.compile(
    r"^\*\*\* (?:Update|Add|Delete) File: (.+)$|^\*\*\* Move to: (.+)$|^\+\+\+ (?:b/)?([^\t\n]+)$",
    re.MULTILINE,
)
_FENCED_SHELL = re.compile(r"```(?:bash|sh|shell|console|zsh)[ \t]*\n(.*?)\n[ \t]*```", re.DOTALL)
_EDIT_BLOCK = re.compile(
    r"^[ \t]*([^\s`][^\n`]*?)[ \t]*\n```[^\n]*\n(?:[^\n]*\n)??<<<<<<< SEARCH\n"
    r"|^```[^\n]*\n[ \t]*([^\s`<][^\n`]*?)[ \t]*\n<<<<<<< SEARCH\n",
    re.MULTILINE,
)
_SHOWN_FILE = re.compile(r"^[ \t]*([\w./-]+\.[\w]+|[\w./-]*/[\w.-]+)[ \t]*\n```", re.MULTILINE)
_EXIT_CODE = re.compile(
    r"<returncode>\s*(-?\d+)\s*</returncode>"
    r"|\[exit code (-?\d+)\]"
    r"|exit(?:ed with)? code[:\s]+(-?\d+)"
    r"|\[Command finished with exit code (-?\d+)\]"
    r"|return code[:\s]+(-?\d+)",
    re.IGNORECASE,
)

_WRAPPERS = "output|observation|stdout|stderr|tool_output|tool_result|function_results"
_LABELS = "OBSERVATION|Observation|EXECUTION RESULT|Execution result|Tool output|Command output"
_EXIT_LINE = r"\[exit code -?\d+\]|Exit code:\s*-?\d+|\[Command finished with exit code -?\d+\]"
_EDITOR_REPORT = (
    r"Here's the result of running `cat -n`|The file \S+ has been (?:edited|created|updated)"
    r"|File created successfully at"
)
_CHAT_FILES = r"I (?:have )?added these files to the chat|Here are summaries of some files"
_AGENT_REPORT = r"I committed the changes with git hash|I (?:updated|switched to a new code base)"
FILES_SHOWN = "files added to the chat"
"""The shape whose fenced files were shown whole to the agent: they are files read."""
COMMAND_RESULTS = frozenset(
    {"a command's return code", "an output wrapper", "an observation label", "an exit-code line"}
)
"""Shapes that answer the command a text-only agent wrote: only these mean the command ran."""
OBSERVATION_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a command's return code", re.compile(r"<returncode>\s*-?\d+\s*</returncode>", re.IGNORECASE)),
    ("an output wrapper", re.compile(rf"^\s*<(?:{_WRAPPERS})>", re.IGNORECASE)),
    ("an observation label", re.compile(rf"^\s*(?:{_LABELS})\b")),
    ("an exit-code line", re.compile(rf"^\s*(?:{_EXIT_LINE})\s*$", re.MULTILINE)),
    (
        "an agent's format reminder",
        re.compile(
            r"^\s*Please (?:always )?provide EXACTLY ONE action|^\s*The last command .* timed out", re.I
        ),
    ),
    ("an editor's report", re.compile(rf"^\s*(?:{_EDITOR_REPORT})")),
    (FILES_SHOWN, re.compile(rf"^\s*(?:{_CHAT_FILES})", re.IGNORECASE)),
    ("the agent's own report", re.compile(rf"^\s*(?:{_AGENT_REPORT})", re.IGNORECASE)),
)
"""How an imported user-role message is recognised as an agent's observation, not the user's
words: the first shape that matches names it. README's "Evidence ledger" paragraph repeats these."""


@dataclass(frozen=True)
class CallEffects:
    """What one tool call (or one command in an assistant's text) does."""

    written: tuple[str, ...] = ()
    read: tuple[str, ...] = ()
    command: str | None = None
    """The shell command it runs, as written (None for a tool that is not a shell)."""
    contents: Mapping[str, str] | None = None
    """Heredoc bodies the command writes to files, by path (a patch written, then applied)."""


def parse_arguments(raw: str) -> Mapping[str, Any]:
    """A tool call's JSON arguments as an object (empty when they are not one)."""
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, Mapping) else {}


def _strings(arguments: Mapping[str, Any], keys: Sequence[str]) -> list[str]:
    found: list[str] = []
    for key in keys:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            found.append(value.strip())
    return found


def _listed(arguments: Mapping[str, Any]) -> list[str]:
    found: list[str] = []
    for key in _LIST_KEYS:
        value = arguments.get(key)
        if isinstance(value, list):
            found.extend(item.strip() for item in value if isinstance(item, str) and item.strip())
    return found


def _command_text(arguments: Mapping[str, Any]) -> str | None:
    for key in _COMMAND_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, list) and value and all(isinstance(word, str) for word in value):
            # Codex-style argv: ["bash", "-lc", "script"] runs the script.
            if len(value) >= 3 and value[1] in ("-c", "-lc") and value[0].endswith(("sh", "bash", "zsh")):
                return str(value[2]).strip()
            return " ".join(value)
    return None


def patch_paths(patch: str) -> tuple[str, ...]:
    """Files an `apply_patch` or unified diff changes."""
    found: list[str] = []
    for match in _DIFF_PATH.finditer(patch):
        path = next(group for group in match.groups() if group).strip()
        if path != "/dev/null" and path not in found:
            found.append(path)
    return tuple(found)


def call_effects(name: str, arguments: Mapping[str, Any], known: Callable[[str], str | None]) -> CallEffects:
    """What a tool call named `name` with `arguments` reads, writes or runs. `known(path)` is the
    content an earlier command wrote to `path` (for `git apply` of a patch file)."""
    bare = name.rsplit(".", 1)[-1].rsplit("__", 1)[-1]
    paths = _strings(arguments, _PATH_KEYS) + _listed(arguments)
    editor_command = arguments.get("command")
    if (
        isinstance(editor_command, str)
        and editor_command.strip().lower() in _EDITOR_READS | _EDITOR_WRITES
        and paths
    ):
        # str_replace_editor / str_replace_based_edit_tool: the command says what happens.
        if editor_command.strip().lower() in _EDITOR_READS:
            return CallEffects(read=tuple(paths))
        return CallEffects(written=tuple(paths))
    command = _command_text(arguments)
    if command is not None and _SHELL_TOOL.search(bare):
        effects = shell_effects(command, known)
        return CallEffects(effects.written, effects.read, command, shell_contents(command) or None)
    patch = next((text for text in _strings(arguments, _PATCH_KEYS) if "\n" in text), None)
    if patch is not None and (
        "patch" in bare.lower() or patch.lstrip().startswith(("*** Begin Patch", "---", "diff"))
    ):
        return CallEffects(written=patch_paths(patch) or tuple(paths))
    if _SEARCH_TOOL.search(bare):
        return CallEffects()  # a directory search names no file it read whole
    moved = _strings(arguments, _MOVE_KEYS)
    if _WRITE_TOOL.search(bare):
        return CallEffects(written=tuple(dict.fromkeys(paths + moved)))
    if _READ_TOOL.search(bare):
        return CallEffects(read=tuple(paths))
    return CallEffects()


def text_commands(text: str) -> tuple[str, ...]:
    """Shell commands an assistant wrote as fenced `bash` blocks (a text-only agent's actions)."""
    return tuple(block.strip() for block in _FENCED_SHELL.findall(text) if block.strip())


def edit_block_paths(text: str) -> tuple[str, ...]:
    """Files an assistant edits with aider-style `<<<<<<< SEARCH` / `>>>>>>> REPLACE` blocks."""
    found: list[str] = []
    for match in _EDIT_BLOCK.finditer(text):
        path = (match.group(1) or match.group(2) or "").strip().strip("`*:")
        if path and " " not in path and path not in found:
            found.append(path)
    return tuple(found)


def shown_files(text: str) -> tuple[str, ...]:
    """Files an observation shows whole: a path line directly above a code fence."""
    return tuple(dict.fromkeys(match.group(1) for match in _SHOWN_FILE.finditer(text)))


def observation_shape(text: str) -> str | None:
    """Which agent-observation shape an imported user-role message has, or None for the user's own
    words (SPEC K-12: only those can state a rule)."""
    head = text[:2_000]
    for label, pattern in OBSERVATION_SHAPES:
        if pattern.search(head):
            return label
    return None


def exit_code_in(text: str) -> int | None:
    """The exit code a result or observation reports (`<returncode>1</returncode>`, `[exit code 1]`,
    `Exit code: 1`), the last one when it reports several."""
    found = None
    for match in _EXIT_CODE.finditer(text):
        found = int(next(group for group in match.groups() if group is not None))
    return found

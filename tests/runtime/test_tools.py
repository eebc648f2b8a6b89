"""Tests the tool registry (SPEC X-9, K-4 effects) and the built-in tools on real files.

Every bad input has its own test: each must come back as an error *result* with a sentence the
model can act on, never as an exception.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from foya_tui.runtime.providers.client import CancelToken
from foya_tui.runtime.tools import (
    HISTORY_READ_TOOL,
    TOOL_SEARCH,
    Effect,
    ToolContext,
    ToolRegistry,
    ToolResult,
    ToolSpec,
    Visibility,
    default_registry,
)
from foya_tui.runtime.tools.builtin import (
    GLOB_MAX_RESULTS,
    GREP_MAX_MATCHES,
    LIST_MAX_ENTRIES,
    READ_LINE_MAX_CHARS,
    READ_OUTPUT_MAX_CHARS,
    SHELL_OUTPUT_HEAD_BYTES,
    SHELL_OUTPUT_TAIL_BYTES,
)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    (folder / "src" / "pkg").mkdir(parents=True)
    (folder / "README.md").write_text("# Demo\nHello World\n", encoding="utf-8")
    (folder / "src" / "main.py").write_text(
        "import os\n\ndef main():\n    print('hello')\n", encoding="utf-8"
    )
    (folder / "src" / "pkg" / "util.py").write_text("def helper():\n    return 'Hello'\n", encoding="utf-8")
    (folder / ".git").mkdir()
    (folder / ".git" / "config.py").write_text("hello = 'from git'\n", encoding="utf-8")
    return folder


@pytest.fixture
def context(ws: Path) -> ToolContext:
    return ToolContext(workdir=ws, session_id="s1", store=None)


@pytest.fixture
def registry() -> ToolRegistry:
    return default_registry()


def call(registry: ToolRegistry, context: ToolContext, name: str, **arguments: Any) -> ToolResult:
    return registry.call(name, json.dumps(arguments), context)


class Echo:
    """A tool for registry tests: echoes its `text` argument."""

    def __init__(self, name: str, visibility: Visibility = Visibility.DIRECT, description: str = "") -> None:
        self.spec = ToolSpec(
            name=name,
            description=description or f"echo tool {name}",
            parameters={
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "count": {"type": "integer"},
                    "ratio": {"type": "number"},
                    "flag": {"type": "boolean"},
                    "items": {"type": "array"},
                    "options": {"type": "object"},
                },
                "required": ["text"],
            },
            visibility=visibility,
        )
        self.seen: list[Mapping[str, Any]] = []

    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        self.seen.append(arguments)
        return ToolResult(content=str(arguments["text"]), metadata={"echoed": True})


class Crash:
    spec = ToolSpec(name="crash", description="always fails", parameters={"type": "object", "properties": {}})

    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        raise RuntimeError("disk on fire")


def names(schemas: list[dict[str, Any]]) -> list[str]:
    return [schema["function"]["name"] for schema in schemas]


def test_tools_package_is_headless() -> None:
    """DESIGN §1: the runtime never imports textual, rich or litellm."""
    script = "import sys, foya_tui.runtime.tools; print(' '.join(sorted(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    modules = loaded.stdout.split()
    for name in ("textual", "rich", "litellm"):
        assert not any(m == name or m.startswith(name + ".") for m in modules), name


# -- registry ------------------------------------------------------------------------------------


def test_schema_is_openai_tools_format() -> None:
    spec = Echo("echo").spec
    assert spec.schema() == {
        "type": "function",
        "function": {"name": "echo", "description": "echo tool echo", "parameters": dict(spec.parameters)},
    }


def test_visible_schemas_direct_deferred_hidden_in_registration_order(context: ToolContext) -> None:
    """X-9: direct always, deferred only when activated, hidden never; tool_search with deferred."""
    registry = ToolRegistry(
        [Echo("alpha"), Echo("later", Visibility.DEFERRED), Echo("secret", Visibility.HIDDEN), Echo("omega")]
    )
    assert names(registry.visible_schemas()) == ["alpha", "omega", TOOL_SEARCH]
    assert names(registry.visible_schemas(activated=["later", "secret"])) == [
        "alpha",
        "later",
        "omega",
        TOOL_SEARCH,
    ]
    # Hidden tools are callable by the runtime, just never shown.
    assert registry.call("secret", '{"text": "x"}', context).content == "x"


def test_no_tool_search_without_deferred_tools() -> None:
    assert names(ToolRegistry([Echo("alpha")]).visible_schemas()) == ["alpha"]


def test_tool_search_reports_activation_without_changing_the_registry(context: ToolContext) -> None:
    """X-9: tool_search returns names in metadata["activated"]; the caller activates them."""
    registry = ToolRegistry(
        [
            Echo("alpha"),
            Echo("web_fetch", Visibility.DEFERRED, "Fetch a URL over HTTP"),
            Echo("db_query", Visibility.DEFERRED, "Run an SQL query"),
            Echo("web_secret", Visibility.HIDDEN, "Fetch secrets over HTTP"),
        ]
    )
    result = call(registry, context, TOOL_SEARCH, query="FETCH http")
    assert not result.is_error
    assert result.metadata["activated"] == ["web_fetch"]
    assert "web_fetch: Fetch a URL over HTTP" in result.content
    assert names(registry.visible_schemas()) == ["alpha", TOOL_SEARCH]
    everything = call(registry, context, TOOL_SEARCH, query="")
    assert everything.metadata["activated"] == ["web_fetch", "db_query"]


def test_tool_search_without_match_lists_deferred_names(context: ToolContext) -> None:
    registry = ToolRegistry([Echo("web_fetch", Visibility.DEFERRED)])
    result = call(registry, context, TOOL_SEARCH, query="email")
    assert not result.is_error
    assert result.metadata["activated"] == []
    assert "no deferred tool matches 'email'" in result.content and "web_fetch" in result.content


def test_history_read_is_shown_only_when_asked(registry: ToolRegistry) -> None:
    """X-9: the compiler adds the reader when the projection holds a shortened result."""
    default = names(registry.visible_schemas())
    assert HISTORY_READ_TOOL not in default
    assert default == ["read_file", "list_dir", "glob", "grep", "write_file", "edit_file", "shell"]
    assert names(registry.visible_schemas(include_history_read=True))[-1] == HISTORY_READ_TOOL
    assert registry.get(HISTORY_READ_TOOL) is not None


def test_effects_drive_approval_and_snip_order(registry: ToolRegistry) -> None:
    """K-4: effects classify tools as read-only, writes or shell."""
    effects = {spec.name: spec.effect for spec in registry.specs()}
    assert effects["read_file"] is Effect.READ_ONLY and effects["grep"] is Effect.READ_ONLY
    assert effects["write_file"] is Effect.WRITE and effects["edit_file"] is Effect.WRITE
    assert effects["shell"] is Effect.SHELL
    assert effects[HISTORY_READ_TOOL] is Effect.READ_ONLY


def test_registering_a_name_twice_is_refused() -> None:
    registry = ToolRegistry([Echo("alpha")])
    with pytest.raises(ValueError):
        registry.register(Echo("alpha"))
    with pytest.raises(ValueError):
        registry.register(Echo(TOOL_SEARCH))


def test_unknown_tool_is_an_error_listing_available_tools(
    registry: ToolRegistry, context: ToolContext
) -> None:
    result = registry.call("rm_rf", "{}", context)
    assert result.is_error
    assert result.content.startswith("unknown tool 'rm_rf'; available: read_file, list_dir")
    assert HISTORY_READ_TOOL not in result.content


def test_malformed_json_arguments(registry: ToolRegistry, context: ToolContext) -> None:
    result = registry.call("read_file", '{"path": "a" "b"}', context)
    assert result.is_error
    assert result.content == "arguments for read_file are not valid JSON: Expecting ',' delimiter at char 13"


def test_arguments_that_are_not_an_object(registry: ToolRegistry, context: ToolContext) -> None:
    result = registry.call("read_file", '["README.md"]', context)
    assert result.is_error and "must be a JSON object, got array" in result.content


def test_missing_required_argument(registry: ToolRegistry, context: ToolContext) -> None:
    result = registry.call("edit_file", '{"path": "README.md"}', context)
    assert result.is_error
    assert "missing required argument 'old_string'" in result.content
    assert "missing required argument 'new_string'" in result.content


def test_wrongly_typed_arguments(context: ToolContext) -> None:
    echo = Echo("echo")
    registry = ToolRegistry([echo])
    cases = {
        '{"text": 5}': "argument 'text' must be a string, got integer",
        '{"text": "a", "count": "3"}': "argument 'count' must be an integer, got string",
        '{"text": "a", "count": true}': "argument 'count' must be an integer, got boolean",
        '{"text": "a", "count": 1.5}': "argument 'count' must be an integer, got number",
        '{"text": "a", "flag": "yes"}': "argument 'flag' must be a boolean, got string",
        '{"text": "a", "items": {}}': "argument 'items' must be an array, got object",
        '{"text": "a", "options": []}': "argument 'options' must be an object, got array",
    }
    for raw, message in cases.items():
        result = registry.call("echo", raw, context)
        assert result.is_error and message in result.content, raw
    assert echo.seen == []
    ok = registry.call("echo", '{"text": "a", "ratio": 2, "count": 3, "flag": false}', context)
    assert not ok.is_error


def test_null_optional_argument_counts_as_absent(context: ToolContext) -> None:
    echo = Echo("echo")
    result = ToolRegistry([echo]).call("echo", '{"text": "a", "count": null}', context)
    assert not result.is_error and echo.seen == [{"text": "a"}]


def test_empty_arguments_mean_an_empty_object(registry: ToolRegistry, context: ToolContext) -> None:
    result = registry.call("list_dir", "", context)
    assert not result.is_error and "README.md" in result.content


def test_a_crashing_tool_becomes_an_error_result(context: ToolContext) -> None:
    result = ToolRegistry([Crash()]).call("crash", "{}", context)
    assert result.is_error
    assert result.content == "tool crash failed: RuntimeError: disk on fire"
    assert result.metadata["duration"] >= 0


def test_call_measures_duration_and_keeps_tool_metadata(context: ToolContext) -> None:
    result = ToolRegistry([Echo("echo")]).call("echo", '{"text": "hi"}', context)
    assert result.content == "hi"
    assert result.metadata["echoed"] is True
    assert isinstance(result.metadata["duration"], float)


# -- confinement ---------------------------------------------------------------------------------


def test_path_outside_the_workspace_via_dotdot(
    registry: ToolRegistry, context: ToolContext, ws: Path
) -> None:
    (ws.parent / "outside.txt").write_text("secret", encoding="utf-8")
    result = call(registry, context, "read_file", path="../outside.txt")
    assert result.is_error and result.content.startswith("path escapes the workspace: '../outside.txt'")
    sneaky = call(registry, context, "read_file", path="src/../../outside.txt")
    assert sneaky.is_error and "escapes the workspace" in sneaky.content


def test_path_outside_the_workspace_via_absolute_path(
    registry: ToolRegistry, context: ToolContext, ws: Path
) -> None:
    outside = ws.parent / "outside.txt"
    outside.write_text("secret", encoding="utf-8")
    result = call(registry, context, "read_file", path=str(outside))
    assert result.is_error and "escapes the workspace" in result.content
    inside = call(registry, context, "read_file", path=str(ws / "README.md"))
    assert not inside.is_error and "Hello World" in inside.content


def test_path_outside_the_workspace_via_symlink(
    registry: ToolRegistry, context: ToolContext, ws: Path
) -> None:
    outside = ws.parent / "elsewhere"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret", encoding="utf-8")
    (ws / "link.txt").symlink_to(outside / "secret.txt")
    (ws / "linkdir").symlink_to(outside, target_is_directory=True)
    for path in ("link.txt", "linkdir/secret.txt"):
        result = call(registry, context, "read_file", path=path)
        assert result.is_error and "escapes the workspace" in result.content, path
    written = call(registry, context, "write_file", path="linkdir/new.txt", content="x")
    assert written.is_error and "escapes the workspace" in written.content
    assert not (outside / "new.txt").exists()
    listed = call(registry, context, "list_dir", path="linkdir")
    assert listed.is_error
    # grep does not follow the link out either.
    assert call(registry, context, "grep", pattern="secret").content == "no matches for 'secret' in ."


def test_symlink_inside_the_workspace_is_fine(registry: ToolRegistry, context: ToolContext, ws: Path) -> None:
    (ws / "readme-link").symlink_to(ws / "README.md")
    result = call(registry, context, "read_file", path="readme-link")
    assert not result.is_error and "Hello World" in result.content
    # Walking tools name the link as found, not its target.
    assert "readme-link" in call(registry, context, "glob", pattern="readme*").content
    assert "readme-link:2: Hello World" in call(registry, context, "grep", pattern="World").content


# -- read_file -----------------------------------------------------------------------------------


def test_read_file_numbers_lines_and_says_how_to_read_more(
    registry: ToolRegistry, context: ToolContext, ws: Path
) -> None:
    (ws / "ten.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)), encoding="utf-8")
    whole = call(registry, context, "read_file", path="ten.txt")
    assert whole.content.splitlines()[0] == "ten.txt: lines 1–10 of 10"
    assert whole.content.splitlines()[1] == "     1→line 1"
    page = call(registry, context, "read_file", path="ten.txt", offset=3, limit=2)
    assert page.content.splitlines() == [
        "ten.txt: lines 3–4 of 10; to read more, call read_file with offset=5",
        "     3→line 3",
        "     4→line 4",
    ]
    assert page.metadata["truncated"] is True


def test_read_file_refuses_binary_files(registry: ToolRegistry, context: ToolContext, ws: Path) -> None:
    (ws / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    result = call(registry, context, "read_file", path="image.png")
    assert result.is_error
    assert result.content == "image.png is a binary file (it contains NUL bytes); read_file shows text only"


def test_read_file_replaces_invalid_utf8_and_says_so(
    registry: ToolRegistry, context: ToolContext, ws: Path
) -> None:
    (ws / "latin1.txt").write_bytes("café\nnaïve\n".encode("latin-1"))
    result = call(registry, context, "read_file", path="latin1.txt")
    assert not result.is_error
    assert "caf�" in result.content and "na�ve" in result.content
    assert "not valid UTF-8" in result.content


def test_read_file_cuts_a_one_megabyte_line(registry: ToolRegistry, context: ToolContext, ws: Path) -> None:
    (ws / "minified.js").write_text("short\n" + "x" * 1_000_000 + "\nend\n", encoding="utf-8")
    result = call(registry, context, "read_file", path="minified.js")
    assert not result.is_error
    lines = result.content.splitlines()
    assert lines[2].startswith("     2→" + "x" * READ_LINE_MAX_CHARS + " … [line cut: 1,000,000 bytes]")
    assert lines[3] == "     3→end"
    assert len(result.content) < 3 * READ_LINE_MAX_CHARS
    assert "1 line(s) longer than" in result.content


def test_read_file_strips_terminal_escapes(registry: ToolRegistry, context: ToolContext, ws: Path) -> None:
    (ws / "log.txt").write_text("\x1b[31mred\x1b[0m \x1b]0;pwned\x07title\x08\n", encoding="utf-8")
    result = call(registry, context, "read_file", path="log.txt")
    assert "     1→red title" in result.content
    assert "\x1b" not in result.content and "\x07" not in result.content


def test_read_file_output_is_bounded(registry: ToolRegistry, context: ToolContext, ws: Path) -> None:
    (ws / "wide.txt").write_text(("y" * 1500 + "\n") * 2000, encoding="utf-8")
    result = call(registry, context, "read_file", path="wide.txt")
    assert len(result.content) <= READ_OUTPUT_MAX_CHARS + 1000
    first_line = result.content.splitlines()[0]
    assert first_line.startswith("wide.txt: lines 1–") and "of 2000; to read more" in first_line
    assert "output limit" in result.content


def test_read_file_offset_past_the_end(registry: ToolRegistry, context: ToolContext) -> None:
    result = call(registry, context, "read_file", path="README.md", offset=9)
    assert result.is_error and result.content == "offset 9 is past the end of README.md: it has 2 lines"


def test_read_file_missing_file_directory_and_empty_file(
    registry: ToolRegistry, context: ToolContext, ws: Path
) -> None:
    assert call(registry, context, "read_file", path="nope.txt").content == "no such file: nope.txt"
    assert "is a directory; use list_dir" in call(registry, context, "read_file", path="src").content
    (ws / "empty.txt").write_text("", encoding="utf-8")
    assert call(registry, context, "read_file", path="empty.txt").content == "empty.txt is empty (0 lines)"


def test_direct_run_never_raises(context: ToolContext, registry: ToolRegistry) -> None:
    tool = registry.get("read_file")
    assert tool is not None
    result = tool.run({"path": "../x"}, context)
    assert result.is_error


# -- list_dir, glob, grep ------------------------------------------------------------------------


def test_list_dir_sorts_marks_dirs_and_shows_sizes(registry: ToolRegistry, context: ToolContext) -> None:
    result = call(registry, context, "list_dir")
    assert result.content.splitlines() == ["./: 3 entries", ".git/", "src/", "README.md  (19 B)"]
    assert call(registry, context, "list_dir", path="src").content.splitlines() == [
        "src/: 2 entries",
        "pkg/",
        "main.py  (42 B)",
    ]


def test_list_dir_is_bounded(registry: ToolRegistry, context: ToolContext, ws: Path) -> None:
    many = ws / "many"
    many.mkdir()
    for i in range(LIST_MAX_ENTRIES + 20):
        (many / f"f{i:04}.txt").touch()
    result = call(registry, context, "list_dir", path="many")
    assert result.content.splitlines()[-1] == "… 20 more"
    assert result.metadata["truncated"] is True


def test_glob_matches_sorted_relative_paths_and_skips_git(
    registry: ToolRegistry, context: ToolContext
) -> None:
    result = call(registry, context, "glob", pattern="**/*.py")
    assert result.content.splitlines() == [
        "2 paths match '**/*.py' under .",
        "src/main.py",
        "src/pkg/util.py",
    ]
    assert call(registry, context, "glob", pattern="*.{md,txt}").content.splitlines()[1:] == ["README.md"]
    scoped = call(registry, context, "glob", pattern="*.py", path="src/pkg")
    assert scoped.content.splitlines()[1:] == ["src/pkg/util.py"]


def test_glob_is_bounded_and_refuses_escapes(registry: ToolRegistry, context: ToolContext, ws: Path) -> None:
    many = ws / "many"
    many.mkdir()
    for i in range(GLOB_MAX_RESULTS + 5):
        (many / f"f{i:04}.txt").touch()
    result = call(registry, context, "glob", pattern="many/*.txt")
    assert result.content.splitlines()[-1] == "… 5 more; narrow the pattern or path"
    assert call(registry, context, "glob", pattern="../*").is_error
    assert call(registry, context, "glob", pattern="*", path="..").is_error


def test_grep_returns_path_line_text(registry: ToolRegistry, context: ToolContext) -> None:
    result = call(registry, context, "grep", pattern="hello")
    assert result.content.splitlines() == ["src/main.py:4:     print('hello')"]
    folded = call(registry, context, "grep", pattern="hello", ignore_case=True)
    assert folded.content.splitlines() == [
        "README.md:2: Hello World",
        "src/main.py:4:     print('hello')",
        "src/pkg/util.py:2:     return 'Hello'",
    ]
    filtered = call(registry, context, "grep", pattern="hello", ignore_case=True, glob="*.py", path="src")
    assert [line.split(":")[0] for line in filtered.content.splitlines()] == [
        "src/main.py",
        "src/pkg/util.py",
    ]
    anchored = call(registry, context, "grep", pattern="^def")
    assert anchored.content.splitlines() == ["src/main.py:3: def main():", "src/pkg/util.py:1: def helper():"]


def test_grep_skips_binary_files_and_cuts_long_lines(
    registry: ToolRegistry, context: ToolContext, ws: Path
) -> None:
    (ws / "blob.bin").write_bytes(b"needle\x00\x01\x02")
    (ws / "long.txt").write_text("needle" + "z" * 5000 + "\n", encoding="utf-8")
    result = call(registry, context, "grep", pattern="needle")
    lines = result.content.splitlines()
    assert lines[0].startswith("long.txt:1: needle") and lines[0].endswith("[line cut: 5,006 characters]")
    assert len(lines[0]) < 600
    assert lines[1] == "[1 binary file(s) skipped]"


def test_grep_invalid_regex_is_a_clear_error(registry: ToolRegistry, context: ToolContext) -> None:
    result = call(registry, context, "grep", pattern="foo(")
    assert result.is_error
    assert result.content.startswith("invalid regular expression 'foo(': missing ), unterminated subpattern")


def test_grep_is_bounded(registry: ToolRegistry, context: ToolContext, ws: Path) -> None:
    (ws / "many.txt").write_text("match\n" * (GREP_MAX_MATCHES + 50), encoding="utf-8")
    result = call(registry, context, "grep", pattern="match", path="many.txt")
    lines = result.content.splitlines()
    assert len(lines) == GREP_MAX_MATCHES + 1
    assert lines[-1].startswith(f"[stopped at {GREP_MAX_MATCHES} matches")


# -- write_file and edit_file --------------------------------------------------------------------


def test_write_file_creates_parents_and_reports_bytes(
    registry: ToolRegistry, context: ToolContext, ws: Path
) -> None:
    result = call(registry, context, "write_file", path="new/deep/file.txt", content="héllo\n")
    assert result.content == "wrote 7 bytes to new/deep/file.txt (created)"
    assert (ws / "new" / "deep" / "file.txt").read_text(encoding="utf-8") == "héllo\n"
    again = call(registry, context, "write_file", path="new/deep/file.txt", content="")
    assert again.content == "wrote 0 bytes to new/deep/file.txt (overwrote)"


def test_edit_file_replaces_exactly_once(registry: ToolRegistry, context: ToolContext, ws: Path) -> None:
    (ws / "crlf.txt").write_bytes(b"alpha\r\nbeta\r\ngamma\r\n")
    result = call(registry, context, "edit_file", path="crlf.txt", old_string="beta", new_string="BETA")
    assert not result.is_error and result.content == "replaced 1 occurrence in crlf.txt"
    assert (ws / "crlf.txt").read_bytes() == b"alpha\r\nBETA\r\ngamma\r\n"


def test_edit_file_missing_old_string(registry: ToolRegistry, context: ToolContext, ws: Path) -> None:
    before = (ws / "README.md").read_bytes()
    result = call(registry, context, "edit_file", path="README.md", old_string="Goodbye", new_string="x")
    assert result.is_error and result.content.startswith("old_string not found in README.md")
    assert (ws / "README.md").read_bytes() == before


def test_edit_file_ambiguous_old_string(registry: ToolRegistry, context: ToolContext, ws: Path) -> None:
    (ws / "dup.txt").write_text("x = 1\nx = 1\nx = 1\n", encoding="utf-8")
    result = call(registry, context, "edit_file", path="dup.txt", old_string="x = 1", new_string="x = 2")
    assert result.is_error
    assert result.content.startswith("old_string found 3 times in dup.txt; add surrounding context")
    assert "replace_all" in result.content
    everywhere = call(
        registry,
        context,
        "edit_file",
        path="dup.txt",
        old_string="x = 1",
        new_string="x = 2",
        replace_all=True,
    )
    assert everywhere.content == "replaced 3 occurrences in dup.txt"
    assert everywhere.metadata["replacements"] == 3


# -- shell ---------------------------------------------------------------------------------------


def live_group_members(pgid: int) -> list[int]:
    """Processes of a process group that are still running (zombies waiting for a reaper are dead)."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            alive.append(int(stat.parent.name))
    return alive


def wait_until_dead(pgid: int, within: float = 2.0) -> list[int]:
    deadline = time.monotonic() + within
    while (alive := live_group_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return alive


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def test_shell_runs_in_the_workspace(registry: ToolRegistry, context: ToolContext, ws: Path) -> None:
    result = call(registry, context, "shell", command="pwd; echo out; echo err >&2; cat")
    assert not result.is_error
    assert result.content.splitlines() == [os.path.realpath(ws), "out", "err"]
    assert result.metadata["exit_code"] == 0


def test_shell_nonzero_exit_is_an_error_with_output(registry: ToolRegistry, context: ToolContext) -> None:
    result = call(registry, context, "shell", command="echo partial; exit 3")
    assert result.is_error
    assert result.content == "partial\n[exit code 3]"
    assert result.metadata["exit_code"] == 3


def test_shell_strips_terminal_escapes(registry: ToolRegistry, context: ToolContext) -> None:
    result = call(
        registry, context, "shell", command=r"printf '\033[1;31mred\033[0m\r\n\033]0;title\007done\n'"
    )
    assert result.content == "red\ndone\n"


def test_shell_output_of_ten_megabytes_is_bounded(registry: ToolRegistry, context: ToolContext) -> None:
    result = call(
        registry, context, "shell", command="head -c 10000000 /dev/zero | tr '\\0' a; echo; echo END"
    )
    assert not result.is_error
    assert result.metadata["output_bytes"] == 10_000_005
    assert result.metadata["truncated"] is True
    assert len(result.content) < SHELL_OUTPUT_HEAD_BYTES + SHELL_OUTPUT_TAIL_BYTES + 200
    assert "bytes of output cut" in result.content
    assert result.content.startswith("aaaa") and result.content.endswith("a\nEND\n")


@needs_proc
def test_shell_timeout_kills_the_process_group(registry: ToolRegistry, context: ToolContext) -> None:
    start = time.monotonic()
    result = call(registry, context, "shell", command="echo $$; sleep 30 & sleep 30", timeout=1)
    elapsed = time.monotonic() - start
    assert result.is_error
    assert result.content.startswith("timed out after 1 s; the command and its children were killed")
    assert result.metadata["timed_out"] is True
    assert 0.9 <= elapsed < 20.0  # killed at its timeout, not after the 30 s sleep
    pgid = int(result.content.splitlines()[1])
    assert wait_until_dead(pgid) == []


@needs_proc
def test_shell_cancel_kills_the_process_group(ws: Path, registry: ToolRegistry) -> None:
    cancel = CancelToken()
    context = ToolContext(workdir=ws, session_id="s1", store=None, cancel=cancel)
    timer = threading.Timer(0.3, cancel.cancel)
    timer.start()
    start = time.monotonic()
    result = call(registry, context, "shell", command="echo $$; sleep 30")
    timer.cancel()
    assert time.monotonic() - start < 20.0  # stopped by the cancel, not after the 30 s sleep
    assert result.is_error and result.metadata["cancelled"] is True
    assert result.content.startswith("cancelled by the user")
    assert wait_until_dead(int(result.content.splitlines()[1])) == []


@needs_proc
def test_shell_does_not_wait_for_background_children(registry: ToolRegistry, context: ToolContext) -> None:
    """The call ends with the shell; a background child keeps running (and holding the pipe)."""
    start = time.monotonic()
    result = call(registry, context, "shell", command="echo $$; sleep 30 & echo $!")
    assert time.monotonic() - start < 20.0  # returned with the shell, not after the child's 30 s
    pgid, child = (int(line) for line in result.content.splitlines())
    # Also proves that `live_group_members` sees a live member, so the kill tests mean something.
    assert live_group_members(pgid) == [child]
    os.kill(child, 9)


def test_shell_timeout_argument_must_be_positive(registry: ToolRegistry, context: ToolContext) -> None:
    result = call(registry, context, "shell", command="true", timeout=0)
    assert result.is_error and "timeout must be a positive number" in result.content

"""Provides snapshot tests of tool calls in the conversation: collapsed and expanded tool blocks, the
shortened-result badge and the approval dialog (regenerate with `--snapshot-update`). All at
120×34, on the fixed scene; tool durations are fixed at zero, so every ✓ reads "<0.1 s".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from snapshot_scene import fixed_surroundings, make_app, open_runtime, send, wait_until, wait_until_ready
from textual.pilot import Pilot

from foya_tui.runtime.model import ToolCall
from foya_tui.runtime.runtime import Runtime
from foya_tui.ui.app import FoyaApp
from foya_tui.ui.screens.approval import ApprovalScreen
from foya_tui.ui.widgets.tool_block import ToolBlock
from tests.fakes.scripted import ScriptedClient

WIDE = (120, 34)
EXPLORE = "what files are in this project?"


@pytest.fixture
def scripted_scene(tmp_path: Path) -> Iterator[Callable[..., Runtime]]:
    """Make a Runtime on the fixed scene whose provider follows a script (one per test)."""
    opened: list[Runtime] = []
    with fixed_surroundings():

        def make(*steps: tuple[ToolCall, ...] | str, approval_mode: str | None = None) -> Runtime:
            runtime = open_runtime(tmp_path, client=ScriptedClient(*steps), approval_mode=approval_mode)
            opened.append(runtime)
            return runtime

        try:
            yield make
        finally:
            for runtime in opened:
                runtime.close()


def tool_blocks(pilot: Pilot[None]) -> list[ToolBlock]:
    app = pilot.app
    assert isinstance(app, FoyaApp)
    return list(app.conversation.messages.query(ToolBlock))


async def show_the_tools(pilot: Pilot[None]) -> None:
    """Scroll so the turn's first tool block is at the top (the reply below it is long)."""
    first = tool_blocks(pilot)[0]
    app = pilot.app
    assert isinstance(app, FoyaApp)
    messages = app.conversation.messages
    messages.scroll_to_widget(first.parent or first, animate=False, top=True, immediate=True)
    await pilot.pause()


def test_exploration_with_collapsed_tool_blocks(snap_compare, scene_runtime: Runtime) -> None:
    """After "what files are in this project?": inside the teal "foya" bar, two one-line tool
    blocks, "▶ list_dir  path=." and "▶ read_file  path=README.md", each ending in a green
    "✓ <0.1 s" at the right; a blank line, then in the same bar the simulator's Markdown reply
    quoting what the tools found. Nothing is expanded and no badge shows. The header ends with a
    dim "approval: ask"."""

    async def run_before(pilot: Pilot[None]) -> None:
        await send(pilot, EXPLORE)
        await show_the_tools(pilot)

    assert snap_compare(make_app(scene_runtime), terminal_size=WIDE, run_before=run_before)


def test_one_tool_block_expanded(snap_compare, scene_runtime: Runtime) -> None:
    """The same turn with the read_file block focused and expanded (Enter): its line starts with
    "▼" on an accent background; below it a dim "arguments" over a shaded {"path": "README.md"},
    a dim "result · seq 7 · 102 characters · 4 lines · <0.1 s" and the shaded output: the
    read_file header and the README's numbered lines ("1→# Demo project" …), shown literally.
    list_dir stays collapsed; the footer offers "⏎ expand" and "o full text", then the message's keys
    "c copy", "r rewind to here" and "f fork from here" (the last entry, quit, cut to "q")."""

    async def run_before(pilot: Pilot[None]) -> None:
        await send(pilot, EXPLORE)
        block = tool_blocks(pilot)[1]
        block.focus()
        await pilot.press("enter")
        await pilot.pause()
        await show_the_tools(pilot)

    assert snap_compare(make_app(scene_runtime), terminal_size=WIDE, run_before=run_before)


SHELL_SEQ = (ToolCall("sh1", "shell", json.dumps({"command": "seq 1 5000"})),)


def test_a_shortened_result_shows_its_badge(snap_compare, scripted_scene: Callable[..., Runtime]) -> None:
    """A shell call ("▶ shell  seq 1 5000", green ✓) whose 23 KB output is too big for
    foya-sim/small's budget, so the model sees it shortened: under the block a yellow line
    "↳ 23 KB shortened · sha256 23f90f8b… · open", and the meter lists the shortened result as a
    notice. The reply "Counted to 5,000." follows in the same bar; the header ends with
    "approval: auto" (no dialog was needed)."""
    runtime = scripted_scene(SHELL_SEQ, "Counted to 5,000.", approval_mode="auto")
    assert snap_compare(
        make_app(runtime),
        terminal_size=WIDE,
        run_before=lambda pilot: send(pilot, "count to 5000 in the shell"),
    )


WRITE_NOTES = (
    ToolCall(
        "w1",
        "write_file",
        json.dumps({"path": "notes.md", "content": "# Notes\n\n- [bold]not markup[/bold]\n- second line\n"}),
    ),
)


def test_the_approval_dialog(snap_compare, scripted_scene: Callable[..., Runtime]) -> None:
    """A write asks first: over the dimmed conversation, a dialog with a yellow rounded border
    titled "Approve a tool call?" and "approval: ask" at the bottom right; a bold "write_file"
    followed by "writes files"; the arguments as pretty JSON on a shaded panel (the content as one
    JSON string, "[bold]not markup[/bold]" shown literally); three buttons "Allow once (a)" (teal),
    "Allow for this session (s)" and "Deny (d)" (red, focused); a dim help line "esc denies and
    stops the turn · d denies and lets the turn go on". Behind it, the "foya" bar shows
    "▶ write_file  path=notes.md  content=# Notes - [bold]not markup[/bold] - sec…" ending in a dim
    "…" (waiting for the answer)."""

    async def run_before(pilot: Pilot[None]) -> None:
        await wait_until_ready(pilot)
        app = pilot.app
        assert isinstance(app, FoyaApp)
        await pilot.press(*"write my notes", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen))

    app = make_app(scripted_scene(WRITE_NOTES, "Written."))
    assert snap_compare(app, terminal_size=WIDE, run_before=run_before)

"""Provides tests of tool calls in the conversation: blocks, approval, shortened results, full text.

Everything is real (Runtime, SQLite file, session loop, tools in a temporary working directory);
the simulator drives exploration, and a scripted provider drives writes, approvals and big results.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Button

from foya_tui.paths import FoyaPaths
from foya_tui.runtime.model import EventKind, ToolCall
from foya_tui.runtime.providers.client import (
    CancelToken,
)
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.tools.registry import ToolContext, ToolResult, ToolSpec
from foya_tui.settings import Settings
from foya_tui.ui.app import FoyaApp
from foya_tui.ui.approval import ApprovalAnswer, BridgeApprover
from foya_tui.ui.screens.approval import ApprovalScreen
from foya_tui.ui.screens.tool_output import PIECE_CHARS, ToolOutputScreen, find_next, prepare_text
from foya_tui.ui.widgets.message_list import history_items
from foya_tui.ui.widgets.tool_block import PREVIEW_CHARS, PREVIEW_LINES, ToolBlock, outcome_of
from tests.fakes.scripted import ScriptedClient
from tests.ui.screen_text import visible_text

SIZE = (100, 30)
FIXED_NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
Send = Callable[[Pilot[None], str], Awaitable[None]]
WaitUntil = Callable[..., Awaitable[None]]


def tool_blocks(app: FoyaApp) -> list[ToolBlock]:
    return list(app.conversation.messages.query(ToolBlock))


def call(call_id: str, name: str, **arguments: object) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=json.dumps(arguments))


@pytest.fixture
def scripted(tmp_path: Path, workdir: Path) -> Iterator[Callable[..., Runtime]]:
    """Runtimes whose provider follows a script (on foya-sim/small's window), on a temporary database."""
    opened: list[Runtime] = []

    def make(*steps: tuple[ToolCall, ...] | str, approval_mode: str | None = None) -> Runtime:
        paths = FoyaPaths(data_dir=tmp_path, config_dir=tmp_path, database=tmp_path / "foya.sqlite3")
        runtime = Runtime(
            Settings(retry_backoff=0.0),
            paths,
            client=ScriptedClient(*steps),
            workdir=workdir,
            clock=lambda: FIXED_NOW,
            approval_mode=approval_mode,
        )
        opened.append(runtime)
        return runtime

    yield make
    for runtime in opened:
        runtime.close()


@pytest.fixture
def no_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """The approval dialog answers keys at once (its grace period is tested on its own)."""
    monkeypatch.setattr(ApprovalScreen, "GRACE_SECONDS", 0.0)


def tool_results(runtime: Runtime, session_id: str) -> list[Mapping[str, Any]]:
    return [e.payload for e in runtime.parts.store.events(session_id) if e.kind is EventKind.TOOL_RESULT]


async def start_turn(pilot: Pilot[None], text: str, wait_until: WaitUntil) -> None:
    """Type and send `text` without waiting for the turn to end (it may stop to ask)."""
    app = pilot.app
    assert isinstance(app, FoyaApp)
    await wait_until(pilot, lambda: app.conversation.ready)
    await pilot.press(*text, "enter")


async def approval_shown(pilot: Pilot[None], wait_until: WaitUntil) -> ApprovalScreen:
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, ApprovalScreen))
    screen = pilot.app.screen
    assert isinstance(screen, ApprovalScreen)
    return screen


# -- blocks ----------------------------------------------------------------------------------------


async def test_exploration_shows_collapsed_blocks_that_expand(app: FoyaApp, send: Send) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "what files are in this project?")
        listing, readme = tool_blocks(app)
        assert (listing.tool_name, readme.tool_name) == ("list_dir", "read_file")
        reply = app.conversation.messages.blocks[-1]
        assert reply.role == "assistant" and reply.tools == [listing, readme]
        assert "Demo project" in reply.text  # the reply after the tools, in the same block
        for block in (listing, readme):
            assert not block.expanded and block.status.startswith("✓")
            assert block.status.endswith(" s")
        assert visible_text(readme).startswith("▶ read_file  path=README.md")
        # Two widgets a call (the block and its summary line): a long session mounts many.
        assert [len(list(block.walk_children(with_self=True))) for block in (listing, readme)] == [2, 2]

        readme.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert readme.expanded
        shown = visible_text(readme)
        assert shown.startswith("▼ read_file")
        assert '"path": "README.md"' in shown and "# Demo project" in shown
        assert "result · seq " in shown and " s" in shown

        listing.scroll_visible(animate=False, immediate=True)
        await pilot.pause()
        await pilot.click(listing.query_one(".summary"))
        await pilot.pause()
        assert listing.expanded and "README.md" in visible_text(listing)
        await pilot.press("enter")  # the clicked block took the focus
        await pilot.pause()
        assert not listing.expanded and "arguments" not in visible_text(listing)


async def test_tool_output_never_applies_markup_or_escapes(scripted, workdir: Path, send: Send) -> None:
    name = "[red]evil.txt"
    (workdir / name).write_text("[bold]x[/bold] \x1b[31mred\x1b[0m [link='x']y[/link]\n", encoding="utf-8")
    app = FoyaApp(scripted((call("c1", "read_file", path=name),), "read it"))
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "read the evil file")
        (block,) = tool_blocks(app)
        assert f"path={name}" in visible_text(block)
        block.toggle()
        await pilot.pause()
        shown = visible_text(block)
        assert "[bold]x[/bold] red [link='x']y[/link]" in shown
        assert "\x1b" not in shown and "[31m" not in shown


async def test_a_resumed_session_renders_its_tool_blocks(
    make_runtime: Callable[..., Runtime], wait_until: WaitUntil
) -> None:
    headless = make_runtime()
    session = headless.new_session()
    list(session.send("what files are in this project?"))

    app = FoyaApp(make_runtime(), session_id=session.id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.conversation.ready and len(tool_blocks(app)) == 2)
        user, reply = app.conversation.messages.blocks
        assert user.role == "user" and reply.role == "assistant"
        assert [block.tool_name for block in reply.tools] == ["list_dir", "read_file"]
        assert all(block.status.startswith("✓") for block in reply.tools)
        assert "Demo project" in reply.text
        reply.tools[1].toggle()
        await pilot.pause()
        assert "# Demo project" in visible_text(reply.tools[1])


def test_history_pairs_calls_with_results_by_group() -> None:
    """Calls are paired within each assistant message's group; an unanswered call is interrupted,
    a result nobody asked for still shows; a turn's steps share one assistant item."""
    from foya_tui.runtime.model import Event

    def event(seq: int, kind: EventKind, **payload: Any) -> Event:
        return Event(session_id="s", seq=seq, kind=kind, payload=payload, created_at="2026-11-29T12:00:00Z")

    a, b = call("x", "list_dir", path="."), call("x", "read_file", path="a")
    events = [
        event(1, EventKind.USER_MESSAGE, text="go"),
        event(2, EventKind.ASSISTANT_MESSAGE, text="looking", tool_calls=[a.to_payload()]),
        event(3, EventKind.TOOL_RESULT, tool_call_id="x", name="list_dir", content="a\n", is_error=False),
        # The same id again, in the next group: paired with this group's call, not the first one.
        event(
            4,
            EventKind.ASSISTANT_MESSAGE,
            text="",
            tool_calls=[b.to_payload(), call("y", "glob").to_payload()],
        ),
        event(5, EventKind.TOOL_RESULT, tool_call_id="x", name="read_file", content="text", is_error=False),
        event(6, EventKind.ASSISTANT_MESSAGE, text="found it", tool_calls=[]),
        event(7, EventKind.USER_MESSAGE, text="again"),
        event(8, EventKind.IMPORTED_MESSAGE, role="tool", tool_call_id="z", name="grep", content="orphan"),
    ]
    items = history_items(events)
    assert [item.role for item in items] == ["user", "assistant", "user", "tool"]
    turn = items[1]
    assert turn.text == "looking\n\nfound it"
    tools = [part for part in turn.parts if not isinstance(part, str)]
    assert [(t.name, t.outcome.seq if t.outcome else None) for t in tools] == [
        ("list_dir", 3),
        ("read_file", 5),
        ("glob", None),  # never answered: shown as interrupted
    ]
    (orphan,) = items[3].parts
    assert not isinstance(orphan, str) and orphan.outcome is not None and orphan.outcome.preview == "orphan"


# -- approval ----------------------------------------------------------------------------------------


async def test_allow_once_writes_the_file(
    scripted, workdir: Path, send: Send, wait_until: WaitUntil, no_grace: None
) -> None:
    runtime = scripted((call("w1", "write_file", path="notes.txt", content="hello [b]x[/b]"),), "written")
    app = FoyaApp(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await start_turn(pilot, "write a note", wait_until)
        dialog = await approval_shown(pilot, wait_until)
        shown = visible_text(dialog)
        assert "write_file writes files" in shown
        assert '"path": "notes.txt"' in shown and "hello [b]x[/b]" in shown
        labels = [str(button.label) for button in dialog.query(Button)]
        assert labels == ["Allow once (a)", "Allow for this session (s)", "Deny (d)"]
        (block,) = tool_blocks(app)
        assert block.status == "…"  # waiting for the answer

        await pilot.press("a")
        await wait_until(pilot, lambda: app.conversation.ready)
        assert (workdir / "notes.txt").read_text() == "hello [b]x[/b]"
        assert block.status.startswith("✓")
        assert "written" in app.conversation.messages.blocks[-1].text
        assert "approval: ask" in visible_text(app.conversation.query_one("#header"))


async def test_allow_for_the_session_is_not_asked_again(
    scripted,
    workdir: Path,
    send: Send,
    wait_until: WaitUntil,
    no_grace: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[str] = []
    decide = BridgeApprover.decide

    def counting(self: BridgeApprover, request: Any, cancel: CancelToken) -> Any:
        asked.append(request.call.name)
        return decide(self, request, cancel)

    monkeypatch.setattr(BridgeApprover, "decide", counting)
    runtime = scripted(
        (call("w1", "write_file", path="a.txt", content="a"),),
        (call("w2", "write_file", path="b.txt", content="b"),),
        "both written",
    )
    app = FoyaApp(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await start_turn(pilot, "write two notes", wait_until)
        await approval_shown(pilot, wait_until)
        await pilot.press("s")
        await wait_until(pilot, lambda: app.conversation.ready)
        assert asked == ["write_file"]
        assert (workdir / "a.txt").read_text() == "a" and (workdir / "b.txt").read_text() == "b"
        assert [block.status[0] for block in tool_blocks(app)] == ["✓", "✓"]


async def test_deny_is_a_refused_result_and_the_turn_goes_on(
    scripted, workdir: Path, wait_until: WaitUntil, no_grace: None
) -> None:
    runtime = scripted((call("w1", "write_file", path="no.txt", content="x"),), "understood, not writing")
    app = FoyaApp(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await start_turn(pilot, "write", wait_until)
        await approval_shown(pilot, wait_until)
        await pilot.press("d")
        await wait_until(pilot, lambda: app.conversation.ready)
        assert not (workdir / "no.txt").exists()
        (block,) = tool_blocks(app)
        assert block.status == "✗ refused"
        assert "understood, not writing" in app.conversation.messages.blocks[-1].text
        assert app.session is not None
        (result,) = tool_results(runtime, app.session.id)
        assert result["is_error"] and result["content"] == "refused: the user denied write_file"


async def test_escape_while_asking_cancels_the_turn_and_closes_every_call(
    scripted, workdir: Path, wait_until: WaitUntil, no_grace: None
) -> None:
    batch = (call("w1", "write_file", path="a.txt", content="a"), call("s1", "shell", command="echo hi"))
    runtime = scripted(batch, "never sent")
    app = FoyaApp(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await start_turn(pilot, "write and run", wait_until)
        await approval_shown(pilot, wait_until)
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.conversation.ready)
        assert not isinstance(app.screen, ApprovalScreen)
        assert not (workdir / "a.txt").exists()
        marker = app.conversation.messages.query_children(".marker").last()
        assert visible_text(marker) == "cancelled"
        assert app.session is not None
        results = tool_results(runtime, app.session.id)
        assert [r["tool_call_id"] for r in results] == ["w1", "s1"]  # no incomplete tool group
        assert all(r["is_error"] for r in results)
        assert [block.status for block in tool_blocks(app)] == ["✗ cancelled", "✗ cancelled"]


async def test_allow_keys_are_ignored_right_after_the_dialog_opens(
    scripted, workdir: Path, wait_until: WaitUntil, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key typed into the prompt just as the dialog appears must not allow anything."""
    monkeypatch.setattr(ApprovalScreen, "GRACE_SECONDS", 60.0)  # "just now", however slow the machine
    runtime = scripted((call("w1", "write_file", path="a.txt", content="a"),), "ok")
    app = FoyaApp(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await start_turn(pilot, "write", wait_until)
        dialog = await approval_shown(pilot, wait_until)
        await pilot.press("a", "s")
        await pilot.pause()
        assert app.screen is dialog and not (workdir / "a.txt").exists()
        monkeypatch.setattr(ApprovalScreen, "GRACE_SECONDS", 0.0)  # the grace period is over
        await pilot.press("a")
        await wait_until(pilot, lambda: app.conversation.ready)
        assert (workdir / "a.txt").read_text() == "a"


def test_the_approver_waits_for_the_answer_and_a_cancel_denies() -> None:
    from foya_tui.runtime.tools.approval import ApprovalRequest, Decision
    from foya_tui.runtime.tools.registry import Effect

    posted: list[Any] = []
    approver = BridgeApprover(posted.append)
    request = ApprovalRequest("s", call("c", "shell", command="ls"), Effect.SHELL)
    cancel = CancelToken()

    import threading

    threading.Timer(0.2, cancel.cancel).start()
    started = time.monotonic()
    assert approver.decide(request, cancel) is Decision.DENY
    # It waited for the cancel (0.2 s), and not for an answer that never came.
    assert 0.15 < time.monotonic() - started < 20.0
    (message,) = posted
    assert message.request is request and message.answer.given

    answer = ApprovalAnswer()
    answer.give(Decision.ALLOW_ONCE)
    answer.give(Decision.DENY)  # a late second answer is ignored
    assert answer.wait(CancelToken()) is Decision.ALLOW_ONCE


# -- shortened and full results ------------------------------------------------------------------


async def test_a_shortened_result_has_a_badge_that_opens_the_full_text(
    scripted, workdir: Path, send: Send, wait_until: WaitUntil
) -> None:
    lines = [f"row {index:05d} of the big file" for index in range(2_000)]
    (workdir / "big.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    runtime = scripted((call("r1", "read_file", path="big.txt"),), "read the big file")
    app = FoyaApp(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "read big.txt")
        (block,) = tool_blocks(app)
        assert app.session is not None and block.outcome is not None
        report = app.conversation.context_report
        assert report is not None and block.outcome.seq in report.shortened_seqs
        # Mounted the first time the model sees the result shortened.
        await wait_until(pilot, lambda: any(badge.display for badge in block.query(".badge")))
        badge = block.query_one(".badge")
        text = visible_text(badge)
        assert text.startswith("↳ ") and " KB shortened · sha256 " in text and text.endswith("· open")
        assert block.outcome.sha256[:8] in text

        await pilot.click(badge)
        await wait_until(pilot, lambda: isinstance(app.screen, ToolOutputScreen))
        viewer = app.screen
        assert isinstance(viewer, ToolOutputScreen)
        (stored,) = tool_results(runtime, app.session.id)
        assert viewer.prepared.text == prepare_text(stored["content"]).text
        assert "row 01999 of the big file" in viewer.prepared.text
        await pilot.press("slash", *"row 01500", "enter")
        await pilot.pause()
        assert viewer.view.match is not None
        assert "row 01500" in viewer.prepared.lines[viewer.view.match.line]
        await pilot.press("escape")  # closes the find box first
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, ToolOutputScreen))
        session_id = app.session.id

    # Resumed, the block shows the badge again (from the compiled report of the next request).
    resumed = FoyaApp(runtime, session_id=session_id)
    async with resumed.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: resumed.conversation.ready and len(tool_blocks(resumed)) == 1)
        (block,) = tool_blocks(resumed)
        await wait_until(pilot, lambda: any(badge.display for badge in block.query(".badge")))
        block.focus()
        await pilot.press("o")
        await wait_until(pilot, lambda: isinstance(resumed.screen, ToolOutputScreen))
        viewer = resumed.screen
        assert isinstance(viewer, ToolOutputScreen)
        assert "row 01999 of the big file" in viewer.prepared.text


class HugeOutput:
    """A read-only tool that returns ten megabytes, like `cat` of a big log."""

    spec = ToolSpec(
        name="huge_output",
        description="Return a very large text.",
        parameters={"type": "object", "properties": {}},
    )

    def __init__(self, text: str) -> None:
        self.text = text

    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        return ToolResult(content=self.text)


async def test_a_ten_megabyte_result_does_not_freeze_the_app(
    scripted, send: Send, wait_until: WaitUntil
) -> None:
    text = "\n".join(f"line {index:07d} " + "x" * 80 for index in range(110_000))
    assert len(text) > 10_000_000
    runtime = scripted((call("h1", "huge_output"),), "that was big")
    runtime.parts.registry.register(HugeOutput(text))
    app = FoyaApp(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "make a lot of output")
        (block,) = tool_blocks(app)
        assert block.outcome is not None and block.outcome.characters == len(text)
        assert len(block.outcome.preview) <= PREVIEW_CHARS
        assert block.outcome.preview.count("\n") < PREVIEW_LINES
        block.focus()
        await pilot.press("enter", "o")
        await wait_until(pilot, lambda: isinstance(app.screen, ToolOutputScreen))
        assert "… " in visible_text(block) and "lines shown" in visible_text(block)
        viewer = app.screen
        assert isinstance(viewer, ToolOutputScreen)
        assert len(viewer.prepared.lines) == 110_000
        await pilot.press("end")
        await pilot.pause()
        # What keeps the UI responsive is structural, and checked above: the block renders a bounded
        # preview, and the viewer shows prepared lines (made in a worker), not a 10 MB widget.
        # Pauses themselves are measured by hand, not asserted here (house rule: no timing asserts).


FIND_TEXT = "\n".join(
    [f"short line {index}" for index in range(50)]
    + ["x" * 300 + " needle far to the right"]
    + [f"tail {index} needle" for index in range(3)]
)


async def open_viewer(app: FoyaApp, pilot: Pilot[None], wait_until: WaitUntil) -> ToolOutputScreen:
    await wait_until(pilot, lambda: app.conversation.ready)
    viewer = ToolOutputScreen("full text", "facts", prepare_text(FIND_TEXT))
    app.push_screen(viewer)
    await wait_until(pilot, lambda: app.screen is viewer and viewer.is_mounted and viewer.view.size.width > 0)
    return viewer


async def test_find_wraps_a_long_line_instead_of_scrolling_sideways(
    app: FoyaApp, wait_until: WaitUntil
) -> None:
    async with app.run_test(size=SIZE) as pilot:
        viewer = await open_viewer(app, pilot, wait_until)
        await pilot.press("slash", *"needle", "enter")
        await wait_until(pilot, lambda: viewer.view.match is not None)
        assert viewer.view.match.line == 50 and viewer.view.scroll_offset.x == 0
        shown = visible_text(viewer.view)
        # The lines around the match keep their text (a sideways scroll showed them blank), and the
        # long line continues on the next rows, the match among them.
        assert "short line 49" in shown and "needle far to the right" in shown
        assert viewer.view.virtual_size.width <= viewer.view.size.width


async def test_n_and_enter_go_to_the_next_match_and_type_nothing_into_the_find_box(
    app: FoyaApp, wait_until: WaitUntil
) -> None:
    from textual.widgets import Input

    async with app.run_test(size=SIZE) as pilot:
        viewer = await open_viewer(app, pilot, wait_until)
        await pilot.press("slash", *"needle", "enter")
        await wait_until(pilot, lambda: viewer.view.match is not None)
        find = viewer.query_one("#output-find", Input)
        assert app.focused is viewer.view and find.display  # the box stays, showing the query
        await pilot.press("n")
        await wait_until(pilot, lambda: viewer.view.match is not None and viewer.view.match.line == 51)
        await pilot.press("enter")
        await wait_until(pilot, lambda: viewer.view.match is not None and viewer.view.match.line == 52)
        assert find.value == "needle"
        await pilot.press("slash")  # back into the box to change the query
        assert app.focused is find


@pytest.mark.parametrize("size", [(100, 30), (60, 14)])
async def test_the_find_box_fits_inside_the_dialog(
    app: FoyaApp, wait_until: WaitUntil, size: tuple[int, int]
) -> None:
    from textual.widgets import Input

    async with app.run_test(size=size) as pilot:
        viewer = await open_viewer(app, pilot, wait_until)
        await pilot.press("slash")
        find = viewer.query_one("#output-find", Input)
        await wait_until(pilot, lambda: find.region.height > 0)
        inside = viewer.query_one("#output-dialog").content_region
        assert inside.contains_region(find.region), (find.region, inside)
        assert inside.contains_region(viewer.query_one("#output-help").region)


def test_prepared_text_cuts_long_lines_and_finds_across_them() -> None:
    content = "short\n" + "y" * (PIECE_CHARS * 2 + 10) + "needle\nlast\x1b[31m line\n"
    prepared = prepare_text(content)
    assert prepared.lines[0] == "short" and prepared.lines[-1] == "last line"
    assert len(prepared.lines) == 5 and prepared.width == PIECE_CHARS
    match = find_next(prepared, "NEEDLE", 0)
    assert match is not None and prepared.lines[match.line][match.start : match.end] == "needle"
    again = find_next(prepared, "needle", match.offset + 1)
    assert again == match  # wraps round to the only match
    assert find_next(prepared, "absent", 0) is None


def test_outcome_preview_is_bounded_and_clean() -> None:
    content = "\x1b[31mred\x1b[0m\n" + "line\n" * 10_000
    outcome = outcome_of(7, content, False, {"duration": 0.2})
    assert outcome.preview.startswith("red\n") and outcome.preview.count("\n") == PREVIEW_LINES - 1
    assert not outcome.complete and outcome.lines == 10_001 and outcome.characters == len(content)


def test_every_tool_binding_has_an_id_and_a_tooltip() -> None:
    from textual.binding import Binding

    for owner in (ToolBlock, ApprovalScreen, ToolOutputScreen):
        for binding in owner.BINDINGS:
            assert isinstance(binding, Binding)
            assert binding.id and binding.tooltip, f"{owner.__name__} {binding.key}"


async def test_a_shell_approval_says_plainly_how_confined_the_shell_is(
    scripted, workdir: Path, wait_until: WaitUntil
) -> None:
    """Without bubblewrap the shell is only approved, not confined, and the dialog says so."""
    from foya_tui.runtime.tools.sandbox import shell_confinement

    runtime = scripted((call("s1", "shell", command="echo hi"),), "ok")
    app = FoyaApp(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await start_turn(pilot, "run it", wait_until)
        dialog = await approval_shown(pilot, wait_until)
        line = visible_text(dialog.query_one("#approval-confinement"))
        assert line == shell_confinement().reason
        expected = "sandbox" if shell_confinement().confined else "not confined"
        assert expected in line
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.conversation.ready)

"""Provides tests of the sessions browser (ctrl+o, `/sessions`): it lists every session with its
model, counts and status, filters as you type, opens a session in place of the open one, renames,
deletes after asking (never the open conversation), and goes back to a fork's origin; and of
`/export md`. Against a real Runtime, SQLite file and simulator."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, OptionList

from foya_tui.runtime.runtime import Runtime
from foya_tui.ui.app import FoyaApp
from foya_tui.ui.screens.confirm import ConfirmScreen
from foya_tui.ui.screens.conversation import ConversationScreen
from foya_tui.ui.screens.sessions import OPEN_NOT_DELETED, RenameScreen, SessionsScreen
from tests.ui.probes import notifications
from tests.ui.screen_text import visible_text
from tests.ui.test_fork_ui import command, forked, shown

WIDE = (120, 40)
Send = Callable[[Pilot[None], str], Awaitable[None]]
WaitUntil = Callable[..., Awaitable[None]]


def three_sessions(runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, str]:
    """A chat about a parser, one about a port, and one whose only message failed (newest)."""
    parser = runtime.new_session()
    list(parser.send("fix the parser"))
    port = runtime.new_session()
    list(port.send("remember the port 8123"))
    monkeypatch.setenv("FOYA_SIM_FAULTS", "quota")
    failed = runtime.new_session()
    list(failed.send("does this work?"))
    monkeypatch.delenv("FOYA_SIM_FAULTS")
    return parser.id, port.id, failed.id


def browser(app: FoyaApp) -> SessionsScreen:
    assert isinstance(app.screen, SessionsScreen)
    return app.screen


def rows(app: FoyaApp) -> list[str]:
    """Each listed session's two lines, as shown."""
    options = browser(app).query_one(OptionList)
    return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]


def row(app: FoyaApp, session_id: str) -> str:
    """The two lines of one session (the test clock gives every session the same time, so the
    list's order, newest first, falls back to the ids)."""
    ids = [overview.info.id for overview in browser(app).shown]
    return rows(app)[ids.index(session_id)]


async def open_browser(pilot: Pilot[None], wait_until: WaitUntil) -> SessionsScreen:
    app = pilot.app
    assert isinstance(app, FoyaApp)
    await wait_until(pilot, lambda: app.conversation.ready)
    await pilot.press("ctrl+o")
    await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen) and app.screen.shown)
    return browser(app)


async def highlight(pilot: Pilot[None], session_id: str) -> None:
    screen = browser(pilot.app)  # type: ignore[arg-type]
    ids = [overview.info.id for overview in screen.shown]
    screen.query_one(OptionList).highlighted = ids.index(session_id)
    await pilot.pause()


async def test_the_browser_lists_filters_and_opens_a_session(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch, wait_until: WaitUntil
) -> None:
    parser, port, failed = three_sessions(runtime, monkeypatch)
    app = FoyaApp(runtime, session_id=parser)
    async with app.run_test(size=WIDE) as pilot:
        screen = await open_browser(pilot, wait_until)
        listed = rows(app)
        assert len(listed) == 3 and screen.query_one(Input).has_focus
        assert row(app, failed).startswith("  does this work?\n")
        assert "no model yet" in row(app, failed)
        assert "no reply · last turn failed (quota)" in row(app, failed)
        assert row(app, parser).startswith("● fix the parser\n")  # the open one
        assert f"{parser[:6]} · foya-sim/small · updated 2026-11-29 12:00 · 3 events · 0 checkpoints" in row(
            app, parser
        )
        await pilot.press(*"port")
        await wait_until(pilot, lambda: len(rows(app)) == 1)
        assert "remember the port 8123" in rows(app)[0]
        assert "1 of 3" in str(screen.query_one("#sessions-dialog").border_title)
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.session is not None and app.session.id == port)
        await wait_until(pilot, lambda: app.conversation.ready and isinstance(app.screen, ConversationScreen))
        assert shown(app)[0] == ("user", "remember the port 8123")
        assert f"session {port[:6]}" in visible_text(app.conversation.query_one("#header"))
        assert (f"Opened session {port[:6]} (remember the port 8123).", "information") in notifications(app)
        # Escape closes the browser and changes nothing; /sessions opens it too.
        await open_browser(pilot, wait_until)
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, ConversationScreen))
        assert app.session is not None and app.session.id == port
        await pilot.press(*"/sessions", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen))


async def test_rename_in_the_browser(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch, wait_until: WaitUntil
) -> None:
    parser, port, _ = three_sessions(runtime, monkeypatch)
    app = FoyaApp(runtime, session_id=parser)
    async with app.run_test(size=WIDE) as pilot:
        await open_browser(pilot, wait_until)
        await highlight(pilot, port)
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, RenameScreen))
        title = app.screen.query_one(Input)
        assert title.value == "remember the port 8123"
        title.value = ""
        await pilot.press("enter")  # an empty title is refused in place
        assert isinstance(app.screen, RenameScreen)
        await pilot.press(*"the port", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen))
        await wait_until(pilot, lambda: any(row.startswith("  the port\n") for row in rows(app)))
        assert "renamed" in visible_text(browser(app).query_one("#sessions-help"))
    assert runtime.find_session(port).title == "the port"


async def test_delete_asks_first_and_never_takes_the_open_conversation(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch, wait_until: WaitUntil
) -> None:
    parser, port, failed = three_sessions(runtime, monkeypatch)
    app = FoyaApp(runtime, session_id=parser)
    async with app.run_test(size=WIDE) as pilot:
        await open_browser(pilot, wait_until)
        # The open conversation: refused in place, nothing asked.
        await highlight(pilot, parser)
        await pilot.press("delete")
        assert isinstance(app.screen, SessionsScreen)
        assert visible_text(browser(app).query_one("#sessions-help")) == OPEN_NOT_DELETED
        # Another one: asked first; "n" keeps it.
        await highlight(pilot, failed)
        await pilot.press("delete")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "Delete session" in visible_text(app.screen) and "2 events" in visible_text(app.screen)
        await pilot.press("n")
        await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen))
        assert len(rows(app)) == 3
        await pilot.press("delete")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen) and len(rows(app)) == 2)
        assert (f"Deleted session {failed[:6]} (2 events).", "information") in notifications(app)
        assert app.session is not None and app.session.id == parser
    assert {info.id for info in runtime.list_sessions()} == {parser, port}
    for kept in (parser, port):
        assert runtime.verify(kept).ok


async def test_back_to_the_fork_origin_from_the_palette_and_the_browser(
    runtime: Runtime, send: Send, wait_until: WaitUntil
) -> None:
    app = FoyaApp(runtime)
    async with app.run_test(size=WIDE) as pilot:
        await send(pilot, "hello")
        assert app.session is not None
        source = app.session.id
        await command(pilot, "session: fork", wait_until)
        fork = await forked(pilot, source, wait_until)
        await command(pilot, "session: back to the fork", wait_until)
        await wait_until(pilot, lambda: app.session is not None and app.session.id == source)
        await wait_until(pilot, lambda: app.conversation.ready)
        assert shown(app)[0] == ("user", "hello")
        # From the browser: ctrl+b on the fork opens its origin; on a session that is no fork, it says so.
        await open_browser(pilot, wait_until)
        await highlight(pilot, source)
        await pilot.press("ctrl+b")
        assert "not a fork" in visible_text(browser(app).query_one("#sessions-help"))
        await highlight(pilot, fork)
        assert "fork of " + source[:6] in row(app, fork)
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.session is not None and app.session.id == fork)
        await wait_until(pilot, lambda: app.conversation.ready)
        await open_browser(pilot, wait_until)
        await highlight(pilot, fork)
        await pilot.press("ctrl+b")
        await wait_until(pilot, lambda: app.session is not None and app.session.id == source)


async def test_export_md_writes_the_transcript_and_says_where(
    runtime: Runtime, send: Send, wait_until: WaitUntil, workdir: Path
) -> None:
    app = FoyaApp(runtime)
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        await pilot.press(*"/export md", "enter")
        await wait_until(pilot, lambda: any("Nothing to export" in text for text, _ in notifications(app)))
        await send(pilot, "hello <b>there</b>")
        assert app.session is not None
        await pilot.press(*"/export md", "enter")
        path = workdir / f"foya-{app.session.id[:6]}.md"
        said = (f"Transcript written to {path}", "information")
        await wait_until(pilot, lambda: said in notifications(app))
        # Also in the conversation (the line is cut to the screen's width).
        assert "\ntranscript written to /" in visible_text(app.conversation.messages)
    text = path.read_text(encoding="utf-8")
    assert "## You\n\nhello &lt;b>there&lt;/b>\n" in text and "## Assistant · foya-sim/small" in text


async def test_opening_a_session_another_foya_writes_says_so(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch, wait_until: WaitUntil
) -> None:
    parser, port, _ = three_sessions(runtime, monkeypatch)
    app = FoyaApp(runtime, session_id=parser)
    async with app.run_test(size=WIDE) as pilot:
        await open_browser(pilot, wait_until)
        await highlight(pilot, port)
        with runtime.claim(port):  # as another process holding the lease would
            await pilot.press("enter")
            await wait_until(pilot, lambda: app.session is not None and app.session.id == port)
            await wait_until(pilot, lambda: app.conversation.ready)
            warnings = [text for text, severity in notifications(app) if severity == "warning"]
            assert len(warnings) == 1 and f"session {port[:6]} is busy in another Foya" in warnings[0]
            assert "your messages are refused until it stops" in warnings[0]

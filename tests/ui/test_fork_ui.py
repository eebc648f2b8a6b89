"""Provides tests of forking from the TUI: `f` on a selected message and the palette's "session: fork
here" fork a new session that ends with that message, "session: fork" forks the whole conversation;
the fork opens in place of the source, which stays unchanged; a fork point the runtime refuses is
one line of notification. Against a real Runtime, SQLite file and simulator."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from textual.command import CommandList
from textual.pilot import Pilot

from foya_tui.runtime.model import EventKind
from foya_tui.runtime.runtime import Runtime
from foya_tui.ui.app import FoyaApp
from foya_tui.ui.screens.conversation_history import SELECT_MESSAGE
from foya_tui.ui.screens.inspector import InspectorScreen
from tests.snapshots.snapshot_scene import SceneClock, fixed_surroundings, open_runtime, pressure_history
from tests.ui.probes import notifications
from tests.ui.screen_text import visible_text

WIDE = (120, 40)
Send = Callable[[Pilot[None], str], Awaitable[None]]
WaitUntil = Callable[..., Awaitable[None]]


def header(app: FoyaApp) -> str:
    return visible_text(app.conversation.query_one("#header"))


def shown(app: FoyaApp) -> list[tuple[str, str]]:
    return [(block.role, block.text) for block in app.conversation.messages.blocks]


async def command(pilot: Pilot[None], title: str, wait_until: WaitUntil) -> None:
    await pilot.press("ctrl+p")
    await pilot.press(*title)
    await wait_until(pilot, lambda: pilot.app.screen.query_one(CommandList).option_count > 0)
    await pilot.press("enter")


async def forked(pilot: Pilot[None], source_id: str, wait_until: WaitUntil) -> str:
    """Wait until a fork of `source_id` is open and ready; returns its id."""
    app = pilot.app
    assert isinstance(app, FoyaApp)
    await wait_until(
        pilot,
        lambda: app.session is not None and app.session.id != source_id and app.conversation.ready,
    )
    assert app.session is not None
    return app.session.id


def message_kinds(runtime: Runtime, session_id: str) -> list[tuple[str, Any]]:
    """(role, text) of each imported message of a fork, as `foya import` stored it."""
    return [
        (event.payload["role"], event.payload.get("content"))
        for event in runtime.parts.store.events(session_id)
        if event.kind is EventKind.IMPORTED_MESSAGE
    ]


async def test_f_on_a_reply_forks_a_session_that_ends_with_it(
    app: FoyaApp, runtime: Runtime, send: Send, wait_until: WaitUntil
) -> None:
    async with app.run_test(size=WIDE) as pilot:
        for text in ("hello", "what files are in this project?", "thanks"):
            await send(pilot, text)
        source = app.session
        assert source is not None
        before = runtime.parts.store.events(source.id)
        reply = app.conversation.messages.blocks[3]
        assert reply.role == "assistant" and len(reply.tools) == 2 and reply.last_seq is not None
        expected = shown(app)[:4]
        tools = [len(block.tools) for block in app.conversation.messages.blocks[:4]]

        reply.focus()
        await pilot.press("f")
        fork_id = await forked(pilot, source.id, wait_until)

        # The fork holds the conversation through the reply and its tool results, and is on screen.
        assert shown(app) == expected
        assert [len(block.tools) for block in app.conversation.messages.blocks] == tools
        info = runtime.parts.store.get_session(fork_id)
        assert info.metadata["forked_from"] == {"session": source.id, "seq": reply.last_seq}
        imported = message_kinds(runtime, fork_id)
        users = [text for role, text in imported if role == "user"]
        assert users == ["hello", "what files are in this project?"]
        assert imported[-1][0] == "assistant"  # the reply's last event: its text after the tool results
        assert f"session {info.short_id} " in header(app)
        assert app.conversation.meter.reading.known
        (note,) = [text for text, severity in notifications(app) if severity == "information"]
        assert note.startswith(f"Forked session {source.info.short_id} through seq {reply.last_seq} into ")
        assert f"{source.info.short_id} is unchanged" in note and "\n" not in note
        # The source is exactly as it was.
        assert runtime.parts.store.events(source.id) == before

        # The fork is a session like any other: the next message goes to it.
        await send(pilot, "and then?")
        events = runtime.parts.store.events(fork_id)
        texts = [e.payload.get("text") for e in events if e.kind is EventKind.USER_MESSAGE]
        assert texts == ["and then?"] and shown(app)[-2] == ("user", "and then?")
        assert runtime.parts.store.events(source.id) == before


async def test_session_fork_forks_the_whole_conversation_without_the_handoff(
    tmp_path: Path, wait_until: WaitUntil
) -> None:
    with fixed_surroundings():
        clock = SceneClock()
        runtime = open_runtime(tmp_path, clock=clock)
        try:
            source_id = pressure_history(runtime, clock)
            source_events = runtime.parts.store.events(source_id)
            assert any(event.kind is EventKind.HANDOFF for event in source_events)
            app = FoyaApp(runtime, session_id=source_id)
            async with app.run_test(size=WIDE) as pilot:
                await wait_until(pilot, lambda: app.conversation.ready)
                users = [text for role, text in shown(app) if role == "user"]
                await command(pilot, "session: fork", wait_until)
                fork_id = await forked(pilot, source_id, wait_until)
                events = runtime.parts.store.events(fork_id)
                # SPEC K-1: the reminder is stripped from forks; so are the snip records (the fork's
                # budget starts afresh), and every message is there.
                assert {event.kind for event in events} == {EventKind.IMPORTED_MESSAGE}
                assert [text for role, text in shown(app) if role == "user"] == users
                assert not any(block.notes for block in app.conversation.messages.blocks)
                assert runtime.parts.store.events(source_id) == source_events
        finally:
            runtime.close()


async def test_fork_here_needs_a_selected_message(app: FoyaApp, send: Send, wait_until: WaitUntil) -> None:
    async with app.run_test(size=WIDE) as pilot:
        await send(pilot, "hello")
        source = app.session
        assert source is not None
        await command(pilot, "session: fork here", wait_until)  # the prompt has the focus
        await wait_until(pilot, lambda: bool(notifications(app)))
        assert notifications(app)[-1][0] == SELECT_MESSAGE
        assert app.session is source

        # With the user message selected, the fork ends with that message.
        user = app.conversation.messages.blocks[0]
        user.focus()
        await pilot.pause()
        await command(pilot, "session: fork here", wait_until)
        fork_id = await forked(pilot, source.id, wait_until)
        assert shown(app) == [("user", "hello")]
        runtime = app.opened_runtime
        assert runtime is not None
        assert runtime.parts.store.get_session(fork_id).metadata["forked_from"]["seq"] == user.seq


async def test_a_fork_point_the_runtime_refuses_is_one_line(
    app: FoyaApp, runtime: Runtime, send: Send, wait_until: WaitUntil
) -> None:
    async with app.run_test(size=WIDE) as pilot:
        await send(pilot, "what files are in this project?")
        source = app.session
        assert source is not None
        sessions = len(runtime.parts.store.list_sessions())
        reply = app.conversation.messages.blocks[1]
        # Its first event is the call of list_dir: a fork there would split it from its result.
        reply.last_seq = reply.seq
        reply.focus()
        await pilot.press("f")
        await wait_until(pilot, lambda: any(s == "error" for _, s in notifications(app)))
        (error,) = [text for text, severity in notifications(app) if severity == "error"]
        assert "would separate tool calls from their results" in error and "\n" not in error
        assert len(runtime.parts.store.list_sessions()) == sessions
        assert app.session is source and app.conversation.ready


async def test_a_fork_closes_the_inspector_of_the_source(
    app: FoyaApp, send: Send, wait_until: WaitUntil
) -> None:
    async with app.run_test(size=WIDE) as pilot:
        await send(pilot, "hello")
        source = app.session
        assert source is not None
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, InspectorScreen))
        await command(pilot, "session: fork", wait_until)
        await forked(pilot, source.id, wait_until)
        await wait_until(pilot, lambda: app.screen is app.conversation)

"""Provides tests of the conversation screen against a real Runtime, SQLite file and simulator."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable

import pytest
from textual.binding import Binding
from textual.color import Color
from textual.command import CommandList
from textual.pilot import Pilot

from foya_tui.runtime.context.request import RequestView
from foya_tui.runtime.model import EventKind
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.schema import UnknownSessionError
from foya_tui.runtime.session import Session
from foya_tui.runtime.updates import ReplyDelta, TurnFinished, TurnStarted
from foya_tui.settings import Settings, ToolSettings
from foya_tui.ui.app import FoyaApp, run_app
from foya_tui.ui.messages import RuntimeUpdated
from foya_tui.ui.screens.conversation import ConversationScreen
from foya_tui.ui.widgets.prompt import Prompt, placeholder
from tests.conftest import fake_settings
from tests.fakes.openai_server import FakeOpenAIServer
from tests.ui.probes import notifications
from tests.ui.screen_text import visible_text

SIZE = (100, 30)
Send = Callable[[Pilot[None], str], Awaitable[None]]


def roles(app: FoyaApp) -> list[str]:
    return [block.role for block in app.conversation.messages.blocks]


def header(app: FoyaApp) -> str:
    return visible_text(app.conversation.query_one("#header"))


async def test_hello_streams_a_reply_and_stores_the_turn(app: FoyaApp, runtime: Runtime, wait_until) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        assert "new session · foya-sim/small (simulator)" in header(app)
        await pilot.press(*"hello", "enter")
        await wait_until(pilot, lambda: len(roles(app)) == 2 and app.conversation.ready)

        user, reply = app.conversation.messages.blocks
        assert (user.role, user.text) == ("user", "hello")
        assert reply.role == "assistant"
        assert "offline simulator" in reply.text
        assert "offline simulator" in visible_text(reply)
        assert app.conversation.query_one(Prompt).text == ""

        session = app.session
        assert session is not None
        assert f"session {session.info.short_id} · foya-sim/small (simulator)" in header(app)
        events = runtime.parts.store.events(session.id)
        kinds = [event.kind for event in events]
        assert EventKind.USER_MESSAGE in kinds and EventKind.ASSISTANT_MESSAGE in kinds
        stored = next(e for e in events if e.kind is EventKind.ASSISTANT_MESSAGE)
        assert stored.payload["text"] == reply.text  # what streamed is exactly what was stored
        assert notifications(app) == []


async def test_ctrl_j_inserts_a_newline_and_does_not_send(app: FoyaApp, wait_until) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        prompt = app.conversation.query_one(Prompt)
        await pilot.press("a", "ctrl+j", "b")
        assert prompt.text == "a\nb"
        assert roles(app) == [] and app.session is None

        await pilot.press("enter")
        await wait_until(pilot, lambda: len(roles(app)) == 2 and app.conversation.ready)
        assert app.conversation.messages.blocks[0].text == "a\nb"


async def test_blank_messages_are_not_sent(app: FoyaApp, wait_until) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        await pilot.press("space", "ctrl+j", "space", "enter")
        await pilot.pause(0.2)
        assert roles(app) == []
        assert app.session is None  # nothing sent, so no session was created either


async def test_textual_markup_in_messages_is_shown_literally(app: FoyaApp, send: Send) -> None:
    text = "[bold]x[/bold] [link='x']y[/link]"
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, text)
        user, reply = app.conversation.messages.blocks
        assert text in visible_text(user)
        # The simulator quotes the request, so the model's Markdown carries the markup too.
        assert text in reply.text
        assert text in visible_text(reply)


async def test_escape_sequences_are_stripped(app: FoyaApp, send: Send, wait_until) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "hello \x1b[31mred\x1b[0m \x1b]0;retitled\x07world\x07")
        user = app.conversation.messages.blocks[0]
        assert user.text == "hello red world"
        assert "\x1b" not in visible_text(user) and "retitled" not in visible_text(user)

        # A reply may split an escape sequence across fragments; none of it may reach the screen.
        screen = app.conversation
        for update in (
            TurnStarted("s", 1, "r", "m"),
            ReplyDelta("s", "plain \x1b["),
            ReplyDelta("s", "1;31mbold red\x1b[0m and \x1b]8;;https://x.example\x1b"),
            ReplyDelta("s", "\\link\r"),
            ReplyDelta("s", "\nnext line"),
            TurnFinished("s", 2, "", "stop", None),
        ):
            screen.post_message(RuntimeUpdated(update))
        last = lambda: screen.messages.blocks[-1]  # noqa: E731
        await wait_until(pilot, lambda: len(roles(app)) == 3 and not last().has_class("-streaming"))
        streamed = last().text
        assert streamed == "plain bold red and link\nnext line"


async def test_the_view_follows_the_reply_unless_the_user_scrolled_up(
    app: FoyaApp, send: Send, wait_until
) -> None:
    async with app.run_test(size=SIZE) as pilot:
        messages = app.conversation.messages
        for _ in range(3):
            await send(pilot, "hello")
        assert messages.max_scroll_y > 0
        assert messages.scroll_y == messages.max_scroll_y  # followed the replies to the end

        messages.scroll_to(y=0, animate=False)  # what a mouse wheel or a key does: releases the follow
        await pilot.pause()
        for update in (TurnStarted("s", 1, "r", "m"), ReplyDelta("s", "more text\n\n" * 20)):
            app.conversation.post_message(RuntimeUpdated(update))
        await wait_until(pilot, lambda: "more text" in messages.blocks[-1].text)
        await pilot.pause(0.1)
        assert messages.scroll_y == 0  # the user's reading position was kept
        app.conversation.post_message(RuntimeUpdated(TurnFinished("s", 2, "", "stop", None)))
        await wait_until(pilot, lambda: app.conversation.ready)

        await send(pilot, "hello")  # sending jumps back to the end and follows again
        assert messages.scroll_y == messages.max_scroll_y


async def test_a_quota_error_is_one_notification_and_the_app_keeps_working(
    app: FoyaApp, send: Send, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FOYA_SIM_FAULTS", "quota")
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "hello")
        assert roles(app) == ["user"]  # the failed reply produced no text, so no empty block stays
        errors = [(message, severity) for message, severity in notifications(app) if severity == "error"]
        assert len(errors) == 1
        message = errors[0][0]
        assert "quota" in message.lower() and "\n" not in message and "Traceback" not in message
        marker = app.conversation.messages.query_children(".marker").last()
        assert visible_text(marker).startswith("✗")

        monkeypatch.delenv("FOYA_SIM_FAULTS")
        await send(pilot, "hello")
        assert roles(app) == ["user", "user", "assistant"]
        assert "offline simulator" in app.conversation.messages.blocks[-1].text


async def test_a_rate_limit_retry_is_announced_then_the_reply_arrives(
    app: FoyaApp, send: Send, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FOYA_SIM_FAULTS", "429x1")
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "hello")
        assert roles(app) == ["user", "assistant"]
        assert [severity for _, severity in notifications(app)] == ["information"]
        assert "retrying" in notifications(app)[0][0]


async def test_escape_cancels_a_waiting_turn_and_enter_does_not_send_meanwhile(
    make_runtime: Callable[..., Runtime], wait_until, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FOYA_SIM_FAULTS", "429")
    # A long backoff keeps the turn running (waiting to retry) until it is cancelled.
    app = FoyaApp(make_runtime(Settings(retry_backoff=60.0)))
    async with app.run_test(size=SIZE) as pilot:
        screen = app.conversation
        await wait_until(pilot, lambda: screen.ready)
        await pilot.press(*"hello", "enter")
        await wait_until(pilot, lambda: any("retrying" in message for message, _ in notifications(app)))
        assert screen.turn_running and screen.check_action("cancel_turn", ())
        # The prompt says which model call of the turn runs, against the (default) step limit.
        assert screen.query_one(Prompt).placeholder.startswith("step 1 of 500 · a reply is being written")

        await pilot.press(*"next", "enter")
        assert screen.query_one(Prompt).text == "next"  # kept, not sent
        assert roles(app).count("user") == 1

        await pilot.press("escape")
        await wait_until(pilot, lambda: screen.ready)
        assert roles(app) == ["user"]  # the reply never started, so its empty block is gone
        assert visible_text(screen.messages.query_children(".marker").last()) == "cancelled"
        assert not [message for message, severity in notifications(app) if severity == "error"]
        assert screen.query_one(Prompt).text == "next"
        assert not screen.check_action("cancel_turn", ())


async def test_the_prompt_counts_the_steps_and_the_step_limit_says_how_to_raise_it(
    make_runtime: Callable[..., Runtime], wait_until, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loopback server always answers with a tool call: every step shows in the prompt's line,
    and the turn that reaches the limit names the setting that raises it."""
    shown: list[str | None] = []
    set_busy = Prompt.set_busy

    def recording(prompt: Prompt, why: str | None) -> None:
        shown.append(why)
        set_busy(prompt, why)

    monkeypatch.setattr(Prompt, "set_busy", recording)
    with FakeOpenAIServer() as server:
        settings = fake_settings(server.base_url, model="openai/tools", tools=ToolSettings(max_steps=3))
        app = FoyaApp(make_runtime(settings))
        async with app.run_test(size=SIZE) as pilot:
            screen = app.conversation
            await wait_until(pilot, lambda: screen.ready)
            await pilot.press(*"read the readme forever", "enter")
            await wait_until(pilot, lambda: len(server.chat_requests) == 3 and screen.ready)
            steps = [line.split(" · ")[0] for line in shown if line and line.startswith("step ")]
            assert list(dict.fromkeys(steps)) == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
            errors = [message for message, severity in notifications(app) if severity == "error"]
            assert len(errors) == 1 and "raise [tools] max_steps in config.toml" in errors[0]
            marker = visible_text(screen.messages.query_children(".marker").last())
            assert marker.startswith("✗ stopped after 3 model calls")
            assert screen.query_one(Prompt).placeholder == placeholder()  # idle again: no step shown


async def test_resume_renders_the_stored_history(make_runtime: Callable[..., Runtime], send: Send) -> None:
    headless = make_runtime()
    session = headless.new_session()
    first = list(session.send("hello"))
    list(session.send("what files are in this project?"))
    assert isinstance(first[-1], TurnFinished)

    app = FoyaApp(make_runtime(), session_id=session.id)
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "thanks")
        blocks = app.conversation.messages.blocks
        # The simulator explores with tools, so a turn may hold tool calls and results between
        # the user's message and the final reply.
        users = [index for index, block in enumerate(blocks) if block.role == "user"]
        assert [blocks[index].text for index in users] == [
            "hello",
            "what files are in this project?",
            "thanks",
        ]
        assert blocks[1].text == first[-1].text
        second_reply = blocks[users[2] - 1]
        assert second_reply.role == "assistant"
        assert "README.md" in second_reply.text  # the simulator listed the fixed working directory
        assert blocks[-1].role == "assistant"
        assert f"session {session.info.short_id}" in header(app)
        assert app.session is not None and app.session.id == session.id


async def test_an_unknown_session_is_one_error_and_a_new_conversation(runtime: Runtime, wait_until) -> None:
    app = FoyaApp(runtime, session_id="0123456789")
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        assert [severity for _, severity in notifications(app)] == ["error"]
        assert "new session" in header(app)


async def test_session_new_starts_a_fresh_conversation(app: FoyaApp, send: Send) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "hello")
        first = app.session
        await app.action_new_session()
        await pilot.pause()
        assert roles(app) == [] and app.session is None
        assert "new session" in header(app)
        await send(pilot, "hello")
        assert app.session is not None and first is not None and app.session.id != first.id


async def test_theme_toggles_to_light_from_the_palette(app: FoyaApp, wait_until) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        assert app.theme == "foya-dark"
        await pilot.press("ctrl+p")
        await pilot.press(*"theme: toggle")
        await wait_until(pilot, lambda: app.screen.query_one(CommandList).option_count > 0)
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.theme == "foya-light")
        assert isinstance(app.screen, ConversationScreen)
        assert app.screen.styles.background == Color.parse("#FAFAF7")
        app.action_toggle_theme()
        assert app.theme == "foya-dark"


async def test_an_unknown_theme_falls_back_to_foya_dark_with_a_warning(runtime: Runtime, wait_until) -> None:
    app = FoyaApp(runtime, theme="no-such-theme")
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        assert app.theme == "foya-dark"
        assert notifications(app) == [("Unknown theme 'no-such-theme'; using foya-dark.", "warning")]


def test_every_binding_has_an_id_and_a_tooltip() -> None:
    for owner in (FoyaApp, ConversationScreen, Prompt):
        for binding in owner.BINDINGS:
            assert isinstance(binding, Binding)
            assert binding.id and binding.tooltip, f"{owner.__name__} {binding.key}"


def test_start_up_imports_neither_litellm_nor_the_tokenizer_before_the_prompt_is_ready(
    runtime: Runtime,
) -> None:
    """Run the app headless in a fresh process until it is ready, then look at what was imported.

    The meter's preview loads the tokenizer in the Bridge's worker once the prompt is ready, so
    the check runs in that worker just before the preview. LiteLLM is loaded by a worker of its
    own once the user starts typing, so that the first reply does not wait for the import."""
    script = f"""
import asyncio, sys
from pathlib import Path
from foya_tui.paths import FoyaPaths
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.context.request import RequestView
from foya_tui.runtime.schema import UnknownSessionError
from foya_tui.runtime.session import Session
from foya_tui.settings import Settings, ToolSettings
from foya_tui.ui.app import FoyaApp, run_app

from foya_tui.ui.bridge import Bridge

at_ready = []
preview = Bridge._post_preview

def probe(bridge):
    # Called by the worker right after it announced the route (the prompt is ready then).
    at_ready.extend(name for name in ("litellm", "tiktoken") if name in sys.modules)
    preview(bridge)

Bridge._post_preview = probe

async def main():
    database = Path({str(runtime.paths.database)!r})
    app = FoyaApp(Runtime(Settings(), FoyaPaths(database.parent, database.parent, database)))
    async with app.run_test() as pilot:
        while app.conversation.context_report is None:
            await pilot.pause(0.01)
        after_preview = "litellm" in sys.modules
        await pilot.press("h")  # typing the first message loads it, in a worker
        while not app.conversation.provider_ready:
            await pilot.pause(0.01)
    after_typing = "litellm" in sys.modules
    print(",".join(at_ready) or "none", after_preview, after_typing)

asyncio.run(main())
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "none False True"


async def test_a_runtime_factory_is_opened_in_a_worker_after_the_first_frame(
    make_runtime: Callable[..., Runtime], wait_until
) -> None:
    """`foya` hands the app a factory: the first frame must not wait for the runtime or SQLite."""
    opened: list[Runtime] = []
    painted_before_open: list[bool] = []

    def open_runtime() -> Runtime:
        painted_before_open.append(app.screen.is_mounted)
        opened.append(make_runtime())
        return opened[0]

    app = FoyaApp(open_runtime, settings=Settings())
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        assert painted_before_open == [True] and app.opened_runtime is opened[0]
        await pilot.press(*"hello", "enter")
        await wait_until(pilot, lambda: len(roles(app)) == 2 and app.conversation.ready)
        assert app.session is not None
        assert len(opened[0].events(app.session.id)) == 3


async def test_a_resumed_session_opens_its_runtime_in_a_worker_after_the_first_frame(
    make_runtime: Callable[..., Runtime], wait_until
) -> None:
    """`foya --session` hands the app a factory too: the database is opened after the first frame."""
    headless = make_runtime()
    session = headless.new_session()
    list(session.send("hello"))
    painted_before_open: list[bool] = []

    def open_runtime() -> Runtime:
        painted_before_open.append(app.screen.is_mounted)
        return make_runtime()

    app = FoyaApp(open_runtime, settings=Settings(), session_id=session.id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.conversation.ready and len(roles(app)) == 2)
        assert painted_before_open == [True]
        assert app.session is not None and app.session.id == session.id
        assert app.conversation.messages.blocks[0].text == "hello"


def test_run_app_checks_a_resumed_id_without_opening_the_runtime(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The id is looked up read-only before the screen starts; the runtime is left to the app."""
    session = runtime.new_session()
    list(session.send("hello"))
    started: list[FoyaApp] = []
    monkeypatch.setattr(FoyaApp, "run", lambda app, *args, **kwargs: started.append(app))
    database = runtime.paths.database
    assert run_app(database=database, session=session.info.short_id) == 0
    (app,) = started
    assert callable(app.runtime) and app.opened_runtime is None
    assert app._session_id == session.id
    for unknown in ("0000000000", "not-an-id"):
        with pytest.raises(UnknownSessionError):
            run_app(database=database, session=unknown)
    assert len(started) == 1  # an unknown id never starts the screen


async def test_the_prompt_takes_a_message_before_the_meter_is_read(
    make_runtime: Callable[..., Runtime], wait_until, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening shows the newest messages and frees the prompt first; the meter's compile (all of a
    long session that was never compacted) starts after that and holds nothing up."""
    headless = make_runtime()
    session = headless.new_session()
    list(session.send("hello"))
    release = threading.Event()
    compiles: list[str] = []
    shown_first: list[bool] = []
    """Whether the prompt was free (the page shown) when each compile began."""
    compile_next = Session.context

    def held_first(self: Session) -> RequestView:
        compiles.append(threading.current_thread().name)
        shown_first.append(app.conversation.ready)
        if len(compiles) == 1:
            release.wait(30)  # the meter's read on opening, held until the test lets it go
        return compile_next(self)

    monkeypatch.setattr(Session, "context", held_first)
    app = FoyaApp(make_runtime(), session_id=session.id)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: app.conversation.ready and len(roles(app)) == 2)
            await wait_until(pilot, lambda: len(compiles) == 1)
            assert shown_first == [True]  # the meter is read once the page is shown
            assert app.conversation.context_report is None  # and is still being read
            await pilot.press(*"again", "enter")
            await wait_until(pilot, lambda: len(roles(app)) == 4 and app.conversation.ready)
            assert app.conversation.messages.blocks[2].text == "again"
            release.set()
            await wait_until(pilot, lambda: len(compiles) > 1 and app.conversation.context_report is not None)
    finally:
        release.set()


async def test_resume_continues_on_the_model_of_the_last_reply(
    make_runtime: Callable[..., Runtime], wait_until
) -> None:
    headless = make_runtime()
    session = headless.new_session(headless.route_for("foya-sim/large"))
    list(session.send("hello"))
    app = FoyaApp(make_runtime(), session_id=session.id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        assert "foya-sim/large (simulator)" in header(app)
        assert app.session is not None and app.session.route.model == "foya-sim/large"

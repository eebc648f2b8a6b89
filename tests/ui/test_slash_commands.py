"""Provides tests of the slash commands typed in the prompt: completion with Tab, every command
running its action (the one its key and palette entry run), a mistyped command as an error line
that sends nothing, and `//` sending a literal slash. Against a real Runtime, SQLite file and the
simulator."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from textual.pilot import Pilot

from foya_tui.runtime.runtime import Runtime
from foya_tui.ui.actions import RunAction, SendText, SlashProblem, read_submission, slash_completions
from foya_tui.ui.app import FoyaApp
from foya_tui.ui.screens.compaction import CompactionScreen
from foya_tui.ui.screens.confirm import ConfirmScreen
from foya_tui.ui.screens.conversation import ConversationScreen
from foya_tui.ui.screens.help import HelpScreen
from foya_tui.ui.screens.inspector import InspectorScreen
from foya_tui.ui.screens.routes import RouteSwitcher
from foya_tui.ui.widgets.prompt import Prompt
from foya_tui.ui.widgets.slash_completions import SlashCompletions
from tests.ui.screen_text import visible_text
from tests.ui.test_compaction_ui import TURNS_WORTH_COMPACTING

Send = Callable[[Pilot[None], str], Awaitable[None]]
WaitUntil = Callable[..., Awaitable[None]]


def markers(app: FoyaApp) -> list[str]:
    return [visible_text(line) for line in app.conversation.messages.query(".marker")]


async def submit(pilot: Pilot[None], text: str, wait_until: WaitUntil) -> None:
    """Type `text` into the idle prompt and press Enter (without waiting for a turn)."""
    app = pilot.app
    assert isinstance(app, FoyaApp)
    await wait_until(pilot, lambda: app.conversation.ready)
    app.conversation.query_one(Prompt).insert(text)
    await pilot.press("enter")


# -- reading a submission (no app) -------------------------------------------------------------------


def test_a_submission_is_a_message_a_command_or_a_mistyped_command() -> None:
    assert read_submission("hello") == SendText("hello")
    assert read_submission("//compact is a word") == SendText("/compact is a word")
    assert read_submission("/etc/hosts is a file?") == SendText("/etc/hosts is a file?")
    compact = read_submission("/compact")
    assert isinstance(compact, RunAction) and compact.run == "compact"
    fallback = read_submission("  /compact --fallback ")
    assert isinstance(fallback, RunAction) and fallback.run == "compact_without_model"
    mode = read_submission("/approval read-only")
    assert isinstance(mode, RunAction) and mode.run == "set_approval('read-only')"
    assert read_submission("/approval") == SlashProblem("Usage: /approval read-only|ask|auto")
    assert read_submission("/compact now") == SlashProblem("Usage: /compact or /compact --fallback")
    unknown = read_submission("/frobnicate the logs")
    assert isinstance(unknown, SlashProblem) and "Unknown command /frobnicate" in unknown.reason


def test_completions_follow_what_is_typed() -> None:
    assert [form for form, _ in slash_completions("/comp")] == ["/compact", "/compact --fallback"]
    assert [form for form, _ in slash_completions("/compact")] == ["/compact --fallback"]
    assert [form for form, _ in slash_completions("/approval a")] == ["/approval ask", "/approval auto"]
    assert slash_completions("hello") == () and slash_completions("//x") == ()
    assert slash_completions("/help\nmore") == ()


# -- in the app ---------------------------------------------------------------------------------------


async def test_tab_completes_the_highlighted_command(app: FoyaApp, wait_until: WaitUntil) -> None:
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        completions = app.conversation.query_one(SlashCompletions)
        prompt = app.conversation.query_one(Prompt)
        assert not completions.display or not completions.open
        await pilot.press("slash", "c", "o", "m")
        await wait_until(pilot, lambda: completions.open)
        assert completions.forms == ("/compact", "/compact --fallback")
        assert "/compact --fallback" in visible_text(completions)
        await pilot.press("down")
        await pilot.press("tab")
        assert prompt.text == "/compact --fallback"
        assert app.focused is prompt  # Tab completed rather than moving the focus
        prompt.clear()
        await wait_until(pilot, lambda: not completions.open)
        await pilot.press("tab")  # without completions, Tab moves the focus as before
        assert app.focused is not prompt


async def test_an_unknown_command_is_an_error_line_and_nothing_is_sent(
    app: FoyaApp, runtime: Runtime, wait_until: WaitUntil
) -> None:
    async with app.run_test() as pilot:
        await submit(pilot, "/frobnicate", wait_until)
        await wait_until(pilot, lambda: any("Unknown command /frobnicate" in line for line in markers(app)))
        assert app.conversation.messages.blocks == []
        assert app.session is None and runtime.parts.store.list_sessions() == []
        assert app.conversation.query_one(Prompt).text == "/frobnicate"  # kept, to be fixed


async def test_a_double_slash_sends_a_message_that_starts_with_a_slash(
    app: FoyaApp, runtime: Runtime, send: Send
) -> None:
    async with app.run_test() as pilot:
        await send(pilot, "//compact means what?")
        first = app.conversation.messages.blocks[0]
        assert (first.role, first.text) == ("user", "/compact means what?")
        assert app.session is not None
        texts = [event.payload.get("text") for event in runtime.parts.store.events(app.session.id)]
        assert "/compact means what?" in texts


async def test_help_theme_model_and_context_commands(app: FoyaApp, wait_until: WaitUntil) -> None:
    async with app.run_test() as pilot:
        await submit(pilot, "/help", wait_until)
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert app.conversation.query_one(Prompt).text == ""
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, ConversationScreen))

        dark = app.current_theme.dark
        await submit(pilot, "/theme", wait_until)
        await wait_until(pilot, lambda: app.current_theme.dark is not dark)

        await wait_until(pilot, lambda: app.conversation.context_report is not None)
        await submit(pilot, "/context", wait_until)
        await wait_until(pilot, lambda: any(line.startswith("next request:") for line in markers(app)))
        line = next(line for line in markers(app) if line.startswith("next request:"))
        report = app.conversation.context_report
        assert report is not None and f"of {report.input_budget:,} input tokens" in line

        await submit(pilot, "/model", wait_until)
        await wait_until(pilot, lambda: isinstance(app.screen, RouteSwitcher))


async def test_approval_command_changes_the_mode_of_the_session_and_the_prompt(
    app: FoyaApp, runtime: Runtime, send: Send, wait_until: WaitUntil
) -> None:
    async with app.run_test() as pilot:
        await send(pilot, "hello")
        session = app.session
        assert session is not None and runtime.approval_mode == "ask"
        await submit(pilot, "/approval auto", wait_until)
        await wait_until(
            pilot, lambda: "approval: auto" in visible_text(app.conversation.query_one("#header"))
        )
        assert runtime.approval_mode == "auto"
        assert session.context().provider_request().messages[0]["content"].count("Approval mode: auto") == 1
        await submit(pilot, "/approval sometimes", wait_until)
        await wait_until(pilot, lambda: any("Usage: /approval read-only|ask|auto" in m for m in markers(app)))
        assert runtime.approval_mode == "auto"


async def test_inspect_rewind_fork_and_new_commands(
    app: FoyaApp, runtime: Runtime, send: Send, wait_until: WaitUntil
) -> None:
    async with app.run_test() as pilot:
        await send(pilot, "hello")
        source = app.session
        assert source is not None

        await submit(pilot, "/inspect", wait_until)
        await wait_until(pilot, lambda: isinstance(app.screen, InspectorScreen))
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, ConversationScreen))

        await submit(pilot, "/rewind", wait_until)
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")
        await wait_until(pilot, lambda: isinstance(app.screen, ConversationScreen))

        await submit(pilot, "/fork", wait_until)
        await wait_until(pilot, lambda: app.session is not None and app.session.id != source.id)
        await wait_until(pilot, lambda: app.conversation.ready)

        await submit(pilot, "/new", wait_until)
        await wait_until(pilot, lambda: app.session is None and app.conversation.messages.blocks == [])
        assert len(runtime.parts.store.list_sessions()) == 2


@pytest.fixture
def no_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CompactionScreen, "GRACE_SECONDS", 0.0)


async def test_compact_commands_open_the_candidate(
    app: FoyaApp, send: Send, wait_until: WaitUntil, no_grace: None
) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        for text in TURNS_WORTH_COMPACTING:
            await send(pilot, text)
        await submit(pilot, "/compact --fallback", wait_until)
        await wait_until(pilot, lambda: isinstance(app.screen, CompactionScreen))
        await pilot.press("d")
        await wait_until(pilot, lambda: app.conversation.ready)
        await submit(pilot, "/compact", wait_until)
        await wait_until(pilot, lambda: isinstance(app.screen, CompactionScreen))


async def test_quit_command_exits(app: FoyaApp, wait_until: WaitUntil) -> None:
    async with app.run_test() as pilot:
        await submit(pilot, "/quit", wait_until)
        await wait_until(pilot, lambda: app._exit_renderables is not None or not app.is_running)

"""Tests the message cursor: ↑ from an empty prompt (alt+↑ with text in it) selects the newest
message, ↑/↓ move by message and never stop on a tool call, Enter opens a message's tool calls,
`c` copies the selected message, `r` and `f` act on it, Esc returns to the prompt with what was
typed kept, and letters typed away from the prompt go into it."""

from __future__ import annotations

from foya_tui.ui.app import FoyaApp
from foya_tui.ui.screens.confirm import ConfirmScreen
from foya_tui.ui.widgets.message_block import MessageBlock
from foya_tui.ui.widgets.prompt import Prompt
from foya_tui.ui.widgets.tool_block import ToolBlock

SIZE = (100, 30)
EXPLORE = "what files are in this project?"


def selected(app: FoyaApp) -> MessageBlock | None:
    focused = app.focused
    return focused if isinstance(focused, MessageBlock) else None


def prompt_of(app: FoyaApp) -> Prompt:
    return app.conversation.query_one(Prompt)


async def test_up_and_down_move_by_message_past_the_tool_calls(app: FoyaApp, send, wait_until) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, EXPLORE)
        await send(pilot, EXPLORE)
        blocks = app.conversation.messages.blocks
        assert [b.role for b in blocks] == ["user", "assistant", "user", "assistant"]
        assert len(app.conversation.query(ToolBlock)) >= 4
        await pilot.press("up")  # the prompt is empty
        assert selected(app) is blocks[3]
        for expected in (2, 1, 0, 0):  # ↑ at the first message stays there
            await pilot.press("up")
            assert selected(app) is blocks[expected]
        for expected in (1, 2, 3):
            await pilot.press("down")
            assert selected(app) is blocks[expected]
        await pilot.press("down")  # past the newest: back to the prompt
        assert app.focused is prompt_of(app)
        # Tab from the prompt visits messages, never a tool call of a closed message.
        stops = []
        for _ in range(6):
            await pilot.press("tab")
            stops.append(app.focused)
        assert not any(isinstance(stop, ToolBlock) for stop in stops)


async def test_alt_up_leaves_a_prompt_with_text_and_esc_brings_it_back(app: FoyaApp, send) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "hello")
        prompt = prompt_of(app)
        await pilot.press(*"half a thought")
        await pilot.press("up")  # with text, ↑ stays in the prompt
        assert app.focused is prompt
        await pilot.press("alt+up")
        assert selected(app) is app.conversation.messages.blocks[-1]
        await pilot.press("up", "escape")
        assert app.focused is prompt and prompt.text == "half a thought"
        # Letters typed on a message go to the prompt, after what was there.
        await pilot.press("alt+up")
        await pilot.press(*" more")
        assert app.focused is prompt and prompt.text == "half a thought more"


async def test_enter_opens_the_tool_calls_of_the_selected_message(app: FoyaApp, send) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, EXPLORE)
        reply = app.conversation.messages.blocks[-1]
        await pilot.press("up")
        assert selected(app) is reply
        await pilot.press("enter")
        assert reply.expanded and all(tool.expanded for tool in reply.tools)
        # Open, its tool calls are stops: Tab reaches them, and ↓ still moves by message.
        await pilot.press("tab")
        assert app.focused is reply.tools[0]
        await pilot.press("up")
        assert selected(app) is app.conversation.messages.blocks[-2]
        reply.focus()
        await pilot.press("enter")
        assert not reply.expanded and not any(tool.expanded for tool in reply.tools)
        assert not any(tool.can_focus for tool in reply.tools)


async def test_c_copies_the_selected_message_as_markdown(app: FoyaApp, send) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, EXPLORE)
        reply = app.conversation.messages.blocks[-1]
        await pilot.press("up", "c")
        copied = app.clipboard
        assert reply.text in copied  # the reply's Markdown
        assert "- `list_dir`" in copied and "- `read_file` path=README.md · ✓" in copied
        await pilot.press("up", "c")
        assert app.clipboard == EXPLORE
        assert prompt_of(app).text == ""  # c was the message's, not typed


async def test_r_and_f_act_on_the_selected_message(app: FoyaApp, send, wait_until) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "hello")
        await send(pilot, "again")
        first_reply = app.conversation.messages.blocks[1]
        reply_text = first_reply.text
        await pilot.press("up", "up", "up")
        assert selected(app) is first_reply
        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        assert selected(app) is first_reply
        source = app.session
        assert source is not None
        await pilot.press("f")
        await wait_until(pilot, lambda: app.session is not None and app.session.id != source.id)
        await wait_until(pilot, lambda: app.conversation.ready)
        # The fork ends with the selected reply: its last message is that reply.
        blocks = app.conversation.messages.blocks
        assert [b.role for b in blocks] == ["user", "assistant"] and blocks[-1].text == reply_text

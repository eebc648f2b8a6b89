"""Two Foyas on one session: the TUI takes the session's writer lease for every write, refuses a
message (nothing written, the text back in the prompt) while another process holds it, and shows
what another process wrote before it sends anything on top of it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from textual.pilot import Pilot

from foya_tui.runtime.model import EventKind
from foya_tui.runtime.runtime import Runtime
from foya_tui.ui.app import FoyaApp
from foya_tui.ui.widgets.prompt import Prompt
from tests.ui.conftest import WaitUntil
from tests.ui.probes import notifications

Send = Callable[[Pilot[None], str], Awaitable[None]]


def user_texts(app: FoyaApp) -> list[str]:
    return [block.text for block in app.conversation.messages.blocks if block.role == "user"]


async def test_a_message_waits_while_another_foya_writes_the_session(
    make_runtime: Callable[..., Runtime], wait_until: WaitUntil
) -> None:
    ours, theirs = make_runtime(), make_runtime()
    session = ours.new_session()
    list(session.send("first"))
    before = ours.events(session.id)
    app = FoyaApp(ours, session_id=session.id)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        prompt = app.conversation.query_one(Prompt)
        with theirs.claim(session.id):  # the other Foya is in the middle of a turn
            prompt.insert("second")
            await pilot.press("enter")
            await wait_until(pilot, lambda: prompt.text == "second" and app.conversation.ready)
            (said, severity) = notifications(app)[-1]
            assert "busy in another Foya" in said and "not sent" in said and severity == "warning"
            assert user_texts(app) == ["first"]  # the refused message left the conversation
            assert ours.events(session.id) == before  # and nothing was written
        # The other one is done: the same message goes through.
        prompt.clear()
        prompt.insert("second")
        await pilot.press("enter")
        await wait_until(pilot, lambda: ours.last_seq(session.id) > before[-1].seq and app.conversation.ready)
        users = [e.payload["text"] for e in ours.events(session.id) if e.kind is EventKind.USER_MESSAGE]
        assert users == ["first", "second"]


async def test_what_another_foya_wrote_is_shown_before_anything_is_sent_on_top(
    make_runtime: Callable[..., Runtime], wait_until: WaitUntil, send: Send
) -> None:
    ours, theirs = make_runtime(), make_runtime()
    session = ours.new_session()
    list(session.send("first"))
    app = FoyaApp(ours, session_id=session.id)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: user_texts(app) == ["first"])
        # Meanwhile `foya run --session` in another terminal adds a turn.
        with theirs.claim(session.id):
            list(theirs.open_session(session.id).send("from elsewhere"))
        written = theirs.last_seq(session.id)
        prompt = app.conversation.query_one(Prompt)
        prompt.insert("mine")
        await pilot.press("enter")
        await wait_until(pilot, lambda: user_texts(app) == ["first", "from elsewhere"])
        await wait_until(pilot, lambda: prompt.text == "mine" and app.conversation.ready)
        assert ours.last_seq(session.id) == written  # the refused message wrote nothing
        assert any("Another Foya added" in said for said, _ in notifications(app))
        # Sent again, it continues from what is now shown.
        prompt.clear()
        await send(pilot, "mine")
        users = [e.payload["text"] for e in ours.events(session.id) if e.kind is EventKind.USER_MESSAGE]
        assert users == ["first", "from elsewhere", "mine"]
        assert user_texts(app) == ["first", "from elsewhere", "mine"]

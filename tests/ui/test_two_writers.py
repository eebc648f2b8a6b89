"""Two Foyas on one session: the TUI takes the session's writer lease for every write, refuses a
message (nothing written, the text back in the prompt) while another process holds it, shows what
another process wrote before it sends anything on top of it, and, while idle, shows it unasked."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from textual.pilot import Pilot

from foya_tui.runtime.model import EventKind
from foya_tui.runtime.runtime import Runtime
from foya_tui.ui.app import FoyaApp
from foya_tui.ui.bridge import Bridge
from foya_tui.ui.messages import ForeignEventsFound
from foya_tui.ui.screens.conversation_state import Activity
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
    make_runtime: Callable[..., Runtime], wait_until: WaitUntil, send: Send, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The idle look would show the other write first (the next test): here the send must find it.
    monkeypatch.setattr(Bridge, "FOREIGN_POLL_SECONDS", 0)
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


async def test_an_idle_conversation_shows_what_another_foya_wrote_unasked(
    make_runtime: Callable[..., Runtime], wait_until: WaitUntil, send: Send, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Bridge, "FOREIGN_POLL_SECONDS", 0.2)
    ours, theirs = make_runtime(), make_runtime()
    session = ours.new_session()
    list(session.send("first"))
    app = FoyaApp(ours, session_id=session.id)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: user_texts(app) == ["first"] and app.conversation.ready)
        with theirs.claim(session.id):
            list(theirs.open_session(session.id).send("from elsewhere"))
        # No key is pressed: the conversation follows the other Foya by itself.
        await wait_until(pilot, lambda: user_texts(app) == ["first", "from elsewhere"])
        said = [text for text, _ in notifications(app) if "Another Foya added" in text]
        assert said and "shown as it now is" in said[0]
        # What is shown is what the next message builds on: it is sent, not refused.
        await send(pilot, "mine")
        users = [e.payload["text"] for e in ours.events(session.id) if e.kind is EventKind.USER_MESSAGE]
        assert users == ["first", "from elsewhere", "mine"]
        assert not any("not sent" in text for text, _ in notifications(app))


async def test_a_busy_conversation_leaves_another_foyas_events_to_the_next_send(
    make_runtime: Callable[..., Runtime], wait_until: WaitUntil, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A send may be on its way to the Bridge: a reload now could drop its block, so the offer is
    left and the send's own check (refuse, reload) decides."""
    monkeypatch.setattr(Bridge, "FOREIGN_POLL_SECONDS", 0)
    ours, theirs = make_runtime(), make_runtime()
    session = ours.new_session()
    list(session.send("first"))
    app = FoyaApp(ours, session_id=session.id)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: user_texts(app) == ["first"] and app.conversation.ready)
        with theirs.claim(session.id):
            list(theirs.open_session(session.id).send("from elsewhere"))
        screen = app.conversation
        screen._set_activity(Activity.REPLYING)
        screen.post_message(
            ForeignEventsFound(screen.bridge.session, [], has_older=False, newest_seq=99, count=3)
        )
        await pilot.pause()
        await pilot.pause()
        assert user_texts(app) == ["first"]
        assert not any("Another Foya added" in text for text, _ in notifications(app))

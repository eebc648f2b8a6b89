"""Provides the snapshot tests of the sessions browser and of a conversation whose failed and
cancelled turns are marked (regenerate with `--snapshot-update`)."""

from __future__ import annotations

import os

from snapshot_scene import SIZE, wait_until, wait_until_ready
from textual.pilot import Pilot

from foya_tui.runtime.providers.client import CancelToken
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.session import Session
from foya_tui.runtime.updates import ReplyDelta
from foya_tui.ui.app import FoyaApp
from foya_tui.ui.screens.sessions import SessionsScreen

BROWSER_SIZE = (120, 30)


def failed_turn(session: Session, text: str, fault: str) -> None:
    os.environ["FOYA_SIM_FAULTS"] = fault
    try:
        for _ in session.send(text):
            pass
    finally:
        os.environ.pop("FOYA_SIM_FAULTS", None)


def cancelled_turn(session: Session, text: str) -> None:
    """A reply cancelled after its first words: what streamed is kept, then the turn's outcome."""
    cancel = CancelToken()
    for update in session.send(text, cancel):
        if isinstance(update, ReplyDelta):
            cancel.cancel()


def test_sessions_browser(snap_compare, scene_runtime: Runtime) -> None:
    """ctrl+o over a resumed session, on foya-dark: a round-bordered dialog "Sessions · 3 sessions"
    over the dimmed conversation; a filter field with the focus (placeholder "type to filter by
    title, id or model"); three sessions of two lines each (the scene's clock gives them one time,
    so they are in id order): "● fix the parser" in bold (the open one, highlighted) with its model
    foya-sim/small, "3 events · 0 checkpoints" and its size; "fork of fix the parser" with "no model
    yet" and "fork of 3f2a9c"; "does this work?" with "no reply · last turn failed (quota)", its
    facts line in the warning colour; the scene's ids all start 3f2a9c. A dim help line "enter open
    · F2 rename · del delete · ctrl+b back to the fork's origin · esc close"."""
    parser = scene_runtime.new_session()
    for _ in parser.send("fix the parser"):
        pass
    scene_runtime.fork(parser.id)
    failed_turn(scene_runtime.new_session(), "does this work?", "quota")

    async def run_before(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, FoyaApp)
        await wait_until_ready(pilot)
        await pilot.press("ctrl+o")
        await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen) and bool(app.screen.shown))

    app = FoyaApp(scene_runtime, session_id=parser.id)
    assert snap_compare(app, terminal_size=BROWSER_SIZE, run_before=run_before)


def test_conversation_with_outcome_markers(snap_compare, scene_runtime: Runtime) -> None:
    """A resumed session on foya-dark whose turns ended three ways: "hello" with the simulator's
    reply; "and now?" with nothing under it but a dim line "✗ foya-sim/small (simulator): the
    provider account has no quota or credit left: …"; "tell me more" with the first words of a
    reply and a dim "cancelled" line under it — the lines the live turns showed, read back from the
    stored turn outcomes."""
    session = scene_runtime.new_session()
    for _ in session.send("hello"):
        pass
    failed_turn(session, "and now?", "quota")
    cancelled_turn(session, "tell me more")

    app = FoyaApp(scene_runtime, session_id=session.id)
    assert snap_compare(app, terminal_size=SIZE, run_before=wait_until_ready)

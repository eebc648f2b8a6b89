"""Provides the snapshot test of the help screen (regenerate with `--snapshot-update`)."""

from __future__ import annotations

from snapshot_scene import make_app, wait_until, wait_until_ready
from textual.pilot import Pilot

from foya_tui.runtime.runtime import Runtime
from foya_tui.ui.app import FoyaApp
from foya_tui.ui.screens.help import HelpScreen

HELP_SIZE = (140, 60)


def test_help_screen(snap_compare, scene_runtime: Runtime) -> None:
    """F1 from the prompt, on foya-dark: a large round-bordered dialog "Help · keys, palette
    commands (ctrl+p) and slash commands" over the dimmed conversation. Groups in bold primary
    colour — Talk, Look at the context, Compact, Go back in time, Switch model and approvals, Find,
    Help, sessions and the app — each a table of four columns: the key in bold (with where it
    works: "r on a message"), the palette title in italics, the slash command, and what it does,
    wrapped within its column. A dim footnote says that / starts a command in the prompt, that //
    sends a message starting with /, and that Esc closes. No rule ids anywhere."""

    async def run_before(pilot: Pilot[None]) -> None:
        await wait_until_ready(pilot)
        await pilot.press("f1")
        app = pilot.app
        assert isinstance(app, FoyaApp)
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))

    assert snap_compare(make_app(scene_runtime), terminal_size=HELP_SIZE, run_before=run_before)

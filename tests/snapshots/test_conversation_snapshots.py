"""Provides snapshot tests of the conversation screen (regenerate with `--snapshot-update`)."""

from __future__ import annotations

from snapshot_scene import SIZE, make_app, send, wait_until_ready

from foya_tui.runtime.runtime import Runtime


def test_empty_conversation(snap_compare, scene_runtime: Runtime) -> None:
    """Just after start, on foya-dark: a one-line header "Foya · new session · foya-sim/small
    (simulator) · approval: ask" (the last part dim), a dim hint in the empty conversation saying
    that the offline simulator answers, the prompt at the bottom with its placeholder "type a
    message · Enter send · ctrl+j newline · / commands · F1 help", and a footer with esc cancel
    hidden (nothing runs), f2 inspector, ^k compact, ^r route, f1 help, ^q quit and ^p palette.
    No session id yet: it is created by the first send. At 100 columns the budget meter is a
    sidebar on the right, showing the preview of the first request ("estimate (no usage on this
    route yet)")."""
    assert snap_compare(make_app(scene_runtime), terminal_size=SIZE, run_before=wait_until_ready)


def test_after_one_turn(snap_compare, scene_runtime: Runtime) -> None:
    """After sending "hello" on foya-dark: the header shows "session 3f2a9c"; a "you" block with a
    violet bar holds "hello"; a "foya" block with a teal bar holds the simulator's Markdown reply
    (bold "Foya's offline simulator", `config.toml` as code, an italic context line); the prompt is
    empty again and no notification is showing. The meter on the right reads "measured"."""

    async def run_before(pilot) -> None:
        await send(pilot, "hello")

    assert snap_compare(make_app(scene_runtime), terminal_size=SIZE, run_before=run_before)


def test_light_theme_after_one_turn(snap_compare, scene_runtime: Runtime) -> None:
    """The same conversation as after one turn, on foya-light: a pale background, dark text, a
    purple bar for "you" and a dark teal bar for "foya"; every line must be easy to read, the
    meter's layer colours and numbers included."""

    async def run_before(pilot) -> None:
        await send(pilot, "hello")

    app = make_app(scene_runtime, theme="foya-light")
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)

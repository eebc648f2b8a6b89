"""Provides tests of settings that stick and keys that move: a theme or an approval mode picked in
the TUI is saved in config.toml (its comments kept) and is there after a restart; a config file that
is not valid is never overwritten; `[keys]` remaps a binding by its id, and the help screen and the
footer show the new key; an unknown id or key name is a warning. Against a real Runtime, SQLite
file, config file and the simulator; the restart reads the file with the real loader."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from textual.widgets import Footer

from foya_tui.runtime.runtime import Runtime
from foya_tui.settings import Settings, load_settings
from foya_tui.ui.app import FoyaApp
from foya_tui.ui.keymap import key_problem, keymap_from
from foya_tui.ui.screens.conversation import ConversationScreen
from foya_tui.ui.screens.help import HelpScreen
from foya_tui.ui.screens.routes import RouteSwitcher
from foya_tui.ui.widgets.prompt import Prompt
from tests.ui.screen_text import visible_text
from tests.ui.test_slash_commands import submit

WaitUntil = Callable[..., Awaitable[None]]
MakeRuntime = Callable[..., Runtime]

COMMENTED = """\
# My Foya settings; this comment must survive.
model = "foya-sim/small"   # the small simulator
theme = "foya-dark"        # dark at night

[tools]                    # my tools
max_steps = 40
"""


def notified_by(app: FoyaApp) -> list[tuple[str, str]]:
    """What the app notified so far, (text, severity) in order (tests/ui/conftest.py keeps it)."""
    return list(getattr(app, "notified", []))


def restarted(config: Path, make_runtime: MakeRuntime) -> FoyaApp:
    """A new app over a new runtime whose settings are read from `config`, as `foya` starts."""
    settings = replace(load_settings(config, env={}), retry_backoff=0.0)
    return FoyaApp(make_runtime(settings))


async def test_a_theme_picked_in_the_tui_is_there_after_a_restart(
    make_runtime: MakeRuntime, tmp_path: Path, wait_until: WaitUntil
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(COMMENTED, encoding="utf-8")
    app = restarted(config, make_runtime)
    assert app.config_file == config
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        assert app.theme == "foya-dark"
        await submit(pilot, "/theme", wait_until)
        await wait_until(pilot, lambda: 'theme = "foya-light"' in config.read_text(encoding="utf-8"))
        assert app.theme == "foya-light"

    text = config.read_text(encoding="utf-8")
    assert text == COMMENTED.replace('theme = "foya-dark"', 'theme = "foya-light"')  # comments kept
    again = restarted(config, make_runtime)
    async with again.run_test() as pilot:
        await wait_until(pilot, lambda: again.conversation.ready)
        assert again.theme == "foya-light"


async def test_an_approval_mode_set_in_the_tui_is_there_after_a_restart(
    make_runtime: MakeRuntime, tmp_path: Path, wait_until: WaitUntil
) -> None:
    config = tmp_path / "config.toml"  # none yet: made from the commented template
    app = restarted(config, make_runtime)
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        await submit(pilot, "/approval auto", wait_until)
        await wait_until(pilot, lambda: config.is_file() and "approval_mode = " in config.read_text("utf-8"))
    assert "# [keys]" in config.read_text(encoding="utf-8")
    again = restarted(config, make_runtime)
    assert again.runtime.approval_mode == "auto"  # type: ignore[union-attr]


async def test_a_config_file_that_is_not_valid_is_never_overwritten(
    make_runtime: MakeRuntime, tmp_path: Path, wait_until: WaitUntil
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(COMMENTED, encoding="utf-8")
    app = restarted(config, make_runtime)
    broken = COMMENTED + "\n[tools\n"  # edited by hand while the TUI runs
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        config.write_text(broken, encoding="utf-8")
        await submit(pilot, "/theme", wait_until)
        await wait_until(pilot, lambda: any("was not saved" in text for text, _ in notified_by(app)))
        (said,) = [(text, severity) for text, severity in notified_by(app) if "was not saved" in text]
        assert said[1] == "warning" and "is not valid TOML" in said[0] and "\n" not in said[0]
        assert app.theme == "foya-light"  # it still applies in this app
    assert config.read_text(encoding="utf-8") == broken


async def test_a_remapped_key_runs_its_action_and_help_and_footer_show_it(
    make_runtime: MakeRuntime, wait_until: WaitUntil
) -> None:
    settings = Settings(retry_backoff=0.0, keys={"help.show": "f4", "route.switch": "ctrl+o"})
    app = FoyaApp(make_runtime(settings))
    async with app.run_test(size=(140, 50)) as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        assert not [text for text, severity in notified_by(app) if severity == "warning"]
        footer = visible_text(app.conversation.query_one(Footer))
        assert "f4 help" in footer.lower() and "^o" in footer and "^r" not in footer
        assert app.conversation.query_one(Prompt).placeholder.endswith("· F4 help")
        await pilot.press("f1")  # the old key does nothing now
        await pilot.pause()
        assert isinstance(app.screen, ConversationScreen)
        await pilot.press("f4")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        text = visible_text(app.screen)
        assert "F4" in text and "ctrl+o" in text and "ctrl+r" not in text
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, ConversationScreen))
        await pilot.press("ctrl+o")
        await wait_until(pilot, lambda: isinstance(app.screen, RouteSwitcher))


async def test_unknown_ids_and_bad_keys_are_one_line_warnings_and_the_rest_applies(
    make_runtime: MakeRuntime, wait_until: WaitUntil
) -> None:
    keys = {
        "context.compactt": "ctrl+l",  # a typo
        "route.switch": "ctrl+banana",  # no such key
        "theme.toggle": "f9",  # palette only: no key to move
        "help.show": "f4",
    }
    app = FoyaApp(make_runtime(Settings(retry_backoff=0.0, keys=keys)))
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        warnings = [text for text, severity in notified_by(app) if severity == "warning"]
        assert len(warnings) == 3 and all("\n" not in text for text in warnings)
        assert any("did you mean 'context.compact'?" in text for text in warnings)
        assert any("'banana' is not a key name" in text and "stays ctrl+r" in text for text in warnings)
        assert any("'theme.toggle' cannot be remapped" in text for text in warnings)
        await pilot.press("ctrl+r")  # the bad key left the default in place
        await wait_until(pilot, lambda: isinstance(app.screen, RouteSwitcher))
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, ConversationScreen))
        await pilot.press("f4")  # the valid entry applies
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))


def test_key_names_are_checked_as_textual_reads_them() -> None:
    for good in ("ctrl+l", "f6", "alt+up", "question_mark", "?", "ctrl+shift+k", "f6,ctrl+l", "space"):
        assert key_problem(good) is None, good
    for bad in ("", "ctrl+", "crtl+l", "ctrl+banana", "f6,,x"):
        assert key_problem(bad) is not None, bad
    assert keymap_from({"help.show": "?"}).keys == {"help.show": "question_mark"}


async def test_a_screenshot_into_a_missing_folder_says_why_and_into_a_folder_is_saved(
    app: FoyaApp, tmp_path: Path, monkeypatch, wait_until: WaitUntil
) -> None:
    """`screen: save screenshot` writes to the Downloads folder; where there is none, it says so."""
    home = tmp_path / "user"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))  # no user-dirs.dirs there
    monkeypatch.delenv("XDG_DOWNLOAD_DIR", raising=False)
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: app.conversation.ready)
        app.action_save_screenshot()
        await wait_until(pilot, lambda: any("screenshot" in text.lower() for text, _ in notified_by(app)))
        ((said, severity),) = [(t, s) for t, s in notified_by(app) if "screenshot" in t.lower()]
        assert severity == "error" and f"the folder {home / 'Downloads'} does not exist" in said
        (home / "Downloads").mkdir()
        app.action_save_screenshot()
        await wait_until(pilot, lambda: any("Screenshot saved to" in text for text, _ in notified_by(app)))
    assert [path.suffix for path in (home / "Downloads").iterdir()] == [".svg"]


def test_the_readme_keys_example_is_valid() -> None:
    import re
    import tomllib

    from foya_tui.settings import settings_from_mapping

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    block = re.search(r"\n(\[keys\].*?)```", readme, re.S)
    assert block is not None
    keys = settings_from_mapping(tomllib.loads(block.group(1))).keys
    assert keys and keymap_from(keys).problems == ()

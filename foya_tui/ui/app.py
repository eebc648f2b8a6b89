"""Provides FoyaApp, the Textual application, and `run_app`, which the `foya` command calls.

Start-up stays fast: the app paints its first frame before the session loads, LiteLLM and the
tokenizer load on the first request, and SQLite is only touched from the Bridge's workers.
"""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.dom import DOMNode
from textual.screen import Screen
from textual.theme import Theme

from foya_tui.ui.actions import ACTIONS, BoundIn, Runs, bindings_of, key_text
from foya_tui.ui.keymap import Keymap, keymap_from
from foya_tui.ui.screens.conversation import ConversationScreen
from foya_tui.ui.themes import DEFAULT_THEME, register_themes, toggled_theme, with_meter_variables

if TYPE_CHECKING:
    from foya_tui.runtime.runtime import Runtime
    from foya_tui.runtime.session import Session
    from foya_tui.settings import Settings


class FoyaApp(App[None]):
    """Foya's terminal workstation: one conversation screen over a Runtime."""

    TITLE = "Foya"
    CSS_PATH = "app.tcss"
    # A mode rather than get_default_screen(): Textual loads a screen's CSS_PATH only for screens
    # it installs itself (modes, pushes), not for the default screen.
    DEFAULT_MODE = "conversation"
    # Generated from the table of user actions (ui/actions.py), which the help screen shows too.
    BINDINGS: ClassVar[list[BindingType]] = list(bindings_of(BoundIn.APP))

    def __init__(
        self,
        runtime: Runtime | Callable[[], Runtime],
        *,
        settings: Settings | None = None,
        session_id: str | None = None,
        model: str | None = None,
        theme: str | None = None,
        quick_exit: bool = False,
        config_file: Path | None = None,
    ) -> None:
        """`runtime` is a Runtime, or a factory called in a worker after the first frame (then
        `settings` must be given: the theme is needed before the runtime exists). `quick_exit`:
        the `foya` command's own app: quitting does not wait for thread workers still running,
        and what exists once it is mounted is kept out of the cyclic collector's full passes.
        `config_file`: where a theme or approval mode the user picks is saved (default: the
        runtime's `config.toml`; None with a factory: nothing is saved)."""
        super().__init__()
        self._quick_exit = quick_exit
        self.runtime = runtime
        self._session_id = session_id
        self._model = model
        paths = getattr(runtime, "paths", None)
        self.config_file = config_file or (paths.config_file if paths is not None else None)
        self._conversation: ConversationScreen | None = None
        self.add_mode(self.DEFAULT_MODE, self._make_conversation)
        register_themes(self)
        settings = settings or getattr(runtime, "settings", None)
        wanted = theme or (settings.theme if settings is not None else DEFAULT_THEME)
        self._theme_problem: str | None = None
        if wanted not in self.available_themes:
            self._theme_problem = f"Unknown theme {wanted!r}; using {DEFAULT_THEME}."
            wanted = DEFAULT_THEME
        self.theme = wanted
        self._saved_theme = wanted
        """The theme config.toml holds (or the one in force when the app started): saved on change."""
        # `[keys]` remaps bindings by id (Textual's keymap); entries it cannot use are said on mount.
        self.keymap: Keymap = keymap_from(settings.keys if settings is not None else {})
        self.set_keymap(dict(self.keymap.keys))
        self._clashes_said: set[tuple[str, str]] = set()

    def _make_conversation(self) -> ConversationScreen:
        # The conversation is the first screen itself, so nothing blank is painted before it.
        self._conversation = ConversationScreen(
            self.runtime, session_id=self._session_id, model=self._model, config_file=self.config_file
        )
        return self._conversation

    def on_mount(self) -> None:
        if self._quick_exit:
            # Quitting then never waits for a thread worker still busy (ui/threads.py).
            from foya_tui.ui.threads import DaemonThreads

            asyncio.get_running_loop().set_default_executor(DaemonThreads())
            # What exists by now (every module imported, the screen) lives as long as the process:
            # out of the cyclic collector's full passes, which would otherwise walk it all again
            # each time (tests/bench/bench_tui_scale.py). Not for tests' apps: a frozen object that
            # becomes garbage in a cycle is never collected.
            gc.freeze()
        if self._theme_problem:
            self.notify(self._theme_problem, severity="warning")
        for problem in self.keymap.problems:
            self.notify(problem, severity="warning", markup=False, timeout=10)
        self.theme_changed_signal.subscribe(self, self._theme_changed)

    def _theme_changed(self, theme: Theme) -> None:
        """A theme the user picked (toggle, palette, /theme) is saved in config.toml, so it sticks."""
        if theme.name == self._saved_theme or self._conversation is None:
            return
        self._saved_theme = theme.name
        self._conversation.bridge.save_setting("theme", theme.name)

    def handle_bindings_clash(self, clashed_bindings: set[Binding], node: DOMNode) -> None:
        # A key `[keys]` moved onto one that another binding there already had: the remapped
        # action takes it (Textual's rule); said once per binding, not on every key press.
        for binding in clashed_bindings:
            if binding.key in self.keymap.keys.get(binding.id or "", "").split(","):
                continue  # a binding of several keys meets its own new key once per old key
            said = (binding.id or binding.action, binding.key)
            if said in self._clashes_said:
                continue
            self._clashes_said.add(said)
            self.notify(
                f"[keys] gives {key_text(binding.key)} to another action, so "
                f"{binding.description or binding.action!r} lost that key here.",
                severity="warning",
                markup=False,
                timeout=10,
            )

    def get_css_variables(self) -> dict[str, str]:
        # Foya's themes colour the meter's layers; any other installed theme borrows from its palette.
        self.theme_variables = with_meter_variables(super().get_css_variables())
        return self.theme_variables

    @property
    def conversation(self) -> ConversationScreen:
        assert self._conversation is not None, "the app is not running"
        return self._conversation

    @property
    def opened_runtime(self) -> Runtime | None:
        """The runtime, once it exists (a factory is called only when the session opens)."""
        if self._conversation is not None:
            return self._conversation.bridge.runtime
        return None if callable(self.runtime) else self.runtime

    @property
    def session(self) -> Session | None:
        """The open session (None until a new conversation's first message creates it)."""
        return self._conversation.bridge.session if self._conversation else None

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        # From the table of user actions, so the palette, the help screen and the README agree.
        for action in ACTIONS:
            target: App[None] | Screen[None] = self if action.runs is Runs.APP else self.conversation
            for title, run in action.palette_entries():
                yield SystemCommand(title, action.summary, partial(target.run_action, run))

    async def action_new_session(self) -> None:
        await self.conversation.new_conversation()

    def action_switch_route(self) -> None:
        self.conversation.action_switch_route()

    def action_toggle_theme(self) -> None:
        self.theme = toggled_theme(self.current_theme.dark)

    def action_save_screenshot(self) -> None:
        # After the palette has closed, so that the screenshot shows the screen rather than it.
        self.set_timer(0.1, self._save_screenshot)

    def _save_screenshot(self) -> None:
        from platformdirs import user_downloads_path

        folder = user_downloads_path()
        if not folder.is_dir():
            self.notify(
                f"The screenshot was not saved: the folder {folder} does not exist.",
                severity="error",
                markup=False,
            )
            return
        try:
            saved = self.save_screenshot(path=str(folder))
        except OSError as exc:
            self.notify(
                f"The screenshot was not saved: {exc.strerror or exc}.", severity="error", markup=False
            )
            return
        self.notify(f"Screenshot saved to {saved}.", markup=False)


def run_app(
    *, database: str | Path | None = None, model: str | None = None, session: str | None = None
) -> int:
    """Run the TUI until the user quits; then say on stderr how to resume the session."""
    from foya_tui.paths import resolve_paths
    from foya_tui.runtime.providers.routes import route_for
    from foya_tui.runtime.schema import needs_migration, session_id_in
    from foya_tui.settings import load_settings

    paths = resolve_paths(database=database)
    settings = load_settings(paths.config_file)
    # Checked before the app starts, so a mistyped model or connection is one line on stderr
    # (exit 2) rather than a screen that cannot do anything.
    route_for(settings, model)

    def open_runtime() -> Runtime:
        from foya_tui.progress import index_progress
        from foya_tui.runtime.runtime import Runtime

        return Runtime(settings, paths, migration_progress=index_progress)

    runtime: Runtime | None = None
    session_id = None
    if needs_migration(paths.database):
        # An older database is migrated before the screen takes the terminal: indexing it for
        # search reports progress on stderr.
        runtime = open_runtime()
    if session:
        # Resuming: the id is checked first (an unknown one is exit 2), with one read-only query
        # rather than the runtime, which opens after the first frame like a new conversation's.
        session_id = session_id_in(paths.database, session) if runtime is None else None
        if session_id is None:
            # Just migrated, or a file that query could not read: the runtime's own lookup, which
            # says what is wrong with the file.
            runtime = runtime or open_runtime()
            try:
                session_id = runtime.find_session(session).id
            except Exception:
                runtime.close()
                raise
    # Otherwise the app gets a factory: the runtime is imported and the database opened in a
    # worker, after the first frame (tests/bench/bench_startup.py, bench_tui_scale.py).
    app = FoyaApp(
        runtime or open_runtime,
        settings=settings,
        session_id=session_id,
        model=model,
        quick_exit=True,
        config_file=paths.config_file,
    )
    try:
        app.run()
    finally:
        opened = app.opened_runtime
        if opened is not None:
            opened.close()
    session_opened = app.session
    if session_opened is not None:
        short = session_opened.info.short_id
        print(f"Session {short} saved. Resume: foya --session {short}", file=sys.stderr)
    return app.return_code or 0

"""Provides fixtures for UI tests: a real Runtime on a temporary SQLite file, and app helpers.

Everything is real: the store, the session loop, LiteLLM and its offline simulator. Only the
clock and the working directory are fixed, so replies are the same on every run.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from foya_tui.paths import FoyaPaths
from foya_tui.runtime.runtime import Runtime
from foya_tui.settings import Settings
from foya_tui.ui.app import FoyaApp
from foya_tui.ui.widgets.prompt import Prompt

FIXED_NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
WaitUntil = Callable[[Pilot[None], Callable[[], bool]], Awaitable[None]]


@pytest.fixture(autouse=True)
def notifications_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every notification the app shows is also kept in `app.notified`, in order: a test reads
    what was said, not whether its toast is still on screen (a loaded machine can outlast it)."""
    original = FoyaApp.notify

    def notify(self: FoyaApp, message: str, **options: Any) -> None:
        self.__dict__.setdefault("notified", []).append((message, options.get("severity", "information")))
        original(self, message, **options)

    monkeypatch.setattr(FoyaApp, "notify", notify)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "README.md").write_text("# Demo project\n\nA fixture for Foya's UI tests.\n", encoding="utf-8")
    (folder / "main.py").write_text('print("hello")\n', encoding="utf-8")
    return folder


@pytest.fixture
def make_runtime(
    tmp_path: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., Runtime]]:
    """Open Runtimes on one database under tmp_path (several may share it, like two processes)."""
    monkeypatch.setenv("FOYA_HOME", str(tmp_path))
    monkeypatch.delenv("FOYA_SIM_FAULTS", raising=False)
    paths = FoyaPaths(data_dir=tmp_path, config_dir=tmp_path, database=tmp_path / "foya.sqlite3")
    opened: list[Runtime] = []

    def make(settings: Settings | None = None) -> Runtime:
        settings = settings or Settings(retry_backoff=0.0)
        runtime = Runtime(settings, paths, workdir=workdir, clock=lambda: FIXED_NOW)
        opened.append(runtime)
        return runtime

    yield make
    for runtime in opened:
        runtime.close()


@pytest.fixture
def runtime(make_runtime: Callable[[], Runtime]) -> Runtime:
    return make_runtime()


@pytest.fixture
def app(runtime: Runtime) -> FoyaApp:
    return FoyaApp(runtime)


async def _wait_until(pilot: Pilot[None], condition: Callable[[], bool], timeout: float = 90.0) -> None:
    # The first turn of a test process imports LiteLLM (seconds; tens of seconds on a loaded
    # machine), hence the generous timeout: a deadline for a hung test, not a speed check.
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met in {timeout} s")
        await pilot.pause(0.02)
    await pilot.pause()


@pytest.fixture
def wait_until() -> WaitUntil:
    """`await wait_until(pilot, lambda: …)`: poll the app until the condition holds."""
    return _wait_until


@pytest.fixture
def send() -> Callable[[Pilot[None], str], Awaitable[None]]:
    """Type a message, press Enter and wait until the turn has ended and the prompt is ready."""

    async def send_message(pilot: Pilot[None], text: str) -> None:
        app = pilot.app
        assert isinstance(app, FoyaApp)
        prompt = app.conversation.query_one(Prompt)
        await _wait_until(pilot, lambda: app.conversation.ready)
        prompt.insert(text)
        await pilot.press("enter")
        # Accepting a message clears the prompt and pauses sending until the turn has ended.
        await _wait_until(pilot, lambda: prompt.text == "" and app.conversation.ready)

    return send_message

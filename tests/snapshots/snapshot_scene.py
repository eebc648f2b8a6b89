"""Provides the fixed scene shared by the snapshot tests and `make_screenshot.py`.

A snapshot must render the same on every run and every machine, so everything the screen (or the
simulator's reply) could take from the surroundings is fixed here: session ids, the clock, the
working directory's path and contents, the platform and shell named in the system prompt, and the
measured duration of tool calls (shown on each tool block).
"""

from __future__ import annotations

import itertools
import os
import platform
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

from textual.pilot import Pilot

from foya_tui.paths import FoyaPaths
from foya_tui.runtime.providers.client import ProviderClient
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.tools import registry
from foya_tui.settings import Settings
from foya_tui.ui.app import FoyaApp
from foya_tui.ui.widgets.prompt import Prompt

SIZE = (100, 30)
FIXED_NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
FIRST_UUID = uuid.UUID("3f2a9c00-0000-4000-8000-000000000000")
# A fixed absolute path: the working directory is named in the system prompt, whose token count
# the simulator prints, so a per-run temporary path would change the reply.
# /tmp itself where it exists, since $TMPDIR may differ between a developer's shell and CI.
_TMP = Path("/tmp") if Path("/tmp").is_dir() else Path(tempfile.gettempdir())
WORKDIR = _TMP / "foya-snapshot-scene" / "demo-project"
WORKDIR_FILES = {
    "README.md": "# Demo project\n\nA small project for Foya's screenshots.\n",
    "main.py": 'print("hello")\n',
}


def prepare_workdir() -> Path:
    WORKDIR.mkdir(parents=True, exist_ok=True)
    for name, text in WORKDIR_FILES.items():
        (WORKDIR / name).write_text(text, encoding="utf-8")
    return WORKDIR


@contextmanager
def fixed_surroundings() -> Iterator[None]:
    """Sequential session ids (the first is 3f2a9c…), a fixed platform and shell, no simulator
    faults, and tool calls that take no time (their blocks read "✓ <0.1 s")."""
    counter = itertools.count()
    environment = {key: value for key, value in os.environ.items() if key != "FOYA_SIM_FAULTS"}
    environment["SHELL"] = "/bin/bash"
    with (
        mock.patch.object(uuid, "uuid4", lambda: uuid.UUID(int=FIRST_UUID.int + next(counter))),
        mock.patch.object(platform, "system", lambda: "Linux"),
        mock.patch.object(platform, "release", lambda: "6.1.0"),
        mock.patch.dict(os.environ, environment, clear=True),
        # Only the registry's clock, which measures each call: the app's own timers keep running.
        mock.patch.object(registry, "time", SimpleNamespace(perf_counter=lambda: 0.0)),
    ):
        yield


def open_runtime(
    data_dir: Path, *, client: ProviderClient | None = None, approval_mode: str | None = None
) -> Runtime:
    """A Runtime on the fixed scene; `client` replaces the simulator (a scripted provider)."""
    paths = FoyaPaths(data_dir=data_dir, config_dir=data_dir, database=data_dir / "foya.sqlite3")
    return Runtime(
        Settings(retry_backoff=0.0),
        paths,
        client=client,
        workdir=prepare_workdir(),
        clock=lambda: FIXED_NOW,
        approval_mode=approval_mode,
    )


def make_app(runtime: Runtime, theme: str | None = None) -> FoyaApp:
    return FoyaApp(runtime, theme=theme)


async def wait_until(pilot: Pilot[None], condition: Callable[[], bool], timeout: float = 30.0) -> None:
    # The first turn of a process imports LiteLLM, which takes seconds.
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met in {timeout} s")
        await pilot.pause(0.02)
    await pilot.pause()


async def wait_until_ready(pilot: Pilot[None]) -> None:
    app = pilot.app
    assert isinstance(app, FoyaApp)
    await wait_until(pilot, lambda: app.conversation.ready)


async def send(pilot: Pilot[None], text: str) -> None:
    """Type `text`, press Enter and wait until the reply has finished streaming."""
    app = pilot.app
    assert isinstance(app, FoyaApp)
    await wait_until_ready(pilot)
    prompt = app.conversation.query_one(Prompt)
    prompt.insert(text)
    await pilot.press("enter")
    await wait_until(pilot, lambda: prompt.text == "" and app.conversation.ready)

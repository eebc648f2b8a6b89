"""Provides fixtures shared by every test tier: an isolated Foya home, runtimes on real SQLite files."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from foya_tui.paths import FoyaPaths
from foya_tui.runtime.runtime import Runtime
from foya_tui.settings import Connection, Settings

pytest_plugins = ["tests.fakes.fixtures"]

FIXED_NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
FAKE_KEY_VARIABLE = "FOYA_TEST_KEY"


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test ever reads or writes the real user's data dir, config or simulator faults."""
    home = tmp_path / "foya-home"
    monkeypatch.setenv("FOYA_HOME", str(home))
    monkeypatch.delenv("FOYA_SIM_FAULTS", raising=False)
    monkeypatch.delenv("FOYA_MODEL", raising=False)
    # `fake_settings` names this variable as its connection's key; the pre-flight refuses a route
    # whose named key variable is unset, so every test has one (tests that check the key set theirs).
    monkeypatch.setenv(FAKE_KEY_VARIABLE, "sk-test-default-0000")
    return home


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A small, fixed working directory for the simulator to describe."""
    folder = tmp_path / "project"
    (folder / "src").mkdir(parents=True)
    (folder / "README.md").write_text("# Demo project\n\nA fixture.\n", encoding="utf-8")
    (folder / "src" / "main.py").write_text("print('hi')\n", encoding="utf-8")
    return folder


def make_paths(tmp_path: Path) -> FoyaPaths:
    return FoyaPaths(data_dir=tmp_path, config_dir=tmp_path, database=tmp_path / "foya.sqlite3")


@pytest.fixture
def settings() -> Settings:
    return Settings(retry_backoff=0.0)


@pytest.fixture
def runtime(tmp_path: Path, workdir: Path, settings: Settings) -> Iterator[Runtime]:
    with Runtime(settings, make_paths(tmp_path), workdir=workdir, clock=lambda: FIXED_NOW) as rt:
        yield rt


def fake_settings(base_url: str, **overrides: object) -> Settings:
    """Settings whose `fake` connection points at the loopback OpenAI-compatible server."""
    connections = {
        "default": Connection(),
        "fake": Connection(name="fake", api_base=base_url, api_key_env=FAKE_KEY_VARIABLE),
    }
    values: dict[str, object] = {"connection": "fake", "connections": connections, "retry_backoff": 0.0}
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


@pytest.fixture
def hostile(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The hostile loopback provider (`tests/fakes/hostile_server.py`), with the test key set."""
    from tests.fakes.hostile_server import HostileOpenAIServer
    from tests.runtime.test_hostile_edges import KEY

    monkeypatch.setenv("FOYA_TEST_KEY", KEY)
    with HostileOpenAIServer() as server:
        yield server

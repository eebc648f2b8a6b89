"""Tests what `foya --help` tells a newcomer: plain `foya` opens the TUI, where the config and the
database live, and the FOYA_* variables; no rule ids of the specification."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from foya_tui.cli import main


def test_help_says_plain_foya_opens_the_tui_and_where_its_files_are(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FOYA_HOME", str(tmp_path))
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "Plain `foya` (no command) opens the TUI" in out
    assert f"config    {tmp_path / 'config.toml'}" in out
    assert f"database  {tmp_path / 'foya.sqlite3'}" in out
    for variable in ("FOYA_HOME", "FOYA_MODEL", "FOYA_THEME", "FOYA_SIM_FAULTS"):
        assert variable in out
    assert not re.search(r"\b(SPEC|[CPTKBHXR]-\d+)\b", out)

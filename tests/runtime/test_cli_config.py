"""Provides tests of `foya config`: the config and database paths and every setting in force (a key
by its variable's name only, never its value), `--json`, and `foya config edit`, which opens
$EDITOR (or $VISUAL) on config.toml made from the commented template when missing. Real files
under tmp_path; the editor is a real program (a small shell script)."""

from __future__ import annotations

import json
import stat
import tomllib
from pathlib import Path

import pytest

from foya_tui.cli import main
from foya_tui.config_file import TEMPLATE

SECRET = "sk-test-never-printed-4242"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("FOYA_HOME", str(folder))
    for name in ("FOYA_MODEL", "FOYA_THEME", "EDITOR", "VISUAL"):
        monkeypatch.delenv(name, raising=False)
    return folder


def editor_script(tmp_path: Path, body: str) -> Path:
    """A real editor: a shell script that records the file it was given and then runs `body`."""
    script = tmp_path / "editor.sh"
    script.write_text(f'#!/bin/sh\necho "$1" > "{tmp_path}/edited"\n{body}\n', encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_config_prints_both_paths_and_the_settings_with_keys_by_name_only(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (home / "config.toml").write_text(
        '# mine\ntheme = "foya-light"\n\n[connections.openai]\napi_key_env = "FOYA_TEST_SECRET_KEY"\n',
        encoding="utf-8",
    )
    monkeypatch.setenv("FOYA_TEST_SECRET_KEY", SECRET)
    monkeypatch.setenv("FOYA_MODEL", "foya-sim/large")
    assert main(["config"]) == 0
    out, err = capsys.readouterr()
    assert SECRET not in out + err
    assert f"config    {home / 'config.toml'}\n" in out
    assert f"database  {home / 'foya.sqlite3'}  (made on first use)" in out
    assert "(model from FOYA_MODEL)" in out
    settings_text = out.split("\n\n", 1)[1]
    assert 'api_key_env = "FOYA_TEST_SECRET_KEY" # the key: set in the environment' in settings_text
    parsed = tomllib.loads(settings_text)  # what it prints is TOML a config file could hold
    assert parsed["theme"] == "foya-light" and parsed["model"] == "foya-sim/large"
    assert parsed["budget"]["compact_ratio"] == 0.8

    assert main(["config", "--json"]) == 0
    out, _ = capsys.readouterr()
    assert SECRET not in out
    report = json.loads(out)
    assert report["config"] == str(home / "config.toml") and report["config_exists"] is True
    assert report["database"] == str(home / "foya.sqlite3") and report["database_exists"] is False
    assert report["environment"] == {"FOYA_MODEL": "model"}
    openai = report["settings"]["connections"]["openai"]
    assert openai["api_key_env"] == "FOYA_TEST_SECRET_KEY" and openai["api_key_set"] is True
    assert report["settings"]["theme"] == "foya-light"


def test_config_on_an_invalid_file_is_one_line_and_exit_2(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (home / "config.toml").write_text('thme = "foya-light"\n', encoding="utf-8")
    assert main(["config"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "unknown keys: thme" in err


def test_config_edit_makes_the_template_then_opens_the_editor(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = home / "config.toml"
    monkeypatch.setenv("EDITOR", f"{editor_script(tmp_path, '')} --wait")
    assert main(["config", "edit"]) == 0
    out, err = capsys.readouterr()
    assert config.read_text(encoding="utf-8") == TEMPLATE
    assert (tmp_path / "edited").read_text(encoding="utf-8").strip() == "--wait"  # its own flag first
    assert f"made {config} from the commented template" in err and f"{config}: valid" in out

    # An existing file is opened as it is; an edit that breaks it is said at once.
    monkeypatch.setenv("EDITOR", str(editor_script(tmp_path, 'echo "thme = 1" >> "$1"')))
    assert main(["config", "edit"]) == 1
    out, err = capsys.readouterr()
    assert "made" not in err and "unknown keys: thme" in err and "`foya config edit` opens it again" in err
    assert config.read_text(encoding="utf-8") == TEMPLATE + "thme = 1\n"


def test_config_edit_falls_back_to_visual_then_says_what_to_do(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = home / "config.toml"
    assert main(["config", "edit"]) == 2
    _, err = capsys.readouterr()
    assert "no editor: set $EDITOR" in err and str(config) in err and err.count("\n") == 1
    assert not config.exists()  # nothing written

    monkeypatch.setenv("VISUAL", str(editor_script(tmp_path, "")))
    assert main(["config", "edit"]) == 0
    assert (tmp_path / "edited").read_text(encoding="utf-8").strip() == str(config)

    monkeypatch.setenv("EDITOR", str(tmp_path / "no-such-editor"))
    assert main(["config", "edit"]) == 1
    _, err = capsys.readouterr()
    assert "could not be started" in err


def test_help_lists_the_config_command(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps to the terminal's width
    assert "config where config.toml and the database are, and every setting in force" in out
    assert "`foya config edit` opens the file" in out

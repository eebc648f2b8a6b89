"""Provides tests of the one writer of config.toml: a saved setting keeps every comment, a missing
file starts from the commented template, and a file that is not valid is never overwritten. Real
files under tmp_path, read back with the real loader."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from foya_tui.config_file import TEMPLATE, ConfigNotSaved, ensure_config_file, save_setting
from foya_tui.settings import Settings, load_settings, settings_from_mapping

COMMENTED = """\
# My Foya settings; keep this comment.
model = "foya-sim/large"   # the bigger simulator
theme = "foya-dark"        # dark at night

[budget]                   # SPEC B-4's lines, my way
handoff_ratio = 0.65
"""


def test_a_saved_setting_keeps_every_comment_and_the_other_settings(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(COMMENTED, encoding="utf-8")
    save_setting(config, "theme", "foya-light")
    save_setting(config, "approval_mode", "auto")
    text = config.read_text(encoding="utf-8")
    assert text.replace('"foya-light"', '"foya-dark"').replace('approval_mode = "auto"\n', "") == COMMENTED
    settings = load_settings(config, env={})
    assert (settings.theme, settings.approval_mode) == ("foya-light", "auto")
    assert settings.model == "foya-sim/large"
    assert settings.budget.handoff_ratio == 0.65


def test_a_missing_file_starts_from_the_commented_template(tmp_path: Path) -> None:
    config = tmp_path / "new" / "config.toml"
    save_setting(config, "theme", "foya-light")
    text = config.read_text(encoding="utf-8")
    assert text.startswith(TEMPLATE.splitlines()[0]) and "# [keys]" in text
    assert load_settings(config, env={}).theme == "foya-light"


def test_the_template_changes_nothing_and_is_created_once(tmp_path: Path) -> None:
    assert settings_from_mapping(tomllib.loads(TEMPLATE)) == Settings()
    config = tmp_path / "config.toml"
    assert ensure_config_file(config) is True
    config.write_text("theme = 'foya-light'\n", encoding="utf-8")
    assert ensure_config_file(config) is False
    assert config.read_text(encoding="utf-8") == "theme = 'foya-light'\n"


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ('theme = "foya-dark\n', "is not valid TOML"),
        ('theme = "foya-dark"\nthme = "x"\n', "unknown keys: thme"),
        ("approval_mode = 'sometimes'\n", "approval_mode must be one of"),
    ],
    ids=["not-toml", "unknown-key", "bad-value"],
)
def test_a_file_that_is_not_valid_is_never_overwritten(tmp_path: Path, content: str, said: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigNotSaved) as refused:
        save_setting(config, "theme", "foya-light")
    message = refused.value.message
    assert said in message and str(config) in message and "the theme was not saved" in message
    assert "\n" not in message
    assert config.read_text(encoding="utf-8") == content


def test_a_value_the_settings_refuse_is_not_written(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(COMMENTED, encoding="utf-8")
    with pytest.raises(ConfigNotSaved, match="approval mode 'sometimes' was not saved"):
        save_setting(config, "approval_mode", "sometimes")
    assert config.read_text(encoding="utf-8") == COMMENTED


def test_saving_keeps_the_file_mode_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(COMMENTED, encoding="utf-8")
    os.chmod(config, 0o640)
    save_setting(config, "theme", "foya-light")
    assert config.stat().st_mode & 0o777 == 0o640
    assert sorted(path.name for path in tmp_path.iterdir()) == ["config.toml"]


def test_keys_accept_quoted_and_dotted_ids_and_refuse_a_non_string() -> None:
    parsed = tomllib.loads('[keys]\n"route.switch" = "f6"\ncontext.compact = "ctrl+l"\n')
    assert settings_from_mapping(parsed).keys == {"route.switch": "f6", "context.compact": "ctrl+l"}
    from foya_tui.settings import SettingsError

    with pytest.raises(SettingsError, match=r"'route\.switch' must be a string of keys"):
        settings_from_mapping({"keys": {"route.switch": 6}})

"""Provides tests of the built-in theme files: they load, and their colours are legible."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.color import Color

from foya_tui.ui.themes import METER_FALLBACKS, ThemeError, builtin_themes, load_theme, themes_dir

TEXT_ROLES = ("primary", "secondary", "accent", "warning", "error", "success")


def relative_luminance(color: str) -> float:
    def channel(value: int) -> float:
        value_ = value / 255
        return value_ / 12.92 if value_ <= 0.03928 else ((value_ + 0.055) / 1.055) ** 2.4

    parsed = Color.parse(color)
    return 0.2126 * channel(parsed.r) + 0.7152 * channel(parsed.g) + 0.0722 * channel(parsed.b)


def contrast(a: str, b: str) -> float:
    """The WCAG contrast ratio of two colours (1 to 21)."""
    high, low = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_both_builtin_themes_load_from_the_themes_folder() -> None:
    assert (themes_dir() / "foya-dark.toml").is_file()
    themes = {theme.name: theme for theme in builtin_themes()}
    assert set(themes) == {"foya-dark", "foya-light"}
    assert themes["foya-dark"].dark and not themes["foya-light"].dark


@pytest.mark.parametrize("theme", builtin_themes(), ids=lambda theme: theme.name)
def test_theme_colours_are_legible(theme) -> None:
    # Body text at WCAG AAA, every colour used for text (role labels, bars, notices) at AA.
    assert contrast(theme.foreground, theme.background) >= 7
    for role in TEXT_ROLES:
        assert contrast(getattr(theme, role), theme.background) >= 4.5, role


@pytest.mark.parametrize("theme", builtin_themes(), ids=lambda theme: theme.name)
def test_meter_colours_are_set_and_visible(theme) -> None:
    # The meter's layer and reserve colours are graphics: WCAG's 3:1 for non-text contrast, against
    # both the screen and the sidebar behind the meter.
    for name in METER_FALLBACKS:
        colour = theme.variables[name]
        for behind in (theme.background, theme.surface):
            assert contrast(colour, behind) >= 3, (name, behind)


def test_a_theme_file_with_an_unknown_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "odd.toml"
    path.write_text('name = "odd"\nprimary = "#123456"\nprimray = "#000000"\n', encoding="utf-8")
    with pytest.raises(ThemeError, match="primray"):
        load_theme(path)

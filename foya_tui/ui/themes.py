"""Provides Foya's built-in themes: TOML files in `themes/` loaded into `textual.theme.Theme`."""

from __future__ import annotations

import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

from textual.app import App
from textual.theme import Theme

import foya_tui
from foya_tui.errors import InputError

DEFAULT_THEME = "foya-dark"
LIGHT_THEME = "foya-light"
_THEME_FIELDS = {f.name for f in fields(Theme)}


class ThemeError(InputError):
    """A theme file cannot be read or names a field Textual does not know."""


def themes_dir() -> Path:
    """The folder of built-in theme files.

    An installed wheel carries it inside the package (`foya_tui/themes`); an editable install or
    a source checkout uses the repository's top-level `themes/`.
    """
    packaged = Path(foya_tui.__file__).parent / "themes"
    return packaged if packaged.is_dir() else Path(foya_tui.__file__).parent.parent / "themes"


def load_theme(path: Path) -> Theme:
    """Read one theme file; its keys are `Theme` fields plus an optional `[variables]` table."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ThemeError(f"cannot read theme {path.name}: {exc}") from None
    unknown = set(raw) - _THEME_FIELDS
    if unknown:
        raise ThemeError(f"theme {path.name} has unknown keys: {', '.join(sorted(unknown))}")
    raw.setdefault("name", path.stem)
    if "primary" not in raw:
        raise ThemeError(f"theme {path.name} has no primary colour")
    return Theme(**raw)


def builtin_themes() -> list[Theme]:
    return [load_theme(path) for path in sorted(themes_dir().glob("*.toml"))]


def register_themes(app: App[Any]) -> None:
    for theme in builtin_themes():
        app.register_theme(theme)


def toggled_theme(dark: bool) -> str:
    """The other of Foya's two themes: any dark theme toggles to foya-light, any light one to foya-dark."""
    return LIGHT_THEME if dark else DEFAULT_THEME


# The budget meter's colours: each theme variable, and the colour of the theme's own palette it
# falls back to, so that any installed theme (`theme: choose`) can show the meter; Foya's themes
# set all of them.
METER_FALLBACKS = {
    "meter-pinned": "secondary",
    "meter-history": "accent",
    "meter-working-set": "primary",
    "meter-tool-schema": "warning",
    "meter-native-state": "success",
    "meter-reserve": "panel-lighten-2",
}


def with_meter_variables(variables: dict[str, str]) -> dict[str, str]:
    """CSS variables with every meter colour defined (a theme that lacks one borrows from its palette)."""
    missing = {name: variables[source] for name, source in METER_FALLBACKS.items() if name not in variables}
    return {**variables, **missing} if missing else variables

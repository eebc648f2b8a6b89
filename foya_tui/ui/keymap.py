"""Provides the effective keymap: `[keys]` of config.toml checked against the table of actions
(ui/actions.py), as Textual's keymap (binding id → keys) plus one line per entry it cannot use.

An id that names no binding, an action that has no key of its own, or a key name Textual does not
know is a warning shown when the TUI starts, never a crash; the other entries still apply. The
help screen and the footer read the keys from here (the footer through Textual's keymap).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field

from textual.keys import Keys, _character_to_key, key_to_character

from foya_tui.ui.actions import ACTIONS, UserAction

MODIFIERS = frozenset({"ctrl", "shift", "alt", "meta", "super", "hyper"})
"""The modifiers Textual puts before a key name (`ctrl+shift+k`)."""
KEY_NAMES = frozenset(
    name
    for name in (key.value.rsplit("+", 1)[-1] for key in Keys)
    if len(name) > 1 and not name.startswith("<") and name != "ctrl-at"
)
"""Named keys (`escape`, `f5`, `pageup`, `space`…); single characters are keys too."""


def remappable(action: UserAction) -> bool:
    """Whether `[keys]` can give this action other keys: it has a key, and that key is a Textual
    binding with the action's id (not the prompt's own Enter, not Textual's palette key)."""
    return action.key is not None and action.remappable


REMAPPABLE = {action.id: action for action in ACTIONS if remappable(action)}
"""Binding id → its action, for every action `[keys]` can remap."""


def key_problem(keys: str) -> str | None:
    """Why `keys` (comma-separated Textual key names) is not a key Textual knows, or None."""
    parts = [part.strip() for part in keys.split(",")]
    if not keys.strip() or not all(parts):
        return "an empty key"
    for key in parts:
        *modifiers, name = key.split("+")
        unknown = [modifier for modifier in modifiers if modifier not in MODIFIERS]
        if unknown:
            return f"{unknown[0]!r} in {key!r} is not a modifier (ctrl, shift, alt, meta)"
        if not name:
            return f"{key!r} ends without a key"
        if len(name) > 1 and name not in KEY_NAMES and not _punctuation_key(name):
            return f"{name!r} is not a key name (examples: ctrl+l, f6, alt+up, question_mark)"
    return None


def _punctuation_key(name: str) -> bool:
    """Whether `name` is Textual's name of a punctuation key (`question_mark`, `full_stop`).
    Unicode names every character (`banana` is one), but only the keyboard's are keys."""
    character = key_to_character(name)
    return character is not None and character.isascii() and not character.isalnum()


def normalised(keys: str) -> str:
    """Keys as Textual compares them: `?` is `question_mark`, spaces around commas dropped."""
    parts = [key.strip() for key in keys.split(",")]
    return ",".join(_character_to_key(key) if len(key) == 1 else key for key in parts)


@dataclass(frozen=True)
class Keymap:
    """What `[keys]` changes, and what it asked for that cannot be done."""

    keys: Mapping[str, str] = field(default_factory=dict)
    """Binding id → its keys (Textual's normalised names), for the valid entries only."""
    problems: tuple[str, ...] = ()
    """One line per entry that was left out, saying why."""

    def keys_of(self, action: UserAction) -> str | None:
        """The keys that run `action` now: the remapped ones, else its default (None: no key)."""
        return self.keys.get(action.id, action.key)


def keymap_from(config: Mapping[str, str]) -> Keymap:
    """Check `[keys]` (binding id → keys) against the table of actions."""
    keys: dict[str, str] = {}
    problems: list[str] = []
    for binding_id, wanted in config.items():
        action = REMAPPABLE.get(binding_id)
        if action is None:
            known = next((a for a in ACTIONS if a.id == binding_id), None)
            if known is not None:
                problems.append(
                    f"[keys] {binding_id!r} cannot be remapped: it has no key of its own here "
                    "(it runs from the palette or a slash command); ignored."
                )
                continue
            close = difflib.get_close_matches(binding_id, REMAPPABLE, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else "; F1 lists the actions"
            problems.append(f"[keys] {binding_id!r} is not the id of a key binding{hint}; ignored.")
            continue
        problem = key_problem(wanted)
        if problem is not None:
            problems.append(f"[keys] {binding_id!r} = {wanted!r}: {problem}; its key stays {action.key}.")
            continue
        keys[binding_id] = normalised(wanted)
    return Keymap(keys, tuple(problems))

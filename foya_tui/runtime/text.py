"""Provides text hygiene: removing terminal escapes and control characters from untrusted text,
and the text of a message's content, whatever shape it comes in.

User input, model replies and tool output can all carry escape sequences that would move the
cursor, retitle the terminal or hide text. They are stripped before display and storage;
newlines and tabs survive.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# CSI (ESC [ … final), OSC (ESC ] … BEL or ST), other two-byte ESC sequences, and the 8-bit C1 forms.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[@-Z\\-_]"
    r"|\x9b[0-?]*[ -/]*[@-~]"
    r"|\x9d[^\x07\x9c]*[\x07\x9c]?"
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def strip_control(text: str) -> str:
    """Remove escape sequences and control characters, keeping newlines and tabs.

    Carriage returns are normalised to newlines first, so `\\r\\n` text keeps its lines and a
    bare `\\r` cannot overwrite what came before it on screen.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROLS.sub("", _ESCAPES.sub("", text))


def clean_user_text(text: str) -> str:
    """User text as stored: escapes and control characters removed, outer whitespace trimmed."""
    return strip_control(text).strip()


def content_text(content: Any, separator: str = " ") -> str:
    """The text of a message's `content`: a string, or the text of its parts (OpenAI content
    parts: images and other non-text parts contribute nothing); anything else is empty."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return separator.join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""

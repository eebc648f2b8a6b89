"""Provides text hygiene: removing terminal escapes and control characters from untrusted text,
and the text of a message's content, whatever shape it comes in.

User input, model replies and tool output can all carry escape sequences that would move the
cursor, retitle the terminal or hide text. They are stripped before display and storage;
newlines and tabs survive. `terminal_safe` is the one filter for everything shown on a terminal
(the CLI's plain output, the TUI's widgets); `split_escape_tail` lets a stream hold back a
sequence split across two fragments.
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
    r"|[\x90\x98\x9e\x9f][^\x9c\x1b]*(?:\x9c|\x1b\\)?"  # 8-bit DCS, SOS, PM, APC strings
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def strip_control(text: str) -> str:
    """Remove escape sequences and control characters, keeping newlines and tabs.

    Carriage returns are normalised to newlines first, so `\\r\\n` text keeps its lines and a
    bare `\\r` cannot overwrite what came before it on screen.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROLS.sub("", _ESCAPES.sub("", text))


# Bidi embeddings, overrides and isolates reorder what follows them on screen: `\u202egnp.exe`
# shows as `exe.png` (the "Trojan Source" trick). Marks (LRM, RLM) only nudge and stay.
_BIDI = re.compile(r"[\u202a-\u202e\u2066-\u2069]")
# A lone surrogate (an undecodable byte kept by surrogateescape) cannot be written to a UTF-8
# terminal at all: printing it raises instead of showing anything.
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def terminal_safe(text: str) -> str:
    """Text that cannot command a terminal: `strip_control`, and bidi overrides removed and lone
    surrogates replaced by U+FFFD. Idempotent; printable text of any script is unchanged."""
    return _SURROGATE.sub("\ufffd", _BIDI.sub("", strip_control(text)))


# Characters that open a terminal escape sequence. A stream may split a sequence across two
# fragments, so a tail that starts with one is held back until the sequence can be seen whole.
_ESCAPE_OPENERS = ("\x1b", "\x9b", "\x9d", "\x90", "\x98", "\x9e", "\x9f")
_MAX_HELD = 256  # beyond this the tail is not a sequence in progress; release it


def split_escape_tail(text: str) -> tuple[str, str]:
    """Split `text` into what can be cleaned now and a trailing escape sequence that may be incomplete."""
    cut = max(text.rfind(opener) for opener in _ESCAPE_OPENERS)
    if cut == -1 or len(text) - cut > _MAX_HELD:
        # A final "\r" may be the first half of "\r\n", which must become one newline, not two.
        return (text[:-1], "\r") if text.endswith("\r") else (text, "")
    return text[:cut], text[cut:]


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

"""Provides wire hygiene: text that is not valid UTF-8 made visible before it reaches a provider.

POSIX file names are bytes. Python decodes the undecodable ones with `surrogateescape`, so a name
such as b"caf\\xe9" becomes the string "caf\\udce9", which no JSON encoder that writes UTF-8 (and
so no HTTP provider) accepts: "surrogates not allowed" would fail every later request of the
session. At the edges (a tool's result before it is stored, a request before it is sent) every
lone surrogate becomes a visible escape: `\\xe9` for an escaped byte, `\\ud800` for any other.
`unescape_name` turns such a name back into the string the file system knows, so the model can
name the file it was shown.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_SURROGATES = re.compile("[\ud800-\udfff]")
_ESCAPED_BYTE = re.compile(r"\\x([89a-fA-F][0-9a-fA-F])")


def _escape(match: re.Match[str]) -> str:
    point = ord(match.group())
    # U+DC80..U+DCFF are the bytes 0x80..0xFF that surrogateescape could not decode.
    if 0xDC80 <= point <= 0xDCFF:
        return f"\\x{point - 0xDC00:02x}"
    return f"\\u{point:04x}"


def escape_undecodable(text: str) -> str:
    """`text` with every lone surrogate written as a visible escape; valid text is returned as is."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATES.sub(_escape, text)
    return text


def wire_safe(value: Any) -> Any:
    """A JSON-shaped value (messages, tool calls) with `escape_undecodable` applied to every string."""
    if isinstance(value, str):
        return escape_undecodable(value)
    if isinstance(value, Mapping):
        return {key: wire_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [wire_safe(item) for item in value]
    return value


def unescape_name(text: str) -> str:
    """The inverse for names: `\\xe9` back to the surrogate the file system's string holds."""
    return _ESCAPED_BYTE.sub(lambda match: chr(0xDC00 + int(match.group(1), 16)), text)

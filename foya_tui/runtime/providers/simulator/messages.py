"""Provides what every behaviour of the simulator reads from a request's messages.

The user's latest request is the latest user message that is neither the hidden handoff reminder
(SPEC K-1) nor a checkpoint's message; "this turn" is everything after it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from foya_tui.runtime.providers.summary_format import CHECKPOINT_MESSAGE_PREFIX, HANDOFF_MARKER
from foya_tui.runtime.text import content_text

_WORKDIR_LINE = re.compile(r"^working directory: (.+)$", re.MULTILINE)


def text_of(message: Mapping[str, Any]) -> str:
    return content_text(message.get("content"))


def quote(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def workdir_of(messages: Sequence[Mapping[str, Any]], workdir: Path | None = None) -> Path:
    """The working directory as a model would learn it: from the request's environment block
    (`workdir`, the directory the simulator was made for, wins when given)."""
    if workdir is not None:
        return workdir
    for message in messages:
        if message.get("role") == "system":
            match = _WORKDIR_LINE.search(text_of(message))
            if match:
                return Path(match.group(1).strip())
    return Path.cwd()


def is_handoff(message: Mapping[str, Any]) -> bool:
    """Whether a message is the hidden continuation reminder (SPEC K-1)."""
    return message.get("role") == "user" and text_of(message).lstrip().startswith(HANDOFF_MARKER)


def is_checkpoint(message: Mapping[str, Any]) -> bool:
    return message.get("role") == "user" and text_of(message).lstrip().startswith(CHECKPOINT_MESSAGE_PREFIX)


def request_index(messages: Sequence[Mapping[str, Any]]) -> int | None:
    """Index of the user's latest request: the latest user message that is neither the hidden
    reminder nor a checkpoint's message (after a mid-turn compaction the request is re-inserted
    verbatim after the checkpoint, SPEC C-3, so it is still found)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "user" and not is_handoff(message) and not is_checkpoint(message):
            return index
    return None


def request_text(messages: Sequence[Mapping[str, Any]]) -> str:
    index = request_index(messages)
    return text_of(messages[index]) if index is not None else ""


def turn_messages(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The messages after the user's latest request (this turn's work so far)."""
    index = request_index(messages)
    return list(messages[index + 1 :]) if index is not None else list(messages)

"""Provides token counting: tiktoken when its encoding is available offline, else a safe estimate.

The encodings are the files LiteLLM ships (located with `importlib.util.find_spec`, so LiteLLM
itself is not imported). When no encoding can be loaded, a conservative character-weight
estimate is used: ASCII text at ~4 characters a token, CJK at one token per character (a plain
`len/4` would undercount Chinese about fourfold).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from foya_tui.runtime.digests import canonical_json

DEFAULT_ENCODING = "o200k_base"
# OpenAI chat format: every message costs a few tokens of framing, every reply a few of priming.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_REPLY = 3


class TokenCounter(Protocol):
    """Counts tokens of text; `exact` says whether counts are measured by a real tokenizer."""

    name: str
    exact: bool

    def count(self, text: str) -> int: ...


class CharWeightEstimator:
    """A conservative estimate for when no tokenizer fits the model."""

    name = "char-weight"
    exact = False

    def count(self, text: str) -> int:
        ascii_chars = wide_chars = 0
        for ch in text:
            if ord(ch) < 128:
                ascii_chars += 1
            else:
                # CJK, kana, hangul, emoji: tokenizers spend about one token (often more) on each.
                wide_chars += 1
        return (ascii_chars + 3) // 4 + wide_chars


class TiktokenCounter:
    name: str
    exact = True

    def __init__(self, encoding: Any) -> None:
        self._encoding = encoding
        self.name = encoding.name

    def count(self, text: str) -> int:
        # disallowed_special=(): user text that happens to contain "<|endoftext|>" is counted as
        # ordinary text instead of raising.
        return len(self._encoding.encode(text, disallowed_special=()))


def _bundled_tiktoken_dir() -> Path | None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    return folder if folder.is_dir() else None


_load_lock = threading.Lock()


@functools.cache
def _load_counter(encoding_name: str) -> TokenCounter:
    with _load_lock:
        bundled = _bundled_tiktoken_dir()
        if bundled is not None:
            # The same default LiteLLM applies when imported; a user's own cache dir wins.
            os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(bundled))
        try:
            import tiktoken

            return TiktokenCounter(tiktoken.get_encoding(encoding_name))
        except Exception:
            # Offline without the encoding file (or tiktoken broken): estimate instead of failing.
            return CharWeightEstimator()


def default_counter() -> TokenCounter:
    """The process-wide counter (loaded on first use, ~0.3 s; keep it off the UI thread)."""
    return _load_counter(DEFAULT_ENCODING)


def message_text(message: Mapping[str, Any]) -> str:
    """Everything model-visible in one OpenAI-shaped message, as text to count."""
    parts: list[str] = [str(message.get("role", ""))]
    content = message.get("content")
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        parts.extend(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    for call in message.get("tool_calls") or ():
        function = call.get("function", {}) if isinstance(call, Mapping) else {}
        parts.append(str(function.get("name", "")))
        parts.append(str(function.get("arguments", "")))
    if message.get("name"):
        parts.append(str(message["name"]))
    return "\n".join(parts)


def count_messages(messages: Iterable[Mapping[str, Any]], counter: TokenCounter | None = None) -> int:
    """Tokens of a chat request's messages, including per-message framing."""
    counter = counter or default_counter()
    total = TOKENS_PER_REPLY
    for message in messages:
        total += TOKENS_PER_MESSAGE + counter.count(message_text(message))
    return total


def count_tools(tools: Iterable[Mapping[str, Any]], counter: TokenCounter | None = None) -> int:
    counter = counter or default_counter()
    return sum(counter.count(canonical_json(tool)) for tool in tools)

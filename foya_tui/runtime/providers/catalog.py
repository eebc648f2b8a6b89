"""Provides model facts (context window, output limit, image input) for routes.

The simulator's models are registered here. Other models are looked up in the model table that
LiteLLM ships (its offline JSON file, read directly so LiteLLM is not imported for it). An
unknown model has no window: the budget then uses SPEC B-3's defaults.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from foya_tui.settings import ModelSettings

LITELLM_TABLE_FILE = "model_prices_and_context_window_backup.json"


@dataclass(frozen=True)
class ModelInfo:
    model: str
    window: int | None
    """Total context window in tokens (input + output), None when unknown."""
    max_output: int | None
    supports_images: bool
    source: str
    """Where the facts came from: `simulator`, `litellm` or `unknown`."""
    native_compaction: bool = False
    """Whether the provider can compact a context into an opaque native state (SPEC C-11)."""


SIMULATOR_MODELS: dict[str, ModelInfo] = {
    "foya-sim/small": ModelInfo("foya-sim/small", 8_192, 2_048, False, "simulator"),
    "foya-sim/large": ModelInfo("foya-sim/large", 32_768, 4_096, False, "simulator"),
    "foya-sim/native": ModelInfo(
        "foya-sim/native", 16_384, 2_048, False, "simulator", native_compaction=True
    ),
}


@functools.cache
def _litellm_table() -> dict[str, Any]:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(next(iter(spec.submodule_search_locations))) / LITELLM_TABLE_FILE
    try:
        table = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return table if isinstance(table, dict) else {}


@functools.cache
def litellm_providers() -> frozenset[str]:
    """Every provider LiteLLM's model table names (`openai`, `anthropic`, `ollama`, …)."""
    return frozenset(
        str(entry["litellm_provider"])
        for entry in _litellm_table().values()
        if isinstance(entry, dict) and isinstance(entry.get("litellm_provider"), str)
    )


def litellm_table_provider(model: str) -> str | None:
    """The provider LiteLLM's model table gives a bare model name (`gpt-4.1` → `openai`), or None."""
    entry = _litellm_table().get(model)
    provider = entry.get("litellm_provider") if isinstance(entry, dict) else None
    return provider if isinstance(provider, str) else None


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def lookup_model(model: str) -> ModelInfo:
    """Facts about a LiteLLM model string; never raises, never prints."""
    if model in SIMULATOR_MODELS:
        return SIMULATOR_MODELS[model]
    table = _litellm_table()
    _, _, bare = model.partition("/")
    entry = table.get(model) or (table.get(bare) if bare else None)
    if not isinstance(entry, dict):
        return ModelInfo(model, None, None, False, "unknown")
    # LiteLLM's max_input_tokens is the context window; max_tokens is sometimes the window and
    # sometimes the output limit, so it is only trusted as a window when nothing better exists.
    window = _positive_int(entry.get("max_input_tokens")) or _positive_int(entry.get("max_tokens"))
    return ModelInfo(
        model=model,
        window=window,
        max_output=_positive_int(entry.get("max_output_tokens")),
        supports_images=bool(entry.get("supports_vision")),
        source="litellm",
    )


def simulator_models() -> list[str]:
    return list(SIMULATOR_MODELS)


def model_info(model: str, overrides: ModelSettings | None = None) -> ModelInfo:
    """Catalog facts with the user's `[models."NAME"]` overrides applied on top."""
    info = lookup_model(model)
    if overrides is None:
        return info
    changed: dict[str, Any] = {  # fields of different types, passed on as keywords
        key: value
        for key, value in (
            ("window", overrides.window),
            ("max_output", overrides.max_output),
            ("supports_images", overrides.supports_images),
        )
        if value is not None
    }
    if not changed:
        return info
    return replace(info, source="config" if info.source == "unknown" else f"{info.source}+config", **changed)

"""Provides Foya's typed settings, read from `config.toml` and the environment.

Secrets never live here: a connection names the environment variable that holds its key
(`api_key_env`), and the key is read only when a request is sent. Unknown keys are errors, so
a typo never silently falls back to a default.
"""

from __future__ import annotations

import os
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from foya_tui.errors import InputError

DEFAULT_MODEL = "foya-sim/small"
DEFAULT_CONNECTION = "default"
APPROVAL_MODES = ("read-only", "ask", "auto")


class SettingsError(InputError):
    """The configuration file or an environment override is invalid (a one-line message)."""


@dataclass(frozen=True)
class Connection:
    """Where requests for a route go; part of the route identity (SPEC R-1)."""

    name: str = DEFAULT_CONNECTION
    """The connection's name in `config.toml` (`[connections.NAME]`)."""
    api_base: str | None = None
    """Endpoint URL for OpenAI-compatible servers (vLLM, LM Studio, a proxy); None = provider default."""
    api_key_env: str | None = None
    """Name of the environment variable holding the API key. The key itself is never stored."""
    empty_tool_call_content: bool | None = None
    """Send `"content": ""` instead of null beside an assistant message's tool calls (some
    OpenAI-compatible servers, llama-cpp-python among them, refuse null). Unset: on for a
    connection with its own `api_base`, off otherwise."""

    @property
    def sends_empty_tool_call_content(self) -> bool:
        if self.empty_tool_call_content is not None:
            return self.empty_tool_call_content
        return bool(self.api_base)

    def api_key(self, env: Mapping[str, str] | None = None) -> str | None:
        """Read the key at request time; None lets LiteLLM use the provider's standard variable."""
        if not self.api_key_env:
            return None
        return (os.environ if env is None else env).get(self.api_key_env) or None


@dataclass(frozen=True)
class ModelSettings:
    """Per-model overrides (`[models."openai/gpt-4.1"]`); each configured model is a route."""

    connection: str | None = None
    """Connection this model uses; None = the default connection."""
    window: int | None = None
    """Context window in tokens, overriding LiteLLM's table (required for models it lacks)."""
    max_input: int | None = None
    """Largest input you allow, in tokens; stricter than the window when smaller (SPEC B-2)."""
    max_output: int | None = None
    """The model's output limit in tokens, overriding LiteLLM's table."""
    supports_images: bool | None = None
    """Whether the model takes image input, overriding LiteLLM's table."""


@dataclass(frozen=True)
class BudgetSettings:
    """The token budget's numbers (SPEC B-1..B-4); every default is the spec's."""

    first_reserve_ratio: float = 0.25
    """Share of a known window reserved for output before any real usage exists."""
    first_reserve_max: int = 16_384
    """Cap on that first reserve, in tokens."""
    reserve_output_multiplier: float = 2.0
    """After real usage: reserve = this × the last output tokens, clamped to [reserve_min, reserve_max]."""
    reserve_min: int = 1_024
    reserve_max: int = 8_192
    unknown_high_water: int = 32_768
    """Compaction line for a model whose window is unknown (SPEC B-3)."""
    unknown_reserve: int = 16_384
    """Output reserve for a model whose window is unknown."""
    handoff_ratio: float = 0.70
    """Handoff band starts at this share of the input budget (SPEC B-4, K-1)."""
    compact_ratio: float = 0.80
    """Compaction line (high-water mark) at this share of the input budget."""

    def validate(self) -> None:
        if not 0 < self.handoff_ratio <= self.compact_ratio <= 1:
            raise SettingsError("[budget] needs 0 < handoff_ratio <= compact_ratio <= 1")
        if not 0 < self.first_reserve_ratio < 1:
            raise SettingsError("[budget] first_reserve_ratio must be between 0 and 1")
        if self.reserve_min > self.reserve_max:
            raise SettingsError("[budget] reserve_min must not exceed reserve_max")


DEFAULT_MAX_STEPS = 500
"""`[tools] max_steps` unless configured (also the Session's default)."""


@dataclass(frozen=True)
class ToolSettings:
    """Tool execution and the shortening of large tool results (SPEC T-1), `[tools]`."""

    shell_timeout: float = 120.0
    """Seconds a shell command may run before it is killed (the model may ask for less)."""
    max_steps: int = DEFAULT_MAX_STEPS
    """Model calls per turn before Foya stops a runaway tool loop and asks the user: generous, so
    that a long headless task (a hundred-odd tool steps) finishes on the defaults."""
    oversized_tokens: int = 2_000
    """A tool result above this many tokens may be shortened in the model's view under pressure."""
    head_chars: int = 3_000
    """Characters kept from the start of a shortened result."""
    tail_chars: int = 1_500
    """Characters kept from the end of a shortened result."""
    shell_network: bool = False
    """Whether shell commands keep the network inside the bubblewrap sandbox (when bwrap is used)."""


@dataclass(frozen=True)
class CompactionSettings:
    """History compaction (SPEC C-1..C-15), `[compaction]`."""

    mid_turn_min_steps: int = 3
    """Complete tool steps after the anchor before a mid-turn checkpoint is worth it (SPEC C-3)."""
    summary_max_tokens: int = 2_048
    """Output tokens a summary request may use; reserved out of the route's window when planning."""
    transcript_message_chars: int = 4_000
    """Characters of one message the summariser reads (head and tail kept; history keeps all)."""
    ledger_chars: int = 32_000
    """The most characters of exact evidence a checkpoint shows, on any route: the ledger takes a
    share of the route's window (`view/ledger.py` LEDGER_WINDOW_SHARE), capped here (SPEC K-12)."""
    max_fingerprints: int = 16
    """Failure fingerprints remembered per session (SPEC C-14)."""
    max_requests: int = 8
    """Provider requests one compaction may spend on repairs and back-offs, on top of the necessary
    ones (one per chunk of the covered prefix and per merge of their summaries)."""
    model: str | None = None
    """LiteLLM model string of a separate summary route (on the session's connection unless
    `[models."NAME"] connection` says otherwise). Unset: summaries use the session's route. When a
    summary fails there, the session's own route is tried before the deterministic fallback."""
    hook: str | None = None
    """A command run before every compaction (JSON facts on stdin); a non-zero exit vetoes it and
    its first output line is the reason (SPEC K-7). Runs without a shell: split like a shell line."""
    hook_timeout: float = 10.0
    """Seconds the hook may take; a hook that takes longer vetoes the compaction."""
    fallback: bool = True
    """Whether an automatic compaction whose summary fails uses the deterministic fallback
    (SPEC K-9, K-10) instead of failing open."""
    breaker_threshold: int = 3
    """Consecutive summary failures in one (workspace, session) that open the circuit breaker:
    automatic compactions then use the deterministic fallback without asking a model (SPEC K-11)."""
    cache_ttl_seconds: float = 60.0
    """Seconds after the last provider call when its prompt cache counts as cold: older tool
    results are then cleared from the model's view (micro-compaction, SPEC K-3)."""
    recent_tool_turns: int = 3
    """The most recent tool turns whose results micro-compaction and snip never touch (K-3, K-4);
    fewer when their results would take more than a quarter of the input budget, never less than
    the newest (`runtime/context/floor.py`)."""


@dataclass(frozen=True)
class Settings:
    """Every setting Foya reads. Each field is documented; all have working defaults."""

    model: str = DEFAULT_MODEL
    """LiteLLM model string of the default route, e.g. `openai/gpt-4.1`; the simulator by default."""
    connection: str = DEFAULT_CONNECTION
    """Name of the connection the default route uses."""
    connections: Mapping[str, Connection] = field(default_factory=lambda: {DEFAULT_CONNECTION: Connection()})
    """Named connections (`[connections.NAME]` tables)."""
    models: Mapping[str, ModelSettings] = field(default_factory=dict)
    """Per-model overrides and the routes offered by the route switcher (`[models."NAME"]`)."""
    budget: BudgetSettings = field(default_factory=BudgetSettings)
    """Token budget numbers (`[budget]`)."""
    tools: ToolSettings = field(default_factory=ToolSettings)
    """Tool execution and large-result settings (`[tools]`)."""
    compaction: CompactionSettings = field(default_factory=CompactionSettings)
    """History compaction settings (`[compaction]`)."""
    theme: str = "foya-dark"
    """Theme name: one of the files in `themes/` (`foya-dark`, `foya-light`) or a Textual theme."""
    approval_mode: str = "ask"
    """What tools may do without asking: `read-only`, `ask` (writes and shell need a yes) or `auto`."""
    request_timeout: float = 120.0
    """Seconds before a provider request is abandoned as a timeout; on a stream, seconds without
    any progress (a stream that sends only empty chunks is abandoned too)."""
    stream_deadline: float = 600.0
    """Seconds a streamed reply may take in all, however steadily it trickles."""
    max_retries: int = 2
    """Foya's own retries for rate limits and connection errors (LiteLLM's retries are off)."""
    retry_backoff: float = 1.0
    """Seconds before the first retry; doubles per attempt; a provider's Retry-After wins if longer."""
    system_prompt: str | None = None
    """Replaces the built-in system prompt kernel when set."""
    max_image_bytes: int = 20 * 1024 * 1024
    """Total image bytes one request may carry; images beyond it become text notes (SPEC I-1)."""
    import_max_bytes: int = 512 * 1024 * 1024
    """Largest transcript `foya import` reads; a bigger file is refused in one line, unread."""
    keys: Mapping[str, str] = field(default_factory=dict)
    """`[keys]`: binding id → the keys that replace its default (`"context.compact" = "ctrl+l"`).
    Checked against the TUI's table of actions when the TUI starts (an unknown id or key name is a
    warning there, not an error here: the settings do not know the TUI's actions)."""

    def connection_for(self, name: str | None = None) -> Connection:
        name = name or self.connection
        try:
            return self.connections[name]
        except KeyError:
            raise SettingsError(
                f"unknown connection {name!r}; configured: {', '.join(self.connections)}"
            ) from None

    def model_settings(self, model: str) -> ModelSettings:
        return self.models.get(model, ModelSettings())


def _coerce(where: str, value: Any, annotation: Any) -> Any:
    """Check one TOML value against a dataclass field's type (int, float, str, bool, optional)."""
    options = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    for kind in options:
        if kind is type(None):
            continue
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if isinstance(value, kind) and not (kind is not bool and isinstance(value, bool)):
            if kind in (int, float) and value < 0:
                raise SettingsError(f"setting {where!r} must not be negative")
            return value
    names = " or ".join(k.__name__ for k in options if k is not type(None))
    raise SettingsError(f"setting {where!r} must be {names}, got {type(value).__name__}")


def _parse_table(cls: type, table: Any, where: str, skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Validate a TOML table against a settings dataclass; returns the constructor values."""
    if not isinstance(table, dict):
        raise SettingsError(f"[{where}] must be a table")
    hints = typing.get_type_hints(cls)
    allowed = {f.name for f in fields(cls)} - skip
    unknown = set(table) - allowed
    if unknown:
        section = "config.toml" if not where else f"[{where}]"
        raise SettingsError(f"{section} has unknown keys: {', '.join(sorted(unknown))}")
    prefix = f"{where}." if where else ""
    return {key: _coerce(f"{prefix}{key}", value, hints[key]) for key, value in table.items()}


def _named_tables(cls: type, raw: Any, section: str, **extra: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise SettingsError(f"[{section}] must be a table of named tables")
    parsed = {}
    for name, table in raw.items():
        where = f'{section}."{name}"' if "/" in name else f"{section}.{name}"
        if isinstance(table, dict) and "api_key" in table:
            raise SettingsError(
                f"[{where}] api_key is not accepted: put the key in an environment variable "
                "and name it with api_key_env"
            )
        values = _parse_table(cls, table, where, skip=frozenset(extra))
        parsed[name] = cls(**{key: name for key in extra}, **values)
    return parsed


def _keys_table(raw: Any, prefix: str = "") -> dict[str, str]:
    """`[keys]` as binding id → keys. An unquoted dotted id (`context.compact = "ctrl+l"`) is a
    nested table in TOML; it is read back as the id it spells."""
    if not isinstance(raw, dict):
        raise SettingsError('[keys] must be a table of binding ids and keys ("context.compact" = "ctrl+l")')
    keys: dict[str, str] = {}
    for name, value in raw.items():
        binding_id = f"{prefix}{name}"
        if isinstance(value, dict):
            keys.update(_keys_table(value, f"{binding_id}."))
        elif isinstance(value, str):
            keys[binding_id] = value
        else:
            raise SettingsError(
                f'[keys] {binding_id!r} must be a string of keys, like "ctrl+l" or "f6,ctrl+l"'
            )
    return keys


def settings_from_mapping(raw: Mapping[str, Any]) -> Settings:
    """Validate a parsed config table into Settings."""
    raw = dict(raw)
    connections = {DEFAULT_CONNECTION: Connection()}
    connections.update(_named_tables(Connection, raw.pop("connections", {}), "connections", name=True))
    models = _named_tables(ModelSettings, raw.pop("models", {}), "models")
    budget = BudgetSettings(**_parse_table(BudgetSettings, raw.pop("budget", {}), "budget"))
    budget.validate()
    tools = ToolSettings(**_parse_table(ToolSettings, raw.pop("tools", {}), "tools"))
    if tools.max_steps < 1:
        raise SettingsError("[tools] max_steps must be at least 1")
    compaction = CompactionSettings(
        **_parse_table(CompactionSettings, raw.pop("compaction", {}), "compaction")
    )
    if (
        compaction.max_fingerprints < 1
        or compaction.max_requests < 1
        or compaction.mid_turn_min_steps < 1
        or compaction.breaker_threshold < 1
    ):
        raise SettingsError(
            "[compaction] max_fingerprints, max_requests, mid_turn_min_steps and breaker_threshold "
            "must be at least 1"
        )
    keys = _keys_table(raw.pop("keys", {}))
    values = _parse_table(
        Settings, raw, "", skip=frozenset({"connections", "models", "budget", "tools", "compaction", "keys"})
    )
    settings = Settings(
        connections=connections,
        models=models,
        budget=budget,
        tools=tools,
        compaction=compaction,
        keys=keys,
        **values,
    )
    if settings.approval_mode not in APPROVAL_MODES:
        raise SettingsError(f"approval_mode must be one of {', '.join(APPROVAL_MODES)}")
    settings.connection_for()  # the default connection must exist
    for model, overrides in models.items():
        if overrides.connection is not None and overrides.connection not in connections:
            raise SettingsError(f'[models."{model}"] uses unknown connection {overrides.connection!r}')
    return settings


def load_settings(config_file: Path | None, env: Mapping[str, str] | None = None) -> Settings:
    """Read `config.toml` (if it exists), then apply `FOYA_MODEL` / `FOYA_THEME` overrides."""
    env = os.environ if env is None else env
    raw: dict[str, Any] = {}
    if config_file is not None and config_file.is_file():
        try:
            raw = tomllib.loads(config_file.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise SettingsError(f"{config_file}: not valid TOML ({exc})") from None
    if env.get("FOYA_MODEL"):
        raw["model"] = env["FOYA_MODEL"]
    if env.get("FOYA_THEME"):
        raw["theme"] = env["FOYA_THEME"]
    return settings_from_mapping(raw)

"""Provides Foya's typed settings, read from `config.toml` and the environment.

Secrets never live here: a connection names the environment variable that holds its key
(`api_key_env`), and the key is read only when a request is sent.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

DEFAULT_MODEL = "foya-sim/small"
DEFAULT_CONNECTION = "default"


class SettingsError(ValueError):
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

    def api_key(self, env: Mapping[str, str] | None = None) -> str | None:
        """Read the key at request time; None lets LiteLLM use the provider's standard variable."""
        if not self.api_key_env:
            return None
        return (os.environ if env is None else env).get(self.api_key_env) or None


@dataclass(frozen=True)
class Settings:
    """Every setting Foya reads. Each field is documented; all have working defaults."""

    model: str = DEFAULT_MODEL
    """LiteLLM model string of the default route, e.g. `openai/gpt-4.1`; the simulator by default."""
    connection: str = DEFAULT_CONNECTION
    """Name of the connection the default route uses."""
    connections: Mapping[str, Connection] = field(default_factory=lambda: {DEFAULT_CONNECTION: Connection()})
    """Named connections (`[connections.NAME]` tables)."""
    theme: str = "foya-dark"
    """Theme name: one of the files in `themes/` (`foya-dark`, `foya-light`) or a Textual theme."""
    request_timeout: float = 120.0
    """Seconds before a provider request is abandoned as a timeout."""
    max_retries: int = 2
    """Foya's own retries for rate limits and connection errors (LiteLLM's retries are off)."""
    retry_backoff: float = 1.0
    """Seconds before the first retry; doubles per attempt; a provider's Retry-After wins if longer."""
    system_prompt: str | None = None
    """Replaces the built-in system prompt kernel when set."""

    def connection_for(self, name: str | None = None) -> Connection:
        name = name or self.connection
        try:
            return self.connections[name]
        except KeyError:
            raise SettingsError(
                f"unknown connection {name!r}; configured: {', '.join(self.connections)}"
            ) from None


_SCALARS: dict[str, type] = {
    "model": str,
    "connection": str,
    "theme": str,
    "request_timeout": float,
    "max_retries": int,
    "retry_backoff": float,
    "system_prompt": str,
}


def _coerce(key: str, value: Any, kind: type) -> Any:
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise SettingsError(f"setting {key!r} must be {kind.__name__}, got {type(value).__name__}")
    if kind in (int, float) and value < 0:
        raise SettingsError(f"setting {key!r} must not be negative")
    return value


def _parse_connections(raw: Any) -> dict[str, Connection]:
    if not isinstance(raw, dict):
        raise SettingsError("[connections] must be a table of named connections")
    parsed: dict[str, Connection] = {}
    allowed = {f.name for f in fields(Connection)} - {"name"}
    for name, table in raw.items():
        if not isinstance(table, dict):
            raise SettingsError(f"[connections.{name}] must be a table")
        unknown = set(table) - allowed
        if "api_key" in unknown:
            raise SettingsError(
                f"[connections.{name}] api_key is not accepted: put the key in an environment "
                "variable and name it with api_key_env"
            )
        if unknown:
            raise SettingsError(f"[connections.{name}] has unknown keys: {', '.join(sorted(unknown))}")
        values = {key: _coerce(f"connections.{name}.{key}", value, str) for key, value in table.items()}
        parsed[name] = Connection(name=name, **values)
    return parsed


def settings_from_mapping(raw: Mapping[str, Any]) -> Settings:
    """Validate a parsed config table into Settings (unknown keys are errors, not silently ignored)."""
    values: dict[str, Any] = {}
    connections = {DEFAULT_CONNECTION: Connection()}
    for key, value in raw.items():
        if key == "connections":
            connections.update(_parse_connections(value))
        elif key in _SCALARS:
            values[key] = _coerce(key, value, _SCALARS[key])
        else:
            raise SettingsError(f"unknown setting {key!r}")
    settings = Settings(connections=connections, **values)
    settings.connection_for()  # the default connection must exist
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

"""Provides the Route: the identity of where a request goes (SPEC R-1).

Two routes are equal iff connection, protocol, endpoint and model are equal; the route id is a
digest of exactly those fields, so baselines and native state can be keyed by it (SPEC B-9, R-2).
"""

from __future__ import annotations

from dataclasses import dataclass

from foya_tui.errors import InputError
from foya_tui.runtime.digests import digest_of
from foya_tui.settings import Settings

SIMULATOR_PROTOCOL = "foya-sim"
DEFAULT_PROTOCOL = "openai"  # what LiteLLM assumes for a bare model name such as "gpt-4.1"


@dataclass(frozen=True)
class Route:
    connection: str
    protocol: str
    endpoint: str
    model: str

    @property
    def id(self) -> str:
        fields = {
            "connection": self.connection,
            "protocol": self.protocol,
            "endpoint": self.endpoint,
            "model": self.model,
        }
        return digest_of(fields)[:16]

    @property
    def is_simulator(self) -> bool:
        return self.protocol == SIMULATOR_PROTOCOL

    @property
    def where(self) -> str:
        """What a failure names: the model, and the endpoint when the route has its own."""
        return f"{self.label} at {self.endpoint}" if self.endpoint else self.label

    @property
    def label(self) -> str:
        """What the header shows: the model, marked when it is the offline simulator."""
        return f"{self.model} (simulator)" if self.is_simulator else self.model


def protocol_of(model: str) -> str:
    """LiteLLM's provider prefix of a model string (`anthropic/claude-…` → `anthropic`)."""
    prefix, slash, _ = model.partition("/")
    return prefix.lower() if slash and prefix else DEFAULT_PROTOCOL


def normalise_endpoint(api_base: str | None) -> str:
    return (api_base or "").strip().rstrip("/")


def make_route(model: str, connection: str, api_base: str | None = None) -> Route:
    model = model.strip()
    if not model:
        raise InputError("a model name is required")
    protocol = protocol_of(model)
    # The simulator has no endpoint: an api_base configured for a real provider must not split
    # the simulator's identity into several routes.
    endpoint = "" if protocol == SIMULATOR_PROTOCOL else normalise_endpoint(api_base)
    return Route(connection=connection, protocol=protocol, endpoint=endpoint, model=model)


def route_for(settings: Settings, model: str | None = None, connection: str | None = None) -> Route:
    """The route of a model: on the given connection, else the model's configured one, else the
    default connection (raises SettingsError for an unknown connection, ValueError for no model)."""
    model = model or settings.model
    conn = settings.connection_for(connection or settings.model_settings(model).connection)
    return make_route(model, conn.name, conn.api_base)

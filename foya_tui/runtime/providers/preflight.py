"""Provides the pre-flight check of a route: is the model string one LiteLLM can send, and is
its key there, decided before anything is written and without any network.

A `foya run hi --model gpt5` must fail at once with one line and leave no session behind, not
after a 45 s request with LiteLLM's many-line text. The model string is resolved as LiteLLM's
provider lookup does (`litellm.get_llm_provider`): a `provider/model` prefix, or a bare name
from LiteLLM's offline model table. Common providers and their key variables are answered from
that table and the names below, so the check costs milliseconds; only an unusual provider prefix
loads LiteLLM to ask it (`get_llm_provider`, `validate_environment`), which takes seconds.

A connection with its own `api_base` and no `api_key_env` (a local llama.cpp, vLLM or Ollama
server) needs no key: the client sends a placeholder so that LiteLLM does not refuse.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from foya_tui.errors import InputError
from foya_tui.runtime.providers.catalog import litellm_providers, litellm_table_provider
from foya_tui.runtime.providers.routes import Route
from foya_tui.settings import Settings

# The variables LiteLLM reads for the most used hosted providers (from its provider docs and
# `validate_environment`); any one of a provider's names is enough.
PROVIDER_KEY_VARIABLES: Mapping[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "text-completion-openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "mistral": ("MISTRAL_API_KEY",),
    "codestral": ("CODESTRAL_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "together_ai": ("TOGETHERAI_API_KEY", "TOGETHER_API_KEY", "TOGETHER_AI_API_KEY"),
    "cohere": ("COHERE_API_KEY", "CO_API_KEY"),
    "cohere_chat": ("COHERE_API_KEY", "CO_API_KEY"),
    "fireworks_ai": ("FIREWORKS_AI_API_KEY", "FIREWORKS_API_KEY", "FIREWORKSAI_API_KEY"),
    "perplexity": ("PERPLEXITYAI_API_KEY", "PERPLEXITY_API_KEY"),
    "deepinfra": ("DEEPINFRA_API_KEY",),
    "cerebras": ("CEREBRAS_API_KEY",),
}
# Providers that run on the user's machine and take no key by default.
KEYLESS_PROVIDERS = frozenset({"ollama", "ollama_chat", "lm_studio", "hosted_vllm", "llamafile", "vllm"})
PLACEHOLDER_KEY = "not-needed"
"""What goes out as the key to a keyless local server: the OpenAI SDK refuses to send without one."""


class RouteError(InputError):
    """A route that cannot be sent: an unknown model string or a missing key (one line, exit 2)."""


@dataclass(frozen=True)
class KeyPlan:
    """Where a request's key comes from: a value to send (a secret or the placeholder), or none
    (LiteLLM then reads the provider's own variable)."""

    value: str | None
    secret: bool


def provider_of(model: str) -> str | None:
    """LiteLLM's provider for a model string, or None when LiteLLM would not know where to send it."""
    prefix, slash, rest = model.partition("/")
    known = litellm_providers()
    if slash and prefix and rest:
        if prefix in known or prefix in KEYLESS_PROVIDERS or prefix in PROVIDER_KEY_VARIABLES:
            return prefix
        return _ask_litellm_provider(model)
    return litellm_table_provider(model)


def _ask_litellm_provider(model: str) -> str | None:
    """LiteLLM's own lookup, for a prefix its model table does not show (loads LiteLLM)."""
    from foya_tui.runtime.providers.litellm_client import load_litellm

    try:
        return str(load_litellm().get_llm_provider(model)[1])
    except Exception:  # LiteLLM raises BadRequestError for a string it cannot place
        return None


def _litellm_key_variables(model: str) -> tuple[str, ...]:
    """The credential variables LiteLLM reports missing for an uncommon provider (loads LiteLLM)."""
    from foya_tui.runtime.providers.litellm_client import load_litellm

    try:
        missing = load_litellm().validate_environment(model=model).get("missing_keys") or ()
    except Exception:
        return ()
    # validate_environment also lists endpoints (OLLAMA_API_BASE): only credentials are required.
    return tuple(name for name in missing if "KEY" in name or "TOKEN" in name)


def key_plan(settings: Settings, route: Route, env: Mapping[str, str] | None = None) -> KeyPlan:
    """The key a request on `route` sends; raises RouteError when the one it needs is missing."""
    env = os.environ if env is None else env
    if route.is_simulator:
        return KeyPlan(None, secret=False)
    connection = settings.connection_for(route.connection)
    if connection.api_key_env:
        value = env.get(connection.api_key_env) or None
        if value is None:
            raise RouteError(
                f"{route.model}: the key variable {connection.api_key_env} named by "
                f"[connections.{connection.name}] api_key_env is not set"
            )
        return KeyPlan(value, secret=True)
    if route.endpoint:
        return KeyPlan(PLACEHOLDER_KEY, secret=False)
    provider = provider_of(route.model)
    if provider is None or provider in KEYLESS_PROVIDERS:
        return KeyPlan(None, secret=False)
    names = PROVIDER_KEY_VARIABLES.get(provider)
    if names is None:
        names = _litellm_key_variables(route.model)
    if names and not any(env.get(name) for name in names):
        raise RouteError(
            f"{route.model}: no API key: set {' or '.join(names)}, or name your key's variable with "
            f"api_key_env in [connections.{connection.name}]"
        )
    return KeyPlan(None, secret=False)


def check_route(settings: Settings, route: Route, env: Mapping[str, str] | None = None) -> None:
    """Raise RouteError (one line) when `route` cannot be sent; touches no network, writes nothing."""
    if route.is_simulator:
        return
    if provider_of(route.model) is None:
        raise RouteError(
            f"unknown model {route.model!r}: LiteLLM cannot tell which provider serves it; "
            f"write it as provider/model (openai/…, anthropic/…, gemini/…; openai/NAME for an "
            f"OpenAI-compatible server with api_base)"
        )
    key_plan(settings, route, env)


def route_problem(settings: Settings, route: Route, env: Mapping[str, str] | None = None) -> str | None:
    """`check_route`'s line, or None when the route can be sent (what the route switcher shows)."""
    try:
        check_route(settings, route, env)
    except RouteError as error:
        return error.message
    return None

"""Provides the tool-definition probe: what a server charges for the tool definitions a request
offers, for routes whose streams report no usage (issue 18).

Summary replies (non-streamed) calibrate a route's text, but carry no tools; llama.cpp's server
with a chat template that has no tools drops the definitions from the prompt and charges nothing
for them, while the local count holds them in full (about 900 tokens of a 2,048 window). Two
one-token, non-streamed requests of one short message, with and without the tools, tell the
difference; the session records it once per route, beside the turn's usage record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from foya_tui.runtime.providers.client import CancelToken, ProviderClient, ProviderRequest
from foya_tui.runtime.providers.errors import ProviderError
from foya_tui.runtime.providers.routes import Route

PROBE_MESSAGES: tuple[Mapping[str, Any], ...] = ({"role": "user", "content": "."},)
"""The probe's whole conversation: as short as a request can be, so the server's answer is cheap."""


def measure_tool_charge(
    client: ProviderClient, route: Route, tools: tuple[Mapping[str, Any], ...], cancel: CancelToken
) -> int | None:
    """The prompt tokens `route`'s server charges for `tools`, or None when it could not be
    measured (a failed request, no usage reported, cancelled): the probe is never the turn's
    failure."""
    try:
        bare = client.complete(ProviderRequest(route, PROBE_MESSAGES, max_output_tokens=1), cancel)
        if cancel.cancelled or bare.usage is None:
            return None
        armed = client.complete(
            ProviderRequest(route, PROBE_MESSAGES, tools=tools, max_output_tokens=1), cancel
        )
    except ProviderError:
        return None
    if cancel.cancelled or armed.usage is None:
        return None
    return max(0, armed.usage.input_tokens - bare.usage.input_tokens)

"""Provides the provider-native compactor (SPEC C-11, R-2): the provider turns a context into an
opaque state of its own, which Foya stores, checks to be a JSON object, binds to the route that
made it and sends back only to that route.

Which routes can do it is a catalog fact (`ModelInfo.native_compaction`; the simulator's
`foya-sim/native` can). A route without it, or an answer that is not a JSON object, raises
`NativeUnavailable`, and the service uses the text compactor instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from foya_tui.errors import FoyaError
from foya_tui.runtime.compaction.text import CompactionCancelled, RequestBudget, RequestOverflow
from foya_tui.runtime.model import Usage
from foya_tui.runtime.providers.catalog import lookup_model
from foya_tui.runtime.providers.client import CancelToken, ProviderClient, ProviderRequest
from foya_tui.runtime.providers.errors import FailureKind, ProviderError
from foya_tui.runtime.providers.routes import Route

MAX_STATE_BYTES = 4 * 1024 * 1024


class NativeUnavailable(FoyaError):
    """Native compaction is unsupported on this route or gave no usable state: use Text (C-11)."""


@dataclass(frozen=True)
class NativeState:
    state: Mapping[str, Any]
    usage: Usage | None


class NativeCompactor(Protocol):
    """Compacts a context into a provider's own opaque state (SPEC C-11)."""

    def supports(self, route: Route) -> bool: ...

    def compact(
        self,
        route: Route,
        messages: Sequence[Mapping[str, Any]],
        previous_state: Mapping[str, Any] | None,
        cancel: CancelToken,
        budget: RequestBudget,
    ) -> NativeState: ...


def parse_native_state(text: str) -> Mapping[str, Any]:
    """A provider's answer as a native state: a JSON object of bounded size, else NativeUnavailable."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_STATE_BYTES:
        raise NativeUnavailable(f"the native state is larger than {MAX_STATE_BYTES:,} bytes")
    try:
        state = json.loads(text)
    except ValueError as exc:
        raise NativeUnavailable(f"the native state is not valid JSON ({exc})") from None
    if not isinstance(state, dict) or not state:
        raise NativeUnavailable("the native state is not a JSON object")
    return state


class ProviderNativeCompactor:
    """Asks the route's provider for its native state through the ordinary provider client."""

    def __init__(self, client: ProviderClient, max_output_tokens: int) -> None:
        self._client = client
        self._max_output_tokens = max_output_tokens

    def supports(self, route: Route) -> bool:
        return lookup_model(route.model).native_compaction

    def compact(
        self,
        route: Route,
        messages: Sequence[Mapping[str, Any]],
        previous_state: Mapping[str, Any] | None,
        cancel: CancelToken,
        budget: RequestBudget,
    ) -> NativeState:
        if not self.supports(route):
            raise NativeUnavailable(f"{route.model} offers no native compaction")
        budget.spend()
        request = ProviderRequest(
            route=route,
            messages=tuple(messages),
            max_output_tokens=self._max_output_tokens,
            native_state=previous_state,
            native_compaction=True,
        )
        try:
            completion = self._client.complete(request, cancel)
        except ProviderError as error:
            if error.failure.kind is FailureKind.INPUT_OVERFLOW:
                raise RequestOverflow(error.failure.message) from None
            raise NativeUnavailable(f"native compaction failed: {error.failure.message}") from None
        if completion.finish_reason == "cancelled" or cancel.cancelled:
            raise CompactionCancelled()
        if completion.finish_reason == "length":
            raise NativeUnavailable("the native state was cut at the output limit")
        return NativeState(parse_native_state(completion.text), completion.usage)

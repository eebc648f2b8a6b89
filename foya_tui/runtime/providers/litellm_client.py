"""Provides the LiteLLM provider client and the simulator's LiteLLM custom-provider adapter.

This is the only module that imports LiteLLM, and only when a request needs it or `warm_up`
starts the import in the background: the import costs seconds and must stay off the start-up
path. LiteLLM is configured to use its offline model table, send no telemetry and never retry on
its own (Foya's retry policy lives in the session).
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any

from foya_tui.runtime.model import ToolCall, Usage
from foya_tui.runtime.providers.catalog import model_info
from foya_tui.runtime.providers.client import (
    CANCELLED_COMPLETION,
    CancelToken,
    Completion,
    ProviderRequest,
    ReasoningDelta,
    StreamEvent,
    StreamFinished,
    TextDelta,
    ToolCallDelta,
)
from foya_tui.runtime.providers.errors import (
    FailureKind,
    ProviderError,
    ProviderFailure,
    classify_exception,
    one_line,
)
from foya_tui.runtime.providers.routes import SIMULATOR_PROTOCOL, Route
from foya_tui.runtime.providers.simulator import Simulator, SimulatorFault
from foya_tui.runtime.providers.wire import wire_safe
from foya_tui.runtime.text import strip_control
from foya_tui.settings import Settings

_load_lock = threading.Lock()
_litellm: ModuleType | None = None
_warm_up_lock = threading.Lock()
_warm_up_thread: threading.Thread | None = None
_simulator = Simulator()
# Words per simulated stream chunk: small enough to show streaming, large enough to stay fast.
SIMULATOR_CHUNK_WORDS = 3


def load_litellm() -> ModuleType:
    """Import and configure LiteLLM once per process (thread-safe: a caller that comes while
    another thread imports it waits for that import). An import that fails raises ProviderError
    (one line, naming LiteLLM) and is tried again by the next caller."""
    global _litellm
    with _load_lock:
        if _litellm is None:
            # Must be set before the import: otherwise LiteLLM fetches its model table online.
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            try:
                import litellm
            except Exception as exc:  # absent, or broken (a dependency of the wrong version)
                detail = (
                    f"LiteLLM, the library Foya sends requests with, could not be imported "
                    f"({one_line(str(exc)) or type(exc).__name__}); reinstall Foya"
                )
                raise ProviderError(ProviderFailure(kind=FailureKind.OTHER, detail=detail)) from None

            litellm.telemetry = False
            litellm.suppress_debug_info = True
            litellm.drop_params = True  # providers that lack stream_options etc. still work
            litellm.num_retries = 0
            # LiteLLM logs every streamed chunk in its thread pool, which the interpreter joins at
            # exit: seconds after the last reply of `foya run` (tests/bench/bench_tui_scale.py).
            # Foya registers no LiteLLM callbacks, so that logging has no reader.
            litellm.disable_streaming_logging = True
            handler = _make_simulator_handler(litellm, _simulator)
            litellm.custom_provider_map = [
                *[p for p in litellm.custom_provider_map if p.get("provider") != SIMULATOR_PROTOCOL],
                {"provider": SIMULATOR_PROTOCOL, "custom_handler": handler},
            ]
            _litellm = litellm
        return _litellm


def warm_up() -> threading.Thread:
    """Start importing LiteLLM in a background thread (once per process) and return that thread.

    `foya run` calls this before it reads its settings, opens the database and compiles its first
    request, so that the first request waits only for what is left of the import: `load_litellm`
    takes the same lock. A failed import is dropped here: the first request imports again and
    reports the failure in its turn (one line), as it would have without a warm-up.

    Call it once the caller's own modules are imported: two threads importing one package at once
    can see it half-initialised (CPython locks each module, not a package with its submodules),
    and LiteLLM's import shares packages with Foya's (tiktoken, much of the standard library).
    The thread is a daemon: a process that ends before the first request need not wait for it."""
    global _warm_up_thread
    with _warm_up_lock:
        if _warm_up_thread is None:
            _warm_up_thread = threading.Thread(
                target=_import_quietly, name="foya-litellm-import", daemon=True
            )
            _warm_up_thread.start()
        return _warm_up_thread


def _import_quietly() -> None:
    with contextlib.suppress(Exception):
        load_litellm()


def _make_simulator_handler(litellm: ModuleType, simulator: Simulator) -> Any:
    """Build the simulator's CustomLLM subclass (defined here because it subclasses LiteLLM)."""

    def full_model(model: str) -> str:
        return model if model.startswith(f"{SIMULATOR_PROTOCOL}/") else f"{SIMULATOR_PROTOCOL}/{model}"

    def reply(model: str, messages: list[dict[str, Any]], kwargs: dict[str, Any]) -> Any:
        optional = kwargs.get("optional_params") or {}
        tools = optional.get("tools") or ()
        # A custom provider receives the request's extra_body here: the native fields (SPEC C-11).
        extra = optional.get("extra_body") or {}
        try:
            return simulator.reply(
                full_model(model),
                messages,
                tools,
                native_state=extra.get("foya_native_state"),
                native_compaction=extra.get("foya_native_compaction") is True,
            )
        except SimulatorFault as fault:
            if fault.kind == "overflow":
                raise litellm.ContextWindowExceededError(
                    message=fault.message, model=full_model(model), llm_provider=SIMULATOR_PROTOCOL
                ) from None
            if fault.kind in ("429", "quota"):
                raise litellm.RateLimitError(
                    message=fault.message, llm_provider=SIMULATOR_PROTOCOL, model=full_model(model)
                ) from None
            raise litellm.BadRequestError(
                message=fault.message, model=full_model(model), llm_provider=SIMULATOR_PROTOCOL
            ) from None

    def tool_call(call: ToolCall) -> dict[str, Any]:
        return {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }

    def usage_block(result: Any) -> dict[str, int]:
        return {
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
            "total_tokens": result.prompt_tokens + result.completion_tokens,
        }

    # The base is an attribute of the module passed in (LiteLLM is imported lazily, never at
    # module level), so mypy can name no class here: the handler is typed by its own methods.
    class SimulatorHandler(litellm.CustomLLM):  # type: ignore[name-defined, misc]
        def completion(self, model: str, messages: list[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
            result = reply(model, messages, kwargs)
            message: dict[str, Any] = {"role": "assistant", "content": result.text or None}
            if result.tool_calls:
                message["tool_calls"] = [tool_call(call) for call in result.tool_calls]
            return litellm.ModelResponse(
                model=full_model(model),
                choices=[{"index": 0, "finish_reason": result.finish_reason, "message": message}],
                usage=usage_block(result),
            )

        def streaming(
            self, model: str, messages: list[dict[str, Any]], *args: Any, **kwargs: Any
        ) -> Iterator[dict[str, Any]]:
            result = reply(model, messages, kwargs)
            for index, call in enumerate(result.tool_calls):
                chunk = {**tool_call(call), "index": index}
                yield {
                    "text": "",
                    "tool_use": chunk,
                    "is_finished": False,
                    "finish_reason": "",
                    "usage": None,
                }
            words = result.text.split(" ") if result.text else []
            pieces = [
                " ".join(words[i : i + SIMULATOR_CHUNK_WORDS])
                + (" " if i + SIMULATOR_CHUNK_WORDS < len(words) else "")
                for i in range(0, len(words), SIMULATOR_CHUNK_WORDS)
            ]
            for piece in pieces:
                yield {"text": piece, "is_finished": False, "finish_reason": "", "usage": None, "index": 0}
                if result.overflow_after_output:  # the `overflow-midstream` knob: text went out first
                    raise litellm.ContextWindowExceededError(
                        message="This model's maximum context length was exceeded (simulated, mid-reply)",
                        model=full_model(model),
                        llm_provider=SIMULATOR_PROTOCOL,
                    )
            yield {
                "text": "",
                "is_finished": True,
                "finish_reason": result.finish_reason,
                "usage": usage_block(result),
                "index": 0,
            }

        async def acompletion(
            self, model: str, messages: list[dict[str, Any]], *args: Any, **kwargs: Any
        ) -> Any:
            return self.completion(model, messages, *args, **kwargs)

        async def astreaming(
            self, model: str, messages: list[dict[str, Any]], *args: Any, **kwargs: Any
        ) -> AsyncIterator[dict[str, Any]]:
            for chunk in self.streaming(model, messages, *args, **kwargs):
                yield chunk

    return SimulatorHandler()


@dataclass
class _ToolCallParts:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


def _attr(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _usage_of(raw: Any) -> Usage | None:
    if raw is None:
        return None
    counts = [_attr(raw, name) for name in ("prompt_tokens", "completion_tokens", "total_tokens")]
    if any(
        value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0)
        for value in counts
    ):
        return None  # a count that is not a non-negative integer makes the whole figure unknown
    return Usage.from_counts(
        _attr(raw, "prompt_tokens"), _attr(raw, "completion_tokens"), _attr(raw, "total_tokens")
    )


# -- hostile-provider guards (kept apart from the stream loop: each is one call in it) ------------

REPLY_MAX_CHARS = 4 * 1024 * 1024
"""Characters of reply text kept; a provider could otherwise fill memory and the event log."""
USAGE_MAX_WINDOWS = 10
"""A usage figure above this many context windows is not a measurement: it counts as unknown."""
USAGE_MAX_TOKENS = 100_000_000
"""The bound when the window is unknown (10 × the largest windows offered today)."""


@dataclass(frozen=True)
class _StreamLimits:
    idle: float = 120.0
    """Seconds without any progress (text, reasoning, a tool call, the finish) before giving up."""
    deadline: float = 600.0
    """Seconds the whole stream may take, however steadily it trickles."""
    window: int | None = None


class _TextCap:
    """Keeps at most `limit` characters of a growing reply and counts what it dropped."""

    def __init__(self, limit: int) -> None:
        self.room = limit
        self.dropped = 0

    def take(self, piece: str) -> str:
        kept = piece[: max(self.room, 0)]
        self.room -= len(kept)
        self.dropped += len(piece) - len(kept)
        return kept

    def marker(self) -> str:
        if not self.dropped:
            return ""
        return f"\n[… Foya stopped here: {self.dropped:,} more characters of the reply were not kept]"


def _progress(chunk: Any) -> bool:
    """Whether a chunk carries anything: an empty delta every second is a trickle, not progress."""
    if _attr(chunk, "usage") is not None:
        return True
    for choice in _attr(chunk, "choices") or ():
        delta = _attr(choice, "delta")
        if _attr(choice, "finish_reason") or (
            delta is not None
            and (_attr(delta, "content") or _attr(delta, "tool_calls") or _attr(delta, "reasoning_content"))
        ):
            return True
    return False


def _stalled(detail: str) -> ProviderError:
    return ProviderError(ProviderFailure(kind=FailureKind.CONNECTION, detail=detail))


_END = object()


def _guarded(response: Any, limits: _StreamLimits, cancel: CancelToken) -> Iterator[Any]:
    """The stream's chunks, read in a helper thread so that a total deadline and an idle limit hold
    even while the HTTP read blocks (`request_timeout` only bounds one socket read, so a stream
    that trickles a byte at a time ran 121 s against a 20 s timeout). Cancel is seen within 0.1 s."""
    chunks: queue.Queue[Any] = queue.Queue(maxsize=64)
    stop = threading.Event()

    def pump() -> None:
        try:
            for chunk in response:
                while not stop.is_set():
                    try:
                        chunks.put(chunk, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            chunks.put(_END)
        except BaseException as exc:  # handed to the reader, which raises it as its own
            chunks.put(exc)

    threading.Thread(target=pump, name="foya-stream", daemon=True).start()
    start = last = time.monotonic()
    try:
        while True:
            now = time.monotonic()
            if now - start >= limits.deadline:
                raise _stalled(f"the reply took longer than {limits.deadline:g} s")
            if now - last >= limits.idle:
                raise _stalled(f"no reply for {limits.idle:g} s")
            wait = min(0.1, limits.deadline - (now - start), limits.idle - (now - last))
            try:
                item = chunks.get(timeout=max(wait, 0.001))
            except queue.Empty:
                if cancel.cancelled:
                    return  # the reader sees the cancel and finishes as cancelled
                continue
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            if _progress(item):
                last = time.monotonic()
            yield item
    finally:
        stop.set()
        _close_quietly(response)


def _close_quietly(response: Any) -> None:
    """Drop the connection of an abandoned stream, where LiteLLM exposes a way to."""
    for target in (response, getattr(response, "completion_stream", None)):
        close = getattr(target, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):
                close()


def _plausible_usage(usage: Usage | None, window: int | None) -> Usage | None:
    """Usage as reported, unless it is beyond any request this route can make (then unknown)."""
    if usage is None:
        return None
    bound = USAGE_MAX_WINDOWS * window if window else USAGE_MAX_TOKENS
    return None if max(usage.input_tokens, usage.output_tokens, usage.total_tokens) > bound else usage


def _unique_call_ids(calls: tuple[ToolCall, ...]) -> tuple[ToolCall, ...]:
    """Each call of one reply with its own id: results are matched to calls by id, so a repeated
    id would pair both results with one call. A repeat gets a suffix; the first keeps its id.
    A name with control characters (terminal escapes) is written with visible escapes instead: it
    is stored and shown harmlessly, and names no tool, so nothing runs under a disguised name."""
    seen: set[str] = set()
    unique = []
    for call in calls:
        name = call.name if call.name.isprintable() else call.name.encode("unicode_escape").decode("ascii")
        call_id, number = call.id, 1
        while call_id in seen:
            number += 1
            call_id = f"{call.id}_{number}"
        seen.add(call_id)
        same = (call_id, name) == (call.id, call.name)
        unique.append(call if same else replace(call, id=call_id, name=name))
    return tuple(unique)


def _provider_sent_usage(response: Any) -> bool:
    """Whether the provider itself reported usage on this stream.

    When a provider sends no usage but `include_usage` was asked for, LiteLLM 1.110 invents a
    usage chunk from its own token estimate, indistinguishable from a measured one. Its raw chunk
    list (`.chunks`) shows the truth; a measured figure must never be an estimate in disguise.
    """
    raw_chunks = getattr(response, "chunks", None)
    if not isinstance(raw_chunks, list):
        return True  # nothing to check against: trust what arrived
    return any(_usage_of(_attr(chunk, "usage")) is not None for chunk in raw_chunks)


def _bad_response(detail: str) -> ProviderError:
    return ProviderError(
        ProviderFailure(kind=FailureKind.OTHER, detail=f"the provider's reply was unreadable ({detail})")
    )


def _read_completion(response: Any, window: int | None = None) -> Completion:
    """The text, finish reason and usage of a non-streamed reply; anything else is unreadable."""
    choices = _attr(response, "choices")
    if not isinstance(choices, (list, tuple)) or not choices:
        raise _bad_response("a reply without choices")
    message = _attr(choices[0], "message")
    content = _attr(message, "content") if message is not None else None
    if isinstance(content, list):  # content parts: keep the text ones, as the stream reader does
        content = "".join(str(_attr(part, "text") or "") for part in content if _attr(part, "type") == "text")
    if content is not None and not isinstance(content, str):
        raise _bad_response("a reply whose content is not text")
    finish_reason = _attr(choices[0], "finish_reason")
    if not finish_reason:
        raise _bad_response("a reply without a finish reason")
    usage = _usage_of(_attr(response, "usage"))
    # Non-streamed, LiteLLM 1.110 reports a reply without usage as 0/0/0, which from_counts
    # already reads as unknown; the check still guards against an invented figure.
    if not _provider_sent_usage(response):
        usage = None
    cap = _TextCap(REPLY_MAX_CHARS)
    text = strip_control(cap.take(content or "")) + cap.marker()
    return Completion(text=text, finish_reason=str(finish_reason), usage=_plausible_usage(usage, window))


def _said_nothing(finished: StreamFinished) -> bool:
    return (
        finished.finish_reason != "cancelled"
        and not finished.text
        and not finished.reasoning
        and not finished.tool_calls
        and finished.usage is None
    )


def _named(error: ProviderError, route: Route) -> ProviderError:
    """The same failure, naming the route it happened on (kept when already named)."""
    if error.failure.route:
        return error
    return ProviderError(replace(error.failure, route=route.where))


def _adapt_for_server(kwargs: dict[str, Any], request: ProviderRequest, empty_content: bool) -> None:
    """What OpenAI-compatible servers need beyond the OpenAI API's defaults.

    - `tool_choice: "auto"` whenever tools are offered: llama.cpp's server calls a tool only when
      asked to; for hosted providers "auto" is already the default.
    - `"content": ""` instead of null (or absent, as LiteLLM sends it) beside `tool_calls`:
      llama-cpp-python answers such a history with HTTP 500 (a per-connection setting).
    """
    if request.tools:
        kwargs["tool_choice"] = "auto"
    if not empty_content:
        return
    kwargs["messages"] = [
        {**message, "content": ""}
        if message.get("role") == "assistant" and message.get("tool_calls") and message.get("content") is None
        else message
        for message in kwargs["messages"]
    ]


class LiteLLMClient:
    """Sends requests through LiteLLM (the simulator included, as a custom provider)."""

    def __init__(self, settings: Settings, env: Mapping[str, str] | None = None) -> None:
        self._settings = settings
        self._env = env

    def _request_kwargs(self, request: ProviderRequest) -> tuple[dict[str, Any], list[str]]:
        route = request.route
        connection = self._settings.connection_for(route.connection)
        kwargs: dict[str, Any] = {
            "model": route.model,
            # Anything not valid UTF-8 (a file name, a working directory) is made visible first:
            # one lone surrogate would otherwise fail this request and every later one.
            "messages": wire_safe(list(request.messages)),
            "stream": True,
            "stream_options": {"include_usage": True},
            "timeout": self._settings.request_timeout,
            "max_retries": 0,
            "num_retries": 0,
        }
        if route.endpoint:
            kwargs["api_base"] = route.endpoint
        secrets: list[str] = []
        key = None if route.is_simulator else connection.api_key(self._env)
        if key:
            kwargs["api_key"] = key
            secrets.append(key)
        elif route.endpoint and not route.is_simulator:
            # Local OpenAI-compatible servers (vLLM, LM Studio) need no key, but the OpenAI SDK
            # refuses to start without one.
            kwargs["api_key"] = "not-needed"
        if request.tools:
            kwargs["tools"] = [dict(tool) for tool in request.tools]
        _adapt_for_server(kwargs, request, connection.sends_empty_tool_call_content)
        if request.max_output_tokens:
            kwargs["max_tokens"] = request.max_output_tokens
        # Provider-native compaction travels in the body, where a provider that offers it reads it
        # (the simulator's `foya-sim/native` does); routes without the capability never get these.
        extra: dict[str, Any] = {}
        if request.native_state is not None:
            extra["foya_native_state"] = dict(request.native_state)
        if request.native_compaction:
            extra["foya_native_compaction"] = True
        if extra:
            kwargs["extra_body"] = extra
        return kwargs, secrets

    def _limits(self, request: ProviderRequest) -> _StreamLimits:
        route = request.route
        window = model_info(route.model, self._settings.model_settings(route.model)).window
        return _StreamLimits(
            idle=self._settings.request_timeout, deadline=self._settings.stream_deadline, window=window
        )

    def stream(self, request: ProviderRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        kwargs, secrets = self._request_kwargs(request)
        try:
            litellm = load_litellm()
            response = litellm.completion(**kwargs)
            for event in self._read_stream(response, cancel, self._limits(request)):
                if isinstance(event, StreamFinished) and _said_nothing(event):
                    self._explain_empty_stream(request, cancel)
                yield event
        except ProviderError as error:
            raise _named(error, request.route) from None
        except Exception as exc:  # every provider failure is classified, never a traceback
            raise _named(ProviderError(classify_exception(exc, secrets)), request.route) from None

    def _explain_empty_stream(self, request: ProviderRequest, cancel: CancelToken) -> None:
        """A stream that ended with no text, no tool call and no usage is no reply: llama.cpp's
        server answers an over-long streamed request with HTTP 200 and an empty body, and LiteLLM
        then invents finish_reason "stop". Ask once more without streaming and with a one-token
        cap, which makes the server say its real error (cheaply); raise that error classified
        (an overflow then enters the once-per-turn recovery, SPEC C-2), or EMPTY_REPLY when the
        server really had nothing to say."""
        probe = replace(request, max_output_tokens=1)
        self.complete(probe, cancel)  # raises the classified failure when there is one
        raise ProviderError(ProviderFailure(kind=FailureKind.EMPTY_REPLY, detail=""))

    def complete(self, request: ProviderRequest, cancel: CancelToken) -> Completion:
        """One non-streamed request (SPEC C-11); no retries here, the caller decides."""
        if cancel.cancelled:
            return CANCELLED_COMPLETION
        kwargs, secrets = self._request_kwargs(request)
        kwargs["stream"] = False
        kwargs.pop("stream_options", None)  # only meaningful on a stream
        kwargs["timeout"] = whole_reply_timeout(self._settings.request_timeout, request)
        try:
            litellm = load_litellm()
            response = litellm.completion(**kwargs)
            # A blocking call cannot be interrupted; an answer that arrives after the caller gave
            # up is dropped rather than reported.
            if cancel.cancelled:
                return CANCELLED_COMPLETION
            return _read_completion(response, self._limits(request).window)
        except ProviderError as error:
            raise _named(error, request.route) from None
        except Exception as exc:  # every provider failure is classified, never a traceback
            raise _named(ProviderError(classify_exception(exc, secrets)), request.route) from None

    def _read_stream(
        self, response: Any, cancel: CancelToken, limits: _StreamLimits | None = None
    ) -> Iterator[StreamEvent]:
        limits = limits or _StreamLimits()
        cap = _TextCap(REPLY_MAX_CHARS)
        text: list[str] = []
        reasoning: list[str] = []
        calls: dict[int, _ToolCallParts] = {}
        finish_reason: str | None = None
        usage: Usage | None = None
        for chunk in _guarded(response, limits, cancel):
            if cancel.cancelled:
                finish_reason = "cancelled"
                break
            usage = _usage_of(_attr(chunk, "usage")) or usage
            choices = _attr(chunk, "choices")
            if choices is None:
                raise _bad_response("a chunk without choices")
            for choice in choices:
                delta = _attr(choice, "delta")
                if delta is not None:
                    content = _attr(delta, "content")
                    kept = cap.take(str(content)) if content else ""
                    if kept:
                        text.append(kept)
                        yield TextDelta(kept)
                    thought = _attr(delta, "reasoning_content")
                    if thought:
                        reasoning.append(str(thought))
                        yield ReasoningDelta(str(thought))
                    for raw_call in _attr(delta, "tool_calls") or ():
                        index = _attr(raw_call, "index") or 0
                        parts = calls.setdefault(index, _ToolCallParts())
                        parts.id = parts.id or str(_attr(raw_call, "id") or "")
                        function = _attr(raw_call, "function")
                        name = _attr(function, "name") if function is not None else None
                        if name and not parts.name:
                            parts.name = str(name)
                            yield ToolCallDelta(index=index, name=parts.name)
                        arguments = _attr(function, "arguments") if function is not None else None
                        if arguments:
                            parts.arguments.append(str(arguments))
                if _attr(choice, "finish_reason"):
                    finish_reason = str(_attr(choice, "finish_reason"))
        if finish_reason != "cancelled" and not _provider_sent_usage(response):
            usage = None
        if finish_reason is None:
            raise ProviderError(
                ProviderFailure(
                    kind=FailureKind.CONNECTION,
                    detail="the stream ended before the provider finished its reply",
                )
            )
        tool_calls = tuple(
            ToolCall(id=parts.id or f"call_{index}", name=parts.name, arguments="".join(parts.arguments))
            for index, parts in sorted(calls.items())
        )
        yield StreamFinished(
            text=strip_control("".join(text)) + cap.marker(),
            reasoning=strip_control("".join(reasoning)),
            tool_calls=_unique_call_ids(tool_calls),
            finish_reason=finish_reason,
            usage=_plausible_usage(usage, limits.window),
        )


TIMEOUT_BASIS_TOKENS = 2_048
"""Planned tokens (input estimate + output cap) that `request_timeout` is meant to cover when a
whole reply arrives at once; a summary on a CPU server took 80-123 s for about that much."""


def whole_reply_timeout(request_timeout: float, request: ProviderRequest) -> float:
    """The timeout of a non-streamed request: `request_timeout`, scaled up with the planned size.
    A summary of a long history has no stream to show progress, and on a CPU server its planned
    tokens take minutes; a fixed 120 s made automatic compaction time out and fall back."""
    # ~4 characters a token: a cheap, conservative size without a tokenizer on this path.
    planned = len(str(request.messages)) // 4 + (request.max_output_tokens or 0)
    return request_timeout * max(1.0, planned / TIMEOUT_BASIS_TOKENS)


def retry_delay(failure: ProviderFailure, attempt: int, base: float) -> float:
    """Seconds to wait before retry `attempt` (1-based): exponential, or the provider's Retry-After."""
    delay: float = base * (2 ** (attempt - 1))
    return max(delay, failure.retry_after or 0.0)


def sleep_unless_cancelled(seconds: float, cancel: CancelToken) -> bool:
    """Wait up to `seconds`; False when cancelled meanwhile."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cancel.cancelled:
            return False
        time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
    return not cancel.cancelled

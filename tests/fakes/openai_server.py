"""Provides a loopback OpenAI-compatible HTTP server that lets tests drive LiteLLM's real HTTP path.

Tests point LiteLLM at it with `model="openai/<scenario>"`, `api_base=server.base_url` and any
`sk-test-...` key. LiteLLM strips the `openai/` prefix, so the server sees the bare scenario name in
the request's `model` field and answers accordingly:

- `ok`: replies "echo: <text of the last user message>", with usage.
- `nousage`: like `ok`, but never sends usage. (LiteLLM 1.110 hides this: it reports all-zero usage
  for a non-streamed reply and its own token estimate on a stream that asked for include_usage.)
- `zerousage`: like `ok`, but usage is all zeros.
- `tools`: one `read_file` tool call (finish_reason "tool_calls"), with usage.
- `length`: replies "truncated repl" with finish_reason "length", with usage.
- `summary`: answers a compaction request (its first message is a system message starting with
  Foya's `COMPACTION_MARKER`) with a fixed, valid five-section summary whose Critical Context
  copies every line of the request's `<must-mention>` block (SPEC C-8, C-9), with usage; any
  other request is answered like `ok`.
- `slow`: like `ok`, but sleeps between streamed chunks (and once before a non-streamed reply).
- `parallel`: a long turn of parallel reads. Each step answers with one `read_file` call per path
  of the server's `parallel_paths` (ids `call_par_<step>_<i>`), for `parallel_steps` steps, then
  a text answer. The step is read back from the highest `call_par_` id the request shows, so a
  compaction that summarises earlier steps does not restart the turn. Compaction requests are
  answered like `summary`.
- `hostile`: a reply built to attack the terminal that prints it: the first step calls a tool whose
  name and arguments carry escape sequences (`HOSTILE_TOOL_CALL`); once the request shows a tool
  result, it replies with `HOSTILE_TEXT` (OSC title, OSC 52 clipboard write, CSI clear screen, the
  8-bit CSI, a DCS string, a bidi override), streamed in word chunks.
- `garbage`: HTTP 200 whose body (or every SSE data line) is not JSON.
- `midstream-error`: a stream that dies after three chunks, without the final chunk or [DONE];
  without streaming, a body cut off half-way.
- `empty-stream`: llama-cpp-python's answer to an over-long request: streamed, HTTP 200 with an
  SSE body that carries no chunk at all; without streaming, its 400 `exceed_context_size_error`.
- `empty`: streamed, the same empty SSE body; without streaming, a reply whose content is "" with
  no usage: a reply that truly says nothing.
- `error-body`: HTTP 200 whose body (or only SSE data line) is `{"error": …}` from a server that
  failed while answering (llama-cpp-python's `KeyError: 'content'`).
- `error-body-overflow`: the same, with an overflow error (`exceed_context_size_error`) inside.
- `tools-legacy`: like `tools`, but each call also arrives as a legacy `function_call`, as some
  local servers send both.
- `tools-content`: like `tools` until the request holds a tool result, then like `ok`; answers
  HTTP 500 when the request holds an assistant message
  with `tool_calls` whose `content` is null or absent, as llama-cpp-python does.
- the names in `ERROR_RESPONSES` (`overflow-*`, `ratelimit`, `quota`, `auth`, `servererror`): the
  documented HTTP error status and JSON body, whether or not streaming was requested.
- anything else: HTTP 404 `model_not_found`.

A server started with `window=N` (or whose `window` attribute is set) answers any chat request
whose `count_prompt_tokens` exceeds N with the `overflow-openai` error shape (`context_length_exceeded`,
stating N and the count), whatever the scenario: a provider with a small context window.

Usage is only streamed when the request asks for it with `stream_options: {"include_usage": true}`,
as the real API does. Every request is recorded (path, lower-cased headers, parsed JSON body) before
it is answered, so tests can check what LiteLLM actually sent; a chat request's record also says
whether it was a compaction request, its `count_prompt_tokens`, and whether it was rejected as an
input overflow (by `window` or an `overflow-*` scenario).

Only the standard library is used, plus Foya's compaction wire format (`summary_format.py`, plain
Python) so the fake recognises the same compaction requests the runtime sends.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from foya_tui.runtime.providers.summary_format import (
    COMPACTION_MARKER,
    MUST_MENTION_TAG,
    PREVIOUS_SUMMARY_TAG,
    SECTION_HEADINGS,
    TRANSCRIPT_TAG,
    blocks,
)

CHAT_COMPLETIONS_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"

# Fixed so that responses are byte-for-byte reproducible between runs.
CREATED_TIMESTAMP = 1_700_000_000

SLOW_CHUNK_DELAY_SECONDS = 0.05

TOOL_CALL_ID = "call_1"
TOOL_CALL_NAME = "read_file"
TOOL_CALL_ARGUMENTS = '{"path": "README.md"}'
# How the arguments are split across streamed deltas; cut mid-token on purpose, as real models do.
TOOL_CALL_ARGUMENT_PIECES = ('{"pa', 'th": "READ', 'ME.md"}')
# A tool call has no reply text to count words in, so its completion token count is a constant.
TOOL_CALL_COMPLETION_TOKENS = 10
PARALLEL_CALL_PREFIX = "call_par_"
_PARALLEL_ID = re.compile(rf"^{PARALLEL_CALL_PREFIX}(\d+)_\d+$")

LENGTH_REPLY = "truncated repl"
# The body of every `summary` reply; Critical Context gets the request's must-mention lines after it.
SUMMARY_BODIES = (
    "The user wants the loopback scenario summarised.",
    "- Read the transcript and kept the facts needed to continue. [seq {first}]",
    "- Keep the summary short and factual. [seq {first}]",
    "- Continue with the latest user request.",
    "- The fake server wrote this summary.",
)
GARBAGE_BODY = "this is not json <html>"
OVERFLOW_CODE = "context_length_exceeded"


@dataclass(frozen=True)
class ErrorResponse:
    """An HTTP error the server sends verbatim for one scenario."""

    status: int
    body: Mapping[str, Any]
    headers: tuple[tuple[str, str], ...] = ()


ERROR_RESPONSES: Mapping[str, ErrorResponse] = {
    "overflow-openai": ErrorResponse(
        status=400,
        body={
            "error": {
                "message": (
                    "This model's maximum context length is 8192 tokens. However, your messages "
                    "resulted in 9000 tokens. Please reduce the length of the messages."
                ),
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
    ),
    "overflow-vllm": ErrorResponse(
        status=400,
        body={
            "object": "error",
            "message": (
                "This model's maximum context length is 4096 tokens. However, you requested 5000 "
                "tokens (4000 in the messages, 1000 in the completion). Please reduce the length of "
                "the messages or completion."
            ),
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
    ),
    "overflow-llamacpp": ErrorResponse(
        status=400,
        body={
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 9000,
                "n_ctx": 8192,
            }
        },
    ),
    "overflow-code-only": ErrorResponse(
        status=400,
        body={
            "error": {
                "message": "Input is too big for this deployment (ref 7781).",
                "type": "invalid_request_error",
                "param": None,
                "code": "context_length_exceeded",
            }
        },
    ),
    "ratelimit": ErrorResponse(
        status=429,
        body={
            "error": {
                "message": "Rate limit reached for requests",
                "type": "requests",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        },
        headers=(("Retry-After", "1"),),
    ),
    "quota": ErrorResponse(
        status=429,
        body={
            "error": {
                "message": "You exceeded your current quota, please check your plan and billing details.",
                "type": "insufficient_quota",
                "param": None,
                "code": "insufficient_quota",
            }
        },
    ),
    "forbidden": ErrorResponse(
        status=403,
        body={
            "error": {
                "message": "Project does not have access to this model.",
                "type": "invalid_request_error",
                "param": None,
                "code": "model_not_allowed",
            }
        },
    ),
    "auth": ErrorResponse(
        status=401,
        body={
            "error": {
                "message": "Incorrect API key provided.",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_api_key",
            }
        },
    ),
    "servererror": ErrorResponse(
        status=500,
        body={
            "error": {
                "message": "The server had an error while processing your request.",
                "type": "server_error",
                "param": None,
                "code": None,
            }
        },
    ),
}

# Scenarios that produce a normal (non-error) assistant turn.
REPLY_SCENARIOS = (
    "ok",
    "nousage",
    "zerousage",
    "tools",
    "length",
    "slow",
    "summary",
    "parallel",
    "tools-legacy",
    "tools-content",
    "hostile",
)
# Scenarios of servers that answer 200 without a usable reply.
EMPTY_SCENARIOS = ("empty-stream", "empty", "error-body", "error-body-overflow")
SCENARIOS: tuple[str, ...] = (
    *REPLY_SCENARIOS,
    "garbage",
    "midstream-error",
    *EMPTY_SCENARIOS,
    *ERROR_RESPONSES,
)
SERVER_FAILURE_BODY = {
    "error": {"message": "'content'", "type": "KeyError", "code": 500},
}
"""What llama-cpp-python's server puts in a 200 body when its handler raised."""


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it."""

    path: str
    headers: dict[str, str]
    # The parsed JSON body; {} for requests without a body or whose body is not a JSON object.
    body: dict
    compaction: bool = False
    """A chat request whose first message is Foya's compaction prompt (`COMPACTION_MARKER`)."""
    prompt_tokens: int = 0
    """`count_prompt_tokens` of a chat request's messages (0 for other requests)."""
    overflow: bool = False
    """Answered with a context-length error (over `window`, or an `overflow-*` scenario)."""

    @property
    def scenario(self) -> str:
        return str(self.body.get("model", ""))


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_json(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass(frozen=True)
class FakeToolCall:
    """One tool call of a reply; streamed, its arguments arrive in `pieces`."""

    id: str
    name: str
    arguments: str
    pieces: tuple[str, ...]

    @classmethod
    def halved(cls, call_id: str, name: str, arguments: str) -> FakeToolCall:
        middle = len(arguments) // 2
        return cls(call_id, name, arguments, (arguments[:middle], arguments[middle:]))


THE_TOOL_CALL = FakeToolCall(TOOL_CALL_ID, TOOL_CALL_NAME, TOOL_CALL_ARGUMENTS, TOOL_CALL_ARGUMENT_PIECES)
"""The `tools` scenario's one call."""

HOSTILE_TEXT = (
    "title\x1b]0;pwned\x07 clip\x1b]52;c;ZWNobyBoaQ==\x07 clear\x1b[2J\x1b[H c1\x9b31m "
    "dcs\x1bPq#0;2;0;0;0\x1b\\ bidi\u202egnp.exe\u202c bell\x07 end"
)
"""The `hostile` scenario's reply text: every kind of sequence a terminal would obey."""
HOSTILE_TOOL_CALL = FakeToolCall(
    "call_hostile",
    "read\x1b]0;tool\x07_file",
    '{"path": "README.md\\u001b[2J\x1b]52;c;aGk=\x07"}',
    ('{"path": "READ', "ME.md\\u001b[2J\x1b]52", ';c;aGk=\x07"}'),
)
"""The `hostile` scenario's tool call: escapes in its name and (raw and JSON-escaped) arguments."""


@dataclass(frozen=True)
class ParallelPlan:
    """The `parallel` scenario's turn: `steps` steps of one read_file call per path."""

    paths: tuple[str, ...] = ()
    steps: int = 0


@dataclass(frozen=True)
class Reply:
    """The assistant turn a reply scenario produces, before it is rendered as JSON or SSE."""

    content: str | None
    finish_reason: str
    # None means the scenario never reports usage.
    usage: Usage | None
    tool_calls: tuple[FakeToolCall, ...] = ()

    @property
    def has_tool_call(self) -> bool:
        return bool(self.tool_calls)


@dataclass(frozen=True)
class ChatRequest:
    """The parts of a chat completion request that choose and shape the answer."""

    model: str
    stream: bool
    include_usage: bool
    messages: tuple[Mapping[str, Any], ...]


def text_of(content: Any) -> str:
    """The text of a message's `content`, which may be a string, None or a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def count_prompt_tokens(messages: tuple[Mapping[str, Any], ...]) -> int:
    """A deterministic stand-in for a tokenizer: len(text) // 4 + 4 per message, at least 1."""
    total = sum(len(text_of(message.get("content"))) // 4 + 4 for message in messages)
    return max(total, 1)


def whole_request_tokens(body: Mapping[str, Any], request: ChatRequest, scale: float | None) -> int:
    """The prompt count: `count_prompt_tokens`, or with a `token_scale`, a tokenizer that counts
    the whole request as real servers do (tool schemas too, len // 4) and `scale` times finer."""
    if scale is None:
        return count_prompt_tokens(request.messages)
    tools = body.get("tools")
    schema = len(json.dumps(tools)) // 4 if isinstance(tools, list) else 0
    return max(1, round((count_prompt_tokens(request.messages) + schema) * scale))


def overflow_response(window: int, prompt_tokens: int) -> ErrorResponse:
    """OpenAI's context-length error, stating this server's window and the request's size."""
    error = dict(ERROR_RESPONSES["overflow-openai"].body["error"])
    error["message"] = (
        f"This model's maximum context length is {window} tokens. However, your messages resulted in "
        f"{prompt_tokens} tokens. Please reduce the length of the messages."
    )
    return ErrorResponse(status=400, body={"error": error})


def null_content_beside_tool_calls(request: ChatRequest) -> bool:
    """Whether an assistant message carries tool calls with `content` null or absent."""
    return any(
        message.get("role") == "assistant" and message.get("tool_calls") and message.get("content") is None
        for message in request.messages
    )


def is_compaction_request(messages: tuple[Mapping[str, Any], ...]) -> bool:
    return (
        bool(messages)
        and messages[0].get("role") == "system"
        and text_of(messages[0].get("content")).startswith(COMPACTION_MARKER)
    )


def summary_text(messages: tuple[Mapping[str, Any], ...]) -> str:
    """The fixed five-section summary, citing the first event it covers and with every
    must-mention line copied into Critical Context."""
    found = [
        (tag, attributes, body)
        for message in messages
        if message.get("role") == "user"
        for tag, attributes, body in blocks(text_of(message.get("content")))
    ]
    must_mention = [
        line.rstrip()
        for tag, _, body in found
        if tag == MUST_MENTION_TAG
        for line in body.splitlines()
        if line.strip()
    ]
    # The events it summarises: read-only context (earlier segments) lies outside them.
    first = next(
        (
            attributes["from_seq"]
            for tag, attributes, _ in found
            if tag in (TRANSCRIPT_TAG, PREVIOUS_SUMMARY_TAG) and "from_seq" in attributes
        ),
        "1",
    )
    bodies = [body.format(first=first) for body in SUMMARY_BODIES[:-1]]
    bodies.append("\n".join([*must_mention, SUMMARY_BODIES[-1]]))
    return "\n\n".join(f"{heading}\n{body}" for heading, body in zip(SECTION_HEADINGS, bodies, strict=True))


def echo_reply_text(messages: tuple[Mapping[str, Any], ...]) -> str:
    last_user_text = ""
    for message in messages:
        if message.get("role") == "user":
            last_user_text = text_of(message.get("content"))
    return "echo: " + last_user_text


def split_for_streaming(text: str) -> list[str]:
    """Split reply text into word chunks whose concatenation is exactly `text`.

    Tests rely on seeing several content deltas, so a reply of fewer than three words is sent one
    character per chunk instead.
    """
    pieces = re.findall(r"\S+\s*|\s+", text)
    if len(pieces) >= 3:
        return pieces
    return list(text)


def parallel_steps_done(messages: tuple[Mapping[str, Any], ...]) -> int:
    """The highest `parallel` step whose call ids the request shows (anywhere: after a compaction
    the latest step stays verbatim, SPEC C-3)."""
    done = 0
    for message in messages:
        ids = [message.get("tool_call_id")]
        ids += [call.get("id") for call in message.get("tool_calls") or () if isinstance(call, dict)]
        for call_id in ids:
            match = _PARALLEL_ID.match(call_id) if isinstance(call_id, str) else None
            if match:
                done = max(done, int(match.group(1)))
    return done


def parallel_reply(request: ChatRequest, plan: ParallelPlan) -> Reply:
    prompt_tokens = count_prompt_tokens(request.messages)
    if is_compaction_request(request.messages):
        text = summary_text(request.messages)
        return Reply(content=text, finish_reason="stop", usage=Usage(prompt_tokens, len(text.split())))
    step = parallel_steps_done(request.messages) + 1
    if step > plan.steps or not plan.paths:
        text = f"Read {plan.steps} batches of {len(plan.paths)} files in parallel."
        return Reply(content=text, finish_reason="stop", usage=Usage(prompt_tokens, len(text.split())))
    calls = tuple(
        FakeToolCall.halved(f"{PARALLEL_CALL_PREFIX}{step}_{index}", "read_file", json.dumps({"path": path}))
        for index, path in enumerate(plan.paths, 1)
    )
    usage = Usage(prompt_tokens, TOOL_CALL_COMPLETION_TOKENS * len(calls))
    return Reply(content=None, finish_reason="tool_calls", usage=usage, tool_calls=calls)


def build_reply(request: ChatRequest, parallel: ParallelPlan = ParallelPlan()) -> Reply:
    prompt_tokens = count_prompt_tokens(request.messages)
    answered = any(message.get("role") == "tool" for message in request.messages)
    if request.model in ("tools", "tools-legacy") or (request.model == "tools-content" and not answered):
        return Reply(
            content=None,
            finish_reason="tool_calls",
            usage=Usage(prompt_tokens, TOOL_CALL_COMPLETION_TOKENS),
            tool_calls=(THE_TOOL_CALL,),
        )
    if request.model == "parallel":
        return parallel_reply(request, parallel)
    if request.model == "hostile":
        if not any(message.get("role") == "tool" for message in request.messages):
            return Reply(
                content=None,
                finish_reason="tool_calls",
                usage=Usage(prompt_tokens, TOOL_CALL_COMPLETION_TOKENS),
                tool_calls=(HOSTILE_TOOL_CALL,),
            )
        return Reply(content=HOSTILE_TEXT, finish_reason="stop", usage=Usage(prompt_tokens, 12))
    if request.model == "length":
        return Reply(
            content=LENGTH_REPLY,
            finish_reason="length",
            usage=Usage(prompt_tokens, len(LENGTH_REPLY.split())),
        )
    if request.model == "summary" and is_compaction_request(request.messages):
        text = summary_text(request.messages)
    else:
        text = echo_reply_text(request.messages)
    if request.model == "nousage":
        usage = None
    elif request.model == "zerousage":
        usage = Usage(0, 0)
    else:
        usage = Usage(prompt_tokens, len(text.split()))
    return Reply(content=text, finish_reason="stop", usage=usage)


def tool_call_json(call: FakeToolCall, arguments: str) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments}}


def completion_json(completion_id: str, model: str, reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = [tool_call_json(call, call.arguments) for call in reply.tool_calls]
        if model == "tools-legacy":
            first = reply.tool_calls[0]
            message["function_call"] = {"name": first.name, "arguments": first.arguments}
    body: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion",
        "created": CREATED_TIMESTAMP,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": reply.finish_reason}],
    }
    if reply.usage is not None:
        body["usage"] = reply.usage.to_json()
    return body


def chunk_json(
    completion_id: str,
    model: str,
    delta: Mapping[str, Any] | None,
    finish_reason: str | None = None,
    usage: Usage | None = None,
) -> dict[str, Any]:
    """One `chat.completion.chunk`; `delta=None` makes the usage-only chunk with empty choices."""
    chunk: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": CREATED_TIMESTAMP,
        "model": model,
        "choices": [],
    }
    if delta is not None:
        chunk["choices"] = [
            {"index": 0, "delta": dict(delta), "logprobs": None, "finish_reason": finish_reason}
        ]
    if usage is not None:
        chunk["usage"] = usage.to_json()
    return chunk


def stream_chunks(completion_id: str, request: ChatRequest, reply: Reply) -> list[dict[str, Any]]:
    """The chunks of a streamed reply, in the order the real API sends them (without [DONE])."""
    chunks: list[dict[str, Any]] = []

    def add(
        delta: Mapping[str, Any] | None, finish_reason: str | None = None, usage: Usage | None = None
    ) -> None:
        chunks.append(chunk_json(completion_id, request.model, delta, finish_reason, usage))

    if reply.tool_calls:
        # As OpenAI does: each call's first delta carries its id, type and name with empty
        # arguments (the very first also the role), then its arguments arrive in pieces that only
        # carry the index; parallel calls follow one another.
        for index, call in enumerate(reply.tool_calls):
            opening: dict[str, Any] = {"tool_calls": [{"index": index, **tool_call_json(call, "")}]}
            if request.model == "tools-legacy":
                opening["function_call"] = {"name": call.name, "arguments": ""}
            if index == 0:
                opening = {"role": "assistant", "content": None, **opening}
            add(opening)
            for piece in call.pieces:
                delta: dict[str, Any] = {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
                if request.model == "tools-legacy":
                    delta["function_call"] = {"arguments": piece}
                add(delta)
    else:
        add({"role": "assistant", "content": ""})
        for piece in split_for_streaming(reply.content or ""):
            add({"content": piece})
    add({}, finish_reason=reply.finish_reason)
    if request.include_usage and reply.usage is not None:
        add(None, usage=reply.usage)
    return chunks


def sse_event(data: str) -> bytes:
    return f"data: {data}\n\n".encode()


class _FakeOpenAIHTTPServer(ThreadingHTTPServer):
    """The socket server; it hands each request to its owner's recorder."""

    # Handler threads must not keep the test process alive, and stop() must not wait for them.
    daemon_threads = True

    def __init__(
        self,
        record: Callable[[RecordedRequest], None],
        next_id: Callable[[], str],
        window: Callable[[], int | None],
        parallel: Callable[[], ParallelPlan],
        handler: type[BaseHTTPRequestHandler] | None = None,
        token_scale: Callable[[], float | None] = lambda: None,
        stream_usage: Callable[[], bool] = lambda: True,
    ) -> None:
        self.token_scale = token_scale
        self.stream_usage = stream_usage
        self.record = record
        self.next_completion_id = next_id
        self.window = window
        self.parallel = parallel
        super().__init__(("127.0.0.1", 0), handler or _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-response (a cancelled stream) is normal in tests; only report
        # real bugs in the fake itself.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 so streams can use chunked encoding: then an abrupt close (midstream-error) is visibly
    # an incomplete body to the client, rather than an ordinary end of a close-delimited body.
    protocol_version = "HTTP/1.1"
    # Never let a stuck client hang a handler thread forever.
    timeout = 10
    server: _FakeOpenAIHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        # The default writes every request to stderr, which only clutters test output.
        pass

    # --- routing ---------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._record({})
        if urlsplit(self.path).path == MODELS_PATH:
            models = [
                {"id": name, "object": "model", "created": CREATED_TIMESTAMP, "owned_by": "foya-tests"}
                for name in SCENARIOS
            ]
            self._send_json(200, {"object": "list", "data": models})
        else:
            self._send_not_found()

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._record({})
            self._send_error_json(400, "We could not parse the JSON body of your request.", "invalid_json")
            return
        if urlsplit(self.path).path != CHAT_COMPLETIONS_PATH:
            self._record(body)
            self._send_not_found()
            return
        self._answer_chat(body)

    def _answer_chat(self, body: dict[str, Any]) -> None:
        """Decide the answer, record the request with that decision, then send the answer."""
        stream_options = body.get("stream_options")
        messages = body.get("messages")
        request = ChatRequest(
            model=str(body.get("model", "")),
            stream=body.get("stream") is True,
            include_usage=isinstance(stream_options, dict)
            and stream_options.get("include_usage") is True
            and self.server.stream_usage(),
            messages=tuple(m for m in messages if isinstance(m, dict)) if isinstance(messages, list) else (),
        )
        error = ERROR_RESPONSES.get(request.model)
        window = self.server.window()
        prompt_tokens = whole_request_tokens(body, request, self.server.token_scale())
        if window is not None and request.model in SCENARIOS and prompt_tokens > window:
            error = overflow_response(window, prompt_tokens)
        overflow = error is not None and (
            request.model.startswith("overflow-") or error.body.get("error", {}).get("code") == OVERFLOW_CODE
        )
        self._record(
            body,
            compaction=is_compaction_request(request.messages),
            prompt_tokens=prompt_tokens,
            overflow=overflow,
        )
        if error is None and request.model == "tools-content" and null_content_beside_tool_calls(request):
            error = ErrorResponse(status=500, body=SERVER_FAILURE_BODY)
        if error is not None:
            self._send_json(error.status, error.body, error.headers)
        elif request.model in EMPTY_SCENARIOS:
            self._send_empty(request)
        elif request.model == "garbage":
            self._send_garbage(request)
        elif request.model == "midstream-error":
            self._send_broken(request)
        elif request.model in REPLY_SCENARIOS:
            self._send_reply(request, body)
        else:
            self._send_json(
                404,
                {
                    "error": {
                        "message": f"The model `{request.model}` does not exist",
                        "type": "invalid_request_error",
                        "code": "model_not_found",
                    }
                },
            )

    # --- scenario answers ------------------------------------------------------------------

    def _send_reply(self, request: ChatRequest, body: Mapping[str, Any]) -> None:
        completion_id = self.server.next_completion_id()
        reply = build_reply(request, self.server.parallel())
        if reply.usage is not None and self.server.token_scale() is not None:
            usage = Usage(
                whole_request_tokens(body, request, self.server.token_scale()), reply.usage.completion_tokens
            )
            reply = Reply(reply.content, reply.finish_reason, usage, reply.tool_calls)
        delay = SLOW_CHUNK_DELAY_SECONDS if request.model == "slow" else 0.0
        if not request.stream:
            time.sleep(delay)
            self._send_json(200, completion_json(completion_id, request.model, reply))
            return
        self._start_stream()
        for chunk in stream_chunks(completion_id, request, reply):
            self._write_chunk(sse_event(json.dumps(chunk)))
            time.sleep(delay)
        self._write_chunk(sse_event("[DONE]"))
        self._end_stream()

    def _send_empty(self, request: ChatRequest) -> None:
        """HTTP 200 without a usable reply: no chunk at all, or an error object as the body."""
        if request.model in ("error-body", "error-body-overflow"):
            body = (
                ERROR_RESPONSES["overflow-llamacpp"].body
                if request.model == "error-body-overflow"
                else SERVER_FAILURE_BODY
            )
            if not request.stream:
                self._send_json(200, body)
                return
            self._start_stream()
            self._write_chunk(sse_event(json.dumps(body)))
            self._write_chunk(sse_event("[DONE]"))
            self._end_stream()
            return
        if not request.stream:
            if request.model == "empty-stream":
                overflow = ERROR_RESPONSES["overflow-llamacpp"]
                self._send_json(overflow.status, overflow.body)
            else:
                reply = Reply(content="", finish_reason="stop", usage=None)
                self._send_json(200, completion_json(self.server.next_completion_id(), request.model, reply))
            return
        self._start_stream()
        self._end_stream()

    def _send_garbage(self, request: ChatRequest) -> None:
        if not request.stream:
            self._send_bytes(200, "application/json", GARBAGE_BODY.encode())
            return
        self._start_stream()
        self._write_chunk(sse_event(GARBAGE_BODY))
        self._write_chunk(sse_event("{not json either"))
        self._write_chunk(sse_event("[DONE]"))
        self._end_stream()

    def _send_broken(self, request: ChatRequest) -> None:
        """Die part-way through the response, as a dropped connection would."""
        completion_id = self.server.next_completion_id()
        if not request.stream:
            # The non-streaming equivalent: promise a body, send half of it, hang up.
            data = json.dumps(completion_json(completion_id, request.model, build_reply(request))).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            return
        self._start_stream()
        for delta in ({"role": "assistant", "content": ""}, {"content": "partial "}, {"content": "answer"}):
            self._write_chunk(sse_event(json.dumps(chunk_json(completion_id, request.model, delta))))
        # Returning without the terminating zero-length chunk: the server then closes the socket
        # (Connection: close), which the client sees as an incomplete chunked body.

    # --- HTTP plumbing ---------------------------------------------------------------------

    def _record(self, body: dict[str, Any], **facts: Any) -> None:
        headers = {name.lower(): value for name, value in self.headers.items()}
        self.server.record(RecordedRequest(path=self.path, headers=headers, body=body, **facts))

    def _send_not_found(self) -> None:
        self._send_error_json(404, f"Unknown path {urlsplit(self.path).path}", "not_found")

    def _send_error_json(self, status: int, message: str, code: str) -> None:
        self._send_json(
            status,
            {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}},
        )

    def _send_json(
        self, status: int, body: Mapping[str, Any], headers: tuple[tuple[str, str], ...] = ()
    ) -> None:
        self._send_bytes(status, "application/json", json.dumps(body).encode(), headers)

    def _send_bytes(
        self, status: int, content_type: str, data: bytes, headers: tuple[tuple[str, str], ...] = ()
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        # One request per connection keeps shutdown simple: no idle keep-alive handler threads.
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()

    def _write_chunk(self, data: bytes) -> None:
        # Flushed per event so clients (and the `slow` scenario) see chunks as they are produced.
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class FakeOpenAIServer:
    """A loopback OpenAI-compatible server on an ephemeral port, served from a daemon thread.

    Use it as a context manager, or call start() and stop(). See the module docstring for the
    scenarios chosen by the request's `model` field. `window` (settable while running) makes every
    chat request larger than that many prompt tokens fail as an input overflow; None = no limit.
    `parallel_paths` and `parallel_steps` (settable too) shape the `parallel` scenario's turn.
    A subclass may answer more scenarios with its own `handler_class` (tests/fakes/hostile_server.py).
    """

    handler_class: type[BaseHTTPRequestHandler] | None = None

    def __init__(
        self, window: int | None = None, *, parallel_paths: tuple[str, ...] = (), parallel_steps: int = 0
    ) -> None:
        self.window = window
        self.token_scale: float | None = None
        """When set, prompt counts (usage, the window check) cover the whole request, tool schemas
        included, this many times finer than `count_prompt_tokens`: a tokenizer unlike Foya's
        estimate, as Gemma's is on numbers (settable while running)."""
        self.stream_usage = True
        """False: streams never carry usage, whatever the request asks, while non-streamed replies
        do — as llama-cpp-python's server answers (settable while running)."""
        self.parallel_paths = tuple(parallel_paths)
        self.parallel_steps = parallel_steps
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._completion_count = 0
        self._server: _FakeOpenAIHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> FakeOpenAIServer:
        if self._server is not None:
            raise RuntimeError("FakeOpenAIServer is already started")
        self._server = _FakeOpenAIHTTPServer(
            self._record,
            self._next_completion_id,
            lambda: self.window,
            lambda: ParallelPlan(tuple(self.parallel_paths), self.parallel_steps),
            self.handler_class,
            lambda: self.token_scale,
            lambda: self.stream_usage,
        )
        # A short poll interval makes stop() quick: shutdown() waits for serve_forever to notice it.
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.01},
            name="fake-openai-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("FakeOpenAIServer is not started")
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """The chat completion requests, in arrival order."""
        return [r for r in self.requests if urlsplit(r.path).path == CHAT_COMPLETIONS_PATH and r.body]

    def reset(self) -> None:
        with self._lock:
            self._requests.clear()

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _next_completion_id(self) -> str:
        with self._lock:
            self._completion_count += 1
            return f"chatcmpl-fake-{self._completion_count}"

"""Provides a hostile loopback OpenAI-compatible server: the `FakeOpenAIServer` with scenarios a
careless or malicious provider could send, for tests of Foya's provider edge through LiteLLM's
real HTTP path.

Scenarios (the request's `model`, after LiteLLM strips `openai/`), on top of the base server's:

- `listdir`: asks for `list_dir` of "." (id `call_ls_1`) until the request holds a tool result,
  then answers "listed"; compaction requests get the base server's valid summary.
- `escape-text`: a reply whose text carries terminal escapes (`ESCAPE_TEXT`).
- `escape-tool`: a `read_file` call whose name carries a terminal escape (`ESCAPE_TOOL_NAME`),
  then "done" once a tool result is present.
- `huge`: `HUGE_REPLY_BYTES` of text in 64 KiB chunks.
- `trickle-idle`: a stream that sends an empty delta every `TRICKLE_INTERVAL` s and never finishes
  (gives up after `TRICKLE_SECONDS`).
- `trickle-text`: one character every `TRICKLE_INTERVAL` s, never finishing (same cap).
- `absurd-usage`: "ok" with usage of 10^12 prompt tokens and -3 completion tokens.
- `dup-ids`: two `read_file` calls (`DUP_PATHS`) that share the id `DUP_ID`, then "read both".
- `echo-key`: HTTP 401 whose error message repeats `server.echo` verbatim (a key it was sent).
- `shell`: one `shell` call running `server.command` (id `call_sh_1`), then "ran" once a tool
  result is present.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from .openai_server import (
    ChatRequest,
    FakeOpenAIServer,
    FakeToolCall,
    Reply,
    Usage,
    _Handler,
    chunk_json,
    completion_json,
    count_prompt_tokens,
    is_compaction_request,
    sse_event,
    stream_chunks,
    summary_text,
)

ESCAPE_TEXT = "look \x1b]0;pwned\x07here \x1b[2Jnow \x9b31mred"
ESCAPE_TOOL_NAME = "read_file\x1b[2J"
HUGE_REPLY_BYTES = 5 * 1024 * 1024
HUGE_CHUNK = 64 * 1024
TRICKLE_INTERVAL = 0.05
TRICKLE_SECONDS = 30.0
ABSURD_PROMPT_TOKENS = 10**12
DUP_ID = "call_dup"
DUP_PATHS = ("a.txt", "b.txt")
HOSTILE_SCENARIOS = (
    "listdir",
    "escape-text",
    "escape-tool",
    "huge",
    "trickle-idle",
    "trickle-text",
    "absurd-usage",
    "dup-ids",
    "echo-key",
    "shell",
)


def _has_tool_result(messages: tuple[Mapping[str, Any], ...]) -> bool:
    return any(message.get("role") == "tool" for message in messages)


def _text(text: str, messages: tuple[Mapping[str, Any], ...], usage: Usage | None = None) -> Reply:
    counted = usage or Usage(count_prompt_tokens(messages), max(1, len(text.split())))
    return Reply(content=text, finish_reason="stop", usage=counted)


def _calls(*calls: FakeToolCall) -> Reply:
    return Reply(content=None, finish_reason="tool_calls", usage=Usage(10, 10), tool_calls=calls)


def hostile_reply(request: ChatRequest, command: str = "") -> Reply | None:
    """The reply of a scenario that is an ordinary (if hostile) turn; None for the others."""
    messages = request.messages
    if is_compaction_request(messages):
        return _text(summary_text(messages), messages)
    done = _has_tool_result(messages)
    if request.model == "listdir":
        if done:
            return _text("listed", messages)
        return _calls(FakeToolCall.halved("call_ls_1", "list_dir", json.dumps({"path": "."})))
    if request.model == "escape-text":
        return _text(ESCAPE_TEXT, messages)
    if request.model == "escape-tool":
        if done:
            return _text("done", messages)
        return _calls(FakeToolCall.halved("call_esc_1", ESCAPE_TOOL_NAME, json.dumps({"path": "README.md"})))
    if request.model == "shell":
        if done:
            return _text("ran", messages)
        arguments = json.dumps({"command": command, "timeout": 600})
        return _calls(FakeToolCall.halved("call_sh_1", "shell", arguments))
    if request.model == "absurd-usage":
        return _text("ok", messages, Usage(ABSURD_PROMPT_TOKENS, -3))
    if request.model == "dup-ids":
        if done:
            return _text("read both", messages)
        return _calls(
            *(FakeToolCall.halved(DUP_ID, "read_file", json.dumps({"path": path})) for path in DUP_PATHS)
        )
    return None


class HostileHandler(_Handler):
    """Answers the hostile scenarios; anything else as the base server does."""

    def _answer_chat(self, body: dict[str, Any]) -> None:
        model = str(body.get("model", ""))
        if model not in HOSTILE_SCENARIOS:
            super()._answer_chat(body)
            return
        messages = body.get("messages")
        stream_options = body.get("stream_options")
        request = ChatRequest(
            model=model,
            stream=body.get("stream") is True,
            include_usage=isinstance(stream_options, dict) and stream_options.get("include_usage") is True,
            messages=tuple(m for m in messages if isinstance(m, dict)) if isinstance(messages, list) else (),
        )
        self._record(
            body,
            compaction=is_compaction_request(request.messages),
            prompt_tokens=count_prompt_tokens(request.messages),
        )
        reply = hostile_reply(request, getattr(self.server, "command", ""))
        if reply is not None:
            self._send_hostile_reply(request, reply)
        elif model == "echo-key":
            echo = getattr(self.server, "echo", "")
            message = f"Incorrect API key provided: {echo}. You can find your key at example.invalid"
            error = {"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}
            self._send_json(401, {"error": error})
        elif model == "huge":
            self._send_huge(request)
        else:
            self._send_trickle(request, text=model == "trickle-text")

    def _send_hostile_reply(self, request: ChatRequest, reply: Reply) -> None:
        completion_id = self.server.next_completion_id()
        if not request.stream:
            self._send_json(200, completion_json(completion_id, request.model, reply))
            return
        self._start_stream()
        for chunk in stream_chunks(completion_id, request, reply):
            self._write_chunk(sse_event(json.dumps(chunk)))
        self._write_chunk(sse_event("[DONE]"))
        self._end_stream()

    def _send_huge(self, request: ChatRequest) -> None:
        completion_id = self.server.next_completion_id()
        self._start_stream()
        self._write_chunk(sse_event(json.dumps(chunk_json(completion_id, request.model, {"content": ""}))))
        piece = "x" * (HUGE_CHUNK - 1) + "\n"
        for _ in range(HUGE_REPLY_BYTES // HUGE_CHUNK):
            delta = {"content": piece}
            self._write_chunk(sse_event(json.dumps(chunk_json(completion_id, request.model, delta))))
        self._write_chunk(sse_event(json.dumps(chunk_json(completion_id, request.model, {}, "stop"))))
        if request.include_usage:
            usage = Usage(count_prompt_tokens(request.messages), HUGE_REPLY_BYTES // 4)
            self._write_chunk(
                sse_event(json.dumps(chunk_json(completion_id, request.model, None, usage=usage)))
            )
        self._write_chunk(sse_event("[DONE]"))
        self._end_stream()

    def _send_trickle(self, request: ChatRequest, text: bool) -> None:
        """Never finish: a byte of progress (or none) at a time, until the client hangs up."""
        completion_id = self.server.next_completion_id()
        self._start_stream()
        opening = {"role": "assistant", "content": ""}
        self._write_chunk(sse_event(json.dumps(chunk_json(completion_id, request.model, opening))))
        give_up = time.monotonic() + TRICKLE_SECONDS
        try:
            while time.monotonic() < give_up:
                delta = {"content": "a"} if text else {}
                self._write_chunk(sse_event(json.dumps(chunk_json(completion_id, request.model, delta))))
                time.sleep(TRICKLE_INTERVAL)
        except OSError:
            return  # the client gave up, as it should


class HostileOpenAIServer(FakeOpenAIServer):
    """The loopback server with the hostile scenarios; `echo` is what `echo-key` repeats, `command`
    what `shell` runs."""

    handler_class = HostileHandler

    def __init__(self, echo: str = "", command: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.echo = echo
        self.command = command

    def start(self) -> HostileOpenAIServer:
        super().start()
        assert self._server is not None
        self._server.echo = self.echo  # type: ignore[attr-defined]
        self._server.command = self.command  # type: ignore[attr-defined]
        return self

"""Provides the simulator's provider-native compaction (SPEC C-11) on `foya-sim/native`.

Asked with `native_compaction=True`, `foya-sim/native` answers with the compact JSON of an opaque
state object (format `NATIVE_STATE_FORMAT`) digesting the messages given; a later chat request
may carry that state back (`native_state=`), which then counts toward the prompt and informs the
reply. Any other simulator model refuses a native state loudly (SPEC R-2: it never crosses
routes), so a leak cannot pass unnoticed in tests.

The state is what a provider with native compaction would keep: Foya only checks that it is JSON
and hands it back on the route that made it. Its summary is a short, deterministic digest of what
the compacted messages held.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from foya_tui.runtime.providers.catalog import SIMULATOR_MODELS
from foya_tui.runtime.providers.simulator.faults import SimulatorFault
from foya_tui.runtime.providers.simulator.messages import is_checkpoint, is_handoff, quote, text_of
from foya_tui.runtime.providers.simulator.reply import SimulatedReply
from foya_tui.runtime.tokens import TokenCounter

NATIVE_STATE_FORMAT = "foya-sim-native/1"
"""The `format` of the simulator's native state; a state of another format is refused."""
NATIVE_SUMMARY_CHARS = 1_200
"""A native state's summary never exceeds this many characters, however long its input."""
NATIVE_INVALID_TEXT = "Compacted context follows: requests, tools and files (this is not JSON)."
"""What the `native-invalid` knob answers instead of a state."""

_PATH_ARGUMENTS = ("path", "file", "file_path", "filename")
_ERROR_RESULT = re.compile(
    r"^(?:error|no such|cannot|timed out|cancelled)|\[exit code [1-9]\d*\]|Traceback \(most recent",
    re.IGNORECASE | re.MULTILINE,
)
NATIVE_SHOWN_REQUESTS = 3
NATIVE_SHOWN_FILES = 8
NATIVE_SHOWN_ERRORS = 3


def checked_native_state(model: str, state: Mapping[str, Any] | None, compaction: bool) -> str | None:
    """The summary of a native state this model may use (None without a state); raises a bad
    request for a state from another route (SPEC R-2) or one that is not this model's."""
    native = SIMULATOR_MODELS[model].native_compaction
    if compaction and not native:
        raise SimulatorFault("bad_request", f"{model} does not offer native compaction")  # SPEC C-11
    if state is None:
        return None
    if not native:
        raise SimulatorFault(
            "bad_request",
            f"{model} does not accept native state from another route",  # SPEC R-2
        )
    if not isinstance(state, Mapping):
        raise SimulatorFault("bad_request", "invalid native state: not a JSON object")
    if state.get("format") != NATIVE_STATE_FORMAT:
        raise SimulatorFault("bad_request", f"invalid native state: format {state.get('format')!r}")
    if state.get("model") != model:
        made_by = state.get("model")
        raise SimulatorFault("bad_request", f"invalid native state: made by {made_by!r}, not {model}")
    if not isinstance(state.get("summary"), str):
        raise SimulatorFault("bad_request", "invalid native state: no summary")
    return str(state["summary"])


def _canonical_digest(messages: Sequence[Mapping[str, Any]]) -> str:
    # Fields set to null are left out: transports differ in whether they send them (LiteLLM drops
    # an assistant's `"content": null`), and the digest must not depend on the transport.
    canonical = [{key: value for key, value in message.items() if value is not None} for message in messages]
    text = json.dumps(canonical, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _call_paths(arguments: str) -> list[str]:
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return []
    if not isinstance(parsed, dict):
        return []
    # "." (a listing of the working directory) touches no file worth naming
    return [str(parsed[key]) for key in _PATH_ARGUMENTS if parsed.get(key) not in (None, "", ".")]


def native_summary(messages: Sequence[Mapping[str, Any]], previous: str | None = None) -> str:
    """A short digest of a conversation: the user's requests verbatim (bounded), the tools called,
    the files touched and the errors met; an earlier state's summary goes first."""
    requests = [
        quote(text_of(m), 160)
        for m in messages
        if m.get("role") == "user" and not is_handoff(m) and not is_checkpoint(m)
    ]
    tools: Counter[str] = Counter()
    files: list[str] = []
    for message in messages:
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            tools[str(function.get("name", "tool"))] += 1
            files += _call_paths(str(function.get("arguments") or ""))
    errors = [
        quote(next(line for line in text_of(m).splitlines() if line.strip()), 100)
        for m in messages
        if m.get("role") == "tool" and _ERROR_RESULT.search(text_of(m))
    ]
    distinct = list(dict.fromkeys(files))

    def shown(items: Sequence[str], limit: int, quoted: bool = False) -> str:
        kept = [f"“{item}”" if quoted else item for item in items[-limit:]]
        more = f"{len(items) - limit} earlier, then " if len(items) > limit else ""
        return more + "; ".join(kept) if kept else "none"

    parts = []
    if previous:
        parts.append(f"earlier: {quote(previous, 300)}")
    parts += [
        f"requests: {shown(requests, NATIVE_SHOWN_REQUESTS, quoted=True)}",
        "tools: " + (", ".join(f"{name}×{count}" for name, count in sorted(tools.items())) or "none"),
        f"files: {shown(distinct, NATIVE_SHOWN_FILES)}",
        f"errors: {shown(errors, NATIVE_SHOWN_ERRORS, quoted=True)}",
    ]
    return quote(" | ".join(parts), NATIVE_SUMMARY_CHARS)


def native_state_of(
    model: str, messages: Sequence[Mapping[str, Any]], previous: str | None = None
) -> dict[str, Any]:
    """The opaque state `model` answers a native compaction of `messages` with (SPEC C-11)."""
    return {
        "format": NATIVE_STATE_FORMAT,
        "model": model,
        "digest": _canonical_digest(messages),
        "messages": len(messages),
        "summary": native_summary(messages, previous),
    }


def native_reply(
    model: str,
    messages: Sequence[Mapping[str, Any]],
    previous: str | None,
    fault: str | None,
    prompt_tokens: int,
    counter: TokenCounter,
) -> SimulatedReply:
    """Answer a native compaction request with a state's JSON text, or the knob's defect."""
    text = json.dumps(native_state_of(model, messages, previous), ensure_ascii=False, separators=(",", ":"))
    finish_reason = "stop"
    if fault == "native-invalid":
        text = NATIVE_INVALID_TEXT
    elif fault == "truncate":
        text, finish_reason = text[: max(1, len(text) // 2)], "length"
    return SimulatedReply(
        text=text,
        finish_reason=finish_reason,
        prompt_tokens=prompt_tokens,
        completion_tokens=counter.count(text),
    )

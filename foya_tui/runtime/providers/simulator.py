"""Provides the offline simulator's engine: deterministic, useful replies without any model.

The simulator is what a new user without an API key talks to, so its replies describe things
it can really measure: the conversation so far, the working directory and the context budget.
LiteLLM reaches it as a custom provider (the adapter lives in `litellm_client.py`, the only
module that imports LiteLLM); this module is plain Python.

A compaction request (its system message starts with `COMPACTION_MARKER`, see
`summary_format.py`) gets a valid five-section summary extracted from its input (SPEC C-8, C-9),
never a tool call.

Fault knobs (tests and demos) come from `FOYA_SIM_FAULTS`, a comma-separated list of names,
each optionally `xN` to fire only N times (e.g. `429x2` fails twice, then answers):

- `overflow`, `429`, `quota`: the request fails with that provider error.
- `truncate`: the reply is cut in half with finish reason "length".
- `summary-truncated`: the summary stops mid-way with a visible `…[truncated]` marker, its later
  sections missing (finish reason "stop").
- `summary-sections`: the summary's sections are out of order and one is missing ("stop").
- `summary-length`: a partial summary with finish reason "length".

- `native-invalid`: a native compaction answers text that is not JSON (SPEC C-11).
- `native-unsupported`: a native compaction fails as a bad request: unsupported on this route.

The first four fire on whichever request comes first, compaction requests included; the
`summary-*` knobs fire only on text compaction requests and the `native-*` knobs only on native
compaction requests (a reply that could not show them must not use them up).

`foya-sim/native` also offers provider-native compaction (SPEC C-11): asked with
`native_compaction=True`, it answers with the compact JSON of an opaque state object (format
`NATIVE_STATE_FORMAT`) digesting the messages given; a later chat request may carry that state
back (`native_state=`), which then counts toward the prompt and informs the reply. Any other
simulator model refuses a native state loudly (SPEC R-2: it never crosses routes), so a leak
cannot pass unnoticed in tests.

A request "explore N steps" makes the simulator work like a long agent turn: one read-only tool
call per step (call ids `sim_explore_1`, `sim_explore_2`, …), then a text report. It keeps no
state: each request continues from the highest step id it can see, so a compaction that
summarises earlier steps away does not restart the work. The hidden handoff reminder (SPEC K-1)
and a checkpoint's message are never taken for the user's request; a reply to the reminder
starts with the execution frontier.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foya_tui.runtime.model import ToolCall
from foya_tui.runtime.providers.catalog import SIMULATOR_MODELS
from foya_tui.runtime.providers.summary_format import (
    CHECKPOINT_MESSAGE_PREFIX,
    COMPACTION_MARKER,
    HANDOFF_MARKER,
    MUST_MENTION_TAG,
    PREVIOUS_SUMMARY_TAG,
    REPAIR_TAG,
    SECTION_HEADINGS,
    SECTION_TITLES,
    TRANSCRIPT_TAG,
    blocks,
)
from foya_tui.runtime.text import content_text
from foya_tui.runtime.tokens import TokenCounter, count_messages, count_tools, default_counter

FAULTS_ENV = "FOYA_SIM_FAULTS"
SUMMARY_FAULT_NAMES = frozenset({"summary-truncated", "summary-sections", "summary-length"})
NATIVE_FAULT_NAMES = frozenset({"native-invalid", "native-unsupported"})
CHAT_FAULT_NAMES = frozenset({"overflow-midstream"})
FAULT_NAMES = (
    frozenset({"overflow", "429", "quota", "truncate"})
    | SUMMARY_FAULT_NAMES
    | NATIVE_FAULT_NAMES
    | CHAT_FAULT_NAMES
)
NATIVE_STATE_FORMAT = "foya-sim-native/1"
"""The `format` of the simulator's native state; a state of another format is refused."""
NATIVE_SUMMARY_CHARS = 1_200
"""A native state's summary never exceeds this many characters, however long its input."""
NATIVE_INVALID_TEXT = "Compacted context follows: requests, tools and files (this is not JSON)."
"""What the `native-invalid` knob answers instead of a state."""
EXPLORE_CALL_PREFIX = "sim_explore_"
EXPLORE_MAX_STEPS = 10_000
EXPLORE_MAX_FILES = 2_000
EXPLORE_GREP_PATTERN = "TODO|FIXME"
MAX_LISTED_ENTRIES = 24
TRUNCATION_MARKER = "…[truncated]"
"""What the `summary-truncated` knob leaves at the cut: a marker SPEC C-9 rejects."""
SUMMARY_TOKEN_CAP = 1_500
"""A simulated summary never exceeds this, however large its input (a summary must shrink)."""


class SimulatorFault(Exception):
    """A simulated provider failure; the LiteLLM adapter raises LiteLLM's matching error."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # "overflow" | "429" | "quota"
        self.message = message


@dataclass(frozen=True)
class SimulatedReply:
    text: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    tool_calls: tuple[ToolCall, ...] = ()
    overflow_after_output: bool = False
    """The `overflow-midstream` knob: the stream delivers some text, then the provider rejects the
    context (SPEC K-6: past the output boundary nothing may be replayed). It fires on a reply in
    text, not on one that only calls tools."""


@dataclass(frozen=True)
class FaultPlan:
    """Which faults fire, and how many times (None = every request)."""

    faults: tuple[tuple[str, int | None], ...] = ()

    @classmethod
    def parse(cls, spec: str) -> FaultPlan:
        faults = []
        for item in filter(None, (part.strip().lower() for part in spec.split(","))):
            match = re.fullmatch(r"(.+?)(?:x(\d+))?", item)
            if not match or match.group(1) not in FAULT_NAMES:
                raise ValueError(
                    f"{FAULTS_ENV}: unknown fault {item!r} (known: {', '.join(sorted(FAULT_NAMES))})"
                )
            faults.append((match.group(1), int(match.group(2)) if match.group(2) else None))
        return cls(tuple(faults))


def _text_of(message: Mapping[str, Any]) -> str:
    return content_text(message.get("content"))


def _quote(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


_WORKDIR_LINE = re.compile(r"^working directory: (.+)$", re.MULTILINE)
_GREETING = re.compile(
    r"^\s*(hello|hi|hey|hallo|bonjour|hola|你好|您好|こんにちは)\b[\s!.,?]*$", re.IGNORECASE
)
_ABOUT_FILES = re.compile(
    r"\b(files?|director(y|ies)|folders?|project|workspace|repo(sitory)?|ls|cwd)\b|目录|文件|项目",
    re.IGNORECASE,
)
_ABOUT_CONVERSATION = re.compile(
    r"\b(conversation|so far|history|summari[sz]e|recap|what did (i|we))\b|对话|总结", re.IGNORECASE
)


class Simulator:
    """Answers chat requests deterministically from what it can observe."""

    def __init__(self, workdir: Path | None = None, counter: TokenCounter | None = None) -> None:
        self._workdir = workdir
        self._counter = counter
        self._lock = threading.Lock()
        self._fault_spec = ""
        self._fired: Counter[str] = Counter()

    @property
    def counter(self) -> TokenCounter:
        return self._counter or default_counter()

    def _workdir_path(self, messages: Sequence[Mapping[str, Any]]) -> Path:
        """The working directory as a model would learn it: from the request's environment block."""
        if self._workdir is not None:
            return self._workdir
        for message in messages:
            if message.get("role") == "system":
                match = _WORKDIR_LINE.search(_text_of(message))
                if match:
                    return Path(match.group(1).strip())
        return Path.cwd()

    def _take_fault(
        self, compaction: bool, native: bool = False, only: frozenset[str] | None = None
    ) -> str | None:
        """The fault to inject for this request, counting down `xN` budgets.

        `summary-*` faults are skipped unless this is a text compaction request and `native-*` faults
        unless it is a native one: only there do they mean something.
        """
        spec = os.environ.get(FAULTS_ENV, "")
        try:
            plan = FaultPlan.parse(spec)
        except ValueError as exc:
            raise SimulatorFault("invalid", str(exc)) from None
        with self._lock:
            if spec != self._fault_spec:  # a new plan starts its counts afresh
                self._fault_spec, self._fired = spec, Counter()
            for name, times in plan.faults:
                if name in SUMMARY_FAULT_NAMES and not compaction:
                    continue
                if name in NATIVE_FAULT_NAMES and not native:
                    continue
                # Chat-reply faults are asked for separately, once the reply is known to be text.
                if (name in CHAT_FAULT_NAMES) != (only is not None) or (
                    only is not None and name not in only
                ):
                    continue
                if times is None or self._fired[name] < times:
                    self._fired[name] += 1
                    return name
        return None

    def reply(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] = (),
        *,
        native_state: Mapping[str, Any] | None = None,
        native_compaction: bool = False,
    ) -> SimulatedReply:
        """Answer one request. `native_compaction` asks for a native state of `messages` instead of a
        reply; `native_state` is a state an earlier native compaction returned (SPEC C-11, R-2)."""
        info = SIMULATOR_MODELS.get(model)
        if info is None:
            raise SimulatorFault("unknown", f"the simulator has no model {model!r}")
        # Checked before any fault knob: a request that crosses routes is wrong whatever else happens.
        state_summary = _checked_native_state(model, native_state, native_compaction)
        window = info.window or 0
        # Counted as Foya's compiler counts a request: messages, plus the tool schemas, plus the
        # native state the provider holds for it.
        prompt_tokens = count_messages(messages, self.counter) + (
            count_tools(tools, self.counter) if tools else 0
        )
        if state_summary is not None:
            prompt_tokens += self.counter.count(state_summary)
        compaction = not native_compaction and is_compaction_request(messages)
        fault = self._take_fault(compaction, native=native_compaction)
        if fault == "429":
            raise SimulatorFault("429", "Rate limit reached for requests (simulated)")
        if fault == "quota":
            raise SimulatorFault("quota", "You exceeded your current quota (simulated insufficient_quota)")
        if fault == "overflow" or prompt_tokens > window:
            raise SimulatorFault(
                "overflow",
                f"This model's maximum context length is {window} tokens. However, your messages "
                f"resulted in {max(prompt_tokens, window + 1)} tokens. "
                "Please reduce the length of the messages.",
            )
        if fault == "native-unsupported":
            raise SimulatorFault("bad_request", f"{model}: native compaction is unsupported here (simulated)")
        if native_compaction:
            return self._native_reply(model, messages, state_summary, fault, prompt_tokens)
        if compaction:  # never a tool call: the summariser offers no tools and wants text
            return self._summary_reply(messages, fault, prompt_tokens)
        available = _tool_names(tools)
        # The hidden reminder asks for the frontier, then the work goes on as if it were not there.
        handoff = bool(messages) and is_handoff(messages[-1])
        work = list(messages[:-1]) if handoff else list(messages)
        exploration = self._exploration(work, available)
        calls = exploration.next_calls if exploration is not None else plan_tool_calls(work, available)
        lead = _frontier(work, exploration, calls) if handoff else ""
        if calls:
            arguments = "".join(call.name + call.arguments for call in calls)
            return SimulatedReply(
                text=lead,
                finish_reason="tool_calls",
                prompt_tokens=prompt_tokens,
                completion_tokens=self.counter.count(lead + arguments),
                tool_calls=calls,
            )
        if exploration is not None:
            body = exploration.report(window, prompt_tokens)
        else:
            body = self._compose(work, window, prompt_tokens, state_summary)
        text = f"{lead}\n\n{body}" if lead else body
        finish_reason = "stop"
        if fault == "truncate":
            text, finish_reason = text[: max(1, len(text) // 2)], "length"
        return SimulatedReply(
            text=text,
            finish_reason=finish_reason,
            prompt_tokens=prompt_tokens,
            completion_tokens=self.counter.count(text),
            overflow_after_output=self._take_fault(False, only=CHAT_FAULT_NAMES) == "overflow-midstream",
        )

    def _summary_reply(
        self, messages: Sequence[Mapping[str, Any]], fault: str | None, prompt_tokens: int
    ) -> SimulatedReply:
        """Answer a compaction request with a summary, or with the defect a fault knob asks for."""
        text = summarise(compaction_input(messages), self.counter)
        finish_reason = "stop"
        if fault == "summary-truncated":
            text = _cut_with_marker(text)
        elif fault == "summary-sections":
            text = _misorder_sections(text)
        elif fault == "summary-length":
            text, finish_reason = _partial(text), "length"
        elif fault == "truncate":  # the general knob keeps its meaning here too
            text, finish_reason = text[: max(1, len(text) // 2)], "length"
        return SimulatedReply(
            text=text,
            finish_reason=finish_reason,
            prompt_tokens=prompt_tokens,
            completion_tokens=self.counter.count(text),
        )

    def _native_reply(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        previous: str | None,
        fault: str | None,
        prompt_tokens: int,
    ) -> SimulatedReply:
        """Answer a native compaction request with a state's JSON text, or the knob's defect."""
        text = json.dumps(
            native_state_of(model, messages, previous), ensure_ascii=False, separators=(",", ":")
        )
        finish_reason = "stop"
        if fault == "native-invalid":
            text = NATIVE_INVALID_TEXT
        elif fault == "truncate":
            text, finish_reason = text[: max(1, len(text) // 2)], "length"
        return SimulatedReply(
            text=text,
            finish_reason=finish_reason,
            prompt_tokens=prompt_tokens,
            completion_tokens=self.counter.count(text),
        )

    def _exploration(
        self, messages: Sequence[Mapping[str, Any]], available: frozenset[str]
    ) -> _Exploration | None:
        """The exploration the user's request asks for, with its next step; None when it asks none."""
        match = _EXPLORE.search(request_text(messages))
        if match is None or not available & {"read_file", "list_dir", "grep"}:
            return None
        total = min(int(match.group(1)), EXPLORE_MAX_STEPS)
        done = explored_steps(messages)
        files = _explore_files(self._workdir_path(messages)) if "read_file" in available else ()
        return _Exploration(total=total, done=done, files=files, available=available)

    # -- reply composition -------------------------------------------------------------

    def _compose(
        self,
        messages: Sequence[Mapping[str, Any]],
        window: int,
        prompt_tokens: int,
        state_summary: str | None = None,
    ) -> str:
        request = request_text(messages)
        parts: list[str] = []
        results = _turn_tool_results(messages)
        if results:
            parts.append(_describe_tool_results(results))
            percent = prompt_tokens * 100 // window if window else 0
            parts.append(f"_Context: {prompt_tokens:,} of {window:,} tokens in this request ({percent}%)._")
            return "\n\n".join(parts)
        if _GREETING.match(request):
            parts.append(
                "Hello! I am **Foya's offline simulator**: a deterministic stand-in for a language model, "
                "answering because no provider is configured. I can describe this conversation and the "
                "working directory, and I report real token counts so you can watch the context budget. "
                "Configure a model in `config.toml` (see the README) for real answers."
            )
        if _ABOUT_FILES.search(request):
            parts.append(self._describe_workdir(self._workdir_path(messages)))
        if _ABOUT_CONVERSATION.search(request):
            parts.append(self._describe_conversation(messages, state_summary))
        if not parts:
            parts.append(
                f"You asked: “{_quote(request)}”. I am the offline simulator, so I cannot reason about it, "
                "but I can describe what I see. Ask me about the *files* here or the *conversation so far*."
            )
            parts.append(self._describe_conversation(messages, state_summary))
        percent = prompt_tokens * 100 // window if window else 0
        parts.append(f"_Context: {prompt_tokens:,} of {window:,} tokens in this request ({percent}%)._")
        return "\n\n".join(parts)

    def _describe_conversation(
        self, messages: Sequence[Mapping[str, Any]], state_summary: str | None = None
    ) -> str:
        # The hidden reminder is no user message (SPEC K-1), so it is not counted as one.
        users = [_text_of(m) for m in messages if m.get("role") == "user" and not is_handoff(m)]
        replies = sum(1 for m in messages if m.get("role") == "assistant")
        tools = sum(1 for m in messages if m.get("role") == "tool")
        lines = [
            f"This conversation holds {len(users)} user message{'s' if len(users) != 1 else ''}, "
            f"{replies} repl{'ies' if replies != 1 else 'y'} "
            f"and {tools} tool result{'s' if tools != 1 else ''}."
        ]
        earlier = users[:-1]
        if earlier:
            lines.append("Your earlier requests, oldest first:")
            shown = earlier[-5:]
            if len(earlier) > len(shown):
                lines.append(f"- … {len(earlier) - len(shown)} more before these")
            lines.extend(f"- “{_quote(text)}”" for text in shown)
        if state_summary is not None:
            summary = _quote(state_summary, 240)
            lines.append(f"Before these, a native context state stands for earlier work — {summary}")
        return "\n".join(lines)

    def _describe_workdir(self, root: Path) -> str:
        try:
            entries = sorted(
                os.scandir(root), key=lambda e: (not e.is_dir(follow_symlinks=False), e.name.lower())
            )
        except OSError as exc:
            return f"I cannot read the working directory `{root}`: {exc.strerror or exc}."
        visible = [entry for entry in entries if not entry.name.startswith(".")]
        extensions: Counter[str] = Counter(
            Path(entry.name).suffix.lower() or "(none)"
            for entry in visible
            if entry.is_file(follow_symlinks=False)
        )
        lines = [f"The working directory `{root.name or root}` holds {len(visible)} visible entries:"]
        for entry in visible[:MAX_LISTED_ENTRIES]:
            lines.append(f"- `{entry.name}{'/' if entry.is_dir(follow_symlinks=False) else ''}`")
        if len(visible) > MAX_LISTED_ENTRIES:
            lines.append(f"- … and {len(visible) - MAX_LISTED_ENTRIES} more")
        if extensions:
            common = ", ".join(f"{ext} × {n}" for ext, n in extensions.most_common(5))
            lines.append(f"\nMost common file types: {common}.")
        readme = next(
            (e for e in visible if e.name.lower() in ("readme.md", "readme.rst", "readme.txt", "readme")),
            None,
        )
        if readme is not None:
            title = self._first_line(Path(readme.path))
            if title:
                lines.append(f"The README begins: “{_quote(title)}”.")
        return "\n".join(lines)

    @staticmethod
    def _first_line(path: Path) -> str:
        try:
            with path.open(encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    stripped = line.strip().lstrip("#").strip()
                    if stripped:
                        return stripped
        except OSError:
            return ""
        return ""


# -- tool use ---------------------------------------------------------------------------------
# The simulator explores like an agent would: it asks Foya to run real read-only tools in the
# working directory, then answers from what they returned. Every choice is a pure function of
# the request, so runs repeat exactly.

_SHORTENED = re.compile(
    r'history_read_tool_result with seq=(\d+), tool_call_id="([^"]+)", sha256="([0-9a-f]{64})"'
)
_SEARCH = re.compile(r"\b(?:grep|search|find)\b(?: for)?\s+[\"'`]?([^\"'`\s]+)", re.IGNORECASE)
_RECALL = re.compile(
    r"\b(?:recall|search (?:the )?(?:conversation|history) for|what did (?:i|we) say about)"
    r"\s+[\"'`]?([^\"'`?]+)",
    re.IGNORECASE,
)
_FILE_TOKEN = re.compile(
    r"\b(?:read|open|show)\b\s+(?:the\s+)?(?:file\s+)?[`'\"]?([\w./-]+\.\w+)", re.IGNORECASE
)


def _tool_names(tools: Sequence[Mapping[str, Any]]) -> frozenset[str]:
    names = set()
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            names.add(function["name"])
    return frozenset(names)


def is_handoff(message: Mapping[str, Any]) -> bool:
    """Whether a message is the hidden continuation reminder (SPEC K-1)."""
    return message.get("role") == "user" and _text_of(message).lstrip().startswith(HANDOFF_MARKER)


def _is_checkpoint(message: Mapping[str, Any]) -> bool:
    return message.get("role") == "user" and _text_of(message).lstrip().startswith(CHECKPOINT_MESSAGE_PREFIX)


def request_index(messages: Sequence[Mapping[str, Any]]) -> int | None:
    """Index of the user's latest request: the latest user message that is neither the hidden
    reminder nor a checkpoint's message (after a mid-turn compaction the request is re-inserted
    verbatim after the checkpoint, SPEC C-3, so it is still found)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "user" and not is_handoff(message) and not _is_checkpoint(message):
            return index
    return None


def request_text(messages: Sequence[Mapping[str, Any]]) -> str:
    index = request_index(messages)
    return _text_of(messages[index]) if index is not None else ""


def _turn_messages(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The messages after the user's latest request (this turn's work so far)."""
    index = request_index(messages)
    return list(messages[index + 1 :]) if index is not None else list(messages)


def _turn_calls(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    calls = []
    for message in _turn_messages(messages):
        for call in message.get("tool_calls") or ():
            function = call.get("function", {})
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except ValueError:
                arguments = {}
            calls.append((str(function.get("name", "")), arguments if isinstance(arguments, dict) else {}))
    return calls


def _turn_tool_results(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(tool name, content) of this turn's tool results, in order."""
    names = {}
    results = []
    for message in _turn_messages(messages):
        for call in message.get("tool_calls") or ():
            names[call.get("id")] = call.get("function", {}).get("name", "tool")
        if message.get("role") == "tool":
            results.append((str(names.get(message.get("tool_call_id"), "tool")), _text_of(message)))
    return results


def plan_tool_calls(messages: Sequence[Mapping[str, Any]], available: frozenset[str]) -> tuple[ToolCall, ...]:
    """The next tool calls the simulator asks for, or () to answer in text."""
    if not available or not messages:
        return ()
    request = request_text(messages)
    done = _turn_calls(messages)
    done_names = {name for name, _ in done}
    serial = sum(len(m.get("tool_calls") or ()) for m in messages)

    def call(name: str, arguments: dict[str, Any]) -> tuple[ToolCall, ...]:
        if name not in available:
            return ()
        return (ToolCall(id=f"sim_call_{serial + 1}", name=name, arguments=json.dumps(arguments)),)

    if messages[-1].get("role") == "user":
        # Once a checkpoint summarises history, what was said before it is searched, not grepped.
        if (recall := _RECALL.search(request)) and "history_search" in available:
            return call("history_search", {"query": recall.group(1).strip(), "scope": "all"})
        if (search := _SEARCH.search(request)) and "grep" in available:
            return call("grep", {"pattern": re.escape(search.group(1)), "ignore_case": True})
        if read := _FILE_TOKEN.search(request):
            return call("read_file", {"path": read.group(1)})
        if _ABOUT_FILES.search(request):
            return call("list_dir", {"path": "."})
        return ()
    if messages[-1].get("role") != "tool":
        return ()
    # A result of this turn was shortened for the model: read it back once, as T-2 intends.
    if "history_read_tool_result" not in done_names:
        for _, content in _turn_tool_results(messages):
            if shortened := _SHORTENED.search(content):
                seq, call_id, digest = shortened.groups()
                return call(
                    "history_read_tool_result",
                    {"op": "inspect", "seq": int(seq), "tool_call_id": call_id, "sha256": digest},
                )
    if done and done[-1][0] == "list_dir" and "read_file" not in done_names:
        listing = _turn_tool_results(messages)[-1][1]
        readme = re.search(r"\b(readme(?:\.md|\.rst|\.txt)?)\b", listing, re.IGNORECASE)
        if readme:
            return call("read_file", {"path": readme.group(1)})
    return ()


def _as_code(text: str) -> str:
    """Quoted output as inline code, so a quoted `# heading` or `*` is not read as Markdown."""
    return f"`{text}`" if "`" not in text else text


_NUMBERED_LINE = re.compile(r"^\s*\d+→")
MAX_REPORTED_LINES = 12


def _describe_tool_results(results: Sequence[tuple[str, str]]) -> str:
    """What this turn's tools found, quoted from their results (the simulator invents nothing)."""
    parts = [f"I ran {len(results)} tool call{'s' if len(results) != 1 else ''} in the working directory."]
    for name, content in results:
        lines = [line for line in content.splitlines() if line.strip()]
        if not lines:
            parts.append(f"`{name}` returned nothing.")
            continue
        header, body = lines[0], lines[1:]
        if name == "read_file":
            body = [_NUMBERED_LINE.sub("", line) for line in body]
            body = [line for line in body if line.strip()]
        shown = body[:MAX_REPORTED_LINES]
        more = f"\n- … and {len(body) - len(shown)} more lines" if len(body) > len(shown) else ""
        quoted = "\n".join(f"- {_as_code(_quote(line, 120))}" for line in shown)
        parts.append(
            f"`{name}` — {_quote(header, 120)}:\n{quoted}{more}" if shown else f"`{name}` — {header}"
        )
    return "\n\n".join(parts)


# -- exploration and the execution frontier ---------------------------------------------------
# "explore N steps" stands for a long agent turn: many small read-only steps whose results pile up
# in the context, so that the budget, handoff and mid-turn compaction all get exercised. Every step
# is a pure function of its number, so a run repeats exactly, and the number is read back from the
# call ids the request still shows.

_EXPLORE = re.compile(r"\bexplore\s+(\d+)\s+steps?\b", re.IGNORECASE)
_EXPLORE_ID = re.compile(rf"^{EXPLORE_CALL_PREFIX}(\d+)$")
# Never worth reading: caches and dependency trees, however large.
_SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "venv", ".venv"})
EXPLORE_LIST_EVERY = 12
"""One step in this many lists the directory, one greps; the rest read files."""


def _explore_files(root: Path) -> tuple[str, ...]:
    """The working directory's visible files, as relative paths in sorted order (bounded)."""
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIPPED_DIRS)
        base = Path(folder).relative_to(root)
        found += [(base / name).as_posix() for name in files if not name.startswith(".")]
        if len(found) >= EXPLORE_MAX_FILES:
            break
    return tuple(sorted(found)[:EXPLORE_MAX_FILES])


def _explore_id(value: Any) -> int:
    match = _EXPLORE_ID.match(value) if isinstance(value, str) else None
    return int(match.group(1)) if match else 0


def explored_steps(messages: Sequence[Mapping[str, Any]]) -> int:
    """The highest exploration step the request shows for the current request: the ids after it.

    A checkpoint that covers the request keeps it before its steps (re-inserted, or kept in place
    by the fallback: SPEC C-3, K-10), so ids before the request are always an earlier turn's.
    """
    index = request_index(messages)
    if index is None:
        return 0
    highest = 0
    for message in messages[index + 1 :]:
        highest = max(highest, _explore_id(message.get("tool_call_id")))
        for call in message.get("tool_calls") or ():
            highest = max(highest, _explore_id(call.get("id")))
    return highest


def explore_call(step: int, files: Sequence[str], available: frozenset[str]) -> ToolCall | None:
    """The tool call of exploration step `step` (1-based): mostly file reads, cycling through the
    files in order, with a directory listing and a search now and then."""

    def call(name: str, arguments: dict[str, Any]) -> ToolCall:
        return ToolCall(id=f"{EXPLORE_CALL_PREFIX}{step}", name=name, arguments=json.dumps(arguments))

    lists, greps = "list_dir" in available, "grep" in available
    grep_at = EXPLORE_LIST_EVERY // 2 + 1
    position = step % EXPLORE_LIST_EVERY
    if position == 1 and lists:
        return call("list_dir", {"path": "."})
    if position == grep_at and greps:
        return call("grep", {"pattern": EXPLORE_GREP_PATTERN, "path": "."})
    if files and "read_file" in available:
        # The reads before this step, counted in closed form: each read takes the next file.
        periods, rest = divmod(step - 1, EXPLORE_LIST_EVERY)
        skipped = periods * (lists + greps) + (lists and rest >= 1) + (greps and rest >= grep_at)
        return call("read_file", {"path": files[(step - 1 - skipped) % len(files)]})
    for name, arguments in (("list_dir", {"path": "."}), ("grep", {"pattern": EXPLORE_GREP_PATTERN})):
        if name in available:
            return call(name, arguments)
    return None


@dataclass(frozen=True)
class _Exploration:
    """An "explore N steps" request: how far it got, and what comes next."""

    total: int
    done: int
    files: tuple[str, ...]
    available: frozenset[str]

    @property
    def next_call(self) -> ToolCall | None:
        return explore_call(self.done + 1, self.files, self.available) if self.done < self.total else None

    @property
    def next_calls(self) -> tuple[ToolCall, ...]:
        call = self.next_call
        return (call,) if call is not None else ()

    def report(self, window: int, prompt_tokens: int) -> str:
        """The final answer: what the N steps did (from their schedule, which is exact, not from the
        results the request still shows, which compaction may have summarised)."""
        calls = [explore_call(step, self.files, self.available) for step in range(1, self.total + 1)]
        names = Counter(call.name for call in calls if call is not None)
        read = [json.loads(call.arguments)["path"] for call in calls if call and call.name == "read_file"]
        distinct = list(dict.fromkeys(read))
        shown = ", ".join(f"`{path}`" for path in distinct[:5]) + (" …" if len(distinct) > 5 else "")
        parts = [
            f"Explored {self.total} steps: read {_times(names['read_file'], 'file')} "
            f"({len(distinct)} distinct{': ' + shown if distinct else ''}), listed the directory "
            f"{_times(names['list_dir'], 'time')} and searched {_times(names['grep'], 'time')}."
        ]
        percent = prompt_tokens * 100 // window if window else 0
        parts.append(f"_Context: {prompt_tokens:,} of {window:,} tokens in this request ({percent}%)._")
        return "\n\n".join(parts)


def _times(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _call_label(call: ToolCall) -> str:
    return f"`{call.name}` {_quote(call.arguments, 80)}"


def _frontier(
    messages: Sequence[Mapping[str, Any]], exploration: _Exploration | None, calls: Sequence[ToolCall]
) -> str:
    """The answer to the hidden reminder (SPEC K-1): where the work stands, from what is visible."""
    turn = _turn_messages(messages)
    answered = {m.get("tool_call_id") for m in turn if m.get("role") == "tool"}
    made = [
        (str(call.get("id")), str(call.get("function", {}).get("name", "tool")))
        for m in turn
        for call in m.get("tool_calls") or ()
    ]
    in_flight = [name for call_id, name in made if call_id not in answered]
    if exploration is not None:
        done = f"{min(exploration.done, exploration.total)} of {exploration.total} exploration steps"
    elif made:
        names = Counter(name for _, name in made)
        done = (
            f"{len(made)} tool call{'s' if len(made) != 1 else ''} this turn ("
            + ", ".join(f"{name} × {count}" for name, count in names.items())
            + ")"
        )
    else:
        done = "no tool calls yet this turn"
    if calls:
        next_step = "; ".join(_call_label(call) for call in calls)
    elif exploration is not None:
        next_step = "report the exploration"
    else:
        next_step = "answer the request"
    return (
        f"Execution frontier: goal “{_quote(request_text(messages))}”; done {done}; "
        f"in flight {', '.join(in_flight) or 'nothing'}; next {next_step}."
    )


# -- compaction requests ----------------------------------------------------------------------
# A summary is extracted, never invented: every bullet quotes the transcript or a previous summary
# and names the events it comes from, so a reader can check it against history (SPEC C-8).


def is_compaction_request(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the request's (first) system message starts with the compaction marker."""
    for message in messages:
        if message.get("role") == "system":
            return _text_of(message).startswith(COMPACTION_MARKER)
    return False


@dataclass(frozen=True)
class TranscriptEntry:
    """One `[seq N] …` transcript line (with any continuation lines), without its prefix."""

    seq: int
    text: str


@dataclass(frozen=True)
class CompactionInput:
    """What a compaction request carries, parsed from its tagged blocks."""

    entries: tuple[TranscriptEntry, ...] = ()
    previous: tuple[Mapping[str, str], ...] = ()
    """Each previous summary's sections (title → body), oldest first."""
    previous_ranges: tuple[tuple[int | None, int | None], ...] = ()
    must_mention: tuple[str, ...] = ()
    repair: bool = False


_SEQ_LINE = re.compile(r"^\[seq (\d+)\] ?(.*)$")
_USER_LINE = re.compile(r"^user: ?(.*)$", re.DOTALL)
_ASSISTANT_TEXT = re.compile(r"^assistant: ?(.*)$", re.DOTALL)
_ASSISTANT_CALL = re.compile(r"^assistant → (\S+) ?(.*)$", re.DOTALL)
_TOOL_RESULT = re.compile(r"^tool (\S+) \((ok|error)\): ?(.*)$", re.DOTALL)
_PROVENANCE = re.compile(r"\[seq (\d+)(?:[–-](\d+))?\]\s*$")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")
# What a reader (and the validator) takes for a truncation marker: never quoted into a summary.
_MARKER_LIKE = re.compile(
    r"\[\s*(?:…|\.\.\.)?\s*truncated\s*\]|\[\s*(?:…|\.\.\.)\s*\]|<\s*truncated\s*>|\(\s*truncated\s*\)",
    re.IGNORECASE,
)
_TRAILING_ELLIPSIS = re.compile(r"(…|\.\.\.)\s*$")
_FENCE = re.compile(r"`{3,}|~{3,}")


def _request_text(message: Mapping[str, Any]) -> str:
    # content parts keep their own lines: tagged blocks span lines
    return content_text(message.get("content"), separator="\n")


def _int_or_none(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


def _sections_of(summary: str) -> dict[str, str]:
    """A five-section summary's bodies by title; text before the first heading is dropped."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in summary.splitlines():
        heading = line.strip()
        if heading in SECTION_HEADINGS:
            current = sections.setdefault(heading[3:], [])
        elif current is not None:
            current.append(line)
    return {title: "\n".join(lines).strip() for title, lines in sections.items()}


def compaction_input(messages: Sequence[Mapping[str, Any]]) -> CompactionInput:
    """Parse a compaction request's user message(s) (format in `summary_format.py`)."""
    text = "\n".join(_request_text(m) for m in messages if m.get("role") == "user")
    entries: list[TranscriptEntry] = []
    previous: list[Mapping[str, str]] = []
    ranges: list[tuple[int | None, int | None]] = []
    must_mention: list[str] = []
    repair = False
    for tag, attributes, body in blocks(text):
        if tag == TRANSCRIPT_TAG:
            for line in body.splitlines():
                match = _SEQ_LINE.match(line)
                if match:
                    entries.append(TranscriptEntry(int(match.group(1)), match.group(2)))
                elif entries:  # a multi-line message continues its entry
                    last = entries[-1]
                    entries[-1] = TranscriptEntry(last.seq, f"{last.text}\n{line}")
        elif tag == PREVIOUS_SUMMARY_TAG:
            previous.append(_sections_of(body))
            span = (_int_or_none(attributes.get("from_seq")), _int_or_none(attributes.get("through_seq")))
            ranges.append(span)
        elif tag == MUST_MENTION_TAG:
            must_mention.extend(line.rstrip() for line in body.splitlines() if line.strip().startswith("- "))
        elif tag == REPAIR_TAG:
            repair = True
    return CompactionInput(tuple(entries), tuple(previous), tuple(ranges), tuple(must_mention), repair)


@dataclass(frozen=True)
class _Detail:
    """How much a summary keeps; later levels are shorter (a repair, or an oversized input)."""

    bullets: int
    decisions: int
    errors: int
    carried: int
    """Critical Context lines carried over from previous summaries."""
    quote: int
    """Characters per quoted piece."""
    goal: int


_DETAIL_LEVELS = (
    _Detail(bullets=8, decisions=5, errors=5, carried=8, quote=160, goal=240),
    _Detail(bullets=4, decisions=2, errors=3, carried=4, quote=100, goal=160),
    _Detail(bullets=2, decisions=1, errors=1, carried=2, quote=60, goal=100),
)
_REPAIR_LEVEL = 1


def _clean(text: str, limit: int) -> str:
    """One quoted line: flat, shortened, and unable to open a code fence or fake a truncation."""
    flat = _FENCE.sub("`", " ".join(text.split()))
    flat = _MARKER_LIKE.sub("(shortened)", flat)
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _seq_ref(first: int | None, last: int | None) -> str:
    if first is None:
        return ""
    return f" [seq {first}]" if last is None or last == first else f" [seq {first}–{last}]"


@dataclass(frozen=True)
class _Step:
    first: int | None
    last: int | None
    text: str

    def bullet(self) -> str:
        return f"- {self.text}{_seq_ref(self.first, self.last)}"


def _bullets(body: str) -> list[str]:
    return [line.strip()[2:].strip() for line in body.splitlines() if line.strip().startswith("- ")]


def _carried_step(line: str, span: tuple[int | None, int | None]) -> _Step:
    """A bullet of a previous summary, keeping its own provenance or else the summary's range."""
    match = _PROVENANCE.search(line)
    if match:
        last = int(match.group(2)) if match.group(2) else None
        return _Step(int(match.group(1)), last, line[: match.start()].rstrip())
    return _Step(span[0], span[1], line)


def _tool_steps(entries: Sequence[TranscriptEntry], limit: int) -> list[_Step]:
    """Each tool call with its result, as one step spanning both."""
    pending: list[tuple[int, str, str]] = []  # calls awaiting their result: seq, name, arguments
    steps: list[_Step] = []
    for entry in entries:
        if call := _ASSISTANT_CALL.match(entry.text):
            pending.append((entry.seq, call.group(1), call.group(2)))
        elif result := _TOOL_RESULT.match(entry.text):
            name, status, output = result.groups()
            index = next((i for i, (_, called, _) in enumerate(pending) if called == name), None)
            call_seq, arguments = entry.seq, ""
            if index is not None:
                call_seq, _, arguments = pending.pop(index)
            shown = f" {_clean(arguments, limit)}" if arguments else ""
            steps.append(_Step(call_seq, entry.seq, f"`{name}`{shown} → {status}: {_clean(output, limit)}"))
    for seq, name, arguments in pending:
        steps.append(_Step(seq, None, f"`{name}` {_clean(arguments, limit)} (no result recorded)"))
    return sorted(steps, key=lambda step: step.first or 0)


def _conversation_steps(entries: Sequence[TranscriptEntry], limit: int) -> list[_Step]:
    steps = []
    for entry in entries:
        if user := _USER_LINE.match(entry.text):
            steps.append(_Step(entry.seq, None, f"The user asked: “{_clean(user.group(1), limit)}”"))
        elif said := _ASSISTANT_TEXT.match(entry.text):
            steps.append(_Step(entry.seq, None, f"The assistant answered: “{_clean(said.group(1), limit)}”"))
    return steps


def _progress(data: CompactionInput, detail: _Detail) -> list[str]:
    steps: list[_Step] = []
    for sections, span in zip(data.previous, data.previous_ranges, strict=True):
        for line in _bullets(sections.get("Progress", "")):
            if not line.startswith("…"):  # an earlier "… and N more" line adds nothing to carry
                steps.append(_carried_step(_clean(line, detail.quote), span))
    # A conversation without tools: what was asked and answered is its progress.
    steps += _tool_steps(data.entries, detail.quote // 2) or _conversation_steps(data.entries, detail.quote)
    if not steps:
        return ["- No steps were recorded in the covered history."]
    if len(steps) <= detail.bullets:
        return [step.bullet() for step in steps]
    # The latest steps matter most to whoever continues; the earlier ones are counted and located.
    omitted, kept = steps[: -detail.bullets], steps[-detail.bullets :]
    seqs = [seq for step in omitted for seq in (step.first, step.last) if seq is not None]
    more = _Step(min(seqs, default=None), max(seqs, default=None), f"… and {len(omitted)} more earlier steps")
    return [more.bullet()] + [step.bullet() for step in kept]


def _goal(data: CompactionInput, detail: _Detail) -> tuple[str, str | None]:
    """The Goal text, and the request quoted for Next Steps (None when carried from a summary)."""
    for entry in reversed(data.entries):
        if user := _USER_LINE.match(entry.text):
            request = _clean(user.group(1), detail.goal)
            return f"The user asked: “{request}”{_seq_ref(entry.seq, None)}", request
    for sections in reversed(data.previous):
        if sections.get("Goal"):
            return f"As summarised before: {_clean(sections['Goal'], detail.goal)}", None
    return "Continue the work recorded in this history.", None


def _decisions(data: CompactionInput, detail: _Detail) -> list[str]:
    found: list[str] = []
    for sections in data.previous:
        found += [f"- {_clean(line, detail.quote)}" for line in _bullets(sections.get("Key Decisions", ""))]
    for entry in data.entries:
        if said := _ASSISTANT_TEXT.match(entry.text):
            flat = " ".join(said.group(1).split())
            sentence = _SENTENCE_END.split(flat, maxsplit=1)[0]
            if sentence:
                found.append(f"- “{_clean(sentence, detail.quote)}”{_seq_ref(entry.seq, None)}")
    unique = list(dict.fromkeys(found))[-detail.decisions :]
    return unique or ["No decisions were recorded in this part of the history."]


def _tool_results(data: CompactionInput) -> list[tuple[int, re.Match[str]]]:
    return [(entry.seq, match) for entry in data.entries if (match := _TOOL_RESULT.match(entry.text))]


def _next_steps(data: CompactionInput, request: str | None) -> list[str]:
    steps = []
    results = _tool_results(data)
    if results and results[-1][1].group(2) == "error":
        seq, match = results[-1]
        steps.append(f"- Resolve the last error first: `{match.group(1)}` failed{_seq_ref(seq, None)}.")
    if request is not None:
        steps.append(f"- Continue with the latest user request: “{request}”.")
    else:
        steps.append("- Continue toward the goal above from where the progress ends.")
    return steps


def _critical_context(data: CompactionInput, detail: _Detail) -> list[str]:
    # Every must-mention line verbatim: the validator looks for each path and directive.
    lines = list(dict.fromkeys(data.must_mention))
    carried: list[str] = []
    for sections in data.previous:
        for line in _bullets(sections.get("Critical Context", "")):
            bullet = f"- {line}" if len(line) <= detail.quote else f"- {_clean(line, detail.quote)}"
            if bullet not in lines and bullet not in carried:
                carried.append(bullet)
    errors = [
        f"- Error in `{match.group(1)}`{_seq_ref(seq, None)}: “{_clean(match.group(3), detail.quote)}”"
        for seq, match in _tool_results(data)
        if match.group(2) == "error"
    ]
    lines += carried[-detail.carried :] + errors[-detail.errors :]
    if not lines:
        return ["- No modified paths, user directives or errors were recorded."]
    if _TRAILING_ELLIPSIS.search(lines[-1]):  # a summary ending in "…" reads as cut off (SPEC C-9)
        lines.append("- Nothing further is critical.")
    return lines


def _render(data: CompactionInput, detail: _Detail) -> str:
    goal, request = _goal(data, detail)
    bodies = {
        "Goal": [goal],
        "Progress": _progress(data, detail),
        "Key Decisions": _decisions(data, detail),
        "Next Steps": _next_steps(data, request),
        "Critical Context": _critical_context(data, detail),
    }
    return "\n\n".join(f"## {title}\n" + "\n".join(bodies[title]) for title in SECTION_TITLES) + "\n"


def summarise(data: CompactionInput, counter: TokenCounter) -> str:
    """A valid five-section summary (SPEC C-8, C-9) of at most SUMMARY_TOKEN_CAP tokens.

    A repair request starts shorter. Must-mention lines are never dropped, so only a must-mention
    list near the cap by itself can make the summary exceed it.
    """
    levels = _DETAIL_LEVELS[_REPAIR_LEVEL:] if data.repair else _DETAIL_LEVELS
    text = ""
    for detail in levels:
        text = _render(data, detail)
        if counter.count(text) <= SUMMARY_TOKEN_CAP:
            break
    return text


def _section_starts(text: str) -> dict[str, int]:
    return {heading: text.index(heading) for heading in SECTION_HEADINGS if heading in text}


def _cut_with_marker(text: str) -> str:
    """`summary-truncated`: stop half-way through Progress, as a model that ran dry mid-answer."""
    starts = _section_starts(text)
    start, end = starts["## Progress"], starts["## Key Decisions"]
    cut = start + max(len("## Progress\n") + 1, (end - start) // 2)
    return text[:cut].rstrip() + TRUNCATION_MARKER


def _misorder_sections(text: str) -> str:
    """`summary-sections`: Next Steps before Progress, and Key Decisions missing."""
    sections = _sections_of(text)
    order = ("Goal", "Next Steps", "Progress", "Critical Context")
    return "\n\n".join(f"## {title}\n{sections[title]}" for title in order) + "\n"


def _partial(text: str) -> str:
    """`summary-length`: the output limit struck inside Next Steps; Critical Context never came."""
    starts = _section_starts(text)
    start, end = starts["## Next Steps"], starts["## Critical Context"]
    return text[: start + (end - start) // 2]


# -- provider-native compaction (foya-sim/native) --------------------------------------------
# An opaque state, as a provider with native compaction would keep: Foya only checks that it is
# JSON and hands it back on the route that made it (SPEC C-11, R-2). Its summary is a short,
# deterministic digest of what the compacted messages held.

_PATH_ARGUMENTS = ("path", "file", "file_path", "filename")
_ERROR_RESULT = re.compile(
    r"^(?:error|no such|cannot|timed out|cancelled)|\[exit code [1-9]\d*\]|Traceback \(most recent",
    re.IGNORECASE | re.MULTILINE,
)
NATIVE_SHOWN_REQUESTS = 3
NATIVE_SHOWN_FILES = 8
NATIVE_SHOWN_ERRORS = 3


def _checked_native_state(model: str, state: Mapping[str, Any] | None, compaction: bool) -> str | None:
    """The summary of a native state this model may use (None without a state); raises a bad
    request for a state from another route (SPEC R-2) or one that is not this model's."""
    native = SIMULATOR_MODELS[model].native_compaction
    if compaction and not native:
        raise SimulatorFault("bad_request", f"{model} does not offer native compaction (SPEC C-11)")
    if state is None:
        return None
    if not native:
        raise SimulatorFault(
            "bad_request", f"{model} does not accept native state from another route (SPEC R-2)"
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
        _quote(_text_of(m), 160)
        for m in messages
        if m.get("role") == "user" and not is_handoff(m) and not _is_checkpoint(m)
    ]
    tools: Counter[str] = Counter()
    files: list[str] = []
    for message in messages:
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            tools[str(function.get("name", "tool"))] += 1
            files += _call_paths(str(function.get("arguments") or ""))
    errors = [
        _quote(next(line for line in _text_of(m).splitlines() if line.strip()), 100)
        for m in messages
        if m.get("role") == "tool" and _ERROR_RESULT.search(_text_of(m))
    ]
    distinct = list(dict.fromkeys(files))

    def shown(items: Sequence[str], limit: int, quoted: bool = False) -> str:
        kept = [f"“{item}”" if quoted else item for item in items[-limit:]]
        more = f"{len(items) - limit} earlier, then " if len(items) > limit else ""
        return more + "; ".join(kept) if kept else "none"

    parts = []
    if previous:
        parts.append(f"earlier: {_quote(previous, 300)}")
    parts += [
        f"requests: {shown(requests, NATIVE_SHOWN_REQUESTS, quoted=True)}",
        "tools: " + (", ".join(f"{name}×{count}" for name, count in sorted(tools.items())) or "none"),
        f"files: {shown(distinct, NATIVE_SHOWN_FILES)}",
        f"errors: {shown(errors, NATIVE_SHOWN_ERRORS, quoted=True)}",
    ]
    return _quote(" | ".join(parts), NATIVE_SUMMARY_CHARS)


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

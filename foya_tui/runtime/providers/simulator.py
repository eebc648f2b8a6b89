"""Provides the offline simulator's engine: deterministic, useful replies without any model.

The simulator is what a new user without an API key talks to, so its replies describe things
it can really measure: the conversation so far, the working directory and the context budget.
LiteLLM reaches it as a custom provider (the adapter lives in `litellm_client.py`, the only
module that imports LiteLLM); this module is plain Python.

Fault knobs (tests and demos) come from `FOYA_SIM_FAULTS`, a comma-separated list of
`overflow`, `429`, `quota`, `truncate`, each optionally `xN` to fire only N times
(e.g. `429x2` fails twice, then answers).
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foya_tui.runtime.context.tokens import TokenCounter, count_messages, count_tools, default_counter
from foya_tui.runtime.model import ToolCall
from foya_tui.runtime.providers.catalog import SIMULATOR_MODELS

FAULTS_ENV = "FOYA_SIM_FAULTS"
FAULT_NAMES = frozenset({"overflow", "429", "quota", "truncate"})
MAX_LISTED_ENTRIES = 24


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
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


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

    def _take_fault(self) -> str | None:
        """The fault to inject for this request, counting down `xN` budgets."""
        spec = os.environ.get(FAULTS_ENV, "")
        try:
            plan = FaultPlan.parse(spec)
        except ValueError as exc:
            raise SimulatorFault("invalid", str(exc)) from None
        with self._lock:
            if spec != self._fault_spec:  # a new plan starts its counts afresh
                self._fault_spec, self._fired = spec, Counter()
            for name, times in plan.faults:
                if times is None or self._fired[name] < times:
                    self._fired[name] += 1
                    return name
        return None

    def reply(
        self, model: str, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] = ()
    ) -> SimulatedReply:
        info = SIMULATOR_MODELS.get(model)
        if info is None:
            raise SimulatorFault("unknown", f"the simulator has no model {model!r}")
        window = info.window or 0
        # Counted as Foya's compiler counts a request: messages, plus the tool schemas.
        prompt_tokens = count_messages(messages, self.counter) + (
            count_tools(tools, self.counter) if tools else 0
        )
        fault = self._take_fault()
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
        calls = plan_tool_calls(messages, _tool_names(tools))
        if calls:
            arguments = "".join(call.name + call.arguments for call in calls)
            return SimulatedReply(
                text="",
                finish_reason="tool_calls",
                prompt_tokens=prompt_tokens,
                completion_tokens=self.counter.count(arguments),
                tool_calls=calls,
            )
        text = self._compose(messages, window, prompt_tokens)
        finish_reason = "stop"
        if fault == "truncate":
            text, finish_reason = text[: max(1, len(text) // 2)], "length"
        return SimulatedReply(
            text=text,
            finish_reason=finish_reason,
            prompt_tokens=prompt_tokens,
            completion_tokens=self.counter.count(text),
        )

    # -- reply composition -------------------------------------------------------------

    def _compose(self, messages: Sequence[Mapping[str, Any]], window: int, prompt_tokens: int) -> str:
        user_texts = [_text_of(m) for m in messages if m.get("role") == "user"]
        request = user_texts[-1] if user_texts else ""
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
            parts.append(self._describe_conversation(messages))
        if not parts:
            parts.append(
                f"You asked: “{_quote(request)}”. I am the offline simulator, so I cannot reason about it, "
                "but I can describe what I see. Ask me about the *files* here or the *conversation so far*."
            )
            parts.append(self._describe_conversation(messages))
        percent = prompt_tokens * 100 // window if window else 0
        parts.append(f"_Context: {prompt_tokens:,} of {window:,} tokens in this request ({percent}%)._")
        return "\n\n".join(parts)

    def _describe_conversation(self, messages: Sequence[Mapping[str, Any]]) -> str:
        users = [_text_of(m) for m in messages if m.get("role") == "user"]
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


def _turn_messages(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The messages after the latest user message (this turn's work so far)."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            return list(messages[index + 1 :])
    return list(messages)


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
    user_texts = [_text_of(m) for m in messages if m.get("role") == "user"]
    request = user_texts[-1] if user_texts else ""
    done = _turn_calls(messages)
    done_names = {name for name, _ in done}
    serial = sum(len(m.get("tool_calls") or ()) for m in messages)

    def call(name: str, arguments: dict[str, Any]) -> tuple[ToolCall, ...]:
        if name not in available:
            return ()
        return (ToolCall(id=f"sim_call_{serial + 1}", name=name, arguments=json.dumps(arguments)),)

    if messages[-1].get("role") == "user":
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

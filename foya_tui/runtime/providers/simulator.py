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

import os
import re
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foya_tui.runtime.context.tokens import TokenCounter, count_messages, default_counter
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

    def reply(self, model: str, messages: Sequence[Mapping[str, Any]]) -> SimulatedReply:
        info = SIMULATOR_MODELS.get(model)
        if info is None:
            raise SimulatorFault("unknown", f"the simulator has no model {model!r}")
        window = info.window or 0
        prompt_tokens = count_messages(messages, self.counter)
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

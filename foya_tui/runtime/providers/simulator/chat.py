"""Provides the simulator's ordinary chat turn: which read-only tools it asks for, and its text
reply (a greeting, the working directory, the conversation so far, what the tools found).

The replies describe only what the simulator can really measure: the conversation, the working
directory and the context budget.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from foya_tui.runtime.model import ToolCall
from foya_tui.runtime.providers.simulator.messages import (
    is_handoff,
    quote,
    request_text,
    text_of,
    turn_messages,
    workdir_of,
)
from foya_tui.runtime.providers.simulator.reply import context_note

MAX_LISTED_ENTRIES = 24
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


def compose(
    messages: Sequence[Mapping[str, Any]],
    window: int,
    prompt_tokens: int,
    state_summary: str | None = None,
    workdir: Path | None = None,
) -> str:
    """The text reply to an ordinary request (`workdir` as for `workdir_of`)."""
    request = request_text(messages)
    parts: list[str] = []
    results = _turn_tool_results(messages)
    if results:
        parts.append(_describe_tool_results(results))
        parts.append(context_note(prompt_tokens, window))
        return "\n\n".join(parts)
    if _GREETING.match(request):
        parts.append(
            "Hello! I am **Foya's offline simulator**: a deterministic stand-in for a language model, "
            "answering because no provider is configured. I can describe this conversation and the "
            "working directory, and I report real token counts so you can watch the context budget. "
            "Configure a model in `config.toml` (see the README) for real answers."
        )
    if _ABOUT_FILES.search(request):
        parts.append(_describe_workdir(workdir_of(messages, workdir)))
    if _ABOUT_CONVERSATION.search(request):
        parts.append(_describe_conversation(messages, state_summary))
    if not parts:
        parts.append(
            f"You asked: “{quote(request)}”. I am the offline simulator, so I cannot reason about it, "
            "but I can describe what I see. Ask me about the *files* here or the *conversation so far*."
        )
        parts.append(_describe_conversation(messages, state_summary))
    parts.append(context_note(prompt_tokens, window))
    return "\n\n".join(parts)


def _describe_conversation(messages: Sequence[Mapping[str, Any]], state_summary: str | None = None) -> str:
    # The hidden reminder is no user message (SPEC K-1), so it is not counted as one.
    users = [text_of(m) for m in messages if m.get("role") == "user" and not is_handoff(m)]
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
        lines.extend(f"- “{quote(text)}”" for text in shown)
    if state_summary is not None:
        summary = quote(state_summary, 240)
        lines.append(f"Before these, a native context state stands for earlier work — {summary}")
    return "\n".join(lines)


def _describe_workdir(root: Path) -> str:
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
        title = _first_line(Path(readme.path))
        if title:
            lines.append(f"The README begins: “{quote(title)}”.")
    return "\n".join(lines)


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


def _turn_calls(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    calls = []
    for message in turn_messages(messages):
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
    for message in turn_messages(messages):
        for call in message.get("tool_calls") or ():
            names[call.get("id")] = call.get("function", {}).get("name", "tool")
        if message.get("role") == "tool":
            results.append((str(names.get(message.get("tool_call_id"), "tool")), text_of(message)))
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

    def search_history(recall: re.Match[str]) -> tuple[ToolCall, ...]:
        return call("history_search", {"query": recall.group(1).strip(), "scope": "all"})

    if messages[-1].get("role") == "user":
        # Once a checkpoint summarises history, what was said before it is searched, not grepped.
        if recall := _RECALL.search(request):
            if "history_search" in available:
                return search_history(recall)
            # A small window sends the recall tools only once tool_search has loaded them.
            if "tool_search" in available:
                return call("tool_search", {"query": "history_search"})
        if (search := _SEARCH.search(request)) and "grep" in available:
            return call("grep", {"pattern": re.escape(search.group(1)), "ignore_case": True})
        if read := _FILE_TOKEN.search(request):
            return call("read_file", {"path": read.group(1)})
        if _ABOUT_FILES.search(request):
            return call("list_dir", {"path": "."})
        return ()
    if messages[-1].get("role") != "tool":
        return ()
    if (
        done
        and done[-1][0] == "tool_search"
        and "history_search" not in done_names
        and (recall := _RECALL.search(request))
    ):
        return search_history(recall)
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
        quoted = "\n".join(f"- {_as_code(quote(line, 120))}" for line in shown)
        parts.append(f"`{name}` — {quote(header, 120)}:\n{quoted}{more}" if shown else f"`{name}` — {header}")
    return "\n\n".join(parts)

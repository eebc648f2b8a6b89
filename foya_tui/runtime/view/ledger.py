"""Provides the evidence ledger: exact records extracted from covered events without a model
(SPEC K-12): the user's words, files read and modified, commands with exit codes, errors.

A summary is lossy; the ledger is not. It is kept with the checkpoint, shown to the model beside
the summary, and used to check a candidate summary: every modified path and every user directive
of the covered range must be mentioned, or the repair request lists what is missing (SPEC C-9).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from foya_tui.runtime.model import Event, Role
from foya_tui.runtime.store.search import message_body
from foya_tui.runtime.view.history import message_role

# Words that turn a request into a standing rule, in the languages users most often write in.
# Matching is on whole words for alphabetic scripts and on the phrase for CJK, case-folded.
_DIRECTIVE_WORDS = (
    # English
    "remember", "always", "never", "must", "must not", "from now on", "do not", "don't", "make sure",
    "keep in mind", "going forward", "important",
    # German, French, Spanish, Portuguese, Italian
    "immer", "niemals", "nie", "muss", "ab jetzt", "toujours", "jamais", "doit", "désormais",
    "siempre", "nunca", "debe", "a partir de ahora", "sempre", "deve", "mai",
)  # fmt: skip
_DIRECTIVE_CJK = (
    "记住", "总是", "永远", "必须", "务必", "不要", "别", "禁止", "以后", "从现在起", "今后", "一律",
    "記住", "總是", "永遠", "必須", "務必", "禁止", "以後",
    "覚えて", "必ず", "常に", "絶対", "しないで", "してはいけない", "今後",
    "기억", "항상", "절대", "반드시", "하지 마",
)  # fmt: skip
_DIRECTIVE = re.compile(
    r"(?<!\w)(?:" + "|".join(re.escape(word) for word in _DIRECTIVE_WORDS) + r")(?!\w)"
    "|" + "|".join(re.escape(word) for word in _DIRECTIVE_CJK),
    re.IGNORECASE,
)
_MODIFYING_TOOL = re.compile(
    r"write|edit|patch|create|replace|insert|delete|move|rename|apply", re.IGNORECASE
)
_READING_TOOL = re.compile(r"read|view|open|cat\b|show", re.IGNORECASE)
_COMMAND_TOOL = re.compile(r"shell|bash|exec|run|terminal|command", re.IGNORECASE)
_PATH_KEYS = ("path", "file_path", "filepath", "filename", "file", "target_file")
_COMMAND_KEYS = ("command", "cmd", "script")
ITEM_CHARS = 600
"""A single ledger item longer than this is shortened (head … tail) before anything is dropped."""
SHORT_ITEM_CHARS = 160
"""The second, harder shortening applied when the ledger still does not fit its budget."""


def is_directive(text: str) -> bool:
    """Whether a user message states a persistent rule (remember / always / never / must / …)."""
    return _DIRECTIVE.search(unicodedata.normalize("NFKC", text)) is not None


@dataclass(frozen=True)
class LedgerItem:
    """One exact record, with the seq of the event it came from."""

    seq: int
    text: str

    def to_payload(self) -> list[Any]:
        return [self.seq, self.text]

    @classmethod
    def from_payload(cls, raw: Any) -> LedgerItem:
        if (
            not isinstance(raw, list)
            or len(raw) != 2
            or not isinstance(raw[0], int)
            or isinstance(raw[0], bool)
            or not isinstance(raw[1], str)
        ):
            raise ValueError("a ledger item must be [seq, text]")
        return cls(seq=raw[0], text=raw[1])


LEDGER_KINDS = ("directives", "requests", "files_modified", "files_read", "commands", "errors")


@dataclass(frozen=True)
class Ledger:
    """The exact evidence of a covered range, in the order the budget keeps it (SPEC K-12)."""

    directives: tuple[LedgerItem, ...] = ()
    """User messages that state persistent rules, verbatim, oldest first."""
    requests: tuple[LedgerItem, ...] = ()
    """The user's other messages, verbatim, newest first."""
    files_modified: tuple[LedgerItem, ...] = ()
    files_read: tuple[LedgerItem, ...] = ()
    commands: tuple[LedgerItem, ...] = ()
    """Commands run, each with its exit code."""
    errors: tuple[LedgerItem, ...] = ()
    """First line of each failed tool call."""
    dropped: int = 0
    """Items left out because the ledger's budget was reached (said so to the model)."""

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            kind: [item.to_payload() for item in getattr(self, kind)] for kind in LEDGER_KINDS
        }
        payload["dropped"] = self.dropped
        return payload

    @classmethod
    def from_payload(cls, raw: Any) -> Ledger:
        if not isinstance(raw, Mapping):
            raise ValueError("the ledger must be an object")
        missing = [kind for kind in (*LEDGER_KINDS, "dropped") if kind not in raw]
        if missing:
            raise ValueError(f"the ledger lacks {', '.join(missing)}")
        values: dict[str, Any] = {}
        for kind in LEDGER_KINDS:
            if not isinstance(raw[kind], list):
                raise ValueError(f"ledger {kind} must be a list")
            values[kind] = tuple(LedgerItem.from_payload(item) for item in raw[kind])
        dropped = raw["dropped"]
        if not isinstance(dropped, int) or isinstance(dropped, bool) or dropped < 0:
            raise ValueError("ledger dropped must be a count")
        return cls(**values, dropped=dropped)

    @property
    def counts(self) -> dict[str, int]:
        return {kind: len(getattr(self, kind)) for kind in LEDGER_KINDS}

    def render(self) -> str:
        """The ledger as the model sees it, under the checkpoint's `## Critical Context`."""
        titles = {
            "directives": "User rules (verbatim)",
            "requests": "User requests (verbatim, newest first)",
            "files_modified": "Files modified",
            "files_read": "Files read",
            "commands": "Commands run",
            "errors": "Errors",
        }
        lines: list[str] = []
        for kind in LEDGER_KINDS:
            items: tuple[LedgerItem, ...] = getattr(self, kind)
            if not items:
                continue
            lines.append(f"{titles[kind]}:")
            lines.extend(f"- [seq {item.seq}] {item.text}" for item in items)
        if self.dropped:
            lines.append(f"({self.dropped} older records left out; canonical history keeps them all)")
        return "\n".join(lines)

    def must_mention(self) -> list[tuple[str, str]]:
        """What a summary of this range must name: (kind, text) for modified paths and directives."""
        return [("path", item.text) for item in self.files_modified] + [
            ("directive", item.text) for item in self.directives
        ]


def _shorten(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    head = (limit * 2) // 3
    return f"{flat[:head]} … {flat[-(limit - head - 3) :]}"


def _arguments(raw: str) -> Mapping[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, Mapping) else {}


def _first(arguments: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    for key in keys:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _calls_of(event: Event) -> list[tuple[str, str, str]]:
    """(id, name, arguments) of an assistant message's tool calls (own or imported)."""
    calls = event.payload.get("tool_calls")
    found = []
    for call in calls if isinstance(calls, list) else ():
        if not isinstance(call, Mapping):
            continue
        inner = call.get("function")
        function = inner if isinstance(inner, Mapping) else call
        found.append(
            (str(call.get("id", "")), str(function.get("name", "")), str(function.get("arguments") or ""))
        )
    return found


def _text_of(event: Event) -> str:
    """A user message's or tool result's text, as search indexes it (one place reads payloads)."""
    found = message_body(str(event.kind), event.payload)
    return found[1] if found is not None else ""


@dataclass
class _Collector:
    directives: list[LedgerItem] = field(default_factory=list)
    requests: list[LedgerItem] = field(default_factory=list)
    files_modified: dict[str, int] = field(default_factory=dict)
    files_read: dict[str, int] = field(default_factory=dict)
    commands: list[LedgerItem] = field(default_factory=list)
    errors: list[LedgerItem] = field(default_factory=list)
    pending: dict[str, tuple[int, str, Mapping[str, Any]]] = field(default_factory=dict)

    def add(self, event: Event) -> None:
        role = message_role(event)
        if role is Role.USER:
            text = _text_of(event).strip()
            if text:
                target = self.directives if is_directive(text) else self.requests
                target.append(LedgerItem(event.seq, text))
        elif role is Role.ASSISTANT:
            for call_id, name, raw in _calls_of(event):
                self.pending[call_id] = (event.seq, name, _arguments(raw))
        elif role is Role.TOOL:
            self._result(event)

    def _result(self, event: Event) -> None:
        call_id = str(event.payload.get("tool_call_id", ""))
        call = self.pending.pop(call_id, None)
        if call is None:
            return
        _, name, arguments = call
        failed = event.payload.get("is_error") is True
        metadata = event.payload.get("metadata")
        metadata = metadata if isinstance(metadata, Mapping) else {}
        path = _first(arguments, _PATH_KEYS)
        command = _first(arguments, _COMMAND_KEYS)
        if command is not None and _COMMAND_TOOL.search(name):
            exit_code = metadata.get("exit_code")
            outcome = f"exit {exit_code}" if isinstance(exit_code, int) else ("failed" if failed else "ok")
            self.commands.append(LedgerItem(event.seq, f"{command} → {outcome}"))
        elif path is not None and not failed:
            if _MODIFYING_TOOL.search(name):
                self.files_modified[path] = event.seq
            elif _READING_TOOL.search(name):
                self.files_read[path] = event.seq
        if failed:
            first_line = next((line for line in _text_of(event).splitlines() if line.strip()), "(no output)")
            self.errors.append(LedgerItem(event.seq, f"{name}: {first_line.strip()}"))


def extract_ledger(events: Iterable[Event], budget_chars: int, earlier: Ledger | None = None) -> Ledger:
    """The ledger of covered events (valid message events, in seq order), within a character budget.

    `earlier` is the ledger of the prefix before these events (the current checkpoint's), so a new
    checkpoint reads only the events it newly covers. Kept in this order until the budget is spent
    (SPEC K-12): user rules, then ordinary requests newest first, then modified files, commands,
    errors, files read. Long items are shortened (twice, harder the second time) before any item
    is dropped; drops are counted, never silent.
    """
    collector = _Collector()
    if earlier is not None:
        collector.directives.extend(earlier.directives)
        collector.requests.extend(reversed(earlier.requests))
        collector.files_modified.update((item.text, item.seq) for item in earlier.files_modified)
        collector.files_read.update((item.text, item.seq) for item in earlier.files_read)
        collector.commands.extend(reversed(earlier.commands))
        collector.errors.extend(reversed(earlier.errors))
    for event in events:
        collector.add(event)

    def items(mapping: Mapping[str, int]) -> list[LedgerItem]:
        return [LedgerItem(seq, path) for path, seq in sorted(mapping.items(), key=lambda kv: kv[1])]

    groups: dict[str, list[LedgerItem]] = {
        "directives": collector.directives,
        "requests": list(reversed(collector.requests)),
        "files_modified": items(collector.files_modified),
        "commands": list(reversed(collector.commands)),
        "errors": list(reversed(collector.errors)),
        "files_read": items(collector.files_read),
    }
    # Paths are names: they are never shortened. Rules are, but only as a last resort before
    # dropping anything (the summary check matches them by their words, not byte for byte).
    shortenable = {"requests", "commands", "errors", "directives"}
    for limit in (ITEM_CHARS, SHORT_ITEM_CHARS):
        if sum(len(item.text) + 12 for group in groups.values() for item in group) <= budget_chars:
            break
        for kind in shortenable:
            groups[kind] = [LedgerItem(item.seq, _shorten(item.text, limit)) for item in groups[kind]]
    kept: dict[str, list[LedgerItem]] = {kind: [] for kind in groups}
    used = dropped = 0
    for kind in ("directives", "requests", "files_modified", "commands", "errors", "files_read"):
        for item in groups[kind]:
            cost = len(item.text) + 12
            if used + cost > budget_chars:
                dropped += 1
                continue
            used += cost
            kept[kind].append(item)
    return Ledger(
        directives=tuple(kept["directives"]),
        requests=tuple(kept["requests"]),
        files_modified=tuple(kept["files_modified"]),
        files_read=tuple(kept["files_read"]),
        commands=tuple(kept["commands"]),
        errors=tuple(kept["errors"]),
        dropped=dropped + (earlier.dropped if earlier is not None else 0),
    )

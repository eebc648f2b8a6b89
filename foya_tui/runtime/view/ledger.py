"""Provides the evidence ledger: exact records extracted from covered events without a model
(SPEC K-12): the user's words, files read and modified, commands with exit codes, errors.

A summary is lossy; the ledger is not. It is kept with the checkpoint, shown to the model beside
the summary, and used to check a candidate summary: every modified path and every user directive
of the covered range must be mentioned, or the repair request lists what is missing (SPEC C-9).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from foya_tui.runtime.model import Event, EventKind, Role
from foya_tui.runtime.store.search import message_body
from foya_tui.runtime.text import content_text
from foya_tui.runtime.view.evidence import (
    COMMAND_RESULTS,
    FILES_SHOWN,
    CallEffects,
    call_effects,
    edit_block_paths,
    exit_code_in,
    observation_shape,
    parse_arguments,
    shown_files,
    text_commands,
)
from foya_tui.runtime.view.history import HISTORY_SEARCH_TOOL, message_role
from foya_tui.runtime.view.shell_effects import shell_contents, shell_effects

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
ITEM_CHARS = 600
"""A single ledger item longer than this is shortened (head … tail) before anything is dropped."""
SHORT_ITEM_CHARS = 160
"""The second, harder shortening applied when the ledger still does not fit its budget."""
ITEM_OVERHEAD_CHARS = 14
"""What one rendered item costs beyond its text (`- [seq 12345] ` and the newline)."""
LEFT_OUT_NOTE_CHARS = 100
"""What the line saying how many records of a kind were left out, and how to find them, costs."""
ACTIVE_TASK_MIN_CHARS = 80
"""The shortest form of the active task a ledger keeps, however small its budget."""
ACTIVE_REQUESTS = 3
"""The newest requests that form the active task with the anchor: shortened last among requests."""
LEDGER_WINDOW_SHARE = 0.12
"""The ledger's share of the route's context window (SPEC K-12: its budget scales with the window)."""
CHARS_PER_TOKEN = 3
"""Characters per token assumed for ledger text (paths and code tokenise densely: kept low)."""
MIN_LEDGER_CHARS = 1_200
KIND_SHARES: Mapping[str, float] = MappingProxyType(
    {
        "directives": 0.20,
        "requests": 0.20,
        "files_modified": 0.20,
        "files_read": 0.15,
        "commands": 0.15,
        "errors": 0.10,
    }
)
"""Each kind's own share of the ledger budget (SPEC K-12); what a kind leaves unused goes to the
file lists first, then to the other kinds in this order."""
KIND_TITLES: Mapping[str, str] = MappingProxyType(
    {
        "directives": "User rules (verbatim)",
        "requests": "Active task and earlier requests (verbatim, newest first)",
        "files_modified": "Files modified",
        "files_read": "Files read",
        "commands": "Commands run",
        "errors": "Errors",
    }
)
_FILE_KINDS = ("files_modified", "files_read")
_TEXT_KINDS = ("directives", "requests", "commands", "errors")


def ledger_budget_chars(window_tokens: int | None, cap_chars: int) -> int:
    """The ledger's character budget on a route with this window: a share of the window, at most
    `cap_chars` (the `ledger_chars` setting), at least MIN_LEDGER_CHARS."""
    if not window_tokens:
        return cap_chars
    return max(MIN_LEDGER_CHARS, min(cap_chars, int(window_tokens * LEDGER_WINDOW_SHARE * CHARS_PER_TOKEN)))


def is_directive(text: str) -> bool:
    """Whether a user message states a persistent rule (remember / always / never / must / …)."""
    return _DIRECTIVE.search(unicodedata.normalize("NFKC", text)) is not None


@dataclass(frozen=True)
class LedgerItem:
    """One exact record, with the seq of the event it came from. `full_chars` is the length of the
    original text when this one was shortened (0 when it is whole)."""

    seq: int
    text: str
    full_chars: int = 0

    def to_payload(self) -> list[Any]:
        return [self.seq, self.text] if not self.full_chars else [self.seq, self.text, self.full_chars]

    @classmethod
    def from_payload(cls, raw: Any) -> LedgerItem:
        if (
            not isinstance(raw, list)
            or len(raw) not in (2, 3)
            or not isinstance(raw[0], int)
            or isinstance(raw[0], bool)
            or not isinstance(raw[1], str)
            or (len(raw) == 3 and (not isinstance(raw[2], int) or isinstance(raw[2], bool) or raw[2] < 0))
        ):
            raise ValueError("a ledger item must be [seq, text] or [seq, text, original length]")
        return cls(seq=raw[0], text=raw[1], full_chars=raw[2] if len(raw) == 3 else 0)

    def shortened(self, limit: int) -> LedgerItem:
        flat = " ".join(self.text.split())
        if len(flat) <= limit:
            return self if flat == self.text else LedgerItem(self.seq, flat, self.full_chars)
        head = (limit * 2) // 3
        return LedgerItem(
            self.seq, f"{flat[:head]} … {flat[-(limit - head - 3) :]}", self.full_chars or len(self.text)
        )

    @property
    def cost(self) -> int:
        return len(self.text) + ITEM_OVERHEAD_CHARS


LEDGER_KINDS = ("directives", "requests", "files_modified", "files_read", "commands", "errors")


@dataclass(frozen=True)
class KindReport:
    """How one kind of evidence fared in a ledger: kept, of those shortened, and left out."""

    kind: str
    title: str
    kept: int
    shortened: int
    left_out: int


def _items_payload(items: Sequence[LedgerItem]) -> list[Any]:
    return [item.to_payload() for item in items]


def _items_of(raw: Any, name: str) -> tuple[LedgerItem, ...]:
    if not isinstance(raw, list):
        raise ValueError(f"ledger {name} must be a list")
    return tuple(LedgerItem.from_payload(item) for item in raw)


def _count(raw: Any, name: str) -> int:
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < 0:
        raise ValueError(f"ledger {name} must be a count")
    return raw


@dataclass(frozen=True)
class Ledger:
    """The exact evidence of a covered range, each kind within its own share (SPEC K-12).

    The file lists are complete: what did not fit the budget is in `modified_left_out` and
    `read_left_out` (not shown to the model, counted for it), so a later checkpoint and the summary
    check see every file."""

    directives: tuple[LedgerItem, ...] = ()
    """User messages that state persistent rules, verbatim, oldest first."""
    requests: tuple[LedgerItem, ...] = ()
    """The user's other messages, verbatim, newest first: the anchor and the active task first."""
    files_modified: tuple[LedgerItem, ...] = ()
    files_read: tuple[LedgerItem, ...] = ()
    commands: tuple[LedgerItem, ...] = ()
    """Commands run, each with its exit code, newest first."""
    errors: tuple[LedgerItem, ...] = ()
    """First line of each failed tool call, newest first."""
    dropped: int = 0
    """Records left out because the budget was reached, all kinds together (said so to the model)."""
    left_out: tuple[tuple[str, int], ...] = ()
    """Records of the free-text kinds left out, by kind (those with any)."""
    modified_left_out: tuple[LedgerItem, ...] = ()
    """Modified paths beyond the budget, oldest touched first (complete lists, not rendered)."""
    read_left_out: tuple[LedgerItem, ...] = ()
    budget_chars: int = 0
    """The character budget this ledger was fitted to (0 for a ledger from before budgets per kind)."""

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {kind: _items_payload(getattr(self, kind)) for kind in LEDGER_KINDS}
        payload["dropped"] = self.dropped
        # Newer keys only when set: a checkpoint id is the digest of its payload, and older
        # checkpoints must keep theirs (SPEC C-6).
        if self.left_out:
            payload["left_out"] = dict(self.left_out)
        if self.modified_left_out:
            payload["modified_left_out"] = _items_payload(self.modified_left_out)
        if self.read_left_out:
            payload["read_left_out"] = _items_payload(self.read_left_out)
        if self.budget_chars:
            payload["budget_chars"] = self.budget_chars
        return payload

    @classmethod
    def from_payload(cls, raw: Any) -> Ledger:
        if not isinstance(raw, Mapping):
            raise ValueError("the ledger must be an object")
        missing = [kind for kind in (*LEDGER_KINDS, "dropped") if kind not in raw]
        if missing:
            raise ValueError(f"the ledger lacks {', '.join(missing)}")
        values: dict[str, Any] = {kind: _items_of(raw[kind], kind) for kind in LEDGER_KINDS}
        left_out = raw.get("left_out", {})
        if not isinstance(left_out, Mapping) or any(kind not in _TEXT_KINDS for kind in left_out):
            raise ValueError("ledger left_out must count free-text kinds")
        return cls(
            **values,
            dropped=_count(raw["dropped"], "dropped"),
            left_out=tuple(
                (kind, _count(left_out[kind], "left_out")) for kind in _TEXT_KINDS if kind in left_out
            ),
            modified_left_out=_items_of(raw.get("modified_left_out", []), "modified_left_out"),
            read_left_out=_items_of(raw.get("read_left_out", []), "read_left_out"),
            budget_chars=_count(raw.get("budget_chars", 0), "budget_chars"),
        )

    @property
    def counts(self) -> dict[str, int]:
        return {kind: len(getattr(self, kind)) for kind in LEDGER_KINDS}

    def left_out_of(self, kind: str) -> int:
        if kind == "files_modified":
            return len(self.modified_left_out)
        if kind == "files_read":
            return len(self.read_left_out)
        return dict(self.left_out).get(kind, 0)

    @property
    def kinds(self) -> tuple[KindReport, ...]:
        """Each kind with its count, how many of those were shortened, and how many left out."""
        return tuple(
            KindReport(
                kind,
                KIND_TITLES[kind],
                len(getattr(self, kind)),
                sum(1 for item in getattr(self, kind) if item.full_chars),
                self.left_out_of(kind),
            )
            for kind in LEDGER_KINDS
        )

    @property
    def all_modified(self) -> tuple[LedgerItem, ...]:
        """Every modified path of the covered range, kept or left out, oldest touched first."""
        return tuple(sorted((*self.modified_left_out, *self.files_modified), key=lambda item: item.seq))

    @property
    def all_read(self) -> tuple[LedgerItem, ...]:
        return tuple(sorted((*self.read_left_out, *self.files_read), key=lambda item: item.seq))

    def render(self) -> str:
        """The ledger as the model sees it, under the checkpoint's `## Critical Context`: each kind,
        then what was left out of it and how to find it again."""
        lines: list[str] = []
        for kind in LEDGER_KINDS:
            items: tuple[LedgerItem, ...] = getattr(self, kind)
            missing = self.left_out_of(kind)
            if not items and not missing:
                continue
            lines.append(f"{KIND_TITLES[kind]}:")
            lines.extend(f"- [seq {item.seq}] {item.text}" for item in items)
            if missing:
                what = "older paths" if kind in _FILE_KINDS else "older records"
                lines.append(
                    f"- ({missing} {what} left out; {HISTORY_SEARCH_TOOL} finds them, "
                    f'e.g. {HISTORY_SEARCH_TOOL}(query="a file name"))'
                )
        unexplained = self.dropped - sum(self.left_out_of(kind) for kind in LEDGER_KINDS)
        if unexplained > 0:
            lines.append(f"({unexplained} older records left out; {HISTORY_SEARCH_TOOL} finds them)")
        return "\n".join(lines)

    def must_mention(self) -> list[tuple[str, str]]:
        """What a summary of this range must name, over the complete lists (SPEC K-12, C-9):
        ("path", p) for every modified path, ("directive", d) for every rule, and ("read", p) for
        every path read that the ledger could not show, so that each file reaches the model in the
        ledger or in the summary (a read path may be named by its file name)."""
        modified = self.all_modified
        named = frozenset(item.text for item in modified)
        return (
            [("path", item.text) for item in modified]
            + [("directive", item.text) for item in self.directives]
            + [("read", item.text) for item in self.read_left_out if item.text not in named]
        )

    def requiring(self, whole: Ledger, first_seq: int, through_seq: int) -> Ledger:
        """This ledger (of one chunk) with the paths `whole` (the checkpoint's ledger) leaves out
        that were last touched in `first_seq..through_seq`: the chunk's summary must name them, as
        no other part of the checkpoint will."""

        def extra(items: Sequence[LedgerItem], present: Sequence[LedgerItem]) -> tuple[LedgerItem, ...]:
            known = {item.text for item in present}
            return tuple(
                item for item in items if first_seq <= item.seq <= through_seq and item.text not in known
            )

        return replace(
            self,
            modified_left_out=self.modified_left_out + extra(whole.modified_left_out, self.all_modified),
            read_left_out=self.read_left_out + extra(whole.read_left_out, self.all_read),
        )


def _text_of(event: Event) -> str:
    """A user message's or tool result's text, as search indexes it (one place reads payloads)."""
    found = message_body(str(event.kind), event.payload)
    return found[1] if found is not None else ""


def _words_of(event: Event) -> str:
    """A message's own words (no tool-call arguments)."""
    own = event.kind in (EventKind.USER_MESSAGE, EventKind.ASSISTANT_MESSAGE)
    return content_text(event.payload.get("text") if own else event.payload.get("content"))


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


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line and not re.fullmatch(r"</?\w+>|<returncode>.*</returncode>", line):
            return line
    return "(no output)"


@dataclass
class _Collector:
    """Everything of a range, before budgets; file maps are path → seq last touched."""

    directives: list[LedgerItem] = field(default_factory=list)
    requests: list[LedgerItem] = field(default_factory=list)
    files_modified: dict[str, int] = field(default_factory=dict)
    files_read: dict[str, int] = field(default_factory=dict)
    commands: list[LedgerItem] = field(default_factory=list)
    errors: list[LedgerItem] = field(default_factory=list)
    left_out: dict[str, int] = field(default_factory=dict)
    pending: dict[str, tuple[str, CallEffects]] = field(default_factory=dict)
    text_actions: list[CallEffects] = field(default_factory=list)
    """Commands a text-only agent wrote, waiting for the observation that answers them."""
    contents: dict[str, str] = field(default_factory=dict)

    def resume(self, earlier: Ledger) -> None:
        self.directives.extend(earlier.directives)
        self.requests.extend(reversed(earlier.requests))
        self.files_modified.update((item.text, item.seq) for item in earlier.all_modified)
        self.files_read.update((item.text, item.seq) for item in earlier.all_read)
        self.commands.extend(reversed(earlier.commands))
        self.errors.extend(reversed(earlier.errors))
        self.left_out.update(earlier.left_out)
        # A ledger from before per-kind counts: its drops are carried as older requests.
        unexplained = earlier.dropped - sum(earlier.left_out_of(kind) for kind in LEDGER_KINDS)
        if unexplained > 0:
            self.left_out["requests"] = self.left_out.get("requests", 0) + unexplained

    def add(self, event: Event) -> None:
        role = message_role(event)
        if role is Role.USER:
            self._user(event)
        elif role is Role.ASSISTANT:
            self._assistant(event)
        elif role is Role.TOOL:
            self._result(event)

    def _touch(self, effects: CallEffects, seq: int) -> None:
        for path in effects.written:
            self.files_modified[path] = seq
            self.files_read.pop(path, None)
        for path in effects.read:
            if path not in self.files_modified:
                self.files_read[path] = seq
        self.contents.update(effects.contents or {})

    def _user(self, event: Event) -> None:
        text = _text_of(event).strip()
        if not text:
            return
        # Only the user's own words state rules (SPEC K-12); an imported user-role message may
        # be an agent's observation (text-only agents), which is tool output.
        shape = observation_shape(text) if event.kind is EventKind.IMPORTED_MESSAGE else None
        if shape is None:
            self.text_actions.clear()  # commands nothing answered did not run
            target = self.directives if is_directive(text) else self.requests
            target.append(LedgerItem(event.seq, text))
            return
        code = exit_code_in(text) if shape in COMMAND_RESULTS else None
        for action in self.text_actions if shape in COMMAND_RESULTS else ():
            self._command(action.command or "", code, False, event.seq)
            self._touch(action, event.seq)
        self.text_actions.clear()
        if shape == FILES_SHOWN:
            self._touch(CallEffects(read=shown_files(text)), event.seq)
        if code not in (None, 0):
            self.errors.append(LedgerItem(event.seq, f"command: {_first_line(text)}"))

    def _assistant(self, event: Event) -> None:
        calls = _calls_of(event)
        for call_id, name, raw in calls:
            self.pending[call_id] = (name, call_effects(name, parse_arguments(raw), self.contents.get))
        words = _words_of(event)
        if not words:
            return
        edited = edit_block_paths(words)
        if edited:
            self._touch(CallEffects(written=edited), event.seq)
        if not calls:
            self.text_actions = [
                CallEffects(effects.written, effects.read, command, shell_contents(command) or None)
                for command in text_commands(words)
                for effects in (shell_effects(command, self.contents.get),)
            ]

    def _command(self, command: str, exit_code: int | None, failed: bool, seq: int) -> None:
        outcome = f"exit {exit_code}" if exit_code is not None else ("failed" if failed else "ok")
        self.commands.append(LedgerItem(seq, f"{command} → {outcome}"))

    def _result(self, event: Event) -> None:
        call_id = str(event.payload.get("tool_call_id", ""))
        call = self.pending.pop(call_id, None)
        if call is None:
            return
        name, effects = call
        metadata = event.payload.get("metadata")
        metadata = metadata if isinstance(metadata, Mapping) else {}
        recorded = metadata.get("exit_code")
        text = _text_of(event)
        exit_code = recorded if isinstance(recorded, int) and not isinstance(recorded, bool) else None
        if exit_code is None and effects.command is not None:
            exit_code = exit_code_in(text)
        failed = event.payload.get("is_error") is True or exit_code not in (None, 0)
        if effects.command is not None:
            self._command(effects.command, exit_code, failed, event.seq)
        if not failed or effects.command is not None:
            # A failed shell command may still have written (`sed -i … && false`); a failed edit did not.
            self._touch(effects, event.seq)
        if failed:
            self.errors.append(LedgerItem(event.seq, f"{name}: {_first_line(text)}"))


def _fit(groups: dict[str, list[LedgerItem]], budget_chars: int) -> dict[str, int]:
    """Shorten and cut `groups` (in place) to `budget_chars`; returns what each kind left out.

    The order (SPEC K-12): free text is shortened first (every long item, then older requests,
    commands and errors harder); then each kind keeps its own share, what a kind leaves unused goes
    to the file lists first; within a kind the newest records are kept. Paths are never shortened.
    """

    # The titles of the kinds shown are part of the budget, and so is the note a cut kind gets.
    budget_chars -= sum(len(KIND_TITLES[kind]) + 2 for kind in LEDGER_KINDS if groups[kind])

    def total() -> int:
        return sum(item.cost for group in groups.values() for item in group)

    for kind in _TEXT_KINDS:
        groups[kind] = [item.shortened(ITEM_CHARS) for item in groups[kind]]
    if total() <= budget_chars:
        return {}
    groups["requests"] = groups["requests"][:ACTIVE_REQUESTS] + [
        item.shortened(SHORT_ITEM_CHARS) for item in groups["requests"][ACTIVE_REQUESTS:]
    ]
    for kind in ("commands", "errors"):
        groups[kind] = [item.shortened(SHORT_ITEM_CHARS) for item in groups[kind]]
    if total() <= budget_chars:
        return {}
    need = {kind: sum(item.cost for item in groups[kind]) for kind in LEDGER_KINDS}
    allowed = {kind: min(need[kind], int(budget_chars * KIND_SHARES[kind])) for kind in LEDGER_KINDS}
    spare = budget_chars - sum(allowed.values())
    for kind in (*_FILE_KINDS, "directives", "requests", "commands", "errors"):
        extra = min(spare, need[kind] - allowed[kind])
        allowed[kind] += extra
        spare -= extra
    left_out: dict[str, int] = {}
    for kind in LEDGER_KINDS:
        if need[kind] <= allowed[kind]:
            continue
        allowed[kind] -= LEFT_OUT_NOTE_CHARS
        if kind == "requests":
            # Older requests go before the active task is shortened hard (it stays whole if it fits).
            active = groups[kind][:ACTIVE_REQUESTS]
            if sum(item.cost for item in active) > allowed[kind]:
                groups[kind] = [item.shortened(SHORT_ITEM_CHARS) for item in groups[kind]]
        elif kind in _TEXT_KINDS:  # every rule is shortened hard before any rule is left out
            groups[kind] = [item.shortened(SHORT_ITEM_CHARS) for item in groups[kind]]
            if sum(item.cost for item in groups[kind]) <= allowed[kind]:
                continue
        # newest first: file lists by when they were last touched, the rest by seq
        newest_first = sorted(groups[kind], key=lambda item: -item.seq)
        kept: list[LedgerItem] = []
        used = 0
        for item in newest_first:
            if used + item.cost > allowed[kind]:
                break
            kept.append(item)
            used += item.cost
        if kind == "requests" and not kept and newest_first:
            # The active task is never left out (SPEC K-12): in a ledger too small for one request
            # as it is, the newest stays, cut to the room there is (at least a recognisable line).
            room = max(ACTIVE_TASK_MIN_CHARS, allowed[kind] - ITEM_OVERHEAD_CHARS)
            kept = [newest_first[0].shortened(room)]
            groups[kind] = [kept[0] if item is newest_first[0] else item for item in groups[kind]]
        kept_seqs = {id(item) for item in kept}
        left_out[kind] = len(groups[kind]) - len(kept)
        groups[kind] = [item for item in groups[kind] if id(item) in kept_seqs]
    return left_out


def extract_ledger(events: Iterable[Event], budget_chars: int, earlier: Ledger | None = None) -> Ledger:
    """The ledger of covered events (valid message events, in seq order), within a character budget.

    `earlier` is the ledger of the prefix before these events (the current checkpoint's), so a new
    checkpoint reads only the events it newly covers: the work is proportional to them and to the
    earlier ledger's size, never to the whole history. Each kind keeps its share (`_fit`); what is
    left out is counted per kind, and left-out paths stay in the complete file lists.
    """
    collector = _Collector()
    if earlier is not None:
        collector.resume(earlier)
    for event in events:
        collector.add(event)

    def by_touch(mapping: Mapping[str, int]) -> list[LedgerItem]:
        return [LedgerItem(seq, path) for path, seq in sorted(mapping.items(), key=lambda kv: kv[1])]

    groups: dict[str, list[LedgerItem]] = {
        "directives": collector.directives,
        "requests": list(reversed(collector.requests)),
        "files_modified": by_touch(collector.files_modified),
        "files_read": by_touch(collector.files_read),
        "commands": list(reversed(collector.commands)),
        "errors": list(reversed(collector.errors)),
    }
    complete_modified, complete_read = list(groups["files_modified"]), list(groups["files_read"])
    cut = _fit(groups, budget_chars)
    left_out = {kind: collector.left_out.get(kind, 0) + cut.get(kind, 0) for kind in _TEXT_KINDS}
    kept_modified = {item.text for item in groups["files_modified"]}
    kept_read = {item.text for item in groups["files_read"]}
    modified_left_out = tuple(item for item in complete_modified if item.text not in kept_modified)
    read_left_out = tuple(item for item in complete_read if item.text not in kept_read)
    return Ledger(
        directives=tuple(groups["directives"]),
        requests=tuple(groups["requests"]),
        files_modified=tuple(groups["files_modified"]),
        files_read=tuple(groups["files_read"]),
        commands=tuple(groups["commands"]),
        errors=tuple(groups["errors"]),
        dropped=sum(left_out.values()) + len(modified_left_out) + len(read_left_out),
        left_out=tuple((kind, count) for kind, count in left_out.items() if count),
        modified_left_out=modified_left_out,
        read_left_out=read_left_out,
        budget_chars=budget_chars,
    )

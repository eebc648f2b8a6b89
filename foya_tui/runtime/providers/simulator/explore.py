"""Provides the simulator's "explore N steps" behaviour and its execution frontier.

"explore N steps" stands for a long agent turn: many small read-only steps whose results pile up
in the context, so that the budget, handoff and mid-turn compaction all get exercised. The
simulator makes one read-only tool call per step (call ids `sim_explore_1`, `sim_explore_2`, …),
then a text report. Every step is a pure function of its number, so a run repeats exactly. It
keeps no state: each request continues from the highest step id it can see, so a compaction that
summarises earlier steps away does not restart the work.

The hidden handoff reminder (SPEC K-1) and a checkpoint's message are never taken for the user's
request; a reply to the reminder, exploring or not, starts with the execution frontier.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foya_tui.runtime.model import ToolCall
from foya_tui.runtime.providers.simulator.messages import (
    quote,
    request_index,
    request_text,
    turn_messages,
    workdir_of,
)
from foya_tui.runtime.providers.simulator.reply import context_note

EXPLORE_CALL_PREFIX = "sim_explore_"
EXPLORE_MAX_STEPS = 10_000
EXPLORE_MAX_FILES = 2_000
EXPLORE_GREP_PATTERN = "TODO|FIXME"

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
class Exploration:
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
        parts.append(context_note(prompt_tokens, window))
        return "\n\n".join(parts)


def exploration_of(
    messages: Sequence[Mapping[str, Any]], available: frozenset[str], workdir: Path | None = None
) -> Exploration | None:
    """The exploration the user's request asks for, with its next step; None when it asks none."""
    match = _EXPLORE.search(request_text(messages))
    if match is None or not available & {"read_file", "list_dir", "grep"}:
        return None
    total = min(int(match.group(1)), EXPLORE_MAX_STEPS)
    done = explored_steps(messages)
    files = _explore_files(workdir_of(messages, workdir)) if "read_file" in available else ()
    return Exploration(total=total, done=done, files=files, available=available)


def _times(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _call_label(call: ToolCall) -> str:
    return f"`{call.name}` {quote(call.arguments, 80)}"


def frontier(
    messages: Sequence[Mapping[str, Any]], exploration: Exploration | None, calls: Sequence[ToolCall]
) -> str:
    """The answer to the hidden reminder (SPEC K-1): where the work stands, from what is visible."""
    turn = turn_messages(messages)
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
        f"Execution frontier: goal “{quote(request_text(messages))}”; done {done}; "
        f"in flight {', '.join(in_flight) or 'nothing'}; next {next_step}."
    )

"""Provides the tool registry: specs, visibility (SPEC X-9), argument checks and safe dispatch.

`ToolRegistry.call` is the one way a model's tool call is executed. It never raises: an unknown
tool, unreadable or ill-typed arguments and a crashing tool all become an error `ToolResult`
whose text is one sentence the model can act on.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Final, Protocol

from foya_tui.runtime.providers.client import CancelToken
from foya_tui.runtime.providers.wire import escape_undecodable
from foya_tui.runtime.store.events import EventStore
from foya_tui.runtime.view.history import HISTORY_READ_TOOL as HISTORY_READ_TOOL  # re-exported
from foya_tui.runtime.view.history import HISTORY_SEARCH_TOOL as HISTORY_SEARCH_TOOL  # re-exported

TOOL_SEARCH: Final = "tool_search"
"""Name of the large-result reader (SPEC T-2): shown only when the compiler asks (X-9)."""
HISTORY_EVENT_TOOL: Final = "history_read"
RECALL_TOOLS: Final = frozenset({HISTORY_SEARCH_TOOL, HISTORY_EVENT_TOOL})
"""Search and read of canonical history: shown once a checkpoint covers part of it."""


class Visibility(StrEnum):
    """Whether a tool's schema is sent to the model (SPEC X-9)."""

    DIRECT = "direct"
    """Always sent."""
    DEFERRED = "deferred"
    """Sent from the step after `tool_search` found it, for the current turn only."""
    HIDDEN = "hidden"
    """Never sent; callable by the runtime only."""


class Effect(StrEnum):
    """What running a tool can change: drives approval and the snip order (SPEC K-4)."""

    READ_ONLY = "read_only"
    WRITE = "write"
    SHELL = "shell"


@dataclass(frozen=True)
class ToolSpec:
    """A tool's model-facing definition; `parameters` is a JSON schema of type object."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    visibility: Visibility = Visibility.DIRECT
    effect: Effect = Effect.READ_ONLY
    brief: str = ""
    """The description sent on a small window (`context/floor.py`): one short sentence. Empty:
    the first sentence of `description`."""

    def schema(self, *, brief: bool = False) -> dict[str, Any]:
        """The OpenAI `tools` entry for this tool; `brief`, the small window's form: the brief
        description, and the parameters without their descriptions (types, enums and what is
        required stay: they are what a call is checked against)."""
        description, parameters = self.description, dict(self.parameters)
        if brief:
            description = self.brief_description
            properties = parameters.get("properties")
            if isinstance(properties, Mapping):
                parameters["properties"] = {
                    name: {key: value for key, value in schema.items() if key != "description"}
                    if isinstance(schema, Mapping)
                    else schema
                    for name, schema in properties.items()
                }
        return {
            "type": "function",
            "function": {"name": self.name, "description": description, "parameters": parameters},
        }

    @property
    def brief_description(self) -> str:
        if self.brief:
            return self.brief
        first, dot, _ = self.description.partition(". ")
        return first + dot.strip()


@dataclass(frozen=True)
class ToolContext:
    """Where and for whom a tool runs: the workspace it is confined to, the session, cancellation."""

    workdir: Path
    session_id: str
    store: EventStore | None
    cancel: CancelToken = field(default_factory=CancelToken)
    timeout: float = 30.0
    """Default shell timeout in seconds."""
    shell_network: bool = False
    """Whether a sandboxed shell keeps the network (`[tools] shell_network`)."""
    covered: tuple[int, int] | None = None
    """The seq range the current checkpoint summarises (recall tools search it by default)."""


@dataclass(frozen=True)
class ToolResult:
    """What a tool returns; errors are results too, so the model can read and react to them."""

    content: str
    is_error: bool = False
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """E.g. exit_code, duration (seconds), truncated, activated (tool_search)."""


class Tool(Protocol):
    spec: ToolSpec

    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult: ...


def error(message: str, **metadata: Any) -> ToolResult:
    return ToolResult(content=message, is_error=True, metadata=metadata)


# -- argument checks ------------------------------------------------------------------------------

_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "array": "an array",
    "object": "an object",
}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _matches(value: Any, expected: str) -> bool:
    actual = _json_type(value)
    # JSON has one number type: an integer is a valid "number" (bool is not, despite Python).
    return actual == expected or (expected == "number" and actual == "integer")


def parse_arguments(spec: ToolSpec, raw_arguments: str) -> dict[str, Any] | str:
    """The call's arguments as a dict, or one sentence saying what is wrong with them.

    Checks what models actually get wrong: JSON syntax, the top-level shape, `required`, and the
    basic `type` of top-level properties. An optional argument sent as null counts as absent.
    """
    name = spec.name
    text = raw_arguments.strip() if isinstance(raw_arguments, str) else ""
    if not text:
        # Models send "" for calls without arguments; that means {}.
        text = "{}"
    try:
        arguments = json.loads(text)
    except ValueError as exc:
        reason = f"{exc.msg} at char {exc.pos}" if isinstance(exc, json.JSONDecodeError) else str(exc)
        return f"arguments for {name} are not valid JSON: {reason}"
    if not isinstance(arguments, dict):
        return f"arguments for {name} must be a JSON object, got {_json_type(arguments)}"
    properties = spec.parameters.get("properties") or {}
    required = [key for key in spec.parameters.get("required") or () if isinstance(key, str)]
    arguments = {key: value for key, value in arguments.items() if value is not None or key in required}
    problems = [f"missing required argument '{key}'" for key in required if key not in arguments]
    for key, value in arguments.items():
        expected = properties.get(key, {}).get("type") if isinstance(properties.get(key), Mapping) else None
        if isinstance(expected, str) and expected in _TYPE_NAMES and not _matches(value, expected):
            problems.append(f"argument '{key}' must be {_TYPE_NAMES[expected]}, got {_json_type(value)}")
    if problems:
        return f"bad arguments for {name}: " + "; ".join(problems)
    return arguments


# -- tool_search ----------------------------------------------------------------------------------


class ToolSearch:
    """`tool_search` (SPEC X-9): finds deferred tools by name and description.

    It does not change the registry: the caller reads `metadata["activated"]` and shows those
    tools from the next step, for the current turn only.
    """

    def __init__(self, registry: ToolRegistry) -> None:
        self._registry = registry
        self.spec = ToolSpec(
            name=TOOL_SEARCH,
            description=(
                "Search the tools that are available but not loaded yet, by words in their name or "
                "description (case-insensitive; every word must match; an empty query lists them all). "
                "Matching tools become callable from your next step."
            ),
            brief=(
                "Load tools not shown yet by words in their name or description (history_search and "
                "history_read search and read the whole session history); callable from your next step."
            ),
            parameters={
                "type": "object",
                "properties": {"query": {"type": "string", "description": "Words to look for."}},
                "required": ["query"],
            },
        )

    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        query = str(arguments.get("query") or "")
        words = query.lower().split()
        # The recall tools too: a small window defers them until they are looked for.
        deferred = [
            spec
            for spec in self._registry.specs()
            if spec.visibility is Visibility.DEFERRED
            or (spec.name in RECALL_TOOLS and spec.visibility is not Visibility.HIDDEN)
        ]
        found = [
            spec
            for spec in deferred
            if all(word in f"{spec.name} {spec.description}".lower() for word in words)
        ]
        if not found:
            names = ", ".join(spec.name for spec in deferred) or "none"
            return ToolResult(
                content=f"no deferred tool matches {query!r}; deferred tools: {names}",
                metadata={"activated": []},
            )
        lines = [f"{len(found)} tool(s) found; callable from your next step:"]
        lines.extend(f"- {spec.name}: {spec.description}" for spec in found)
        return ToolResult(content="\n".join(lines), metadata={"activated": [spec.name for spec in found]})


# -- the registry ---------------------------------------------------------------------------------


class ToolRegistry:
    """The tools a session can call, in registration order (which keeps schemas cache-stable)."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._search = ToolSearch(self)
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        name = tool.spec.name
        if name in self._tools or name == TOOL_SEARCH:
            raise ValueError(f"a tool named {name!r} is already registered")
        self._tools[name] = tool

    def _has_deferred(self) -> bool:
        return any(tool.spec.visibility is Visibility.DEFERRED for tool in self._tools.values())

    def get(self, name: str) -> Tool | None:
        if name == TOOL_SEARCH:
            return self._search
        return self._tools.get(name)

    def specs(self) -> list[ToolSpec]:
        """Every registered tool's spec, then `tool_search` when a deferred tool exists."""
        specs = [tool.spec for tool in self._tools.values()]
        if self._has_deferred():
            specs.append(self._search.spec)
        return specs

    def visible_schemas(
        self,
        activated: Collection[str] = (),
        *,
        include_history_read: bool = False,
        include_recall: bool = False,
        include_event_reader: bool = False,
        brief: bool = False,
    ) -> list[dict[str, Any]]:
        """Schemas to send for one step (SPEC X-9).

        Direct tools, deferred tools named in `activated` (found by `tool_search` this turn), and
        `tool_search` itself when any deferred tool exists; hidden tools never. The large-result
        reader is sent only with `include_history_read` (the projection holds a shortened result),
        the recall tools only with `include_recall` (a checkpoint summarises part of history),
        `history_read` also with `include_event_reader` (a message is shown cut around a pointer to
        it, SPEC T-4). `brief` is a small window's form (`context/floor.py`): short descriptions,
        and the recall tools deferred like any deferred tool, `tool_search` saying that it loads
        them; a tool a pointer in the projection names is never deferred.
        """
        schemas = []
        recall_waiting = False
        for tool in self._tools.values():
            spec = tool.spec
            if spec.name == HISTORY_READ_TOOL:
                shown = include_history_read and spec.visibility is not Visibility.HIDDEN
            elif spec.name in RECALL_TOOLS:
                pointed = include_event_reader and spec.name == HISTORY_EVENT_TOOL
                shown = (include_recall or pointed) and spec.visibility is not Visibility.HIDDEN
                if shown and brief and not pointed and spec.name not in activated:
                    shown, recall_waiting = False, True
            elif spec.visibility is Visibility.DIRECT:
                shown = True
            else:
                shown = spec.visibility is Visibility.DEFERRED and spec.name in activated
            if shown:
                schemas.append(spec.schema(brief=brief))
        if self._has_deferred() or recall_waiting:
            schemas.append(self._search.spec.schema(brief=brief))
        return schemas

    def _callable_names(self) -> list[str]:
        """Names worth suggesting: not hidden, and not the reader, which needs a reference."""
        return [
            spec.name
            for spec in self.specs()
            if spec.visibility is not Visibility.HIDDEN and spec.name != HISTORY_READ_TOOL
        ]

    def call(self, name: str, raw_arguments: str, context: ToolContext) -> ToolResult:
        """Run one tool call; every failure becomes an error result, with `duration` measured."""
        start = time.perf_counter()
        result = self._call(name, raw_arguments, context)
        duration = time.perf_counter() - start
        # A file name that is not UTF-8 reaches here as lone surrogates, which no provider accepts
        # and every later request would repeat: stored and sent as visible escapes (`\xe9`).
        metadata = {**result.metadata, "duration": duration}
        return dataclasses.replace(result, content=escape_undecodable(result.content), metadata=metadata)

    def _call(self, name: str, raw_arguments: str, context: ToolContext) -> ToolResult:
        tool = self.get(name)
        if tool is None:
            available = ", ".join(self._callable_names()) or "none"
            return error(f"unknown tool {name!r}; available: {available}")
        arguments = parse_arguments(tool.spec, raw_arguments)
        if isinstance(arguments, str):
            return error(arguments)
        try:
            result = tool.run(arguments, context)
        except Exception as exc:  # a tool bug must not end the turn: the model sees what failed
            return error(f"tool {name} failed: {type(exc).__name__}: {exc}")
        if not isinstance(result, ToolResult):
            return error(f"tool {name} failed: it returned {type(result).__name__}, not a result")
        return result

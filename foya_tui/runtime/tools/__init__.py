"""Provides the tools a model can call: the registry (SPEC X-9), the built-ins, and the
large-result reader `history_read_tool_result` (SPEC T-2, T-3)."""

from foya_tui.runtime.tools.builtin import builtin_tools
from foya_tui.runtime.tools.history_read import HistoryReadTool
from foya_tui.runtime.tools.recall import HistoryEventTool, HistorySearchTool
from foya_tui.runtime.tools.registry import (
    HISTORY_READ_TOOL,
    TOOL_SEARCH,
    Effect,
    Tool,
    ToolContext,
    ToolRegistry,
    ToolResult,
    ToolSpec,
    Visibility,
)


def default_registry() -> ToolRegistry:
    """The built-in tools plus the large-result reader and the recall tools (shown only when the
    projection needs them, SPEC X-9). Here, above the registry, because the tool modules import
    the registry for its spec and result types."""
    return ToolRegistry([*builtin_tools(), HistoryReadTool(), HistorySearchTool(), HistoryEventTool()])


__all__ = [
    "HISTORY_READ_TOOL",
    "TOOL_SEARCH",
    "Effect",
    "HistoryReadTool",
    "Tool",
    "ToolContext",
    "ToolRegistry",
    "ToolResult",
    "ToolSpec",
    "Visibility",
    "builtin_tools",
    "default_registry",
]

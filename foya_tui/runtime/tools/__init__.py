"""Provides the tools a model can call: the registry (SPEC X-9), the built-ins, and the
large-result reader `history_read_tool_result` (SPEC T-2, T-3)."""

from foya_tui.runtime.tools.builtin import builtin_tools
from foya_tui.runtime.tools.history_read import HistoryReadTool
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
    default_registry,
)

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

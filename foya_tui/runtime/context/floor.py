"""Provides the fixed floor's shares of a small window (issue 17 item 5): how much of a route's
window the tool schemas, the recent tool turns and a checkpoint's summary may take.

The floor is what every request carries whatever the conversation: the system prompt, the tool
schemas and the checkpoint. On a 128K window it is a few percent. On an 8K window, full tool
schemas (about 1.5K tokens once the recall tools join), three recent tool turns kept whole and a
1.5K-token checkpoint left room for one file read: a long exploration compacted after nearly every
step. Each rule here shrinks a small window and leaves a large one as it was, but for one case:
recent tool turns whose results together take more than a quarter of the input budget, on any
window, leave the oldest of them to snip under pressure.
"""

from __future__ import annotations

from collections.abc import Iterable

TOOL_SCHEMA_SHARE = 0.10
"""Tool schemas in full may take this share of the window. Beyond it they are sent brief (short
descriptions, parameters without descriptions) and the recall tools wait until `tool_search`
loads them (SPEC X-9's deferred visibility)."""
RECENT_TOOL_SHARE = 0.25
"""The recent tool turns, which micro-compaction and snip never touch (SPEC K-3, K-4), hold at
most this share of the input budget: the newest turn always, older ones while they fit."""
SUMMARY_WINDOW_SHARE = 0.06
"""The length a summary is asked for, as a share of the window (SPEC C-12 judges the result)."""
MIN_SUMMARY_TOKENS = 300
"""A summary is never asked to be shorter than this: five sections need room to be specific."""


def brief_tool_schemas(full_tokens: int, window: int | None) -> bool:
    """Whether a route's window is too small for the full tool schemas, which count `full_tokens`.
    An unknown window keeps them full: nothing says they do not fit."""
    return window is not None and full_tokens > window * TOOL_SCHEMA_SHARE


def recent_tool_turns(newest_first: Iterable[int], input_budget: int, most: int) -> int:
    """How many of the newest complete tool turns count as recent, given what each one's results
    take in the request now (`newest_first`, in tokens): at most `most` (the `recent_tool_turns`
    setting), at least one, and older turns only while all of them fit RECENT_TOOL_SHARE of the
    input budget."""
    room = input_budget * RECENT_TOOL_SHARE
    count = 0
    used = 0
    for tokens in newest_first:
        if count >= most or (count and used + tokens > room):
            break
        count += 1
        used += tokens
    return count


def summary_target_tokens(window: int | None, most: int) -> int:
    """The length a summary request asks for on a route with this window: SUMMARY_WINDOW_SHARE of
    it, between MIN_SUMMARY_TOKENS and `most` (the `summary_max_tokens` setting)."""
    if window is None:
        return most
    return max(min(MIN_SUMMARY_TOKENS, most), min(most, int(window * SUMMARY_WINDOW_SHARE)))

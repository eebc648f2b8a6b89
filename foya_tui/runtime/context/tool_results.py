"""Provides the shortening of large tool results in the model's view (SPEC T-1).

A single tool result can be larger than whole conversations, and history compaction cannot help
while it sits in the working set. Under pressure the model sees a shortened form: head and tail,
with the event seq, tool call id and SHA-256 of the full text and a pointer to
`history_read_tool_result`, which reads the rest from canonical history (SPEC T-2, T-3). The
event itself is never changed (SPEC H-2).
"""

from __future__ import annotations

from collections.abc import Sequence

from foya_tui.runtime.digests import sha256_hex
from foya_tui.runtime.view.history import HISTORY_READ_TOOL
from foya_tui.settings import ToolSettings


def shortened_count(savings: Sequence[int], total: int, limit: int, first: int = 0) -> int:
    """How many large results (oldest first) to shorten so `total` falls under `limit` (SPEC T-1).

    First every earlier one, the newest kept verbatim; only if that is not enough, the newest too.
    Nothing is shortened while the request is under the limit. `savings[k]` is what shortening
    the first k of the session's large results saves (`savings[0] == 0`), so this is O(1)
    however many large results a session holds. Results before `first` are not in the request
    (a checkpoint covers them): they are neither counted nor kept verbatim.
    """
    large = len(savings) - 1
    if total < limit or large <= first:
        return 0
    earlier = large - 1
    return earlier if earlier > first and total - (savings[earlier] - savings[first]) < limit else large


def shortened_text(content: str, seq: int, tool_call_id: str, tokens: int, policy: ToolSettings) -> str:
    """The model-visible form of a large result: head, a pointer to the full text, tail."""
    if len(content) <= policy.head_chars + policy.tail_chars:
        return content
    head = content[: policy.head_chars]
    tail = content[-policy.tail_chars :] if policy.tail_chars else ""
    hidden = len(content) - len(head) - len(tail)
    note = (
        f"\n[… Foya shortened this tool result for the model: {len(content):,} characters "
        f"(~{tokens:,} tokens) in all, {hidden:,} hidden here. The full text is in the session "
        f'history: call {HISTORY_READ_TOOL} with seq={seq}, tool_call_id="{tool_call_id}", '
        f'sha256="{sha256_hex(content)}" (op "read" pages by character offset from {len(head):,}; '
        'op "search" finds lines; op "inspect" summarises) …]\n'
    )
    return f"{head}{note}{tail}"

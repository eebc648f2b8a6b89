"""Provides the shortening of large messages in the model's view (SPEC T-1, T-4).

A single tool result can be larger than whole conversations, and history compaction cannot help
while it sits in the working set. Under pressure the model sees a shortened form: head and tail,
with the event seq, tool call id and SHA-256 of the full text and a pointer to
`history_read_tool_result`, which reads the rest from canonical history (SPEC T-2, T-3). The
event itself is never changed (SPEC H-2).

Two sizes exist. The fixed form (`[tools] head_chars` + `tail_chars`) is what earlier results
shrink to first (T-1). When the request is still over the compaction line, the elastic step (T-4)
shares the room that is left among the working set's oversized results (`elastic_targets`): the
newest keeps the most, none goes below a floor that still carries head, tail and the pointer. A
non-tool message that alone takes more than half the input budget (an oversized anchor, an
imported observation) is shown the same way, with a pointer to `history_read`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from foya_tui.runtime.digests import sha256_hex
from foya_tui.runtime.tokens import TokenCounter, stored_count_key
from foya_tui.runtime.tools.registry import HISTORY_EVENT_TOOL
from foya_tui.runtime.view.history import HISTORY_READ_TOOL
from foya_tui.settings import ToolSettings

FLOOR_HEAD_CHARS = 400
"""Characters of the start that even the smallest elastic form keeps (SPEC T-4's floor)."""
FLOOR_TAIL_CHARS = 200
NOTE_TOKENS = 120
"""What the pointer note costs, conservatively: seq, call id, SHA-256 and the read instructions."""
NEWEST_WEIGHT = 2.0
"""The newest oversized result's share of the room, against 1.0 for the oldest (linear between)."""
HEAD_SHARE = 2 / 3
"""Of the characters a shortened form keeps, the share taken from the start (3,000 : 1,500)."""
OVERSIZED_MESSAGE_SHARE = 0.5
"""A non-tool message above this share of the input budget can never be sent verbatim (T-4)."""
OVERSIZED_MESSAGE_TARGET = 0.25
"""The share of the input budget such a message is shortened to: still the largest single part."""


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


SHORTENED_FORM_VERSION = 1
"""Bumped when `cut_text` changes what a shortened form says: counts persisted for an older form
are then not reused (`shortened_count_key`)."""


def shortened_count_key(counter: TokenCounter, policy: ToolSettings) -> str:
    """The name the token count of a large result's fixed shortened form (T-1) is persisted under:
    the tokenizer's own key, the form's version and its sizes. Counting that form was what a new
    process still tokenized of history (1.4 s of 4.2 at 100,000 events, tests/bench/bench_scale.py)."""
    return (
        f"{stored_count_key(counter)}/shortened-{SHORTENED_FORM_VERSION}"
        f"-{policy.head_chars}-{policy.tail_chars}"
    )


def shortened_key_sizes(key: str) -> tuple[str, int, int] | None:
    """(the tokenizer's own key, head_chars, tail_chars) of a `shortened_count_key`, or None for
    any other key (a full count, or an older form)."""
    base, _, form = key.rpartition("/")
    name, _, sizes = form.partition("-")
    version, _, rest = sizes.partition("-")
    head, _, tail = rest.partition("-")
    if (
        name != "shortened"
        or version != str(SHORTENED_FORM_VERSION)
        or not (head.isdigit() and tail.isdigit())
    ):
        return None
    return base, int(head), int(tail)


def shortened_text(content: str, seq: int, tool_call_id: str, tokens: int, policy: ToolSettings) -> str:
    """The fixed model-visible form of a large result: head, a pointer to the full text, tail."""
    return cut_text(content, seq, tool_call_id, tokens, policy.head_chars, policy.tail_chars)


def cut_text(content: str, seq: int, tool_call_id: str, tokens: int, head_chars: int, tail_chars: int) -> str:
    """A tool result cut to `head_chars` + `tail_chars` around a pointer to the full text."""
    if len(content) <= head_chars + tail_chars:
        return content
    head = content[:head_chars]
    tail = content[-tail_chars:] if tail_chars else ""
    hidden = len(content) - len(head) - len(tail)
    note = (
        f"\n[… Foya shortened this tool result for the model: {len(content):,} characters "
        f"(~{tokens:,} tokens) in all, {hidden:,} hidden here. The full text is in the session "
        f'history: call {HISTORY_READ_TOOL} with seq={seq}, tool_call_id="{tool_call_id}", '
        f'sha256="{sha256_hex(content)}" (op "read" pages by character offset from {len(head):,}; '
        'op "search" finds lines; op "inspect" summarises) …]\n'
    )
    return f"{head}{note}{tail}"


def cut_message_text(content: str, seq: int, role: str, tokens: int, keep_chars: int) -> str:
    """A non-tool message too large to ever fit, cut to about `keep_chars` around a pointer to
    `history_read` (SPEC T-4: C-1's "verbatim" yields only here; history keeps every word)."""
    head_chars, tail_chars = split_chars(keep_chars)
    if len(content) <= head_chars + tail_chars:
        return content
    head = content[:head_chars]
    tail = content[-tail_chars:]
    hidden = len(content) - len(head) - len(tail)
    note = (
        f"\n[… Foya shortened this {role} message for the model because it alone is larger than half "
        f"of the input budget: {len(content):,} characters (~{tokens:,} tokens) in all, {hidden:,} "
        f"hidden here. The whole message is in the session history, unchanged: call "
        f'{HISTORY_EVENT_TOOL} with seq={seq} (sha256="{sha256_hex(content)}"), paging by '
        f"character offset from {len(head):,} …]\n"
    )
    return f"{head}{note}{tail}"


def split_chars(keep_chars: int) -> tuple[int, int]:
    """Head and tail characters of a shortened form keeping `keep_chars`, never below the floor."""
    head = max(FLOOR_HEAD_CHARS, int(keep_chars * HEAD_SHARE))
    return head, max(FLOOR_TAIL_CHARS, keep_chars - head)


def chars_for(target_tokens: int, content_chars: int, content_tokens: int) -> int:
    """Characters of content that take about `target_tokens` once the pointer note is paid for,
    at this content's own characters-per-token ratio."""
    room = max(0, target_tokens - NOTE_TOKENS)
    return room * content_chars // max(1, content_tokens)


@dataclass(frozen=True)
class ElasticShare:
    """One oversized result's part in the elastic step: its size now and the least it may take."""

    full_tokens: int
    floor_tokens: int


def elastic_targets(shares: Sequence[ElasticShare], room: int) -> tuple[int, ...]:
    """Tokens each oversized result (oldest first) may take so that together they fit `room`
    (SPEC T-4): a water level shared fairly, weighted from 1 (oldest) to NEWEST_WEIGHT (newest),
    no result above its full size, none below its floor. When even the floors do not fit, the
    floors: no fitting form exists, and the provider is the final judge (001)."""
    count = len(shares)
    if count == 0:
        return ()
    if sum(share.full_tokens for share in shares) <= room:
        return tuple(share.full_tokens for share in shares)
    weights = [1.0 + (NEWEST_WEIGHT - 1.0) * (i / (count - 1) if count > 1 else 1.0) for i in range(count)]

    def sizes(level: float) -> list[int]:
        return [
            min(share.full_tokens, max(share.floor_tokens, int(level * weight)))
            for share, weight in zip(shares, weights, strict=True)
        ]

    if sum(share.floor_tokens for share in shares) >= room:
        return tuple(share.floor_tokens for share in shares)
    low, high = 0.0, float(max(share.full_tokens for share in shares))
    while high - low > 0.5:  # bisection on the level, to half a token
        middle = (low + high) / 2
        if sum(sizes(middle)) <= room:
            low = middle
        else:
            high = middle
    return tuple(sizes(low))

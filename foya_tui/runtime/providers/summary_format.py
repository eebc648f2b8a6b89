"""Provides the wire format of a compaction request: how Foya asks a model for a checkpoint summary
and what the answer must look like (SPEC C-8, K-13).

It sits beside the providers because two sides speak it: `runtime/compaction/summary.py` builds
requests and validates answers, and the offline simulator (a provider) answers them. A request is
one system message that starts with `COMPACTION_MARKER`, then one user message made of tagged
blocks, in this order (each optional except the transcript or a previous summary):

    <user-request seq="139">
    make the parser accept trailing commas, and keep the old error messages
    </user-request>
    <earlier-summary index="1" from_seq="1" through_seq="120" level="0">
    ## Goal
    …
    </earlier-summary>
    <previous-summary index="1" from_seq="1" through_seq="140" level="0">
    ## Goal
    …
    </previous-summary>
    <transcript from_seq="141" through_seq="268">
    [seq 141] user: fix the flaky test
    [seq 142] assistant: I will read it first.
    [seq 142] assistant → read_file {"path": "tests/test_io.py"}
    [seq 143] tool read_file (ok): 1→import io …
    [seq 150] tool shell (error): exit 1 …
    </transcript>
    <must-mention>
    - path: tests/test_io.py
    - directive: always run the tests before committing
    - file read: src/io.py
    </must-mention>
    <repair>
    - section "## Next Steps" is empty
    </repair>

`<user-request>` is the anchor (the user's latest request) verbatim, in every request, so that
`## Goal` is the user's goal in their words whatever part of history the request summarises; an
anchor too large for the request keeps its head and tail around `ANCHOR_OMISSION`. Each
`<earlier-summary>` is a segment of the checkpoint the new summary extends (or an earlier chunk's
summary in the same compaction): read-only context, never summarised again. When the request
cannot afford them whole they come as a digest (`digest="true"`: each segment's Goal and Next
Steps, shortened).
A transcript line starts with `[seq N]`; images appear as `IMAGE_PLACEHOLDER`, never as bytes.
`<must-mention>` lists what the summary must name (modified paths, user directives, files read); `<repair>`
appears only in the one shorter repair request and lists what the first candidate lacked. The
user message ends with `LENGTH_LINE`, the length the summary is asked to keep to: a share of the
route's window, so that a checkpoint on a small window leaves room for the work that follows.
"""

from __future__ import annotations

import re

COMPACTION_MARKER = "[foya:compaction-request v1]"
"""First line of a compaction request's system message: how a provider (the simulator) knows it."""

PROMPT_VERSION = "foya-summary-v3"
"""Changes whenever the prompt's wording changes: part of failure fingerprints (SPEC C-14)."""

LENGTH_LINE = "Keep the whole summary under about {tokens:,} tokens."
"""The last line of a request that asks for a length (the window's share, `context/floor.py`)."""
_LENGTH = re.compile(
    "^" + re.escape(LENGTH_LINE).replace(re.escape("{tokens:,}"), r"([\d,]+)") + "$", re.MULTILINE
)

SECTION_TITLES = ("Goal", "Progress", "Key Decisions", "Next Steps", "Critical Context")
"""The five sections of a text summary, in their required order (SPEC C-8)."""

SECTION_HEADINGS = tuple(f"## {title}" for title in SECTION_TITLES)

IMAGE_PLACEHOLDER = "[image omitted from the summary input]"
"""What the summariser sees instead of image bytes (SPEC K-13)."""

HANDOFF_MARKER = "[foya:handoff v1]"
"""How the hidden continuation reminder (SPEC K-1) begins: a control message, never the user's
request (the simulator reads it so; `compaction/handoff.py` writes and checks it)."""

CHECKPOINT_MESSAGE_PREFIX = "[Checkpoint "
"""How a checkpoint's message begins (`compaction/summary.py`): it stands for history, not a request."""

ANCHOR_TAG = "user-request"
EARLIER_SUMMARY_TAG = "earlier-summary"
ANCHOR_OMISSION = "[… {count:,} characters of the user's message left out of the summary input …]"
"""What stands between the head and tail of an anchor too large for a summary request."""
TRANSCRIPT_TAG = "transcript"
PREVIOUS_SUMMARY_TAG = "previous-summary"
MUST_MENTION_TAG = "must-mention"
REPAIR_TAG = "repair"

MUST_MENTION_PATH = "path"
MUST_MENTION_DIRECTIVE = "directive"
MUST_MENTION_READ = "file read"
"""A path the covered events read: the summary names it, by its file name at least (SPEC K-12)."""

_BLOCK = re.compile(r"<(?P<tag>[a-z-]+)(?P<attrs>[^>\n]*)>\n(?P<body>.*?)\n?</(?P=tag)>", re.DOTALL)
_ATTR = re.compile(r'([a-z_]+)="([^"]*)"')


def blocks(text: str) -> list[tuple[str, dict[str, str], str]]:
    """The tagged blocks of a compaction request's user message: (tag, attributes, body)."""
    return [
        (match["tag"], dict(_ATTR.findall(match["attrs"])), match["body"]) for match in _BLOCK.finditer(text)
    ]


def open_tag(tag: str, **attributes: object) -> str:
    attrs = "".join(f' {name}="{value}"' for name, value in attributes.items())
    return f"<{tag}{attrs}>"


def close_tag(tag: str) -> str:
    return f"</{tag}>"


def requested_length(text: str) -> int | None:
    """The length in tokens a request's LENGTH_LINE asks for, or None when it asks for none."""
    found = _LENGTH.findall(text)
    return int(found[-1].replace(",", "")) if found else None

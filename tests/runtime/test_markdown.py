"""Tests the Markdown transcript (runtime/markdown.py): messages under headings, tool calls as
collapsed `<details>` blocks, compactions and failed or cancelled turns marked, rewound events left
out (SPEC H-4), and text from the model, the user or a tool that cannot inject HTML: outside code
blocks the only tags are Foya's own details blocks, whatever the text holds."""

from __future__ import annotations

import re

from foya_tui.runtime.markdown import escape_text, fenced, session_markdown
from foya_tui.runtime.model import Event, EventKind, SessionInfo

INFO = SessionInfo("ab" * 16, "a <b>bold</b> title", "2026-11-29T12:00:00+00:00", "", 0)
TOOL_OUTPUT = "```\n</details>\n<iframe>"
OWN_TAGS = {"<details>", "</details>", "<summary>", "</summary>"}
HOSTILE = (
    "Look: <img src=x onerror=alert(1)> and <script>alert(2)</script> &amp; "
    "<https://example.com> \x1b]0;title\x07 \u202eevil"
)


def event(seq: int, event_kind: EventKind, **payload: object) -> Event:
    return Event(INFO.id, seq, event_kind, payload, "2026-11-29T12:00:00+00:00")


def tags_outside_code(markdown: str) -> set[str]:
    """Every HTML-looking tag of the document outside fenced code blocks (CommonMark's fences)."""
    found: set[str] = set()
    fence: str | None = None
    for line in markdown.split("\n"):
        opened = re.match(r"^ {0,3}(`{3,}|~{3,})", line)
        if fence is None and opened:
            fence = opened.group(1)
            continue
        if fence is not None:
            marker = line.strip()
            if marker and set(marker) == {fence[0]} and len(marker) >= len(fence):
                fence = None
            continue
        found |= {match.group(0) for match in re.finditer(r"</?[A-Za-z][^>]*>?", line)}
    assert fence is None, "a code block was left open at the end of the document"
    return found


def test_text_outside_code_holds_no_html_and_code_stays_verbatim() -> None:
    text = f"{HOSTILE}\n\n```html\n<div>kept as code</div>\n```\n> a quote stays a quote"
    escaped = escape_text(text)
    assert "&lt;img src=x onerror=alert(1)>" in escaped and "&lt;script>" in escaped
    assert "&amp;amp;" in escaped and "&lt;https://example.com>" in escaped
    assert "```html\n<div>kept as code</div>\n```" in escaped
    assert "\n> a quote stays a quote" in escaped
    assert "\x1b" not in escaped and "\u202e" not in escaped
    assert tags_outside_code(escaped) == set()


def test_a_code_block_left_open_is_closed_at_the_end_of_its_message() -> None:
    escaped = escape_text("start\n````python\nprint('<no end>')")
    assert escaped.endswith("\n````") and tags_outside_code(escaped) == set()
    # A shorter fence inside does not close a longer one (CommonMark), nor does our closing.
    escaped = escape_text("````\n```\n<x>\n")
    assert escaped.endswith("\n````") and tags_outside_code(escaped + "\n<after>") == {"<after>"}


def test_fences_outgrow_the_backticks_inside() -> None:
    assert fenced("plain") == "```\nplain\n```"
    assert fenced("a ``````` b\n```\n</details>", "text").startswith("````````text\n")
    assert tags_outside_code(fenced("```\n</details><script>")) == set()


def test_a_transcript_marks_tools_compactions_and_outcomes() -> None:
    call = {"id": "c1", "name": "read_<b>file", "arguments": '{"path": "</details><script>x</script>"}'}
    events = [
        event(1, EventKind.USER_MESSAGE, text=HOSTILE),
        event(2, EventKind.ASSISTANT_MESSAGE, text="", tool_calls=[call], model="m<1>"),
        event(3, EventKind.TOOL_RESULT, tool_call_id="c1", content=TOOL_OUTPUT, is_error=True),
        event(4, EventKind.ASSISTANT_MESSAGE, text="Done: ```\nunclosed <b>", tool_calls=[], model="m<1>"),
        event(5, EventKind.PROVIDER_USAGE, usage=None),
        event(6, EventKind.USER_MESSAGE, text="rewound away"),
        event(7, EventKind.REWIND, to_seq=5),
        event(
            8,
            EventKind.COMPACTION_DIAGNOSTIC,
            outcome="accepted",
            trigger="budget",
            tokens_before=9812,
            tokens_after=2104,
            producer="llm",
        ),
        event(9, EventKind.COMPACTION_DIAGNOSTIC, outcome="suppressed", trigger="budget"),
        event(10, EventKind.USER_MESSAGE, text="go on"),
        event(11, EventKind.TURN_OUTCOME, outcome="failed", kind="quota", reason="no <em>credit</em> left"),
        event(12, EventKind.USER_MESSAGE, text="again"),
        event(13, EventKind.ASSISTANT_MESSAGE, text="Par", finish_reason="cancelled", model="m"),
        event(14, EventKind.TURN_OUTCOME, outcome="cancelled", kind="cancelled", reason="cancelled"),
    ]
    markdown = session_markdown(INFO, events, exported_at="2026-11-29T13:00:00+00:00")
    assert markdown.startswith("# a &lt;b&gt;bold&lt;/b&gt; title\n")
    assert tags_outside_code(markdown) == OWN_TAGS
    assert markdown.count("<details><summary>") == 1
    assert "<details><summary>tool call: read_&lt;b&gt;file (error)</summary>" in markdown
    assert "## Assistant · m&lt;1&gt;" in markdown
    assert "rewound away" not in markdown
    assert "> *Context compacted (the context passed the compaction line): 9,812 → 2,104 tokens" in markdown
    # The suppressed repeat is not worth a line.
    assert markdown.count("Context compacted") == 1 and "> *Compaction" not in markdown
    assert "> *✗ Failed: no &lt;em&gt;credit&lt;/em&gt; left*" in markdown
    assert markdown.rstrip().endswith("Par\n\n> *✗ Cancelled by the user.*")
    parts = ("## You", "<details>", "Done:", "Context compacted", "go on", "Failed")
    order = [markdown.index(part) for part in parts]
    assert order == sorted(order)

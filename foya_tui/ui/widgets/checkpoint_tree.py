"""Provides CheckpointTree: a session's checkpoint lineage, newest first, each with its segments.

The current checkpoint is marked ●, the others ○ (earlier, or undone after it), an invalid one ✗;
each names who made it (llm, repaired, native, fallback). A checkpoint a rewind voided or that
failed validation carries its problem as a child line; a provider-native one its state's size and
route, a fallback one how many messages it keeps verbatim. The last line is "(none)": the state
with no checkpoint, where the model sees the full history.

Everything shown comes from one `InspectReport` (`runtime.inspect`); nothing is recomputed here.
Labels are `rich.text.Text` built from plain strings, never markup, and are coloured at render
time from component classes, so a theme change restyles them. The formatting helpers here are
shared with the inspector and the compaction dialog.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.style import Style
from rich.text import Text
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from foya_tui.runtime.text import terminal_safe

if TYPE_CHECKING:
    from foya_tui.runtime.compaction.report import InspectReport
    from foya_tui.runtime.view.checkpoint import Checkpoint, Segment
    from foya_tui.runtime.view.ledger import KindReport
    from foya_tui.runtime.view.recovery import CheckpointRecord

# How the inspector and the compaction dialog name each count of a ledger: (one, many).
LEDGER_NOUNS: tuple[tuple[str, str, str], ...] = (
    ("directives", "rule", "rules"),
    ("requests", "request", "requests"),
    ("files_modified", "file modified", "files modified"),
    ("files_read", "file read", "files read"),
    ("commands", "command", "commands"),
    ("errors", "error", "errors"),
)


def short_id(checkpoint_id: str) -> str:
    """`7a91c3d2…`: enough of a digest to tell checkpoints apart on screen."""
    return f"{checkpoint_id[:8]}…" if len(checkpoint_id) > 8 else checkpoint_id


def counted(count: int, one: str, many: str) -> str:
    return f"{count:,} {one if count == 1 else many}"


def ledger_counts_text(counts: Mapping[str, int]) -> str:
    """`ledger: 1 rule · 5 requests · 0 files modified · 1 file read · 0 commands · 0 errors`."""
    parts = [counted(int(counts.get(key, 0)), one, many) for key, one, many in LEDGER_NOUNS]
    return "ledger: " + " · ".join(parts)


def ledger_kinds_text(kinds: Sequence[KindReport], budget_chars: int) -> str:
    """One line per kind of evidence: how many records it keeps, how many of those were shortened,
    how many were left out (findable with history_search), e.g. `files read  11 kept · 34 left out`."""
    names = {key: many for key, _, many in LEDGER_NOUNS}
    width = max(len(names[kind.kind]) for kind in kinds) if kinds else 0
    lines = []
    for kind in kinds:
        parts = [f"{kind.kept:,} kept"]
        if kind.shortened:
            parts.append(f"{kind.shortened:,} shortened")
        if kind.left_out:
            parts.append(f"{kind.left_out:,} left out")
        lines.append(f"  {names[kind.kind]:<{width}}  " + " · ".join(parts))
    if any(kind.left_out for kind in kinds):
        lines.append("  (what was left out is still in history: history_search finds it)")
    if budget_chars:
        lines.insert(0, f"budget {budget_chars:,} characters, each kind with its own share")
    return "\n".join(lines)


def segment_title(segment: Segment) -> str:
    """`segment 2 · seq 141–268 · level 1 · 1,204 tokens`."""
    return (
        f"segment {segment.index} · seq {segment.from_seq}–{segment.through_seq} · "
        f"level {segment.level} · {segment.tokens:,} tokens"
    )


def clean(text: str) -> str:
    """Model text for display: terminal escapes and control characters removed (markup is never
    parsed: callers wrap it in Text or Content)."""
    return terminal_safe(text)


def checkpoint_status(record: CheckpointRecord, report: InspectReport) -> str:
    """What a checkpoint is now: current, earlier, undone, voided or invalid (the report decides)."""
    return report.status(record)


@dataclass(frozen=True)
class TreeEntry:
    """What a line of the tree stands for."""

    kind: str
    """"checkpoint", "segment", "problem" (a checkpoint's problem), "detail" (what its producer made:
    a native state's size, a fallback's kept messages) or "none" (no checkpoint)."""
    record: CheckpointRecord | None = None
    segment: Segment | None = None
    status: str = ""
    """The checkpoint's status (see `checkpoint_status`); "current" on "none" when no checkpoint is."""

    @property
    def checkpoint(self) -> Checkpoint | None:
        return self.record.checkpoint if self.record is not None else None

    @property
    def key(self) -> tuple[str, str, int]:
        """Identifies the line across refreshes, so the cursor stays where it was."""
        record_id = self.record.id if self.record is not None else ""
        return (self.kind, record_id, self.segment.index if self.segment is not None else 0)


# Component class of a checkpoint's line by its status: the current one stands out, problems warn;
# "dim" is the "(none)" line while a checkpoint is current.
_ROLE_OF = {"current": "current", "voided": "problem", "invalid": "problem", "dim": "dim"}


class CheckpointTree(Tree[TreeEntry]):
    """The checkpoints of one InspectReport; `show(report)` replaces them, keeping the cursor."""

    DEFAULT_CSS = """
    CheckpointTree {
        & > .checkpoint-tree--current { color: $text-primary; text-style: bold; }
        & > .checkpoint-tree--problem { color: $text-warning; }
        & > .checkpoint-tree--dim { color: $foreground 60%; }
    }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "checkpoint-tree--current",
        "checkpoint-tree--problem",
        "checkpoint-tree--dim",
    }

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("checkpoints", id=id)
        self.show_root = False
        self.guide_depth = 3

    def show(self, report: InspectReport) -> None:
        """Replace the lines with `report`'s checkpoints; the cursor stays on the same line when it
        still exists, otherwise it goes to the current checkpoint's first segment."""
        cursor = self.cursor_node
        keep = cursor.data.key if cursor is not None and cursor.data is not None else None
        self.clear()
        wanted: TreeNode[TreeEntry] | None = None
        fallback: TreeNode[TreeEntry] | None = None
        for record in reversed(report.records):
            status = checkpoint_status(record, report)
            entry = TreeEntry("checkpoint", record, status=status)
            node = self.root.add(checkpoint_label(record, status), entry, expand=True)
            lines: list[TreeNode[TreeEntry]] = [node]
            if record.problem:
                problem = TreeEntry("problem", record, status=status)
                lines.append(node.add_leaf(Text(f"⚠ {clean(record.problem)}"), problem))
            detail = producer_detail(record, report.native_state_size(record), short=True)
            if detail:
                lines.append(node.add_leaf(Text(detail), TreeEntry("detail", record, status=status)))
            checkpoint = record.checkpoint
            for segment in checkpoint.segments if checkpoint is not None else ():
                entry = TreeEntry("segment", record, segment, status)
                lines.append(node.add_leaf(segment_label(segment), entry))
            if status == "current":
                fallback = next((n for n in lines if n.data is not None and n.data.kind == "segment"), node)
            for line in lines:
                if keep is not None and line.data is not None and line.data.key == keep:
                    wanted = line
        none_current = report.current_id is None
        none = self.root.add_leaf(
            Text(f"{'●' if none_current else '○'} (none) · the model sees the full history"),
            TreeEntry("none", status="current" if none_current else "dim"),
        )
        if keep is not None and keep[0] == "none":
            wanted = none
        target = wanted or fallback or (self.root.children[0] if self.root.children else None)
        # Reading a line lays the new lines out now: until then every node's line is unknown, and
        # the cursor would land on the first line instead of the target.
        self.get_node_at_line(0)
        self.move_cursor(target)

    def select_segment(self, checkpoint_id: str, index: int) -> bool:
        """Move the cursor to segment `index` of checkpoint `checkpoint_id`; False if no line shows it."""
        for checkpoint in self.root.children:
            for line in checkpoint.children:
                entry = line.data
                if (
                    entry is not None
                    and entry.segment is not None
                    and entry.record is not None
                    and entry.record.id == checkpoint_id
                    and entry.segment.index == index
                ):
                    if not checkpoint.is_expanded:
                        checkpoint.expand()
                        self.get_node_at_line(0)  # lay the new lines out, as in `show`
                    self.move_cursor(line)
                    return True
        return False

    def render_label(self, node: TreeNode[TreeEntry], base_style: Style, style: Style) -> Text:
        entry = node.data
        role = None
        if entry is not None and entry.kind == "problem":
            role = "problem"
        elif entry is not None and entry.kind in ("checkpoint", "none"):
            role = _ROLE_OF.get(entry.status)
        if role is not None:
            # The role's colour under the cursor's style, so the highlighted line still reads as selected.
            style = self.get_component_rich_style(f"checkpoint-tree--{role}", partial=True) + style
        return super().render_label(node, base_style, style)


def checkpoint_label(record: CheckpointRecord, status: str) -> Text:
    """`● 7a91c3d2… current  L1  3 seg  llm` (a native checkpoint has no segments: `native`; ✗ and
    no counts for an unreadable checkpoint)."""
    checkpoint = record.checkpoint
    if checkpoint is None:
        return Text(f"✗ {short_id(record.id)} invalid")
    mark = "●" if status == "current" else "○"
    head = f"{mark} {short_id(record.id)} {status}"
    if str(checkpoint.projection_kind) == "native":
        return Text(f"{head}  native")
    count = len(checkpoint.segments)
    return Text(f"{head}  L{checkpoint.level}  {count} seg  {clean(checkpoint.producer)}")


def producer_detail(record: CheckpointRecord, native_state_bytes: int | None, *, short: bool = False) -> str:
    """What the producer made, beside the segments: `native state 341 bytes · route foya-sim/native`
    for a provider-native checkpoint, `no model · 12 messages kept verbatim` for the deterministic
    fallback (its line says "fallback"); "" otherwise. `short` drops the word "route", for the
    tree's narrow lines."""
    checkpoint = record.checkpoint
    if checkpoint is None:
        return ""
    if str(checkpoint.projection_kind) == "native" or checkpoint.producer == "native":
        size = native_state_bytes
        state = f"native state {size:,} bytes" if size is not None else "native state"
        return f"{state} · {'' if short else 'route '}{clean(checkpoint.model)}"
    if checkpoint.producer == "fallback":
        kept = len(checkpoint.kept_messages)
        return f"no model · {counted(kept, 'message', 'messages')} kept verbatim"
    return ""


def segment_label(segment: Segment) -> Text:
    """`seg 2  seq 141–268  L1  1,204`: index, covered seqs, level and tokens."""
    seqs = f"seq {segment.from_seq}–{segment.through_seq}"
    return Text(f"seg {segment.index}  {seqs}  L{segment.level}  {segment.tokens:,}")

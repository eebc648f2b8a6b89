"""Provides the compaction dialog: a validated candidate checkpoint, before it is committed.

It shows what accepting would change (tokens before → after, segments and level, the covered
seqs), who made the candidate (the model's summary, or the deterministic fallback without a
model), the summary the model would see instead of those messages, and the ledger's counts; it
returns True (accept) or False (decline). Summary text is model output: shown as plain Text,
never parsed as markup. As with the approval dialog, keys typed just before it opened must not
accept it, so its accept key and button wait GRACE_SECONDS.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from foya_tui.ui.widgets.budget_meter import PRODUCERS
from foya_tui.ui.widgets.checkpoint_tree import clean, counted, ledger_counts_text, segment_title

if TYPE_CHECKING:
    from foya_tui.runtime.view.checkpoint import Checkpoint

HELP = "a accepts · d or esc declines · nothing is written until you accept"


def candidate_facts(checkpoint: Checkpoint) -> str:
    """`1,702 → 1,549 tokens (−9%) · 1 segment · level 1 · seq 1–30 · 11 messages`; the fallback's
    candidate adds how many of them it keeps verbatim."""
    before, after = checkpoint.tokens_before, checkpoint.tokens_after
    change = f" ({round(100 * (after - before) / before):+d}%)".replace("-", "−") if before else ""
    kept = f" · {len(checkpoint.kept_messages):,} kept verbatim" if checkpoint.producer == "fallback" else ""
    return (
        f"{before:,} → {after:,} tokens{change} · "
        f"{counted(len(checkpoint.segments), 'segment', 'segments')} · level {checkpoint.level} · "
        f"seq {checkpoint.from_seq}–{checkpoint.through_seq} · "
        f"{counted(checkpoint.covered_messages, 'message', 'messages')}{kept}"
    )


def summary_text(checkpoint: Checkpoint) -> Text:
    """Every segment's summary under a dim title line, as the model would read them."""
    text = Text()
    for number, segment in enumerate(checkpoint.segments):
        if number:
            text.append("\n\n")
        text.append(segment_title(segment), style="dim")
        text.append("\n")
        text.append(clean(segment.text))
    return text


class CompactionScreen(ModalScreen[bool]):
    """Accept (a) or decline (d, esc) a candidate checkpoint."""

    CSS_PATH = "compaction.tcss"
    GRACE_SECONDS: ClassVar[float] = 0.4
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "a",
            "answer(True)",
            "accept",
            id="compaction.accept",
            tooltip="Commit this checkpoint: the model sees the summary instead of the covered messages",
        ),
        Binding(
            "d",
            "answer(False)",
            "decline",
            id="compaction.decline",
            tooltip="Do not commit it; the conversation stays as it is",
        ),
        Binding("escape", "answer(False)", "decline", id="compaction.close", tooltip="Decline and close"),
    ]

    def __init__(self, checkpoint: Checkpoint, model_failure: str | None = None) -> None:
        """`model_failure`: why the model's summary failed, when this candidate is the
        deterministic fallback offered in its place (its accept button then says so)."""
        super().__init__()
        self.checkpoint = checkpoint
        self.model_failure = model_failure
        self._opened = time.monotonic()

    def compose(self) -> ComposeResult:
        checkpoint = self.checkpoint
        with Vertical(id="compaction-dialog") as dialog:
            dialog.border_title = "Accept this checkpoint?"
            # Who made it: the model's summary, or the deterministic fallback without one (SPEC K-10).
            made_by = PRODUCERS.get(checkpoint.producer, clean(checkpoint.producer))
            dialog.border_subtitle = f"{checkpoint.phase} · {clean(checkpoint.model)} · {made_by}"
            if self.model_failure:
                yield Static(
                    Text(f"The model's summary failed: {clean(self.model_failure)}", style="bold"),
                    id="compaction-failure",
                )
            yield Static(Text(candidate_facts(checkpoint)), id="compaction-facts")
            with VerticalScroll(id="compaction-summary"):
                yield Static(summary_text(checkpoint), id="compaction-text")
            yield Static(Text(ledger_counts_text(checkpoint.ledger.counts)), id="compaction-ledger")
            with Horizontal(id="compaction-buttons"):
                label = "Use the fallback (a)" if self.model_failure else "Accept (a)"
                yield Button(label, id="accept", variant="primary")
                yield Button("Decline (d)", id="decline")
            yield Static(Text(HELP), id="compaction-help")

    def on_mount(self) -> None:
        self._opened = time.monotonic()
        self.query_one("#decline", Button).focus()  # Enter right away declines rather than commits

    def action_answer(self, accept: bool) -> None:
        if accept and time.monotonic() - self._opened < self.GRACE_SECONDS:
            return
        self.dismiss(accept)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_answer(event.button.id == "accept")

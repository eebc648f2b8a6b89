"""Provides the conversation screen's commands: slash commands typed in the prompt, the help
screen, the context said in words, and the approval mode.

A submission is read by `actions.read_submission`: a message goes to the turn flow; a slash
command runs its action (the same action its key and palette entry run, ui/actions.py); a mistyped
command is an error line in the conversation and nothing is sent (the text stays in the prompt to
be fixed). Approval-mode changes run in a Bridge worker, as everything that touches the runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widgets import TextArea

from foya_tui.ui.actions import RunAction, Runs, SlashProblem
from foya_tui.ui.messages import ApprovalModeChanged, SettingNotSaved
from foya_tui.ui.screens.conversation_host import ConversationHost
from foya_tui.ui.widgets.prompt import Prompt
from foya_tui.ui.widgets.slash_completions import SlashCompletions

if TYPE_CHECKING:
    from foya_tui.runtime.context.report import ContextReport


APPROVAL_MEANINGS = {
    "read-only": "Tools may read; writes and shell commands are refused.",
    "ask": "Tools may read; each write or shell command asks you first.",
    "auto": "Tools may read, write and run shell commands without asking.",
}
"""What each approval mode lets tools do, said when the mode changes."""


def context_line(report: ContextReport) -> str:
    """The next request in one line: its total against the input budget, then each layer."""
    layers = report.layers
    total = report.estimate.total
    share = round(100 * total / report.input_budget) if report.input_budget else 0
    return (
        f"next request: {total:,} of {report.input_budget:,} input tokens ({share}%, "
        f"{report.estimate.source}) · pinned {layers.pinned:,} · history {layers.history:,} · "
        f"working {layers.working_set:,} · tools {layers.tool_schema:,} · native {layers.native_state:,} "
        f"· {report.output_reserve:,} kept for the reply · compacts at {report.high_water:,}"
    )


class CommandFlow(ConversationHost):
    """ConversationScreen's part that runs slash commands, help and settings (a mixin: `self` is
    the screen; its handlers are named `on_*`, which Textual finds in every class of the MRO)."""

    async def _run_submission(self, submission: RunAction | SlashProblem, prompt: Prompt) -> None:
        """Run a slash command (the prompt is cleared), or say why the text is not one (kept)."""
        if isinstance(submission, SlashProblem):
            await self.messages.add_marker(f"✗ {submission.reason}")
            self.messages.scroll_end(animate=False)
            return
        prompt.clear()
        if submission.action.runs is Runs.APP:
            await self.app.run_action(submission.run)
        else:
            await self.run_action(submission.run)

    def _follow_completions(self, event: TextArea.Changed) -> None:
        """The prompt changed: the slash completions follow what is typed."""
        if isinstance(event.text_area, Prompt):
            self.query_one(SlashCompletions).follow(event.text_area.text)
            self.refresh_bindings()  # Tab and ↑/↓ complete only while the list shows

    def action_complete_command(self) -> None:
        """Put the highlighted completion into the prompt, the cursor after it; without one, Tab
        moves the focus as on any screen (this binding takes Tab's place on this screen)."""
        chosen = self.query_one(SlashCompletions).chosen
        if chosen is None:
            self.app.action_focus_next()
        else:
            prompt = self.query_one(Prompt)
            prompt.load_text(chosen)
            prompt.move_cursor(prompt.document.end)

    def action_choose_completion(self, step: int) -> None:
        self.query_one(SlashCompletions).move(step)

    def action_show_help(self) -> None:
        """Open the help screen (once: F1 on an open help closes it there)."""
        from foya_tui.ui.screens.help import HelpScreen

        if not isinstance(self.app.screen, HelpScreen):
            self.app.push_screen(HelpScreen(self.keymap_overrides))

    @property
    def keymap_overrides(self) -> dict[str, str]:
        """The keys `[keys]` in config.toml gave binding ids (empty: the defaults)."""
        from foya_tui.ui.keymap import Keymap

        keymap = getattr(self.app, "keymap", None)  # FoyaApp's, the one Textual applies to the footer
        return dict(keymap.keys) if isinstance(keymap, Keymap) else {}

    async def action_show_context(self) -> None:
        """Say in the conversation what the next request holds, layer by layer."""
        report = self.context_report
        if report is None:
            self.notify("The context is still being measured; try again in a moment.", timeout=3)
            return
        await self.messages.add_marker(context_line(report))
        self.messages.scroll_end(animate=False)

    def action_rewind_last(self) -> None:
        """Rewind to before the last message the user sent (asks first; its text returns)."""
        users = [block for block in self.messages.blocks if block.role == "user" and block.seq is not None]
        if not users:
            self.notify("There is no message of yours to rewind to yet.", timeout=3)
            return
        self._ask_rewind(users[-1])

    def action_set_approval(self, mode: str) -> None:
        """Set what tools may do without asking, for this session and the next ones."""
        if self._refused(self._state.refuse_approval()):  # not while a turn could be asking
            return
        self.bridge.set_approval_mode(mode)

    def on_approval_mode_changed(self, message: ApprovalModeChanged) -> None:
        self._show_header(self.bridge.session)
        meaning = APPROVAL_MEANINGS.get(message.mode, "")
        self.notify(f"Approval mode: {message.mode}. {meaning}", timeout=5, markup=False)
        self.bridge.save_setting("approval_mode", message.mode)  # the next start uses it too

    def on_setting_not_saved(self, message: SettingNotSaved) -> None:
        self.notify(message.reason, severity="warning", timeout=10, markup=False)

"""Provides ConversationHost: what the conversation screen's flows may use of the screen itself.

TurnFlow, CompactionFlow, HistoryFlow and CommandFlow are mixins of ConversationScreen. A type checker must
know what `self` offers them without importing the screen (which imports them), so they derive
from ConversationHost: for a type checker, a Screen with the members ConversationScreen owns and
shares with its flows (ConversationScreen then has to match them); at run time, plain `object`,
so that the screen's Textual class hierarchy (and the CSS it inherits) is exactly Screen's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textual.reactive import var
    from textual.screen import Screen

    from foya_tui.runtime.context.report import ContextReport
    from foya_tui.runtime.providers.routes import Route
    from foya_tui.runtime.session import Session
    from foya_tui.ui.actions import RunAction, SlashProblem
    from foya_tui.ui.bridge import Bridge
    from foya_tui.ui.screens.conversation_state import Activity, ConversationState, Refusal
    from foya_tui.ui.screens.inspector import InspectorScreen
    from foya_tui.ui.widgets.budget_meter import CompactionStatus
    from foya_tui.ui.widgets.message_block import MessageBlock
    from foya_tui.ui.widgets.message_list import MessageList
    from foya_tui.ui.widgets.prompt import Prompt

    class ConversationHost(Screen[None]):
        """The members of ConversationScreen its flows use (see conversation.py for each)."""

        context_report: var[ContextReport | None] = var(None)
        compaction_status: var[CompactionStatus | None] = var(None)
        bridge: Bridge
        _state: ConversationState
        _route: Route | None
        _shortened: frozenset[int]
        _inspector: InspectorScreen | None
        provider_ready: bool

        @property
        def messages(self) -> MessageList: ...
        def _set_activity(self, activity: Activity | None) -> None: ...
        def _refused(self, refusal: Refusal | None) -> bool: ...
        def _history_refused(self, action: str) -> bool: ...
        def _follow_shortened(self, report: ContextReport) -> None: ...
        def _mark_shortened(self) -> None: ...
        def _refresh_inspector(self) -> None: ...
        def _show_header(self, session: Session | None) -> None: ...
        def _ask_rewind(self, block: MessageBlock) -> None: ...
        async def _run_submission(self, submission: RunAction | SlashProblem, prompt: Prompt) -> None: ...

else:
    ConversationHost = object

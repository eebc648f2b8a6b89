"""Provides the conversation screen: header, streaming message list, budget meter, prompt and footer.

The screen renders what the Bridge reports and decides when a submission may be sent; it never
calls the runtime itself. The budget meter follows the screen's `context_report` and
`input_steps` reactives (bound with `data_bind`), which the Bridge's messages set.

Tool calls appear as ToolBlocks inside the turn's assistant block, as they start and finish; the
latest compiled report says which results the model sees shortened, and those blocks show a badge.
A call that needs approval opens the approval dialog; the turn's thread waits for its answer.

What Foya does to the model's view during a turn (a hidden handoff reminder stored, old tool
results cleared by micro-compaction or snip) shows as a dim context note in the turn's block; a
compaction inside the turn shows its stage on the meter, and esc cancels it with the turn.

Between turns the screen also starts what changes how history is seen, each in a Bridge worker:
a manual compaction (its stages on the meter's "last" line, esc cancels, then a dialog to accept
or decline the candidate; with the model, or the deterministic fallback without one), undoing a
checkpoint, a rewind to a focused message (after a confirmation; the conversation is then
reloaded as on resume), and a fork into a new session (ending with the focused message, or the
whole session), which then opens in place of this one. The inspector shows the session's
checkpoints and compaction log; it is refreshed after each of these. Its searches and reads of
history run in Bridge workers too, and their results are handed to it from here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.content import Content
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import Footer, Static

from foya_tui.runtime.text import clean_user_text
from foya_tui.ui.bridge import Bridge
from foya_tui.ui.messages import (
    ApprovalRequested,
    BridgeFailed,
    CompactionEnded,
    CompactionProposed,
    CompactionStaged,
    CompactionUndone,
    ContextReported,
    HistoryEventRead,
    HistoryReadFailed,
    HistorySearched,
    LastCompactionRead,
    RouteResolved,
    RoutesListed,
    RouteSwitched,
    RuntimeUpdated,
    SessionCreated,
    SessionForked,
    SessionInspected,
    SessionOpened,
    SessionRewound,
    SourceEventsRead,
    StepsRecorded,
    ToolResultRead,
    ToolResultRecorded,
    TurnRecorded,
)
from foya_tui.ui.widgets.budget_meter import (
    BudgetMeter,
    CompactionStatus,
    MeterLine,
    compaction_ended,
    compaction_running,
)
from foya_tui.ui.widgets.message_block import MessageBlock, handoff_note, snip_note
from foya_tui.ui.widgets.message_list import MessageList
from foya_tui.ui.widgets.prompt import Prompt

if TYPE_CHECKING:
    from foya_tui.runtime.providers.routes import Route
    from foya_tui.runtime.runtime import Runtime
    from foya_tui.runtime.session import Session
    from foya_tui.ui.screens.approval import ApprovalScreen
    from foya_tui.ui.screens.inspector import InspectorScreen
    from foya_tui.ui.widgets.tool_block import ToolBlock

OPENING = "opening the session…"
REPLYING = "a reply is being written · esc cancel · you can type your next message"
SWITCHING = "switching the route…"
SIDEBAR_FROM = 100
"""Terminal width (columns) from which the budget meter is a sidebar rather than one line."""
SWITCH_REFUSED = "The route cannot change while a reply is being written; wait for it or press esc."
EMPTY_HINT = "Nothing here yet. Type a message below and press Enter; every message is kept in a local log."
COMPACTING = "compacting the context · esc cancel · you can type your next message"
DECIDING = "a compaction waits for your answer"
UNDOING = "undoing the checkpoint…"
REWINDING = "rewinding…"
FORKING = "forking a new session…"
NO_SESSION = "Nothing to {} yet: send a message first."
SELECT_MESSAGE = "Select a message first: Tab or a click moves to the messages."
SIMULATOR_HINT = (
    "No model is configured, so the offline simulator answers: a deterministic stand-in that "
    "reports real token counts. The README shows how to configure a model."
)


class ConversationScreen(Screen[None]):
    """The main screen: one conversation with the agent."""

    CSS_PATH = "conversation.tcss"
    # Below 100 columns the sidebar meter gives way to a one-line meter under the header.
    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = [(0, "-narrow"), (SIDEBAR_FROM, "-wide")]
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "escape",
            "cancel_turn",
            "cancel",
            id="turn.cancel",
            tooltip="Stop the reply being written; what already arrived is kept",
        ),
        Binding(
            "escape",
            "cancel_compaction",
            "cancel compaction",
            id="compaction.cancel",
            tooltip="Stop the running compaction; nothing is written",
        ),
        Binding(
            "ctrl+r",
            "switch_route",
            "route",
            id="route.switch",
            tooltip="Choose the model route for the next message (nothing is sent)",
        ),
        Binding(
            "f2",
            "open_inspector",
            "inspector",
            id="inspector.open",
            tooltip="Show the session's checkpoints, segments and compaction log",
        ),
        # A priority binding, so that it works while typing: the prompt's own ctrl+k (delete to the
        # end of the line) gives way; ctrl+shift+k still deletes the line.
        Binding(
            "ctrl+k",
            "compact",
            "compact",
            id="context.compact",
            tooltip="Compact the session now; you see the candidate before it is committed",
            priority=True,
        ),
    ]

    context_report: var[Mapping[str, Any] | None] = var(None)
    """The compiled context of the next request (`RequestView.report()`), shown by the meter."""
    input_steps: var[tuple[int, ...]] = var(())
    """Input tokens of each model call of this session, for the meter's sparkline."""
    compaction_status: var[CompactionStatus | None] = var(None)
    """The compaction running now, or how the last one ended, for the meter's "last" line."""

    def __init__(
        self,
        runtime: Runtime | Callable[[], Runtime],
        *,
        session_id: str | None = None,
        model: str | None = None,
    ) -> None:
        super().__init__()
        self.bridge = Bridge(runtime, model=model)
        self._session_id = session_id
        self._route: Route | None = None
        self._reply: MessageBlock | None = None
        self._running_tools: dict[str, ToolBlock] = {}
        """This turn's tool calls without a result yet, by call id."""
        self._shortened: frozenset[int] = frozenset()
        """Seqs of the results the latest compiled request shows the model shortened (SPEC T-1)."""
        self._approval: ApprovalScreen | None = None
        self._busy: str | None = OPENING
        """Why Enter does not send right now (None: it does)."""
        self.turn_running = False
        self.compacting = False
        """A manual compaction is under way (proposing, waiting for the answer, or committing)."""
        self._proposing = False
        """The manual compaction is still making its candidate (esc cancels it)."""
        self._inspector: InspectorScreen | None = None
        self._sent: MessageBlock | None = None
        """The user block of the running turn (it learns its seq when the turn ends)."""
        self._ended: tuple[MessageBlock | None, MessageBlock | None] = (None, None)
        """The user and reply blocks of the turn that ended last, until TurnRecorded names their seqs."""
        # The breakpoint's class, set now: set by the first resize, it would restyle the whole screen
        # once more before the first frame (about 20 ms, tests/bench/bench_startup.py).
        self.add_class("-narrow" if self.app.size.width < SIDEBAR_FROM else "-wide")

    def compose(self) -> ComposeResult:
        yield Static(id="header")
        yield MeterLine().data_bind(report=ConversationScreen.context_report)
        with Horizontal(id="main"):
            yield MessageList()
            yield BudgetMeter().data_bind(
                report=ConversationScreen.context_report,
                steps=ConversationScreen.input_steps,
                compaction=ConversationScreen.compaction_status,
            )
        yield Prompt()
        yield Footer()
        yield self.bridge

    def on_mount(self) -> None:
        self._show_header(None)
        self._set_busy(OPENING)
        self.query_one(Prompt).focus()
        # After the first frame: the worker imports the runtime and opens SQLite, and that work
        # would otherwise compete with the first paint for the interpreter.
        self.call_after_refresh(self.bridge.start, self._session_id)

    @property
    def messages(self) -> MessageList:
        return self.query_one(MessageList)

    @property
    def meter(self) -> BudgetMeter:
        return self.query_one(BudgetMeter)

    @property
    def ready(self) -> bool:
        """True when Enter would send a message now."""
        return self._busy is None

    # -- state shown on screen -------------------------------------------------------------

    def _show_header(self, session: Session | None) -> None:
        # Spaces end the styled parts rather than start the plain ones: SVG renderers (the README
        # screenshot) drop a text run's leading spaces.
        parts: list[str | tuple[str, str]] = [("Foya ", "bold $primary"), "· "]
        if self._route is None:
            parts.append("opening…")
        else:
            parts += ["session ", (f"{session.info.short_id} ", "bold")] if session else ["new session "]
            parts += ["· ", f"{self._route.label} "]
            mode = self.bridge.approval_mode
            if mode is not None:
                parts += ["· ", ("approval: ", "$text-muted"), (mode, "$text-muted")]
        self.query_one("#header", Static).update(Content.assemble(*parts))

    def _set_busy(self, why: str | None) -> None:
        self._busy = why
        self.query_one(Prompt).set_busy(why)
        self.refresh_bindings()

    @property
    def route(self) -> Route | None:
        """The route the next message goes to (None while the session opens)."""
        return self._route

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Both are on esc: hidden from the footer (and passed over) when there is nothing to cancel.
        if action == "cancel_turn":
            return self.turn_running
        if action == "cancel_compaction":
            return self._proposing
        return True

    # -- user actions ------------------------------------------------------------------------

    async def on_prompt_submitted(self, message: Prompt.Submitted) -> None:
        text = clean_user_text(message.text)
        if not text:
            return
        if self._busy is not None:
            self.notify("Wait for the reply to finish, or press esc to cancel it.", timeout=3)
            return
        self.turn_running = True
        self._set_busy(REPLYING)
        message.prompt.clear()
        self._sent = await self.messages.add_block(MessageBlock("user", text))
        self.messages.scroll_end(animate=False)  # sending re-attaches the view to the end
        self.bridge.send(message.text)

    def action_cancel_turn(self) -> None:
        self.bridge.cancel_turn()

    def action_switch_route(self) -> None:
        """Open the route switcher (its routes are listed by the Bridge, which reads the store)."""
        if self.turn_running:
            self.notify(SWITCH_REFUSED, severity="warning")
            return
        if self._busy is not None:  # still opening, or another switch is under way
            self.notify(f"Not yet: {self._busy}", timeout=3)
            return
        self.bridge.list_routes()

    def on_routes_listed(self, message: RoutesListed) -> None:
        # Imported on first use: the switcher is not needed for the first frame.
        from foya_tui.ui.screens.routes import RouteSwitcher

        self.app.push_screen(RouteSwitcher(message.options, message.current_id), self._route_chosen)

    def _route_chosen(self, route: Route | None) -> None:
        if route is None or (self._route is not None and route.id == self._route.id):
            return
        if self.turn_running:  # a message was sent while the switcher was opening
            self.notify(SWITCH_REFUSED, severity="warning")
            return
        self._set_busy(SWITCHING)
        self.bridge.switch_route(route)

    async def new_conversation(self) -> None:
        """Start a new conversation on the same route (the session is created on the first send)."""
        if self.turn_running:
            self.notify("Cancel the running reply first (esc).", severity="warning")
            return
        if self._busy is not None:
            self.notify(f"Not yet: {self._busy}", timeout=3)
            return
        self.bridge.new_conversation()
        await self.messages.clear()
        self._shortened = frozenset()  # seqs are per session: the old ones mean nothing in the new one
        self.input_steps = ()
        self.compaction_status = None
        self._show_header(None)

    # -- what the bridge reports -------------------------------------------------------------

    def on_route_resolved(self, message: RouteResolved) -> None:
        self._route = message.route
        self._show_header(None)
        hint = f"{EMPTY_HINT}\n\n{SIMULATOR_HINT}" if message.route.is_simulator else EMPTY_HINT
        self.messages.set_hint(hint)
        self._set_busy(None)

    async def on_session_opened(self, message: SessionOpened) -> None:
        self._route = message.session.route
        self._show_header(message.session)
        await self.messages.show_history(message.items)
        self._mark_shortened()
        self._set_busy(None)

    def on_session_created(self, message: SessionCreated) -> None:
        self._show_header(message.session)

    def on_context_reported(self, message: ContextReported) -> None:
        self.context_report = message.report
        self._follow_shortened(message.report)
        if message.steps is not None:
            self.input_steps = message.steps

    def on_steps_recorded(self, message: StepsRecorded) -> None:
        self.input_steps = (*self.input_steps, *message.steps)

    def on_last_compaction_read(self, message: LastCompactionRead) -> None:
        self.compaction_status = compaction_ended(message.report)

    def on_turn_recorded(self, message: TurnRecorded) -> None:
        user, reply = self._ended
        self._ended = (None, None)
        if user is not None:
            user.seq = user.last_seq = message.user_seq
        if reply is not None and message.first_seq is not None:
            reply.seq, reply.last_seq = message.first_seq, message.last_seq

    def on_route_switched(self, message: RouteSwitched) -> None:
        self._route = message.route
        self._show_header(self.bridge.session)
        self._set_busy(None)

    async def on_bridge_failed(self, message: BridgeFailed) -> None:
        self.notify(message.reason, severity="error", markup=False)
        if self.turn_running:
            await self._end_turn(f"✗ {message.reason}")
        elif not self.compacting:  # a manual compaction ends with its own message
            self._set_busy(None)

    async def on_runtime_updated(self, message: RuntimeUpdated) -> None:
        # Imported on the first update, not at start-up (tests/bench/bench_startup.py).
        from foya_tui.runtime.updates import (
            CompactionFinished,
            CompactionProgressed,
            ContextSnipped,
            ContextUpdated,
            HandoffRecorded,
            ReplyDelta,
            RetryScheduled,
            ToolCallStarted,
            TurnFailed,
            TurnFinished,
            TurnStarted,
        )

        update = message.update
        if isinstance(update, ContextUpdated):
            self.context_report = update.report
            self._follow_shortened(update.report)
        elif isinstance(update, CompactionProgressed):
            # Triggered inside the turn (budget or provider overflow): its stage replaces "last";
            # "done" is followed at once by CompactionFinished, which says how it ended.
            if update.stage != "done":
                self.compaction_status = compaction_running(update.trigger, update.stage, update.detail)
                detail = f" {update.detail}" if update.detail else ""
                # The turn's esc stops it: the compaction shares the turn's cancel token.
                self.query_one(Prompt).set_busy(f"compacting: {update.stage}{detail} · esc cancels the reply")
        elif isinstance(update, CompactionFinished):
            self.compaction_status = compaction_ended(update.report)
            self.query_one(Prompt).set_busy(self._busy)
            notice, severity = compaction_notice(update.report)
            if severity != "information":  # a success shows on the meter; a failure is said once
                self.notify(notice, severity=severity, markup=False)
            self._refresh_inspector()
        elif isinstance(update, ContextSnipped | HandoffRecorded):
            # Where it happened in the turn: before its first step, or between two steps.
            if isinstance(update, HandoffRecorded):
                note = handoff_note()
            else:
                note = snip_note(update.mode, update.results, update.tokens_saved)
            if self._reply is None:
                self._reply = await self.messages.add_block(MessageBlock("assistant"))
            await self._reply.add_note(note)
        elif isinstance(update, ToolCallStarted):
            from foya_tui.ui.widgets.tool_block import ToolBlock

            if self._reply is None:
                self._reply = await self.messages.add_block(MessageBlock("assistant"))
            block = ToolBlock(update.call_id, update.name, update.arguments)
            self._running_tools[update.call_id] = block
            await self._reply.add_tool(block)
        elif isinstance(update, TurnStarted):
            self._reply = await self.messages.add_block(MessageBlock("assistant"))
            self._reply.start_stream()
        elif isinstance(update, ReplyDelta):
            if self._reply is None:
                self._reply = await self.messages.add_block(MessageBlock("assistant"))
            await self._reply.write(update.text)
        elif isinstance(update, RetryScheduled):
            self.notify(
                f"{update.reason}; retrying in {update.delay_seconds:.1f} s (attempt {update.attempt})",
                severity="information",
                markup=False,  # provider text: brackets in it are not markup
            )
        elif isinstance(update, TurnFinished):
            if update.notice:
                self.notify(update.notice, severity="warning", markup=False)
            await self._end_turn(f"⚠ {update.notice}" if update.notice else None)
        elif isinstance(update, TurnFailed):
            if update.kind == "cancelled":
                self.notify("Reply cancelled.", timeout=3)
                await self._end_turn("cancelled")
            else:
                self.notify(update.reason, severity="error", markup=False)
                await self._end_turn(f"✗ {update.reason}")

    async def on_tool_result_recorded(self, message: ToolResultRecorded) -> None:
        from foya_tui.ui.widgets.tool_block import ToolBlock

        update = message.update
        block = self._running_tools.pop(update.call_id, None)
        if block is None:
            # A call the runtime closed without starting it (the turn was cancelled first): it is
            # still shown, so that every call of the turn visibly has its result.
            if self._reply is None:
                self._reply = await self.messages.add_block(MessageBlock("assistant"))
            block = await self._reply.add_tool(ToolBlock(update.call_id, update.name, ""))
        block.finish(message.outcome)
        block.shortened = message.outcome.seq in self._shortened

    def _follow_shortened(self, report: Mapping[str, Any]) -> None:
        seqs = report.get("shortened_seqs") or ()
        shortened = frozenset(seq for seq in seqs if isinstance(seq, int))
        if shortened != self._shortened:
            self._shortened = shortened
            self._mark_shortened()

    def _mark_shortened(self) -> None:
        from foya_tui.ui.widgets.tool_block import ToolBlock

        for block in self.messages.query(ToolBlock):
            block.shortened = block.seq is not None and block.seq in self._shortened

    def on_tool_block_open_requested(self, message: ToolBlock.OpenRequested) -> None:
        self.bridge.read_tool_result(message.seq, message.name)

    def on_tool_result_read(self, message: ToolResultRead) -> None:
        # Imported on first use: the viewer is not needed for the first frame.
        from foya_tui.ui.screens.tool_output import ToolOutputScreen

        self.app.push_screen(
            ToolOutputScreen(f"{message.name} · full result", message.facts, message.prepared)
        )

    def on_approval_requested(self, message: ApprovalRequested) -> None:
        # Imported on first use: the dialog and the tool modules are not needed for the first frame.
        from foya_tui.runtime.tools.approval import Decision
        from foya_tui.ui.screens.approval import ApprovalScreen

        if message.answer.given:  # the turn was cancelled before the question arrived
            return
        answer = message.answer

        def answered(decision: Decision | None) -> None:
            self._approval = None
            if decision is None:
                # Escape: stop the turn, then deny, so the runtime closes every open call as cancelled.
                self.bridge.cancel_turn()
                answer.give(Decision.DENY)
            else:
                answer.give(decision)

        self._approval = ApprovalScreen(message.request, self.bridge.approval_mode or "ask")
        self.app.push_screen(self._approval, answered)

    async def _end_turn(self, marker: str | None) -> None:
        reply, self._reply = self._reply, None
        self._ended, self._sent = (self._sent, reply), None
        if self._approval is not None and self._approval.is_current:
            self._approval.dismiss(None)  # the turn ended while asking (its answer no longer matters)
        self._approval = None
        for block in self._running_tools.values():
            block.stop()
        self._running_tools.clear()
        if reply is not None:
            await reply.finish()
            if not reply.text.strip() and not reply.tools and not reply.notes:
                await reply.remove()  # a failure before any output leaves no empty block behind
        if marker:
            await self.messages.add_marker(marker)
        self.turn_running = False
        self._set_busy(None)

    # -- compaction, undo, rewind, inspector ------------------------------------------------------

    def _refused(self, action: str) -> bool:
        """Whether `action` cannot start now (and the user was told why)."""
        if self.turn_running:
            self.notify(
                f"Cannot {action} while a reply is being written; wait for it or press esc.",
                severity="warning",
            )
            return True
        if self._busy is not None:
            self.notify(f"Not yet: {self._busy}", timeout=3)
            return True
        if self.bridge.session is None:
            self.notify(NO_SESSION.format(action), timeout=3)
            return True
        return False

    def action_compact(self) -> None:
        """Compact the idle session now: the candidate is shown before anything is committed."""
        self._start_compaction(use_model=True)

    def action_compact_without_model(self) -> None:
        """Compact the idle session now with the deterministic fallback (no model is asked, SPEC
        K-10): the candidate is shown before anything is committed, as for `action_compact`."""
        self._start_compaction(use_model=False)

    def _start_compaction(self, *, use_model: bool) -> None:
        if self._refused("compact"):
            return
        self.compacting = self._proposing = True
        self._set_busy(COMPACTING)
        self.compaction_status = compaction_running("manual", "planning")
        self.bridge.compact(use_model=use_model)

    def action_cancel_compaction(self) -> None:
        self.bridge.cancel_compaction()

    def on_compaction_staged(self, message: CompactionStaged) -> None:
        self.compaction_status = compaction_running("manual", message.stage, message.detail)
        detail = f" {message.detail}" if message.detail else ""
        cancel = " · esc cancel" if self._proposing else ""
        self.query_one(Prompt).set_busy(f"compacting: {message.stage}{detail}{cancel}")

    def on_compaction_proposed(self, message: CompactionProposed) -> None:
        # Imported on first use: the dialog is not needed for the first frame.
        from foya_tui.ui.screens.compaction import CompactionScreen

        self._proposing = False
        self._set_busy(DECIDING)
        proposal = message.proposal

        def answered(accept: bool | None) -> None:
            if accept:
                self.bridge.commit_compaction(proposal)
            else:
                self.compaction_status = compaction_running("manual", "declining")
                self.bridge.decline_compaction(proposal)

        self.app.push_screen(CompactionScreen(proposal.checkpoint, message.model_failure), answered)

    def on_compaction_ended(self, message: CompactionEnded) -> None:
        self.compacting = self._proposing = False
        self.compaction_status = compaction_ended(message.report, declined=message.declined)
        notice, severity = compaction_notice(message.report, declined=message.declined)
        self.notify(notice, severity=severity, markup=False)
        self._set_busy(None)
        self._refresh_inspector()

    def action_undo_compaction(self) -> None:
        """Ask, then make the previous checkpoint (or none) current again by a new event."""
        from foya_tui.ui.screens.confirm import ConfirmScreen
        from foya_tui.ui.widgets.checkpoint_tree import short_id

        if self._refused("undo a checkpoint"):
            return
        report = self._inspector.report if self._inspector is not None else None
        current = report.current_id if report is not None else None
        if report is not None and current is None:
            self.notify("No checkpoint is current: there is nothing to undo.", timeout=3)
            return
        record = next((r for r in report.records if r.id == current), None) if report else None
        previous = record.checkpoint.previous_id if record and record.checkpoint else None
        what = f"checkpoint {short_id(current)}" if current else "the current checkpoint"
        then = (
            f"The earlier checkpoint {short_id(previous)} becomes current again."
            if previous
            else "The previous checkpoint (or none, so that the model sees the full history) becomes current."
        )
        body = f"{then} Nothing is deleted: a new event records the undo, and it can be compacted again."

        def answered(yes: bool | None) -> None:
            if yes and not self._refused("undo a checkpoint"):
                self._set_busy(UNDOING)
                self.bridge.undo_compaction()

        self.app.push_screen(ConfirmScreen(f"Undo {what}?", body, "Undo"), answered)

    def on_compaction_undone(self, message: CompactionUndone) -> None:
        from foya_tui.ui.widgets.checkpoint_tree import short_id

        restored = (
            f"{short_id(message.restored_id)} is current again"
            if message.restored_id
            else "no checkpoint is current: the model sees the full history"
        )
        self.notify(f"Checkpoint {short_id(message.undone_id)} undone; {restored}.", markup=False)
        self._set_busy(None)
        self._refresh_inspector()

    def action_open_inspector(self) -> None:
        """Show the session's checkpoints and compaction log (read in one worker call)."""
        from foya_tui.ui.screens.inspector import InspectorScreen

        session = self.bridge.session
        if session is None:
            self.notify(NO_SESSION.format("inspect"), timeout=3)
            return
        if self._inspector is not None:
            return
        self._inspector = InspectorScreen(
            session.info.short_id,
            refresh=self.bridge.inspect,
            undo=self.action_undo_compaction,
            compact=self.action_compact,
            search=self.bridge.search_history,
            read_sources=self.bridge.read_source_events,
            read_event=self.bridge.read_event,
        )

        def closed(_: None) -> None:
            self._inspector = None

        self.app.push_screen(self._inspector, closed)
        self.bridge.inspect()

    def action_search_history(self) -> None:
        """Open the inspector (if it is not open) with its search box focused."""
        self.action_open_inspector()
        if self._inspector is not None:
            self._inspector.start_search()

    def on_session_inspected(self, message: SessionInspected) -> None:
        if self._inspector is not None:
            self._inspector.show(
                message.report, message.max_fingerprints, message.models, message.checkpoints
            )

    def on_history_searched(self, message: HistorySearched) -> None:
        if self._inspector is not None:
            self._inspector.show_hits(message.query, message.hits, message.limit)

    def on_source_events_read(self, message: SourceEventsRead) -> None:
        if self._inspector is not None:
            self._inspector.show_sources(message.segment, message.events, message.total)

    def on_history_event_read(self, message: HistoryEventRead) -> None:
        if self._inspector is not None:
            self._inspector.open_event(message.hit, message.facts, message.prepared)

    def on_history_read_failed(self, message: HistoryReadFailed) -> None:
        if self._inspector is not None:
            self._inspector.show_failure(message.reason, message.read)

    def _refresh_inspector(self) -> None:
        if self._inspector is not None:
            self.bridge.inspect()

    def action_rewind_here(self) -> None:
        """Rewind to the focused message (the palette's "session: rewind to here")."""
        block = self._focused_block()
        if block is None:
            self.notify(SELECT_MESSAGE, timeout=4)
            return
        self._ask_rewind(block)

    def on_message_block_rewind_requested(self, message: MessageBlock.RewindRequested) -> None:
        message.stop()
        self._ask_rewind(message.block)

    def _focused_block(self) -> MessageBlock | None:
        focused = self.focused
        chain = (focused, *focused.ancestors) if focused is not None else ()
        return next((node for node in chain if isinstance(node, MessageBlock)), None)

    def action_fork_here(self) -> None:
        """Fork a new session that ends with the focused message (the palette's "session: fork here")."""
        block = self._focused_block()
        if block is None:
            self.notify(SELECT_MESSAGE, timeout=4)
            return
        self._fork_at(block)

    def action_fork_session(self) -> None:
        """Fork a new session with the whole conversation (the palette's "session: fork")."""
        if self._refused("fork"):
            return
        self._set_busy(FORKING)
        self.bridge.fork(None)

    def on_message_block_fork_requested(self, message: MessageBlock.ForkRequested) -> None:
        message.stop()
        self._fork_at(message.block)

    def _fork_at(self, block: MessageBlock) -> None:
        """Fork through the block's last event: a user message, or a reply with its tool results.
        Nothing to confirm: the session stays as it is, and the fork is a new one."""
        if self._refused("fork"):
            return
        if block.last_seq is None:
            self.notify("This message is not in the session's log yet.", timeout=3)
            return
        self._set_busy(FORKING)
        self.bridge.fork(block.last_seq)

    def on_session_forked(self, message: SessionForked) -> None:
        # The fork replaces this session on screen; an open inspector would show the old one.
        if self._inspector is not None and self._inspector.is_current:
            self._inspector.dismiss(None)
        self._route = message.session.route
        self._shortened = frozenset()
        self.compaction_status = None
        # The focused message belongs to the source and is about to go: typing goes on in the fork.
        self.query_one(Prompt).focus()
        source, fork = message.source_label, message.session.info.short_id
        self.notify(
            f"Forked session {source} through seq {message.at_seq} into session {fork}; "
            f"{source} is unchanged (foya --session {source}).",
            timeout=6,
            markup=False,
        )

    def _ask_rewind(self, block: MessageBlock) -> None:
        """Confirm, then rewind: to just before a user message (its text back in the prompt), or to
        just after a reply and its tool results."""
        from foya_tui.ui.screens.confirm import ConfirmScreen

        if self._refused("rewind"):
            return
        if block.role == "user":
            if block.seq is None:
                self.notify("This message is not in the session's log yet.", timeout=3)
                return
            to_seq, refill = block.seq - 1, block.text
            title = "Rewind to before this message?"
            body = (
                "This message and everything after it leave the conversation and the model's view; "
                "the log keeps them. Its text goes back into the prompt for editing."
            )
        else:
            if block.last_seq is None:
                self.notify("This message is not in the session's log yet.", timeout=3)
                return
            to_seq, refill = block.last_seq, None
            title = "Rewind to after this reply?"
            body = (
                "Everything after this reply (and its tool results) leaves the conversation and the "
                "model's view; the log keeps it. Checkpoints made until now are no longer used."
            )

        def answered(yes: bool | None) -> None:
            if yes and not self._refused("rewind"):
                self._set_busy(REWINDING)
                self.bridge.rewind(to_seq, refill)

        self.app.push_screen(ConfirmScreen(title, body, "Rewind"), answered)

    async def on_session_rewound(self, message: SessionRewound) -> None:
        await self.messages.show_history(message.items)
        self._mark_shortened()
        prompt = self.query_one(Prompt)
        if message.refill:
            typed = prompt.text.strip()
            # What was already typed is kept below the returned message rather than lost.
            prompt.load_text(message.refill + (f"\n\n{typed}" if typed else ""))
            prompt.move_cursor(prompt.document.end)
        prompt.focus()
        self.notify(
            f"Rewound to seq {message.to_seq}; the log keeps everything after it.", timeout=4, markup=False
        )
        self._set_busy(None)
        self._refresh_inspector()


def compaction_notice(report: Mapping[str, Any], *, declined: bool = False) -> tuple[str, str]:
    """One line for a notification about how a compaction ended, and its severity."""
    from foya_tui.ui.widgets.budget_meter import one_line, tokens
    from foya_tui.ui.widgets.checkpoint_tree import counted

    outcome = one_line(report.get("outcome"))
    reason = one_line(report.get("reason"))
    if outcome == "accepted":
        before, after = tokens(report.get("tokens_before")), tokens(report.get("tokens_after"))
        segments = counted(tokens(report.get("segments")), "segment", "segments")
        shape = f"{segments}, level {tokens(report.get('level'))}"
        return f"Context compacted: {before:,} → {after:,} tokens ({shape}).", "information"
    if declined:
        return "Compaction declined; nothing was committed.", "information"
    if outcome == "cancelled":
        return "Compaction cancelled; nothing was written.", "information"
    if outcome == "nothing_to_compact":
        return f"Nothing to compact: {reason}.", "information"
    severity = "error" if outcome == "failed" else "warning"
    return f"Compaction {outcome.replace('_', ' ')}: {reason}", severity

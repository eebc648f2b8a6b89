"""Provides the conversation screen: header, streaming message list, budget meter, prompt and footer.

The screen renders what the Bridge reports and decides when a submission may be sent; it never
calls the runtime itself. The budget meter follows the screen's `context_report` and
`input_steps` reactives (bound with `data_bind`), which the Bridge's messages set.

Tool calls appear as ToolBlocks inside the turn's assistant block, as they start and finish; the
latest compiled report says which results the model sees shortened, and those blocks show a badge.
A call that needs approval opens the approval dialog; the turn's thread waits for its answer.
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
    ContextReported,
    RouteResolved,
    RoutesListed,
    RouteSwitched,
    RuntimeUpdated,
    SessionCreated,
    SessionOpened,
    StepsRecorded,
    ToolResultRead,
    ToolResultRecorded,
)
from foya_tui.ui.widgets.budget_meter import BudgetMeter, MeterLine
from foya_tui.ui.widgets.message_block import MessageBlock
from foya_tui.ui.widgets.message_list import MessageList
from foya_tui.ui.widgets.prompt import Prompt

if TYPE_CHECKING:
    from foya_tui.runtime.providers.routes import Route
    from foya_tui.runtime.runtime import Runtime
    from foya_tui.runtime.session import Session
    from foya_tui.ui.screens.approval import ApprovalScreen
    from foya_tui.ui.widgets.tool_block import ToolBlock

OPENING = "opening the session…"
REPLYING = "a reply is being written · esc cancel · you can type your next message"
SWITCHING = "switching the route…"
SIDEBAR_FROM = 100
"""Terminal width (columns) from which the budget meter is a sidebar rather than one line."""
SWITCH_REFUSED = "The route cannot change while a reply is being written; wait for it or press esc."
EMPTY_HINT = "Nothing here yet. Type a message below and press Enter; every message is kept in a local log."
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
            "ctrl+r",
            "switch_route",
            "route",
            id="route.switch",
            tooltip="Choose the model route for the next message (nothing is sent)",
        ),
    ]

    context_report: var[Mapping[str, Any] | None] = var(None)
    """The compiled context of the next request (`RequestView.report()`), shown by the meter."""
    input_steps: var[tuple[int, ...]] = var(())
    """Input tokens of each model call of this session, for the meter's sparkline."""

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
        # The breakpoint's class, set now: set by the first resize, it would restyle the whole screen
        # once more before the first frame (about 20 ms, tests/bench/bench_startup.py).
        self.add_class("-narrow" if self.app.size.width < SIDEBAR_FROM else "-wide")

    def compose(self) -> ComposeResult:
        yield Static(id="header")
        yield MeterLine().data_bind(report=ConversationScreen.context_report)
        with Horizontal(id="main"):
            yield MessageList()
            yield BudgetMeter().data_bind(
                report=ConversationScreen.context_report, steps=ConversationScreen.input_steps
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
        if action == "cancel_turn":
            return self.turn_running  # hidden from the footer when there is nothing to cancel
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
        await self.messages.add_block(MessageBlock("user", text))
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
        self.bridge.new_conversation()
        await self.messages.clear()
        self._shortened = frozenset()  # seqs are per session: the old ones mean nothing in the new one
        self.input_steps = ()
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

    def on_route_switched(self, message: RouteSwitched) -> None:
        self._route = message.route
        self._show_header(self.bridge.session)
        self._set_busy(None)

    async def on_bridge_failed(self, message: BridgeFailed) -> None:
        self.notify(message.reason, severity="error", markup=False)
        if self.turn_running:
            await self._end_turn(f"✗ {message.reason}")
        else:
            self._set_busy(None)

    async def on_runtime_updated(self, message: RuntimeUpdated) -> None:
        # Imported on the first update, not at start-up (tests/bench/bench_startup.py).
        from foya_tui.runtime.updates import (
            ContextUpdated,
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
        if self._approval is not None and self._approval.is_current:
            self._approval.dismiss(None)  # the turn ended while asking (its answer no longer matters)
        self._approval = None
        for block in self._running_tools.values():
            block.stop()
        self._running_tools.clear()
        if reply is not None:
            await reply.finish()
            if not reply.text.strip() and not reply.tools:
                await reply.remove()  # a failure before any output leaves no empty block behind
        if marker:
            await self.messages.add_marker(marker)
        self.turn_running = False
        self._set_busy(None)

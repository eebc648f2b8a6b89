"""Provides the conversation screen: header, streaming message list, budget meter, prompt and footer.

The screen renders what the Bridge reports and decides when a submission may be sent; it never
calls the runtime itself. The budget meter follows the screen's `context_report` and
`input_steps` reactives (bound with `data_bind`), which the Bridge's messages set.

ConversationScreen owns the layout, the Bridge, what the screen is busy with (a
ConversationState: every refusal asks it) and what outlives one flow: the route and its
switcher, the results the model sees shortened (their blocks show a badge), the tool-output
viewer and the inspector (the session's checkpoints and compaction log, refreshed after each
change; its searches and reads of history run in Bridge workers too, and their results are
handed to it from here). The flows are mixins it inherits, each in its own module:

- TurnFlow (conversation_turn.py): send, stream, tool calls and their approval, cancel;
- CompactionFlow (conversation_compaction.py): a manual compaction, accepted or declined, and undo;
- HistoryFlow (conversation_history.py): rewind to a message, fork a new session;
- CommandFlow (conversation_commands.py): slash commands, the help screen, the approval mode.

What they may use of the screen is spelled out in ConversationHost (conversation_host.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.content import Content
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import Footer, Static

from foya_tui.ui.actions import BoundIn, bindings_of
from foya_tui.ui.bridge import Bridge
from foya_tui.ui.messages import (
    BridgeFailed,
    ContextReported,
    ForeignEventsFound,
    HistoryEventRead,
    HistoryPageRead,
    HistoryReadFailed,
    HistorySearched,
    LastCompactionRead,
    ProviderPrepared,
    RouteResolved,
    RoutesListed,
    RouteSwitched,
    SearchIndexStale,
    SessionCreated,
    SessionInspected,
    SessionOpened,
    SourceEventsRead,
    StepsRecorded,
    StoreRepaired,
    StoreRepairProgressed,
    ToolResultRead,
)
from foya_tui.ui.screens.conversation_commands import CommandFlow
from foya_tui.ui.screens.conversation_compaction import CompactionFlow
from foya_tui.ui.screens.conversation_history import HistoryFlow
from foya_tui.ui.screens.conversation_sessions import SessionsFlow
from foya_tui.ui.screens.conversation_state import NO_SESSION, Activity, ConversationState, Refusal
from foya_tui.ui.screens.conversation_turn import TurnFlow
from foya_tui.ui.widgets.budget_meter import (
    BudgetMeter,
    CompactionStatus,
    MeterLine,
    compaction_ended,
)
from foya_tui.ui.widgets.message_list import MessageList
from foya_tui.ui.widgets.prompt import Prompt, placeholder
from foya_tui.ui.widgets.slash_completions import SlashCompletions

if TYPE_CHECKING:
    from pathlib import Path

    from foya_tui.runtime.context.report import ContextReport
    from foya_tui.runtime.providers.routes import Route
    from foya_tui.runtime.runtime import Runtime
    from foya_tui.runtime.session import Session
    from foya_tui.ui.screens.inspector import InspectorScreen
    from foya_tui.ui.widgets.tool_block import ToolBlock

SIDEBAR_FROM = 100
"""Terminal width (columns) from which the budget meter is a sidebar rather than one line."""
EMPTY_HINT = "Nothing here yet. Type a message below and press Enter; every message is kept in a local log."
SIMULATOR_HINT = (
    "No model is configured, so the offline simulator answers: a deterministic stand-in that "
    "reports real token counts. The README shows how to configure a model."
)


# The flows precede Screen so that TurnFlow's cooperative __init__ runs. No method is defined in
# two of these classes: Textual dispatches an `on_*` handler from every class of the MRO, so a
# duplicate would run twice (tests/ui/test_conversation_flows.py checks).
class ConversationScreen(TurnFlow, CompactionFlow, HistoryFlow, CommandFlow, SessionsFlow, Screen[None]):
    """The main screen: one conversation with the agent."""

    CSS_PATH = "conversation.tcss"
    # Below 100 columns the sidebar meter gives way to a one-line meter under the header.
    # Textual annotates it `ClassVar[...] | None`, which mypy takes for an instance variable.
    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = [(0, "-narrow"), (SIDEBAR_FROM, "-wide")]  # type: ignore[misc]
    # Generated from the table of user actions (ui/actions.py), which the help screen shows too.
    # Three are on esc: away from the prompt, back to it; at the prompt, cancel the reply or a
    # running compaction (check_action picks).
    BINDINGS: ClassVar[list[BindingType]] = [
        *bindings_of(BoundIn.CONVERSATION),
        # Only while slash completions show (check_action): the prompt keeps ↑/↓ otherwise.
        Binding(
            "up",
            "choose_completion(-1)",
            show=False,
            priority=True,
            id="prompt.completion_up",
            tooltip="Highlight the previous slash command",
        ),
        Binding(
            "down",
            "choose_completion(1)",
            show=False,
            priority=True,
            id="prompt.completion_down",
            tooltip="Highlight the next slash command",
        ),
    ]

    context_report: var[ContextReport | None] = var(None)
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
        config_file: Path | None = None,
    ) -> None:
        super().__init__()
        self.bridge = Bridge(runtime, model=model, config_file=config_file)
        self._session_id = session_id
        self._route: Route | None = None
        self._shortened: frozenset[int] = frozenset()
        """Seqs of the results the latest compiled request shows the model shortened (SPEC T-1)."""
        self._state = ConversationState(Activity.OPENING)
        """What runs now; every refusal rule asks it (conversation_state.py)."""
        self._inspector: InspectorScreen | None = None
        self._index_problem_shown: str | None = None
        """The search-index problem last offered for repair (each is said once)."""
        self._repair_tenths = 0
        """How far the running repair's index rebuild was last said to be, in tenths."""
        self._provider_asked = False
        self.provider_ready = False
        """Whether the provider library is loaded (until then a first reply waits for it)."""
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
        yield SlashCompletions()
        yield Prompt(self._prompt_hint())
        yield Footer()
        yield self.bridge

    def on_mount(self) -> None:
        self._show_header(None)
        self._set_activity(Activity.OPENING)
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
    def state(self) -> ConversationState:
        """What the screen is busy with now."""
        return self._state

    @property
    def ready(self) -> bool:
        """True when Enter would send a message now."""
        return self._state.idle

    @property
    def turn_running(self) -> bool:
        return self._state.turn_running

    @property
    def compacting(self) -> bool:
        """A manual compaction is under way (proposing, waiting for the answer, or committing)."""
        return self._state.compacting

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

    def _set_activity(self, activity: Activity | None) -> None:
        self._state = ConversationState(activity)
        self.query_one(Prompt).set_busy(self._state.busy_line)
        self.refresh_bindings()

    def _refused(self, refusal: Refusal | None) -> bool:
        """Whether the state refused an action (and the user was told why)."""
        if refusal is None:
            return False
        self.notify(refusal.reason, severity=refusal.severity, timeout=refusal.timeout)
        return True

    def _history_refused(self, action: str) -> bool:
        """Whether `action`, which changes how history is seen, cannot start now (the user was told why)."""
        return self._refused(self._state.refuse(action, has_session=self.bridge.session is not None))

    @property
    def route(self) -> Route | None:
        """The route the next message goes to (None while the session opens)."""
        return self._route

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "focus_prompt":
            return self.focused is not self.query_one(Prompt)
        # Both are on esc: hidden from the footer (and passed over) when there is nothing to cancel.
        if action == "cancel_turn":
            return self._state.turn_running
        if action == "cancel_compaction":
            return self._state.proposing
        if action == "choose_completion":
            return self.query_one(SlashCompletions).open
        return True

    def action_focus_prompt(self) -> None:
        self.query_one(Prompt).focus()

    def on_prompt_messages_wanted(self, message: Prompt.MessagesWanted) -> None:
        self.messages.select_last()

    def on_key(self, event: events.Key) -> None:
        # Typing away from the prompt types into it: a letter no binding of the focused message
        # takes (`r`, `f`, `c`, `o`…) goes to the prompt, which takes the focus back.
        prompt = self.query_one(Prompt)
        if self.focused is prompt or not event.is_printable or event.character is None:
            return
        if event.key in self.app.active_bindings:
            return
        event.stop()
        event.prevent_default()
        prompt.focus()
        prompt.move_cursor(prompt.document.end)  # after what was typed, as if typing had gone on
        prompt.insert(event.character)

    def action_scroll_messages(self, pages: int) -> None:
        if pages < 0:
            self.messages.scroll_page_up(animate=False)
        else:
            self.messages.scroll_page_down(animate=False)
        self.messages.want_more()

    # -- the route, a new conversation ----------------------------------------------------------

    def action_switch_route(self) -> None:
        """Open the route switcher (its routes are listed by the Bridge, which reads the store)."""
        if self._refused(self._state.refuse_switch()):  # a reply, the opening, another switch…
            return
        self.bridge.list_routes()

    def on_routes_listed(self, message: RoutesListed) -> None:
        # Imported on first use: the switcher is not needed for the first frame.
        from foya_tui.ui.screens.routes import RouteSwitcher

        self.app.push_screen(RouteSwitcher(message.options, message.current_id), self._route_chosen)

    def _route_chosen(self, route: Route | None) -> None:
        if route is None or (self._route is not None and route.id == self._route.id):
            return
        # Asked again: something may have started while the switcher was opening (a message sent).
        if self._refused(self._state.refuse_switch()):
            return
        self._set_activity(Activity.SWITCHING)
        self.bridge.switch_route(route)

    def on_route_switched(self, message: RouteSwitched) -> None:
        self._route = message.route
        self._show_header(self.bridge.session)
        self._set_activity(None)

    async def new_conversation(self) -> None:
        """Start a new conversation on the same route (the session is created on the first send)."""
        if self._refused(self._state.refuse_new_conversation()):
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
        self._set_activity(None)

    async def on_session_opened(self, message: SessionOpened) -> None:
        self._route = message.session.route
        self._show_header(message.session)
        await self.messages.show_history(message.items, has_older=message.has_older)
        self._mark_shortened()
        self._set_activity(None)
        # After the page, so that reading the meter does not hold the prompt up.
        self.bridge.opened_shown(message.session)

    async def on_foreign_events_found(self, message: ForeignEventsFound) -> None:
        """Another Foya wrote to this session while it sat idle here: show it as it now is. Busy (a
        send may be under way), the offer is left: the send's own check refuses and reloads."""
        if not self._state.idle or self.bridge.session is not message.session:
            return
        self.bridge.shown_through(message.newest_seq)  # before the await: a send during it builds on this
        await self.messages.show_history(message.items, has_older=message.has_older)
        self._mark_shortened()
        events = "event" if message.count == 1 else "events"
        self.notify(
            f"Another Foya added {message.count} {events} to this conversation; it is shown as it now is",
            markup=False,
        )

    def on_text_area_changed(self, message: Prompt.Changed) -> None:
        self._follow_completions(message)
        # The provider library loads while the first message is typed, not when the screen opens:
        # an import in progress holds the module locks Textual's shutdown needs, so a quit right
        # after opening would wait for it (tests/bench/bench_tui_scale.py), and opening would
        # compete with it for the interpreter.
        if not self._provider_asked and self._route is not None and message.text_area.text:
            self._provider_asked = True
            self.bridge.prepare_provider()

    def on_provider_prepared(self, message: ProviderPrepared) -> None:
        self.provider_ready = True

    def on_message_list_page_wanted(self, message: MessageList.PageWanted) -> None:
        self.bridge.read_page(message.request)

    async def on_history_page_read(self, message: HistoryPageRead) -> None:
        await self.messages.show_page(message.request, message.items, more=message.more)
        self._mark_shortened()

    def on_message_list_prompt_wanted(self, message: MessageList.PromptWanted) -> None:
        self.query_one(Prompt).focus()

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
        self.compaction_status = compaction_ended(message.result)

    def _prompt_hint(self) -> str:
        """The prompt's hint, naming the newline and help keys in force (`[keys]` may move them)."""
        from foya_tui.ui.actions import ACTIONS, key_text
        from foya_tui.ui.keymap import Keymap

        keymap = getattr(self.app, "keymap", None)
        keys = keymap if isinstance(keymap, Keymap) else Keymap()
        first = {
            action.id: key_text((keys.keys_of(action) or "").split(",")[0])
            for action in ACTIONS
            if action.id in ("prompt.newline", "help.show")
        }
        return placeholder(first["prompt.newline"], first["help.show"])

    async def on_bridge_failed(self, message: BridgeFailed) -> None:
        self.notify(message.reason, severity="error", markup=False)
        if self._state.turn_running:
            await self._end_turn(f"✗ {message.reason}")
        elif not self._state.compacting:  # a manual compaction ends with its own message
            self._set_activity(None)

    def _follow_shortened(self, report: ContextReport) -> None:
        shortened = frozenset(report.shortened_seqs)
        if shortened != self._shortened:
            self._shortened = shortened
            self._mark_shortened()

    def _mark_shortened(self) -> None:
        from foya_tui.ui.widgets.tool_block import ToolBlock

        for block in self.messages.query(ToolBlock):
            block.shortened = block.seq is not None and block.seq in self._shortened

    # -- the tool-output viewer -----------------------------------------------------------------

    def on_tool_block_open_requested(self, message: ToolBlock.OpenRequested) -> None:
        self.bridge.read_tool_result(message.seq, message.name)

    def on_tool_result_read(self, message: ToolResultRead) -> None:
        # Imported on first use: the viewer is not needed for the first frame.
        from foya_tui.ui.screens.tool_output import ToolOutputScreen

        self.app.push_screen(
            ToolOutputScreen(f"{message.name} · full result", message.facts, message.prepared)
        )

    # -- the inspector ---------------------------------------------------------------------------

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
            self._inspector.show(message.report, message.max_fingerprints, message.models)

    def on_history_searched(self, message: HistorySearched) -> None:
        if self._inspector is not None:
            self._inspector.show_hits(message.query, message.hits, message.limit)

    def on_source_events_read(self, message: SourceEventsRead) -> None:
        if self._inspector is not None:
            self._inspector.show_sources(message.segment, message.events, message.total)

    def on_history_event_read(self, message: HistoryEventRead) -> None:
        if self._inspector is not None:
            self._inspector.open_event(message.hit, message.facts, message.prepared)

    # -- the store's derived data ------------------------------------------------------------------

    def on_search_index_stale(self, message: SearchIndexStale) -> None:
        """Offered once per problem: the same one again (each failed search) says nothing new."""
        if message.reason == self._index_problem_shown:
            return
        self._index_problem_shown = message.reason
        self.notify(
            f"Search cannot answer: {message.reason}. Rebuild it with /repair or, in the command "
            "palette, “search index: rebuild”; the conversation is not affected.",
            severity="warning",
            timeout=12,
            markup=False,
        )

    def action_repair_store(self) -> None:
        if self.bridge.session is None:
            self.notify(NO_SESSION.format("repair"), timeout=3)
            return
        self._repair_tenths = 0
        self.notify("Rebuilding the search index…", timeout=4)
        self.bridge.repair_store()

    def on_store_repair_progressed(self, message: StoreRepairProgressed) -> None:
        # Every tenth of the way, not every batch: a toast per batch would bury the screen.
        tenths = message.done * 10 // message.total if message.total else 0
        if self._repair_tenths < tenths < 10:
            self._repair_tenths = tenths
            self.notify(
                f"Rebuilding the search index: {message.done:,} of {message.total:,} events", timeout=3
            )

    def on_store_repaired(self, message: StoreRepaired) -> None:
        self._index_problem_shown = None
        if not message.done:
            self.notify("Nothing needed repair: the search index is in step with history.", timeout=5)
            return
        self.notify("Repaired: " + "; ".join(message.done), timeout=8, markup=False)

    def on_history_read_failed(self, message: HistoryReadFailed) -> None:
        if self._inspector is not None:
            self._inspector.show_failure(message.reason, message.read)

    def _refresh_inspector(self) -> None:
        if self._inspector is not None:
            self.bridge.inspect()

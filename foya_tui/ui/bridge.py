"""Provides the Bridge: the one owner of every worker that calls the runtime.

The runtime is blocking (SQLite, provider streams), so each call runs in a thread worker and
reports back only through `post_message`; nothing here touches another widget. The Bridge is an
invisible widget so that its messages bubble to the screen that mounted it.

Besides turns, it runs what changes how history is seen: a manual compaction (proposed, then
committed or declined once the user has looked at it; with the model's summary, or the
deterministic fallback without a model), undoing a checkpoint, a rewind, a fork into a new session
(which it then opens), and the inspector's reads: everything compaction knows (`runtime.inspect`),
a search of the whole valid history (`runtime.search`), the events a segment summarises, and one
event's full text.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.widget import Widget
from textual.worker import Worker, get_current_worker

from foya_tui.ui.messages import (
    ApprovalModeChanged,
    BridgeFailed,
    CompactionEnded,
    CompactionProposed,
    CompactionStaged,
    CompactionUndone,
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
    RuntimeUpdated,
    SearchIndexStale,
    SessionCreated,
    SessionDeleted,
    SessionForked,
    SessionInspected,
    SessionOpened,
    SessionRenamed,
    SessionRewound,
    SessionsListed,
    SessionSwitched,
    SettingNotSaved,
    SourceEventsRead,
    StepsRecorded,
    StoreRepaired,
    StoreRepairProgressed,
    ToolResultRead,
    ToolResultRecorded,
    TranscriptExported,
    TurnRecorded,
    TurnRefused,
)
from foya_tui.ui.widgets.message_list import history_items

if TYPE_CHECKING:
    from foya_tui.runtime.compaction.attempt import CompactionResult, Proposal
    from foya_tui.runtime.compaction.report import CoveredBy, RecallHit
    from foya_tui.runtime.model import Event
    from foya_tui.runtime.providers.client import CancelToken
    from foya_tui.runtime.providers.routes import Route
    from foya_tui.runtime.runtime import Runtime, SessionLease
    from foya_tui.runtime.session import Session
    from foya_tui.ui.widgets.message_list import HistoryItem, PageRequest


SEARCH_LIMIT = 50
"""Hits a search of history lists (the newest)."""
MAX_SOURCE_EVENTS = 2_000
"""Source events of one segment listed at most (the first); a long import's segment may hold more."""


def one_line(exc: BaseException) -> str:
    """A failure as one sentence for a notification: never a traceback."""
    from foya_tui.runtime.providers.errors import one_line as flatten

    text = str(exc.args[0]) if exc.args else str(exc)
    return flatten(text, limit=200) or type(exc).__name__


def newest_page(runtime: Runtime, session_id: str) -> tuple[list[HistoryItem], bool]:
    """The conversation's newest page of stored history as items, and whether more lies before it."""
    from foya_tui.ui.widgets.message_list import PAGE_EVENTS

    page = runtime.history_before(session_id, events=PAGE_EVENTS)
    return history_items(page.events), page.more


def recorded_steps(runtime: Runtime, session_id: str) -> tuple[int, ...]:
    """The meter's sparkline from the session's usage records alone (read on the kind index)."""
    from foya_tui.runtime.model import EventKind

    return input_steps(runtime.events_of_kind(session_id, EventKind.PROVIDER_USAGE))


def input_steps(events: Iterable[Event]) -> tuple[int, ...]:
    """Input tokens of each earlier model call, from history's usage records (the meter's sparkline);
    a step whose provider reported no usage is left out rather than drawn as zero."""
    from foya_tui.runtime.model import EventKind

    steps: list[int] = []
    for event in events:
        if event.kind is not EventKind.PROVIDER_USAGE:
            continue
        usage = event.payload.get("usage")
        tokens = usage.get("input_tokens") if isinstance(usage, Mapping) else None
        if isinstance(tokens, int) and not isinstance(tokens, bool):
            steps.append(tokens)
    return tuple(steps)


class Bridge(Widget):
    """Opens or resumes the session, runs turns and cancels them, all off the UI thread."""

    DEFAULT_CSS = "Bridge { display: none; }"

    FOREIGN_POLL_SECONDS: float = 2.0
    """How often an idle conversation looks for events another Foya appended (one indexed query);
    0 turns the look off (tests that stage a foreign write before a send)."""

    def __init__(
        self,
        runtime: Runtime | Callable[[], Runtime],
        *,
        model: str | None = None,
        config_file: Path | None = None,
    ) -> None:
        """`runtime` may be a factory: `foya` passes one, so that importing the runtime and opening
        the database happen in a worker after the first frame, not before it."""
        super().__init__()
        self._open_runtime = runtime if callable(runtime) else None
        self.runtime: Runtime | None = None if callable(runtime) else runtime
        self._model = model
        # Written by workers, read by the UI only after the message announcing them arrived.
        self._route: Route | None = None
        self._session: Session | None = None
        self._cancel: CancelToken | None = None
        self._compaction_cancel: CancelToken | None = None
        self._shown_seq = 0
        """The newest seq of the open session that the conversation shows: a larger one in the store
        was written by another Foya (the session lease makes writes exclusive, not invisible)."""
        self._config_file = config_file
        self._unsaved: dict[str, str] = {}
        """Settings changed but not yet written; a worker takes them all (the newest value wins)."""
        self._unsaved_lock = threading.Lock()
        self._writing_settings = threading.Lock()
        # This process's writes in progress, so that the idle look never takes them for another's.
        self._writes_guard = threading.Lock()
        self._writes_in_progress = 0

    def on_mount(self) -> None:
        if self.FOREIGN_POLL_SECONDS > 0:
            self.set_interval(self.FOREIGN_POLL_SECONDS, self._look_for_foreign_events)

    def _look_for_foreign_events(self) -> None:
        """On the UI thread: start the look only when a session is open and nothing of ours writes."""
        if self._session is not None and self.runtime is not None and not self._writes_in_progress:
            self._show_foreign_events()

    @work(thread=True, exclusive=True, group="poll", exit_on_error=False)
    def _show_foreign_events(self) -> None:
        """What another Foya appended to the open session is offered to the screen without a key
        press; `_shown_seq` moves only when the screen shows it (`shown_through`), so a send that
        raced the look is still refused by `_writing` rather than built on unseen events."""
        session, runtime = self._session, self.runtime
        if session is None or runtime is None:
            return
        try:
            with self._writes_guard:
                # Under the guard: a write of ours cannot start between the look and the read.
                if self._writes_in_progress or self._session is not session:
                    return
                newest, shown = runtime.last_seq(session.id), self._shown_seq
                if newest <= shown:
                    return
                items, has_older = newest_page(runtime, session.id)
            self.post_message(
                ForeignEventsFound(
                    session, items, has_older=has_older, newest_seq=newest, count=newest - shown
                )
            )
        except Exception as exc:  # a locked or damaged database: the next look tries again
            self.post_message(BridgeFailed(f"Looking for changes by another Foya failed: {one_line(exc)}"))

    def shown_through(self, seq: int) -> None:
        """On the UI thread: the conversation now shows the open session through `seq`; its meter
        is read again, since another Foya's events change the next request."""
        self._shown_seq = max(self._shown_seq, seq)
        self._refresh_next_request()

    @work(thread=True, exclusive=True, group="next-request", exit_on_error=False)
    def _refresh_next_request(self) -> None:
        try:
            runtime, session = self._open_session()
            self._post_next_request(runtime, session)
        except Exception as exc:
            self.post_message(BridgeFailed(f"The context report failed: {one_line(exc)}"))

    @property
    def session(self) -> Session | None:
        """The open session, or None before a new conversation's first message."""
        return self._session

    @property
    def approval_mode(self) -> str | None:
        """What tools may do without asking (`read-only`, `ask`, `auto`); None until the runtime exists."""
        return self.runtime.approval_mode if self.runtime is not None else None

    def _open(self) -> Runtime:
        """The runtime, opened if it is still a factory, with the TUI's approver installed."""
        if self.runtime is None and self._open_runtime is not None:
            self.runtime = self._open_runtime()
        assert self.runtime is not None
        from foya_tui.ui.approval import BridgeApprover

        # Before any session exists: a session takes the runtime's approver when it is created.
        # Always this bridge's own, since a runtime may outlive an earlier app (tests do that).
        self.runtime.approver = BridgeApprover(self.post_message)
        return self.runtime

    @work(thread=True, exclusive=True, group="session", exit_on_error=False)
    def start(self, session_id: str | None = None) -> None:
        """Resolve the route, then resume `session_id` (posting its history) or wait for a first send."""
        try:
            runtime = self._open()
            self._route = runtime.route_for(self._model)
            if session_id is not None:
                # Without --model a resumed session continues on the model of its last reply.
                session = runtime.open_session(session_id, self._route if self._model else None)
                self._show_opened(runtime, session)
                return
        except Exception as exc:
            self.post_message(BridgeFailed(one_line(exc)))
            if self._route is None:
                return
        # A new conversation, or a resume that failed: the session is created on the first send,
        # so opening and closing Foya does not leave empty sessions behind.
        self._session = None
        self.post_message(RouteResolved(self._route))
        # After RouteResolved, so the prompt is ready while the preview loads the tokenizer.
        self._post_preview()

    def _post_preview(self) -> None:
        """Post what a new conversation's first request would carry (pinned context and budget)."""
        assert self.runtime is not None and self._route is not None
        try:
            report = self.runtime.preview_context(self._route).report()
            # A thread cannot be stopped: a preview overtaken by a newer one must not post a stale report.
            if not get_current_worker().is_cancelled:
                self.post_message(ContextReported(report, ()))
        except Exception as exc:
            self.post_message(BridgeFailed(f"The context preview failed: {one_line(exc)}"))

    @work(thread=True, exclusive=True, group="provider", exit_on_error=False)
    def prepare_provider(self) -> None:
        """Load the provider library (LiteLLM) off the UI thread, so the first reply does not wait
        for the import (call once the runtime is open: RouteResolved or SessionOpened)."""
        try:
            assert self.runtime is not None, "the provider is prepared once the runtime is open"
            self.runtime.prepare_provider()
            self.post_message(ProviderPrepared())
        except Exception as exc:
            # The first request loads it again and reports what fails then, in its turn.
            self.post_message(BridgeFailed(f"The provider library could not be loaded: {one_line(exc)}"))

    # One group for the workers that post a report: a newer one (a switch) overtakes an older one.
    @work(thread=True, exclusive=True, group="context", exit_on_error=False)
    def preview(self) -> None:
        """Post a new conversation's preview again (after `new_conversation`)."""
        if self.runtime is not None and self._route is not None:
            self._post_preview()

    @work(thread=True, exclusive=True, group="routes", exit_on_error=False)
    def list_routes(self) -> None:
        """Post the routes the switcher offers, each with its window and baseline for this session."""
        try:
            assert self.runtime is not None, "routes are listed only after the session was opened"
            session = self._session
            current = session.route if session is not None else self._route
            options = self.runtime.routes(session.id if session is not None else None)
            self.post_message(RoutesListed(options, current.id if current is not None else None))
        except Exception as exc:
            self.post_message(BridgeFailed(one_line(exc)))

    @work(thread=True, exclusive=True, group="context", exit_on_error=False)
    def switch_route(self, route: Route) -> None:
        """Use `route` from the next message on and post the next request compiled for it; nothing is
        sent (call only between turns). Before the first message it is the route the new session gets."""
        try:
            assert self.runtime is not None, "a route is switched only after the session was opened"
            session = self._session
            if session is not None:
                session.switch_route(route)
                report = session.context().report()
            else:
                report = self.runtime.preview_context(route).report()
            self._route = route
            self.post_message(RouteSwitched(route))
            self.post_message(ContextReported(report))
        except Exception as exc:
            self.post_message(BridgeFailed(one_line(exc)))

    @work(thread=True, exclusive=True, group="context", exit_on_error=False)
    def set_approval_mode(self, mode: str) -> None:
        """Let tools work in approval `mode` from the next step on (call only between turns), then
        post the next request: the system prompt says the mode, so its size may change."""
        try:
            assert self.runtime is not None, "the approval mode changes only after the session was opened"
            self.runtime.set_approval_mode(mode)
            session = self._session
            if session is not None:
                report = session.context().report()
            else:
                assert self._route is not None
                report = self.runtime.preview_context(self._route).report()
            self.post_message(ApprovalModeChanged(mode))
            self.post_message(ContextReported(report))
        except Exception as exc:
            self.post_message(BridgeFailed(one_line(exc)))

    def save_setting(self, name: str, value: str) -> None:
        """Save a setting the user changed (`theme`, `approval_mode`) into config.toml, in a worker;
        a failure posts SettingNotSaved. Several quick changes end with the last one in the file."""
        if self._config_file is None:
            return
        with self._unsaved_lock:
            self._unsaved[name] = value
        self._write_settings(self._config_file)

    @work(thread=True, group="settings", exit_on_error=False)
    def _write_settings(self, config_file: Path) -> None:
        from foya_tui.config_file import ConfigNotSaved, save_setting

        # Taking the pending values and writing them is one step: a later worker finds either
        # nothing left or newer values, never older ones to write over the newer.
        with self._writing_settings:
            with self._unsaved_lock:
                pending, self._unsaved = self._unsaved, {}
            for name, value in pending.items():
                try:
                    save_setting(config_file, name, value)
                except ConfigNotSaved as exc:
                    self.post_message(SettingNotSaved(exc.message))

    def new_conversation(self) -> None:
        """Forget the current session; the next send starts a new one (call only between turns).
        The meter is then reset to the route's preview."""
        self._session = None
        self.preview()

    def send(self, text: str) -> None:
        """Start a turn with `text` (the caller ensures no other turn is running)."""
        # Runtime modules are imported when first used, not at start-up (tests/bench/bench_startup.py).
        from foya_tui.runtime.providers.client import CancelToken

        self._cancel = CancelToken()
        self._run_turn(text, self._cancel)

    def cancel_turn(self) -> None:
        """Ask the running turn to stop; the runtime then ends it with TurnFailed(kind="cancelled")."""
        if self._cancel is not None:
            self._cancel.cancel()

    def on_unmount(self) -> None:
        # A thread worker cannot be killed, and the interpreter waits for it at exit: stop the stream
        # and any compaction request.
        self.cancel_turn()
        self.cancel_compaction()

    @work(thread=True, exclusive=True, group="turn", exit_on_error=False)
    def _run_turn(self, text: str, cancel: CancelToken) -> None:
        worker = get_current_worker()
        try:
            session = self._session
            runtime = self.runtime
            assert runtime is not None, "a turn starts only after the session was opened"
            if session is None:
                session = runtime.new_session(self._route or runtime.route_for(self._model))
                self._session = session
                self._shown_seq = runtime.last_seq(session.id)
                self.post_message(SessionCreated(session))
            with self._writing(runtime, session, text) as lease:
                if lease is not None:
                    self._stream_turn(runtime, session, text, cancel, worker)
        except Exception as exc:
            self.post_message(BridgeFailed(one_line(exc)))

    def _stream_turn(
        self, runtime: Runtime, session: Session, text: str, cancel: CancelToken, worker: Worker[None]
    ) -> None:
        """Send `text` and post every update of the turn (in `_run_turn`'s thread, under the lease)."""
        from foya_tui.runtime.updates import ContextUpdated, ToolCallFinished
        from foya_tui.ui.widgets.tool_block import outcome_of

        seen = start = runtime.last_seq(session.id)
        for update in session.send(text, cancel):
            if worker.is_cancelled:
                cancel.cancel()
            if isinstance(update, ToolCallFinished):
                # The result may be megabytes: its preview and digest are made here, not in the UI.
                outcome = outcome_of(update.seq, update.content, update.is_error, update.metadata)
                self.post_message(ToolResultRecorded(update, outcome))
                continue
            self.post_message(RuntimeUpdated(update))
            if isinstance(update, ContextUpdated):
                # A turn may make several model calls, and TurnFinished carries only the last
                # one's usage: the sparkline takes every step from the usage records, as on resume.
                # Only the events since the last look are read, while the turn is between steps.
                fresh = runtime.events(session.id, after_seq=seen)
                seen = fresh[-1].seq if fresh else seen
                steps = input_steps(fresh)
                if steps:
                    self.post_message(StepsRecorded(steps))
        self._post_turn_seqs(runtime, session.id, start)

    @contextmanager
    def _writing(
        self, runtime: Runtime, session: Session, text: str | None = None
    ) -> Iterator[SessionLease | None]:
        """Hold the session's writer lease around a worker's writes (one writer per session, across
        processes) and keep `_shown_seq` true. When another Foya holds the lease,
        or wrote to the session since the conversation was shown, a turn (`text` given) is refused
        — the conversation is reloaded first in the second case — and yields None; any other write
        raises SessionBusy, or goes on and reloads the conversation afterwards."""
        from foya_tui.runtime.runtime import SessionBusy

        try:
            lease = runtime.claim(session.id)
        except SessionBusy as exc:
            if text is None:
                raise
            self.post_message(TurnRefused(f"{one_line(exc)}; your message was not sent", text))
            yield None
            return
        with lease, self._writing_here():
            foreign = runtime.last_seq(session.id) > self._shown_seq
            if foreign and text is not None:
                self._reload(runtime, session)
                self.post_message(
                    TurnRefused(
                        "Another Foya added to this conversation; it is shown as it now is, and your "
                        "message was not sent: send it again to continue from there",
                        text,
                    )
                )
                yield None
                return
            try:
                yield lease
            finally:
                self._shown_seq = runtime.last_seq(session.id)
        if foreign:
            self._reload(runtime, session)

    @contextmanager
    def _writing_here(self) -> Iterator[None]:
        """Count one write of this process in progress (see `_show_foreign_events`)."""
        with self._writes_guard:
            self._writes_in_progress += 1
        try:
            yield
        finally:
            with self._writes_guard:
                self._writes_in_progress -= 1

    def _reload(self, runtime: Runtime, session: Session) -> None:
        """Post the open session's newest page again, as a resume does (the meter follows it)."""
        self._shown_seq = runtime.last_seq(session.id)
        items, has_older = newest_page(runtime, session.id)
        self.post_message(SessionOpened(session, items, has_older=has_older))

    def _post_turn_seqs(self, runtime: Runtime, session_id: str, start: int) -> None:
        """Say which events the turn just ended stored, so its blocks know where a rewind goes."""
        from foya_tui.runtime.model import EventKind

        events = runtime.events(session_id, after_seq=start)
        user = next((e.seq for e in events if e.kind is EventKind.USER_MESSAGE), None)
        if user is None:
            return
        # A turn outcome belongs to the reply it ends: a rewind to "after the reply" keeps it.
        replies = [
            e.seq
            for e in events
            if e.kind in (EventKind.ASSISTANT_MESSAGE, EventKind.TOOL_RESULT, EventKind.TURN_OUTCOME)
        ]
        self.post_message(TurnRecorded(user, min(replies, default=None), max(replies, default=None)))

    @work(thread=True, exclusive=True, group="page", exit_on_error=False)
    def read_page(self, request: PageRequest) -> None:
        """Read the page of stored history the conversation asked for and post it as items (a
        read only: it may run during a turn)."""
        from foya_tui.ui.widgets.message_list import PAGE_EVENTS, Direction

        try:
            runtime, session = self._open_session()
            if request.direction is Direction.OLDER:
                page = runtime.history_before(session.id, request.seq, events=PAGE_EVENTS)
            else:
                page = runtime.history_after(session.id, request.seq or 0, events=PAGE_EVENTS)
            self.post_message(HistoryPageRead(request, history_items(page.events), page.more))
        except Exception as exc:
            self.post_message(HistoryPageRead(request, [], False))
            self.post_message(BridgeFailed(f"Earlier messages could not be read: {one_line(exc)}"))

    @work(thread=True, exclusive=True, group="read", exit_on_error=False)
    def read_tool_result(self, seq: int, name: str) -> None:
        """Read the full text of the tool result at `seq` from canonical history and post it prepared
        for the viewer (split and measured here: it may be ten megabytes)."""
        from foya_tui.ui.screens.tool_output import prepare_text, text_facts

        try:
            session = self._session
            assert self.runtime is not None and session is not None, "no session is open"
            event = self.runtime.event(session.id, seq)
            content = event.payload.get("content") if event is not None else None
            if not isinstance(content, str):
                raise LookupError(f"The result at seq {seq} is not in this session's history.")
            facts = f"seq {seq} · {text_facts(content)}"
            self.post_message(ToolResultRead(seq, name, facts, prepare_text(content)))
        except Exception as exc:
            self.post_message(BridgeFailed(one_line(exc)))

    # -- compaction, undo, rewind, inspection ---------------------------------------------------
    # Called only between turns (the screen refuses them while a turn runs), so they never race it.

    def compact(self, *, use_model: bool = True) -> None:
        """Propose a manual compaction of the open session; `cancel_compaction` stops it.
        `use_model=False` proposes the deterministic fallback checkpoint, made without a model
        (SPEC K-10)."""
        from foya_tui.runtime.providers.client import CancelToken

        self._compaction_cancel = CancelToken()
        self._propose(self._compaction_cancel, use_model)

    def cancel_compaction(self) -> None:
        """Ask the proposal being made to stop; it then ends with the outcome "cancelled"."""
        if self._compaction_cancel is not None:
            self._compaction_cancel.cancel()

    @work(thread=True, exclusive=True, group="compaction", exit_on_error=False)
    def _propose(self, cancel: CancelToken, use_model: bool = True) -> None:
        from foya_tui.runtime.compaction.attempt import CompactionResult

        try:
            runtime, session = self._open_session()
            with self._writing(runtime, session):  # a failed attempt still writes its diagnostic
                proposed = runtime.propose_compaction(
                    session.id,
                    session.route,
                    cancel=cancel,
                    # Called in this worker's thread: it posts, and never touches a widget.
                    progress=lambda stage, detail: self.post_message(CompactionStaged(str(stage), detail)),
                    use_model=use_model,
                )
            if isinstance(proposed, CompactionResult):
                offer = runtime.fallback_offer(session.id, session.route, proposed) if use_model else None
                if offer is not None and not cancel.cancelled:
                    self.post_message(CompactionProposed(offer, model_failure=proposed.reason))
                else:
                    self.post_message(CompactionEnded(proposed))
            else:
                self.post_message(CompactionProposed(proposed))
        except Exception as exc:
            self.post_message(CompactionEnded(failed_report(exc)))

    @work(thread=True, exclusive=True, group="compaction", exit_on_error=False)
    def commit_compaction(self, proposal: Proposal) -> None:
        """Commit an accepted candidate (re-checked inside the transaction), then report the next request."""
        try:
            runtime, session = self._open_session()
            self.post_message(CompactionStaged("committing", ""))
            with self._writing(runtime, session):
                result = runtime.commit_compaction(proposal)
            self.post_message(CompactionEnded(result))
            self.post_message(ContextReported(session.context().report()))
        except Exception as exc:
            self.post_message(CompactionEnded(failed_report(exc)))

    @work(thread=True, exclusive=True, group="compaction", exit_on_error=False)
    def decline_compaction(self, proposal: Proposal) -> None:
        """Record that the user declined the candidate; nothing else is written."""
        try:
            runtime, session = self._open_session()
            with self._writing(runtime, session):
                result = runtime.decline_compaction(proposal)
            self.post_message(CompactionEnded(result, declined=True))
        except Exception as exc:
            self.post_message(CompactionEnded(failed_report(exc)))

    @work(thread=True, exclusive=True, group="history", exit_on_error=False)
    def undo_compaction(self) -> None:
        """Make the previous checkpoint (or none) current by a new event, then report the next request."""
        try:
            runtime, session = self._open_session()
            with self._writing(runtime, session):
                undone, restored = runtime.undo_compaction(session.id)
            self.post_message(CompactionUndone(undone, restored))
            self.post_message(ContextReported(session.context().report()))
        except Exception as exc:
            self.post_message(BridgeFailed(one_line(exc)))

    @work(thread=True, exclusive=True, group="history", exit_on_error=False)
    def rewind(self, to_seq: int, refill: str | None = None) -> None:
        """Rewind valid history to `to_seq` (a new event; nothing is deleted), then post the
        conversation as it now reads and the next request, as a resume does."""
        try:
            runtime, session = self._open_session()
            with self._writing(runtime, session):
                rewind_seq = runtime.rewind(session.id, to_seq)
            items, has_older = newest_page(runtime, session.id)
            self.post_message(SessionRewound(to_seq, rewind_seq, items, refill, has_older=has_older))
            self.post_message(
                ContextReported(session.context().report(), recorded_steps(runtime, session.id))
            )
        except Exception as exc:
            # A RewindError says in one line why the cut is not allowed, and where it could go.
            self.post_message(BridgeFailed(one_line(exc)))

    @work(thread=True, exclusive=True, group="history", exit_on_error=False)
    def fork(self, at_seq: int | None = None) -> None:
        """Fork a new session from the open one's valid messages through `at_seq` (None: all of
        them), then open the fork on the same route and post its history, as a resume does (its
        meter follows). The source session is not changed."""
        try:
            runtime, source = self._open_session()
            forked = runtime.fork(source.id, at_seq)
            session = runtime.open_session(forked.info.id, source.route)
            self._session, self._route = session, session.route
            self._shown_seq = runtime.last_seq(session.id)
            self.post_message(SessionForked(source.info.short_id, session, forked.at_seq))
            items, has_older = newest_page(runtime, session.id)
            self.post_message(SessionOpened(session, items, has_older=has_older))  # then its meter
        except Exception as exc:
            # A ForkError says in one line why history cannot be cut there, and where it could be.
            self.post_message(BridgeFailed(one_line(exc)))

    # -- the sessions browser ----------------------------------------------------------------

    @work(thread=True, exclusive=True, group="sessions", exit_on_error=False)
    def list_sessions(self) -> None:
        """Post every session with its counts, size, model and fork origin (the browser's list)."""
        try:
            assert self.runtime is not None, "sessions are listed only after the runtime was opened"
            self._post_sessions(self.runtime)
        except Exception as exc:
            self.post_message(BridgeFailed(one_line(exc)))

    def _post_sessions(self, runtime: Runtime) -> None:
        session = self._session
        self.post_message(SessionsListed(runtime.session_overviews(), session.id if session else None))

    @work(thread=True, exclusive=True, group="sessions", exit_on_error=False)
    def rename_session(self, session_id: str, title: str) -> None:
        """Give a session a new title, then post it and the list again."""
        try:
            assert self.runtime is not None, "sessions are renamed only after the runtime was opened"
            info = self.runtime.rename_session(session_id, title)
            if self._session is not None and self._session.id == info.id:
                self._session.info = info  # the header reads it
            self.post_message(SessionRenamed(info))
            self._post_sessions(self.runtime)
        except Exception as exc:
            self.post_message(BridgeFailed(one_line(exc)))

    @work(thread=True, exclusive=True, group="sessions", exit_on_error=False)
    def delete_session(self, session_id: str) -> None:
        """Delete a session whole (under its lease: refused while another Foya writes it), then post
        the list again. The open session is never deleted: the browser refuses it first."""
        try:
            assert self.runtime is not None, "sessions are deleted only after the runtime was opened"
            if self._session is not None and self._session.id == session_id:
                raise LookupError("The open conversation is not deleted; open another one first.")
            deleted = self.runtime.delete_session(session_id)
            self.post_message(SessionDeleted(deleted.info, deleted.events))
            self._post_sessions(self.runtime)
        except Exception as exc:
            self.post_message(BridgeFailed(one_line(exc)))

    @work(thread=True, exclusive=True, group="history", exit_on_error=False)
    def open_stored(self, session_id: str) -> None:
        """Open another stored session in place of the open one (call only between turns), on the
        model of its last reply, and post its newest page and next request, as a resume does. Its
        lease is taken for each write, as for any session (`_writing`); here it is only tried, to
        say at once when another Foya is writing it."""
        try:
            self._open_stored(self._open(), session_id)
        except Exception as exc:
            self.post_message(BridgeFailed(one_line(exc)))

    def _open_stored(self, runtime: Runtime, session_id: str) -> None:
        from foya_tui.runtime.runtime import SessionBusy

        session = runtime.open_session(session_id)
        busy = None
        try:
            runtime.claim(session.id).release()
        except SessionBusy as exc:
            busy = f"{one_line(exc)}: you can read it; your messages are refused until it stops"
        self._session, self._route = session, session.route  # before the screen hears of the switch
        self.post_message(SessionSwitched(session, busy))
        self._show_opened(runtime, session)

    def _show_opened(self, runtime: Runtime, session: Session) -> None:
        """Make `session` the open one and post its newest page, never the whole log; the screen
        asks for the meter once the page is shown (`opened_shown`)."""
        self._session, self._route = session, session.route
        self._shown_seq = runtime.last_seq(session.id)
        items, has_older = newest_page(runtime, session.id)
        self.post_message(SessionOpened(session, items, has_older=has_older))

    def opened_shown(self, session: Session) -> None:
        """On the UI thread: the conversation shows `session`'s newest page (SessionOpened). Its
        meter's numbers, last compaction and any index problem are read now, after the page: the
        compile (all of a long session no checkpoint covers; the tokenizer's first load) would
        otherwise compete with laying the page out, and the prompt would wait for both
        (tests/bench/bench_tui_scale.py)."""
        self._read_opened(session)

    @work(thread=True, exclusive=True, group="next-request", exit_on_error=False)
    def _read_opened(self, session: Session) -> None:
        from foya_tui.runtime.model import EventKind

        try:
            runtime = self.runtime
            if runtime is None or session is not self._session:
                return  # another session was opened meanwhile: its own page asks for its meter
            self._post_next_request(runtime, session)
            last = last_compaction(runtime.events_of_kind(session.id, EventKind.COMPACTION_DIAGNOSTIC))
            if last is not None:
                self.post_message(LastCompactionRead(last))
            self._post_index_problem(runtime)
        except Exception as exc:
            self.post_message(BridgeFailed(f"The context report failed: {one_line(exc)}"))

    @work(thread=True, exclusive=True, group="history", exit_on_error=False)
    def open_origin(self) -> None:
        """Open the session the open one was forked from (posts BridgeFailed when it is no fork,
        or its origin was deleted)."""
        try:
            runtime, session = self._open_session()
            origin = runtime.fork_origin(session.id)
            if origin is None:
                raise LookupError("This conversation is not a fork of a session that still exists.")
            self._open_stored(runtime, origin.id)
        except Exception as exc:
            self.post_message(BridgeFailed(one_line(exc)))

    @work(thread=True, exclusive=True, group="export", exit_on_error=False)
    def export_markdown(self) -> None:
        """Write the open session's Markdown transcript to a new file and post where it is."""
        try:
            runtime, session = self._open_session()
            path = runtime.write_markdown(session.id)
            self.post_message(TranscriptExported(str(path)))
        except Exception as exc:
            self.post_message(BridgeFailed(f"The transcript was not written: {one_line(exc)}"))

    @work(thread=True, exclusive=True, group="inspect", exit_on_error=False)
    def inspect(self) -> None:
        """Read everything compaction knows about the session, in one call, for the inspector."""
        try:
            runtime, session = self._open_session()
            report = runtime.inspect(session.id)
            models = {option.route.id: option.route.model for option in runtime.routes(session.id)}
            models[session.route.id] = session.route.model
            limit = runtime.settings.compaction.max_fingerprints
            self.post_message(SessionInspected(report, limit, models))
        except Exception as exc:
            self.post_message(BridgeFailed(one_line(exc)))

    # -- canonical history, for the inspector -------------------------------------------------
    # Reads only: they may run during a turn. A newer request of the same kind overtakes an older
    # one (a thread cannot be stopped, so the older one just does not post).

    @work(thread=True, exclusive=True, group="search", exit_on_error=False)
    def search_history(self, query: str) -> None:
        """Search the session's whole valid history for `query`, newest first (SearchError's sentence
        on a bad query)."""
        worker = get_current_worker()
        try:
            runtime, session = self._open_session()
            hits = runtime.search(session.id, query, limit=SEARCH_LIMIT)
            if not worker.is_cancelled:
                self.post_message(HistorySearched(query, hits, SEARCH_LIMIT))
        except Exception as exc:
            from foya_tui.runtime.runtime import SearchIndexDamaged

            if not worker.is_cancelled:
                self.post_message(HistoryReadFailed(one_line(exc), "search"))
                if isinstance(exc, SearchIndexDamaged):
                    self.post_message(SearchIndexStale(one_line(exc)))

    def _post_index_problem(self, runtime: Runtime) -> None:
        """Say so when the search index is out of date, so that the repair can be offered."""
        problem = runtime.search_index_problem()
        if problem is not None:
            self.post_message(SearchIndexStale(f"the search index is out of date ({problem})"))

    @work(thread=True, exclusive=True, group="repair", exit_on_error=False)
    def repair_store(self) -> None:
        """Rebuild what the store derives from history (the search index first), as
        `foya verify --repair` does; events are never touched, so it may run beside a turn."""
        try:
            runtime, session = self._open_session()

            def progress(indexed: int, total: int) -> None:
                self.post_message(StoreRepairProgressed(indexed, total))

            done = runtime.repair(session.id, progress)
            self.post_message(StoreRepaired(done))
        except Exception as exc:
            self.post_message(BridgeFailed(f"The repair failed: {one_line(exc)}"))

    @work(thread=True, exclusive=True, group="sources", exit_on_error=False)
    def read_source_events(self, segment: CoveredBy) -> None:
        """Read the message events `segment` summarises (seqs from_seq..through_seq of valid history),
        each with the start of its text."""
        worker = get_current_worker()
        try:
            runtime, session = self._open_session()
            sources = runtime.segment_sources(session.id, segment, limit=MAX_SOURCE_EVENTS)
            if not worker.is_cancelled:
                self.post_message(SourceEventsRead(segment, list(sources.events), sources.total))
        except Exception as exc:
            if not worker.is_cancelled:
                self.post_message(HistoryReadFailed(one_line(exc), "sources"))

    @work(thread=True, exclusive=True, group="history-read", exit_on_error=False)
    def read_event(self, hit: RecallHit) -> None:
        """Read the full text of the message `hit` names from canonical history, prepared for the
        viewer (it may be a ten-megabyte tool result)."""
        from foya_tui.ui.screens.tool_output import prepare_text, text_facts

        worker = get_current_worker()
        try:
            runtime, session = self._open_session()
            message = runtime.message_text(session.id, hit.seq)
            facts = f"seq {hit.seq} · {message.kind} · {text_facts(message.text)}"
            prepared = prepare_text(message.text)
            if not worker.is_cancelled:
                self.post_message(HistoryEventRead(hit, facts, prepared))
        except Exception as exc:
            if not worker.is_cancelled:
                self.post_message(HistoryReadFailed(one_line(exc), "event"))

    def _post_next_request(self, runtime: Runtime, session: Session) -> None:
        """Post the session's next request and its recorded steps (the meter's numbers)."""
        self.post_message(ContextReported(session.context().report(), recorded_steps(runtime, session.id)))

    def _open_session(self) -> tuple[Runtime, Session]:
        runtime, session = self.runtime, self._session
        if runtime is None or session is None:
            raise LookupError("No session is open yet: send a message first.")
        return runtime, session


def failed_report(exc: BaseException) -> CompactionResult:
    """A manual compaction that raised: failed, nothing was committed."""
    from foya_tui.runtime.compaction.attempt import CompactionResult
    from foya_tui.runtime.compaction.failures import Outcome, Trigger

    return CompactionResult(Outcome.FAILED, Trigger.MANUAL, one_line(exc), 0)


def last_compaction(events: Iterable[Event]) -> CompactionResult | None:
    """How the latest compaction recorded in history ended (its diagnostic, SPEC C-15), or None."""
    from foya_tui.runtime.compaction.attempt import CompactionResult
    from foya_tui.runtime.model import EventKind

    last = None
    for event in events:
        if event.kind is EventKind.COMPACTION_DIAGNOSTIC and event.problem is None:
            last = event.payload
    return CompactionResult.from_diagnostic(last) if last is not None else None

"""Provides the messages the bridge posts from its workers; names say what already happened."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from foya_tui.runtime.compaction.attempt import CompactionResult, Proposal
    from foya_tui.runtime.compaction.report import CoveredBy, InspectReport, RecallHit
    from foya_tui.runtime.context.report import ContextReport
    from foya_tui.runtime.model import SessionInfo
    from foya_tui.runtime.providers.routes import Route
    from foya_tui.runtime.runtime import RouteOption, SessionOverview
    from foya_tui.runtime.session import Session
    from foya_tui.runtime.tools.approval import ApprovalRequest
    from foya_tui.runtime.updates import RuntimeUpdate, ToolCallFinished
    from foya_tui.ui.approval import ApprovalAnswer
    from foya_tui.ui.screens.tool_output import PreparedText
    from foya_tui.ui.widgets.message_list import HistoryItem, PageRequest
    from foya_tui.ui.widgets.tool_block import ToolOutcome


class RouteResolved(Message):
    """A new conversation is ready to start on this route (its session is created on the first send)."""

    def __init__(self, route: Route) -> None:
        super().__init__()
        self.route = route


class SessionOpened(Message):
    """An existing session was opened; `items` is the newest page of what the conversation shows of
    it (built in the worker: tool results are summarised there), `has_older` whether more lies
    before that page."""

    def __init__(self, session: Session, items: list[HistoryItem], *, has_older: bool = False) -> None:
        super().__init__()
        self.session = session
        self.items = items
        self.has_older = has_older


class ProviderPrepared(Message):
    """The provider library is loaded: a request no longer waits for it."""


class HistoryPageRead(Message):
    """A page of stored history the conversation asked for (`request`), as items; `more` says
    whether history goes on beyond it in the direction it was read."""

    def __init__(self, request: PageRequest, items: list[HistoryItem], more: bool) -> None:
        super().__init__()
        self.request = request
        self.items = items
        self.more = more


class SessionForked(Message):
    """A new session was forked from the open one (`source_label`, its short id): its history is the
    source's valid messages through `at_seq`. The fork is open now; its history follows as
    SessionOpened, its next request as ContextReported."""

    def __init__(self, source_label: str, session: Session, at_seq: int) -> None:
        super().__init__()
        self.source_label = source_label
        self.session = session
        self.at_seq = at_seq


class SessionCreated(Message):
    """The first message of a new conversation created its session in the store."""

    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session


class RuntimeUpdated(Message):
    """A running turn reported progress (started, a reply fragment, a retry, finished, failed)."""

    def __init__(self, update: RuntimeUpdate) -> None:
        super().__init__()
        self.update = update


class ToolResultRecorded(Message):
    """A tool call of the running turn finished and its result was stored; `outcome` is its bounded
    preview and digest, prepared in the worker (the runtime's `ToolCallFinished` is in `update`)."""

    def __init__(self, update: ToolCallFinished, outcome: ToolOutcome) -> None:
        super().__init__()
        self.update = update
        self.outcome = outcome


class ApprovalRequested(Message):
    """The running turn waits for the user to allow or deny a tool call; the dialog answers through
    `answer` (the turn's thread is blocked until then, or until the turn is cancelled)."""

    def __init__(self, request: ApprovalRequest, answer: ApprovalAnswer) -> None:
        super().__init__()
        self.request = request
        self.answer = answer


class ToolResultRead(Message):
    """The full text of a stored tool result was read from history and prepared for viewing."""

    def __init__(self, seq: int, name: str, facts: str, prepared: PreparedText) -> None:
        super().__init__()
        self.seq = seq
        self.name = name
        self.facts = facts
        self.prepared = prepared


class TurnRefused(Message):
    """A message was not sent and nothing was written: `reason` says why in one line (another Foya
    is writing the session, or wrote to it since it was shown); `text` goes back into the prompt."""

    def __init__(self, reason: str, text: str) -> None:
        super().__init__()
        self.reason = reason
        self.text = text


class ForeignEventsFound(Message):
    """Another Foya appended to the open session while this one was idle: `items` is the session's
    newest page as it now is, through `newest_seq`. The screen shows it only if it is still idle
    (then calls `Bridge.shown_through`); otherwise the next send finds the events, as before."""

    def __init__(
        self, session: Session, items: list[HistoryItem], *, has_older: bool, newest_seq: int, count: int
    ) -> None:
        super().__init__()
        self.session = session
        self.items = items
        self.has_older = has_older
        self.newest_seq = newest_seq
        self.count = count


class SearchIndexStale(Message):
    """The search index cannot answer (`reason`, one line); the store repair rebuilds it."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason


class StoreRepaired(Message):
    """The store's derived data was repaired: one sentence per action taken (none: all was well)."""

    def __init__(self, done: tuple[str, ...]) -> None:
        super().__init__()
        self.done = done


class StoreRepairProgressed(Message):
    """The repair's index rebuild has indexed `done` of `total` events."""

    def __init__(self, done: int, total: int) -> None:
        super().__init__()
        self.done = done
        self.total = total


class BridgeFailed(Message):
    """A worker failed outside the turn protocol (store, settings); `reason` is one line."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason


class ContextReported(Message):
    """The next request was compiled without sending it: a new conversation's preview, a resumed
    session's next request, or the request after a route switch. `report` is
    `RequestView.report()` (typed); `steps` (input tokens per earlier step) replaces the meter's steps,
    None keeps them."""

    def __init__(self, report: ContextReport, steps: tuple[int, ...] | None = None) -> None:
        super().__init__()
        self.report = report
        self.steps = steps


class RoutesListed(Message):
    """The routes the switcher offers, and the id of the one in use."""

    def __init__(self, options: list[RouteOption], current_id: str | None) -> None:
        super().__init__()
        self.options = options
        self.current_id = current_id


class RouteSwitched(Message):
    """The session (or, before its first message, the new conversation) now uses `route`."""

    def __init__(self, route: Route) -> None:
        super().__init__()
        self.route = route


class ApprovalModeChanged(Message):
    """Tools now work in approval `mode` (`read-only`, `ask`, `auto`), in the open session and
    in the next ones this app starts."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode


class SettingNotSaved(Message):
    """A setting the user changed applies in this app but could not be saved to config.toml
    (`reason`: one line naming the file and why; the file was left as it was)."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason


class StepsRecorded(Message):
    """Model calls of the running turn finished and their usage was stored; `steps` are their input
    tokens, oldest first (calls without reported usage are left out)."""

    def __init__(self, steps: tuple[int, ...]) -> None:
        super().__init__()
        self.steps = steps


class TurnRecorded(Message):
    """The turn that started with the user message at `user_seq` ended; its reply's message events
    span `first_seq`..`last_seq` (None when it stored no reply). Blocks learn their seqs from this,
    so that a rewind can name where a message begins and ends."""

    def __init__(self, user_seq: int, first_seq: int | None, last_seq: int | None) -> None:
        super().__init__()
        self.user_seq = user_seq
        self.first_seq = first_seq
        self.last_seq = last_seq


class SessionInspected(Message):
    """Everything compaction knows about the session was read from the store (`runtime.inspect`);
    `max_fingerprints` is how many failure fingerprints the session keeps (SPEC C-14), `models`
    the model of each route id the switcher knows (the store names routes by id only)."""

    def __init__(self, report: InspectReport, max_fingerprints: int, models: Mapping[str, str]) -> None:
        super().__init__()
        self.report = report
        self.max_fingerprints = max_fingerprints
        self.models = models


class HistorySearched(Message):
    """The session's valid history was searched for `query` (`runtime.search`); `hits` are newest
    first, each with the current checkpoint's segment that summarises it (None: seen verbatim)."""

    def __init__(self, query: str, hits: list[RecallHit], limit: int) -> None:
        super().__init__()
        self.query = query
        self.hits = hits
        self.limit = limit
        """The most hits asked for: as many hits as this means there may be more."""


class SourceEventsRead(Message):
    """The message events a checkpoint segment summarises were read from valid history, in seq
    order; each is a RecallHit whose `covered_by` is that segment and whose snippet is the start of
    its text. `total` counts them all when only the first `len(events)` were kept."""

    def __init__(self, segment: CoveredBy, events: list[RecallHit], total: int) -> None:
        super().__init__()
        self.segment = segment
        self.events = events
        self.total = total


class HistoryEventRead(Message):
    """The full text of the event `hit` names was read from canonical history and prepared for
    viewing (`facts` is one line: kind, size and digest)."""

    def __init__(self, hit: RecallHit, facts: str, prepared: PreparedText) -> None:
        super().__init__()
        self.hit = hit
        self.facts = facts
        self.prepared = prepared


class HistoryReadFailed(Message):
    """A read of history for the inspector failed: `read` is "search", "sources" or "event";
    `reason` is one line (for a bad query, the SearchError's sentence)."""

    def __init__(self, reason: str, read: str) -> None:
        super().__init__()
        self.reason = reason
        self.read = read


class CompactionStaged(Message):
    """The manual compaction reached a stage (planning, summarising with "2/3", "native" or
    "fallback", validating, committing)."""

    def __init__(self, stage: str, detail: str) -> None:
        super().__init__()
        self.stage = stage
        self.detail = detail


class CompactionProposed(Message):
    """The manual compaction made a validated candidate; nothing is committed until the user accepts."""

    def __init__(self, proposal: Proposal, model_failure: str | None = None) -> None:
        """`model_failure`: why the model's attempt ended without a checkpoint, when this is the
        deterministic fallback offered in its place."""
        super().__init__()
        self.proposal = proposal
        self.model_failure = model_failure


class CompactionEnded(Message):
    """The manual compaction ended: committed, declined, or without a candidate (nothing to compact,
    suppressed, failed, cancelled)."""

    def __init__(self, result: CompactionResult, *, declined: bool = False) -> None:
        super().__init__()
        self.result = result
        self.declined = declined


class CompactionUndone(Message):
    """The current checkpoint was undone by a new event; `restored_id` is current again (None: no
    checkpoint, the model sees the full history)."""

    def __init__(self, undone_id: str, restored_id: str | None) -> None:
        super().__init__()
        self.undone_id = undone_id
        self.restored_id = restored_id


class LastCompactionRead(Message):
    """How a resumed session's most recent compaction ended (read from its diagnostic), for the
    meter's "last" line."""

    def __init__(self, result: CompactionResult) -> None:
        super().__init__()
        self.result = result


class SessionRewound(Message):
    """Valid history now ends at `to_seq` (a rewind event at `rewind_seq`; nothing was deleted);
    `items` is the newest page of the conversation as it now reads (`has_older`: more lies before
    it), `refill` the text to put back into the prompt."""

    def __init__(
        self, to_seq: int, rewind_seq: int, items: list[HistoryItem], refill: str | None, *, has_older: bool
    ) -> None:
        super().__init__()
        self.to_seq = to_seq
        self.rewind_seq = rewind_seq
        self.items = items
        self.refill = refill
        self.has_older = has_older


class SessionsListed(Message):
    """Every session, newest first, for the sessions browser; `open_id` is the one on screen (None
    before a new conversation's first message)."""

    def __init__(self, overviews: list[SessionOverview], open_id: str | None) -> None:
        super().__init__()
        self.overviews = overviews
        self.open_id = open_id


class SessionRenamed(Message):
    """A session got a new title (it may be the open one: the header follows)."""

    def __init__(self, info: SessionInfo) -> None:
        super().__init__()
        self.info = info


class SessionDeleted(Message):
    """A session and everything stored for it were deleted (never the open one)."""

    def __init__(self, info: SessionInfo, events: int) -> None:
        super().__init__()
        self.info = info
        self.events = events


class SessionSwitched(Message):
    """Another stored session is open now (chosen in the browser, or a fork's origin); its history
    follows as SessionOpened, its next request as ContextReported. `busy` says, in one line, that
    another Foya is writing it (sending is refused until it stops), else None."""

    def __init__(self, session: Session, busy: str | None) -> None:
        super().__init__()
        self.session = session
        self.busy = busy


class TranscriptExported(Message):
    """The open session's Markdown transcript was written to `path`."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

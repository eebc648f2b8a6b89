"""Provides the Runtime: wires settings, store, routes and provider client; the API of CLI and UI.

Every method here may touch SQLite or a provider, so the UI calls them from worker threads only.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from foya_tui.errors import FoyaError, InputError
from foya_tui.paths import FoyaPaths
from foya_tui.runtime.compaction.attempt import CompactionResult, ProgressCallback, Proposal
from foya_tui.runtime.compaction.failures import Outcome, Trigger
from foya_tui.runtime.compaction.native import ProviderNativeCompactor
from foya_tui.runtime.compaction.report import (
    CoveredBy,
    InspectReport,
    RecallHit,
    VerifyReport,
    inspect_session,
    search_session,
    verify_session,
)
from foya_tui.runtime.compaction.service import CompactionService
from foya_tui.runtime.compaction.text import TextCompactor
from foya_tui.runtime.context.columns import wrong_token_counts
from foya_tui.runtime.context.compiler import ContextCompiler
from foya_tui.runtime.context.request import RequestView
from foya_tui.runtime.fork import ForkedSession, fork_session
from foya_tui.runtime.markdown import session_markdown
from foya_tui.runtime.model import Event, EventKind, NewEvent, SessionInfo
from foya_tui.runtime.providers.catalog import model_info, simulator_models
from foya_tui.runtime.providers.client import CancelToken, ProviderClient
from foya_tui.runtime.providers.preflight import check_route, route_problem
from foya_tui.runtime.providers.routes import Route, route_for
from foya_tui.runtime.session import RetryPolicy, Session, ToolRuntime
from foya_tui.runtime.store import (
    CompactionStore,
    EventStore,
    check_store,
    claim_session,
    database_fault,
    open_database,
    repair_store,
)

# The faces meet the lease through the Runtime (they never import the store): re-exported.
from foya_tui.runtime.store import SearchIndexDamaged as SearchIndexDamaged
from foya_tui.runtime.store import SessionBusy as SessionBusy
from foya_tui.runtime.store import SessionLease as SessionLease
from foya_tui.runtime.store.events import UnknownSessionError, utc_now
from foya_tui.runtime.store.lease import lock_path
from foya_tui.runtime.store.search import ProgressCallback as IndexProgress
from foya_tui.runtime.store.search import index_stale_reason, message_body, snippet
from foya_tui.runtime.store.sessions import SessionStats
from foya_tui.runtime.text import terminal_safe
from foya_tui.runtime.tools import default_registry
from foya_tui.runtime.tools.approval import ApprovalPolicy, Approver
from foya_tui.runtime.tools.registry import ToolRegistry
from foya_tui.runtime.transcripts import Transcript, open_transcript, parse_transcript
from foya_tui.runtime.view.checkpoint import Phase
from foya_tui.runtime.view.history import rewound, valid_events
from foya_tui.runtime.view.pages import PAGE_EVENTS, HistoryPage, page_after, page_before
from foya_tui.runtime.view.recovery import CheckpointReader
from foya_tui.settings import Settings, SettingsError

FALLBACK_OFFERED = frozenset({Outcome.FAILED, Outcome.SUPPRESSED})
"""How a manual compaction with the model may end for the deterministic fallback to be offered:
its summaries failed (or the same attempt failed before). A valid summary that acceptance
rejected (it would not shrink the projection, SPEC C-12) is reported as it is."""


@dataclass(frozen=True)
class RouteOption:
    """A route as the switcher lists it: its window and whether this session has real usage on it."""

    route: Route
    window: int | None
    has_baseline: bool
    problem: str | None = None
    """Why this route cannot be sent (unknown model, missing key), one line; None when it can."""


@dataclass(frozen=True)
class MessageText:
    """One message event of canonical history with its full text: its words, and its tool calls'
    names and arguments (what search indexes)."""

    seq: int
    kind: EventKind
    role: str
    text: str


@dataclass(frozen=True)
class SegmentSources:
    """The message events of valid history a checkpoint segment summarises, in seq order: each a
    RecallHit covered by that segment, whose snippet is the start of its text. `total` counts
    them all when only the first `len(events)` were kept."""

    segment: CoveredBy
    events: tuple[RecallHit, ...]
    total: int


TITLE_MAX = 120
"""Characters a title given by the user keeps at most (a title is one line in every list)."""


@dataclass(frozen=True)
class SessionOverview:
    """A session as the sessions browser lists it: its row, what its log holds, and where it was
    forked from (None for a session that is no fork, or whose origin was deleted)."""

    info: SessionInfo
    stats: SessionStats
    forked_from: str | None = None

    @property
    def status(self) -> str:
        """What a reader needs to know beyond the numbers: a session that never got a reply, or
        whose last turn failed or was cancelled; "" otherwise."""
        outcome = self.stats.last_outcome
        if self.stats.replies == 0:
            return f"no reply · last turn {outcome}" if outcome else "no reply yet"
        return f"last turn {outcome}" if outcome else ""


@dataclass(frozen=True)
class DeletedSession:
    """A session just deleted: what it was, and how many events went with it."""

    info: SessionInfo
    events: int


@dataclass(frozen=True)
class RuntimeParts:
    """The Runtime's collaborators, for tests and benches that check them white-box. The faces
    (the UI and the CLI) use Runtime's methods only; tests/test_static_checks.py holds them to it."""

    store: EventStore
    compaction_store: CompactionStore
    checkpoints: CheckpointReader
    registry: ToolRegistry
    compiler: ContextCompiler
    compaction: CompactionService


class Runtime:
    """One open database plus the configured routes; creates and resumes sessions."""

    def __init__(
        self,
        settings: Settings,
        paths: FoyaPaths,
        *,
        client: ProviderClient | None = None,
        workdir: Path | None = None,
        clock: Callable[[], datetime] = utc_now,
        approval_mode: str | None = None,
        approver: Approver | None = None,
        migration_progress: IndexProgress | None = None,
        read_only: bool = False,
    ) -> None:
        """`approval_mode` overrides the settings' (`foya run --approval`); `approver` asks the
        user in `ask` mode (the TUI's dialog; None in a headless run, which then refuses);
        `migration_progress` hears how far indexing an older database for search has come;
        `read_only` opens the database without ever taking its write lock (commands that only
        read: they neither wait for a writer nor make one wait)."""
        self.settings = settings
        self.paths = paths
        self.workdir = (workdir or Path.cwd()).resolve()
        self._database = open_database(paths.database, migration_progress, read_only=read_only)
        self._store = EventStore(self._database, clock=clock)
        self._compaction_store = CompactionStore(self._database, self._store)
        self._checkpoints = CheckpointReader(self._store, self._compaction_store)
        # Pre-flight belongs to the real provider path: a client given by the caller (tests, a
        # scripted provider) decides for itself what it can send.
        self._checks_routes = client is None
        if client is None:
            from foya_tui.runtime.providers.litellm_client import LiteLLMClient

            client = LiteLLMClient(settings)
        self._client = client
        self._registry = default_registry()
        self.approval_mode = approval_mode or settings.approval_mode
        self._opened_sessions: weakref.WeakSet[Session] = weakref.WeakSet()
        self.approver = approver
        self._compiler = ContextCompiler(
            self._store,
            settings,
            workdir=self.workdir,
            clock=clock,
            config_dir=paths.config_dir,
            registry=self._registry,
            checkpoints=self._checkpoints,
        )
        # The mode the system prompt states is the one tools are held to (`--approval` included).
        self._compiler.approval_mode = self.approval_mode
        self._compaction = CompactionService(
            events=self._store,
            compaction=self._compaction_store,
            compiler=self._compiler,
            compactor=TextCompactor(client, settings.compaction.summary_max_tokens),
            settings=settings.compaction,
            native=ProviderNativeCompactor(client, settings.compaction.summary_max_tokens),
            summary_routes=self.summary_routes,
        )

    @property
    def parts(self) -> RuntimeParts:
        """The collaborators (see RuntimeParts): never for the faces."""
        return RuntimeParts(
            self._store,
            self._compaction_store,
            self._checkpoints,
            self._registry,
            self._compiler,
            self._compaction,
        )

    def close(self) -> None:
        self._database.close()

    def prepare_provider(self) -> None:
        """Load the provider library now (LiteLLM: seconds, more on a loaded machine), so that the
        first request does not wait for it; a runtime given a client of its own loads nothing."""
        if self._checks_routes:
            from foya_tui.runtime.providers.litellm_client import load_litellm

            load_litellm()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- routes ---------------------------------------------------------------------------

    def route_for(self, model: str | None = None, connection: str | None = None) -> Route:
        """The route of a model under these settings (pure: touches neither SQLite nor a provider)."""
        return route_for(self.settings, model, connection)

    def check_route(self, route: Route) -> None:
        """Raise RouteError (one line, exit 2) when `route` cannot be sent: its model string has
        no provider LiteLLM knows, or its key is missing. No network, nothing written."""
        if self._checks_routes:
            check_route(self.settings, route)

    def route_problem(self, route: Route) -> str | None:
        """`check_route`'s line, or None (what the route switcher shows beside a route)."""
        return route_problem(self.settings, route) if self._checks_routes else None

    def summary_routes(self, route: Route) -> list[Route]:
        """Where a session on `route` asks for summaries: the separate summary route of
        `[compaction] model` first (its own window and budget), then the session's own route."""
        model = self.settings.compaction.model
        if not model:
            return [route]
        summary = self.route_for(model)
        return [route] if summary.id == route.id else [summary, route]

    def routes(self, session_id: str | None = None) -> list[RouteOption]:
        """Every route the switcher offers: the default, each configured model, the simulator's."""
        models = [self.settings.model, *self.settings.models, *simulator_models()]
        measured = self._compiler.measured_routes(session_id) if session_id else frozenset()
        options: dict[str, RouteOption] = {}
        for model in models:
            route = self.route_for(model)
            if route.id not in options:
                info = model_info(model, self.settings.model_settings(model))
                options[route.id] = RouteOption(
                    route, info.window, route.id in measured, self.route_problem(route)
                )
        return list(options.values())

    def set_approval_mode(self, mode: str) -> None:
        """Let tools work in `mode` from the next step on: in every session this runtime opened
        and in the next ones; the system prompt says the new mode (SPEC X-2 item 6)."""
        from foya_tui.settings import APPROVAL_MODES

        if mode not in APPROVAL_MODES:
            raise InputError(f"the approval mode must be one of {', '.join(APPROVAL_MODES)}, not {mode!r}")
        self.approval_mode = mode
        self._compiler.approval_mode = mode
        for session in self._opened_sessions:
            session.set_approval_mode(mode)

    # -- sessions -------------------------------------------------------------------------

    def _session(self, info: SessionInfo, route: Route | None) -> Session:
        session = Session(
            self._store,
            info,
            route or self.route_for(),
            self._client,
            self._compiler,
            tools=ToolRuntime(
                registry=self._registry,
                approval=ApprovalPolicy(self.approval_mode, self.approver),
                workdir=self.workdir,
                shell_timeout=self.settings.tools.shell_timeout,
                shell_network=self.settings.tools.shell_network,
                max_steps=self.settings.tools.max_steps,
            ),
            retry=RetryPolicy(self.settings.max_retries, self.settings.retry_backoff),
            compaction=self._compaction,
            preflight=self.check_route,
        )
        self._opened_sessions.add(session)  # a later approval-mode change reaches it
        return session

    def new_session(self, route: Route | None = None) -> Session:
        """Create a session on `route`; raises RouteError first, creating nothing, when the route
        cannot be sent."""
        self.check_route(route or self.route_for())
        info = self._store.create_session(workspace=str(self.workdir))
        return self._session(info, route)

    def open_session(self, id_or_prefix: str, route: Route | None = None) -> Session:
        """Resume a session by id or unique prefix (raises UnknownSessionError). Without a route,
        the session continues on the model of its last reply (a switch survives a restart)."""
        info = self._store.find_session(id_or_prefix)
        return self._session(info, route or self._last_route(info.id))

    def _last_route(self, session_id: str) -> Route | None:
        reply = self._store.last_event(session_id, EventKind.ASSISTANT_MESSAGE)
        model = reply.payload.get("model") if reply is not None else None
        if not isinstance(model, str) or not model:
            return None
        try:
            return self.route_for(model)
        except (SettingsError, ValueError):
            return None  # its connection is gone from the config: the default route serves

    def find_session(self, id_or_prefix: str) -> SessionInfo:
        """The session a full id or unique prefix names (raises UnknownSessionError)."""
        return self._store.find_session(id_or_prefix)

    @staticmethod
    def database_fault(exc: BaseException) -> FoyaError | None:
        """The one-line error for an SQLite failure that escaped a command (damaged pages, a full
        disk, a lock held too long, a counter out of step), or None: anything else is a bug."""
        return database_fault(exc)

    def claim(self, session_id: str) -> SessionLease:
        """The session's writer lease (raises SessionBusy while another live Foya holds it)."""
        return claim_session(self.paths.database, session_id)

    def list_sessions(self, limit: int | None = None) -> list[SessionInfo]:
        return self._store.list_sessions(limit)

    def session_overviews(self) -> list[SessionOverview]:
        """Every session, newest first, with its counts, size, model and fork origin (the browser)."""
        sessions = self._store.list_sessions()
        stats = self._store.session_stats()
        ids = {info.id for info in sessions}
        listed = []
        for info in sessions:
            origin = fork_origin(info)
            listed.append(
                SessionOverview(info, stats.get(info.id, SessionStats()), origin if origin in ids else None)
            )
        return listed

    def rename_session(self, id_or_prefix: str, title: str) -> SessionInfo:
        """Give a session a new title: one line, control characters removed (raises InputError for
        an empty one, UnknownSessionError for an unknown session)."""
        info = self._store.find_session(id_or_prefix)
        cleaned = " ".join(terminal_safe(title).split())
        if not cleaned:
            raise InputError("a session title cannot be empty")
        self._store.set_title(info.id, cleaned[:TITLE_MAX])
        return self._store.get_session(info.id)

    def delete_session(self, id_or_prefix: str) -> DeletedSession:
        """Delete a session whole: its events, checkpoints, artifacts, search index rows and every
        other row kept for it, in one transaction, then its lease file. Raises SessionBusy (nothing
        deleted) while another live Foya is writing it; other sessions are not touched."""
        info = self._store.find_session(id_or_prefix)
        with self.claim(info.id):
            events = self._store.delete_session(info.id)
            # The lease file goes while the lease is held: a writer that waits for it finds the
            # session gone (UnknownSessionError), never a half-deleted one.
            lock_path(self.paths.database, info.id).unlink(missing_ok=True)
        return DeletedSession(info, events)

    def fork_origin(self, session_id: str) -> SessionInfo | None:
        """The session `session_id` was forked from, or None (no fork, or its origin was deleted)."""
        origin = fork_origin(self._store.get_session(session_id))
        if origin is None:
            return None
        try:
            return self._store.get_session(origin)
        except UnknownSessionError:
            return None

    def fork(self, id_or_prefix: str, at_seq: int | None = None) -> ForkedSession:
        """Create a session from a session's valid messages through `at_seq` (None: all of them);
        the source is not changed (raises ForkError, or UnknownSessionError)."""
        source = self._store.find_session(id_or_prefix)
        info = fork_session(self._store, source.id, at_seq)
        # fork_session records where it cut (the end, when no seq was given) in the fork's metadata.
        return ForkedSession(info, source.id, info.metadata["forked_from"]["seq"])

    def import_transcript(
        self,
        data: bytes,
        source: str,
        progress: Callable[[int, int], None] | None = None,
        index_progress: Callable[[int, int], None] | None = None,
    ) -> SessionInfo:
        """Create a session from an OpenAI-format transcript (raises TranscriptError, writes nothing
        then). A large one commits in bounded batches, its search index after its rows, and
        appears only once complete; `progress` hears (messages written, messages in all),
        `index_progress` (messages indexed, messages in all)."""
        transcript = parse_transcript(data, source, max_bytes=self.settings.import_max_bytes)
        return self._store.create_session_in_batches(
            title=transcript.title,
            workspace=str(self.workdir),
            events=transcript.events,
            artifacts=transcript.artifacts,
            progress=progress,
            index_progress=index_progress,
        )

    def import_transcript_file(
        self,
        path: Path,
        progress: Callable[[int, int], None] | None = None,
        index_progress: Callable[[int, int], None] | None = None,
    ) -> SessionInfo:
        """`import_transcript` of a file, read a piece at a time: validated in full first (raises
        TranscriptError, writes nothing then; OSError when it cannot be read), then its events
        read again into the batches, so memory holds one batch, never the file."""
        transcript = open_transcript(path, path.name, max_bytes=self.settings.import_max_bytes)
        if isinstance(transcript, Transcript):  # judged by the whole-file parser: already in memory
            events: Iterable[NewEvent] = transcript.events
            total = len(transcript.events)
        else:
            events, total = transcript.events(), transcript.count
        return self._store.create_session_in_batches(
            title=transcript.title,
            workspace=str(self.workdir),
            events=events,
            total=total,
            artifacts=transcript.artifacts,
            progress=progress,
            index_progress=index_progress,
        )

    # -- canonical history ----------------------------------------------------------------
    # These take a session's full id (`Session.id`), not a prefix: the UI reads them between the
    # steps of a turn, where one more lookup per read buys nothing.

    def events(self, session_id: str, *, after_seq: int = 0, through_seq: int | None = None) -> list[Event]:
        """A session's canonical history in seq order, rewound and unreadable events included
        (from `after_seq`, exclusive, up to `through_seq`, inclusive)."""
        return self._store.events(session_id, after_seq, through_seq)

    def history_before(
        self, session_id: str, before_seq: int | None = None, *, events: int = PAGE_EVENTS
    ) -> HistoryPage:
        """The newest page of valid history before `before_seq` (None: the newest of all), whole
        message groups only: what the conversation view loads on open and when scrolled up."""
        return page_before(self._store, session_id, before_seq, events=events)

    def history_after(self, session_id: str, after_seq: int, *, events: int = PAGE_EVENTS) -> HistoryPage:
        """The oldest page of valid history after `after_seq` (0: the first page), whole message
        groups only: what the conversation view loads when scrolled back down."""
        return page_after(self._store, session_id, after_seq, events=events)

    def events_of_kind(self, session_id: str, kind: EventKind) -> list[Event]:
        """Every stored event of one kind, rewound ones included, in seq order (read on the kind
        index: the meter's usage records, say, without the rest of the log)."""
        return self._store.events_of_kind(session_id, kind)

    def event(self, session_id: str, seq: int) -> Event | None:
        """One event of a session's canonical history by seq, or None (reads one row)."""
        return self._store.event(session_id, seq)

    def last_seq(self, session_id: str) -> int:
        """The seq of a session's newest event (0 before the first; raises UnknownSessionError)."""
        return self._store.last_seq(session_id)

    def message_text(self, session_id: str, seq: int) -> MessageText:
        """The full text of the message at `seq` (raises LookupError when that seq is not a readable
        message: missing, unreadable, or an event that is not a message)."""
        event = self._store.event(session_id, seq)
        body = message_body(str(event.kind), event.payload) if event is not None else None
        if event is None or event.problem is not None or body is None:
            raise LookupError(f"Seq {seq} is not a readable message of this session's history.")
        role, text = body
        return MessageText(seq, event.kind, role, text)

    def segment_sources(self, session_id: str, segment: CoveredBy, *, limit: int) -> SegmentSources:
        """The message events `segment` summarises (seqs from_seq..through_seq of valid history),
        each with the start of its text; the first `limit` are kept (a long import's segment may
        hold many thousands)."""
        # Only the range is read: rewinds inside it apply through valid_events, and a later
        # rewind can only have invalidated it by going back before its events (SPEC H-4).
        later = self._store.rewinds_after(session_id, segment.through_seq)
        in_range = self._store.events(session_id, segment.from_seq - 1, segment.through_seq)
        kept: list[RecallHit] = []
        total = 0
        for event in valid_events(in_range):
            if rewound(event.seq, later):
                continue
            body = message_body(str(event.kind), event.payload)
            if body is None:  # usage records, compaction events, rewinds: not messages
                continue
            total += 1
            if len(kept) < limit:
                role, text = body
                kept.append(RecallHit(event.seq, str(event.kind), role, snippet(text, ()), segment))
        return SegmentSources(segment, tuple(kept), total)

    # -- compaction -----------------------------------------------------------------------

    def compact(
        self,
        id_or_prefix: str,
        route: Route | None = None,
        *,
        cancel: CancelToken | None = None,
        progress: ProgressCallback | None = None,
        use_model: bool = True,
    ) -> CompactionResult:
        """Standalone compaction of an idle session (SPEC C-3), on the session's route by default;
        `use_model=False` makes the deterministic fallback checkpoint directly (SPEC K-10)."""
        proposed = self.propose_compaction(
            id_or_prefix, route, cancel=cancel, progress=progress, use_model=use_model
        )
        if isinstance(proposed, CompactionResult):
            return proposed
        return self._compaction.commit(proposed, progress=progress)

    def propose_compaction(
        self,
        id_or_prefix: str,
        route: Route | None = None,
        *,
        cancel: CancelToken | None = None,
        progress: ProgressCallback | None = None,
        use_model: bool = True,
    ) -> Proposal | CompactionResult:
        """A validated standalone candidate to show before committing it (the TUI asks to accept)."""
        session = self.open_session(id_or_prefix, route)
        return self._compaction.propose(
            session.id,
            session.route,
            Trigger.MANUAL,
            phase=Phase.STANDALONE,
            cancel=cancel,
            progress=progress,
            use_model=use_model,
        )

    def fallback_offer(
        self, id_or_prefix: str, route: Route | None, failed: CompactionResult
    ) -> Proposal | None:
        """After a manual compaction with the model ended without a checkpoint because its
        summaries failed (`FALLBACK_OFFERED`): the deterministic fallback's validated candidate,
        not committed, to offer in its place (issue 18); None when there is none to offer. A
        hook's veto is not offered one (SPEC K-7), nor is a fallback that itself failed."""
        if failed.outcome not in FALLBACK_OFFERED or failed.producer == "fallback":
            return None
        proposed = self.propose_compaction(id_or_prefix, route, use_model=False)
        return proposed if isinstance(proposed, Proposal) else None

    def commit_compaction(self, proposal: Proposal) -> CompactionResult:
        """Commit a proposal the user accepted (it is refused if history moved on meanwhile)."""
        return self._compaction.commit(proposal)

    def decline_compaction(self, proposal: Proposal) -> CompactionResult:
        return self._compaction.decline(proposal)

    def undo_compaction(self, id_or_prefix: str) -> tuple[str, str | None]:
        """Make the previous checkpoint (or none) current by a new event (raises CompactionError)."""
        return self._compaction.undo(self._store.find_session(id_or_prefix).id)

    def rewind(self, id_or_prefix: str, to_seq: int) -> int:
        """Rewind a session's valid history to `to_seq` (raises RewindError); returns the event seq."""
        return self.open_session(id_or_prefix).rewind(to_seq)

    def inspect(self, id_or_prefix: str) -> InspectReport:
        info = self._store.find_session(id_or_prefix)
        return inspect_session(
            info.id, self._store, self._compaction_store, self._checkpoints, self._compaction.breaker(info.id)
        )

    def verify(self, id_or_prefix: str) -> VerifyReport:
        """Re-validate a session: events and checkpoints (SPEC P-2), and the store under them: the
        search index, the immutability triggers, `last_seq`, the running digests recomputed from
        the events' bytes, and the persisted token counts recounted."""
        info = self._store.find_session(id_or_prefix)
        report = verify_session(
            info.id,
            self._store,
            self._compaction_store,
            self._checkpoints,
            self.settings.compaction.max_fingerprints,
        )
        store = check_store(self._database, info.id)
        counts = [
            f"token counts ({key.partition('/')[0]}): {len(seqs):,} stored count(s) differ from a fresh "
            f"count (first at seq {seqs[0]}); the meter and compaction read them"
            for key, seqs in wrong_token_counts(self._store, info.id, self.settings.tools).items()
        ]
        return replace(report, problems=(*report.problems, *store.problems, *counts))

    def repair(self, id_or_prefix: str, progress: IndexProgress | None = None) -> tuple[str, ...]:
        """Repair the store's derived data and bookkeeping (never an event): rebuild a damaged
        search index, recreate missing triggers, move a `last_seq` behind its events up, rewrite
        running digests from the events' bytes, delete wrong token counts. Returns one sentence per
        action taken."""
        info = self._store.find_session(id_or_prefix)
        done = repair_store(self._database, check_store(self._database, info.id), progress, info.id)
        for key, seqs in wrong_token_counts(self._store, info.id, self.settings.tools).items():
            self._store.drop_token_counts(info.id, key, seqs)
            tokenizer = key.partition("/")[0]
            done += (f"deleted {len(seqs):,} wrong token count(s) ({tokenizer}); they are counted again",)
        return done

    def search_index_problem(self) -> str | None:
        """Why the search index cannot answer now (marked out of date: a write that could not index,
        a rebuild cut short), or None. One read: damage that nothing noticed yet shows on a search
        (SearchIndexDamaged) or in `verify`."""
        return index_stale_reason(self._database.connection)

    def search(self, id_or_prefix: str, query: str, *, limit: int = 50) -> list[RecallHit]:
        """Events of a session's valid history matching `query`, newest first, each with the
        checkpoint segment that summarises it (raises SearchError for a query that cannot run)."""
        info = self._store.find_session(id_or_prefix)
        return search_session(info.id, query, self._store, self._checkpoints, limit=limit)

    def preview_context(self, route: Route | None = None) -> RequestView:
        """What a new conversation's first request would carry before any message (for the meter)."""
        return self._compiler.preview(route or self.route_for())

    def context(self, id_or_prefix: str, route: Route | None = None) -> RequestView:
        """Compile a session's next request without sending it."""
        return self.open_session(id_or_prefix, route).context()

    def export_markdown(self, id_or_prefix: str) -> str:
        """A session's valid history as a readable Markdown transcript (runtime/markdown.py)."""
        info = self._store.find_session(id_or_prefix)
        return session_markdown(info, self._store.events(info.id), exported_at=self._store.timestamp())

    def write_markdown(self, id_or_prefix: str, folder: Path | None = None) -> Path:
        """Write the Markdown transcript to a new file in `folder` (default: the working directory),
        `foya-<id>.md` (`-2`, `-3`… when taken: nothing is overwritten); returns its path."""
        info = self._store.find_session(id_or_prefix)
        text = self.export_markdown(info.id)
        folder = folder or self.workdir
        for number in range(1, 1000):
            suffix = "" if number == 1 else f"-{number}"
            path = folder / f"foya-{info.short_id}{suffix}.md"
            try:
                with path.open("x", encoding="utf-8") as stream:
                    stream.write(text)
            except FileExistsError:
                continue
            except OSError as exc:
                raise FoyaError(
                    f"the transcript could not be written to {path}: {exc.strerror or exc}"
                ) from None
            return path
        raise FoyaError(f"the transcript was not written: {folder} already holds 999 of this session's")

    def export(
        self, id_or_prefix: str, *, projection: bool = False, route: Route | None = None
    ) -> Iterator[Mapping[str, Any]]:
        """Canonical history as export records, or the compiled projection as provider messages."""
        if projection:
            yield from self.context(id_or_prefix, route).messages
            return
        info = self._store.find_session(id_or_prefix)
        for event in self._store.iter_events(info.id):  # in batches: memory holds one, not history
            yield event.to_export()


def fork_origin(info: SessionInfo) -> str | None:
    """The id of the session `info` was forked from, as fork_session recorded it, or None."""
    forked = info.metadata.get("forked_from")
    origin = forked.get("session") if isinstance(forked, Mapping) else None
    return origin if isinstance(origin, str) and origin else None

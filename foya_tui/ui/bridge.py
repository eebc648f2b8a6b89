"""Provides the Bridge: the one owner of every worker that calls the runtime.

The runtime is blocking (SQLite, provider streams), so each call runs in a thread worker and
reports back only through `post_message`; nothing here touches another widget. The Bridge is an
invisible widget so that its messages bubble to the screen that mounted it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from textual import work
from textual.widget import Widget
from textual.worker import get_current_worker

from foya_tui.runtime.providers.client import CancelToken
from foya_tui.ui.messages import BridgeFailed, RouteResolved, RuntimeUpdated, SessionCreated, SessionOpened

if TYPE_CHECKING:
    from foya_tui.runtime.providers.routes import Route
    from foya_tui.runtime.runtime import Runtime
    from foya_tui.runtime.session import Session


def one_line(exc: BaseException) -> str:
    """A failure as one sentence for a notification: never a traceback."""
    text = str(exc.args[0]) if exc.args else str(exc)
    first = " ".join(text.split()) or type(exc).__name__
    return first if len(first) <= 200 else first[:199] + "…"


class Bridge(Widget):
    """Opens or resumes the session, runs turns and cancels them, all off the UI thread."""

    DEFAULT_CSS = "Bridge { display: none; }"

    def __init__(self, runtime: Runtime | Callable[[], Runtime], *, model: str | None = None) -> None:
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

    @property
    def session(self) -> Session | None:
        """The open session, or None before a new conversation's first message."""
        return self._session

    @work(thread=True, exclusive=True, group="session", exit_on_error=False)
    def start(self, session_id: str | None = None) -> None:
        """Resolve the route, then resume `session_id` (posting its history) or wait for a first send."""
        try:
            if self.runtime is None and self._open_runtime is not None:
                self.runtime = self._open_runtime()
            assert self.runtime is not None
            self._route = self.runtime.route_for(self._model)
            if session_id is not None:
                session = self.runtime.open_session(session_id, self._route)
                events = self.runtime.store.events(session.id)
                self._session = session
                self.post_message(SessionOpened(session, events))
                return
        except Exception as exc:
            self.post_message(BridgeFailed(one_line(exc)))
            if self._route is None:
                return
        # A new conversation, or a resume that failed: the session is created on the first send,
        # so opening and closing Foya does not leave empty sessions behind.
        self._session = None
        self.post_message(RouteResolved(self._route))

    def new_conversation(self) -> None:
        """Forget the current session; the next send starts a new one (call only between turns)."""
        self._session = None

    def send(self, text: str) -> None:
        """Start a turn with `text` (the caller ensures no other turn is running)."""
        self._cancel = CancelToken()
        self._run_turn(text, self._cancel)

    def cancel_turn(self) -> None:
        """Ask the running turn to stop; the runtime then ends it with TurnFailed(kind="cancelled")."""
        if self._cancel is not None:
            self._cancel.cancel()

    def on_unmount(self) -> None:
        # A thread worker cannot be killed, and the interpreter waits for it at exit: stop the stream.
        self.cancel_turn()

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
                self.post_message(SessionCreated(session))
            for update in session.send(text, cancel):
                if worker.is_cancelled:
                    cancel.cancel()
                self.post_message(RuntimeUpdated(update))
        except Exception as exc:
            self.post_message(BridgeFailed(one_line(exc)))

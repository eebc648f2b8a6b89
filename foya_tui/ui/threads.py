"""Provides DaemonThreads: the executor the TUI's thread workers run in, which quitting never waits on.

Textual runs a thread worker in the event loop's default executor, and when the loop closes,
asyncio waits for that executor's threads (and the interpreter joins them again at exit). A worker
still busy with work nobody needs once the user quits (a context preview, the provider library's
import, a page of history) would hold the frozen screen for seconds. Here each job runs in a daemon
thread of its own instead, and shutting down does not wait: whatever such a thread was writing is
one SQLite transaction, committed or not (SPEC P-1), and a turn in progress is cancelled first
(Bridge.on_unmount).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class DaemonThreads(ThreadPoolExecutor):
    """Runs each submitted call in a new daemon thread; `shutdown` never waits for them.

    A ThreadPoolExecutor by type only (asyncio's `set_default_executor` accepts nothing else): its
    pool of threads, which the interpreter joins at exit, is never started."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self._closed = False

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        if self._closed:
            raise RuntimeError("cannot run new work after shutdown")
        future: Future[T] = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:
                future.set_exception(exc)

        threading.Thread(target=run, name="foya-worker", daemon=True).start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        # Never waits: the threads die with the process (see the module's docstring).
        self._closed = True

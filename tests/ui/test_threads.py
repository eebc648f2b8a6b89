"""Tests DaemonThreads, the executor `foya`'s thread workers run in: results and failures come back
through the future, and shutting down does not wait for a call still running (quitting never
waits on work the user no longer needs)."""

from __future__ import annotations

import threading
import time

import pytest

from foya_tui.ui.threads import DaemonThreads


def test_a_call_returns_its_result_or_raises_its_error() -> None:
    executor = DaemonThreads()
    assert executor.submit(lambda a, b: a + b, 2, b=3).result(timeout=10) == 5

    def fail() -> None:
        raise LookupError("gone")

    with pytest.raises(LookupError, match="gone"):
        executor.submit(fail).result(timeout=10)


def test_shutdown_does_not_wait_for_a_running_call() -> None:
    executor = DaemonThreads()
    release = threading.Event()
    started = threading.Event()

    def busy() -> str:
        started.set()
        release.wait(30)
        return "done"

    future = executor.submit(busy)
    assert started.wait(10)
    began = time.monotonic()
    executor.shutdown(wait=True)
    assert time.monotonic() - began < 5  # a wait would last the 30 s the call blocks
    assert not future.done()
    with pytest.raises(RuntimeError):
        executor.submit(busy)
    release.set()
    assert future.result(timeout=10) == "done"


def test_asyncio_takes_it_as_the_default_executor() -> None:
    import asyncio

    async def run_in_it() -> str:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(DaemonThreads())  # raises TypeError for a non-ThreadPoolExecutor
        return await loop.run_in_executor(None, lambda: "ran")

    assert asyncio.run(run_in_it()) == "ran"

"""Provides the one-writer-per-session lease: an advisory `flock` on a per-session lock file next to
the database (`<db>.locks/<session id>.lock`), holding the owner's pid.

The kernel drops the lock when its process dies however it dies (SIGKILL included), so a lease of
a dead process is simply taken over by the next writer; no heartbeat can go stale. A second
writer on a busy session is refused before it writes anything, instead of interleaving its turn
with the first one's.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from foya_tui.errors import FoyaError


class SessionBusy(FoyaError):
    """Another live Foya process is writing this session (exit 1, nothing written)."""


def lock_path(database: Path, session_id: str) -> Path:
    return database.with_name(database.name + ".locks") / f"{session_id}.lock"


@dataclass(frozen=True)
class SessionLease:
    """A held lease; `release` (or leaving the `with` block) gives it up."""

    session_id: str
    path: Path
    fd: int

    def release(self) -> None:
        try:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        finally:
            os.close(self.fd)

    def __enter__(self) -> SessionLease:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return "unknown"
    return text if text.isdigit() else "unknown"


def claim_session(database: Path, session_id: str) -> SessionLease:
    """Take the session's lease or raise SessionBusy naming the holder's pid."""
    path = lock_path(database, session_id)
    try:
        path.parent.mkdir(exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise FoyaError(f"cannot create the session lock {path}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise SessionBusy(f"session {session_id[:6]} is busy in another Foya (pid {holder})") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    return SessionLease(session_id, path, fd)


__all__ = ["SessionBusy", "SessionLease", "claim_session", "lock_path"]

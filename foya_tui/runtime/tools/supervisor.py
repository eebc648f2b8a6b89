"""Provides the shell tool's watcher: a tiny process that takes a shell command's process groups
down when Foya dies, however it dies (a closed terminal, SIGTERM, SIGHUP, even SIGKILL).

Run as `python -I -S supervisor.py PGID [PGID…]` with a pipe from Foya as its stdin. Foya writes
`done` when the command's call ended normally; the watcher then exits and kills nothing. If the
pipe closes without it, Foya is gone (the kernel closes a dead process's descriptors whatever
killed it), and every group is killed with SIGKILL. A SIGTERM or SIGHUP sent to the watcher does
the same. It runs in a session of its own, so the terminal's signals never reach it first.

A script rather than a module of the package: it must start in milliseconds, so it imports nothing
of Foya's and skips `site` (-S).
"""

import contextlib
import os
import signal
import sys

RELEASE = b"done"


def kill_groups(*_: object) -> None:
    for pgid in sys.argv[1:]:
        with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):  # already gone
            os.killpg(int(pgid), signal.SIGKILL)
    os._exit(0)


def main() -> None:
    for number in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, kill_groups)
    received = b""
    while True:
        chunk = os.read(0, 64)
        if not chunk:
            break
        received += chunk
    if received.strip() != RELEASE:
        kill_groups()


if __name__ == "__main__":
    main()

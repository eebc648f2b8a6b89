"""Provides the shell tool's process setup: the bubblewrap sandbox when one is installed and works,
and the watcher (supervisor.py) that ties the command's process groups to Foya's life.

With `bwrap` the command sees the whole file system read-only, the workspace writable, a private
/tmp, and no network unless `[tools] shell_network = true`. Without it the shell is not confined at
all: it runs with the user's rights and is only approved (the approval dialog and README say so).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SUPERVISOR = Path(__file__).with_name("supervisor.py")
RELEASE = b"done"
"""What tells the watcher the call ended normally (supervisor.py)."""
PROBE_TIMEOUT = 10.0


@dataclass(frozen=True)
class Confinement:
    """How shell commands run on this machine."""

    bwrap: str | None
    """The bubblewrap executable when it is installed and can create its namespaces."""
    reason: str
    """Why the shell is or is not confined, as one sentence for the user."""

    @property
    def confined(self) -> bool:
        return self.bwrap is not None


def _bwrap_prefix(bwrap: str, workspace: Path, network: bool) -> list[str]:
    # No pid namespace: the command's pids stay real, so the tool's process-group kill (and what
    # a command prints about its children) means what it says outside.
    prefix = [bwrap, "--die-with-parent", "--unshare-user-try", "--unshare-ipc", "--unshare-uts"]
    prefix.append("--unshare-cgroup-try")
    if not network:
        prefix.append("--unshare-net")
    # Order matters: later mounts cover earlier ones, so the workspace stays writable even when it
    # lies under /tmp.
    prefix += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    prefix += ["--bind", str(workspace), str(workspace), "--chdir", str(workspace), "--"]
    return prefix


@functools.cache
def shell_confinement() -> Confinement:
    """Probed once per process: `bwrap` may be installed and still unable to create namespaces
    (containers, kernels that forbid unprivileged user namespaces)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Confinement(None, "the shell is not confined (bubblewrap is not installed), only approved")
    probe = [*_bwrap_prefix(bwrap, Path("/"), network=False), "true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=PROBE_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired):
        done = None
    if done is None or done.returncode != 0:
        return Confinement(
            None, "the shell is not confined (bubblewrap cannot create its namespaces here), only approved"
        )
    return Confinement(bwrap, "the shell runs in a bubblewrap sandbox: read-only system, writable workspace")


@dataclass(frozen=True)
class ShellProcess:
    """A started shell command: its process and every process group it runs in."""

    process: subprocess.Popen[bytes]
    groups: tuple[int, ...]
    """The groups a kill must reach: the one started here and, inside bubblewrap, the command's own
    (bwrap's child starts a new session so that `$$` is its group, as without the sandbox)."""


def start_shell(shell: str, command: str, workspace: Path, network: bool) -> ShellProcess:
    """Start `command` (stdout and stderr merged into one pipe), in bubblewrap when it works here."""
    confinement = shell_confinement()
    argv = [shell, "-c", command]
    info_read = info_write = -1
    if confinement.bwrap is not None:
        info_read, info_write = os.pipe()
        prefix = _bwrap_prefix(confinement.bwrap, workspace, network)
        argv = [prefix[0], "--new-session", "--info-fd", str(info_write), *prefix[1:], *argv]
    try:
        process = subprocess.Popen(
            argv,
            cwd=workspace,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so a kill reaches every child
            pass_fds=(info_write,) if info_write >= 0 else (),
        )
    finally:
        if info_write >= 0:
            os.close(info_write)
    groups = [process.pid]
    if info_read >= 0:
        child = _child_pid(info_read)
        if child is not None:
            groups.append(child)
    return ShellProcess(process, tuple(groups))


def _child_pid(info: int) -> int | None:
    """bwrap's `--info-fd` JSON names its child; the descriptor closes once it is written."""
    data = b""
    with os.fdopen(info, "rb") as stream:
        data = stream.read()
    try:
        pid = json.loads(data or b"{}").get("child-pid")
    except ValueError:
        return None
    return pid if isinstance(pid, int) and pid > 0 else None


def watch(groups: tuple[int, ...]) -> subprocess.Popen[bytes] | None:
    """Start the watcher (supervisor.py) that kills `groups` if Foya dies before `release`."""
    try:
        return subprocess.Popen(
            [sys.executable, "-I", "-S", str(SUPERVISOR), *map(str, groups)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return None  # the command still runs; it is only not tied to Foya's life


def release(watcher: subprocess.Popen[bytes] | None) -> None:
    """The call is over: the watcher exits without killing anything."""
    if watcher is None:
        return
    assert watcher.stdin is not None
    with contextlib.suppress(OSError):
        watcher.stdin.write(RELEASE)
        watcher.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        watcher.wait(PROBE_TIMEOUT)

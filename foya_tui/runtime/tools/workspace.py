"""Provides workspace confinement for the file tools: a path resolved and refused outside the
workspace, files opened beneath the workspace root one component at a time with O_NOFOLLOW (so a
link swapped in after the check is never followed), regular-file and hard-link checks, and the
bounded walk of a tree.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from foya_tui.errors import FoyaError
from foya_tui.runtime.providers.wire import unescape_name
from foya_tui.runtime.tools.registry import ToolContext

SKIPPED_DIRS = frozenset({".git"})


class ToolError(FoyaError):
    """A failure the model should read as the tool's result."""


def workspace_root(context: ToolContext) -> Path:
    return Path(os.path.realpath(context.workdir))


def resolve_path(context: ToolContext, raw: str) -> Path:
    """The real path `raw` names, refused when it lies outside the workspace.

    `realpath` follows every symlink and `..` the way the kernel would, so a link inside the
    workspace that points out is caught as surely as `../x` or `/etc/passwd`. The file itself
    may not exist yet (write_file).
    """
    if not raw.strip():
        raise ToolError("path is empty")
    if "\0" in raw:
        raise ToolError("path contains a NUL character")
    root = workspace_root(context)
    raw = _shown_name(raw, root)
    real = Path(os.path.realpath(raw if os.path.isabs(raw) else root / raw))
    if real != root and not real.is_relative_to(root):
        raise ToolError(f"path escapes the workspace: {raw!r} resolves to {real}, outside {root}")
    return real


def _shown_name(raw: str, root: Path) -> str:
    """The path the file system knows for a name the model copied from a result: a byte that is
    not UTF-8 was shown as `\\xe9` (wire.py), so when only the unescaped name exists, it is meant."""
    unescaped = unescape_name(raw)
    if unescaped == raw:
        return raw
    literal, meant = (Path(p) if os.path.isabs(p) else root / p for p in (raw, unescaped))
    return unescaped if not os.path.lexists(literal) and os.path.lexists(meant) else raw


def display(path: Path, context: ToolContext) -> str:
    """A path as the model should write it: relative to the workspace when inside it."""
    root = workspace_root(context)
    try:
        relative = Path(os.path.realpath(path)).relative_to(root)
    except ValueError:
        return str(path)
    return relative.as_posix() if relative != Path(".") else "."


_LINK_ERRNOS = frozenset({errno.ELOOP, errno.ENOTDIR, errno.EMLINK})
"""What `O_NOFOLLOW` reports when a component turned out to be a symbolic link."""


def open_beneath(context: ToolContext, real: Path, flags: int, *, make_parents: bool = False) -> int:
    """Open `real` (a path `resolve_path` returned) one component at a time from the workspace
    root, never following a symbolic link, and return the descriptor.

    `resolve_path` checked the real location, but a directory can be swapped for a link between
    that check and the open (one write in 35,190 escaped that way): here every directory is opened
    with `O_NOFOLLOW | O_DIRECTORY` relative to the previous one (openat), so what is opened is
    what was checked, or nothing. `O_NONBLOCK` keeps a FIFO from blocking the open forever.
    """
    root = workspace_root(context)
    parts = real.relative_to(root).parts
    if not parts:
        raise ToolError(f"{display(real, context)} is the workspace itself, not a file")
    directory = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            try:
                child = _open_dir(part, directory)
            except FileNotFoundError:
                if not make_parents:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=directory)
                child = _open_dir(part, directory)
            os.close(directory)
            directory = child
        try:
            flags |= os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
            return os.open(parts[-1], flags, 0o666, dir_fd=directory)
        except OSError as exc:
            if exc.errno in _LINK_ERRNOS and _is_link(parts[-1], directory):
                # Named as checked: display() would follow the new link.
                name = "/".join(parts)
                raise ToolError(f"refused: {name} became a symbolic link while it was opened") from None
            raise
    finally:
        os.close(directory)


def _open_dir(name: str, directory: int) -> int:
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
    except OSError as exc:
        if exc.errno in _LINK_ERRNOS and _is_link(name, directory):
            raise ToolError(f"refused: {name!r} became a symbolic link while it was opened") from None
        raise


def _is_link(name: str, directory: int) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=directory).st_mode)
    except OSError:
        return False


def regular_file(fd: int, name: str, tool: str) -> os.stat_result:
    """The descriptor's status; a FIFO, device or socket is refused (reading one blocks forever)."""
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):
        os.close(fd)
        raise ToolError(f"{name} is not a regular file (a FIFO, device or socket); {tool} refuses it")
    return status


def writable_file(fd: int, name: str, tool: str) -> None:
    """Refuse a file with more than one hard link: another link may be outside the workspace, and
    writing through this one would change that file too (confinement by path cannot see it)."""
    links = regular_file(fd, name, tool).st_nlink
    if links > 1:
        os.close(fd)
        raise ToolError(
            f"refused: {name} has {links} hard links, and another may be outside the workspace; "
            f"{tool} does not change a file through a hard link (copy it to a new file first)"
        )


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def walked_name(path: Path, root: Path) -> str:
    """A walked path relative to the workspace, as found: a symlink keeps its own name (and a
    link pointing outside never reveals where it points)."""
    return path.relative_to(root).as_posix()


def walk_files(base: Path, budget: list[int]) -> Iterator[tuple[Path, bool]]:
    """(path, is_dir) under `base`, depth-first, `.git` skipped, symlinked dirs not entered.

    `budget[0]` counts entries left to visit; the walk stops at zero so the caller can say so.
    """
    for folder, dirnames, filenames in os.walk(base, followlinks=False):
        dirnames[:] = sorted(name for name in dirnames if name not in SKIPPED_DIRS)
        for name in dirnames:
            budget[0] -= 1
            yield Path(folder, name), True
        for name in sorted(filenames):
            budget[0] -= 1
            yield Path(folder, name), False
        if budget[0] <= 0:
            return

"""Provides the built-in tools: read_file, list_dir, glob, grep, write_file, edit_file, shell.

Every file tool is confined to the session's workspace: a path whose real location (symlinks
followed) lies outside `context.workdir` is refused, and the checked path is then opened one
component at a time with `O_NOFOLLOW` (openat), so a link swapped in after the check is refused
rather than followed. A file with more than one hard link is never written (another link may be
outside). FIFOs, devices and sockets are never read, and grep's patterns run with a time limit,
so no call can block a step forever. Every output is bounded and cleaned of terminal escapes,
because it goes both to a model and to a terminal. Failures are returned as error results (never
raised), so the model can read them and correct itself. The shell is not confined by paths: see
`shell_sandbox`.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import re
import selectors
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import regex

from foya_tui.runtime.text import strip_control
from foya_tui.runtime.tools.registry import Effect, ToolContext, ToolResult, ToolSpec, error
from foya_tui.runtime.tools.sandbox import release, shell_confinement, start_shell, watch
from foya_tui.runtime.tools.workspace import (
    ToolError,
    display,
    open_beneath,
    regular_file,
    resolve_path,
    walk_files,
    walked_name,
    workspace_root,
    writable_file,
    write_all,
)

# -- bounds (chosen so one call can never flood the context or the terminal) ---------------------

BINARY_SNIFF_BYTES = 8192
"""A NUL byte in the first 8 KB marks a file as binary (what git and grep do)."""
READ_DEFAULT_LIMIT = 2000
READ_LINE_MAX_CHARS = 2000
READ_OUTPUT_MAX_CHARS = 256_000
LIST_MAX_ENTRIES = 500
GLOB_MAX_RESULTS = 500
GREP_MAX_MATCHES = 200
GREP_LINE_MAX_CHARS = 500
GREP_MAX_FILE_BYTES = 16 * 1024 * 1024
"""Larger files are skipped by grep (and said so): they are logs or data, not source."""
WALK_MAX_ENTRIES = 200_000
"""glob and grep stop walking after this many entries, so a huge tree cannot stall a step."""
SHELL_MAX_TIMEOUT = 600.0
SHELL_OUTPUT_HEAD_BYTES = 512 * 1024
SHELL_OUTPUT_TAIL_BYTES = 512 * 1024
"""1 MB of shell output at most: the head shows what ran, the tail how it ended."""
SHELL_POLL_SECONDS = 0.05
SHELL_DRAIN_SECONDS = 0.2
"""After the shell exits, how long output from background children is still collected."""
GREP_MATCH_TIMEOUT = 2.0
"""Seconds one regex search may take: a pattern such as `(a+)+$` backtracks exponentially, and a
37-character line once took 9 minutes, with nothing able to stop it."""
GREP_CANCEL_EVERY = 1024
"""Lines between two looks at the cancel token inside one file."""


class BuiltinTool:
    """Turns `ToolError` and `OSError` into error results, so a direct `run` never raises either."""

    spec: ToolSpec

    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        try:
            return self.execute(arguments, context)
        except ToolError as exc:
            return error(str(exc))
        except OSError as exc:
            where = f": {display(Path(exc.filename), context)}" if exc.filename else ""
            return error(f"{self.spec.name} failed: {exc.strerror or exc}{where}")

    def execute(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        raise NotImplementedError


# -- arguments ------------------------------------------------------------------------------------


def string_arg(arguments: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = arguments.get(key, default)
    if not isinstance(value, str):
        raise ToolError(f"argument '{key}' must be a string")
    return value


def int_arg(arguments: Mapping[str, Any], key: str, default: int, minimum: int) -> int:
    value = arguments.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ToolError(f"argument '{key}' must be an integer")
    if value < minimum:
        raise ToolError(f"argument '{key}' must be at least {minimum}, got {value}")
    return value


def bool_arg(arguments: Mapping[str, Any], key: str) -> bool:
    return bool(arguments.get(key, False))


def glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob: `*` and `?` stay within one path part, `**` crosses parts, `[abc]`
    classes and `{a,b}` alternatives work. Matching is against the whole relative path."""
    return re.compile(_glob_part(pattern) + r"\Z", re.DOTALL)


def _glob_part(pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        char = pattern[i]
        close = pattern.find("]", i + 2) if char == "[" else pattern.find("}", i + 1) if char == "{" else -1
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and close != -1:
            body = pattern[i + 1 : close]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = close
        elif char == "{" and close != -1:
            out.append("(?:" + "|".join(_glob_part(alt) for alt in pattern[i + 1 : close].split(",")) + ")")
            i = close
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def is_binary(head: bytes) -> bool:
    return b"\0" in head[:BINARY_SNIFF_BYTES]


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def cut_line(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} … [line cut: {len(text):,} characters]"


# -- read_file ------------------------------------------------------------------------------------


def _decode_line(raw: bytes, partial: bool) -> tuple[str, bool]:
    """Decode one line; returns (text, had invalid bytes). `partial`: raw was cut mid-line, so
    an incomplete character at its end is dropped instead of counted as invalid."""
    try:
        return codecs.getincrementaldecoder("utf-8")("strict").decode(raw, final=not partial), False
    except UnicodeDecodeError:
        return codecs.getincrementaldecoder("utf-8")("replace").decode(raw, final=not partial), True


def _count_lines_left(handle: Any) -> int:
    newlines, last = 0, b""
    for chunk in iter(lambda: handle.read(1 << 20), b""):
        newlines += chunk.count(b"\n")
        last = chunk[-1:]
    return newlines + (1 if last and last != b"\n" else 0)


class ReadFile(BuiltinTool):
    spec = ToolSpec(
        name="read_file",
        description=(
            "Read a text file in the workspace. Returns numbered lines (`  12→text`), at most `limit` "
            f"lines (default {READ_DEFAULT_LIMIT}) from line `offset` (1-based), and says how to read "
            f"more. Lines over {READ_LINE_MAX_CHARS} characters are cut. Binary files are refused."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace."},
                "offset": {"type": "integer", "description": "First line to show (1-based)."},
                "limit": {"type": "integer", "description": "How many lines to show."},
            },
            "required": ["path"],
        },
    )

    def execute(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        path = resolve_path(context, string_arg(arguments, "path"))
        name = display(path, context)
        offset = int_arg(arguments, "offset", 1, minimum=1)
        limit = int_arg(arguments, "limit", READ_DEFAULT_LIMIT, minimum=1)
        if path.is_dir():
            raise ToolError(f"{name} is a directory; use list_dir to see its entries")
        if not path.exists():
            raise ToolError(f"no such file: {name}")
        shown: list[str] = []
        used = 0
        invalid_utf8 = cut = 0
        full = False
        consumed = 0
        fd = open_beneath(context, path, os.O_RDONLY)
        regular_file(fd, name, "read_file")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb") as handle:
            if is_binary(handle.read(BINARY_SNIFF_BYTES)):
                raise ToolError(f"{name} is a binary file (it contains NUL bytes); read_file shows text only")
            handle.seek(0)
            for raw in handle:
                consumed += 1
                if consumed < offset:
                    continue
                raw = raw[:-1] if raw.endswith(b"\n") else raw
                raw = raw[:-1] if raw.endswith(b"\r") else raw
                # Cut before decoding (4 bytes per character at most): decoding and cleaning a
                # megabyte-long minified line then cost no more than a short one.
                partial = len(raw) > READ_LINE_MAX_CHARS * 4
                text, bad = _decode_line(raw[: READ_LINE_MAX_CHARS * 4] if partial else raw, partial)
                invalid_utf8 += bad
                text = strip_control(text.replace("\r", ""))
                if partial or len(text) > READ_LINE_MAX_CHARS:
                    cut += 1
                    text = f"{text[:READ_LINE_MAX_CHARS]} … [line cut: {len(raw):,} bytes]"
                line = f"{consumed:>6}→{text}"
                if used + len(line) > READ_OUTPUT_MAX_CHARS and shown:
                    full = True
                    break
                shown.append(line)
                used += len(line) + 1
                if len(shown) >= limit:
                    break
            total = consumed + _count_lines_left(handle)
        if total == 0:
            return ToolResult(content=f"{name} is empty (0 lines)", metadata={"lines": 0})
        if not shown:
            raise ToolError(f"offset {offset} is past the end of {name}: it has {total} lines")
        last = offset + len(shown) - 1
        header = f"{name}: lines {offset}–{last} of {total}"
        if last < total:
            header += f"; to read more, call read_file with offset={last + 1}"
        notes = []
        if full:
            notes.append(f"[output limit of {READ_OUTPUT_MAX_CHARS:,} characters reached at line {last}]")
        if cut:
            notes.append(f"[{cut} line(s) longer than {READ_LINE_MAX_CHARS} characters were cut]")
        if invalid_utf8:
            notes.append("[the file is not valid UTF-8: undecodable bytes are shown as �]")
        content = "\n".join([header, *shown, *notes])
        metadata = {"lines": total, "first": offset, "last": last, "truncated": last < total or bool(cut)}
        return ToolResult(content=content, metadata=metadata)


# -- list_dir -------------------------------------------------------------------------------------


class ListDir(BuiltinTool):
    spec = ToolSpec(
        name="list_dir",
        description=(
            "List a directory in the workspace: directories first (with a trailing /), then files "
            f"with their sizes; symlinks show their target. At most {LIST_MAX_ENTRIES} entries."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Directory, relative to the workspace (default .)."}
            },
            "required": [],
        },
    )

    def execute(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        path = resolve_path(context, string_arg(arguments, "path", ".") or ".")
        name = display(path, context)
        if not path.exists():
            raise ToolError(f"no such directory: {name}")
        if not path.is_dir():
            raise ToolError(f"{name} is a file, not a directory; use read_file to read it")
        with os.scandir(path) as scan:
            entries = list(scan)
        # lstat semantics: a symlink is listed as a link, never followed out of the workspace.
        entries.sort(key=lambda e: (not e.is_dir(follow_symlinks=False), e.name.casefold(), e.name))
        lines = [f"{name}/: {len(entries)} entries"]
        for entry in entries[:LIST_MAX_ENTRIES]:
            label = strip_control(entry.name)
            if entry.is_symlink():
                lines.append(f"{label}@ -> {strip_control(os.readlink(entry.path))}")
            elif entry.is_dir(follow_symlinks=False):
                lines.append(f"{label}/")
            else:
                lines.append(f"{label}  ({human_size(entry.stat(follow_symlinks=False).st_size)})")
        if len(entries) > LIST_MAX_ENTRIES:
            lines.append(f"… {len(entries) - LIST_MAX_ENTRIES} more")
        return ToolResult(
            content="\n".join(lines),
            metadata={"entries": len(entries), "truncated": len(entries) > LIST_MAX_ENTRIES},
        )


# -- glob -----------------------------------------------------------------------------------------


def _base_dir(arguments: Mapping[str, Any], context: ToolContext) -> Path:
    base = resolve_path(context, string_arg(arguments, "path", ".") or ".")
    if not base.exists():
        raise ToolError(f"no such directory: {display(base, context)}")
    return base


class Glob(BuiltinTool):
    spec = ToolSpec(
        name="glob",
        description=(
            "Find files and directories by glob pattern, relative to `path` (default: the workspace). "
            "`*` and `?` match within a path part, `**` across parts, `{a,b}` alternatives; e.g. "
            f"`**/*.py`, `src/**/test_*.{{py,md}}`. Returns sorted paths, at most {GLOB_MAX_RESULTS}; "
            "`.git` is skipped."
        ),
        parameters={
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Glob pattern, e.g. **/*.py"},
                "path": {"type": "string", "description": "Directory to search from (default .)."},
            },
            "required": ["pattern"],
        },
    )

    def execute(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        pattern = string_arg(arguments, "pattern").strip()
        if not pattern or pattern.startswith("/") or ".." in pattern.split("/"):
            raise ToolError(f"pattern {pattern!r} must be relative and must not contain '..'")
        base = _base_dir(arguments, context)
        if not base.is_dir():
            raise ToolError(f"{display(base, context)} is not a directory")
        regex = glob_regex(pattern.removeprefix("./"))
        root = workspace_root(context)
        budget = [WALK_MAX_ENTRIES]
        found = []
        for path, is_dir in walk_files(base, budget):
            if regex.match(path.relative_to(base).as_posix()):
                found.append(walked_name(path, root) + ("/" if is_dir else ""))
            if context.cancel.cancelled:
                return error("glob was cancelled")
        found.sort()
        where = display(base, context)
        if not found:
            content = f"no paths match {pattern!r} under {where}"
        else:
            content = "\n".join(
                [
                    f"{len(found)} paths match {pattern!r} under {where}",
                    *map(strip_control, found[:GLOB_MAX_RESULTS]),
                ]
            )
            if len(found) > GLOB_MAX_RESULTS:
                content += f"\n… {len(found) - GLOB_MAX_RESULTS} more; narrow the pattern or path"
        if budget[0] <= 0:
            content += f"\n[stopped after scanning {WALK_MAX_ENTRIES:,} entries; narrow the path]"
        return ToolResult(
            content=content, metadata={"matches": len(found), "truncated": len(found) > GLOB_MAX_RESULTS}
        )


# -- grep -----------------------------------------------------------------------------------------


class Grep(BuiltinTool):
    spec = ToolSpec(
        name="grep",
        description=(
            "Search file contents with a Python regular expression. Returns `path:line: text` for each "
            f"matching line (at most {GREP_MAX_MATCHES}; lines cut at {GREP_LINE_MAX_CHARS} characters). "
            "`glob` filters files (a pattern without / matches file names, e.g. `*.py`). Binary files "
            "and `.git` are skipped."
        ),
        parameters={
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Python regular expression."},
                "path": {"type": "string", "description": "File or directory to search (default .)."},
                "glob": {"type": "string", "description": "Only search files matching this glob."},
                "ignore_case": {"type": "boolean", "description": "Case-insensitive match."},
            },
            "required": ["pattern"],
        },
    )

    def execute(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        pattern = string_arg(arguments, "pattern")
        flags = regex.IGNORECASE if bool_arg(arguments, "ignore_case") else 0
        try:
            # `re` decides what is a valid pattern (the tool promises Python's syntax and words);
            # `regex` runs it, because its searches take a timeout and `re`'s cannot be stopped.
            re.compile(pattern, flags)
            line_regex = regex.compile(pattern, flags)
        except (re.error, regex.error) as exc:
            raise ToolError(f"invalid regular expression {pattern!r}: {exc}") from None
        # Whole-file prefilter (one C-speed scan per file): MULTILINE makes ^/$ match at every
        # line, so a file with a matching line always passes. \A and \Z mean "line start/end"
        # per line but "file start/end" on the whole text, so such patterns skip the prefilter.
        prefilter = (
            None if re.search(r"\\[AZz]", pattern) else regex.compile(pattern, flags | regex.MULTILINE)
        )
        file_filter = string_arg(arguments, "glob", "") or ""
        name_only = "/" not in file_filter
        filter_regex = glob_regex(file_filter) if file_filter else None
        base = _base_dir(arguments, context)
        root = workspace_root(context)
        budget = [WALK_MAX_ENTRIES]
        files = [base] if base.is_file() else (p for p, is_dir in walk_files(base, budget) if not is_dir)
        matches: list[str] = []
        binary = large = special = 0
        full = False
        for path in files:
            if context.cancel.cancelled:
                return error("grep was cancelled")
            if filter_regex is not None and path != base:
                subject = path.name if name_only else path.relative_to(base).as_posix()
                if not filter_regex.match(subject):
                    continue
            if path.is_symlink() and not Path(os.path.realpath(path)).is_relative_to(root):
                continue  # a link out of the workspace is not followed
            try:
                data, size = _read_regular(path, GREP_MAX_FILE_BYTES)
            except OSError:
                continue  # unreadable files (permissions, dangling links) are not the model's concern
            if data is None:
                special += 1
                continue
            if size > GREP_MAX_FILE_BYTES:
                large += 1
                continue
            if is_binary(data):
                binary += 1
                continue
            text = data.decode("utf-8", "replace")
            name = display(path, context) if path == base else walked_name(path, root)
            try:
                if prefilter is not None and not prefilter.search(text, timeout=GREP_MATCH_TIMEOUT):
                    continue
                for number, line in enumerate(text.split("\n"), 1):
                    if number % GREP_CANCEL_EVERY == 0 and context.cancel.cancelled:
                        return error("grep was cancelled")
                    if line_regex.search(line, timeout=GREP_MATCH_TIMEOUT):
                        cleaned = strip_control(line.replace("\r", ""))
                        matches.append(f"{name}:{number}: {cut_line(cleaned, GREP_LINE_MAX_CHARS)}")
                        if len(matches) >= GREP_MAX_MATCHES:
                            full = True
                            break
            except TimeoutError:
                return error(
                    f"grep stopped: matching {pattern!r} took longer than {GREP_MATCH_TIMEOUT:g} s in "
                    f"{name}; the pattern backtracks too much (nested repetition such as (a+)+), simplify it"
                )
            if full:
                break
        where = display(base, context)
        lines = matches or [f"no matches for {pattern!r} in {where}"]
        if full:
            lines.append(f"[stopped at {GREP_MAX_MATCHES} matches; narrow the pattern, path or glob]")
        if budget[0] <= 0:
            lines.append(f"[stopped after scanning {WALK_MAX_ENTRIES:,} entries; narrow the path]")
        if binary:
            lines.append(f"[{binary} binary file(s) skipped]")
        if large:
            lines.append(f"[{large} file(s) over {human_size(GREP_MAX_FILE_BYTES)} skipped]")
        if special:
            lines.append(f"[{special} FIFO, device or socket file(s) skipped]")
        return ToolResult(content="\n".join(lines), metadata={"matches": len(matches), "truncated": full})


def _read_regular(path: Path, limit: int) -> tuple[bytes | None, int]:
    """(bytes, size) of a regular file, its bytes empty when it is over `limit`; (None, 0) for a
    FIFO, device or socket, which is never read: it could block forever (O_NONBLOCK opens it)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            return None, 0
        if status.st_size > limit:
            return b"", status.st_size
        os.set_blocking(fd, True)
        data = handle.read()
        return data, len(data)


# -- write_file and edit_file ---------------------------------------------------------------------


class WriteFile(BuiltinTool):
    spec = ToolSpec(
        name="write_file",
        description=(
            "Write a text file in the workspace (UTF-8), replacing it if it exists; missing parent "
            "directories are created. Prefer edit_file for changes to an existing file."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace."},
                "content": {"type": "string", "description": "The complete new content."},
            },
            "required": ["path", "content"],
        },
        effect=Effect.WRITE,
    )

    def execute(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        path = resolve_path(context, string_arg(arguments, "path"))
        name = display(path, context)
        data = string_arg(arguments, "content").encode("utf-8", "replace")
        if path.is_dir():
            raise ToolError(f"{name} is a directory; give a file path")
        existed = path.exists()
        fd = open_beneath(context, path, os.O_WRONLY | os.O_CREAT, make_parents=True)
        writable_file(fd, name, "write_file")
        try:
            os.set_blocking(fd, True)
            os.ftruncate(fd, 0)
            write_all(fd, data)
        finally:
            os.close(fd)
        verb = "overwrote" if existed else "created"
        return ToolResult(
            content=f"wrote {len(data):,} bytes to {name} ({verb})",
            metadata={"bytes": len(data), "created": not existed},
        )


class EditFile(BuiltinTool):
    spec = ToolSpec(
        name="edit_file",
        description=(
            "Replace an exact string in a text file. `old_string` must occur exactly once (include "
            "surrounding lines to make it unique) unless `replace_all` is true. Whitespace and line "
            "endings must match exactly."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace."},
                "old_string": {"type": "string", "description": "The exact text to replace."},
                "new_string": {"type": "string", "description": "The replacement text."},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence."},
            },
            "required": ["path", "old_string", "new_string"],
        },
        effect=Effect.WRITE,
    )

    def execute(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        path = resolve_path(context, string_arg(arguments, "path"))
        name = display(path, context)
        old, new = string_arg(arguments, "old_string"), string_arg(arguments, "new_string")
        if not old:
            raise ToolError("old_string is empty; to create a file use write_file")
        if old == new:
            raise ToolError("old_string and new_string are identical; nothing to change")
        if not path.is_file():
            raise ToolError(f"no such file: {name}")
        fd = open_beneath(context, path, os.O_RDWR)
        writable_file(fd, name, "edit_file")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "r+b") as handle:
            return self._edit(handle, name, old, new, bool_arg(arguments, "replace_all"))

    @staticmethod
    def _edit(handle: Any, name: str, old: str, new: str, replace_all: bool) -> ToolResult:
        try:
            # Bytes in, bytes out: line endings stay exactly as they were.
            text = handle.read().decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{name} is not valid UTF-8 text; edit_file edits text files only") from None
        count = text.count(old)
        if count == 0:
            raise ToolError(f"old_string not found in {name}; read the file and copy the text exactly")
        if count > 1 and not replace_all:
            raise ToolError(
                f"old_string found {count} times in {name}; add surrounding context to make it unique "
                "or set replace_all"
            )
        handle.seek(0)
        handle.truncate()
        handle.write(text.replace(old, new).encode("utf-8", "replace"))
        return ToolResult(
            content=f"replaced {count} occurrence{'s' if count > 1 else ''} in {name}",
            metadata={"replacements": count},
        )


# -- shell ----------------------------------------------------------------------------------------


class OutputCapture:
    """Keeps the first and last bytes of a stream of any size, and counts what it cut."""

    def __init__(self, head_limit: int, tail_limit: int) -> None:
        self.head_limit, self.tail_limit = head_limit, tail_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            # Trim in bulk, not per chunk: amortised O(1) per byte however long the stream.
            if len(self.tail) > 2 * self.tail_limit:
                del self.tail[: len(self.tail) - self.tail_limit]

    @property
    def cut_bytes(self) -> int:
        return self.total - len(self.head) - min(len(self.tail), self.tail_limit)

    def text(self) -> str:
        tail = bytes(self.tail[-self.tail_limit :]) if self.tail_limit else b""
        if self.cut_bytes <= 0:
            return strip_control(bytes(self.head + tail).decode("utf-8", "replace"))
        head = strip_control(bytes(self.head).decode("utf-8", "replace"))
        kept = human_size(self.tail_limit)
        marker = f"\n[… {self.cut_bytes:,} bytes of output cut; the first and last {kept} are kept …]\n"
        return head + marker + strip_control(tail.decode("utf-8", "replace"))


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
        os.killpg(pgid, signal.SIGKILL)


class Shell(BuiltinTool):
    spec = ToolSpec(
        name="shell",
        description=(
            "Run a command with bash in the workspace directory (stdin is empty). Returns stdout and "
            f"stderr merged, and the exit code. `timeout` in seconds (default 30 unless configured, at most "
            f"{SHELL_MAX_TIMEOUT:g}); on timeout the command and its children are killed. Output over "
            "1 MB keeps its first and last 512 KB."
        ),
        parameters={
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command line, run with bash -c."},
                "timeout": {"type": "number", "description": "Seconds before the command is killed."},
            },
            "required": ["command"],
        },
        effect=Effect.SHELL,
    )

    def execute(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        command = string_arg(arguments, "command")
        if not command.strip():
            raise ToolError("command is empty")
        timeout = arguments.get("timeout", context.timeout)
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
            raise ToolError(f"timeout must be a positive number of seconds, got {timeout!r}")
        timeout = min(float(timeout), SHELL_MAX_TIMEOUT)
        if context.cancel.cancelled:
            return error("cancelled by the user before the command started", cancelled=True)
        shell = shutil.which("bash") or shutil.which("sh") or "/bin/sh"
        workspace = workspace_root(context)
        start = time.monotonic()
        # Inside bubblewrap when it works here; a watcher kills the command's groups if Foya dies
        # (even by SIGKILL) before the call ends (sandbox.py, supervisor.py).
        started = start_shell(shell, command, workspace, context.shell_network)
        process = started.process
        watcher = watch(started.groups)
        try:
            capture = OutputCapture(SHELL_OUTPUT_HEAD_BYTES, SHELL_OUTPUT_TAIL_BYTES)
            stopped = self._pump(process, started.groups, capture, context, start + timeout)
        finally:
            release(watcher)
        duration = time.monotonic() - start
        output = capture.text()
        metadata: dict[str, Any] = {
            "exit_code": process.returncode,
            "duration": duration,
            "output_bytes": capture.total,
            "truncated": capture.cut_bytes > 0,
            "sandbox": "bwrap" if shell_confinement().confined else "none",
        }
        if stopped == "timeout":
            metadata["timed_out"] = True
            return ToolResult(
                content=f"timed out after {timeout:g} s; the command and its children were killed. "
                f"Output so far:\n{output}",
                is_error=True,
                metadata=metadata,
            )
        if stopped == "cancelled":
            metadata["cancelled"] = True
            return ToolResult(
                content="cancelled by the user; the command and its children were killed. "
                f"Output so far:\n{output}",
                is_error=True,
                metadata=metadata,
            )
        code = process.returncode
        if code != 0:
            return ToolResult(
                content=f"{output.rstrip(chr(10))}\n[exit code {code}]".lstrip("\n"),
                is_error=True,
                metadata=metadata,
            )
        return ToolResult(content=output or "(no output)", metadata=metadata)

    @staticmethod
    def _pump(
        process: subprocess.Popen[bytes],
        groups: tuple[int, ...],
        capture: OutputCapture,
        context: ToolContext,
        deadline: float,
    ) -> str | None:
        """Collect output until the command ends; returns "timeout"/"cancelled" when it was killed.

        Polls rather than blocks, so the deadline and the cancel token are checked every 50 ms.
        When the shell has exited but a background child still holds the pipe, output is collected
        for a short grace period and then left behind: the call ends with the command.
        """
        assert process.stdout is not None
        descriptor = process.stdout.fileno()
        os.set_blocking(descriptor, False)
        selector = selectors.DefaultSelector()
        selector.register(descriptor, selectors.EVENT_READ)
        eof = False
        exited_at: float | None = None
        stopped: str | None = None

        def read_available() -> None:
            nonlocal eof
            for _ in selector.select(SHELL_POLL_SECONDS):
                try:
                    chunk = os.read(descriptor, 1 << 16)
                except BlockingIOError:
                    continue
                if chunk:
                    capture.add(chunk)
                else:
                    eof = True

        try:
            while True:
                if eof:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        process.wait(SHELL_POLL_SECONDS)
                else:
                    read_available()
                now = time.monotonic()
                if process.poll() is not None:
                    exited_at = now if exited_at is None else exited_at
                    if eof or now - exited_at >= SHELL_DRAIN_SECONDS:
                        break
                if context.cancel.cancelled:
                    stopped = "cancelled"
                    break
                if now >= deadline:
                    stopped = "timeout"
                    break
            if stopped is not None:
                for pgid in groups:
                    kill_group(pgid)
                # What the command wrote before the kill is still in the pipe: keep it.
                drain_until = time.monotonic() + SHELL_DRAIN_SECONDS
                while not eof and time.monotonic() < drain_until:
                    read_available()
        finally:
            if process.poll() is None and stopped is None:
                for pgid in groups:  # only reached when this thread itself was interrupted
                    kill_group(pgid)
            selector.close()
            process.stdout.close()
            process.wait()
        return stopped


def builtin_tools() -> list[BuiltinTool]:
    """The built-in tools, in the order their schemas are sent."""
    return [ReadFile(), ListDir(), Glob(), Grep(), WriteFile(), EditFile(), Shell()]

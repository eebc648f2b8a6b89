"""Tests the tools at their edges, on real files: a catastrophic regex, FIFOs in the tree, the cancel
token inside one long file, hard links and symbolic-link races (the workspace confinement)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from foya_tui.runtime.providers.client import CancelToken
from foya_tui.runtime.tools import ToolContext, ToolRegistry, ToolResult, builtin, default_registry

DEADLINE = 60.0
"""Seconds a tool call may take before the test calls it frozen (the bug took 9 minutes)."""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


@pytest.fixture
def registry() -> ToolRegistry:
    return default_registry()


def call(
    registry: ToolRegistry, ws: Path, name: str, cancel: CancelToken | None = None, **args: Any
) -> ToolResult:
    context = ToolContext(workdir=ws, session_id="s", store=None, cancel=cancel or CancelToken())
    return registry.call(name, json.dumps(args), context)


def within_deadline(run: Callable[[], ToolResult]) -> ToolResult:
    """Run a call in a thread; fail (rather than hang the suite) when it does not end in time."""
    box: list[ToolResult] = []
    worker = threading.Thread(target=lambda: box.append(run()), daemon=True)
    worker.start()
    worker.join(DEADLINE)
    assert box, f"the tool call was still running after {DEADLINE:g} s"
    return box[0]


# -- 2. grep and read_file never freeze ------------------------------------------------------------


def test_a_catastrophic_pattern_is_stopped_with_a_clear_error(registry: ToolRegistry, ws: Path) -> None:
    (ws / "evil.txt").write_text("a" * 37 + "!\n", encoding="utf-8")
    # The reported pattern: `regex` no longer backtracks on it at all.
    reported = within_deadline(lambda: call(registry, ws, "grep", pattern="(a+)+$"))
    assert reported.content == "no matches for '(a+)+$' in ."
    # One that backtracks exponentially in `regex` too, stopped by the timeout.
    result = within_deadline(lambda: call(registry, ws, "grep", pattern="(a|aa)+$"))
    assert result.is_error
    assert result.content.startswith("grep stopped: matching '(a|aa)+$' took longer than")
    assert "evil.txt" in result.content and "\n" not in result.content


def test_grep_skips_a_fifo_and_read_file_refuses_it(registry: ToolRegistry, ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    (ws / "code.py").write_text("needle = 1\n", encoding="utf-8")
    result = within_deadline(lambda: call(registry, ws, "grep", pattern="needle"))
    assert not result.is_error
    assert result.content.splitlines() == [
        "code.py:1: needle = 1",
        "[1 FIFO, device or socket file(s) skipped]",
    ]
    refused = within_deadline(lambda: call(registry, ws, "read_file", path="pipe"))
    assert refused.is_error
    assert refused.content == "pipe is not a regular file (a FIFO, device or socket); read_file refuses it"


def test_grep_honours_the_cancel_token_inside_one_long_file(registry: ToolRegistry, ws: Path) -> None:
    """The token is looked at while one file is scanned, not only between files."""
    (ws / "big.log").write_text("line\n" * 50_000, encoding="utf-8")

    class CancelsAfterLooks(CancelToken):
        looks = 0

        @property
        def cancelled(self) -> bool:
            self.looks += 1
            return self.looks > 2  # the first look is before the file; the next ones are inside it

    # \A skips the whole-file prefilter, so every line is searched.
    result = call(registry, ws, "grep", cancel=CancelsAfterLooks(), pattern="\\Anomatch")
    assert result.is_error and result.content == "grep was cancelled"


# -- 3. confinement: hard links and symlink races -------------------------------------------------


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "outside.txt"
    secret.write_text("outside the workspace\n", encoding="utf-8")
    return secret


def test_writing_through_a_hard_link_is_refused(registry: ToolRegistry, ws: Path, outside: Path) -> None:
    os.link(outside, ws / "linked.txt")
    written = call(registry, ws, "write_file", path="linked.txt", content="pwned")
    edited = call(registry, ws, "edit_file", path="linked.txt", old_string="outside", new_string="pwned")
    for result, tool in ((written, "write_file"), (edited, "edit_file")):
        assert result.is_error
        assert result.content == (
            "refused: linked.txt has 2 hard links, and another may be outside the workspace; "
            f"{tool} does not change a file through a hard link (copy it to a new file first)"
        )
    assert outside.read_text(encoding="utf-8") == "outside the workspace\n"


def test_write_and_edit_still_work_on_ordinary_files(registry: ToolRegistry, ws: Path) -> None:
    assert not call(registry, ws, "write_file", path="deep/new/file.txt", content="one two\n").is_error
    assert not call(
        registry, ws, "edit_file", path="deep/new/file.txt", old_string="one", new_string="1"
    ).is_error
    assert (ws / "deep/new/file.txt").read_text(encoding="utf-8") == "1 two\n"
    shorter = call(registry, ws, "edit_file", path="deep/new/file.txt", old_string="1 two", new_string="x")
    assert not shorter.is_error and (ws / "deep/new/file.txt").read_text(encoding="utf-8") == "x\n"


def test_a_directory_swapped_for_a_symlink_after_the_check_is_not_followed(
    registry: ToolRegistry, ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race: `sub` is a real directory when the path is checked and a link out of the
    workspace when it is opened. The open walks with O_NOFOLLOW, so nothing outside is written."""
    (ws / "sub").mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    checked = builtin.resolve_path

    def check_then_swap(context: ToolContext, raw: str) -> Path:
        real = checked(context, raw)
        (ws / "sub").rmdir()
        (ws / "sub").symlink_to(elsewhere, target_is_directory=True)
        return real

    monkeypatch.setattr(builtin, "resolve_path", check_then_swap)
    written = call(registry, ws, "write_file", path="sub/escape.txt", content="escaped")
    assert written.is_error
    assert written.content == "refused: 'sub' became a symbolic link while it was opened"
    assert not (elsewhere / "escape.txt").exists()


def test_a_file_swapped_for_a_symlink_after_the_check_is_not_read(
    registry: ToolRegistry, ws: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "notes.txt").write_text("inside\n", encoding="utf-8")
    checked = builtin.resolve_path

    def check_then_swap(context: ToolContext, raw: str) -> Path:
        real = checked(context, raw)
        (ws / "notes.txt").unlink()
        (ws / "notes.txt").symlink_to(outside)
        return real

    monkeypatch.setattr(builtin, "resolve_path", check_then_swap)
    result = call(registry, ws, "read_file", path="notes.txt")
    assert result.is_error and "outside the workspace" not in result.content
    assert result.content == "refused: notes.txt became a symbolic link while it was opened"

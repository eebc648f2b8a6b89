"""Provides the compaction hook: a configured command that runs before every compaction and may
veto it (SPEC K-7).

The hook gets the facts of the planned compaction as JSON on stdin and answers with its exit code:
0 lets the compaction go on; anything else blocks it, and the first line it printed is the reason.
A blocked compaction keeps the context as it is — no checkpoint, no deterministic fallback faked in
its place. A hook that cannot run or takes too long blocks too: it was configured as a gate, so a
broken gate stays closed, and says why.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from foya_tui.runtime.text import strip_control

REASON_CHARS = 300


def hook_veto(command: str, facts: Mapping[str, Any], *, cwd: str, timeout: float) -> str | None:
    """Run the hook; None when it allows the compaction, else the one-line reason it is blocked."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        return f"the compaction hook is not a valid command line ({exc})"
    if not argv:
        return None
    workdir = cwd if cwd and Path(cwd).is_dir() else None
    try:
        done = subprocess.run(
            argv,
            input=json.dumps(dict(facts), ensure_ascii=False),
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            cwd=workdir,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"the compaction hook did not answer within {timeout:g} s"
    except OSError as exc:
        return f"the compaction hook could not run ({exc.strerror or exc})"
    if done.returncode == 0:
        return None
    # The reason reaches the screen: terminal escapes and control characters never do.
    said = next(
        (
            line.strip()
            for line in strip_control(done.stdout + "\n" + done.stderr).splitlines()
            if line.strip()
        ),
        "",
    )
    reason = said[:REASON_CHARS] if said else f"it exited with status {done.returncode}"
    return f"the compaction hook blocked it: {reason}"

"""Provides the parts of the system prompt: the static kernel and the environment block (SPEC X-2).

Stable parts come first so providers can cache the prompt prefix; the environment block, which
changes, comes last.
"""

from __future__ import annotations

import os
import platform
from datetime import datetime
from pathlib import Path

KERNEL_PROMPT = """\
You are Foya, an assistant working with a person in their terminal over a long session.
Answer precisely and say when you are unsure. Prefer small, verifiable steps."""


def environment_block(workdir: Path, now: datetime) -> str:
    """Working dir, platform, shell and date (the date only: a clock time would change every
    request and defeat the provider's prompt cache)."""
    shell = os.environ.get("SHELL") or os.environ.get("COMSPEC") or "unknown"
    return (
        "<environment>\n"
        f"working directory: {workdir}\n"
        f"platform: {platform.system()} {platform.release()}\n"
        f"shell: {shell}\n"
        f"date: {now.date().isoformat()}\n"
        "</environment>"
    )


def system_prompt(workdir: Path, now: datetime, kernel: str | None = None) -> str:
    return f"{kernel or KERNEL_PROMPT}\n\n{environment_block(workdir, now)}"

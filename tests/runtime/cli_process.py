"""Provides running `python -m foya_tui` as a real subprocess for the hardening tests: its exit
code, stdout and stderr as bytes and text, under an isolated `FOYA_HOME`."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

TIMEOUT_SECONDS = 180


@dataclass(frozen=True)
class Completed:
    code: int
    out: bytes
    err: bytes

    @property
    def stdout(self) -> str:
        return self.out.decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        return self.err.decode("utf-8", "replace")


def foya_env(home: Path, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("FOYA_")}
    env.update({"FOYA_HOME": str(home), "FOYA_TEST_KEY": "sk-test-hardening", **extra})
    return env


def foya_command(*argv: str | bytes) -> list[str | bytes]:
    return [sys.executable, "-m", "foya_tui", *argv]


def run_foya(
    home: Path, *argv: str | bytes, stdin: bytes | None = None, cwd: Path | None = None, **env: str
) -> Completed:
    """Run one `foya` command to completion (bytes arguments reach argv undecoded)."""
    home.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        foya_command(*argv),
        input=stdin,
        capture_output=True,
        env=foya_env(home, **env),
        cwd=cwd or home,
        timeout=TIMEOUT_SECONDS,
    )
    return Completed(result.returncode, result.stdout, result.stderr)


def write_fake_config(home: Path, base_url: str, model: str) -> None:
    """A config whose default route is the loopback fake server's `model` scenario."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'model = "openai/{model}"\nconnection = "fake"\napproval_mode = "auto"\n'
        f'[connections.fake]\napi_base = "{base_url}"\napi_key_env = "FOYA_TEST_KEY"\n'
        f'[models."openai/{model}"]\nconnection = "fake"\nwindow = 32768\n',
        encoding="utf-8",
    )

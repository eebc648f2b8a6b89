"""Tests the shell tool's process lifetime and confinement with real processes: a command started by
a real `foya run` (auto approval, the hostile loopback provider asking for the call) dies when Foya
is killed by SIGKILL, SIGTERM or SIGHUP; inside bubblewrap (when it works here) the system is
read-only, the workspace writable and the network off unless `[tools] shell_network`."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from foya_tui.runtime.tools import ToolContext, default_registry
from foya_tui.runtime.tools.sandbox import shell_confinement
from tests.fakes.hostile_server import HostileOpenAIServer

needs_proc = pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs Linux /proc")
DEADLINE = 60.0


def processes_running(argv: list[str]) -> list[int]:
    """Pids whose command line is exactly `argv`."""
    wanted = ("\0".join(argv) + "\0").encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes() == wanted:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def poll(condition, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@needs_proc
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP], ids=["KILL", "TERM", "HUP"])
def test_a_running_shell_command_dies_with_foya(tmp_path: Path, isolated_home: Path, sig: int) -> None:
    seconds = str(86_000 + os.getpid() % 300 * 3 + int(sig) % 3)  # unique per run and signal
    sleep = ["sleep", seconds]
    workdir = tmp_path / "work"
    workdir.mkdir()
    with HostileOpenAIServer(command=f"sleep {seconds}; echo after") as server:
        isolated_home.mkdir(parents=True, exist_ok=True)
        (isolated_home / "config.toml").write_text(
            'model = "openai/shell"\nconnection = "fake"\n'
            f'[connections.fake]\napi_base = "{server.base_url}"\napi_key_env = "FOYA_TEST_KEY"\n',
            encoding="utf-8",
        )
        env = {**os.environ, "FOYA_TEST_KEY": "sk-test-lifetime", "FOYA_HOME": str(isolated_home)}
        foya = subprocess.Popen(
            [sys.executable, "-m", "foya_tui", "run", "run the command", "--approval", "auto"],
            cwd=workdir,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            poll(lambda: processes_running(sleep) or foya.poll() is not None, "the shell never started")
            assert foya.poll() is None, foya.stderr.read().decode() if foya.stderr else ""
            foya.send_signal(sig)
            foya.wait(DEADLINE)
            poll(lambda: not processes_running(sleep), f"`sleep {seconds}` outlived Foya")
        finally:
            if foya.poll() is None:
                foya.kill()
                foya.wait()
            for pid in processes_running(sleep):  # never leave one behind, even on failure
                os.kill(pid, signal.SIGKILL)


bwrap_works = pytest.mark.skipif(not shell_confinement().confined, reason=shell_confinement().reason)


def run_shell(workdir: Path, command: str, network: bool = False) -> str:
    context = ToolContext(workdir=workdir, session_id="s", store=None, shell_network=network)
    result = default_registry().call("shell", json.dumps({"command": command}), context)
    return result.content


@bwrap_works
def test_inside_bubblewrap_the_system_is_read_only_and_the_workspace_writable(tmp_path: Path) -> None:
    # Not under /tmp: the sandbox gives /tmp a private tmpfs, where a write would succeed unseen.
    outside = Path(f"/var/foya-sandbox-probe-{os.getpid()}")
    workdir = tmp_path / "ws"
    workdir.mkdir()
    output = run_shell(workdir, f"echo in > inside.txt; echo out > {outside} 2>&1; echo rc=$?")
    assert (workdir / "inside.txt").read_text(encoding="utf-8") == "in\n"
    assert not outside.exists()
    assert "Read-only file system" in output and "rc=1" in output


@bwrap_works
def test_inside_bubblewrap_the_network_is_off_unless_allowed(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        probe = (
            f"{sys.executable} -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 5)\""
            " && echo connected || echo refused"
        )
        assert run_shell(tmp_path, probe).strip().splitlines()[-1] == "refused"
        assert run_shell(tmp_path, probe, network=True).strip().splitlines()[-1] == "connected"

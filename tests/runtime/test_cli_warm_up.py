"""Tests `foya run` with LiteLLM imported in the background (issue 17): the import starts once the
route is checked and before the prompt is read or the database opened, the first request waits
for it, the run imports nothing LiteLLM's import shares, every event is committed and the exit
code is right in a process of its own, and the failures stay one line — a route that cannot be
sent exits 2 having written nothing while the import is still under way, and a LiteLLM that
cannot be imported is named as such, the run neither hanging nor crashing.

The real-process tests put a stand-in `litellm` package first on PYTHONPATH where they need an
import that never ends or that fails."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from foya_tui import cli
from foya_tui.cli import main
from tests.runtime.cli_process import TIMEOUT_SECONDS, foya_command, foya_env, run_foya

# A LiteLLM whose import starts, leaves a mark, and never ends.
NEVER_IMPORTED = """
import os, pathlib, threading
pathlib.Path(os.environ["FAKE_LITELLM_MARK"]).write_text("started", encoding="utf-8")
threading.Event().wait()
"""
BROKEN_IMPORTS = {
    "absent": "raise ModuleNotFoundError(\"No module named 'litellm'\", name='litellm')",
    "broken": "raise RuntimeError('pydantic-core does not match this pydantic')",
}


def stand_in_litellm(folder: Path, source: str) -> Path:
    """A folder holding a `litellm` package made of `source`, for PYTHONPATH."""
    package = folder / "litellm"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(source, encoding="utf-8")
    return folder


def sessions(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    capsys.readouterr()
    assert main(["sessions", "--json"]) == 0
    return json.loads(capsys.readouterr().out)["sessions"]


def kinds(capsys: pytest.CaptureFixture[str], session: str) -> list[str]:
    capsys.readouterr()
    assert main(["export", session]) == 0
    return [json.loads(line)["kind"] for line in capsys.readouterr().out.splitlines() if line.strip()]


# -- the order: route check, import, everything else; the first request waits for it ----------


def test_the_import_starts_after_the_route_check_and_before_the_prompt_and_the_database(
    capsys, workdir: Path, monkeypatch
) -> None:
    from foya_tui.runtime import runtime as runtime_module
    from foya_tui.runtime.providers import litellm_client
    from foya_tui.runtime.store.events import EventStore

    steps: list[str] = []

    def recorded(step: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            # The warm-up's own thread calls load_litellm too: only the run's steps count here.
            if threading.current_thread() is threading.main_thread():
                steps.append(step)
            return function(*args, **kwargs)

        return wrapper

    def exit_now(code: int) -> None:  # the process's own end, made a test's
        raise SystemExit(code)

    monkeypatch.setattr(cli, "_preflight", recorded("route checked", cli._preflight))
    monkeypatch.setattr(litellm_client, "warm_up", recorded("import started", litellm_client.warm_up))
    monkeypatch.setattr(cli, "_read_stdin_text", recorded("prompt read", lambda what: "hello"))
    monkeypatch.setattr(runtime_module, "open_database", recorded("database", runtime_module.open_database))
    monkeypatch.setattr(EventStore, "append", recorded("appended", EventStore.append))
    monkeypatch.setattr(
        litellm_client, "load_litellm", recorded("provider needed", litellm_client.load_litellm)
    )
    monkeypatch.setattr(cli, "_exit_now", exit_now)
    monkeypatch.setattr(sys, "argv", ["foya", "run", "-"])  # as a process of its own
    monkeypatch.chdir(workdir)
    with pytest.raises(SystemExit) as ended:
        cli.main()
    assert ended.value.code == 0, capsys.readouterr().err
    order = ["route checked", "import started", "prompt read", "database", "appended", "provider needed"]
    assert sorted(set(steps), key=steps.index) == order, steps
    assert steps.count("import started") == 1


def test_called_with_arguments_the_cli_starts_no_import(capsys, workdir: Path, monkeypatch) -> None:
    from foya_tui.runtime.providers import litellm_client

    started: list[bool] = []
    monkeypatch.setattr(litellm_client, "warm_up", lambda: started.append(True))
    monkeypatch.chdir(workdir)
    assert main(["run", "hello"]) == 0 and started == []


def test_the_run_imports_nothing_that_litellm_imports_while_it_loads(tmp_path: Path) -> None:
    """Two threads importing one package at once can see it half-initialised, so nothing the run
    imports after the background import started may be part of LiteLLM's own import."""
    probe = """
import json, sys
import foya_tui.cli as cli
from foya_tui.runtime.providers import litellm_client
seen = {}

def warm_up():  # recorded, not started: what the run imports afterwards is its own
    seen["started"] = sorted(sys.modules)

def load_litellm():
    seen["needed"] = sorted(sys.modules)
    raise SystemExit(0)

litellm_client.warm_up = warm_up
litellm_client.load_litellm = load_litellm
try:
    cli.main()  # as a process of its own (the arguments are this script's)
except SystemExit:
    pass
print(json.dumps(seen))
"""
    env = foya_env(tmp_path / "home", OPENAI_API_KEY="sk-test-0000")
    later: set[str] = set()
    for argv in (["run", "hello", "--json"], ["run", "hello", "--model", "openai/gpt-4.1"]):
        result = subprocess.run(
            [sys.executable, "-c", probe, *argv], capture_output=True, text=True, env=env, check=True
        )
        seen = json.loads(result.stdout.strip().splitlines()[-1])
        assert set(seen) == {"started", "needed"}, result.stderr
        later |= set(seen["needed"]) - set(seen["started"])
    closure = subprocess.run(
        [sys.executable, "-c", "import json, sys, litellm; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    shared = later & set(json.loads(closure.stdout.strip().splitlines()[-1]))
    assert not shared, sorted(shared)


# -- a process of its own: events committed, exit codes right -----------------------------------


def test_a_run_in_its_own_process_commits_every_event_and_exits_0(capsys, isolated_home: Path) -> None:
    result = run_foya(isolated_home, "run", "hello")
    assert result.code == 0, result.stderr
    assert "offline simulator" in result.stdout and result.stderr == ""
    (listed,) = sessions(capsys)
    assert kinds(capsys, listed["id"]) == ["user_message", "assistant_message", "provider_usage"]


def test_a_provider_failure_in_its_own_process_is_recorded_and_exits_1(capsys, isolated_home: Path) -> None:
    result = run_foya(isolated_home, "run", "hello", FOYA_SIM_FAULTS="quota")
    assert result.code == 1 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and "quota" in result.stderr
    (listed,) = sessions(capsys)
    assert kinds(capsys, listed["id"]) == ["user_message", "turn_outcome"]


@pytest.mark.parametrize(
    ("model", "said"),
    [("gpt5", "unknown model 'gpt5'"), ("openai/gpt-4.1", "no API key: set OPENAI_API_KEY")],
)
def test_a_route_that_cannot_be_sent_exits_2_while_the_import_is_under_way(
    capsys, isolated_home: Path, tmp_path: Path, model: str, said: str
) -> None:
    """A resumed session on the configured route is checked by the session, after the import
    started. The prompt comes on stdin, written only once the (never ending) import has begun:
    the check then certainly runs while the import is under way, and must not wait for it."""
    transcript = tmp_path / "chat.json"
    transcript.write_text(
        json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])
    )
    assert main(["import", str(transcript)]) == 0
    (listed,) = sessions(capsys)
    before = kinds(capsys, listed["id"])
    (isolated_home / "config.toml").write_text(f'model = "{model}"\n', encoding="utf-8")
    mark = tmp_path / "import-started"
    fake = stand_in_litellm(tmp_path / "fake", NEVER_IMPORTED)
    env = foya_env(isolated_home, PYTHONPATH=str(fake), FAKE_LITELLM_MARK=str(mark))
    env.pop("OPENAI_API_KEY", None)
    process = subprocess.Popen(
        foya_command("run", "-", "--session", listed["id"]),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=isolated_home,
    )
    try:
        deadline = time.monotonic() + TIMEOUT_SECONDS  # a guard against a hang, not a measurement
        while not mark.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert mark.exists(), "the import did not start before the prompt was read"
        out, err = process.communicate(b"hello", timeout=TIMEOUT_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = err.decode()
    assert process.returncode == 2 and out == b""
    assert len(text.splitlines()) == 1 and said in text, text
    assert kinds(capsys, listed["id"]) == before


def test_the_route_check_of_a_new_run_comes_before_any_import(isolated_home: Path, tmp_path: Path) -> None:
    """A new run's route is checked before the import starts (the order test above is the exact
    check); in a process of its own it fails in one line beside a LiteLLM that never imports."""
    mark = tmp_path / "import-started"
    fake = stand_in_litellm(tmp_path / "fake", NEVER_IMPORTED)
    result = run_foya(
        isolated_home, "run", "hi", "--model", "gpt5", PYTHONPATH=str(fake), FAKE_LITELLM_MARK=str(mark)
    )
    assert result.code == 2 and len(result.stderr.splitlines()) == 1 and "unknown model" in result.stderr
    assert not mark.exists()


@pytest.mark.parametrize("how", sorted(BROKEN_IMPORTS))
def test_a_litellm_that_cannot_be_imported_is_one_line_and_exit_1(
    capsys, isolated_home: Path, tmp_path: Path, how: str
) -> None:
    fake = stand_in_litellm(tmp_path / "fake", BROKEN_IMPORTS[how])
    result = run_foya(isolated_home, "run", "hello", PYTHONPATH=str(fake))
    assert result.code == 1 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert "LiteLLM" in line and "could not be imported" in line and "reinstall" in line, line
    (listed,) = sessions(capsys)
    assert kinds(capsys, listed["id"]) == ["user_message", "turn_outcome"]


def test_the_warm_up_starts_one_import_per_process_and_survives_a_failure(monkeypatch) -> None:
    from foya_tui.runtime.providers import litellm_client

    calls: list[str] = []
    done = threading.Event()

    def failing() -> None:
        calls.append(threading.current_thread().name)
        done.set()
        raise ModuleNotFoundError("No module named 'litellm'")

    unhandled: list[object] = []
    monkeypatch.setattr(threading, "excepthook", unhandled.append)
    monkeypatch.setattr(litellm_client, "load_litellm", failing)
    monkeypatch.setattr(litellm_client, "_warm_up_thread", None)  # as in a fresh process
    thread = litellm_client.warm_up()
    assert litellm_client.warm_up() is thread
    assert done.wait(TIMEOUT_SECONDS)
    thread.join(TIMEOUT_SECONDS)
    assert calls == [thread.name] and thread.daemon and not thread.is_alive()
    assert unhandled == []  # the first request imports again and reports the failure itself

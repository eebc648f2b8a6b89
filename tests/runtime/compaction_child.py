"""Runs one standalone compaction on a Foya database and SIGKILLs its own process at a named stage
(the helper of `test_compaction_crash.py`: SPEC H-5, P-1).

    python tests/runtime/compaction_child.py --db DB --session ID [--stage STAGE] [--workdir DIR]
        [--result FILE]
    python tests/runtime/compaction_child.py serve

The first form is one process, one compaction: the real Runtime on the database (settings from
`FOYA_HOME` like `foya --db DB compact`), the offline simulator answering the summary requests.
Hooks are installed in this process only (nothing in `foya_tui` changes): when the compaction reaches
STAGE the process kills itself with SIGKILL, so no `finally`, no rollback, no atexit runs. Without a
kill, the result (`foya compact --json`'s object) is written to FILE as JSON.

It also builds the sessions both compaction robustness tests use (`transcript`, `more_steps`).

`serve` is the same thing, warm: a startup of this process costs seconds (LiteLLM's import), which
hundreds of kills cannot afford. It imports and warms everything once (with no database open), then
reads one JSON command per stdin line and forks one child per command; each child opens its own
Runtime and runs exactly what the first form runs. Protocol, one JSON line each way:

    → {"db": ..., "session": ..., "stage": ..., "workdir": ..., "result": ...}
    ← {"pid": N}                         the child runs; the caller may SIGKILL it now
    → "reap"                             (the pid stays a zombie until then, so it is never reused)
    ← {"pid": N, "signal": S|null, "exit": C|null}
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

STAGES: dict[str, str] = {
    "none": "no kill: the compaction runs to its end",
    "summarise": "the first summary request is about to be sent (TextCompactor.summarise)",
    "summarised": "the first summary came back; nothing is written yet",
    "validating": "the candidate is being accepted (C-12), before the commit",
    "commit_begin": "CompactionStore.commit was called, before its transaction",
    "checked": "inside the commit transaction: the lineage/source check passed, nothing written",
    "events_appended": "inside the transaction: completion + diagnostic events appended, no row yet",
    "row_inserted": "inside the transaction: the checkpoint row is inserted, fingerprints not cleared",
    "fingerprints_cleared": "inside the transaction: every statement ran, COMMIT did not",
    "committed": "right after the commit transaction committed",
    "rebuild_begin": "recovery: CompactionStore.put_row was called for a damaged row (P-3)",
    "rebuild_inserted": "recovery: the rebuilt row is inserted, its transaction not committed",
    "rebuild_committed": "recovery: the rebuilt row is committed",
    "drop_begin": "recovery: CompactionStore.delete_row was called for a stray row (P-3)",
    "drop_deleted": "recovery: the stray row is deleted, its transaction not committed",
    "drop_committed": "recovery: the deletion is committed",
}


# -- sessions with real content (shared by the crash and corruption tests) --------------------------


def call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def transcript(turns: int) -> bytes:
    """Requests answered by tool groups (some parallel) with code and shell output, then a reply."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful engineer."}]
    for turn in range(turns):
        module = f"src/pkg/module_{turn}.py"
        messages.append(
            {"role": "user", "content": f"Turn {turn}: why does `parse_{turn}` fail on empty input?"}
        )
        messages.append(
            {
                "role": "assistant",
                "content": "Reading the module and its test.",
                "tool_calls": [
                    call(f"call_{turn}_a", "read_file", {"path": module}),
                    call(f"call_{turn}_b", "read_file", {"path": f"tests/test_module_{turn}.py"}),
                ],
            }
        )
        code = "\n".join(
            f"{n:>4}→    value_{n} = tokens[{n}] if len(tokens) > {n} else None  # parse_{turn}"
            for n in range(1, 36)
        )
        messages.append(
            {"role": "tool", "tool_call_id": f"call_{turn}_b", "content": f"def test_{turn}(): ..."}
        )
        messages.append({"role": "tool", "tool_call_id": f"call_{turn}_a", "content": code})
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    call(f"call_{turn}_c", "shell", {"command": f"pytest -q tests/test_module_{turn}.py"})
                ],
            }
        )
        messages.append(
            {
                "role": "tool",
                "tool_call_id": f"call_{turn}_c",
                "content": f"F\nFAILED tests/test_module_{turn}.py::test_{turn} - IndexError: "
                "list index out of range\n1 failed in 0.03s",
            }
        )
        messages.append(
            {"role": "assistant", "content": f"`parse_{turn}` indexes an empty token list; guard it."}
        )
    return json.dumps(messages).encode()


def more_steps(first: int, count: int) -> list[Any]:
    """Work steps that continue the latest turn (the anchor stays: the next checkpoint appends)."""
    from foya_tui.runtime.model import EventKind, NewEvent

    events = []
    for step in range(first, first + count):
        call_id = f"step_{step}"
        arguments = json.dumps({"path": f"lib/extra_{step}.py"})
        events.append(
            NewEvent(
                EventKind.ASSISTANT_MESSAGE,
                {"text": "", "tool_calls": [{"id": call_id, "name": "read_file", "arguments": arguments}]},
            )
        )
        content = "\n".join(f"{n:>4}→    total += weight_{n} * {step}" for n in range(1, 41))
        events.append(
            NewEvent(
                EventKind.TOOL_RESULT, {"tool_call_id": call_id, "name": "read_file", "content": content}
            )
        )
    return events


# -- killing ---------------------------------------------------------------------------------------


def die() -> None:
    """SIGKILL this process: the OS ends it mid-statement, as a power cut of the process would."""
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)  # never reached: SIGKILL cannot be caught
    raise SystemExit("SIGKILL did not kill the process")


def install(stage: str) -> None:
    """Monkeypatch the compaction path of this process so it dies at `stage`."""
    import peewee

    from foya_tui.runtime.compaction import service
    from foya_tui.runtime.compaction.text import TextCompactor
    from foya_tui.runtime.store.checkpoints import CompactionStore
    from foya_tui.runtime.store.events import EventStore

    if stage not in STAGES:
        raise SystemExit(f"unknown stage {stage!r} (known: {', '.join(STAGES)})")
    if stage == "none":
        return
    scope: list[str] = []  # the store method the current statement runs in

    def at(name: str) -> None:
        if name == stage:
            die()

    def wrap(owner: Any, attribute: str, before: str | None, after: str | None, scoped: str = "") -> None:
        original: Callable[..., Any] = getattr(owner, attribute)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if before:
                at(before)
            if scoped:
                scope.append(scoped)
            try:
                value = original(*args, **kwargs)
            finally:
                if scoped:
                    scope.pop()
            if after:
                at(after)
            return value

        setattr(owner, attribute, wrapper)

    wrap(TextCompactor, "summarise", "summarise", "summarised")
    wrap(service, "acceptance_problems", "validating", None)
    wrap(CompactionStore, "put_row", "rebuild_begin", "rebuild_committed", scoped="put_row")
    wrap(CompactionStore, "delete_row", "drop_begin", "drop_committed", scoped="delete_row")

    original_commit = CompactionStore.commit

    def commit(self: Any, *args: Any, **kwargs: Any) -> Any:
        at("commit_begin")
        if "check" in kwargs:
            check = kwargs.pop("check")
        else:
            *args, check = args  # type: ignore[assignment]

        def checked() -> None:
            check()
            at("checked")

        scope.append("commit")
        try:
            value = original_commit(self, *args, check=checked, **kwargs)
        finally:
            scope.pop()
        at("committed")
        return value

    CompactionStore.commit = commit  # type: ignore[method-assign]

    original_append = EventStore.append_locked

    def append_locked(self: Any, *args: Any, **kwargs: Any) -> Any:
        value = original_append(self, *args, **kwargs)
        if scope and scope[-1] == "commit":
            at("events_appended")
        return value

    EventStore.append_locked = append_locked  # type: ignore[method-assign]

    original_execute = peewee.Database.execute_sql

    def execute_sql(self: Any, sql: str, *args: Any, **kwargs: Any) -> Any:
        cursor = original_execute(self, sql, *args, **kwargs)
        where = scope[-1] if scope else ""
        if sql.startswith("INSERT OR REPLACE INTO checkpoint "):
            at({"commit": "row_inserted", "put_row": "rebuild_inserted"}.get(where, ""))
        elif sql.startswith("DELETE FROM compaction_fingerprint ") and where == "commit":
            at("fingerprints_cleared")
        elif sql.startswith("DELETE FROM checkpoint ") and where == "delete_row":
            at("drop_deleted")
        return cursor

    peewee.Database.execute_sql = execute_sql  # type: ignore[method-assign]


def compact(db: str, session: str, workdir: str | None) -> dict[str, Any]:
    """What `foya --db DB compact SESSION` does, in this process."""
    from foya_tui.cli_json import compaction_json
    from foya_tui.paths import resolve_paths
    from foya_tui.runtime.runtime import Runtime
    from foya_tui.settings import load_settings

    paths = resolve_paths(database=db)
    with Runtime(
        load_settings(paths.config_file), paths, workdir=Path(workdir) if workdir else None
    ) as runtime:
        return compaction_json(runtime.compact(session))


def run(command: dict[str, Any]) -> None:
    install(command.get("stage") or "none")
    report = compact(command["db"], command["session"], command.get("workdir"))
    if command.get("result"):
        # Atomically: a kill that lands after the compaction must not leave half a result file.
        partial = Path(command["result"] + ".partial")
        partial.write_text(json.dumps(report), encoding="utf-8")
        os.replace(partial, command["result"])


def warm_up() -> None:
    """Import and use everything a compaction needs once, so forked children start warm. The
    scratch database is closed again before any fork (a child never inherits a connection)."""
    from foya_tui.paths import FoyaPaths
    from foya_tui.runtime.runtime import Runtime
    from foya_tui.settings import Settings

    with tempfile.TemporaryDirectory() as folder:
        paths = FoyaPaths(Path(folder), Path(folder), Path(folder) / "warm.sqlite3")
        with Runtime(Settings(), paths, workdir=Path(folder)) as runtime:
            info = runtime.import_transcript(transcript(6), "warm.json")
            runtime.compact(info.id)


def serve() -> None:
    warm_up()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        command = json.loads(line)
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                run(command)
            except BaseException as exc:
                sys.stderr.write(f"compaction_child: {type(exc).__name__}: {exc}\n")
                code = 3
            finally:
                sys.stderr.flush()
                os._exit(code)
        print(json.dumps({"pid": pid}), flush=True)
        sys.stdin.readline()  # "reap": the caller is done killing
        _, status = os.waitpid(pid, 0)
        print(
            json.dumps(
                {
                    "pid": pid,
                    "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                    "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                }
            ),
            flush=True,
        )


def main() -> None:
    if sys.argv[1:] == ["serve"]:
        serve()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--session", required=True)
    parser.add_argument("--stage", default="none", choices=sorted(STAGES))
    parser.add_argument("--workdir")
    parser.add_argument("--result")
    run(vars(parser.parse_args()))


if __name__ == "__main__":
    main()

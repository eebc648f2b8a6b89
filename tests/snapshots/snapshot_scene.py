"""Provides the fixed scene shared by the snapshot tests and `make_screenshot.py`.

A snapshot must render the same on every run and every machine, so everything the screen (or the
simulator's reply) could take from the surroundings is fixed here: session ids, the clock, the
working directory's path and contents, the platform and shell named in the system prompt, the
measured duration of tool calls (shown on each tool block) and the time zone (the inspector shows
local times).

`compaction_history` builds, through the real runtime and the simulator, a session with a
compaction history for the inspector's tests; `recall_history` an imported session with one
checkpoint for the inspector's search; `pressure_history` a session in the handoff band whose old
tool results were cleared by micro-compaction; `breaker_history` a session whose summaries always
fail, so that its breaker opened and the fallback made its checkpoint; `native_history` a session
with a provider-native checkpoint: see their docstrings.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

from textual.pilot import Pilot

from foya_tui.paths import FoyaPaths
from foya_tui.runtime.compaction.attempt import CompactionResult
from foya_tui.runtime.model import EventKind
from foya_tui.runtime.providers.client import ProviderClient
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.session import Session
from foya_tui.runtime.tools import registry
from foya_tui.settings import BudgetSettings, CompactionSettings, Settings
from foya_tui.ui.app import FoyaApp
from foya_tui.ui.widgets.prompt import Prompt

SIZE = (100, 30)
FIXED_NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
FIRST_UUID = uuid.UUID("3f2a9c00-0000-4000-8000-000000000000")
# A fixed absolute path: the working directory is named in the system prompt, whose token count
# the simulator prints, so a per-run temporary path would change the reply.
# /tmp itself where it exists, since $TMPDIR may differ between a developer's shell and CI.
_TMP = Path("/tmp") if Path("/tmp").is_dir() else Path(tempfile.gettempdir())
WORKDIR = _TMP / "foya-snapshot-scene" / "demo-project"
WORKDIR_FILES = {
    "README.md": "# Demo project\n\nA small project for Foya's screenshots.\n",
    "main.py": 'print("hello")\n',
}


def prepare_workdir() -> Path:
    WORKDIR.mkdir(parents=True, exist_ok=True)
    for name, text in WORKDIR_FILES.items():
        (WORKDIR / name).write_text(text, encoding="utf-8")
    return WORKDIR


@contextmanager
def fixed_surroundings() -> Iterator[None]:
    """Sequential session ids (the first is 3f2a9c…), a fixed platform and shell, no simulator
    faults, and tool calls that take no time (their blocks read "✓ <0.1 s")."""
    counter = itertools.count()
    environment = {key: value for key, value in os.environ.items() if key != "FOYA_SIM_FAULTS"}
    environment["SHELL"] = "/bin/bash"
    environment["TZ"] = "UTC"
    with (
        mock.patch.object(uuid, "uuid4", lambda: uuid.UUID(int=FIRST_UUID.int + next(counter))),
        mock.patch.object(platform, "system", lambda: "Linux"),
        mock.patch.object(platform, "release", lambda: "6.1.0"),
        mock.patch.dict(os.environ, environment, clear=True),
        # Only the registry's clock, which measures each call: the app's own timers keep running.
        mock.patch.object(registry, "time", SimpleNamespace(perf_counter=lambda: 0.0)),
    ):
        time.tzset()
        try:
            yield
        finally:
            time.tzset()  # back to the surrounding environment's zone (restored by now)


class SceneClock:
    """The store's clock: FIXED_NOW until a scene moves it on (`advance`), e.g. past the prompt
    cache's lifetime so that the next step starts with a micro-compaction (SPEC K-3)."""

    def __init__(self) -> None:
        self.now = FIXED_NOW

    def __call__(self) -> datetime:
        return self.now

    def advance(self, minutes: float) -> None:
        self.now += timedelta(minutes=minutes)


def open_runtime(
    data_dir: Path,
    *,
    client: ProviderClient | None = None,
    approval_mode: str | None = None,
    settings: Settings | None = None,
    clock: Callable[[], datetime] | None = None,
) -> Runtime:
    """A Runtime on the fixed scene; `client` replaces the simulator (a scripted provider), `clock`
    the fixed clock (a SceneClock)."""
    paths = FoyaPaths(data_dir=data_dir, config_dir=data_dir, database=data_dir / "foya.sqlite3")
    return Runtime(
        settings or Settings(retry_backoff=0.0),
        paths,
        client=client,
        workdir=prepare_workdir(),
        clock=clock or (lambda: FIXED_NOW),
        approval_mode=approval_mode,
    )


def make_app(runtime: Runtime, theme: str | None = None) -> FoyaApp:
    return FoyaApp(runtime, theme=theme)


async def wait_until(pilot: Pilot[None], condition: Callable[[], bool], timeout: float = 30.0) -> None:
    # The first turn of a process imports LiteLLM, which takes seconds.
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met in {timeout} s")
        await pilot.pause(0.02)
    await pilot.pause()


async def wait_until_ready(pilot: Pilot[None]) -> None:
    app = pilot.app
    assert isinstance(app, FoyaApp)
    await wait_until(pilot, lambda: app.conversation.ready)


async def send(pilot: Pilot[None], text: str) -> None:
    """Type `text`, press Enter and wait until the reply has finished streaming."""
    app = pilot.app
    assert isinstance(app, FoyaApp)
    await wait_until_ready(pilot)
    prompt = app.conversation.query_one(Prompt)
    prompt.insert(text)
    await pilot.press("enter")
    await wait_until(pilot, lambda: prompt.text == "" and app.conversation.ready)


SEGMENTED = Settings(retry_backoff=0.0, compaction=CompactionSettings(summary_max_tokens=5500))
"""Settings under which a compaction on foya-sim/small has room for about 2,400 tokens per summary
request (the user's message each request carries included), so that a long history is summarised
in several chunks: a checkpoint with several
segments (SPEC C-10), which the default reserve would not make from a short test session."""
TOPICS = ("parser", "cache", "scheduler", "logger", "config loader", "network client", "renderer")


def long_message(index: int) -> str:
    """A user message of about 300 tokens, different for each index (so summaries differ)."""
    topic = TOPICS[index % len(TOPICS)]
    note = "keeps a buffer of tokens and flushes it on every newline."
    return f"step {index}: " + " ".join(f"Note {n}: the {topic} {note}" for n in range(12))


def turn(session: Session, text: str) -> None:
    for _ in session.send(text):
        pass


def compact(runtime: Runtime, session: Session, faults: str = "") -> CompactionResult:
    """A standalone compaction on foya-sim/small (the turns ran on foya-sim/large, whose window
    holds the whole history); `faults` sets FOYA_SIM_FAULTS for this compaction only."""
    if faults:
        os.environ["FOYA_SIM_FAULTS"] = faults
    try:
        return runtime.compact(session.id, runtime.route_for("foya-sim/small"))
    finally:
        os.environ.pop("FOYA_SIM_FAULTS", None)


def compaction_history(runtime: Runtime) -> str:
    """Build a session (returns its id) whose inspector has something in every section, through the
    real runtime and the simulator (run it inside `fixed_surroundings`, on `SEGMENTED` settings):

    - a first compaction that is rejected (its summary would not shrink the short history);
    - a rewind over one turn (a rewound range);
    - checkpoint B: 3 segments at level 0 (the history is summarised in chunks; seven more turns,
      so that the three summaries together replace at most 80% of it, SPEC K-9);
    - checkpoint C, current: B's segments and later turns rewritten as one level-2 summary;
    - a compaction whose summaries are invalid twice (FOYA_SIM_FAULTS=summary-sectionsx2): failed,
      with a failure fingerprint (and one summary failure toward the breaker, which stays closed).

    Undoing C makes B (3 segments) current again.
    """
    session = runtime.new_session(runtime.route_for("foya-sim/large"))
    turn(session, "what files are in this project?")
    for index in range(3):
        turn(session, long_message(index))
    compact(runtime, session)
    keep = runtime.parts.store.last_seq(session.id)
    turn(session, "remember: always run the tests before committing")
    runtime.rewind(session.id, keep)
    for index in range(3, 10):
        turn(session, long_message(index))
    compact(runtime, session)
    turn(session, long_message(10))
    compact(runtime, session)
    turn(session, "what should we do next?")
    compact(runtime, session, faults="summary-sectionsx2")
    return session.id


def event_kinds(runtime: Runtime, session_id: str) -> list[EventKind]:
    return [event.kind for event in runtime.parts.store.events(session_id)]


MARKUP_MESSAGE = (
    "Keep [bold]this[/bold] exactly as written: the flaky io test fails on Tuesdays.\n"
    "Second line: [red]stays[/] too."
)
"""A user message of `recall_history` (seq 5) that looks like Textual markup."""


def _tool_call(index: int, name: str, arguments: dict[str, str]) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": f"call_{index}", "type": "function", "function": function}],
    }


def _tool_result(index: int, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"call_{index}", "content": text}


def recall_transcript() -> list[dict[str, Any]]:
    """Fourteen OpenAI-format messages: a Chinese request (seq 1), three tool results of about
    1,800 characters (seq 3, 7, 11: enough for a summary to shrink the projection), MARKUP_MESSAGE
    (seq 5), and the phrase "flaky io test" at seq 5, 8, 13 and 14."""
    listing = "\n".join(
        f"src/module_{n:02}.py  {n * 37 % 900 + 100} bytes  the module number {n}" for n in range(40)
    )
    tests = "\n".join(
        f"    def test_read_{n}(self):  # retries the read {n} times when the disk is slow" for n in range(24)
    )
    limits = "\n".join(
        f"CACHE_LIMIT_{n} = {n * 1024}  # entries kept before the cache drops the oldest" for n in range(24)
    )
    return [
        {"role": "user", "content": "请列出项目目录里的文件，并说明解析器的作用。"},
        _tool_call(1, "list_files", {"path": "."}),
        _tool_result(1, listing),
        {
            "role": "assistant",
            "content": "The project has forty modules under src/; the parser is module_03.",
        },
        {"role": "user", "content": MARKUP_MESSAGE},
        _tool_call(2, "read_file", {"path": "tests/test_io.py"}),
        _tool_result(2, tests),
        {
            "role": "assistant",
            "content": "test_io.py retries every read; the flaky io test depends on disk speed.",
        },
        {"role": "user", "content": "now look at the cache"},
        _tool_call(3, "read_file", {"path": "src/cache.py"}),
        _tool_result(3, limits),
        {"role": "assistant", "content": "cache.py keeps 24 limits."},
        {"role": "user", "content": "what about the flaky io test?"},
        {"role": "assistant", "content": "The flaky io test should mock the disk."},
    ]


def recall_history(runtime: Runtime) -> str:
    """Import `recall_transcript` and compact it on the simulator (run it inside
    `fixed_surroundings`): one checkpoint, current, whose single segment summarises seq 1–13; the
    last reply (seq 14) stays verbatim in the model's context. Returns the session id."""
    info = runtime.import_transcript(json.dumps(recall_transcript()).encode(), "recall.json")
    result = runtime.compact(info.id)
    assert result.checkpoint is not None, result
    return info.id


PARSER_MODULES = 6
LOG_LINES = 120


def parser_transcript() -> list[dict[str, Any]]:
    """An imported survey: one request, then PARSER_MODULES reads of `src/parser_N.py` (about 320
    tokens each), then a one-line answer: six complete tool turns, three older than the recent
    window that micro-compaction keeps (SPEC K-3)."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "read every parser module and tell me what each one does"}
    ]
    for index in range(1, PARSER_MODULES + 1):
        body = "\n".join(
            f"{line:>3}  def parse_{index}_{line}(text):  # splits the input on rule {line} "
            "and returns tokens"
            for line in range(18)
        )
        messages.append(_tool_call(index, "read_file", {"path": f"src/parser_{index}.py"}))
        messages.append(_tool_result(index, body))
    answer = "Each parser module splits its input on numbered rules."
    messages.append({"role": "assistant", "content": answer})
    return messages


def failing_log(lines: int = LOG_LINES) -> str:
    """A pasted log of about 2,600 tokens: enough to carry the session into the handoff band."""
    rows = (
        f"12:{n // 60:02}:{n % 60:02} WARN parser_{n % 6 + 1} rule {n % 18} skipped token {n * 7} "
        f"at line {n * 3 + 1}"
        for n in range(lines)
    )
    return "here is the log of the failing run:\n" + "\n".join(rows)


def pressure_history(runtime: Runtime, clock: SceneClock, *, last_turn: bool = True) -> str:
    """Build a session on foya-sim/small (returns its id) whose next request sits in the handoff
    band with old tool results snipped (run it inside `fixed_surroundings`, with `clock` as the
    runtime's clock):

    - `parser_transcript` imported (six read_file tool turns), then "which parser handles rule 3?"
      (the first measured request: about 4,000 of 6,144 tokens, below the handoff line);
    - the clock moves on three minutes: the prompt cache is cold;
    - `failing_log` is sent: before its step, micro-compaction clears the three oldest tool results
      from the model's view (−960 tokens, SPEC K-3), and what is left is still in the handoff band,
      so the hidden handoff reminder is stored (K-1); the simulator's reply starts with its execution
      frontier. The next request: about 5,500 tokens, between the lines (5,017 and 5,734).

    With `last_turn=False` the log is not sent (the clock has moved on): a test sends it itself.
    """
    info = runtime.import_transcript(json.dumps(parser_transcript()).encode(), "parsers.json")
    session = runtime.open_session(info.id, runtime.route_for("foya-sim/small"))
    turn(session, "which parser handles rule 3?")
    clock.advance(3)
    if last_turn:
        turn(session, failing_log())
    return info.id


BREAKER_SETTINGS = Settings(retry_backoff=0.0, budget=BudgetSettings(handoff_ratio=0.15, compact_ratio=0.2))
"""Lines so low on foya-sim/small (handoff at 15%, compaction at 20%) that every turn after the
first starts with a budget compaction (SPEC C-2)."""


def breaker_history(runtime: Runtime) -> str:
    """Build a session (returns its id) whose circuit breaker is open (run it inside
    `fixed_surroundings`, on BREAKER_SETTINGS): every summary fails (FOYA_SIM_FAULTS=summary-sections).

    Seven turns; from the second on each starts with a budget compaction. The first three ask the
    model, whose summary is rejected twice each time (three summariser failures: the breaker opens,
    SPEC K-11); their fallback candidates would not shrink the short history, so nothing is
    committed. The next compactions skip the model (the breaker is open) and use the fallback,
    whose checkpoints are accepted once the history is long enough to shrink (the ledger takes its
    share of the 8K window): five fallback checkpoints, the current one covering seq 1–37.
    """
    session = runtime.new_session(runtime.route_for("foya-sim/small"))
    texts = ("hello", long_message(0), long_message(1), "what files are in this project?")
    os.environ["FOYA_SIM_FAULTS"] = "summary-sections"
    try:
        for text in (*texts, *(long_message(index) for index in range(2, 5))):
            turn(session, text)
    finally:
        os.environ.pop("FOYA_SIM_FAULTS", None)
    return session.id


def native_history(runtime: Runtime) -> str:
    """Build a session on foya-sim/native (returns its id) whose current checkpoint is the provider's
    own opaque state (SPEC C-11): six turns, then a standalone compaction on that route. Opened on
    any other route, the state is not sent (R-2): that route sees the full history instead."""
    session = runtime.new_session(runtime.route_for("foya-sim/native"))
    for text in ("hello", long_message(0), long_message(1), "what files are in this project?", "summarise"):
        turn(session, text)
    result = runtime.compact(session.id)
    assert result.checkpoint is not None and result.producer == "native", result
    return session.id

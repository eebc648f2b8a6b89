"""Provides a benchmark of the conversation view at scale, and of `foya run`'s import and exit cost.

Run: `python tests/bench/bench_tui_scale.py [--rounds N] [--messages 2000] [--events 100000]`
(`--skip-view`: part 2 only; `--skip-run`: part 1 only).

Part 1 opens three sessions of one database as `foya --session` does (the runtime opened first,
then the app, headless, in a fresh process each): 20 messages, `--messages` messages, and a
session of `--events` events (an imported transcript). Per process it records: start to first
frame; to the last message and the meter both shown; the first PageUp (to the page it loads);
Home to the first message; quit (exit asked → process gone); peak RSS. The sizes alternate in
every round (A B C A B C), and each is printed as a ratio to the 20-message session.

Part 2 times `foya run "hello"` (simulator, a fresh home) against `python -c "import litellm"`,
alternating, and the time from the last line of the reply to the process's exit: as shipped
(LiteLLM imported in a background thread from the start of the run), and with that import left
to the first request, as before issue 17 (`warm_up` made a no-op); then both again as `foya run -`
with the prompt written to stdin 1 s after the start, where the main thread has something to
wait for. The runs start the same way (`python -c`, then `foya_tui.cli.main()`); besides wall
time each shows its CPU time (user + system, less sensitive to a busy machine than wall time)
and, per round, its ratio to that round's bare import.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

CHILD = """
import json, resource, sys, time
from pathlib import Path
import foya_tui.ui.app
from foya_tui.paths import resolve_paths
from foya_tui.runtime.runtime import Runtime
from foya_tui.settings import load_settings
from foya_tui.ui.app import FoyaApp

marks = {}

class Probe(FoyaApp):
    CSS_PATH = str(Path(foya_tui.ui.app.__file__).parent / FoyaApp.CSS_PATH)

    def _display(self, screen, renderable):
        super()._display(screen, renderable)
        if renderable is not None and "first_frame" not in marks:
            marks["first_frame"] = time.time()

async def until(pilot, condition, timeout=600):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit("timed out")
        await pilot.pause(0.005)

async def drive(pilot):
    conversation = app.conversation
    messages = conversation.messages
    shown = lambda: conversation.ready and messages.blocks and conversation.context_report is not None
    await until(pilot, shown)
    marks["ready"] = time.time()
    started = time.time()
    await pilot.press("pageup")
    await pilot.pause()
    await until(pilot, lambda: messages.pending is None)
    await pilot.pause()
    marks["page_up"] = time.time() - started
    messages.focus()
    started = time.time()
    await pilot.press("home")
    await until(pilot, lambda: messages.pending is None and not messages.has_older)
    await pilot.pause()
    marks["home"] = time.time() - started
    marks["first_text"] = messages.blocks[0].text
    marks["widgets"] = sum(1 for _ in messages.walk_children())
    marks["quit"] = time.time()
    app.exit()

paths = resolve_paths()
settings = load_settings(paths.config_file)
runtime = Runtime(settings, paths)  # as run_app does for --session: opened before the app
session_id = runtime.find_session(sys.argv[1]).id
app = Probe(runtime, settings=settings, session_id=session_id, quick_exit=True)
app.run(headless=True, auto_pilot=drive)
marks["app_returned"] = time.time()
runtime.close()
marks["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(marks), flush=True)
"""

METRICS = ("first_frame", "ready", "page_up", "home", "quit", "rss_mb")
LABELS = {
    "first_frame": "start → first frame",
    "ready": "start → last message + meter",
    "page_up": "first PageUp (page shown)",
    "home": "Home → first message",
    "quit": "quit → process gone",
    "rss_mb": "peak RSS (MB)",
}


def transcript(count: int) -> bytes:
    roles = ("user", "assistant")
    lines = [
        json.dumps({"role": roles[i % 2], "content": f"message {i}: " + "words " * 12}) for i in range(count)
    ]
    return "\n".join(lines).encode()


def build(home: Path, sizes: dict[str, int]) -> dict[str, str]:
    """Import one session per size into the home's database; their ids by label."""
    from foya_tui.paths import resolve_paths
    from foya_tui.runtime.runtime import Runtime
    from foya_tui.settings import load_settings

    os.environ["FOYA_HOME"] = str(home)
    paths = resolve_paths()
    with Runtime(load_settings(paths.config_file), paths) as runtime:
        return {
            label: runtime.import_transcript(transcript(count), f"{label}.jsonl").id
            for label, count in sizes.items()
        }


def open_once(session_id: str, env: dict[str, str]) -> dict[str, float]:
    started = time.time()
    command = [sys.executable, "-c", CHILD, session_id]
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    ended = time.time()
    if result.returncode != 0:
        raise SystemExit(f"opening {session_id} failed:\n{result.stderr[-3000:]}")
    marks = json.loads(result.stdout.strip().splitlines()[-1])
    return {
        "first_frame": marks["first_frame"] - started,
        "ready": marks["ready"] - started,
        "page_up": marks["page_up"],
        "home": marks["home"],
        "quit": ended - marks["quit"],
        "quit_in_app": marks["app_returned"] - marks["quit"],
        "rss_mb": marks["rss_mb"],
        "first_text": marks["first_text"],
        "widgets": marks["widgets"],
    }


# `foya run` as a process of its own, started the same way with and without the background import.
RUN_AS_SHIPPED = "from foya_tui.cli import main; main()"
RUN_IMPORT_AT_FIRST_REQUEST = (
    "from foya_tui.runtime.providers import litellm_client\n"
    "litellm_client.warm_up = lambda: None  # LiteLLM is then imported by the first request\n"
    "from foya_tui.cli import main; main()"
)


STDIN_DELAY = 1.0
"""Seconds before the prompt arrives on stdin in the `foya run -` rows (a caller that starts Foya,
then writes the prompt once it has it)."""


def timed(
    command: list[str], env: dict[str, str], stdin_after: float | None = None
) -> tuple[float, float, float]:
    """Run `command`: wall time, CPU time (user + system), and last line of output → exit. With
    `stdin_after`, "hello" is written to its stdin that many seconds after the start."""
    started = time.time()
    stdin = subprocess.PIPE if stdin_after is not None else subprocess.DEVNULL
    process = subprocess.Popen(command, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert process.stdout is not None and process.stderr is not None
    if stdin_after is not None:
        assert process.stdin is not None
        time.sleep(stdin_after)
        process.stdin.write(b"hello")
        process.stdin.close()
    last_output = started
    for _ in process.stdout:
        last_output = time.time()
    _, status, usage = os.wait4(process.pid, 0)
    ended = time.time()
    process.returncode = os.waitstatus_to_exitcode(status)
    assert process.returncode == 0, process.stderr.read().decode(errors="replace")
    return ended - started, usage.ru_utime + usage.ru_stime, ended - last_output


def run_hello(
    env: dict[str, str], code: str = RUN_AS_SHIPPED, stdin_after: float | None = None
) -> tuple[float, float, float]:
    """`foya run "hello"` (or `foya run -` with `stdin_after`): wall time, CPU time, and last line
    of output → exit."""
    prompt = "hello" if stdin_after is None else "-"
    return timed([sys.executable, "-c", code, "run", prompt], env, stdin_after)


def import_litellm(env: dict[str, str]) -> tuple[float, float, float]:
    return timed([sys.executable, "-c", "import litellm"], env)


def print_run_part(rounds: int, run_env: dict[str, str], env: dict[str, str]) -> None:
    run_hello(run_env)  # creates the database: not counted
    late = STDIN_DELAY
    variants: list[tuple[str, Callable[[], tuple[float, float, float]]]] = [
        ("import litellm", lambda: import_litellm(env)),
        ("foya run hello", lambda: run_hello(run_env)),
        ("  import at first request", lambda: run_hello(run_env, RUN_IMPORT_AT_FIRST_REQUEST)),
        (f"foya run - (stdin after {late:g} s)", lambda: run_hello(run_env, stdin_after=late)),
        ("  import at first request", lambda: run_hello(run_env, RUN_IMPORT_AT_FIRST_REQUEST, late)),
    ]
    results: list[list[tuple[float, float, float]]] = [[] for _ in variants]
    for _ in range(rounds):
        for rows, (_, measure) in zip(results, variants, strict=True):  # alternating: noise hits all
            rows.append(measure())
    bare = results[0]
    print(f'\nfoya run "hello" (simulator), median of {rounds} alternating rounds')
    print(f"  {'':30}{'wall':>10}{'CPU':>10}{'wall / import':>16}{'last line → exit':>20}")
    for (label, _), rows in zip(variants, results, strict=True):
        wall, cpu, tail = (statistics.median(row[i] for row in rows) for i in range(3))
        ratio = statistics.median(row[0] / base[0] for row, base in zip(rows, bare, strict=True))
        cells = f"{wall * 1000:7.0f} ms{cpu * 1000:7.0f} ms"
        if rows is not bare:
            cells += f"{ratio:15.2f}x{tail * 1000:17.0f} ms"
        print(f"  {label:30}{cells}")
    print("  targets: wall within 1.3x the bare import; last line → exit under 300 ms")
    print("  `import at first request`: the run above it with the background import turned off;")
    print(f"  `foya run -`: the prompt arrives on stdin {late:g} s after the start (counted in its wall)")


def print_view_part(rounds: int, home: Path, sizes: dict[str, int], env: dict[str, str]) -> None:
    ids = build(home, sizes)
    results: dict[str, list[dict[str, float]]] = {label: [] for label in sizes}
    open_once(ids["20 messages"], env)  # byte-compiles and warms the disk cache: not counted
    for _ in range(rounds):
        for label in sizes:  # A B C, A B C: machine noise hits every size alike
            results[label].append(open_once(ids[label], env))
    print(f"conversation view, median of {rounds} alternating rounds (fresh processes, headless)")
    base = {metric: statistics.median(r[metric] for r in results["20 messages"]) for metric in METRICS}
    header = "".join(f"{label:>26}" for label in sizes)
    print(f"  {'':32}{header}")
    for metric in METRICS:
        cells = []
        for label in sizes:
            value = statistics.median(r[metric] for r in results[label])
            unit = f"{value:7.0f} MB" if metric == "rss_mb" else f"{value * 1000:7.0f} ms"
            cells.append(f"{unit} ({value / base[metric]:5.2f}x)" if base[metric] else unit)
        print(f"  {LABELS[metric]:32}" + "".join(f"{cell:>26}" for cell in cells))
    for label in sizes:
        last = results[label][-1]
        print(f"  {label}: Home reached {last['first_text'][:20]!r}; {last['widgets']:.0f} widgets mounted")
    print("  ratios are to the 20-message session (target: within 1.5x, every message reachable)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=2_000)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--skip-run", action="store_true", help="only the conversation view")
    parser.add_argument("--skip-view", action="store_true", help="only `foya run`")
    args = parser.parse_args()
    sizes = {
        "20 messages": 20,
        f"{args.messages:,} messages": args.messages,
        f"{args.events:,} events": args.events,
    }
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        env = {**os.environ, "FOYA_HOME": str(home), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        if not args.skip_view:
            print_view_part(args.rounds, home, sizes, env)
        if args.skip_run:
            return
        run_home = home / "run"
        run_home.mkdir()
        run_env = {**env, "FOYA_HOME": str(run_home)}
        print_run_part(args.rounds, run_env, env)


if __name__ == "__main__":
    main()

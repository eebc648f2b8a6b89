"""Provides a benchmark of the conversation view at scale, and of `foya run`'s import and exit cost.

Run: `python tests/bench/bench_tui_scale.py [--rounds N] [--messages 2000] [--events 100000]
[--skip-compacted] [--home DIR]` (`--skip-view`: part 2 only; `--skip-run`: part 1 only).

Part 1 resumes sessions exactly as `foya --session ID` does (the CLI's `main`, headless, in a fresh
process each; the app's frame hook and its run are the only things patched): 20 messages, `--messages`
messages, a session of `--events` events (an imported transcript of alternating user and assistant
messages, never compacted, so the meter's compile reads all of it), and unless `--skip-compacted`
a realistic session of about `--events` events (tests/bench/bench_compaction.py's requests, tool
groups with code, shell and search output, replies) with a text checkpoint over all but its last
request (tests/bench/bench_scale.py's `build`), which is what a long session looks like. Every
session was compiled once before (token counts stored), as a session Foya wrote would have been.

Per process it records: start to the first painted frame; to the first frame that shows the last
message with the prompt usable; to the first frame that shows the meter's numbers; the first
PageUp (to the page it loads); Home to the first message; quit (exit asked → process gone); peak
RSS. A bare Textual app that shows one label is started in the same rounds, and every size's first
frame is also given as a ratio to it. The sizes alternate in every round (bare A B C D, bare A B C
D), and each is printed as a ratio to the 20-message session.

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
import json, sys, time
from textual.app import App
from foya_tui.ui.app import FoyaApp

marks = {}
original_display = FoyaApp._display

def display(self, screen, renderable):
    # The time of the first frame that goes to the terminal showing each thing, not of the
    # message that made it: what the user sees.
    original_display(self, screen, renderable)
    if renderable is None:
        return
    now = time.time()
    marks.setdefault("first_frame", now)
    conversation = self._conversation
    if conversation is None:
        return
    if "prompt" not in marks and conversation.ready and conversation.messages.blocks:
        marks["prompt"] = now
    if "meter" not in marks and conversation.context_report is not None:
        marks["meter"] = now

async def until(pilot, condition, pause=0.005, timeout=600):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit("timed out")
        await pilot.pause(pause)

async def drive(pilot):
    app = pilot.app
    messages = app.conversation.messages
    # Polled slowly: the marks come from the frames, and a busy poll would slow the workers down.
    await until(pilot, lambda: "prompt" in marks and "meter" in marks, pause=0.05)
    await pilot.pause()
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
    marks["blocks"] = len(messages.blocks)
    marks["quit"] = time.time()
    app.exit()

def run(self, *args, **kwargs):
    App.run(self, headless=True, auto_pilot=drive)
    # Printed here, as the app returns: what follows (closing the runtime, the process's exit) is
    # timed by the parent, up to the process being gone. VmHWM: this process image's own peak (the
    # rusage of a forked child starts from the parent's).
    peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM"))
    marks["rss_mb"] = int(peak.split()[1]) / 1024
    print(json.dumps(marks), flush=True)

FoyaApp._display = display
FoyaApp.run = run
sys.argv = ["foya", "--db", sys.argv[2], "--session", sys.argv[1]]
from foya_tui.cli import main
sys.exit(main())
"""

BARE_APP = """
import time
from textual.app import App
from textual.widgets import Label

class Bare(App):
    painted = False

    def compose(self):
        yield Label("hello")

    def _display(self, screen, renderable):
        super()._display(screen, renderable)
        if renderable is not None and not self.painted:  # the first frame goes to the terminal
            self.painted = True
            print(time.time(), flush=True)
            self.exit()

Bare().run(headless=True)
"""

METRICS = ("first_frame", "prompt", "meter", "page_up", "home", "quit", "rss_mb")
LABELS = {
    "first_frame": "start → first frame",
    "prompt": "start → last message, prompt usable",
    "meter": "start → meter shown",
    "page_up": "first PageUp (page shown)",
    "home": "Home → first message",
    "quit": "quit → process gone",
    "rss_mb": "peak RSS (MB)",
}
BASE = "20 messages"


def transcript(count: int) -> bytes:
    roles = ("user", "assistant")
    lines = [
        json.dumps({"role": roles[i % 2], "content": f"message {i}: " + "words " * 12}) for i in range(count)
    ]
    return "\n".join(lines).encode()


def build(home: Path, sizes: dict[str, int]) -> dict[str, str]:
    """Import one session per size into the home's database, each compiled once (its token counts
    stored, as Foya stores them on a session's first compile); their ids by label."""
    from foya_tui.paths import resolve_paths
    from foya_tui.runtime.runtime import Runtime
    from foya_tui.settings import load_settings

    os.environ["FOYA_HOME"] = str(home)
    paths = resolve_paths()
    ids = {}
    with Runtime(load_settings(paths.config_file), paths) as runtime:
        for label, count in sizes.items():
            ids[label] = runtime.import_transcript(transcript(count), f"{label}.jsonl").id
            runtime.context(ids[label])
    return ids


def build_compacted(folder: Path, events: int) -> tuple[str, Path]:
    """A realistic session of about `events` events with a checkpoint over all but its last request."""
    from tests.bench.bench_scale import build as build_scale

    built = build_scale(events, folder, checkpoint=True)
    return built.session_id, built.database


def built_cases(home: Path, sizes: dict[str, int], compacted: int | None) -> dict[str, tuple[str, Path]]:
    """Each case's session id and database, built in `home` (or read back from an earlier run's list)."""
    listing = home / "bench_tui_scale.json"
    wanted = {**sizes, **({f"{compacted:,} compacted": compacted} if compacted else {})}
    if listing.is_file():
        known = {label: (case[0], Path(case[1])) for label, case in json.loads(listing.read_text()).items()}
        if set(wanted) <= set(known):
            return {label: known[label] for label in wanted}
    started = time.time()
    database = home / "foya.sqlite3"
    cases = {label: (session_id, database) for label, session_id in build(home, sizes).items()}
    if compacted:
        cases[f"{compacted:,} compacted"] = build_compacted(home, compacted)
    listing.write_text(json.dumps({label: (case[0], str(case[1])) for label, case in cases.items()}))
    print(f"built {len(cases)} sessions in {time.time() - started:.0f} s", file=sys.stderr)
    return cases


def open_once(session_id: str, database: Path, env: dict[str, str]) -> dict[str, float]:
    started = time.time()
    command = [sys.executable, "-c", CHILD, session_id, str(database)]
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    ended = time.time()
    if result.returncode != 0:
        raise SystemExit(f"opening {session_id} failed:\n{result.stderr[-3000:]}")
    marks = json.loads(result.stdout.strip().splitlines()[-1])
    return {
        "first_frame": marks["first_frame"] - started,
        "prompt": marks["prompt"] - started,
        "meter": marks["meter"] - started,
        "page_up": marks["page_up"],
        "home": marks["home"],
        "quit": ended - marks["quit"],
        "rss_mb": marks["rss_mb"],
        "first_text": marks["first_text"],
        "widgets": marks["widgets"],
        "blocks": marks["blocks"],
    }


def bare_once(env: dict[str, str]) -> float:
    started = time.time()
    result = subprocess.run(
        [sys.executable, "-c", BARE_APP], capture_output=True, text=True, env=env, check=True
    )
    return float(result.stdout.split()[0]) - started


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


def cell(metric: str, value: float, base: float) -> str:
    unit = f"{value:7.0f} MB" if metric == "rss_mb" else f"{value * 1000:7.0f} ms"
    return f"{unit} ({value / base:5.2f}x)" if base else unit


def print_view_part(args: argparse.Namespace, home: Path, sizes: dict[str, int], env: dict[str, str]) -> None:
    cases = built_cases(home, sizes, None if args.skip_compacted else args.events)
    results: dict[str, list[dict[str, float]]] = {label: [] for label in cases}
    bare: list[float] = []
    open_once(*cases[BASE], env)  # byte-compiles and warms the disk cache: not counted
    bare_once(env)
    for _ in range(args.rounds):
        bare.append(bare_once(env))
        for label, case in cases.items():  # A B C, A B C: machine noise hits every size alike
            results[label].append(open_once(*case, env))
    print(f"conversation view, median of {args.rounds} alternating rounds (fresh processes, headless)")
    medians = {
        label: {metric: statistics.median(r[metric] for r in runs) for metric in METRICS}
        for label, runs in results.items()
    }
    base = medians[BASE]
    print(f"  {'':38}" + "".join(f"{label:>24}" for label in cases))
    for metric in METRICS:
        cells = [cell(metric, medians[label][metric], base[metric]) for label in cases]
        print(f"  {LABELS[metric]:38}" + "".join(f"{text:>24}" for text in cells))
    bare_s = statistics.median(bare)
    print(f"  {'bare Textual app → first frame':38}{bare_s * 1000:17.0f} ms")
    print(
        f"  {'first frame / bare app':38}"
        + "".join(f"{medians[label]['first_frame'] / bare_s:23.2f}x" for label in cases)
    )
    for label in cases:
        last = results[label][-1]
        print(
            f"  {label}: Home reached {last['first_text'][:24]!r}; {last['blocks']:.0f} messages, "
            f"{last['widgets']:.0f} widgets mounted"
        )
    print(
        "  targets: every row within 1.5x of the 20-message session, every message reachable; "
        "first frame within 1.5x of the bare app; prompt and meter within 2 s; RSS within 300 MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=2_000)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--skip-compacted", action="store_true", help="no realistic compacted session")
    parser.add_argument("--skip-run", action="store_true", help="only the conversation view")
    parser.add_argument("--skip-view", action="store_true", help="only `foya run`")
    parser.add_argument(
        "--home",
        type=Path,
        help="build the sessions here once and reuse them in later runs (default: a new temporary folder)",
    )
    args = parser.parse_args()
    sizes = {
        BASE: 20,
        f"{args.messages:,} messages": args.messages,
        f"{args.events:,} events": args.events,
    }
    with tempfile.TemporaryDirectory() as folder:
        home = args.home or Path(folder)
        env = {**os.environ, "FOYA_HOME": str(home), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        if not args.skip_view:
            print_view_part(args, home, sizes, env)
        if args.skip_run:
            return
        run_home = home / "run"
        run_home.mkdir(exist_ok=True)
        run_env = {**env, "FOYA_HOME": str(run_home)}
        print_run_part(args.rounds, run_env, env)


if __name__ == "__main__":
    main()

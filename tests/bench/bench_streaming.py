"""Provides a benchmark of the whole-history commands' memory: peak RSS (and wall, CPU) of `foya
import`, `foya export` and `foya verify` in fresh processes at two sizes, with ratios measured side
by side in one run (issue 17 item 7: bounded memory, batches and iterators).

Run: `python tests/bench/bench_streaming.py [--sizes 10000,100000] [--rounds 2]`.

Each size is one OpenAI-format transcript from tests/bench/bench_compaction.py's generator
(requests, tool groups with code, shell and search output, replies; distinct texts), written to a
file once. A round imports it into a new database, exports the session's events as JSONL to
/dev/null and verifies it; rounds alternate the sizes (A B A B), so machine noise hits both alike.
Each cell is the median of the rounds; the child reports its own peak RSS (VmHWM).
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
from pathlib import Path

from tests.bench.bench_compaction import transcript

MODEL = "foya-sim/large"
COMMANDS = ("import", "export", "verify")

# The child reports its own peak RSS (VmHWM: this process image only): the rusage of a forked child
# starts from the parent's peak.
CHILD = """
import sys
from foya_tui.cli import main
code = main(sys.argv[1:])
peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(int(peak.split()[1]) // 1024, file=sys.stderr)
sys.exit(code)
"""


def run(arguments: list[str], home: Path) -> tuple[float, float, int, str]:
    """(wall seconds, CPU seconds, peak RSS in MB, stdout) of one `foya` command in a fresh process."""
    env = {**os.environ, "FOYA_HOME": str(home), "FOYA_MODEL": MODEL}
    command = [sys.executable, "-c", CHILD, *arguments]
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.PIPE)
        stderr = process.stderr.read().decode() if process.stderr else ""
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        if process.stderr:
            process.stderr.close()
        out.seek(0)
        # Only the import's output is kept (its session id); an export's can be large.
        stdout = out.read(4096).decode(errors="replace") if arguments[2] == "import" else ""
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):  # verify exits 1 when it finds a problem; the numbers still count
        raise SystemExit(f"{' '.join(arguments)} failed ({code}): {stderr[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, int(stderr.split()[-1]), stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        home = folder / "home"
        home.mkdir()
        files = {}
        for size in sizes:
            files[size] = folder / f"{size}.json"
            files[size].write_text(json.dumps(transcript(size)), encoding="utf-8")
        samples: dict[tuple[int, str], list[tuple[float, float, int]]] = {
            (size, command): [] for size in sizes for command in COMMANDS
        }
        for round_index in range(args.rounds):
            for size in sizes:  # A B, then again: never one size after another
                database = folder / f"{size}-{round_index}.sqlite3"
                db = ["--db", str(database)]
                wall, cpu, rss, out = run([*db, "import", str(files[size])], home)
                session_id = out.split()[-1]
                samples[(size, "import")].append((wall, cpu, rss))
                samples[(size, "export")].append(run([*db, "export", session_id], home)[:3])
                samples[(size, "verify")].append(run([*db, "verify", session_id], home)[:3])
                database.unlink()
        print(f"whole-history commands in fresh processes (median of {args.rounds}, sizes alternating)")
        print(f"{'messages':>9} {'command':<8} {'wall s':>7} {'cpu s':>7} {'RSS MB':>7}")
        medians = {}
        for (size, command), runs in samples.items():
            wall, cpu, rss = (statistics.median(column) for column in zip(*runs, strict=True))
            medians[(size, command)] = (wall, cpu, rss)
            print(f"{size:>9,} {command:<8} {wall:>7.2f} {cpu:>7.2f} {rss:>7.0f}")
        small, large = min(sizes), max(sizes)
        for command in COMMANDS:
            big, little = medians[(large, command)], medians[(small, command)]
            print(
                f"{large // 1000}k/{small // 1000}k {command:<7} wall {big[0] / little[0]:.2f}x  "
                f"cpu {big[1] / little[1]:.2f}x  RSS {big[2] / little[2]:.2f}x"
            )


if __name__ == "__main__":
    main()

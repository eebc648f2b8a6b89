"""Provides a soak test of the store under crashes, damage and concurrency (not part of the test
run: `tests/bench` is not collected).

Run: `python tests/bench/soak_store.py [--kills N] [--corruptions N] [--workers N] [--seed S]`.

1. Crashes: `foya run --json` (the offline simulator) and `foya import` subprocesses, several at a
   time on a few shared sessions (concurrent writers, so leases and the write lock are contended),
   each SIGKILLed at a random moment. What a process acknowledged before it died (a
   `turn_finished` line; an imported session's id) must be in the database afterwards: any that
   is missing is a lost acknowledged event. Then `foya verify` runs on every session.
2. Damage: copies of the database get FTS damage, dropped triggers, an out-of-step `last_seq` or
   random bytes over pages; each copy gets `run`, `sessions`, `search`, `export`, `verify` and
   `verify --repair`. Every failure must be one line on stderr (no traceback); repairable damage
   must verify clean after `--repair`.
It prints the figures as one JSON object per phase and a summary.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path


def env(home: Path) -> dict[str, str]:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("FOYA_")}
    return {**clean, "FOYA_HOME": str(home)}


def foya(home: Path, *argv: str, db: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    prefix = ["--db", str(db)] if db is not None else []
    return subprocess.run(
        [sys.executable, "-m", "foya_tui", *prefix, *argv],
        env=env(home),
        cwd=home,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def one_line(result: subprocess.CompletedProcess) -> bool:
    lines = result.stderr.strip().splitlines()
    return len(lines) == 1 and lines[0].startswith("foya: ") and "Traceback" not in result.stderr


@dataclass
class Crashes:
    kills: int = 0
    finished_before_kill: int = 0
    acknowledged: list[tuple[str, str]] = field(default_factory=list)  # (kind, prompt or session id)
    failures: int = 0
    one_line_failures: int = 0
    lock = threading.Lock()


def transcript(path: Path, messages: int) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for index in range(messages):
            role = "user" if index % 2 == 0 else "assistant"
            handle.write(json.dumps({"role": role, "content": f"soak import line {index}"}) + "\n")


def crash_one(
    home: Path, sessions: list[str], small: Path, big: Path, rng: random.Random, n: int, stats: Crashes
) -> None:
    kind = rng.choice(["run", "run", "import"])
    if kind == "run":
        prompt = f"soak prompt {n}"
        argv = ["run", "--json", "--session", rng.choice(sessions), prompt]
    else:
        prompt = ""
        argv = ["import", str(rng.choice([small, big]))]
    child = subprocess.Popen(
        [sys.executable, "-m", "foya_tui", *argv],
        env=env(home),
        cwd=home,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(child.stdout), daemon=True)  # type: ignore[arg-type]
    reader.start()
    time.sleep(rng.uniform(0.3, 6.0))  # startup is 1–3 s here: kills land before, during, after writes
    finished = child.poll() is not None
    if not finished:
        child.send_signal(signal.SIGKILL)
    child.wait()
    reader.join(timeout=10)
    err = child.stderr.read() if child.stderr else ""
    with stats.lock:
        if finished:
            stats.finished_before_kill += 1
            if child.returncode != 0:
                stats.failures += 1
                stats.one_line_failures += one_line(
                    subprocess.CompletedProcess(argv, child.returncode, "", err)
                )
        else:
            stats.kills += 1
        text = "".join(output)
        if kind == "run" and '"type": "turn_finished"' in text:
            stats.acknowledged.append(("run", prompt))
        if kind == "import" and finished and child.returncode == 0 and text.strip():
            stats.acknowledged.append(("import", text.strip().splitlines()[-1]))


def crash_phase(home: Path, kills: int, workers: int, rng: random.Random) -> dict[str, object]:
    db = home / "foya.sqlite3"
    sessions = []
    for index in range(3):
        foya(home, "run", f"soak session {index}")
    sessions = [s["id"] for s in json.loads(foya(home, "sessions", "--json").stdout)["sessions"]]
    small, big = home / "small.jsonl", home / "big.jsonl"
    transcript(small, 50)
    transcript(big, 30_000)
    stats = Crashes()
    seeds = [rng.random() for _ in range(kills * 2)]
    attempt = 0
    with ThreadPoolExecutor(max_workers=workers) as pool:
        while stats.kills < kills:
            batch = []
            for offset in range(workers):
                worker_rng = random.Random(seeds[(attempt + offset) % len(seeds)])
                batch.append(
                    pool.submit(crash_one, home, sessions, small, big, worker_rng, attempt + offset, stats)
                )
            attempt += workers
            for future in batch:
                future.result()
    raw = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    lost = 0
    for kind, key in stats.acknowledged:
        if kind == "run":
            found = raw.execute(
                "SELECT 1 FROM event WHERE kind = 'user_message' AND payload LIKE ?", (f'%"{key}"%',)
            ).fetchone()
        else:
            found = raw.execute("SELECT 1 FROM session WHERE id = ? AND complete = 1", (key,)).fetchone()
        lost += found is None
    incomplete = raw.execute("SELECT COUNT(*) FROM session WHERE complete = 0").fetchone()[0]
    raw.close()
    visible = [s["id"] for s in json.loads(foya(home, "sessions", "--json").stdout)["sessions"]]
    verify_failures = [sid[:6] for sid in visible if foya(home, "verify", sid).returncode != 0]
    return {
        "phase": "crashes",
        "kills": stats.kills,
        "finished_before_kill": stats.finished_before_kill,
        "acknowledged": len(stats.acknowledged),
        "lost_acknowledged": lost,
        "hidden_incomplete_imports": incomplete,
        "sessions_verified": len(visible),
        "verify_failures": len(verify_failures),
        "failures_of_finished": stats.failures,
        "one_line_failures_of_finished": stats.one_line_failures,
    }


def damage_cases(rng: random.Random, count: int) -> list[tuple[str, list[str] | str, bool]]:
    """(name, SQL statements or 'pages', whether `--repair` must make it verify clean)."""
    fixed: list[tuple[str, list[str] | str, bool]] = [
        ("fts random blocks", ["UPDATE event_fts_data SET block = randomblob(length(block))"], True),
        (
            "fts random leaf blocks",
            ["UPDATE event_fts_data SET block = randomblob(length(block)) WHERE id > 10"],
            True,
        ),
        ("fts dropped idx", ["DROP TABLE event_fts_idx"], True),
        ("fts dropped content", ["DROP TABLE event_fts_content"], True),
        ("fts dropped docsize", ["DROP TABLE event_fts_docsize"], True),
        ("fts emptied config", ["DELETE FROM event_fts_config"], True),
        ("fts row deleted", ["DELETE FROM event_fts WHERE rowid = (SELECT MAX(rowid) FROM event_fts)"], True),
        ("trigger update dropped", ["DROP TRIGGER event_no_update"], True),
        ("triggers dropped", ["DROP TRIGGER event_no_update", "DROP TRIGGER event_no_delete"], True),
    ]
    cases = list(fixed)
    while len(cases) < count:
        pick = rng.random()
        if pick < 0.3:
            behind = rng.randint(1, 5)
            cases.append(
                (
                    f"last_seq behind by {behind}",
                    [f"UPDATE session SET last_seq = MAX(0, last_seq - {behind})"],
                    True,
                )
            )
        elif pick < 0.45:
            statement = rng.choice([s for _, statements, _ in fixed for s in statements])  # type: ignore[union-attr]
            cases.append(
                (
                    f"mixed: {statement[:30]} + last_seq",
                    [statement, "UPDATE session SET last_seq = last_seq - 1"],
                    True,
                )
            )
        else:
            cases.append((f"random page bytes #{len(cases)}", "pages", False))
    return cases


def damage_case(home: Path, session: str, index: int, case: tuple[str, list[str] | str, bool],
                seed: float) -> tuple[int, int, int, bool | None, list[str]]:  # fmt: skip
    """Damage one copy and run every command on it: (commands, failures, one-line failures,
    verify clean after repair (None: not repairable), what was not one line)."""
    name, damage, repairable = case
    rng = random.Random(seed)
    copy = home / f"damaged-{index}.sqlite3"
    raw, target = sqlite3.connect(home / "foya.sqlite3"), sqlite3.connect(copy)
    raw.backup(target)
    raw.close()
    if damage == "pages":
        pages = target.execute("PRAGMA page_count").fetchone()[0]
        size = target.execute("PRAGMA page_size").fetchone()[0]
        target.close()
        with copy.open("r+b") as handle:
            for _ in range(rng.randint(1, 8)):
                page = rng.randrange(1, pages)
                offset = rng.randrange(0, size - 64)
                handle.seek(page * size + offset)
                handle.write(rng.randbytes(rng.randint(16, size - offset)))
    else:
        for statement in damage:
            target.execute(statement)
        target.commit()
        target.close()
    commands = failures = one_liners = 0
    bad: list[str] = []
    argvs = (
        ("run", "--session", session, f"after damage {index}"),
        ("sessions",),
        ("search", session, "soak"),
        ("export", session),
        ("verify", session),
        ("verify", "--repair", session),
    )
    for argv in argvs:
        result = foya(home, *argv, db=copy)
        commands += 1
        if result.returncode != 0:
            failures += 1
            # verify's report is on stdout (several lines by design); its stderr must be clean.
            if one_line(result) or (argv[0] == "verify" and not result.stderr.strip()):
                one_liners += 1
            else:
                bad.append(f"{name}: {' '.join(argv[:2])}: {result.stderr.strip()[-300:]}")
    clean = foya(home, "verify", session, db=copy).returncode == 0 if repairable else None
    for suffix in ("", "-wal", "-shm"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    return commands, failures, one_liners, clean, bad


def damage_phase(home: Path, count: int, rng: random.Random, workers: int) -> dict[str, object]:
    session = json.loads(foya(home, "sessions", "--json").stdout)["sessions"][0]["id"]
    cases = damage_cases(rng, count)
    seeds = [rng.random() for _ in cases]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(
            pool.map(
                lambda item: damage_case(home, session, item[0], item[1], seeds[item[0]]), enumerate(cases)
            )
        )
    commands = sum(r[0] for r in results)
    failures = sum(r[1] for r in results)
    one_liners = sum(r[2] for r in results)
    repairable = [r[3] for r in results if r[3] is not None]
    bad = [line for r in results for line in r[4]]
    return {
        "phase": "damage",
        "cases": len(cases),
        "commands": commands,
        "failures": failures,
        "one_line_failures": one_liners,
        "one_line_error_rate": round(one_liners / failures, 4) if failures else 1.0,
        "repairable": len(repairable),
        "verify_clean_after_repair": sum(bool(clean) for clean in repairable),
        "not_one_line": bad[:10],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--corruptions", type=int, default=30)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="foya-soak-") as folder:
        home = Path(folder)
        started = time.perf_counter()
        crashes = crash_phase(home, args.kills, args.workers, rng)
        print(json.dumps(crashes), flush=True)
        damage = damage_phase(home, args.corruptions, rng, args.workers)
        print(json.dumps(damage), flush=True)
        summary = {
            "kills": crashes["kills"],
            "lost_acknowledged_events": crashes["lost_acknowledged"],
            "verify_failures": crashes["verify_failures"],
            "damage_cases": damage["cases"],
            "one_line_error_rate": damage["one_line_error_rate"],
            "seconds": round(time.perf_counter() - started, 1),
        }
        print(json.dumps({"summary": summary}), flush=True)


if __name__ == "__main__":
    main()

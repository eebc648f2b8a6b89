"""Provides a count of compiles per model call in the parallel-reads scenario on the loopback server
(issue "One way down": `Session._prepare` compiled twice with nothing written in between).

Run: `python tests/bench/bench_compiles.py [--parallel 8] [--steps 10] [--chars 15000]`.

One turn on the loopback OpenAI-compatible server (`tests/fakes/openai_server.py`, scenario
`parallel`): each step asks for `--parallel` reads of files of `--chars` characters on a 16,000
token window, for `--steps` steps, through LiteLLM's real HTTP path. Every call of the compiler's
`_compile` is counted (compiles made by compaction's acceptance and planning included), and printed
per model call with the number of compactions and whether the turn finished. Counts, not times:
they do not depend on the machine's load. To compare with another revision, run the same script
with `PYTHONPATH` pointing at that revision's checkout.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections import Counter
from dataclasses import replace
from pathlib import Path

from foya_tui.paths import FoyaPaths
from foya_tui.runtime.context.compiler import ContextCompiler
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.updates import CompactionFinished, TurnFailed, TurnFinished
from foya_tui.settings import ModelSettings
from tests.conftest import FIXED_NOW, fake_settings
from tests.fakes.openai_server import FakeOpenAIServer

WINDOW = 16_000


def run(parallel: int, steps: int, chars: int) -> dict[str, object]:
    calls: Counter[str] = Counter()
    original = ContextCompiler._compile

    def counted(self: ContextCompiler, *args: object, **kwargs: object) -> object:
        calls["compile"] += 1
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    ContextCompiler._compile = counted  # type: ignore[method-assign]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            workdir = root / "project"
            paths = tuple(f"data/part_{index}.txt" for index in range(1, parallel + 1))
            for index, path in enumerate(paths, 1):
                target = workdir / path
                target.parent.mkdir(parents=True, exist_ok=True)
                line = f"part {index}: " + "lorem ipsum dolor sit amet " * 3 + "\n"
                target.write_text((line * (chars // len(line) + 1))[:chars], encoding="utf-8")
            os.environ["FOYA_TEST_KEY"] = "sk-bench"
            with FakeOpenAIServer(WINDOW, parallel_paths=paths, parallel_steps=steps) as server:
                settings = fake_settings(server.base_url, model="openai/parallel")
                settings = replace(
                    settings,
                    tools=replace(settings.tools, max_steps=steps + 5),
                    models={"openai/parallel": ModelSettings(window=WINDOW)},
                )
                data = root / "data"
                paths_ = FoyaPaths(data_dir=data, config_dir=root / "config", database=data / "foya.db")
                with Runtime(settings, paths_, workdir=workdir, clock=lambda: FIXED_NOW) as runtime:
                    session = runtime.new_session()
                    updates = list(session.send(f"read all {parallel} parts, {steps} times"))
                model_calls = sum(1 for r in server.chat_requests if not r.compaction)
                refused = sum(1 for r in server.chat_requests if r.overflow)
                summary_calls = sum(1 for r in server.chat_requests if r.compaction)
    finally:
        ContextCompiler._compile = original  # type: ignore[method-assign]
    last = updates[-1]
    return {
        "model_calls": model_calls,
        "summary_calls": summary_calls,
        "compactions": sum(1 for u in updates if isinstance(u, CompactionFinished)),
        "refused": refused,
        "compiles": calls["compile"],
        "per_call": calls["compile"] / max(1, model_calls),
        "ended": "finished"
        if isinstance(last, TurnFinished)
        else f"failed: {last.kind}"
        if isinstance(last, TurnFailed)
        else type(last).__name__,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--chars", type=int, default=15_000)
    args = parser.parse_args()
    result = run(args.parallel, args.steps, args.chars)
    print(
        f"parallel={args.parallel} steps={args.steps} chars={args.chars}: "
        f"{result['model_calls']} model calls, {result['summary_calls']} summary calls, "
        f"{result['compactions']} compactions, {result['refused']} refused, {result['compiles']} compiles = "
        f"{result['per_call']:.2f} per model call; turn {result['ended']}"
    )


if __name__ == "__main__":
    main()

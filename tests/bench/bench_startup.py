"""Provides a benchmark of `foya`'s start-up: process start to first painted frame, against a
bare Textual app that shows one label, measured side by side.

Run: `python tests/bench/bench_startup.py [--rounds N]`. Each round starts both as fresh
processes (alternating, so machine noise hits both alike) in headless mode; each prints the wall
clock when Textual hands its first frame to the terminal driver (`App._display`), then exits.
Foya starts exactly as `foya` does for a new conversation (settings, the runtime factory, theme,
the conversation screen) on a fresh FOYA_HOME. The target is under 1.5x the bare app, with
LiteLLM not imported on that path (checked and printed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time

BARE_APP = """
from textual.app import App
from textual.widgets import Label

class Bare(App):
    def compose(self):
        yield Label("hello")

    painted = False

    def _display(self, screen, renderable):
        super()._display(screen, renderable)
        if renderable is not None and not self.painted:  # the first frame goes to the terminal
            self.painted = True
            print(time.time())
            self.exit()

import time
Bare().run(headless=True)
"""

FOYA_APP = """
import json, sys, time
from pathlib import Path
import foya_tui.ui.app
from foya_tui.paths import resolve_paths
from foya_tui.settings import load_settings
from foya_tui.ui.app import FoyaApp

class FirstFrame(FoyaApp):
    # Defined in a -c script, so Textual cannot resolve a relative CSS path from this class.
    CSS_PATH = str(Path(foya_tui.ui.app.__file__).parent / FoyaApp.CSS_PATH)

    painted = False

    def _display(self, screen, renderable):
        super()._display(screen, renderable)
        if renderable is not None and not self.painted:  # the first frame goes to the terminal
            self.painted = True
            print(time.time())
            self.exit()

# As run_app does for a new conversation: the runtime is a factory called in a worker.
paths = resolve_paths()
settings = load_settings(paths.config_file)
loaded = {}

def open_runtime():
    loaded.update(litellm="litellm" in sys.modules, tiktoken="tiktoken" in sys.modules)
    from foya_tui.runtime.runtime import Runtime
    return Runtime(settings, paths)

app = FirstFrame(open_runtime, settings=settings)
app.run(headless=True)
if app.opened_runtime is not None:
    app.opened_runtime.close()
loaded.setdefault("litellm", "litellm" in sys.modules)
loaded.setdefault("tiktoken", "tiktoken" in sys.modules)
print(json.dumps(loaded))
"""


def timed(code: str, env: dict[str, str]) -> tuple[float, str]:
    """Seconds from spawning the process to its first painted frame (the child prints the wall
    clock then), so what happens after the frame, such as exiting, is not counted."""
    started = time.time()
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return float(result.stdout.split()[0]) - started, result.stdout


def main() -> None:
    import os

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "FOYA_HOME": home}
        # Like for like: Textual's modules come from byte-code in site-packages, so Foya's must too.
        # With PYTHONDONTWRITEBYTECODE set (some shells and CI images set it) every run would compile
        # Foya's sources again (~25 ms) and the ratio would measure the compiler, not the start-up.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        timed(FOYA_APP, env)  # the first run creates the database and byte-compiles: not timed
        bare, foya = [], []
        modules = ""
        for _ in range(args.rounds):
            bare.append(timed(BARE_APP, env)[0])
            elapsed, output = timed(FOYA_APP, env)
            foya.append(elapsed)
            modules = output.strip().splitlines()[-1]
    bare_s, foya_s = statistics.median(bare), statistics.median(foya)
    loaded = json.loads(modules)
    print(f"start to first frame, median of {args.rounds} alternating rounds (fresh processes, headless)")
    print(f"  bare Textual app (one label) : {bare_s * 1000:8.0f} ms")
    print(f"  foya                         : {foya_s * 1000:8.0f} ms")
    print(f"  foya / bare                  : {foya_s / bare_s:8.2f}x   (target < 1.5)")
    print(f"  litellm imported before first frame: {loaded['litellm']}; tiktoken: {loaded['tiktoken']}")


if __name__ == "__main__":
    main()

"""Provides the README screenshots: `python tests/snapshots/make_screenshot.py` writes
docs/screenshot.* (the conversation) and docs/inspector.* (checkpoints and segments).

It runs the snapshot tests' fixed scene headless, holds a short conversation with the offline
simulator (for the inspector: the snapshot tests' compaction history) and exports the screens.
The PNG needs cairosvg (`pip install cairosvg`, not a project dependency) or `rsvg-convert`
(Debian: librsvg2-bin); without either, only the SVG is written.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from snapshot_scene import (
    SEGMENTED,
    compaction_history,
    fixed_surroundings,
    make_app,
    open_runtime,
    send,
    wait_until,
)

from foya_tui.ui.app import FoyaApp
from foya_tui.ui.screens.inspector import InspectorScreen

DOCS = Path(__file__).resolve().parents[2] / "docs"
MESSAGES = ("hello", "what files are in this project?")
SIZE = (120, 34)  # wide enough for the budget meter's sidebar (it needs 100 columns)
INSPECTOR_SIZE = (120, 48)


async def export_svg() -> str:
    with fixed_surroundings(), tempfile.TemporaryDirectory() as data_dir:
        runtime = open_runtime(Path(data_dir))
        try:
            app = make_app(runtime)
            async with app.run_test(size=SIZE) as pilot:
                for text in MESSAGES:
                    await send(pilot, text)
                return app.export_screenshot(title="Foya")
        finally:
            runtime.close()


async def export_inspector_svg() -> str:
    with fixed_surroundings(), tempfile.TemporaryDirectory() as data_dir:
        runtime = open_runtime(Path(data_dir), settings=SEGMENTED)
        try:
            app = FoyaApp(runtime, session_id=compaction_history(runtime))
            async with app.run_test(size=INSPECTOR_SIZE) as pilot:
                await wait_until(pilot, lambda: app.conversation.ready)
                await pilot.press("f2")
                await wait_until(
                    pilot, lambda: isinstance(app.screen, InspectorScreen) and app.screen.report is not None
                )
                return app.export_screenshot(title="Foya · inspector")
        finally:
            runtime.close()


PNG_FONTS = "DejaVu Sans Mono, Fira Code, monospace"
"""What the PNG is drawn with: Textual's SVG asks for Fira Code from the web, which a renderer
offline does not have, and a fallback without ✓ and ✗ draws them as boxes. DejaVu Sans Mono has
both, and every box-drawing and block character the screens use."""


def to_png(svg: Path, png: Path) -> bool:
    source = svg.with_suffix(".render.svg")
    source.write_text(svg.read_text(encoding="utf-8").replace("Fira Code, monospace", PNG_FONTS), "utf-8")
    try:
        return _render(source, png)
    finally:
        source.unlink()


def _render(svg: Path, png: Path) -> bool:
    # cairosvg first: rsvg-convert drops the leading spaces of text runs ("config.toml(see").
    try:
        import cairosvg  # type: ignore[import-not-found]
    except ImportError:
        cairosvg = None
    if cairosvg is not None:
        cairosvg.svg2png(url=str(svg), write_to=str(png), scale=1.5)
        return True
    if shutil.which("rsvg-convert"):
        subprocess.run(["rsvg-convert", "--zoom", "1.5", str(svg), "-o", str(png)], check=True)
        return True
    return False


def main() -> int:
    DOCS.mkdir(exist_ok=True)
    for name, export in (("screenshot", export_svg), ("inspector", export_inspector_svg)):
        svg = DOCS / f"{name}.svg"
        svg.write_text(asyncio.run(export()), encoding="utf-8")
        print(f"wrote {svg}")
        png = DOCS / f"{name}.png"
        if to_png(svg, png):
            print(f"wrote {png}")
        else:
            print("no rsvg-convert or cairosvg: PNG not written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

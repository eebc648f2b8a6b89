"""Tests the dependency rules of DESIGN §1: the runtime is headless and LiteLLM is imported lazily;
the faces (the UI and the CLI) reach history only through Runtime and Session methods, and the UI
never imports the CLI that starts it."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import foya_tui

FORBIDDEN = ("textual", "rich", "litellm", "foya_tui.ui")
PACKAGE = Path(foya_tui.__file__).parent


def loaded_modules(code: str) -> set[str]:
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return set(json.loads(result.stdout.strip().splitlines()[-1]))


def test_runtime_imports_no_ui_and_no_litellm() -> None:
    modules = loaded_modules(
        "import foya_tui.runtime, foya_tui.runtime.runtime, foya_tui.runtime.session, "
        "foya_tui.runtime.providers.litellm_client, foya_tui.runtime.providers.simulator, foya_tui.cli"
    )
    for name in FORBIDDEN:
        assert not any(m == name or m.startswith(name + ".") for m in modules), name


def test_opening_a_runtime_and_listing_sessions_does_not_import_litellm(tmp_path) -> None:
    modules = loaded_modules(
        "from foya_tui.paths import resolve_paths\n"
        "from foya_tui.runtime.runtime import Runtime\n"
        "from foya_tui.settings import Settings\n"
        f"rt = Runtime(Settings(), resolve_paths(database={str(tmp_path / 'db.sqlite3')!r}))\n"
        "rt.list_sessions(); rt.new_session()"
    )
    assert "litellm" not in modules and "textual" not in modules


def imported(path: Path) -> Iterator[tuple[str, tuple[str, ...]]]:
    """Every module a file imports, lazily inside functions too, with the names taken from it."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module, tuple(alias.name for alias in node.names)


def test_the_faces_never_reach_the_store() -> None:
    faces = [*sorted((PACKAGE / "ui").rglob("*.py")), PACKAGE / "cli.py"]
    for path in faces:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        reached = [
            node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "store"
        ]
        assert not reached, f"{path.name} reaches `.store` at lines {reached}"
        for module, names in imported(path):
            if module == "foya_tui.runtime.store" or module.startswith("foya_tui.runtime.store."):
                # The CLI maps the store's exceptions to exit code 2: their classes, nothing else.
                assert path.name == "cli.py" and all(name.endswith("Error") for name in names), (path, module)


def test_the_ui_never_imports_the_cli_and_the_progress_printer_neither() -> None:
    for path in [*sorted((PACKAGE / "ui").rglob("*.py")), PACKAGE / "progress.py"]:
        for module, names in imported(path):
            assert module != "foya_tui.cli" and not (module == "foya_tui" and "cli" in names), path
    for module, _ in imported(PACKAGE / "progress.py"):
        assert not module.startswith("foya_tui"), module

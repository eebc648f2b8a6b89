"""Runs the static checks as tests: mypy and import-linter (configured in pyproject.toml), and ruff."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, check=False)


def _require_module(name: str) -> None:
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[test]')")


def _assert_clean(result: subprocess.CompletedProcess[str]) -> None:
    if result.returncode != 0:
        command = " ".join(map(str, result.args))
        pytest.fail(f"{command} exited {result.returncode}:\n{result.stdout}{result.stderr}", pytrace=False)


def test_mypy() -> None:
    _require_module("mypy")
    _assert_clean(_run([sys.executable, "-m", "mypy"]))


def test_ruff() -> None:
    _require_module("ruff")
    _assert_clean(_run([sys.executable, "-m", "ruff", "check", "foya_tui", "tests"]))


def test_import_contracts() -> None:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    if not lint_imports.exists():
        pytest.skip(f"import-linter is not installed: no {lint_imports} (pip install -e '.[test]')")
    _assert_clean(_run([str(lint_imports)]))


# The Runtime's collaborators (`Runtime.parts`) are for tests and benches: the faces use its methods.
FACES = ("foya_tui/ui", "foya_tui/cli.py", "foya_tui/cli_json.py", "foya_tui/__main__.py")
COLLABORATORS = {"store", "compaction_store", "checkpoints", "registry", "compiler", "compaction"}


def _reaches_parts(source: str) -> list[int]:
    """Lines where `<something>.parts.<collaborator>` is read (Path.parts has no such attributes)."""
    import ast

    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute)
        and node.attr in COLLABORATORS
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "parts"
    ]


def test_the_faces_never_reach_the_runtimes_collaborators() -> None:
    assert _reaches_parts("runtime.parts.store.events(1)") == [1]  # the check itself finds them
    assert _reaches_parts("path.parts[0]") == []
    found = {}
    for face in FACES:
        root = REPO_ROOT / face
        for path in [root] if root.is_file() else sorted(root.rglob("*.py")):
            lines = _reaches_parts(path.read_text(encoding="utf-8"))
            if lines:
                found[str(path.relative_to(REPO_ROOT))] = lines
    assert found == {}, f"the UI and the CLI use Runtime's methods, never Runtime.parts: {found}"

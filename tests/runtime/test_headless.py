"""Tests the dependency rules of DESIGN §1: the runtime is headless and LiteLLM is imported lazily."""

from __future__ import annotations

import json
import subprocess
import sys

FORBIDDEN = ("textual", "rich", "litellm", "foya_tui.ui")


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

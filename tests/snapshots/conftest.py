"""Provides the snapshot tests' fixtures: the fixed scene and a Runtime on a temporary database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from snapshot_scene import fixed_surroundings, open_runtime

from foya_tui.runtime.runtime import Runtime


@pytest.fixture
def scene_runtime(tmp_path: Path) -> Iterator[Runtime]:
    with fixed_surroundings():
        runtime = open_runtime(tmp_path)
        try:
            yield runtime
        finally:
            runtime.close()

"""Provides the `fake_openai` pytest fixture: a started FakeOpenAIServer, stopped after the test.

Load it with `pytest_plugins = ["tests.fakes.fixtures"]` in the root conftest, or import the
fixture function into a conftest or test module.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .openai_server import FakeOpenAIServer


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAIServer]:
    # Function scope keeps recorded requests per test; starting the server costs a few milliseconds.
    with FakeOpenAIServer() as server:
        yield server

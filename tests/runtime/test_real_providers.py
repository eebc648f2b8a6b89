"""Tests what real providers do to Foya, through the real LiteLLM HTTP path against loopback
servers: the pre-flight before anything is written, the failure classes of real transport
failures, streams that end without a reply, 200 bodies that are errors, and what
OpenAI-compatible servers need (tool_choice, max_tokens, content beside tool calls). Issue 18.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from foya_tui.cli import main
from foya_tui.runtime.model import EventKind
from foya_tui.runtime.providers.client import CancelToken, ProviderRequest, StreamFinished
from foya_tui.runtime.providers.errors import FailureKind, ProviderError
from foya_tui.runtime.providers.litellm_client import LiteLLMClient
from foya_tui.runtime.providers.preflight import RouteError, route_problem
from foya_tui.runtime.providers.routes import make_route, route_for
from foya_tui.runtime.runtime import Runtime
from foya_tui.runtime.updates import (
    CompactionFinished,
    RetryScheduled,
    RuntimeUpdate,
    TurnFailed,
    TurnFinished,
)
from foya_tui.settings import Connection, Settings
from tests.conftest import FIXED_NOW, fake_settings, make_paths
from tests.fakes.openai_server import FakeOpenAIServer

TOOLS = (
    {
        "type": "function",
        "function": {"name": "read_file", "parameters": {"type": "object", "properties": {}}},
    },
)
UNRESOLVABLE = "unresolvable.foya.test"


def local_settings(api_base: str, **overrides: object) -> Settings:
    """A keyless local server (llama.cpp, vLLM, Ollama): its own api_base and no api_key_env."""
    connections = {"default": Connection(), "local": Connection(name="local", api_base=api_base)}
    values: dict[str, object] = {"connection": "local", "connections": connections, "retry_backoff": 0.0}
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


def client_failure(settings: Settings, model: str, **request: object) -> ProviderError:
    route = route_for(settings, model)
    with pytest.raises(ProviderError) as caught:
        list(
            LiteLLMClient(settings).stream(
                ProviderRequest(route, ({"role": "user", "content": "hi"},), **request),  # type: ignore[arg-type]
                CancelToken(),
            )
        )
    return caught.value


def run_turn(runtime: Runtime, text: str = "hello") -> tuple[str, list[RuntimeUpdate]]:
    session = runtime.new_session()
    return session.id, list(session.send(text))


def open_runtime(tmp_path: Path, workdir: Path, settings: Settings) -> Runtime:
    return Runtime(settings, make_paths(tmp_path), workdir=workdir, clock=lambda: FIXED_NOW)


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A server that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.05)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(timeout=5)
    for conn in accepted:
        conn.close()
    server.close()


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed again)."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


@pytest.fixture
def unresolvable(monkeypatch: pytest.MonkeyPatch) -> str:
    """A host name whose lookup fails as the resolver fails it (gaierror), without asking any DNS
    server: tests send traffic to loopback only."""
    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):  # type: ignore[no-untyped-def]
        if host == UNRESOLVABLE:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return UNRESOLVABLE


# -- 1. pre-flight ----------------------------------------------------------------------------


def test_an_unknown_model_fails_in_one_line_and_writes_no_session(capsys, isolated_home: Path) -> None:
    code = main(["run", "hi", "--model", "gpt5"])
    _, err = capsys.readouterr()
    assert code == 2
    assert err.count("\n") == 1 and "unknown model 'gpt5'" in err and "provider/model" in err
    assert main(["sessions"]) == 0
    assert "no sessions yet" in capsys.readouterr().out


def test_a_missing_provider_key_fails_before_the_session(capsys, monkeypatch, isolated_home: Path) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code = main(["run", "hi", "--model", "openai/gpt-4.1"])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "set OPENAI_API_KEY" in err
    main(["sessions"])
    assert "no sessions yet" in capsys.readouterr().out


def test_a_named_key_variable_that_is_unset_is_refused(capsys, monkeypatch, isolated_home: Path) -> None:
    isolated_home.mkdir(parents=True, exist_ok=True)
    (isolated_home / "config.toml").write_text(
        'model = "openai/ok"\nconnection = "x"\n'
        '[connections.x]\napi_base = "http://127.0.0.1:9/v1"\napi_key_env = "FOYA_UNSET_KEY"\n'
    )
    monkeypatch.delenv("FOYA_UNSET_KEY", raising=False)
    code = main(["run", "hi"])
    _, err = capsys.readouterr()
    assert code == 2 and "FOYA_UNSET_KEY" in err and "is not set" in err and err.count("\n") == 1


def test_a_local_server_needs_no_key_and_gets_a_placeholder(
    fake_openai: FakeOpenAIServer, tmp_path: Path, workdir: Path, monkeypatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings = local_settings(fake_openai.base_url, model="openai/ok")
    assert route_problem(settings, route_for(settings)) is None
    with open_runtime(tmp_path, workdir, settings) as rt:
        _, updates = run_turn(rt)
    assert isinstance(updates[-1], TurnFinished)
    assert fake_openai.chat_requests[0].headers["authorization"] == "Bearer not-needed"


def test_the_route_list_says_which_route_cannot_be_sent(tmp_path: Path, workdir: Path, monkeypatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    settings = Settings(models={"anthropic/claude-x": Settings().model_settings("x")})
    with open_runtime(tmp_path, workdir, settings) as rt:
        problems = {option.route.model: option.problem for option in rt.routes()}
        assert problems["foya-sim/small"] is None
        assert "set ANTHROPIC_API_KEY" in (problems["anthropic/claude-x"] or "")
        with pytest.raises(RouteError):
            rt.new_session(rt.route_for("anthropic/claude-x"))
        assert rt.list_sessions() == []


def test_a_resumed_session_writes_nothing_for_a_route_that_cannot_be_sent(
    tmp_path: Path, workdir: Path, monkeypatch
) -> None:
    with open_runtime(tmp_path, workdir, Settings(retry_backoff=0.0)) as rt:
        session_id, _ = run_turn(rt)
        before = rt.parts.store.last_seq(session_id)
        session = rt.open_session(session_id, make_route("gpt5", "default"))
        with pytest.raises(RouteError):
            list(session.send("again"))
        assert rt.parts.store.last_seq(session_id) == before


# -- 2. failure classes from real transport failures ------------------------------------------


def test_a_closed_port_is_a_connection_failure_and_is_retried(
    closed_port: int, tmp_path: Path, workdir: Path
) -> None:
    base = f"http://127.0.0.1:{closed_port}/v1"
    failure = client_failure(local_settings(base), "openai/m").failure
    assert failure.kind is FailureKind.CONNECTION and failure.retryable
    assert "connection refused" in failure.message and f"openai/m at {base}" in failure.message
    assert "api_base" in failure.message and "\n" not in failure.message
    with open_runtime(tmp_path, workdir, local_settings(base, model="openai/m", max_retries=2)) as rt:
        session_id, updates = run_turn(rt)
        assert [type(u) for u in updates].count(RetryScheduled) == 2
        assert isinstance(updates[-1], TurnFailed) and updates[-1].kind == "connection"
        # The user message stays, then the turn outcome (never sent to the model); no reply and
        # no accepted boundary were recorded.
        kinds = [e.kind for e in rt.parts.store.events(session_id)]
        assert kinds == [EventKind.USER_MESSAGE, EventKind.TURN_OUTCOME]


def test_an_unresolvable_host_is_a_connection_failure(unresolvable: str) -> None:
    failure = client_failure(local_settings(f"http://{unresolvable}:8080/v1"), "openai/m").failure
    assert failure.kind is FailureKind.CONNECTION and "host name does not resolve" in failure.message


def test_a_server_that_never_answers_times_out_as_a_connection_failure(silent_port: int) -> None:
    settings = local_settings(f"http://127.0.0.1:{silent_port}/v1", request_timeout=0.5)
    failure = client_failure(settings, "openai/m").failure
    assert (
        failure.kind is FailureKind.CONNECTION and "no answer before the request timeout" in failure.message
    )


@pytest.mark.parametrize("scenario", ["auth", "forbidden"])
def test_rejected_credentials_are_auth_and_never_retried(
    scenario: str, fake_openai: FakeOpenAIServer, tmp_path: Path, workdir: Path
) -> None:
    settings = fake_settings(fake_openai.base_url, model=f"openai/{scenario}", max_retries=2)
    with open_runtime(tmp_path, workdir, settings) as rt:
        _, updates = run_turn(rt)
    assert not any(isinstance(u, RetryScheduled) for u in updates)
    failed = updates[-1]
    assert isinstance(failed, TurnFailed) and failed.kind == "auth"
    assert "api_key_env" in failed.reason and f"openai/{scenario}" in failed.reason
    assert len(fake_openai.chat_requests) == 1


def test_missing_credentials_inside_litellm_are_auth(monkeypatch) -> None:
    """The OpenAI SDK refuses to send without a key (no request is made): LiteLLM reports that as
    a status-500 InternalServerError, which is an auth problem, not a server error."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    failure = client_failure(Settings(), "openai/gpt-4.1").failure
    assert failure.kind is FailureKind.AUTH and not failure.retryable


# -- 6. streams that end without a reply, 200 bodies that are errors --------------------------


def test_an_empty_stream_is_re_asked_and_its_overflow_recovered_once(
    fake_openai: FakeOpenAIServer, tmp_path: Path, workdir: Path
) -> None:
    settings = fake_settings(fake_openai.base_url, model="openai/empty-stream")
    with open_runtime(tmp_path, workdir, settings) as rt:
        session_id, updates = run_turn(rt)
        failed = updates[-1]
        assert isinstance(failed, TurnFailed) and failed.kind == "input_overflow"
        # SPEC C-2: the provider trigger ran, once in the turn.
        compactions = [u for u in updates if isinstance(u, CompactionFinished)]
        assert len(compactions) == 1 and compactions[0].result.trigger == "provider"
        kinds = [e.kind for e in rt.parts.store.events(session_id)]
        assert EventKind.ASSISTANT_MESSAGE not in kinds and EventKind.PROVIDER_USAGE not in kinds
        assert rt.parts.compaction_store.boundaries(session_id) == []  # SPEC C-13: nothing was accepted
    streamed = [r for r in fake_openai.chat_requests if r.body.get("stream")]
    probes = [r for r in fake_openai.chat_requests if not r.body.get("stream") and not r.compaction]
    assert streamed and probes and all(r.body["max_tokens"] == 1 for r in probes)


def test_a_truly_empty_reply_is_named_and_not_stored(
    fake_openai: FakeOpenAIServer, tmp_path: Path, workdir: Path
) -> None:
    settings = fake_settings(fake_openai.base_url, model="openai/empty")
    with open_runtime(tmp_path, workdir, settings) as rt:
        session_id, updates = run_turn(rt)
        failed = updates[-1]
        assert isinstance(failed, TurnFailed) and failed.kind == "empty_reply"
        assert "the provider ended the reply without any text" in failed.reason
        kinds = [e.kind for e in rt.parts.store.events(session_id)]
        assert kinds == [EventKind.USER_MESSAGE, EventKind.TURN_OUTCOME]


@pytest.mark.parametrize(
    ("scenario", "stream", "kind"),
    [
        ("error-body", True, FailureKind.OTHER),
        ("error-body", False, FailureKind.OTHER),
        ("error-body-overflow", True, FailureKind.INPUT_OVERFLOW),
        ("error-body-overflow", False, FailureKind.INPUT_OVERFLOW),
    ],
)
def test_a_200_whose_body_is_an_error_is_a_classified_failure(
    scenario: str, stream: bool, kind: FailureKind, fake_openai: FakeOpenAIServer
) -> None:
    settings = fake_settings(fake_openai.base_url)
    client = LiteLLMClient(settings)
    request = ProviderRequest(
        make_route(f"openai/{scenario}", "fake", fake_openai.base_url), ({"role": "user", "content": "hi"},)
    )
    with pytest.raises(ProviderError) as caught:
        if stream:
            list(client.stream(request, CancelToken()))
        else:
            client.complete(request, CancelToken())
    assert caught.value.failure.kind is kind
    assert "'content'" in caught.value.failure.message or kind is FailureKind.INPUT_OVERFLOW


# -- 4, 7. what OpenAI-compatible servers need ------------------------------------------------


def test_tools_go_with_tool_choice_auto(fake_openai: FakeOpenAIServer) -> None:
    settings = fake_settings(fake_openai.base_url)
    route = make_route("openai/tools", "fake", fake_openai.base_url)
    list(
        LiteLLMClient(settings).stream(
            ProviderRequest(route, ({"role": "user", "content": "x"},), TOOLS), CancelToken()
        )
    )
    list(
        LiteLLMClient(settings).stream(
            ProviderRequest(route, ({"role": "user", "content": "x"},)), CancelToken()
        )
    )
    with_tools, without = fake_openai.chat_requests
    assert with_tools.body["tool_choice"] == "auto" and "tool_choice" not in without.body


def test_a_call_sent_as_tool_calls_and_function_call_is_one_call(fake_openai: FakeOpenAIServer) -> None:
    settings = fake_settings(fake_openai.base_url)
    route = make_route("openai/tools-legacy", "fake", fake_openai.base_url)
    events = list(
        LiteLLMClient(settings).stream(
            ProviderRequest(route, ({"role": "user", "content": "x"},), TOOLS), CancelToken()
        )
    )
    finished = events[-1]
    assert isinstance(finished, StreamFinished)
    assert [(c.id, c.name) for c in finished.tool_calls] == [("call_1", "read_file")]


def test_turns_send_max_tokens_from_the_output_reserve(
    fake_openai: FakeOpenAIServer, tmp_path: Path, workdir: Path
) -> None:
    settings = fake_settings(fake_openai.base_url, model="openai/ok")
    with open_runtime(tmp_path, workdir, settings) as rt:
        session = rt.new_session()
        reserve = session.context().budget.output_reserve
        list(session.send("hello"))
    assert fake_openai.chat_requests[0].body["max_tokens"] == reserve


def test_configured_max_output_caps_max_tokens(
    fake_openai: FakeOpenAIServer, tmp_path: Path, workdir: Path
) -> None:
    from foya_tui.settings import ModelSettings

    settings = fake_settings(
        fake_openai.base_url,
        model="openai/ok",
        models={"openai/ok": ModelSettings(window=8192, max_output=300)},
    )
    with open_runtime(tmp_path, workdir, settings) as rt:
        run_turn(rt)
    assert fake_openai.chat_requests[0].body["max_tokens"] == 300


def test_a_session_with_tool_call_history_continues_on_a_strict_server(
    fake_openai: FakeOpenAIServer, tmp_path: Path, workdir: Path
) -> None:
    """llama-cpp-python answers `content: null` beside tool calls with HTTP 500; a connection
    with its own api_base sends "" instead (the default), so the turn goes on after the tool."""
    settings = fake_settings(fake_openai.base_url, model="openai/tools-content", approval_mode="auto")
    with open_runtime(tmp_path, workdir, settings) as rt:
        _, updates = run_turn(rt, "read the readme")
    assert isinstance(updates[-1], TurnFinished), updates[-1]
    second = fake_openai.chat_requests[1].body["messages"]
    (assistant,) = [m for m in second if m["role"] == "assistant"]
    assert assistant["content"] == "" and assistant["tool_calls"]


def test_the_compatibility_setting_can_be_turned_off(
    fake_openai: FakeOpenAIServer, tmp_path: Path, workdir: Path
) -> None:
    connections = {
        "default": Connection(),
        "fake": Connection(
            name="fake",
            api_base=fake_openai.base_url,
            api_key_env="FOYA_TEST_KEY",
            empty_tool_call_content=False,
        ),
    }
    settings = fake_settings(
        fake_openai.base_url, model="openai/tools-content", approval_mode="auto", connections=connections
    )
    with open_runtime(tmp_path, workdir, settings) as rt:
        _, updates = run_turn(rt, "read the readme")
    failed = updates[-1]
    assert isinstance(failed, TurnFailed) and failed.kind == "other" and "'content'" in failed.reason


def test_a_summary_request_timeout_scales_with_its_planned_size() -> None:
    from foya_tui.runtime.providers.litellm_client import TIMEOUT_BASIS_TOKENS, whole_reply_timeout

    route = make_route("openai/m", "x", "http://127.0.0.1:9/v1")
    small = ProviderRequest(route, ({"role": "user", "content": "hi"},), max_output_tokens=100)
    large = ProviderRequest(
        route, ({"role": "user", "content": "word " * 4 * TIMEOUT_BASIS_TOKENS},), max_output_tokens=2_048
    )
    assert whole_reply_timeout(120.0, small) == 120.0
    assert whole_reply_timeout(120.0, large) >= 2.5 * 120.0


def test_a_non_streamed_request_times_out_as_a_connection_failure(silent_port: int) -> None:
    settings = local_settings(f"http://127.0.0.1:{silent_port}/v1", request_timeout=0.5)
    route = route_for(settings, "openai/m")
    with pytest.raises(ProviderError) as caught:
        LiteLLMClient(settings).complete(
            ProviderRequest(route, ({"role": "user", "content": "hi"},)), CancelToken()
        )
    assert caught.value.failure.kind is FailureKind.CONNECTION

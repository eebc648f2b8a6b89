"""Provides the classification of provider failures (SPEC C-2) and secret redaction.

Only input overflow may trigger compaction; rate limits, quota errors and output limits never
do. Classification works on what any exception carries (class names, status code, body), so
this module does not import LiteLLM.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from foya_tui.errors import FoyaError


class FailureKind(StrEnum):
    INPUT_OVERFLOW = "input_overflow"
    RATE_LIMIT = "rate_limit"
    QUOTA = "quota"
    OUTPUT_LIMIT = "output_limit"
    AUTH = "auth"
    CONNECTION = "connection"
    EMPTY_REPLY = "empty_reply"
    OTHER = "other"


RETRYABLE = frozenset({FailureKind.RATE_LIMIT, FailureKind.CONNECTION})

_SUMMARY = {
    FailureKind.INPUT_OVERFLOW: "the request is larger than the model's context window",
    FailureKind.RATE_LIMIT: "the provider is rate limiting requests",
    FailureKind.QUOTA: "the provider account has no quota or credit left",
    FailureKind.OUTPUT_LIMIT: "the reply was cut off at the output token limit",
    FailureKind.AUTH: "the provider rejected the credentials",
    FailureKind.CONNECTION: "the provider could not be reached or timed out",
    FailureKind.EMPTY_REPLY: "the provider ended the reply without any text",
    FailureKind.OTHER: "the provider request failed",
}

# What the user can do about each kind, said once after the detail (overflow is handled by
# compaction, an output limit by a shorter request: nothing to add there).
_ADVICE = {
    FailureKind.RATE_LIMIT: "wait a moment and send again",
    FailureKind.QUOTA: "add credit to the provider account or switch to another route",
    FailureKind.AUTH: "check the key in the connection's api_key_env variable (or the provider's own)",
    FailureKind.CONNECTION: "check that the server runs and that the connection's api_base is right",
    FailureKind.EMPTY_REPLY: "send the message again, or switch to another route",
}


@dataclass(frozen=True)
class ProviderFailure:
    kind: FailureKind
    detail: str
    """The provider's own words, redacted and on one line."""
    status_code: int | None = None
    retry_after: float | None = None
    route: str = ""
    """Which route failed (`model at endpoint`), named first in the message; empty when unknown."""

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE

    @property
    def message(self) -> str:
        """One clear line for the user: the route, what happened, the provider's detail, what to do."""
        summary = _SUMMARY[self.kind]
        line = f"{summary}: {self.detail}" if self.detail else summary
        if self.route:
            line = f"{self.route}: {line}"
        advice = _ADVICE.get(self.kind)
        return f"{line}; {advice}" if advice else line


class ProviderError(FoyaError):
    """Raised by provider clients; carries the classified failure."""

    def __init__(self, failure: ProviderFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


# Body codes and types that mean "input too long", whatever the message says.
_OVERFLOW_CODES = frozenset(
    {"context_length_exceeded", "exceed_context_size_error", "string_above_max_length"}
)
_OVERFLOW_PATTERNS = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|context window|exceeds? the (?:available )?context"
    r"|context size|prompt is too long|input is too long|too many (?:input )?tokens|reduce the length of the"
    r"|input length .* exceeds|exceeds the maximum (?:number of )?tokens",
    re.IGNORECASE,
)
_QUOTA_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached", "quota_exceeded"})
_QUOTA_PATTERNS = re.compile(
    r"insufficient[_ ]quota|exceeded your current quota|billing|credit balance|out of credits|quota exceeded",
    re.IGNORECASE,
)
# Outer classes that mean "not reached / no answer" (LiteLLM's and the OpenAI SDK's names).
_CONNECTION_CLASSES = frozenset(
    {
        "APIConnectionError",
        "Timeout",
        "APITimeoutError",
        "ConnectError",
        "ConnectTimeout",
        "ReadTimeout",
        "TimeoutError",
        "ConnectionError",
        "RemoteProtocolError",
        "ServiceUnavailableError",
    }
)
# Transport-level causes anywhere in the chain (httpx, the socket and ssl modules).
_TRANSPORT_CLASSES = frozenset(
    {
        "ConnectError",
        "ConnectTimeout",
        "ReadTimeout",
        "WriteTimeout",
        "PoolTimeout",
        "ReadError",
        "WriteError",
        "RemoteProtocolError",
        "gaierror",
        "SSLError",
        "SSLCertVerificationError",
    }
)
_AUTH_CLASSES = frozenset({"AuthenticationError", "PermissionDeniedError"})
# The OpenAI SDK refuses to send without a key and LiteLLM wraps that as a status-500 error.
_AUTH_PATTERNS = re.compile(
    r"missing credentials|no api[_ ]key|api[_ ]key (?:is )?(?:missing|required|not (?:set|provided))"
    r"|incorrect api key|invalid[_ ]api[_ ]key|invalid x-api-key|unauthori[sz]ed",
    re.IGNORECASE,
)
# The root cause of a connection failure, said in plain words instead of "Connection error.".
# Checked in this order against the class names of the whole exception chain.
_CONNECTION_CAUSES: tuple[tuple[frozenset[str], str], ...] = (
    (frozenset({"ConnectionRefusedError"}), "connection refused"),
    (frozenset({"gaierror"}), "the host name does not resolve"),
    (frozenset({"SSLError", "SSLCertVerificationError"}), "the TLS handshake failed"),
    (
        frozenset({"Timeout", "APITimeoutError", "ReadTimeout", "ConnectTimeout", "TimeoutError"}),
        "no answer before the request timeout",
    ),
)


def _class_names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _exception_chain(exc: BaseException) -> list[BaseException]:
    """The exception and what it wraps (LiteLLM wraps, and keeps the original in several places)."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < 8:
        chain.append(current)
        wrapped = getattr(current, "original_exception", None)
        current = (
            wrapped if isinstance(wrapped, BaseException) else (current.__cause__ or current.__context__)
        )
    return chain


def _as_mapping(candidate: Any) -> Mapping[str, Any] | None:
    if isinstance(candidate, Mapping):
        return candidate
    if isinstance(candidate, (str, bytes)) and candidate:
        try:
            parsed = json.loads(candidate)
        except ValueError:
            return None
        return parsed if isinstance(parsed, Mapping) else None
    return None


def _body_of(exc: BaseException) -> Mapping[str, Any]:
    """The provider's JSON error body, from wherever LiteLLM or the SDK kept it.

    LiteLLM 1.110 fills `.body` only sometimes; the HTTP response (`.response.text`) and the
    wrapped SDK error (`__context__.body`) are more reliable.
    """
    for link in _exception_chain(exc):
        for candidate in (
            getattr(link, "body", None),
            getattr(getattr(link, "response", None), "text", None),
        ):
            try:
                found = _as_mapping(candidate)
            except Exception:  # a response whose body was never read raises on .text
                found = None
            if found:
                return found
    # Last resort: LiteLLM often folds the body into its message text.
    text = str(getattr(exc, "message", "") or exc)
    start = text.find("{")
    if start >= 0:
        try:
            parsed, _ = json.JSONDecoder().raw_decode(text[start:])
        except ValueError:
            return {}
        if isinstance(parsed, Mapping):
            return parsed
    return {}


def _codes(body: Mapping[str, Any]) -> set[str]:
    inner = body.get("error", body)
    if not isinstance(inner, Mapping):
        return set()
    return {str(inner.get(key)).lower() for key in ("code", "type", "status") if inner.get(key) is not None}


def _retry_after(exc: BaseException) -> float | None:
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    try:
        value = float(headers.get("retry-after"))
    except (TypeError, ValueError):
        return None
    return value if value >= 0 else None


def _chain_text(chain: list[BaseException]) -> str:
    """The outer message plus what inner links add: LiteLLM's text for a 200 whose body is an
    error object ends in "OpenAIException - ", the server's words sit on an inner exception."""
    parts: list[str] = []
    for link in chain:
        said = str(getattr(link, "message", "") or link).strip()
        if said and not any(said in part for part in parts):
            parts.append(said)
    return " ".join(parts)


def _connection_cause(chain_names: set[str]) -> str | None:
    for names, cause in _CONNECTION_CAUSES:
        if chain_names & names:
            return cause
    return None


def classify_exception(exc: BaseException, secrets: Iterable[str] = ()) -> ProviderFailure:
    """Classify any exception raised while talking to a provider.

    LiteLLM reports a refused connection, an unresolvable host and a missing key all as an
    `InternalServerError` (status 500); the cause is further down the chain, so the class names
    of every link count, not only the outermost one."""
    names = _class_names(exc)
    chain = _exception_chain(exc)
    chain_names = set().union(*(_class_names(link) for link in chain))
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    body = _body_of(exc)
    codes = _codes(body)
    text = _chain_text(chain)
    outer = str(getattr(exc, "message", "") or exc).strip()
    if outer.endswith("-"):  # LiteLLM lost the server's words; an inner link kept them
        said = (str(getattr(link, "message", "") or link).strip() for link in reversed(chain))
        inner = next((words for words in said if words), "")
        outer = f"{outer} {inner}"
    detail = one_line(redact(outer, secrets))

    def failure(kind: FailureKind) -> ProviderFailure:
        return ProviderFailure(kind=kind, detail=detail, status_code=status, retry_after=_retry_after(exc))

    if "ContextWindowExceededError" in names or codes & _OVERFLOW_CODES:
        return failure(FailureKind.INPUT_OVERFLOW)
    if codes & _QUOTA_CODES or (status == 429 and _QUOTA_PATTERNS.search(text)):
        return failure(FailureKind.QUOTA)
    if status == 429 or "RateLimitError" in names:
        return failure(FailureKind.RATE_LIMIT)
    if status in (400, 413) and _OVERFLOW_PATTERNS.search(text):
        return failure(FailureKind.INPUT_OVERFLOW)
    if status in (401, 403) or names & _AUTH_CLASSES or _AUTH_PATTERNS.search(text):
        return failure(FailureKind.AUTH)
    if any(isinstance(link, json.JSONDecodeError) for link in chain):
        # A 200 whose body is not JSON: retrying will not make the provider speak JSON.
        return ProviderFailure(
            kind=FailureKind.OTHER,
            detail="the provider's reply was not valid JSON",
            status_code=status,
        )
    # An error event inside a 200 stream arrives as the SDK's plain APIError wrapped in LiteLLM's
    # APIConnectionError: the server answered, so it is not a connection failure.
    server_answered = any(type(link).__name__ == "APIError" for link in chain)
    transport = chain_names & _TRANSPORT_CLASSES or any(
        isinstance(link, (TimeoutError, ConnectionError)) for link in chain
    )
    if transport or (names & _CONNECTION_CLASSES and not server_answered):
        cause = _connection_cause(chain_names)
        found = failure(FailureKind.CONNECTION)
        return replace(found, detail=f"{cause} ({detail})") if cause else found
    return failure(FailureKind.OTHER)


def output_limit_failure() -> ProviderFailure:
    """`finish_reason == "length"`: the reply is kept, but the user must know it was cut."""
    return ProviderFailure(kind=FailureKind.OUTPUT_LIMIT, detail="")


_SECRET_PATTERNS = re.compile(
    r"(sk-[A-Za-z0-9_\-]{6,}|(?i:bearer)\s+[A-Za-z0-9._\-]{8,}|(?i:(?:api[_-]?key|token|key)=)[^\s&\"']+)"
)


SECRET_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_KEY")
"""Environment variables whose values are secrets: LiteLLM's standard ones (`OPENAI_API_KEY`,
`ANTHROPIC_API_KEY`, `HF_TOKEN`, `AWS_SECRET_ACCESS_KEY`'s kin …) and any other of these shapes."""
SECRET_MIN_CHARS = 8
"""Shorter values ("1", "true") are not keys, and masking them would garble ordinary words."""


def environment_secrets(env: Mapping[str, str] | None = None) -> list[str]:
    """The values of every secret-named variable of the environment, non-trivial ones only."""
    env = os.environ if env is None else env
    return [
        value
        for name, value in env.items()
        if name.upper().endswith(SECRET_SUFFIXES) and len(value.strip()) >= SECRET_MIN_CHARS
    ]


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """Mask API keys: the configured secrets (the `api_key_env` key) and the value of every
    secret-named environment variable, by value, then anything shaped like a key.

    The one redaction for anything a provider says: LiteLLM reads keys from the standard variables
    when no `api_key_env` is set, and a provider may echo a key in its error body, which would
    otherwise reach an immutable diagnostic event, `export`, `inspect --json` and stderr.
    """
    known = {secret for secret in secrets if secret and len(secret) >= 4}
    known.update(environment_secrets())
    for secret in sorted(known, key=len, reverse=True):  # a longer key is masked whole first
        text = text.replace(secret, "***")
    return _SECRET_PATTERNS.sub("***", text)


_LIBRARY_PREFIXES = re.compile(r"\blitellm\.\w+:\s*")


def one_line(text: str, limit: int = 300) -> str:
    """Collapse whitespace, drop LiteLLM's class-name prefixes and cap length: errors are one line."""
    flat = " ".join(_LIBRARY_PREFIXES.sub("", text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
